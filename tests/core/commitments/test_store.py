"""The CommitmentStore and the list / dismiss / snooze service on each
backend (a real SQLite file, a real PostgreSQL database): scope checks,
dedupe, lifecycle; and the SQLite indexes behind them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.clock import TestClock
from core.commitments.expiry import EXPIRY_GRACE, sweep_expired
from core.commitments.model import Commitment, NewCommitment, Scope
from core.commitments.service import CommitmentService, SnoozeError
from core.commitments.store import CommitmentStore, Filter
from core.store.dialect import to_ms
from core.store.sql.commitments import ACTIVE, COLUMN_NAMES, SqlCommitmentStore
from core.store.sqlite import SqliteStore
from tests.support.followups import Followups
from tests.support.store_helpers import (
    chat_filter,
    commitment_store_for,
    mark_sent,
    open_store,
)

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
ALICE = Scope(
    "main", "agent:main:telegram:group:9", "telegram", "9", None, "alice", chat_kind="group"
)
BOB = replace(ALICE, sender_id="bob")
OTHER_CHAT = Scope(
    "main", "agent:main:telegram:private:5", "telegram", "5", None, "alice", chat_kind="private"
)


def new(scope: Scope = ALICE, key: str = "interview", **over: object) -> NewCommitment:
    values: dict[str, object] = dict(
        scope=scope,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason="user has an interview",
        suggested_text="How did it go?",
        dedupe_key=key,
        confidence=0.8,
        due_earliest=NOW + 10 * HOUR,
        due_latest=NOW + 20 * HOUR,
        due_timezone="UTC",
        source_message_id=1,
        created_at=NOW,
    )
    values.update(over)
    return NewCommitment(**values)  # type: ignore[arg-type]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    assert isinstance(s, SqliteStore)
    await s.open()
    yield s
    await s.close()


@pytest.fixture
def cstore(followups: Followups) -> CommitmentStore:
    return followups.commitments


@pytest.fixture
def sqlite_cstore(store: SqliteStore) -> SqlCommitmentStore:
    built = commitment_store_for(store)
    assert isinstance(built, SqlCommitmentStore)
    return built


async def add(cstore: CommitmentStore, *items: NewCommitment) -> list[Commitment]:
    out = []
    for item in items:
        applied = await cstore.apply_extraction(item.scope, [item], [], now=NOW)
        out.extend(applied.created + applied.merged)
    return out


def test_columns_follow_the_record_fields() -> None:
    assert [f.name for f in fields(Commitment)] == list(COLUMN_NAMES)


async def test_insert_then_same_key_merges_into_one_row(cstore: CommitmentStore) -> None:
    [first] = await add(cstore, new())
    assert first.id.startswith("cm_") and first.status == "pending" and first.scope == ALICE
    assert first.scope.chat_kind == "group"  # read back from the stored session key
    wider = new(confidence=0.95, reason="sharper", due_earliest=NOW + 8 * HOUR)
    applied = await cstore.apply_extraction(ALICE, [wider], [], now=NOW + HOUR)
    assert applied.created == [] and [m.id for m in applied.merged] == [first.id]
    [row] = await cstore.list(Filter())
    assert row.confidence == 0.95 and row.reason == "sharper"
    assert (row.due_earliest, row.due_latest) == (NOW + 8 * HOUR, NOW + 20 * HOUR)
    # A lower-confidence duplicate keeps the better wording and confidence.
    await add(cstore, new(confidence=0.75, reason="vaguer", due_latest=NOW + 30 * HOUR))
    [row] = await cstore.list(Filter())
    assert row.confidence == 0.95 and row.reason == "sharper" and row.due_latest == NOW + 30 * HOUR


async def test_same_key_in_other_scopes_are_separate(cstore: CommitmentStore) -> None:
    await add(cstore, new(ALICE), new(BOB), new(OTHER_CHAT))
    assert len(await cstore.list(Filter())) == 3


async def test_resolved_only_applies_within_the_same_scope(cstore: CommitmentStore) -> None:
    [a] = await add(cstore, new(ALICE))
    [b] = await add(cstore, new(BOB, key="exam"))
    applied = await cstore.apply_extraction(ALICE, [], [b.id, a.id, "cm_nope"], now=NOW)
    assert applied.resolved == [a.id]
    assert (await cstore.get(b.id)).status == "pending"  # type: ignore[union-attr]
    resolved = await cstore.get(a.id)
    assert resolved is not None and resolved.status == "resolved" and resolved.resolved_at == NOW


async def test_a_resolved_topic_is_not_reopened_by_the_same_answer(
    cstore: CommitmentStore,
) -> None:
    [a] = await add(cstore, new())
    applied = await cstore.apply_extraction(ALICE, [new()], [a.id], now=NOW)
    assert applied.resolved == [a.id] and applied.created == []


async def test_service_scope_check_makes_foreign_ids_not_found(
    cstore: CommitmentStore,
) -> None:
    service = CommitmentService(cstore, TestClock(NOW))
    [a] = await add(cstore, new(ALICE))
    [b] = await add(cstore, new(BOB))
    alice = chat_filter("main", ALICE.session_key, "alice")
    assert [c.id for c in await service.list(alice)] == [a.id]
    outcome = await service.dismiss([b.id, a.id, a.id], alice)
    assert [c.id for c in outcome.dismissed] == [a.id]
    assert outcome.failed == [(b.id, "not found")]
    again = await service.dismiss([a.id], alice)
    assert again.failed == [(a.id, "already dismissed")]
    with pytest.raises(SnoozeError, match="not found"):
        await service.snooze(b.id, duration=2 * HOUR, where=alice)
    # The admin view sees everything, active by default.
    assert [c.id for c in await service.list()] == [b.id]
    everything = await service.list(Filter(statuses=("pending", "dismissed")))
    assert {c.id for c in everything} == {a.id, b.id}


async def test_snooze_moves_the_window_and_sets_status(cstore: CommitmentStore) -> None:
    clock = TestClock(NOW)
    service = CommitmentService(cstore, clock)
    [a] = await add(cstore, new())
    done = await service.snooze(a.id, duration=30 * HOUR)
    assert done.status == "snoozed" and done.snoozed_until == NOW + 30 * HOUR
    assert (done.due_earliest, done.due_latest) == (NOW + 30 * HOUR, NOW + 40 * HOUR)
    until = NOW + 50 * HOUR
    again = await service.snooze(a.id, until=until)
    assert again.due_earliest == until and again.status == "snoozed"
    # a merge never pulls a snoozed commitment before its snooze time
    await add(cstore, new(confidence=0.9))
    assert (await cstore.get(a.id)).due_earliest == until  # type: ignore[union-attr]
    for bad in (dict(duration=-HOUR), dict(until=NOW - HOUR), dict(until=NOW + 2000 * HOUR)):
        with pytest.raises(SnoozeError):
            await service.snooze(a.id, **bad)  # type: ignore[arg-type]
    await service.dismiss([a.id])
    with pytest.raises(SnoozeError, match="already dismissed"):
        await service.snooze(a.id, duration=HOUR)


async def test_heartbeat_queries(followups: Followups, cstore: CommitmentStore) -> None:
    # The one delivery API is the heartbeat's: due work, claims and sends.
    hb = followups.heartbeat
    [a, b] = await add(cstore, new(key="a"), new(key="b", due_earliest=NOW + 15 * HOUR))
    assert await hb.next_due_after(NOW) == NOW + 10 * HOUR
    assert [c.id for c in await hb.due_unclaimed(now=NOW + 12 * HOUR, limit=100)] == [a.id]
    await mark_sent(hb, a.id, now=NOW + 12 * HOUR, message_id="m1")
    sent = await cstore.get(a.id)
    assert sent is not None and sent.status == "sent" and sent.attempts == 1
    assert sent.sent_message_id == "m1"
    assert (
        await hb.claim([a.id], worker="w", now=NOW + 12 * HOUR, lease_until=NOW + 13 * HOUR) == []
    )
    assert await hb.sent_times_since("main", ALICE.session_key, NOW) == [NOW + 12 * HOUR]
    assert await hb.sent_times_since("main", ALICE.session_key, NOW + 13 * HOUR) == []
    [claimed] = await hb.claim([b.id], worker="w", now=NOW, lease_until=NOW + HOUR)
    await hb.release([claimed], worker="w", now=NOW, error="boom")
    failed = await cstore.get(b.id)
    assert failed is not None and failed.status == "pending" and failed.last_error == "boom"
    [claimed] = await hb.claim([b.id], worker="w", now=NOW, lease_until=NOW + HOUR)
    await hb.finish([claimed], "failed", worker="w", now=NOW, error="boom")
    failed = await cstore.get(b.id)
    assert failed is not None and failed.status == "failed" and failed.attempts == 2
    assert await hb.next_due_after(NOW) is None


async def test_claim_due_takes_each_scopes_soonest_rows_once(
    followups: Followups, cstore: CommitmentStore
) -> None:
    hb = followups.heartbeat
    due = {"due_earliest": NOW - HOUR}
    rows = await add(
        cstore,
        *(new(key=f"a{i}", due_earliest=NOW - (5 - i) * HOUR) for i in range(4)),
        new(BOB, key="b", **due),
        new(OTHER_CHAT, key="later", due_earliest=NOW + HOUR),
    )
    by_key = {c.dedupe_key: c.id for c in rows}
    scopes = [ALICE, BOB, OTHER_CHAT]
    first = await hb.claim_due(scopes, per_scope=3, worker="w1", now=NOW, lease_until=NOW + HOUR)
    assert sorted(c.id for c in first) == sorted(
        [by_key["a0"], by_key["a1"], by_key["a2"], by_key["b"]]
    )
    assert all(c.attempts == 1 for c in first)
    # What is claimed is never taken again; the scope's next row is.
    second = await hb.claim_due(scopes, per_scope=3, worker="w2", now=NOW, lease_until=NOW + HOUR)
    assert [c.id for c in second] == [by_key["a3"]]
    assert await hb.claim_due([], per_scope=3, worker="w2", now=NOW, lease_until=NOW) == []


async def test_a_turn_is_recorded_only_after_the_interval(followups: Followups) -> None:
    hb = followups.heartbeat
    key, every = ALICE.session_key, 30 * timedelta(minutes=1)
    assert await hb.record_turn_unless_recent("main", key, now=NOW, every=every) is None
    assert await hb.record_turn_unless_recent("main", key, now=NOW + every / 2, every=every) == NOW
    assert (
        await hb.record_turn_unless_recent("other", key, now=NOW + every / 2, every=every) is None
    )
    assert await hb.last_turns([("main", key), ("other", key), ("main", "none")]) == {
        ("main", key): NOW,
        ("other", key): NOW + every / 2,
    }
    assert await hb.record_turn_unless_recent("main", key, now=NOW + every, every=every) is None
    assert await hb.last_turns([("main", key)]) == {("main", key): NOW + every}


async def plan(store: SqliteStore, sql: str, params: tuple[object, ...]) -> str:
    rows = await store.connection.fetchall(f"EXPLAIN QUERY PLAN {sql}", params)
    return " | ".join(str(r[3]) for r in rows)


async def test_queries_use_their_indexes(store: SqliteStore) -> None:
    t = to_ms(NOW)
    expiry = await plan(
        store, f"SELECT id FROM commitments WHERE {ACTIVE} AND due_latest < ?", (t,)
    )
    assert "USING INDEX commitments_expiry" in expiry
    due = await plan(
        store,
        f"SELECT id FROM commitments WHERE {ACTIVE} AND due_earliest <= ? AND due_latest >= ?",
        (t, t),
    )
    # either range over active rows will do; the planner picks
    assert "USING INDEX commitments_due" in due or "USING INDEX commitments_expiry" in due
    scope = await plan(
        store,
        f"SELECT id FROM commitments WHERE session_key IN (?, ?) AND {ACTIVE}",
        ("a", "b"),
    )
    assert "USING INDEX commitments_dedupe" in scope or "USING INDEX commitments_session" in scope
    cap = await plan(
        store,
        "SELECT count(*) FROM commitments WHERE agent_id = ? AND session_key = ? AND sent_at >= ?",
        ("main", "k", t),
    )
    assert "USING COVERING INDEX commitments_sent" in cap
    for sql in (expiry, due, scope, cap):
        assert "SCAN commitments" not in sql


@pytest.mark.slow
async def test_expiry_sweep_touches_only_expired_rows_among_100k(
    store: SqliteStore, sqlite_cstore: CommitmentStore
) -> None:
    cstore = sqlite_cstore
    expired_count = 137
    total = 100_000
    base = to_ms(NOW)

    def seed(conn) -> None:  # type: ignore[no-untyped-def]
        rows = []
        for i in range(total):
            if i < expired_count:
                status, latest = "pending", base - 2 * 86_400_000
            elif i % 3 == 0:
                status, latest = "sent", base - 5 * 86_400_000  # old, but already final
            else:
                status, latest = ("pending", "snoozed")[i % 2], base + 86_400_000
            rows.append(
                (
                    f"cm_{i:012x}",
                    "main",
                    f"agent:main:telegram:private:{i % 500}",
                    "telegram",
                    str(i % 500),
                    "u",
                    "event_check_in",
                    "routine",
                    "inferred_user_context",
                    status,
                    "r",
                    "s",
                    f"k{i}",
                    0.9,
                    latest - 3_600_000,
                    latest,
                    "UTC",
                    base,
                    base,
                )
            )
        conn.executemany(
            "INSERT INTO commitments(id, agent_id, session_key, platform, chat_id, sender_id, "
            "kind, sensitivity, source, status, reason, suggested_text, dedupe_key, confidence, "
            "due_earliest, due_latest, due_timezone, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    await store.connection.run_write(seed)
    before = await store.connection.fetchall(
        "SELECT status, count(*) FROM commitments GROUP BY status"
    )
    # Count the virtual machine steps the sweep takes: a scan of the table
    # would take several per row (hundreds of thousands in all). Its wall
    # time is measured by bench/sweep.py.
    steps = [0]

    def count_step() -> int:
        steps[0] += 1
        return 0

    await store.connection.run_write(lambda conn: conn.set_progress_handler(count_step, 1))
    changed = await sweep_expired(cstore, now=NOW, grace=EXPIRY_GRACE)
    await store.connection.run_write(lambda conn: conn.set_progress_handler(None, 1))
    assert changed == expired_count
    assert steps[0] < 200 * expired_count, steps[0]
    after = dict(
        await store.connection.fetchall("SELECT status, count(*) FROM commitments GROUP BY status")
    )
    assert after["expired"] == expired_count
    assert after["sent"] == dict(before)["sent"]  # final rows untouched
    # Nothing left to do: a second sweep changes nothing and stays cheap.
    assert await sweep_expired(cstore, now=NOW) == 0
    # The statement itself walks the expiry index, never the table.
    detail = await plan(
        store,
        f"UPDATE commitments SET status = 'expired' WHERE {ACTIVE} AND due_latest < ?",
        (base,),
    )
    assert "USING INDEX commitments_expiry" in detail and "SCAN" not in detail


async def test_deleting_a_session_deletes_its_commitments(
    followups: Followups, cstore: CommitmentStore
) -> None:
    await followups.ensure_session(ALICE.session_key, chat_id="9", chat_kind="group", now=NOW)
    await add(cstore, new(ALICE), new(BOB), new(OTHER_CHAT))
    await followups.execute("DELETE FROM sessions WHERE key = ?", (ALICE.session_key,))
    [left] = await cstore.list(Filter())
    assert left.scope == OTHER_CHAT and left.scope.chat_kind == "private"


async def test_naive_times_are_refused(followups: Followups) -> None:
    """A naive time would be stored shifted (SQLite: read as UTC; PostgreSQL:
    read in the session's zone); every store refuses it instead."""
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(ValueError, match="naive"):
        await followups.commitments.apply_extraction(ALICE, [new()], [], now=naive)
    with pytest.raises(ValueError, match="naive"):
        await followups.heartbeat.due_unclaimed(now=naive, limit=10)
    with pytest.raises(ValueError, match="naive"):
        await followups.reminders.due(naive)
    assert await followups.commitments.list(Filter()) == []
