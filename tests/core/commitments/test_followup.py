"""The buttons under a heartbeat follow-up, in core: `followup_dismiss` and
`followup_snooze` act on a delivered (`sent`) follow-up as well as on an
active one, on a real SQLite store and through the real heartbeat scheduler."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from core.commitments.model import Commitment
from core.commitments.rules import MAX_HORIZON, MAX_WINDOW
from core.commitments.service import (
    MIN_SNOOZE_WINDOW,
    CommitmentService,
    SnoozeError,
)
from core.store.sql.commitments import NO_ACTIVE_TWIN, filter_sql
from tests.support.heartbeat_harness import OTHER, SCOPE, Harness, make_harness
from tests.support.scripted_model import text
from tests.support.store_helpers import chat_filter

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
HERE = chat_filter(SCOPE.agent_id, SCOPE.session_key, None)


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


def service(hb: Harness) -> CommitmentService:
    return CommitmentService(hb.commitments, hb.clock)


async def delivered(hb: Harness, **seed: object) -> Commitment:
    """A commitment the heartbeat has just sent as a check-in."""
    c = await hb.seed(**seed)  # type: ignore[arg-type]
    hb.model.steps.append(text("Hi! How did the interview go?"))
    await hb.scheduler().tick()
    done = await hb.status(c.id)
    assert done.status == "sent" and done.sent_at == hb.clock.now()
    return done


async def set_status(hb: Harness, commitment_id: str, status: str) -> None:
    sql = "UPDATE commitments SET status = ? WHERE id = ?"
    await hb.execute(sql, (status, commitment_id))


# --- snooze ---------------------------------------------------------------------


async def test_snooze_on_a_sent_one_brings_it_up_again_tomorrow_exactly_once(hb: Harness):
    c = await delivered(hb)
    scheduler = hb.scheduler()
    await hb.clock.advance(3600)  # the user presses an hour later
    pressed = hb.clock.now()

    outcome = await service(hb).followup_snooze([c.id], duration=DAY, where=HERE)

    assert outcome.failed == []
    [snoozed] = outcome.snoozed
    assert snoozed.status == "snoozed" and snoozed.snoozed_until == pressed + DAY
    # The window keeps its width (36 h here).
    assert (snoozed.due_earliest, snoozed.due_latest) == (pressed + DAY, pressed + DAY + 36 * HOUR)
    # The earlier delivery still counts toward the rolling cap.
    assert snoozed.sent_at == c.sent_at and snoozed.sent_message_id == c.sent_message_id
    assert snoozed.attempts == c.attempts

    await scheduler.tick()
    await hb.clock.advance(23 * 3600)
    await scheduler.tick()
    assert len(hb.sender.sent) == 1, "nothing before the snooze is over"

    await hb.clock.advance(3600)
    hb.model.steps.append(text("Morning! Did the interview go well in the end?"))
    await scheduler.tick()
    await scheduler.tick()
    await hb.clock.advance(2 * 3600)
    await scheduler.tick()
    assert [o.text for o in hb.sender.sent] == [
        "Hi! How did the interview go?",
        "Morning! Did the interview go well in the end?",
    ]
    assert len(hb.model.requests) == 2
    again = await hb.status(c.id)
    assert again.status == "sent" and again.sent_at == pressed + DAY


async def test_the_snoozed_window_is_at_least_two_hours_and_at_most_max_window(hb: Harness):
    narrow = await hb.seed(window=600, key="narrow")
    wide = await hb.seed(window=10 * 86400, key="wide")
    await set_status(hb, narrow.id, "sent")
    await set_status(hb, wide.id, "sent")
    now = hb.clock.now()

    outcome = await service(hb).followup_snooze([narrow.id, wide.id], duration=DAY, where=HERE)

    widths = {c.id: c.due_latest - c.due_earliest for c in outcome.snoozed}
    assert widths == {narrow.id: MIN_SNOOZE_WINDOW, wide.id: MAX_WINDOW}
    assert {c.due_earliest for c in outcome.snoozed} == {now + DAY}


async def test_snooze_on_an_active_one_is_the_ordinary_snooze(hb: Harness):
    c = await hb.seed(due_in=3600)
    outcome = await service(hb).followup_snooze([c.id, c.id], duration=DAY, where=HERE)
    [snoozed] = outcome.snoozed
    assert snoozed.status == "snoozed" and snoozed.due_earliest == hb.clock.now() + DAY
    assert snoozed.sent_at is None


async def test_snooze_clears_a_leftover_claim(hb: Harness):
    c = await delivered(hb)
    sql = "UPDATE commitments SET claimed_at = ? WHERE id = ?"
    await hb.execute(sql, (hb.db_time(hb.clock.now()), c.id))

    await service(hb).followup_snooze([c.id], duration=DAY, where=HERE)

    tomorrow = hb.clock.now() + DAY
    due = await hb.heartbeat.due_unclaimed(now=tomorrow, limit=10)
    assert [x.id for x in due] == [c.id]


async def test_snooze_is_refused_when_the_topic_is_open_again(hb: Harness):
    c = await delivered(hb, key="interview")
    # The conversation went on, and extraction opened the same topic again.
    reopened = await hb.seed(key="interview", due_in=6 * 3600)
    assert reopened.id != c.id and reopened.status == "pending"

    outcome = await service(hb).followup_snooze([c.id], duration=DAY, where=HERE)

    assert outcome.snoozed == []
    assert outcome.failed == [(c.id, f"already open again as {reopened.id}")]
    assert (await hb.status(c.id)).status == "sent"
    assert (await hb.status(reopened.id)).due_earliest == hb.clock.now() + 6 * HOUR


async def test_snooze_needs_a_duration_in_range(hb: Harness):
    c = await delivered(hb)
    for bad in (timedelta(0), -HOUR, MAX_HORIZON + HOUR):
        with pytest.raises(SnoozeError):
            await service(hb).followup_snooze([c.id], duration=bad, where=HERE)
    assert (await hb.status(c.id)).status == "sent"


# --- dismiss --------------------------------------------------------------------


async def test_dismiss_on_a_sent_one_closes_it_and_it_still_counts_toward_the_cap(
    tmp_path: Path,
    storage_url: str,
):
    hb = await make_harness(tmp_path, {"commitments": {"maxPerDay": 1}}, url=storage_url)
    try:
        c = await delivered(hb)
        sent_at = c.sent_at
        assert sent_at is not None
        await hb.clock.advance(600)

        outcome = await service(hb).followup_dismiss([c.id], HERE)

        [closed] = outcome.dismissed
        assert outcome.failed == []
        assert closed.status == "dismissed" and closed.dismissed_at == hb.clock.now()
        assert closed.sent_at == sent_at
        since = sent_at - HOUR
        assert await hb.heartbeat.sent_times_since("main", SCOPE.session_key, since) == [sent_at]

        # Another follow-up due now waits until that delivery leaves the 24 h window.
        later = await hb.seed(key="later", text="Did the parcel arrive?")
        scheduler = hb.scheduler()
        await hb.clock.advance(3600)
        await scheduler.tick()
        assert len(hb.sender.sent) == 1 and (await hb.status(later.id)).status == "pending"
        hb.clock.set(sent_at + DAY + timedelta(seconds=1))
        hb.model.steps.append(text("Did the parcel arrive?"))
        await scheduler.tick()
        assert len(hb.sender.sent) == 2 and (await hb.status(later.id)).status == "sent"
        assert (await hb.status(c.id)).status == "dismissed"
    finally:
        await hb.store.close()


async def test_dismiss_on_an_active_one_is_the_ordinary_dismiss(hb: Harness):
    c = await hb.seed(due_in=3600)
    outcome = await service(hb).followup_dismiss([c.id], HERE)
    [closed] = outcome.dismissed
    assert closed.status == "dismissed" and closed.sent_at is None


# --- what the buttons may not change --------------------------------------------


async def test_an_id_from_another_scope_is_not_found(hb: Harness):
    c = await delivered(hb)
    elsewhere = chat_filter(OTHER.agent_id, OTHER.session_key, None)
    other_agent = replace(HERE, agent_id="other")
    other_sender = chat_filter(SCOPE.agent_id, SCOPE.session_key, "someone-else")
    svc = service(hb)
    for where in (elsewhere, other_agent, other_sender):
        snoozed = await svc.followup_snooze([c.id], duration=DAY, where=where)
        dismissed = await svc.followup_dismiss([c.id], where)
        assert snoozed.snoozed == [] and snoozed.failed == [(c.id, "not found")]
        assert dismissed.dismissed == [] and dismissed.failed == [(c.id, "not found")]
    unknown = await svc.followup_snooze(["cm_000000000000"], duration=DAY, where=HERE)
    assert unknown.failed == [("cm_000000000000", "not found")]
    after = await hb.status(c.id)
    assert (after.status, after.due_earliest, after.updated_at) == (
        "sent",
        c.due_earliest,
        c.updated_at,
    )


@pytest.mark.parametrize("status", ["dismissed", "resolved", "expired", "failed"])
async def test_any_other_final_status_is_already_that(hb: Harness, status: str):
    c = await hb.seed()
    await set_status(hb, c.id, status)
    before = await hb.status(c.id)
    svc = service(hb)

    snoozed = await svc.followup_snooze([c.id], duration=DAY, where=HERE)
    dismissed = await svc.followup_dismiss([c.id], HERE)

    assert snoozed.failed == [(c.id, f"already {status}")] and snoozed.snoozed == []
    assert dismissed.failed == [(c.id, f"already {status}")] and dismissed.dismissed == []
    assert await hb.status(c.id) == before


async def test_resolved_and_expired_through_the_store_say_so(hb: Harness):
    resolved = await hb.seed(key="resolved")
    expired = await hb.seed(key="expired", window=3600)
    now = hb.clock.now()
    await hb.commitments.apply_extraction(SCOPE, [], [resolved.id], now=now)
    assert await hb.commitments.expire(before=now + 2 * HOUR, now=now) == 1
    svc = service(hb)

    snoozed = await svc.followup_snooze([resolved.id, expired.id], duration=DAY, where=HERE)
    dismissed = await svc.followup_dismiss([expired.id, resolved.id], HERE)

    assert snoozed.failed == [(resolved.id, "already resolved"), (expired.id, "already expired")]
    assert dismissed.failed == [(expired.id, "already expired"), (resolved.id, "already resolved")]


async def test_the_reopen_statement_finds_its_twin_by_the_dedupe_index(tmp_path: Path):
    hb = await make_harness(tmp_path)  # SQLite's plan; PostgreSQL's in test_followup_plans_pg
    clause, params = filter_sql(HERE)
    sql = (
        f"UPDATE commitments SET status = 'snoozed' WHERE id = ? AND {clause} "
        f"AND status = 'sent' AND {NO_ACTIVE_TWIN}"
    )
    try:
        rows = await hb.store.connection.fetchall(f"EXPLAIN QUERY PLAN {sql}", ["cm_1", *params])  # type: ignore[attr-defined]
    finally:
        await hb.store.close()
    plan = " | ".join(str(r[3]) for r in rows)
    assert "commitments_dedupe" in plan and "SCAN commitments" not in plan
