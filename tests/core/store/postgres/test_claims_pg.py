"""Delivery claims with several workers on one PostgreSQL database: each
worker is its own PostgresConnection (its own pool), as separate `kept run`
processes would be.

Workers claiming the same due rows at once get disjoint sets; a row another
transaction holds is skipped, not waited on (gated by holding a row lock in
an open transaction, not by racing); a live claim of another worker is never
reaped; an expired `sending` claim ends failed and is never claimed again;
extraction of one session is serialised across workers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core.commitments.model import NewCommitment, Scope
from core.commitments.store import ScopeResult
from core.messages import Target
from core.reminders.model import NewReminder
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.locks import EXTRACTION_NAMESPACE
from tests.support.followups import Followups, postgres_followups

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
CHATS = 300
# Long enough for any claim that does not wait on a lock; a claim that waits
# on the held lock never finishes inside it.
NOT_WAITING = 2.0


def scope(i: int) -> Scope:
    return Scope(
        "main", f"agent:main:telegram:private:{i}", "telegram", str(i), None, str(i),
        chat_kind="private",
    )  # fmt: skip


def candidate(s: Scope, key: str = "interview") -> NewCommitment:
    return NewCommitment(
        scope=s,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason="user has an interview",
        suggested_text="How did it go?",
        dedupe_key=key,
        confidence=0.8,
        due_earliest=NOW - timedelta(hours=1),
        due_latest=NOW + timedelta(hours=10),
        due_timezone="UTC",
        source_message_id=None,
        created_at=NOW - timedelta(hours=2),
    )


def reminder(i: int) -> NewReminder:
    return NewReminder(
        agent_id="main",
        session_key=scope(i).session_key,
        target=Target("telegram", str(i)),
        created_by=str(i),
        text=f"stretch {i}",
        kind="after",
        cron=None,
        timezone="UTC",
        next_fire_at=NOW - timedelta(minutes=1),
        created_at=NOW - timedelta(hours=1),
    )


@pytest.fixture
async def workers(postgres_url: str) -> AsyncIterator[list[Followups]]:
    """Three workers, each on its own connection pool."""
    connections = [PostgresConnection(postgres_url, max_size=3) for _ in range(3)]
    for db in connections:
        await db.open()
    try:
        yield [postgres_followups(db) for db in connections]
    finally:
        for db in connections:
            await db.close()


async def seed_commitments(worker: Followups, count: int = CHATS) -> list[str]:
    results = [ScopeResult(scope(i), [candidate(scope(i))], []) for i in range(count)]
    applied = await worker.commitments.apply_extractions(results, now=NOW, merge=_keep_old)
    assert len(applied.created) == count
    return [c.id for c in applied.created]


def _keep_old(old, new):  # type: ignore[no-untyped-def]
    raise AssertionError("no duplicates are seeded")


async def test_workers_claiming_the_same_due_commitments_get_disjoint_sets(
    workers: list[Followups],
) -> None:
    ids = await seed_commitments(workers[0])

    async def work(w: Followups, name: str) -> list[str]:
        taken: list[str] = []
        while True:
            # Every worker reads the same due rows and tries to claim them all.
            due = await w.heartbeat.due_unclaimed(now=NOW, limit=50)
            if not due:
                return taken
            claimed = await w.heartbeat.claim(
                [c.id for c in due], worker=name, now=NOW, lease_until=NOW + LEASE
            )
            taken.extend(c.id for c in claimed)

    sets = await asyncio.gather(*(work(w, f"w{i}") for i, w in enumerate(workers)))
    flat = [cid for s in sets for cid in s]
    assert len(flat) == len(set(flat)) == CHATS  # nobody claimed a row twice
    assert set(flat) == set(ids)
    rows = await workers[0].fetchall(
        "SELECT id, claimed_by, attempts, claim_phase FROM commitments"
    )
    assert {r[2:] for r in rows} == {(1, "claimed")}
    # The database names as claimant the worker that was told it claimed it.
    assert {r[0]: r[1] for r in rows} == {cid: f"w{i}" for i, s in enumerate(sets) for cid in s}


async def test_workers_claiming_the_same_due_reminders_claim_each_once(
    workers: list[Followups],
) -> None:
    added = [await workers[0].reminders.add(reminder(i)) for i in range(100)]

    async def work(w: Followups, name: str, seed: int) -> list[str]:
        due = await w.reminders.due(NOW, limit=1000)
        order = [r.id for r in due]
        random.Random(seed).shuffle(order)
        taken = []
        for rid in order:
            got = await w.reminders.claim(rid, NOW, worker=name, lease_until=NOW + LEASE)
            if got is not None:
                assert got.attempts == 1
                taken.append(got.id)
        return taken

    sets = await asyncio.gather(*(work(w, f"w{i}", i) for i, w in enumerate(workers)))
    flat = [rid for s in sets for rid in s]
    assert sorted(flat) == sorted(r.id for r in added)  # each exactly once
    assert await workers[1].reminders.due(NOW) == []


class RowLock:
    """Another transaction holding a row lock, open until `release()`."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: psycopg.AsyncConnection | None = None

    async def hold(self, table: str, row_id: str) -> None:
        self._conn = await psycopg.AsyncConnection.connect(self._url)
        await self._conn.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", (row_id,))

    async def release(self) -> None:
        if self._conn is not None:
            await self._conn.rollback()
            await self._conn.close()
            self._conn = None


@pytest.fixture
async def row_lock(postgres_url: str) -> AsyncIterator[RowLock]:
    lock = RowLock(postgres_url)
    yield lock
    await lock.release()


async def test_a_commitment_locked_by_another_transaction_is_skipped_not_waited_on(
    workers: list[Followups], row_lock: RowLock
) -> None:
    held, free = await seed_commitments(workers[0], 2)
    await row_lock.hold("commitments", held)
    claim = workers[1].heartbeat.claim([held, free], worker="w1", now=NOW, lease_until=NOW + LEASE)
    claimed = await asyncio.wait_for(claim, NOT_WAITING)
    assert [c.id for c in claimed] == [free]
    await row_lock.release()
    # Skipped, not lost: once the other transaction ends it is claimable.
    [later] = await workers[2].heartbeat.claim(
        [held, free], worker="w2", now=NOW, lease_until=NOW + LEASE
    )
    assert later.id == held and later.attempts == 1


async def test_a_reminder_locked_by_another_transaction_is_skipped_not_waited_on(
    workers: list[Followups], row_lock: RowLock
) -> None:
    held = await workers[0].reminders.add(reminder(1))
    await row_lock.hold("reminders", held.id)
    claim = workers[1].reminders.claim(held.id, NOW, worker="w1", lease_until=NOW + LEASE)
    assert await asyncio.wait_for(claim, NOT_WAITING) is None
    await row_lock.release()
    got = await workers[1].reminders.claim(held.id, NOW, worker="w1", lease_until=NOW + LEASE)
    assert got is not None and got.attempts == 1


async def test_reaping_skips_a_claim_locked_by_its_owner(
    workers: list[Followups], row_lock: RowLock
) -> None:
    [cid] = await seed_commitments(workers[0], 1)
    await workers[0].heartbeat.claim([cid], worker="w0", now=NOW, lease_until=NOW + LEASE)
    await row_lock.hold("commitments", cid)
    reap = workers[1].heartbeat.reap_expired_claims(now=NOW + LEASE)
    reaped = await asyncio.wait_for(reap, NOT_WAITING)
    assert reaped.released == [] and reaped.failed == []
    await row_lock.release()
    reaped = await workers[1].heartbeat.reap_expired_claims(now=NOW + LEASE)
    assert [c.id for c in reaped.released] == [cid]


async def test_a_starting_worker_never_fails_a_live_claim_of_another(
    workers: list[Followups],
) -> None:
    owner, starter, third = workers
    sending_id, claimed_id = await seed_commitments(owner, 2)
    [sending, claimed] = await owner.heartbeat.claim(
        [sending_id, claimed_id], worker="owner", now=NOW, lease_until=NOW + LEASE
    )
    assert await owner.heartbeat.begin_sending(
        [sending], worker="owner", now=NOW, lease_until=NOW + LEASE
    )
    # A worker starting while both leases are live reaps nothing.
    live = NOW + LEASE - timedelta(seconds=1)
    reaped = await starter.heartbeat.reap_expired_claims(now=live)
    assert reaped.released == [] and reaped.failed == []
    assert await starter.heartbeat.due_unclaimed(now=live, limit=10) == []
    # Once they end: the unsent claim is released, the mid-send one fails
    # (outcome unknown) and is never claimable again.
    reaped = await starter.heartbeat.reap_expired_claims(now=NOW + LEASE)
    assert [c.id for c in reaped.released] == [claimed_id]
    assert [c.id for c in reaped.failed] == [sending_id]
    assert reaped.failed[0].status == "failed"
    later = NOW + LEASE + timedelta(minutes=1)
    retaken = await third.heartbeat.claim(
        [sending_id, claimed_id], worker="third", now=later, lease_until=later + LEASE
    )
    assert [c.id for c in retaken] == [claimed_id] and retaken[0].attempts == 2
    # The first owner's late steps no longer touch either row.
    assert not await owner.heartbeat.begin_sending(
        [claimed], worker="owner", now=later, lease_until=later + LEASE
    )
    await owner.heartbeat.finish([sending, claimed], "sent", worker="owner", now=later)
    found = await third.fetchall("SELECT id, status, claimed_by, sent_at FROM commitments")
    rows = {r[0]: r[1:] for r in found}
    assert rows[sending_id] == ("failed", None, None)
    assert rows[claimed_id] == ("pending", "third", None)


async def test_begin_sending_is_all_or_nothing_across_workers(workers: list[Followups]) -> None:
    a, b = workers[0], workers[1]
    first, second = await seed_commitments(a, 2)
    [kept] = await a.heartbeat.claim([first], worker="a", now=NOW, lease_until=NOW + 2 * LEASE)
    [lost] = await a.heartbeat.claim([second], worker="a", now=NOW, lease_until=NOW + LEASE)
    # The shorter lease ran out; `b` reaped that claim and took the row.
    after = NOW + LEASE
    await b.heartbeat.reap_expired_claims(now=after)
    await b.heartbeat.claim([second], worker="b", now=after, lease_until=after + LEASE)
    assert not await a.heartbeat.begin_sending(
        [kept, lost], worker="a", now=after, lease_until=after + LEASE
    )
    phases = await a.fetchall("SELECT id, claim_phase, claimed_by FROM commitments")
    # Nothing moved to `sending`, not even the claim that was still ours.
    assert {r[0]: r[1:] for r in phases} == {first: ("claimed", "a"), second: ("claimed", "b")}


async def test_extraction_of_one_session_waits_for_another_workers_extraction(
    workers: list[Followups], postgres_url: str
) -> None:
    """The duplicate check and the insert it decides on run under a lock on
    the session, so two workers extracting the same topic make one row."""
    s = scope(7)
    async with await psycopg.AsyncConnection.connect(postgres_url) as other:
        # Another worker's extraction of this session, still in its transaction.
        await other.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
            (EXTRACTION_NAMESPACE, s.session_key),
        )
        apply = asyncio.create_task(
            workers[1].commitments.apply_extraction(s, [candidate(s)], [], now=NOW)
        )
        done, _ = await asyncio.wait({apply}, timeout=0.3)
        assert not done  # waits for the other extraction to commit
        await other.execute(
            "INSERT INTO commitments (id, agent_id, session_key, platform, chat_id, sender_id, "
            "kind, sensitivity, source, status, reason, suggested_text, dedupe_key, confidence, "
            "due_earliest, due_latest, due_timezone, created_at, updated_at) VALUES "
            "('cm_other', %s, %s, %s, %s, %s, 'event_check_in', 'routine', "
            "'inferred_user_context', 'pending', 'r', 's', 'interview', 0.5, "
            "%s, %s, 'UTC', %s, %s)",
            (s.agent_id, s.session_key, s.platform, s.chat_id, s.sender_id,
             NOW, NOW + timedelta(hours=1), NOW, NOW),
        )  # fmt: skip
        await other.commit()
        applied = await asyncio.wait_for(apply, NOT_WAITING)
    assert applied.created == [] and [m.id for m in applied.merged] == ["cm_other"]


async def test_a_claim_whose_lease_ended_cannot_start_sending(workers: list[Followups]) -> None:
    """Not yet reaped, but no longer vouched for: another worker may reap and
    take it at any moment, so its owner must not send."""
    w = workers[0]
    [cid] = await seed_commitments(w, 1)
    claimed = await w.heartbeat.claim([cid], worker="w", now=NOW, lease_until=NOW + LEASE)
    assert not await w.heartbeat.begin_sending(
        claimed, worker="w", now=NOW + LEASE, lease_until=NOW + 2 * LEASE
    )
    added = await w.reminders.add(reminder(1))
    r = await w.reminders.claim(added.id, NOW, worker="w", lease_until=NOW + LEASE)
    assert r is not None
    assert (
        await w.reminders.begin_sending(r, worker="w", now=NOW + LEASE, lease_until=NOW + 2 * LEASE)
        is None
    )
    phases = await w.fetchall(
        "SELECT claim_phase FROM commitments UNION ALL SELECT claim_phase FROM reminders"
    )
    assert phases == [("claimed",), ("claimed",)]


async def test_reaping_reminders_leaves_a_live_claim_of_another_worker_alone(
    workers: list[Followups],
) -> None:
    owner, dead, starter = (w.reminders for w in workers)
    live, unsent, mid_send = [await owner.add(reminder(i)) for i in range(3)]
    short = NOW + timedelta(minutes=1)
    live_claim = await owner.claim(live.id, NOW, worker="owner", lease_until=NOW + LEASE)
    assert live_claim is not None
    assert await owner.begin_sending(live_claim, worker="owner", now=NOW, lease_until=NOW + LEASE)
    assert await dead.claim(unsent.id, NOW, worker="dead", lease_until=short)
    dead_claim = await dead.claim(mid_send.id, NOW, worker="dead", lease_until=short)
    assert dead_claim is not None
    assert await dead.begin_sending(dead_claim, worker="dead", now=NOW, lease_until=short)

    later = NOW + timedelta(minutes=2)
    assert [r.id for r in await starter.release_expired_claims(later)] == [unsent.id]
    expired = await starter.expired_sends(later)
    assert [r.id for r in expired] == [mid_send.id]
    # Even handed the live one, the reaper's fence refuses it.
    sending = await owner.get(live.id)
    assert sending is not None
    assert await starter.fail_expired_send(sending, now=later, error="x") is None
    failed = await starter.fail_expired_send(expired[0], now=later, error="unknown")
    assert failed is not None and failed.status == "failed"
    # A second reaper acting on the same expired send does nothing.
    assert await owner.fail_expired_send(expired[0], now=later, error="unknown") is None
    rows = await workers[0].fetchall("SELECT id, status, claim_phase, claimed_by FROM reminders")
    assert {r[0]: r[1:] for r in rows} == {
        live.id: ("active", "sending", "owner"),
        unsent.id: ("active", None, None),
        mid_send.id: ("failed", None, None),
    }


async def test_a_claim_taken_over_is_never_moved_or_ended_by_its_first_owner(
    workers: list[Followups],
) -> None:
    """The fence on claimant and attempt: a first owner whose lease ran out
    (its claim reaped and taken again, by another worker or by itself) can
    neither start sending nor release nor finish the row."""
    first, second = workers[0].heartbeat, workers[1].heartbeat
    cids = await seed_commitments(workers[0], 2)
    short = NOW + timedelta(minutes=1)
    stale = await first.claim(cids, worker="w1", now=NOW, lease_until=short)
    later = NOW + timedelta(minutes=2)
    assert len((await second.reap_expired_claims(now=later)).released) == 2
    # One row taken again by another worker, one by the same worker (a new attempt).
    [by_other] = await second.claim([cids[0]], worker="w2", now=later, lease_until=later + LEASE)
    [again] = await first.claim([cids[1]], worker="w1", now=later, lease_until=later + LEASE)
    for old in stale:
        assert not await first.begin_sending(
            [old], worker="w1", now=later, lease_until=later + LEASE
        )
        await first.release([old], worker="w1", now=later, error="gave up")
        await first.finish([old], "sent", worker="w1", now=later, message_id="m")
    # Handed the other worker's live claim, the first owner is still refused.
    assert not await first.begin_sending(
        [by_other], worker="w1", now=later, lease_until=later + LEASE
    )
    await first.release([by_other], worker="w1", now=later, error="gave up")
    await first.finish([by_other], "sent", worker="w1", now=later, message_id="m")
    rows = await workers[0].fetchall(
        "SELECT id, status, claim_phase, claimed_by, attempts, sent_at FROM commitments"
    )
    assert {r[0]: r[1:] for r in rows} == {
        by_other.id: ("pending", "claimed", "w2", 2, None),
        again.id: ("pending", "claimed", "w1", 2, None),
    }


async def test_releasing_expired_reminder_claims_leaves_a_live_one_claimed(
    workers: list[Followups],
) -> None:
    owner, starter = workers[0].reminders, workers[1].reminders
    live, dead = [await owner.add(reminder(i)) for i in range(2)]
    assert await owner.claim(live.id, NOW, worker="owner", lease_until=NOW + LEASE)
    assert await owner.claim(dead.id, NOW, worker="dead", lease_until=NOW + timedelta(minutes=1))
    later = NOW + timedelta(minutes=2)
    assert [r.id for r in await starter.release_expired_claims(later)] == [dead.id]
    rows = await workers[0].fetchall("SELECT id, claim_phase, claimed_by FROM reminders")
    assert {r[0]: r[1:] for r in rows} == {live.id: ("claimed", "owner"), dead.id: (None, None)}
