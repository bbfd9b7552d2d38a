"""Rates and budgets as a chat meets them: stored, not answered, told once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from core.clock import TestClock
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.limits import Admissions, Meter
from core.limits.notices import CUT_SHORT
from core.limits.store import Subject
from core.llm import Completion, Usage
from core.messages import ChatKind, Inbound, Target
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import SearchScope
from tests.conftest import RecordingSender
from tests.support.scripted_model import ScriptedModel

START = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ALICE_KEY = "agent:main:telegram:private:alice"


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    opened = open_backend(storage_url)
    await opened.open()
    yield opened
    await opened.close()


class Rig:
    def __init__(self, backend: Backend, config: KeptConfig) -> None:
        self.backend = backend
        self.config = config
        self.clock = TestClock(START)
        self.model = ScriptedModel()
        self.sender = RecordingSender()
        self.manager = ConversationManager(
            store=backend.store,
            llm=self.model,
            sender=self.sender,
            config=lambda: self.config,
            clock=self.clock,
            meter=Meter(
                self.model, config=lambda: self.config, clock=self.clock, budgets=backend.budgets
            ),
            admissions=Admissions(lambda: self.config),
        )
        self.n = 0

    async def say(
        self, text: str, *, user: str = "alice", chat: str | None = None, kind: ChatKind = "private"
    ) -> None:
        self.n += 1
        await self.manager.handle(
            Inbound(
                agent_id="main",
                target=Target("telegram", chat or user),
                chat_kind=kind,
                sender_id=user,
                text=text,
                ts=self.clock.now(),
                platform_message_id=str(self.n),
            )
        )


def limited_config(**limits: object) -> KeptConfig:
    return KeptConfig.model_validate({"limits": limits})


async def test_a_flood_is_stored_but_not_answered_and_told_once(backend: Backend) -> None:
    rig = Rig(backend, limited_config(perUser={"messagesPerMinute": 3}))
    for i in range(8):
        await rig.say(f"flood {i}")
    calls = len(rig.model.requests)
    assert calls == 3  # the burst, then nothing reaches the model
    notices = [t for t in rig.sender.texts() if "faster than I answer" in t]
    assert len(notices) == 1 and "20 seconds" in notices[0]
    assert len(rig.sender.sent) == 4  # three answers and the one notice
    # Every message is kept: searchable, erasable. Five are marked limited.
    found = await backend.store.search(
        "flood", scope=SearchScope(session_key=ALICE_KEY), limit=20, redactor=Redactor()
    )
    assert len([h for h in found if h.role == "user"]) == 8
    # Recovery never answers them, now or after a restart.
    assert await rig.manager.recover_unanswered() == 0
    assert len(rig.model.requests) == calls
    # The model never sees them either: the next turn's history has the three.
    await rig.clock.advance(60)
    await rig.say("back again")
    history = [m["content"] for m in rig.model.requests[-1][1] if m["role"] == "user"]
    assert [h for h in history if h.startswith("flood")] == ["flood 0", "flood 1", "flood 2"]


async def test_a_flood_in_one_chat_leaves_the_others_answered(backend: Backend) -> None:
    rig = Rig(backend, limited_config(perUser={"messagesPerMinute": 2}))
    for i in range(5):
        await rig.say(f"mine {i}")
    await rig.say("hello", user="bob")
    assert rig.sender.texts("bob") == ["echo: hello"]


async def test_a_group_has_its_own_rate_for_all_members(backend: Backend) -> None:
    config = limited_config(perUser={"messagesPerMinute": 10}, perChat={"messagesPerMinute": 2})
    rig = Rig(backend, config)
    for user in ("alice", "bob", "carol"):
        await rig.say(f"hi from {user}", user=user, chat="-100", kind="group")
    assert len(rig.model.requests) == 2
    notice = [t for t in rig.sender.texts("-100") if "faster" in t]
    assert notice and notice[0].startswith("This chat is")
    assert rig.sender.sent[-1].reply_to_platform_id == "3"  # quoting in a group


async def test_no_rate_configured_answers_everything(backend: Backend) -> None:
    rig = Rig(backend, limited_config(perUser={"messagesPerMinute": None}))
    for i in range(30):
        await rig.say(f"m {i}")
    assert len(rig.model.requests) == 30


async def test_a_spent_budget_gets_one_notice_then_resets_at_midnight(backend: Backend) -> None:
    rig = Rig(backend, limited_config(perUser={"tokensPerDay": 100}))
    rig.model.steps.append(
        Completion("fine", [], "stop", "m", usage=Usage(prompt_tokens=90, completion_tokens=20))
    )
    await rig.say("first")
    assert rig.sender.texts() == ["fine"]
    await rig.say("second")
    await rig.say("third")
    assert len(rig.model.requests) == 1  # decided before any call
    texts = rig.sender.texts()
    assert len(texts) == 2 and "allowance" in texts[1] and "00:00 UTC" in texts[1]
    assert "12 h" in texts[1]  # from 12:00 UTC
    # Neither is owed an answer: recovery leaves both.
    assert await rig.manager.recover_unanswered() == 0
    await rig.clock.advance(12 * 3600)
    await rig.say("a new day")
    assert rig.sender.texts()[-1] == "echo: a new day"


async def test_the_bot_wide_budget_stops_every_user(backend: Backend) -> None:
    rig = Rig(backend, limited_config(tokensPerDay=50))
    rig.model.steps.append(Completion("ok", [], "stop", "m", usage=Usage(40, 20)))
    await rig.say("one")
    await rig.say("two", user="bob")
    assert len(rig.model.requests) == 1
    assert "my model allowance" in rig.sender.texts("bob")[0]


async def test_usage_without_a_report_is_estimated_and_marked(backend: Backend) -> None:
    rig = Rig(backend, KeptConfig())
    rig.model.steps.append(Completion("x" * 400, [], "stop", "m"))
    await rig.say("hello")
    (line,) = await backend.usage.usage(START - timedelta(days=1), "user")
    assert line.key == "telegram:alice" and line.estimated_calls == 1
    assert line.tokens_out == 100 and line.tokens_in > 0


async def test_a_reply_cut_at_the_output_cap_says_so(backend: Backend) -> None:
    rig = Rig(backend, KeptConfig())
    rig.model.steps.append(Completion("The answer is", [], "length", "m"))
    await rig.say("tell me")
    assert rig.sender.texts() == [f"The answer is\n\n{CUT_SHORT}"]


async def test_a_burst_stored_at_once_is_not_refused_by_its_own_holds(backend: Backend) -> None:
    """Each message's admission could hold a whole prompt's worth (about
    26,000 tokens here): ten stored before the first turn starts must not
    use up a 60,000-token day that they barely touch."""
    rig = Rig(backend, limited_config(perUser={"tokensPerDay": 60_000}))
    rig.model.steps.extend(
        Completion(f"answer {i}", [], "stop", "m", usage=Usage(100, 10)) for i in range(10)
    )
    await asyncio.gather(*(rig.say(f"part {i}") for i in range(10)))
    assert len(rig.model.requests) == 10
    assert not [t for t in rig.sender.texts() if "allowance" in t]
    spent = await backend.budgets.spent([Subject("user", "telegram", "alice")], "2026-12-04")
    assert spent == {Subject("user", "telegram", "alice"): 1100}
