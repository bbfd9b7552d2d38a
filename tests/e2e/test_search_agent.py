"""The agent's search path end to end: the real openai SDK against the fake
server, which calls `sessions_search`; the tool result it receives holds only
what the calling chat may see."""

from __future__ import annotations

import json
from typing import Any

from core.config.model import KeptConfig, LlmConfig
from core.conversation.manager import ConversationManager
from core.llm import LLMClient
from core.messages import Inbound, Target
from core.search.service import SessionSearch
from core.search.tools import register_search_tools
from core.tools import ToolRegistry
from tests.fakes.openai_server import FakeOpenAI, reply, tool_call, tool_results


def inbound(clock, chat: str, body: str, agent: str = "main") -> Inbound:
    return Inbound(
        agent_id=agent,
        target=Target("telegram", chat),
        chat_kind="private",
        sender_id=f"u{chat}",
        text=body,
        ts=clock.now(),
    )


def search_then_answer(query: str, **extra: Any):
    def respond(body: dict[str, Any]):
        results = tool_results(body)
        if not results:
            return tool_call("sessions_search", {"query": query, **extra})
        return reply("tool said: " + results[-1]["content"])

    return respond


async def build(store, sender, clock, fake: FakeOpenAI, visibility: str):
    config = KeptConfig.model_validate(
        {
            "llm": {"baseUrl": fake.base_url, "maxRetries": 0},
            "agents": [{"id": "main"}, {"id": "other"}],
            "sessions": {"search": {"visibility": visibility}},
        }
    )
    llm = LLMClient(LlmConfig.model_validate(config.llm.model_dump()), environ={})
    tools = ToolRegistry()
    register_search_tools(tools, SessionSearch(store, lambda: config))
    manager = ConversationManager(
        store=store, llm=llm, sender=sender, config=lambda: config, clock=clock, tools=tools
    )
    return manager, llm


async def test_tool_result_holds_only_the_calling_chat(sqlite_store, clock, sender):
    async with FakeOpenAI() as fake:
        manager, llm = await build(sqlite_store, sender, clock, fake, "self")
        try:
            await manager.handle(inbound(clock, "A", "the budget for the trip is 500 euros"))
            await manager.handle(inbound(clock, "B", "my secret budget is 9000 dollars"))
            await manager.handle(inbound(clock, "C", "budget talk", agent="other"))
            fake.set_default(search_then_answer("budget"))
            await manager.handle(inbound(clock, "A", "what did I say about money?"))
        finally:
            await llm.aclose()
        request = fake.completions[-1]
        content = json.loads(tool_results(request.json)[-1]["content"])
        keys = {r["sessionKey"] for r in content["results"]}
        assert keys == {"agent:main:telegram:private:A"}
        assert any("500 euros" in r["snippet"] for r in content["results"])
        assert "9000" not in json.dumps(content)
        assert sender.texts("A")[-1].startswith("tool said:")


async def test_agent_visibility_sees_sibling_chats_but_not_other_agents(
    sqlite_store, clock, sender
):
    async with FakeOpenAI() as fake:
        manager, llm = await build(sqlite_store, sender, clock, fake, "agent")
        try:
            await manager.handle(inbound(clock, "A", "budget in chat A"))
            await manager.handle(inbound(clock, "B", "budget in chat B"))
            await manager.handle(inbound(clock, "C", "budget in chat C", agent="other"))
            fake.set_default(search_then_answer("budget"))
            await manager.handle(inbound(clock, "A", "search please"))
        finally:
            await llm.aclose()
        content = json.loads(tool_results(fake.completions[-1].json)[-1]["content"])
        keys = {r["sessionKey"] for r in content["results"]}
        assert keys == {"agent:main:telegram:private:A", "agent:main:telegram:private:B"}


async def test_session_key_outside_visibility_is_refused(sqlite_store, clock, sender):
    async with FakeOpenAI() as fake:
        manager, llm = await build(sqlite_store, sender, clock, fake, "self")
        try:
            await manager.handle(inbound(clock, "B", "budget in chat B"))
            fake.set_default(
                search_then_answer("budget", sessionKey="agent:main:telegram:private:B")
            )
            await manager.handle(inbound(clock, "A", "peek at B"))
        finally:
            await llm.aclose()
        content = json.loads(tool_results(fake.completions[-1].json)[-1]["content"])
        assert "not visible" in content["error"]
        assert "results" not in content
