"""A heartbeat tick with nothing deliverable calls no model, and a spent
token budget makes due follow-ups wait (neither lost nor failed): both
decided in code, before any call, on each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.commitments.model import Scope
from core.limits import Meter
from core.limits.store import BOT, CallUsage, Subject
from core.llm import Completion, Usage
from tests.support.heartbeat_harness import SCOPE, Harness, make_harness
from tests.support.scripted_model import text
from tests.support.store_helpers import budgets_for, followup_prefs_for

NOON = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(
        tmp_path,
        {"limits": {"perUser": {"tokensPerDay": 1000}}, "commitments": {"maxPerDay": 1}},
        url=storage_url,
    )
    harness.clock.set(NOON)
    yield harness
    await harness.store.close()


def metered(hb: Harness) -> Meter:
    return Meter(hb.model, config=lambda: hb.config, clock=hb.clock, budgets=budgets_for(hb.store))


async def spend(hb: Harness, scope: Scope, tokens: int) -> None:
    member = Subject("user", scope.platform, scope.sender_id or scope.chat_id)
    usage = CallUsage(
        at=hb.clock.now(), agent_id="main", role="chat", model="m", platform=scope.platform,
        user_id=member.subject_id, chat_id=scope.chat_id, shared=False, tokens_in=tokens,
        tokens_out=0, estimated=False,
    )  # fmt: skip
    await budgets_for(hb.store).record(
        usage, [member, BOT], hb.clock.now().date().isoformat(), None
    )


async def test_a_spent_budget_keeps_due_follow_ups_waiting_without_a_call(hb: Harness) -> None:
    c = await hb.seed()
    await spend(hb, SCOPE, 1000)
    scheduler = hb.scheduler(meter=metered(hb))
    await scheduler.tick()
    assert hb.model.requests == [] and hb.sender.attempts == []
    waiting = await hb.status(c.id)
    assert waiting.status == "pending" and "budget" in (waiting.last_error or "")
    # Ticks go on calling nothing while the day lasts.
    await hb.clock.advance(3600)
    await scheduler.tick()
    assert hb.model.requests == []
    # A new UTC day has budget again: the check-in goes out.
    hb.clock.set(NOON + timedelta(hours=20))  # 08:00 the next day
    hb.model.steps.append(
        Completion("How did the interview go?", [], "stop", "m", usage=Usage(200, 20))
    )
    await scheduler.tick()
    assert (await hb.status(c.id)).status == "sent"
    assert len(hb.model.requests) == 1


async def test_a_check_in_cut_at_the_output_cap_is_not_sent(hb: Harness) -> None:
    c = await hb.seed()
    hb.model.steps.append(Completion("How did the inter", [], "length", "m"))
    await hb.scheduler(meter=metered(hb)).tick()
    assert hb.sender.attempts == []
    assert (await hb.status(c.id)).status == "pending"


async def test_nothing_deliverable_means_no_model_call(hb: Harness) -> None:
    """Each reason a tick has nothing to say, and one positive control:
    with the reason gone, the same follow-up makes the call."""
    scheduler = hb.scheduler(meter=metered(hb), prefs=followup_prefs_for(hb.store))
    # Not due yet.
    c = await hb.seed(due_in=3600, window=10 * 86400)
    await scheduler.tick()
    # Quiet hours (the default 08:00-22:00 in UTC): due, but at 23:30.
    hb.clock.set(NOON.replace(hour=23, minute=30))
    await scheduler.tick()
    # The daily cap (maxPerDay 1) already used by another check-in today.
    hb.clock.set(NOON + timedelta(days=1))
    await hb.execute(
        "UPDATE commitments SET status = 'sent', sent_at = ? WHERE id = ?",
        (hb.db_time(hb.clock.now() - timedelta(hours=1)), (await hb.seed(key="other")).id),
    )
    await scheduler.tick()
    # The member's budget is spent.
    hb.clock.set(NOON + timedelta(days=2))
    await spend(hb, SCOPE, 1000)
    await scheduler.tick()
    # The member switched follow-ups off (a new follow-up, the old dismissed).
    assert hb.model.requests == []
    assert (await hb.status(c.id)).status == "pending"
    # The positive control: the next day, nothing in the way, one call.
    hb.clock.set(NOON + timedelta(days=3))
    hb.model.steps.append(text("How did the interview go?"))
    await scheduler.tick()
    assert len(hb.model.requests) == 1
    assert (await hb.status(c.id)).status == "sent"
    # Switched off: dismissed before any call.
    prefs = followup_prefs_for(hb.store)
    late = await hb.seed(key="late", window=10 * 86400)
    await prefs.set_user("main", SCOPE.platform, SCOPE.sender_id or "", False, now=hb.clock.now())
    hb.clock.set(NOON + timedelta(days=4))
    await scheduler.tick()
    assert len(hb.model.requests) == 1
    assert (await hb.status(late.id)).status == "dismissed"
