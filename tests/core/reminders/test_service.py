"""Reminders scheduled through ReminderService and fired by ReminderSource:
at the right instants, exactly once, to the right chat.

Time is a TestClock: a test moves it with `set`/`advance` and calls the
source's `fire_due` or `recover_missed` the way the scheduler would.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from core.clock import TestClock
from core.commands.wording import reminder_refused
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.llm import ToolCall
from core.messages import Inbound, Outbound, SendResult, Target, reminder_snooze_actions
from core.reminders import (
    ReminderFiring,
    ReminderService,
    ReminderSource,
    ReminderStore,
    parse_schedule,
)
from core.reminders.limits import ReminderLimits
from core.reminders.model import Reminder
from core.reminders.policy import LATE_PREFIX
from core.reminders.tools import register_reminder_tools
from core.store import Store
from core.tools import ToolRegistry
from tests.support.followups import store_execute
from tests.support.scripted_model import ScriptedModel, calls, text
from tests.support.store_helpers import make_reminder_store

PARIS = "Europe/Paris"
CHAT = Target("telegram", "42")
KEY = "agent:main:telegram:private:42"
THREAD = Target("discord", "7", "8")
THREAD_KEY = "agent:main:discord:channel:7:thread:8"
WORKER = "test-worker"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


class ScriptedSender:
    """Records every send; answers with queued results, then successes."""

    def __init__(self, results: Iterable[SendResult] = ()) -> None:
        self.sent: list[Outbound] = []
        self.results = list(results)

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        if self.results:
            return self.results.pop(0)
        return SendResult(message_id=f"p{len(self.sent)}")

    def texts(self) -> list[str]:
        return [o.text for o in self.sent]


NO_LIMITS = ReminderLimits(active_per_user=None, min_interval=timedelta(0))


@dataclass
class Harness:
    store: Store
    reminders: ReminderStore
    service: ReminderService
    source: ReminderSource
    sender: ScriptedSender
    clock: TestClock
    platforms: set[str] = field(default_factory=lambda: {"telegram", "discord"})
    wakes: int = 0

    async def add(
        self,
        body: str = "stretch",
        *,
        at: str | None = None,
        after: str | None = None,
        cron: str | None = None,
        target: Target = CHAT,
        key: str = KEY,
    ) -> Reminder:
        schedule = parse_schedule(
            at=at, after=after, cron=cron, timezone=PARIS, now=self.clock.now()
        )
        return await self.service.schedule(
            agent_id="main",
            session_key=key,
            target=target,
            created_by="u42",
            text=body,
            schedule=schedule,
        )

    async def get(self, reminder_id: str) -> Reminder:
        found = await self.reminders.get(reminder_id)
        assert found is not None
        return found

    def restart(
        self, sender: ScriptedSender | None = None, *, store: ReminderStore | None = None
    ) -> ReminderSource:
        """A new service and due source on the same database, as after a
        process restart (`store`: the reminder store they go through)."""
        self.sender = sender or ScriptedSender()
        reminders = store or self.reminders
        # Firing is under test here, not the limits (test_limits.py).
        self.service = ReminderService(
            reminders, self.clock, on_stored=self._wake, limits=lambda: NO_LIMITS
        )
        firing = ReminderFiring(
            store=reminders,
            transcript=self.store,
            sender=self.sender,
            clock=self.clock,
            platforms=lambda: self.platforms,
            worker=WORKER,
        )
        self.source = ReminderSource(
            store=reminders, firing=firing, clock=self.clock, platforms=lambda: self.platforms
        )
        return self.source

    def _wake(self) -> None:
        self.wakes += 1

    async def transcript(self, key: str = KEY) -> list[tuple[str, str, str]]:
        rows = await self.store.history(key, before_turn_of=10**9, limit=100)
        return [(r.role, r.kind, r.text) for r in rows]


async def make_harness(store: Store, clock: TestClock, sender: ScriptedSender | None = None):
    for key, target, kind in ((KEY, CHAT, "private"), (THREAD_KEY, THREAD, "channel")):
        await store.ensure_session(
            key,
            agent_id="main",
            platform=target.platform,
            chat_id=target.chat_id,
            chat_kind=kind,  # type: ignore[arg-type]
            thread_id=target.thread_id,
            now=clock.now(),
        )
    reminders = make_reminder_store(store)
    h = Harness(store, reminders, None, None, sender or ScriptedSender(), clock)  # type: ignore[arg-type]
    h.restart(h.sender)
    return h


@pytest.fixture
async def h(any_store: Store, clock: TestClock) -> Harness:
    return await make_harness(any_store, clock)


# --- the three forms fire at the right instants -------------------------------------------


async def test_after_fires_exactly_when_due(h: Harness) -> None:
    r = await h.add(after="20m")
    assert h.wakes == 1  # the scheduler was told to look again
    assert await h.source.next_due() == h.clock.now() + timedelta(minutes=20)
    await h.clock.advance(20 * 60 - 1)
    assert await h.source.fire_due() == 0 and h.sender.sent == []
    await h.clock.advance(1)
    assert await h.source.fire_due() == 1
    snooze = reminder_snooze_actions(r.id, 1)  # its buttons name this firing
    assert h.sender.sent == [Outbound(target=CHAT, text="stretch", actions=snooze)]
    done = await h.get(r.id)
    assert (done.status, done.attempts, done.last_fired_at) == ("done", 1, h.clock.now())
    assert await h.source.next_due() is None
    assert await h.source.fire_due() == 0 and len(h.sender.sent) == 1


async def test_at_a_time_of_day_fires_at_that_local_time(h: Harness) -> None:
    h.clock.set(utc(2026, 11, 30, 9, 0))  # 10:00 in Paris
    r = await h.add("call the dentist", at="15:00")
    assert r.next_fire_at == utc(2026, 11, 30, 14, 0)
    h.clock.set(utc(2026, 11, 30, 13, 59, 59))
    assert await h.source.fire_due() == 0
    h.clock.set(utc(2026, 11, 30, 14, 0))
    assert await h.source.fire_due() == 1
    assert h.sender.texts() == ["call the dentist"]


async def test_at_an_iso_time_fires_then_is_done(h: Harness) -> None:
    r = await h.add(at="2026-12-01T09:00+01:00")
    h.clock.set(utc(2026, 12, 1, 8, 0))
    assert await h.source.fire_due() == 1
    assert (await h.get(r.id)).status == "done"


async def run_days(h: Harness, days: int) -> list[datetime]:
    """Let the scheduler loop run: sleep to next_due, fire, repeat."""
    fired: list[datetime] = []
    for _ in range(days):
        due = await h.source.next_due()
        assert due is not None
        h.clock.set(due - timedelta(seconds=1))
        assert await h.source.fire_due() == 0
        h.clock.set(due)
        assert await h.source.fire_due() == 1
        fired.append(h.clock.now())
    return fired


async def test_cron_keeps_local_0900_across_the_march_change(h: Harness) -> None:
    h.clock.set(utc(2026, 3, 27, 12, 0))
    r = await h.add("standup", cron="0 9 * * *")
    fired = await run_days(h, 4)
    assert fired == [
        utc(2026, 3, 28, 8, 0),
        utc(2026, 3, 29, 7, 0),
        utc(2026, 3, 30, 7, 0),
        utc(2026, 3, 31, 7, 0),
    ]
    assert h.sender.texts() == ["standup"] * 4
    after = await h.get(r.id)
    assert (after.status, after.next_fire_at) == ("active", utc(2026, 4, 1, 7, 0))


async def test_cron_keeps_local_0900_across_the_october_change(h: Harness) -> None:
    h.clock.set(utc(2026, 10, 23, 12, 0))
    await h.add("standup", cron="0 9 * * *")
    assert await run_days(h, 3) == [
        utc(2026, 10, 24, 7, 0),
        utc(2026, 10, 25, 8, 0),
        utc(2026, 10, 26, 8, 0),
    ]


async def test_cron_on_a_nonexistent_time_fires_once_when_the_clocks_jump(h: Harness) -> None:
    h.clock.set(utc(2026, 3, 28, 12, 0))
    await h.add("pills", cron="30 2 * * *")
    # 02:30 does not exist on 29 March: it fires at 03:00 CEST, once.
    assert await run_days(h, 2) == [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]
    assert h.sender.texts() == ["pills", "pills"]


async def test_cron_on_a_repeated_time_fires_once(h: Harness) -> None:
    h.clock.set(utc(2026, 10, 24, 12, 0))
    await h.add("pills", cron="30 2 * * *")
    assert await run_days(h, 1) == [utc(2026, 10, 25, 0, 30)]  # the first 02:30 (CEST)
    # The second 02:30 of 25 October (CET, an hour later) does not fire again.
    h.clock.set(utc(2026, 10, 25, 1, 30))
    assert await h.source.fire_due() == 0
    assert await h.source.next_due() == utc(2026, 10, 26, 1, 30)
    assert h.sender.texts() == ["pills"]


# --- delivery: where, how often, and the transcript ---------------------------------------


async def test_delivery_goes_only_to_the_stored_chat_and_thread(h: Harness) -> None:
    await h.add("send this to chat 77 instead", after="1m", target=THREAD, key=THREAD_KEY)
    await h.clock.advance(60)
    assert await h.source.fire_due() == 1
    assert [o.target for o in h.sender.sent] == [THREAD]
    assert await h.transcript(THREAD_KEY) == [
        ("assistant", "reminder", "send this to chat 77 instead")
    ]
    assert await h.transcript(KEY) == []


async def until(condition: Callable[[], bool]) -> None:
    """Let other tasks (and the database thread) run until `condition` holds."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


async def test_429_then_success_sends_one_message(h: Harness) -> None:
    h.sender.results = [SendResult(error="429 Too Many Requests", retryable=True, retry_after=3)]
    r = await h.add(after="1m")
    await h.clock.advance(60)
    task = asyncio.create_task(h.source.fire_due())
    await until(lambda: h.clock.sleepers == 1)  # backing off, as the platform asked
    assert len(h.sender.sent) == 1
    await h.clock.advance(3)
    assert await asyncio.wait_for(task, 1) == 1
    # Two requests, of which the platform accepted one: one message, one row.
    assert len(h.sender.sent) == 2
    assert await h.transcript() == [("assistant", "reminder", "stretch")]
    done = await h.get(r.id)
    assert (done.status, done.attempts) == ("done", 1)


async def test_timeout_after_sending_is_never_repeated(h: Harness) -> None:
    h.sender.results = [SendResult(error="timed out after sending", unknown=True)]
    r = await h.add(after="1m")
    await h.clock.advance(60)
    assert await h.source.fire_due() == 0
    assert len(h.sender.sent) == 1
    failed = await h.get(r.id)
    assert failed.status == "failed" and "unknown" in (failed.last_error or "")
    await h.clock.advance(3600)
    assert await h.source.fire_due() == 0 and await h.source.recover_missed() == 0
    assert len(h.sender.sent) == 1


async def test_an_unknown_outcome_moves_a_cron_reminder_on_without_resending(h: Harness) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    h.sender.results = [SendResult(error="timed out", unknown=True)]
    r = await h.add(cron="0 9 * * *")
    h.clock.set(utc(2026, 12, 1, 8, 0))
    assert await h.source.fire_due() == 0
    moved = await h.get(r.id)
    assert (moved.status, moved.next_fire_at) == ("active", utc(2026, 12, 2, 8, 0))
    assert await h.source.fire_due() == 0 and len(h.sender.sent) == 1


class RaisingSender(ScriptedSender):
    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        raise ConnectionResetError("adapter bug after the request went out")


async def test_a_sender_that_raises_counts_as_unknown_and_is_not_repeated(h: Harness) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    once = await h.add("once", after="1h")
    daily = await h.add("daily", cron="0 9 * * *", target=THREAD, key=THREAD_KEY)
    h.clock.set(utc(2026, 12, 1, 8, 0))
    h.restart(RaisingSender())
    assert await h.source.fire_due() == 0
    assert len(h.sender.sent) == 2
    assert (await h.get(once.id)).status == "failed"
    moved = await h.get(daily.id)
    assert (moved.status, moved.next_fire_at) == ("active", utc(2026, 12, 2, 8, 0))
    assert "unknown" in (moved.last_error or "")
    assert await h.source.fire_due() == 0 and len(h.sender.sent) == 2


async def test_a_refusal_that_will_not_heal_fails_at_once(h: Harness) -> None:
    h.sender.results = [SendResult(error="403 bot was blocked by the user")]
    r = await h.add(after="1m")
    await h.clock.advance(60)
    assert await h.source.fire_due() == 0
    assert len(h.sender.sent) == 1
    failed = await h.get(r.id)
    assert failed.status == "failed" and "blocked" in (failed.last_error or "")


async def test_a_delivered_reminder_is_an_assistant_message_of_kind_reminder(h: Harness) -> None:
    await h.add(after="1m")
    await h.clock.advance(60)
    await h.source.fire_due()
    rows = await h.store.history(KEY, before_turn_of=10**9, limit=10)
    assert [(r.role, r.kind, r.text, r.platform_message_id) for r in rows] == [
        ("assistant", "reminder", "stretch", "p1")
    ]
    # Not a user message: nothing waits for an answer, nothing can re-trigger.
    assert await h.store.unanswered(since=h.clock.now() - timedelta(days=1)) == []


async def test_a_reminder_is_never_re_ingested_as_user_input(h: Harness) -> None:
    """The delivered text itself reads like a reminder request. The next turn
    shows it to the model as the assistant's words, so a model that schedules
    whenever a *user* asks is never asked again."""
    model = ScriptedModel()
    tools = ToolRegistry()
    register_reminder_tools(
        tools, h.service, refusal=reminder_refused, default_timezone=lambda _: PARIS
    )
    config = KeptConfig()
    manager = ConversationManager(
        store=h.store, llm=model, sender=h.sender, config=lambda: config, clock=h.clock,
        tools=tools,
    )  # fmt: skip
    body = "Stretch now, and remind me again in 20m"

    async def say(words: str, msg_id: str) -> None:
        inbound = Inbound(
            agent_id="main", target=CHAT, chat_kind="private", sender_id="u42",
            text=words, ts=h.clock.now(), platform_message_id=msg_id,
        )  # fmt: skip
        await manager.handle(inbound)

    async def responder(messages, tools):  # type: ignore[no-untyped-def]
        asks = [m for m in messages if m["role"] == "user" and "remind me again" in m["content"]]
        if asks:
            return calls(ToolCall("c1", "schedule_reminder", '{"text": "again", "after": "20m"}'))
        return text("You're welcome!")

    arguments = json.dumps({"text": body, "after": "20m"})
    model.steps = [calls(ToolCall("c1", "schedule_reminder", arguments)), text("Done.")]
    await say("please set a reminder in 20 minutes", "u1")
    await h.clock.advance(20 * 60)
    assert await h.source.fire_due() == 1

    model.steps = [responder]
    await say("thanks", "u2")
    _, prompt, tool_specs = model.requests[-1]
    assert tool_specs  # the model could have scheduled
    assert {"role": "assistant", "content": body} in prompt
    assert not any(m["role"] == "user" and body in m["content"] for m in prompt)
    assert [(r.text, r.status) for r in await h.reminders.list_all()] == [(body, "done")]
    assert ("assistant", "reminder", body) in await h.transcript()


# --- missed reminders and restarts -----------------------------------------------------------


async def test_slightly_late_after_a_restart_fires_once(h: Harness, caplog) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    r = await h.add(cron="0 9 * * *")
    h.clock.set(utc(2026, 12, 1, 8, 20))  # 20 minutes late, within 1 h of a daily grace
    h.restart()
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await h.source.recover_missed() == 1
    assert h.sender.texts() == ["stretch"]  # not marked late
    assert "reminder_fired" in caplog.text and "startup=True" in caplog.text
    assert (await h.get(r.id)).next_fire_at == utc(2026, 12, 2, 8, 0)
    assert await h.source.fire_due() == 0 and len(h.sender.sent) == 1


async def test_very_late_cron_skips_to_its_next_time_and_says_so(h: Harness, caplog) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    r = await h.add(cron="0 9 * * *")
    h.clock.set(utc(2026, 12, 1, 11, 0))  # 3 h late
    h.restart()
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await h.source.recover_missed() == 1
    assert h.sender.sent == []
    assert "reminder_missed_skipped" in caplog.text and r.id in caplog.text
    moved = await h.get(r.id)
    assert (moved.status, moved.next_fire_at, moved.attempts) == (
        "active",
        utc(2026, 12, 2, 8, 0),
        0,
    )


async def test_very_late_cron_is_skipped_even_while_its_platform_is_down(h: Harness) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    r = await h.add(cron="0 9 * * *")
    h.clock.set(utc(2026, 12, 1, 11, 0))
    h.platforms = set()
    h.restart()
    assert await h.source.recover_missed() == 1
    assert (await h.get(r.id)).next_fire_at == utc(2026, 12, 2, 8, 0)


async def test_very_late_one_shot_fires_once_marked_late(h: Harness, caplog) -> None:
    r = await h.add("call mum", after="20m")
    await h.clock.advance(3 * 3600)
    h.restart()
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await h.source.recover_missed() == 1
    assert h.sender.texts() == [LATE_PREFIX + "call mum"]
    assert "marked_late=True" in caplog.text
    assert (await h.get(r.id)).status == "done"
    assert await h.transcript() == [("assistant", "reminder", LATE_PREFIX + "call mum")]
    assert await h.source.recover_missed() == 0 and len(h.sender.sent) == 1


async def test_slightly_late_one_shot_fires_unmarked(h: Harness) -> None:
    await h.add("call mum", after="20m")
    await h.clock.advance(20 * 60 + 120)
    h.restart()
    assert await h.source.recover_missed() == 1
    assert h.sender.texts() == ["call mum"]


class BlockingSender(ScriptedSender):
    """Takes the message, then never returns: the process dies mid-send."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_stop_during_sends_is_never_sent_again(h: Harness, caplog) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    daily = await h.add("daily", cron="0 9 * * *", target=THREAD, key=THREAD_KEY)
    once = await h.add("one-shot", after="1h")  # both due at 08:00 UTC
    h.clock.set(utc(2026, 12, 1, 8, 0))
    stuck = BlockingSender()
    h.restart(stuck)
    task = asyncio.create_task(h.source.fire_due())
    # Two chats go out concurrently: both sends reach the platform...
    await until(lambda: len(stuck.sent) == 2)
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        task.cancel()  # ...and the process stops before either is confirmed.
        with pytest.raises(asyncio.CancelledError):
            await task
    assert caplog.text.count("reminder_outcome_unknown") == 2
    assert await h.reminders.claimed() == []
    failed = await h.get(once.id)
    assert failed.status == "failed" and "not sent again" in (failed.last_error or "")
    moved = await h.get(daily.id)
    assert (moved.status, moved.next_fire_at) == ("active", utc(2026, 12, 2, 8, 0))

    h.clock.set(utc(2026, 12, 1, 8, 1))
    h.restart()
    assert await h.source.recover_missed() == 0
    assert await h.source.fire_due() == 0
    assert h.sender.sent == []  # no second copy of either
    # The cron one carries on normally the next day.
    h.clock.set(utc(2026, 12, 2, 8, 0))
    assert await h.source.fire_due() == 1 and h.sender.texts() == ["daily"]


async def test_recovery_leaves_this_process_own_sends_alone(h: Harness) -> None:
    await h.add(after="1m")
    await h.clock.advance(60)
    blocking = BlockingSender()
    h.restart(blocking)
    task = asyncio.create_task(h.source.fire_due())
    await asyncio.wait_for(blocking.entered.wait(), 1)
    # Still in flight in this process: not a crash leftover.
    assert await h.source.recover_missed() == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class GatedSender(ScriptedSender):
    """Sends when the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        await self.gate.wait()
        return SendResult(message_id="p1")


async def test_overlapping_passes_send_once(h: Harness) -> None:
    await h.add(after="1m")
    await h.clock.advance(60)
    gated = GatedSender()
    h.restart(gated)
    first = asyncio.create_task(h.source.fire_due())
    await until(lambda: len(gated.sent) == 1)
    assert await h.source.fire_due() == 0  # the scheduler woke again meanwhile
    assert await h.source.recover_missed() == 0
    gated.gate.set()
    assert await asyncio.wait_for(first, 1) == 1
    assert len(gated.sent) == 1 and await h.reminders.claimed() == []


# --- platforms, broken rows, cancellation -----------------------------------------------------


async def test_a_platform_without_a_running_adapter_waits(h: Harness) -> None:
    h.platforms = {"telegram"}
    await h.add("for discord", after="1m", target=THREAD, key=THREAD_KEY)
    await h.clock.advance(60)
    assert await h.source.next_due() is None  # nothing this process could send
    assert await h.source.fire_due() == 0
    h.platforms.add("discord")
    assert await h.source.next_due() is not None
    assert await h.source.fire_due() == 1
    assert [o.target for o in h.sender.sent] == [THREAD]


async def test_a_broken_row_is_reported_and_skipped(h: Harness, caplog) -> None:
    h.clock.set(utc(2026, 12, 1, 7, 0))
    good = await h.add("good one", cron="0 8 * * *")
    bad = await h.add("bad one", cron="0 8 * * *")
    bad_tz = await h.add("bad zone", after="1m")
    sql = "UPDATE reminders SET cron = 'every blue moon' WHERE id = ?"
    await store_execute(h.store, sql, (bad.id,))
    sql = "UPDATE reminders SET timezone = 'Nowhere/Else', kind = 'cron', cron = '* * * * *' "
    await store_execute(h.store, sql + "WHERE id = ?", (bad_tz.id,))
    h.clock.set(utc(2026, 12, 2, 7, 0))
    with caplog.at_level(logging.INFO, logger="kept.reminders"):
        assert await h.source.fire_due() == 1
    assert h.sender.texts() == ["good one"]
    assert "reminder_broken" in caplog.text and bad.id in caplog.text
    for r in (bad, bad_tz):
        broken = await h.get(r.id)
        assert broken.status == "failed" and "unusable schedule" in (broken.last_error or "")
    assert (await h.get(good.id)).status == "active"
    # Marked failed, the broken rows no longer keep the scheduler awake.
    assert await h.source.next_due() == utc(2026, 12, 3, 7, 0)


async def test_a_cancelled_reminder_does_not_fire(h: Harness) -> None:
    r = await h.add(after="1m")
    assert await h.service.cancel(r.id, agent_id="main", session_key=KEY) is not None
    await h.clock.advance(60)
    assert await h.source.fire_due() == 0 and h.sender.sent == []
    assert await h.source.next_due() is None


async def test_many_due_reminders_all_fire_in_order_per_chat(h: Harness) -> None:
    for i in range(130):  # more than one page
        key, target = (KEY, CHAT) if i % 2 else (THREAD_KEY, THREAD)
        await h.add(f"r{i:03d}", after=f"{60 + i}s", target=target, key=key)
    await h.clock.advance(3600)
    assert await h.source.fire_due() == 130
    for target in (CHAT, THREAD):
        texts = [o.text for o in h.sender.sent if o.target == target]
        assert texts == sorted(texts) and len(texts) == 65
