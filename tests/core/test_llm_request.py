"""The request LLMClient sends: the SDK's own bytes, without a per-message cost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai._utils import _transform

from core.config.model import LlmConfig
from core.llm import PLACEHOLDER_API_KEY, LLMClient
from tests.fakes.openai_server import FakeOpenAI

CLOCK_TOOL = {
    "type": "function",
    "function": {
        "name": "clock",
        "description": "What time is it?",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}


def history(rows: int) -> list[dict[str, Any]]:
    """A prompt shaped like ConversationManager's, mid tool round."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are kept. «ça va»"}]
    for i in range(rows):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"row {i}: 明天 at the café 🙂"})
    call = {"id": "t1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": "t1", "content": "09:00"})
    return messages


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    llm = LLMClient(LlmConfig(base_url=fake.base_url), environ={})
    yield llm
    await llm.aclose()


async def test_the_body_is_byte_for_byte_what_the_sdk_would_send(
    fake: FakeOpenAI, client: LLMClient
) -> None:
    messages = history(6)
    await client.complete("chat", messages, tools=[CLOCK_TOOL], temperature=0.3)
    sdk = openai.AsyncOpenAI(api_key="k", base_url=fake.base_url, max_retries=0)
    try:
        await sdk.chat.completions.create(
            model="gpt-4.1-mini",
            messages=messages,  # type: ignore[arg-type]
            tools=[CLOCK_TOOL],  # type: ignore[list-item]
            temperature=0.3,
            max_tokens=1024,  # llm.maxOutputTokens.chat's default
        )
    finally:
        await sdk.close()
    ours, theirs = fake.completions
    assert ours.json == theirs.json
    assert ours.body_text == theirs.body_text
    assert (ours.bearer, theirs.bearer) == (PLACEHOLDER_API_KEY, "k")


async def test_without_tools_no_tools_key_is_sent(fake: FakeOpenAI, client: LLMClient) -> None:
    await client.complete("chat", history(2), tools=None)
    await client.complete("chat", history(2), tools=[])
    assert all("tools" not in request.json for request in fake.completions)
    assert fake.completions[0].messages == history(2)


async def test_building_a_request_does_not_visit_each_history_message(
    fake: FakeOpenAI, client: LLMClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's TypedDict walk cost a fixed amount per message and dominated a
    # long chat's turn; how often it runs must not depend on the history.
    visits = 0
    walk = _transform._async_transform_recursive

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal visits
        visits += 1
        return await walk(*args, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", counting)
    counts = []
    for rows in (10, 200):
        visits = 0
        await client.complete("chat", history(rows), tools=[CLOCK_TOOL])
        counts.append(visits)
    assert counts[0] == counts[1]
    assert len(fake.completions[-1].messages) == 203
