"""The agent's tool registry: what the chat model may call, and how.

Tools receive a ToolContext built from the stored session, never from model
output, so a tool can only act on the chat it was called from. Every failure
becomes an error string for the model; a tool never crashes a turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from core.errors import KeptError
from core.logs import event
from core.messages import Action, ChatKind, Target, ZoneChoice

log = logging.getLogger("kept.tools")


@dataclass(frozen=True, slots=True)
class ToolContext:
    agent_id: str
    session_key: str
    target: Target
    chat_kind: ChatKind
    sender_id: str | None
    now: datetime
    # Buttons a tool offers the user under this turn's reply (the
    # set_timezone tool's Yes / No): a tool never acts on the user's behalf
    # where the user must confirm.
    offers: list[Action | ZoneChoice] = field(default_factory=list)
    # Whether the sender administers this (shared) chat, asked of the
    # platform only when a tool needs it; never taken from model output.
    is_admin: Callable[[], Awaitable[bool]] = field(default=lambda: _not_admin())


async def _not_admin() -> bool:
    """Without a platform to ask, nobody is a chat admin (refuse when unsure)."""
    return False


class ChatAdmins(Protocol):
    """Asks the platform whether a user administers a shared chat (Telegram
    administrators and creators, Discord Manage Messages): what widens a
    group member's view of follow-ups and reminders, in tools as in
    commands. Unsure (no adapter, a failed call) is False."""

    async def is_admin(self, target: Target, user_id: str) -> bool: ...


ToolResult = str | dict[str, Any] | list[Any]
ToolHandler = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]]


class ToolError(KeptError):
    """An expected failure whose message is shown to the model as is."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: list[dict[str, Any]] | None = None

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self._specs = None

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        """The tools as sent with a call: one list until a tool is added
        (read-only: every turn sends the same one)."""
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs

    async def call(self, name: str, arguments: str, ctx: ToolContext) -> str:
        """Run a tool and return its result as the text the model will read."""
        tool = self._tools.get(name)
        if tool is None:
            return _error(f"unknown tool {name!r}; available: {', '.join(self._tools) or 'none'}")
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return _error(f"arguments are not valid JSON: {exc.msg}")
        if not isinstance(args, dict):
            return _error("arguments must be a JSON object")
        try:
            result = await tool.handler(ctx, args)
        except ToolError as exc:
            return _error(str(exc))
        except Exception as exc:  # a tool bug must not end the user's turn
            event(
                log,
                logging.ERROR,
                "tool_failed",
                tool=name,
                agent=ctx.agent_id,
                session=ctx.session_key,
                error=repr(exc),
                action="report this as a bug in the tool",
            )
            return _error("the tool failed unexpectedly")
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
