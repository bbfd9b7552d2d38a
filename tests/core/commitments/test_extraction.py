"""The extraction pass end to end: the real ConversationManager, SqliteStore
and LLMClient talking to a fake OpenAI-compatible server over loopback.

Chat requests ask for model "chat-model", extraction requests for
"extract-model", so the fake answers each role with its own script.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from core.clock import TestClock
from core.commitments.extraction import ExtractionWorker
from core.commitments.model import Commitment, Scope
from core.commitments.prompt import SYSTEM_PROMPT
from core.commitments.store import Filter
from core.config.model import (
    AgentConfig,
    CommitmentsConfig,
    HeartbeatConfig,
    KeptConfig,
    LimitsConfig,
    LlmConfig,
    ModelsConfig,
)
from core.conversation.manager import ConversationManager
from core.limits import Meter
from core.limits.store import BOT, CallUsage, Subject
from core.llm import LLMClient
from core.messages import ChatKind, Inbound, Outbound, SendResult, Target
from core.store.sql.extraction_jobs import SqlExtractionJobStore, SqlPauseStore
from core.store.sql.limits import SqlUsageStore
from core.store.sqlite import SqliteStore
from core.users import FollowUpPreferences
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, error, hang, reply
from tests.support.store_helpers import (
    budgets_for,
    commitment_store_for,
    followup_prefs_for,
    open_store,
)

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # a Monday, 10:00 in Paris
PARIS = ZoneInfo("Europe/Paris")
LOG = "kept.commitments"


class StampingSender:
    """Records each send with its monotonic time (the fake server's clock)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, Outbound]] = []

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append((time.monotonic(), outbound))
        return SendResult(message_id=f"m{len(self.sent)}")


def interview(**over: Any) -> dict[str, Any]:
    tomorrow_evening = datetime(2026, 12, 1, 18, 0, tzinfo=PARIS)
    c: dict[str, Any] = {
        "kind": "event_check_in",
        "sensitivity": "routine",
        "source": "inferred_user_context",
        "dueWindow": {
            "earliest": tomorrow_evening.isoformat(),
            "latest": (tomorrow_evening + timedelta(hours=18)).isoformat(),
        },
        "reason": "user has a job interview tomorrow",
        "suggestedText": "How did the interview go?",
        "confidence": 0.9,
        "dedupeKey": "interview:2026-12-01",
    }
    c.update(over)
    return c


def answer(*candidates: dict[str, Any], resolved: list[str] | None = None) -> str:
    return json.dumps({"candidates": list(candidates), "resolved": resolved or []})


@dataclass
class Harness:
    fake: FakeOpenAI
    clock: TestClock
    store: SqliteStore
    manager: ConversationManager
    worker: ExtractionWorker
    sender: StampingSender
    config: list[KeptConfig]
    extraction: list[Any] = field(default_factory=list)  # scripted answers, in order
    # Follow-up preferences on the same database (`make_harness(prefs=True)`).
    prefs: FollowUpPreferences | None = None

    @property
    def commitments(self):  # type: ignore[no-untyped-def]
        return commitment_store_for(self.store)

    async def say(
        self,
        text: str,
        chat: str = "42",
        settle: bool = True,
        chat_kind: ChatKind = "private",
        sender: str | None = None,
    ) -> None:
        await self.manager.handle(
            Inbound(
                agent_id="main",
                target=Target("telegram", chat),
                chat_kind=chat_kind,
                sender_id=sender or f"u{chat}",
                text=text,
                ts=self.clock.now(),
            )
        )
        if settle:
            await self.settle()

    async def settle(self) -> None:
        await self.manager.drain()
        await asyncio.wait_for(self.worker.wait_idle(), 5)

    def extraction_requests(self) -> list[RecordedRequest]:
        return [r for r in self.fake.completions if r.model == "extract-model"]

    async def stored(self) -> list[Commitment]:
        return await self.commitments.list(Filter())

    def set_enabled(self, enabled: bool) -> None:
        current = self.config[0]
        self.config[0] = current.model_copy(
            update={"commitments": CommitmentsConfig(enabled=enabled)}
        )


def make_config(base_url: str, *, enabled: bool, every: str) -> KeptConfig:
    return KeptConfig(
        llm=LlmConfig(
            base_url=base_url,
            timeout_seconds=5,
            max_retries=0,
            models=ModelsConfig(chat="chat-model", extraction="extract-model"),
        ),
        agents=[
            AgentConfig(id="main", timezone="Europe/Paris", heartbeat=HeartbeatConfig(every=every))
        ],
        commitments=CommitmentsConfig(enabled=enabled),
    )


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    stack: list[tuple[Harness, LLMClient]] = []

    async def build(
        *,
        enabled: bool = True,
        every: str = "30m",
        prefs: bool = False,
        metered: bool = False,
        **worker_args: Any,
    ) -> Harness:
        fake = FakeOpenAI()
        await fake.start()
        clock = TestClock(START)
        config = [make_config(fake.base_url, enabled=enabled, every=every)]
        llm = LLMClient(config[0].llm, environ={"OPENAI_API_KEY": "sk-test"}, clock=clock)
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        assert isinstance(store, SqliteStore)
        await store.open()
        sender = StampingSender()
        worker_args.setdefault("batch_seconds", 0)
        worker_args.setdefault("worker", "w1")
        preferences = followup_prefs_for(store) if prefs else None
        worker_args.setdefault("prefs", preferences)
        if metered:
            worker_args["meter"] = Meter(
                llm, config=lambda: config[0], clock=clock, budgets=budgets_for(store)
            )
        worker = ExtractionWorker(
            store=commitment_store_for(store),
            jobs=SqlExtractionJobStore(store.connection),
            pauses=SqlPauseStore(store.connection),
            llm=llm,
            config=lambda: config[0],
            clock=clock,
            **worker_args,
        )
        manager = ConversationManager(
            store=store,
            llm=llm,
            sender=sender,
            config=lambda: config[0],
            clock=clock,
            reply_hooks=[worker.on_reply],
        )
        worker.start()
        h = Harness(fake, clock, store, manager, worker, sender, config, prefs=preferences)

        def respond(body: Any) -> Any:
            if body.get("model") != "extract-model":
                return reply("Good luck, you'll do great!")
            return h.extraction.pop(0) if h.extraction else answer()

        fake.set_default(respond)
        stack.append((h, llm))
        return h

    yield build
    for h, llm in stack:
        await h.worker.stop(drain_seconds=0.1)
        await h.manager.drain()
        await llm.aclose()  # its pooled connection to the fake would leak otherwise
        await h.fake.stop()
        await h.store.close()


SCOPE_42 = Scope(
    "main", "agent:main:telegram:private:42", "telegram", "42", None, "u42", chat_kind="private"
)


async def test_interview_tomorrow_stores_one_commitment_in_the_turns_scope(make_harness) -> None:
    h = await make_harness()
    await h.say("hi there")  # an earlier exchange the extraction must not see
    h.extraction.append(answer(interview()))
    await h.say("I have a job interview tomorrow afternoon, wish me luck")
    [c] = await h.stored()
    assert c.scope == SCOPE_42
    assert (c.kind, c.status, c.confidence) == ("event_check_in", "pending", 0.9)
    assert c.due_earliest == datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
    assert c.due_latest == datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
    assert c.due_timezone == "Europe/Paris" and c.suggested_text == "How did the interview go?"
    assert c.created_at == START and c.source_message_id is not None

    request = h.extraction_requests()[-1]
    assert request.tools == [] and "tools" not in request.json
    assert request.system_text == SYSTEM_PROMPT
    data = json.loads(request.last_user_text or "")
    assert data["timezone"] == "Europe/Paris" and data["now"] == "2026-11-30T10:00+01:00"
    assert data["exchanges"] == [
        {
            "user": "I have a job interview tomorrow afternoon, wish me luck",
            "assistant": "Good luck, you'll do great!",
        }
    ]
    assert len(request.messages) == 2  # instructions + data, no transcript replay


async def test_storing_wakes_the_heartbeat_once_per_batch(make_harness) -> None:
    wakes: list[int] = []
    h = await make_harness(on_stored=lambda: wakes.append(1))
    await h.say("nothing to see")
    assert wakes == []
    h.extraction.append(answer(interview()))
    await h.say("interview tomorrow")
    assert wakes == [1]


async def test_due_time_is_raised_to_one_heartbeat_after_creation(make_harness) -> None:
    h = await make_harness(every="2h")
    soon = START + timedelta(minutes=10)
    h.extraction.append(answer(interview(dueWindow={"earliest": soon.isoformat()})))
    await h.say("I have an interview in a bit")
    [c] = await h.stored()
    assert c.due_earliest == START + timedelta(hours=2)
    assert c.due_latest == START + timedelta(hours=2 + 12)  # missing latest: default window


PAST = (START - timedelta(hours=3)).isoformat()


@pytest.mark.parametrize(
    ("user", "model_answer", "logged"),
    [
        ("I might have an interview", answer(interview(confidence=0.4)), "confidence"),
        (
            "remind me at 3pm to call the dentist",
            answer(interview(reason="dentist call", dedupeKey="dentist")),
            "explicit reminder",
        ),
        (
            "Rappelle-moi demain à 9h d'appeler ma mère",
            answer(interview(reason="call mother", dedupeKey="mother")),
            "explicit reminder",
        ),
        (
            "I had an interview this morning",
            answer(interview(dueWindow={"earliest": PAST, "latest": PAST})),
            "past",
        ),
        ("interview tomorrow", "Sure! They have an interview.", "no JSON object"),
        ("interview tomorrow", '{"candidates": [', "not valid JSON"),
        ("interview tomorrow", answer(interview(chatId="99")), "chatId"),
        ("interview tomorrow", error(500), "extraction_model_failed"),
    ],
)
async def test_nothing_is_stored_and_the_log_says_why(
    make_harness, caplog, user: str, model_answer: Any, logged: str
) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h = await make_harness()
    h.extraction.append(model_answer)
    await h.say(user)
    assert len(h.extraction_requests()) == 1
    assert await h.stored() == []
    assert logged in caplog.text
    assert [o.text for _, o in h.sender.sent] == ["Good luck, you'll do great!"]


async def test_a_group_chat_stores_no_personal_or_care_follow_up(make_harness, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h = await make_harness()
    care = interview(
        kind="care_check_in",
        sensitivity="care",
        reason="user had a panic attack and slept badly",
        suggestedText="Did you manage to sleep better after the panic attack?",
        dedupeKey="sleep",
        confidence=0.97,
    )
    h.extraction.append(answer(care, interview(confidence=0.9)))
    await h.say(
        "panic attack last night, and the interview is tomorrow",
        chat="-1007",
        chat_kind="group",
        sender="u9",
    )

    [c] = await h.stored()  # the routine one only
    assert c.kind == "event_check_in" and c.session_key == "agent:main:telegram:group:-1007"
    assert c.sender_id == "u9"
    assert "commitment_candidates_rejected" in caplog.text
    assert "sleep: care_check_in / care in a group chat" in caplog.text

    # The same answer in a private chat keeps the care check-in.
    h.extraction.append(answer(care))
    await h.say("panic attack last night", chat="42")
    assert {x.kind for x in await h.stored()} == {"event_check_in", "care_check_in"}


async def test_same_candidate_twice_is_one_row_widened(make_harness) -> None:
    h = await make_harness()
    h.extraction.append(answer(interview(confidence=0.8)))
    await h.say("interview tomorrow!")
    later = datetime(2026, 12, 2, 20, 0, tzinfo=PARIS).isoformat()
    window = {"earliest": datetime(2026, 12, 1, 18, 0, tzinfo=PARIS).isoformat(), "latest": later}
    h.extraction.append(answer(interview(confidence=0.95, dueWindow=window)))
    await h.say("so nervous about tomorrow's interview")
    [c] = await h.stored()
    assert c.confidence == 0.95
    assert c.due_latest == datetime(2026, 12, 2, 19, 0, tzinfo=UTC)
    # the second request saw the first commitment as pending, with its id
    pending = json.loads(h.extraction_requests()[-1].last_user_text or "")["pending"]
    assert [p["id"] for p in pending] == [c.id]


async def test_resolved_applies_only_within_the_same_scope(make_harness) -> None:
    h = await make_harness()
    h.extraction.append(answer(interview()))
    await h.say("interview tomorrow", chat="42")
    [c] = await h.stored()
    h.extraction.append(answer(resolved=[c.id]))
    await h.say("the interview went great", chat="7")  # another chat claims to resolve it
    assert (await h.commitments.get(c.id)).status == "pending"  # type: ignore[union-attr]
    h.extraction.append(answer(resolved=[c.id]))
    await h.say("the interview went great", chat="42")
    assert (await h.commitments.get(c.id)).status == "resolved"  # type: ignore[union-attr]


async def test_reply_is_delivered_before_the_extraction_call_starts(make_harness) -> None:
    h = await make_harness()
    h.extraction.append(answer(interview()))
    await h.say("interview tomorrow")
    [(sent_at, _)] = h.sender.sent
    [extraction] = h.extraction_requests()
    [chat] = [r for r in h.fake.completions if r.model == "chat-model"]
    assert chat.received_at < sent_at < extraction.received_at


async def test_a_hanging_extraction_never_delays_the_next_reply(make_harness, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h = await make_harness()
    h.extraction.append(hang())
    await h.say("interview tomorrow", settle=False)
    await h.manager.drain()
    await h.fake.wait_for_completions(2)  # the extraction request is now hanging
    started = time.monotonic()
    await h.say("and an exam on friday", settle=False)
    assert time.monotonic() - started < 1.0
    assert len(h.sender.sent) == 2
    await h.manager.drain()  # the reply hooks have run: both exchanges are queued
    assert h.worker.queued == 2  # one hanging, one waiting behind it
    await h.worker.stop(drain_seconds=0.05)
    assert "extraction_queued_at_stop count=2" in caplog.text


async def test_disabled_makes_no_extraction_requests_and_applies_without_restart(
    make_harness,
) -> None:
    h = await make_harness(enabled=False)
    for i in range(3):
        await h.say(f"interview tomorrow {i}")
    assert h.extraction_requests() == [] and len(h.sender.sent) == 3
    h.set_enabled(True)
    await h.say("interview tomorrow")
    assert len(h.extraction_requests()) == 1
    h.set_enabled(False)
    await h.say("interview tomorrow again")
    assert len(h.extraction_requests()) == 1


async def test_auth_error_pauses_the_agent_with_one_log_line(make_harness, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h = await make_harness(pause=timedelta(minutes=10))
    h.extraction.append(error(401))
    for i in range(4):
        await h.say(f"message {i}")
    assert len(h.extraction_requests()) == 1
    assert caplog.text.count("extraction_paused") == 1
    assert "sk-test" not in caplog.text
    await h.clock.advance(11 * 60)
    await h.say("after the pause")
    assert len(h.extraction_requests()) == 2
    assert "extraction_resumed" in caplog.text


async def test_a_spent_budget_skips_extraction_and_another_users_goes_on(make_harness) -> None:  # type: ignore[no-untyped-def]
    h = await make_harness(metered=True)
    h.config[0] = h.config[0].model_copy(
        update={"limits": LimitsConfig.model_validate({"perUser": {"tokensPerDay": 500}})}
    )
    spent = CallUsage(
        at=h.clock.now(), agent_id="main", role="chat", model="m", platform="telegram",
        user_id="u42", chat_id="42", shared=False, tokens_in=500, tokens_out=0, estimated=False,
    )  # fmt: skip
    subject = Subject("user", "telegram", "u42")
    await budgets_for(h.store).record(spent, [subject, BOT], h.clock.now().date().isoformat(), None)
    h.extraction.append(answer(interview()))
    await h.say("I have a job interview tomorrow at 10")
    assert h.extraction_requests() == []  # decided before the call
    assert await h.stored() == []
    # The positive control: another user, with budget, is extracted from.
    await h.say("I have a job interview tomorrow at 10", chat="43")
    assert len(h.extraction_requests()) == 1
    assert [c.scope.chat_id for c in await h.stored()] == ["43"]
    # The one extraction call is in the usage, charged to its member.
    lines = await SqlUsageStore(h.store.connection).usage(h.clock.now() - timedelta(days=1), "user")
    assert {(x.key, x.calls) for x in lines} == {("telegram:u42", 1), ("telegram:u43", 1)}
