"""An in-process core.llm.Model for unit tests and benchmarks (no HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from core.llm import Completion, LLMError, ToolCall

Responder = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], Awaitable[Completion]]


def text(value: str) -> Completion:
    return Completion(text=value, tool_calls=[], finish_reason="stop", model="fake")


def calls(*tool_calls: ToolCall) -> Completion:
    return Completion(
        text="", tool_calls=list(tool_calls), finish_reason="tool_calls", model="fake"
    )


class ScriptedModel:
    """Answers `echo: <last user text>` unless a step was queued.

    A step is a Completion, an LLMError to raise, or an async callable
    (messages, tools) -> Completion for behaviour that depends on the prompt.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.steps: list[Completion | LLMError | Responder] = []
        self.requests: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]] = []
        self.delay = delay

    async def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        self.requests.append((role, [dict(m) for m in messages], tools))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.steps:
            step = self.steps.pop(0)
            if isinstance(step, LLMError):
                raise step
            if isinstance(step, Completion):
                return step
            return await step(messages, tools)
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        return text(f"echo: {last_user}")
