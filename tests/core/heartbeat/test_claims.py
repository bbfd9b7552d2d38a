"""The heartbeat's two-phase claim on each backend: `claimed` during
the model call (released on stop, on a lost fence, or when its lease runs
out), `sending` just before the platform call (a lost outcome ends `failed`,
never re-sent). Each guarantee is forced by gating the model or the sender on
an asyncio.Event, never by racing them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.commitments.model import Commitment
from core.config.model import KeptConfig
from core.delivery.lease import turn_lease
from core.heartbeat.source import SCOPE_CONCURRENCY
from core.llm import Completion
from core.messages import Outbound, SendResult
from core.store.dialect import to_ms
from core.store.sql.commitments import SqlCommitmentStore
from core.store.sqlite import SqliteStore
from core.store.sqlite.migrations import load_migrations
from tests.support.heartbeat_harness import SCOPE, WORKER, Harness, make_harness
from tests.support.held_answer import HeldAnswer
from tests.support.scripted_model import text
from tests.support.store_helpers import commitment_store_for, heartbeat_store_for

DEAD = "dead-host:999:0badc0de"
LEASE = timedelta(minutes=5)


@pytest.fixture
async def hb(tmp_path: Path, storage_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path, url=storage_url)
    yield harness
    await harness.store.close()


@pytest.fixture
async def sqlite_hb(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path)
    yield harness
    await harness.store.close()


class Gate:
    """A model step that holds the model call until the test opens it."""

    def __init__(self, answer: str = "How did the interview go?") -> None:
        self.entered = asyncio.Event()
        self.open = asyncio.Event()
        self.answer = answer

    async def __call__(self, messages: list[dict[str, Any]], tools: Any) -> Completion:
        self.entered.set()
        await self.open.wait()
        return text(self.answer)


class HoldingSender:
    """Takes the message and never answers: the outcome stays unknown."""

    def __init__(self) -> None:
        self.sent: list[Outbound] = []
        self.entered = asyncio.Event()

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def claim_columns(hb: Harness, commitment_id: str) -> tuple[Any, ...]:
    rows = await hb.fetchall(
        "SELECT claim_phase, claimed_by, lease_until, claimed_at FROM commitments WHERE id = ?",
        (commitment_id,),
    )
    return tuple(rows[0])


async def dead_worker_claim(hb: Harness, c: Commitment, *, sending: bool) -> Commitment:
    """What a worker that died left: a claim (moved to `sending` if asked)."""
    now = hb.clock.now()
    [claimed] = await hb.heartbeat.claim([c.id], worker=DEAD, now=now, lease_until=now + LEASE)
    if sending:
        assert await hb.heartbeat.begin_sending(
            [claimed], worker=DEAD, now=now, lease_until=now + LEASE
        )
    return claimed


async def test_stop_during_the_model_call_releases_the_claim_and_it_is_sent_later(hb: Harness):
    c = await hb.seed()
    gate = Gate()
    hb.model.steps.append(gate)
    scheduler = hb.scheduler()
    tick = asyncio.create_task(scheduler.tick())
    await asyncio.wait_for(gate.entered.wait(), 1)
    assert (await claim_columns(hb, c.id))[:2] == ("claimed", WORKER)

    tick.cancel()  # the process is stopping
    with pytest.raises(asyncio.CancelledError):
        await tick

    released = await hb.status(c.id)
    assert released.status == "pending" and released.attempts == 1
    assert "stopped before sending" in (released.last_error or "")
    assert await claim_columns(hb, c.id) == (None, None, None, None)
    assert hb.sender.attempts == []

    # The next process (or turn) delivers it, once.
    await hb.clock.advance(3600)
    hb.model.steps.append(text("How did the interview go?"))
    await hb.scheduler().tick()
    assert [o.text for o in hb.sender.sent] == ["How did the interview go?"]
    assert (await hb.status(c.id)).status == "sent"


async def test_a_stop_while_the_claim_statement_answers_releases_what_it_took(hb: Harness):
    c = await hb.seed()
    held = HeldAnswer(hb.heartbeat, "claim_due")
    hb.heartbeat = held  # type: ignore[assignment]
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(held.entered.wait(), 1)
    assert (await claim_columns(hb, c.id))[:2] == ("claimed", WORKER)

    tick.cancel()  # the process is stopping
    await asyncio.sleep(0)
    held.open.set()
    with pytest.raises(asyncio.CancelledError):
        await tick
    assert await claim_columns(hb, c.id) == (None, None, None, None)
    assert (await hb.status(c.id)).status == "pending" and hb.sender.attempts == []


class HeldTurns:
    """A model step for every turn: each call waits until the test opens it."""

    def __init__(self, expected: int) -> None:
        self.calls = 0
        self.expected = expected
        self.all_in = asyncio.Event()  # `expected` calls are waiting
        self.open = asyncio.Event()

    async def __call__(self, messages: list[dict[str, Any]], tools: Any) -> Completion:
        self.calls += 1
        if self.calls >= self.expected:
            self.all_in.set()
        await self.open.wait()
        return text("How did it go?")


async def test_stop_mid_tick_releases_every_claim_running_queued_or_waiting(hb: Harness):
    """More chats are due than run at once: some turns are in the model call,
    some claimed chats wait in the queue, the rest of the page waits for a
    place. Stopping releases all of their claims; nothing was sent."""
    chats = SCOPE_CONCURRENCY * 3
    for n in range(chats):
        await hb.seed(
            replace(SCOPE, session_key=f"agent:main:telegram:private:{n}", chat_id=str(n))
        )
    held = HeldTurns(expected=SCOPE_CONCURRENCY)
    hb.model.steps.extend([held] * chats)
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(held.all_in.wait(), 2)
    claimed = await hb.fetchall("SELECT count(*) FROM commitments WHERE claim_phase IS NOT NULL")
    assert claimed[0][0] > SCOPE_CONCURRENCY  # queued and waiting ones are claimed too

    tick.cancel()
    with pytest.raises(asyncio.CancelledError):
        await tick
    left = await hb.fetchall("SELECT count(*) FROM commitments WHERE claim_phase IS NOT NULL")
    assert left[0][0] == 0
    pending = await hb.fetchall("SELECT count(*) FROM commitments WHERE status = 'pending'")
    assert pending[0][0] == chats
    assert hb.sender.attempts == []


async def test_a_live_claim_of_another_worker_is_left_alone(hb: Harness):
    c = await hb.seed()
    await dead_worker_claim(hb, c, sending=False)
    scheduler = hb.scheduler()
    await scheduler.start_up()
    await scheduler.tick()
    await hb.clock.advance(LEASE.total_seconds() - 1)
    await scheduler.tick()
    assert hb.model.requests == [] and hb.sender.attempts == []
    assert (await claim_columns(hb, c.id))[:2] == ("claimed", DEAD)
    assert (await hb.status(c.id)).status == "pending"


async def test_an_expired_unsent_claim_is_released_at_start_up_and_delivered_once(hb: Harness):
    c = await hb.seed()
    await dead_worker_claim(hb, c, sending=False)
    await hb.clock.advance(LEASE.total_seconds())
    hb.model.steps.append(text("How did the interview go?"))
    scheduler = hb.scheduler()
    await scheduler.start_up()
    released = await hb.status(c.id)
    assert released.status == "pending" and released.attempts == 1  # attempt kept
    assert "released, nothing sent" in (released.last_error or "")
    await scheduler.tick()
    await scheduler.tick()
    assert len(hb.sender.sent) == 1 and (await hb.status(c.id)).status == "sent"


async def test_a_claim_whose_lease_ends_after_start_up_is_handled_by_a_later_tick(hb: Harness):
    c = await hb.seed()
    await dead_worker_claim(hb, c, sending=False)
    scheduler = hb.scheduler()
    await scheduler.start_up()
    # The loop plans to wake when that lease ends, not 5 minutes past it.
    assert await scheduler.tick() == hb.clock.now() + LEASE
    await hb.clock.advance(LEASE.total_seconds())
    hb.model.steps.append(text("How did the interview go?"))
    await scheduler.tick()
    assert len(hb.sender.sent) == 1 and (await hb.status(c.id)).status == "sent"


async def test_an_expired_sending_claim_ends_failed_and_is_never_retried(hb: Harness):
    c = await hb.seed()
    await dead_worker_claim(hb, c, sending=True)
    scheduler = hb.scheduler()
    await scheduler.start_up()
    await scheduler.tick()
    assert (await hb.status(c.id)).status == "pending"  # live: maybe still sending
    await hb.clock.advance(LEASE.total_seconds())
    await scheduler.tick()
    failed = await hb.status(c.id)
    assert failed.status == "failed" and "outcome unknown" in (failed.last_error or "")
    assert await claim_columns(hb, c.id) == (None, None, None, None)
    for _ in range(3):
        await hb.clock.advance(3600)
        await hb.scheduler().start_up()
        await scheduler.tick()
    assert hb.model.requests == [] and hb.sender.attempts == []


async def test_stop_while_sending_ends_failed_and_is_never_retried(hb: Harness):
    c = await hb.seed()
    holding = HoldingSender()
    hb.sender = holding  # type: ignore[assignment]
    hb.model.steps.append(text("How did it go?"))
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(holding.entered.wait(), 1)
    assert (await claim_columns(hb, c.id))[0] == "sending"
    tick.cancel()
    with pytest.raises(asyncio.CancelledError):
        await tick
    failed = await hb.status(c.id)
    assert failed.status == "failed" and "outcome unknown" in (failed.last_error or "")
    assert await claim_columns(hb, c.id) == (None, None, None, None)
    await hb.clock.advance(3600)
    await hb.scheduler().tick()
    assert len(holding.sent) == 1


async def test_a_refused_send_ends_failed_with_no_claim_left(hb: Harness):
    c = await hb.seed()
    hb.sender.results = [SendResult(error="Forbidden: bot was blocked by the user")]
    hb.model.steps.append(text("How did it go?"))
    await hb.scheduler().tick()
    done = await hb.status(c.id)
    assert done.status == "failed" and "blocked" in (done.last_error or "")
    assert await claim_columns(hb, c.id) == (None, None, None, None)
    assert len(hb.sender.attempts) == 1


@pytest.mark.parametrize("meanwhile", ["dismissed", "snoozed", "lease_taken_over"])
async def test_a_claim_lost_during_the_model_call_sends_nothing(hb: Harness, meanwhile: str):
    c = await hb.seed()
    gate = Gate()
    hb.model.steps.append(gate)
    tick = asyncio.create_task(hb.scheduler().tick())
    await asyncio.wait_for(gate.entered.wait(), 1)
    now = hb.clock.now()
    if meanwhile == "dismissed":
        assert await hb.commitments.dismiss(c.id, now=now) is not None
    elif meanwhile == "snoozed":
        day = timedelta(days=1)
        assert await hb.commitments.snooze(c.id, until=now + day, latest=now + 2 * day, now=now)
    else:
        # The model took longer than the lease: another worker reaped the
        # claim and took it; this turn's fence must fail.
        await hb.clock.advance(turn_lease(hb.config.llm).total_seconds() + 1)
        reaped = await hb.heartbeat.reap_expired_claims(now=hb.clock.now())
        assert [x.id for x in reaped.released] == [c.id]
        other = hb.clock.now()
        await hb.heartbeat.claim([c.id], worker=DEAD, now=other, lease_until=other + LEASE)
    gate.open.set()
    await asyncio.wait_for(tick, 1)
    assert hb.sender.attempts == []
    if meanwhile == "lease_taken_over":
        # The other worker's claim is untouched by the loser.
        assert (await claim_columns(hb, c.id))[:2] == ("claimed", DEAD)
    else:
        assert (await hb.status(c.id)).status == meanwhile
        assert await claim_columns(hb, c.id) == (None, None, None, None)


async def test_the_lease_outlasts_the_model_call_and_the_send() -> None:
    llm = KeptConfig.model_validate({"llm": {"timeoutSeconds": 60, "maxRetries": 2}}).llm
    # Three attempts of up to 121 s each, plus the send's retries.
    assert turn_lease(llm) > timedelta(seconds=3 * 121 + 4 * 60)


async def test_a_claim_written_before_the_upgrade_is_failed_not_resent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Older code claimed before the model call and may have been mid-send:
    migration 0007 keeps such a claim as an expired `sending` one."""

    async def no_switches_yet(self: SqlCommitmentStore, tx: Any, scope: Any) -> bool:
        return False  # schema 6 predates the follow-up switches (step 18)

    async with SqliteStore(tmp_path / "kept.sqlite", migrations=load_migrations()[:6]) as v6:
        old = await make_harness_on(v6, tmp_path)
        with monkeypatch.context() as patched:
            patched.setattr(SqlCommitmentStore, "_silenced", no_switches_yet)
            c = await old.seed()
        sql = "UPDATE commitments SET claimed_at = ? WHERE id = ?"
        params = (to_ms(old.clock.now()), c.id)
        await v6.connection.run_write(lambda db: db.execute(sql, params))
    hb = await make_harness(tmp_path)
    try:
        assert (await claim_columns(hb, c.id))[0] == "sending"
        await hb.scheduler().start_up()
        failed = await hb.status(c.id)
        assert failed.status == "failed" and "not resent" in (failed.last_error or "")
        assert await claim_columns(hb, c.id) == (None, None, None, None)
    finally:
        await hb.store.close()


async def make_harness_on(store: SqliteStore, tmp_path: Path) -> Harness:
    hb = await make_harness(tmp_path / "unused")
    await hb.store.close()
    hb.store = store
    hb.commitments = commitment_store_for(store)
    hb.heartbeat = heartbeat_store_for(store)
    return hb


async def test_finding_expired_claims_uses_the_lease_index(sqlite_hb: Harness) -> None:
    hb = sqlite_hb
    c = await hb.seed()
    await dead_worker_claim(hb, c, sending=False)
    statements: list[str] = []
    db = hb.store.connection._db  # type: ignore[attr-defined]
    await db._execute(db._conn.set_trace_callback, statements.append)
    try:
        await hb.heartbeat.next_lease_expiry()
        await hb.heartbeat.reap_expired_claims(now=hb.clock.now() + LEASE)
    finally:
        await db._execute(db._conn.set_trace_callback, None)
    lease_queries = [s for s in statements if "lease_until" in s and "commitments" in s]
    assert len(lease_queries) == 3
    for sql in lease_queries:
        rows = await hb.store.connection.fetchall("EXPLAIN QUERY PLAN " + sql)  # type: ignore[attr-defined]
        plan = " | ".join(str(row[3]) for row in rows)
        assert "commitments_lease" in plan, (sql, plan)
