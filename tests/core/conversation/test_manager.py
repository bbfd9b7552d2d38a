from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from datetime import timedelta

import pytest

from core.clock import TestClock
from core.config.model import AgentConfig, KeptConfig
from core.conversation.manager import (
    APOLOGY,
    ConversationManager,
    MessageNotStored,
    ReplyEvent,
    ReplyHook,
)
from core.llm import LLMError, ToolCall
from core.messages import Inbound, Target
from core.store import Store
from core.store.sqlite.driver import sqlite3
from core.tools import Tool, ToolContext, ToolRegistry
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel, calls, text
from tests.support.store_helpers import count_index_rows


def make_manager(
    store: Store,
    model: ScriptedModel,
    sender: RecordingSender,
    clock: TestClock,
    config: KeptConfig | None = None,
    tools: ToolRegistry | None = None,
    reply_hooks: Sequence[ReplyHook] = (),
) -> ConversationManager:
    cfg = config or KeptConfig()
    return ConversationManager(
        store=store,
        llm=model,
        sender=sender,
        config=lambda: cfg,
        clock=clock,
        tools=tools,
        reply_hooks=reply_hooks,
    )


def inbound(clock: TestClock, chat: str, body: str, msg_id: str | None = None) -> Inbound:
    return Inbound(
        agent_id="main",
        target=Target("telegram", chat),
        chat_kind="private",
        sender_id=f"u{chat}",
        text=body,
        ts=clock.now(),
        platform_message_id=msg_id,
    )


async def transcript(store: Store, key: str) -> list[tuple[str, str, str]]:
    rows = await store.history(key, before_turn_of=10**9, limit=1000)
    return [(r.role, r.kind, r.text) for r in rows]


async def test_turn_stores_both_messages_and_sends_reply(sqlite_store, clock, sender):
    model = ScriptedModel()
    manager = make_manager(sqlite_store, model, sender, clock)
    reply = await manager.handle(inbound(clock, "1", "hello there"))
    assert reply is not None and reply.text == "echo: hello there"
    assert sender.texts("1") == ["echo: hello there"]
    key = "agent:main:telegram:private:1"
    assert await transcript(sqlite_store, key) == [
        ("user", "text", "hello there"),
        ("assistant", "text", "echo: hello there"),
    ]
    stored = await sqlite_store.get_message(reply.id)
    assert stored is not None and stored.platform_message_id == "m1"


async def test_system_prompt_and_history_reach_the_model(sqlite_store, clock, sender):
    config = KeptConfig(agents=[AgentConfig(id="main", system_prompt="Be terse.")])
    model = ScriptedModel()
    manager = make_manager(sqlite_store, model, sender, clock, config)
    await manager.handle(inbound(clock, "1", "first"))
    await manager.handle(inbound(clock, "1", "second"))
    _, messages, _ = model.requests[-1]
    assert messages[0]["content"].startswith("Be terse.\n\nCurrent time for the user: Monday")
    assert messages[1:] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "echo: first"},
        {"role": "user", "content": "second"},
    ]


async def test_history_respects_character_budget(sqlite_store, clock, sender):
    config = KeptConfig(agents=[AgentConfig(id="main", history_chars=500)])
    model = ScriptedModel()
    manager = make_manager(sqlite_store, model, sender, clock, config)
    for i in range(10):
        await manager.handle(inbound(clock, "1", f"{i} " + "x" * 100))
    _, messages, _ = model.requests[-1]
    assert sum(len(m["content"]) for m in messages[1:]) <= 500
    assert messages[-1]["content"].startswith("9 ")
    assert messages[-2]["content"].startswith("echo: 8 ")


async def test_on_stored_fires_once_the_message_is_in_the_transcript(sqlite_store, clock, sender):
    # A channel confirms a platform update on this signal, so it must come
    # after the row exists and before the (slow) answer.
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    key = "agent:main:telegram:private:1"
    seen: list[tuple[asyncio.Task[list[tuple[str, str, str]]], list[str]]] = []

    def on_stored() -> None:
        # The store serialises calls, so this read sees the state at the signal.
        seen.append((asyncio.create_task(transcript(sqlite_store, key)), list(sender.texts())))

    reply = await manager.handle(inbound(clock, "1", "hi", msg_id="77"), on_stored=on_stored)
    assert reply is not None
    assert len(seen) == 1 and seen[0][1] == []  # once, before anything was sent
    assert await seen[0][0] == [("user", "text", "hi")]  # the row existed, no reply yet
    # A duplicate is already stored: the signal fires, nothing is answered.
    assert await manager.handle(inbound(clock, "1", "hi", msg_id="77"), on_stored=on_stored) is None
    assert len(seen) == 2 and sender.texts() == ["echo: hi"]
    # Nothing to store, no signal.
    await manager.handle(inbound(clock, "1", "   "), on_stored=on_stored)
    assert len(seen) == 2


async def test_duplicate_platform_message_gets_one_reply(sqlite_store, clock, sender):
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    first = await manager.handle(inbound(clock, "1", "hi", msg_id="77"))
    second = await manager.handle(inbound(clock, "1", "hi", msg_id="77"))
    assert first is not None and second is None
    assert sender.texts() == ["echo: hi"]
    assert len(await transcript(sqlite_store, "agent:main:telegram:private:1")) == 2


async def test_model_failure_sends_apology_and_keeps_transcript(sqlite_store, clock, sender):
    model = ScriptedModel()
    model.steps.append(LLMError("timed out", kind="timeout"))
    manager = make_manager(sqlite_store, model, sender, clock)
    reply = await manager.handle(inbound(clock, "1", "are you there?"))
    assert reply is not None and reply.kind == "error"
    assert sender.texts() == [APOLOGY]
    assert await transcript(sqlite_store, "agent:main:telegram:private:1") == [
        ("user", "text", "are you there?"),
        ("assistant", "error", APOLOGY),
    ]
    # The apology counts as an answer: nothing is re-answered at start-up.
    assert await sqlite_store.unanswered(since=clock.now() - timedelta(hours=1)) == []


async def test_empty_model_answer_is_a_failure(sqlite_store, clock, sender):
    model = ScriptedModel()
    model.steps.append(text("   "))
    manager = make_manager(sqlite_store, model, sender, clock)
    await manager.handle(inbound(clock, "1", "?"))
    assert sender.texts() == [APOLOGY]


async def test_tool_loop_runs_tools_with_stored_scope(sqlite_store, clock, sender):
    seen: list[ToolContext] = []

    async def whoami(ctx: ToolContext, args: dict) -> dict:
        seen.append(ctx)
        return {"chat": ctx.target.chat_id, "echo": args.get("x")}

    registry = ToolRegistry()
    registry.register(Tool("whoami", "Where am I?", {"type": "object"}, whoami))
    model = ScriptedModel()
    model.steps.append(calls(ToolCall(id="c1", name="whoami", arguments='{"x": 5}')))

    async def answer(messages, tools):
        tool_msg = messages[-1]
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "c1"
        return text("tool said " + tool_msg["content"])

    model.steps.append(answer)
    manager = make_manager(sqlite_store, model, sender, clock, tools=registry)
    await manager.handle(inbound(clock, "42", "where?"))
    assert [c.target.chat_id for c in seen] == ["42"]
    assert sender.texts() == ['tool said {"chat": "42", "echo": 5}']
    assert model.requests[0][2] is not None  # tools offered
    rows = await transcript(sqlite_store, "agent:main:telegram:private:42")
    assert [r[:2] for r in rows] == [
        ("user", "text"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "text"),
    ]
    # Tool rows are never indexed for search.
    assert await count_index_rows(sqlite_store, "agent:main:telegram:private:42") == 2


async def test_tool_rounds_are_bounded(sqlite_store, clock, sender):
    async def loop_tool(ctx: ToolContext, args: dict) -> str:
        return "again"

    registry = ToolRegistry()
    registry.register(Tool("loop", "loops", {"type": "object"}, loop_tool))
    config = KeptConfig(agents=[AgentConfig(id="main", max_tool_rounds=2)])
    model = ScriptedModel()
    for i in range(2):
        model.steps.append(calls(ToolCall(id=f"c{i}", name="loop", arguments="{}")))
    model.steps.append(text("done"))
    manager = make_manager(sqlite_store, model, sender, clock, config, registry)
    await manager.handle(inbound(clock, "1", "go"))
    assert sender.texts() == ["done"]
    assert len(model.requests) == 3
    assert model.requests[-1][2] is None  # the last call offers no tools


async def test_unknown_tool_and_bad_arguments_are_reported_to_the_model(
    sqlite_store, clock, sender
):
    model = ScriptedModel()
    model.steps.append(calls(ToolCall(id="c1", name="nope", arguments="{")))

    async def answer(messages, tools):
        return text(json.loads(messages[-1]["content"])["error"])

    model.steps.append(answer)
    registry = ToolRegistry()
    manager = make_manager(sqlite_store, model, sender, clock, tools=registry)
    await manager.handle(inbound(clock, "1", "x"))
    assert "unknown tool 'nope'" in sender.texts()[0]


async def test_reply_hook_runs_after_send_and_not_for_failures(sqlite_store, clock, sender):
    events: list[ReplyEvent] = []
    sent_before_hook: list[int] = []

    async def hook(ev: ReplyEvent) -> None:
        sent_before_hook.append(len(sender.sent))
        events.append(ev)

    model = ScriptedModel()
    manager = make_manager(sqlite_store, model, sender, clock, reply_hooks=[hook])
    await manager.handle(inbound(clock, "1", "interview tomorrow"))
    model.steps.append(LLMError("boom", kind="server"))
    await manager.handle(inbound(clock, "1", "again"))
    await manager.drain()
    assert len(events) == 1
    assert events[0].user_message.text == "interview tomorrow"
    assert events[0].reply.text == "echo: interview tomorrow"
    assert events[0].session.key == "agent:main:telegram:private:1"
    assert sent_before_hook == [1]


async def test_recovery_answers_unanswered_once_in_order(sqlite_store, clock, sender):
    # Simulate a crash: user messages stored, no reply.
    from core.store.base import NewMessage

    key = "agent:main:telegram:private:5"
    await sqlite_store.ensure_session(
        key,
        agent_id="main",
        platform="telegram",
        chat_id="5",
        chat_kind="private",
        thread_id=None,
        now=clock.now(),
    )
    for body in ("one", "two"):
        await sqlite_store.add_message(
            NewMessage(session_key=key, role="user", text=body, ts=clock.now())
        )
    old = clock.now() - timedelta(hours=2)
    await sqlite_store.add_message(NewMessage(session_key=key, role="user", text="ancient", ts=old))
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    assert await manager.recover_unanswered(platforms={"discord"}) == 0
    assert await manager.recover_unanswered(platforms={"telegram"}) == 2
    assert await manager.recover_unanswered(platforms={"telegram"}) == 0
    assert sender.texts() == ["echo: one", "echo: two"]


async def test_fifty_concurrent_messages_across_ten_sessions(sqlite_store, clock, sender):
    model = ScriptedModel()

    async def slow_echo(messages, tools):
        await asyncio.sleep(random.random() / 200)
        return text("echo: " + messages[-1]["content"])

    model.steps.extend([slow_echo] * 50)
    manager = make_manager(sqlite_store, model, sender, clock)
    order = [(s, i) for i in range(5) for s in range(10)]
    results = await asyncio.gather(
        *(manager.handle(inbound(clock, str(s), f"s{s} n{i}", msg_id=f"{s}-{i}")) for s, i in order)
    )
    assert all(r is not None for r in results)
    for s in range(10):
        assert sender.texts(str(s)) == [f"echo: s{s} n{i}" for i in range(5)]
        rows = await transcript(sqlite_store, f"agent:main:telegram:private:{s}")
        users = [r[2] for r in rows if r[0] == "user"]
        assert users == [f"s{s} n{i}" for i in range(5)]
        assert len(rows) == 10


async def test_a_session_deleted_between_turns_is_started_again(sqlite_store, clock, sender):
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    key = "agent:main:telegram:private:1"
    await manager.handle(inbound(clock, "1", "first"))
    assert await sqlite_store.delete_session(key) == 2
    reply = await manager.handle(inbound(clock, "1", "after the purge"))
    assert reply is not None and reply.text == "echo: after the purge"
    assert await transcript(sqlite_store, key) == [
        ("user", "text", "after the purge"),
        ("assistant", "text", "echo: after the purge"),
    ]


async def test_edit_and_delete_change_the_transcript_through_the_manager(
    sqlite_store, clock, sender
):
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    await manager.handle(inbound(clock, "1", "my flight is on tuesday", msg_id="p1"))
    key = "agent:main:telegram:private:1"
    where = {"platform": "telegram", "chat_id": "1"}

    edited = await manager.edit(**where, platform_message_id="p1", text="on wednesday")
    assert edited is not None and edited.session_key == key
    assert await manager.edit(**where, platform_message_id="nope", text="x") is None
    assert (await transcript(sqlite_store, key))[0] == ("user", "text", "on wednesday")

    assert await manager.delete(**where, platform_message_id="p1")
    assert not await manager.delete(**where, platform_message_id="p1")
    assert [role for role, _, _ in await transcript(sqlite_store, key)] == ["assistant"]


async def test_an_edit_or_deletion_the_store_refuses_is_not_stored(sqlite_store, clock, sender):
    manager = make_manager(sqlite_store, ScriptedModel(), sender, clock)
    await manager.handle(inbound(clock, "1", "hello", msg_id="p1"))
    full = sqlite3.OperationalError("database or disk is full")

    async def refuse(**fields: object) -> None:
        raise full

    sqlite_store.edit_message = refuse
    sqlite_store.delete_message = refuse
    where = {"platform": "telegram", "chat_id": "1", "platform_message_id": "p1"}
    with pytest.raises(MessageNotStored) as edit:
        await manager.edit(**where, text="changed")
    assert edit.value.__cause__ is full and "disk" in edit.value.action
    with pytest.raises(MessageNotStored) as deletion:
        await manager.delete(**where)
    assert deletion.value.__cause__ is full


async def test_a_session_whose_agent_was_removed_is_answered_with_defaults(
    sqlite_store, clock, sender
):
    model = ScriptedModel()
    config = KeptConfig.model_validate(
        {
            "agents": [{"id": "other", "systemPrompt": "Other."}],
            "channels": {"discord": {"agent": "other"}, "telegram": {"agent": "other"}},
        }
    )
    manager = make_manager(sqlite_store, model, sender, clock, config=config)
    reply = await manager.handle(inbound(clock, "1", "still there?"))
    assert reply is not None and sender.texts("1") == ["echo: still there?"]
    system = model.requests[0][1][0]["content"]
    assert system.startswith("You are a helpful assistant.") and "(UTC)" in system
