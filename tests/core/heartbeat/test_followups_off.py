"""A user (or a group) that switched follow-ups off gets no check-in, on
each backend: a follow-up already due, or one an extraction already under
way stored after the switch, is dismissed with the reason before any claim
or model call; one switched off while the model wrote its check-in is not
sent (the preference is read in the statement that starts the send).
Another user's is sent; reminders still fire."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.commitments.model import Scope
from core.llm import Completion
from core.messages import Target
from core.reminders import parse_schedule
from core.store.sql.commitments import SqlCommitmentStore
from core.users.followup_prefs import DISMISSED_REASON
from tests.support.heartbeat_harness import OTHER, SCOPE, Harness, make_harness
from tests.support.scripted_model import text
from tests.support.store_helpers import followup_prefs_for

GROUP_KEY = "agent:main:telegram:group:-500"
ANN_IN_GROUP = Scope("main", GROUP_KEY, "telegram", "-500", None, "1", chat_kind="group")
BEN_IN_GROUP = Scope("main", GROUP_KEY, "telegram", "-500", None, "2", chat_kind="group")


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


def checkin(hb: Harness, *texts: str) -> None:
    hb.model.steps.extend(text(t) for t in texts)


@contextlib.contextmanager
def switch_read_before_it_committed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Rows stored as by an extraction whose transaction read the switch just
    before the switch committed (PostgreSQL's READ COMMITTED allows it): the
    store's own check lets them through, so the heartbeat's must stop them."""

    async def not_yet(self: SqlCommitmentStore, tx: Any, scope: Any) -> bool:
        return False

    with monkeypatch.context() as patched:
        patched.setattr(SqlCommitmentStore, "_silenced", not_yet)
        yield


async def test_no_checkin_for_an_opted_out_user_even_when_due(
    hb: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefs = followup_prefs_for(hb.store)
    theirs = await hb.seed(SCOPE, text="How did the interview go?")
    others = await hb.seed(OTHER, text="How was the match?", reason="the match")
    # Stored after the switch, as by an extraction already under way at it:
    # switching off dismissed what was pending then, not this one.
    await prefs.set_user("main", "telegram", "42", False, now=hb.clock.now())
    assert (await hb.status(theirs.id)).status == "dismissed"
    with switch_read_before_it_committed(monkeypatch):
        late = await hb.seed(SCOPE, text="Did you sleep better?", reason="slept badly")
    assert (await hb.status(late.id)).status == "pending"

    checkin(hb, "How was the match?")
    await hb.scheduler(prefs=prefs).tick()

    assert [(o.target.chat_id, o.text) for o in hb.sender.sent] == [("77", "How was the match?")]
    assert (await hb.status(others.id)).status == "sent"  # the positive control
    dismissed = await hb.status(late.id)
    assert (dismissed.status, dismissed.last_error) == ("dismissed", DISMISSED_REASON)
    # One model call: the other user's check-in; none was written for theirs.
    assert len(hb.model.requests) == 1
    prompt = str(hb.model.requests)
    assert "the match" in prompt
    assert "interview" not in prompt and "sleep" not in prompt


async def test_switched_off_while_the_model_writes_nothing_is_sent(hb: Harness) -> None:
    prefs = followup_prefs_for(hb.store)
    c = await hb.seed(SCOPE)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: Any) -> Completion:
        entered.set()
        await gate.wait()
        return text("How did the interview go?")

    hb.model.steps.append(slow)
    tick = asyncio.create_task(hb.scheduler(prefs=prefs).tick())
    await asyncio.wait_for(entered.wait(), 1)
    # From another worker or the CLI: nothing in this process hears of it.
    other_process = followup_prefs_for(hb.store)
    await other_process.set_user("main", "telegram", "42", False, now=hb.clock.now())
    gate.set()
    await asyncio.wait_for(tick, 1)
    assert hb.sender.attempts == []
    assert (await hb.status(c.id)).status == "dismissed"


async def test_the_send_itself_reads_the_preference(hb: Harness) -> None:
    """Switched off after the turn's first look (the row stays pending: a
    preference row written directly, no dismissal), the statement that
    starts the send still refuses it."""
    prefs = followup_prefs_for(hb.store)
    c = await hb.seed(SCOPE)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]], tools: Any) -> Completion:
        entered.set()
        await gate.wait()
        return text("How did the interview go?")

    hb.model.steps.append(slow)
    tick = asyncio.create_task(hb.scheduler(prefs=prefs).tick())
    await asyncio.wait_for(entered.wait(), 1)
    await hb.execute(
        "INSERT INTO followup_preferences (agent_id, platform, user_id, enabled, updated_at) "
        "VALUES ('main', 'telegram', '42', 0, ?)",
        (hb.db_time(hb.clock.now()),),
    )
    gate.set()
    await asyncio.wait_for(tick, 1)
    assert hb.sender.attempts == []
    assert (await hb.status(c.id)).status == "pending"  # released, unsent
    # The next look dismisses it with the reason.
    await hb.clock.advance(3600)
    await hb.scheduler(prefs=prefs).tick()
    kept = await hb.status(c.id)
    assert (kept.status, kept.last_error) == ("dismissed", DISMISSED_REASON)
    assert hb.sender.attempts == []


async def test_a_group_switched_off_gets_no_checkin_a_member_only_theirs(
    hb: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefs = followup_prefs_for(hb.store)
    ann = await hb.seed(ANN_IN_GROUP, text="Ann, how was it?", reason="ann")
    ben = await hb.seed(BEN_IN_GROUP, text="Ben, how was it?", reason="ben")
    # A member's switch: only them.
    await prefs.set_user("main", "telegram", "1", False, now=hb.clock.now())
    checkin(hb, "Ben, how was it?")
    await hb.scheduler(prefs=prefs).tick()
    assert [o.text for o in hb.sender.sent] == ["Ben, how was it?"]
    assert (await hb.status(ann.id)).status == "dismissed"
    assert (await hb.status(ben.id)).status == "sent"

    # The admin's: nobody's in the group, while a private chat's still goes.
    await hb.clock.advance(3 * 3600)
    late_ben = await hb.seed(BEN_IN_GROUP, text="Ben, again?", reason="ben again")
    await prefs.set_chat("main", GROUP_KEY, False, now=hb.clock.now())
    assert (await hb.status(late_ben.id)).status == "dismissed"
    with switch_read_before_it_committed(monkeypatch):
        after = await hb.seed(BEN_IN_GROUP, text="Ben, third?", reason="ben third")
    mine = await hb.seed(OTHER, text="How was the match?")
    checkin(hb, "How was the match?")
    await hb.scheduler(prefs=prefs).tick()
    assert [o.text for o in hb.sender.sent] == ["Ben, how was it?", "How was the match?"]
    assert (await hb.status(after.id)).status == "dismissed"
    assert (await hb.status(mine.id)).status == "sent"


async def test_opted_out_reminders_still_fire(hb: Harness) -> None:
    prefs = followup_prefs_for(hb.store)
    await hb.seed(SCOPE)
    await prefs.set_user("main", "telegram", "42", False, now=hb.clock.now())
    schedule = parse_schedule(at=None, after="1m", cron=None, timezone="UTC", now=hb.clock.now())
    await hb.reminder_service().schedule(
        agent_id="main",
        session_key=SCOPE.session_key,
        target=Target("telegram", "42"),
        created_by="42",
        text="stretch",
        schedule=schedule,
    )
    scheduler = hb.scheduler(reminders=hb.reminder_source(), prefs=prefs)
    await hb.clock.advance(60)
    await scheduler.tick()
    assert [o.text for o in hb.sender.sent] == ["stretch"]
    assert hb.model.requests == []
