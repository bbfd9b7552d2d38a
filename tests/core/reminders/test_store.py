"""The ReminderStore on each backend: state changes and scope checks; and the
SQLite store's indexed due queries and unreadable rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.messages import Target
from core.reminders.model import NewReminder
from core.reminders.store import Claim, ReminderStore
from core.store import Store
from core.store.dialect import to_ms
from core.store.sqlite.driver import sqlite3
from tests.support.followups import Followups
from tests.support.store_helpers import make_reminder_store

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
KEY = "agent:main:telegram:private:42"
W = "test-worker"
LEASE = timedelta(minutes=5)
OTHER = "agent:main:telegram:private:77"


def new(
    text: str = "stretch",
    *,
    at: datetime = NOW + timedelta(hours=1),
    key: str = KEY,
    platform: str = "telegram",
    cron: str | None = None,
) -> NewReminder:
    chat = key.rsplit(":", 1)[-1]
    return NewReminder(
        agent_id="main",
        session_key=key,
        target=Target(platform, chat),
        created_by="u1",
        text=text,
        kind="cron" if cron else "after",
        cron=cron,
        timezone="Europe/Paris",
        next_fire_at=at,
        created_at=NOW,
    )


async def reminders(store: Store | Followups) -> ReminderStore:
    for key in (KEY, OTHER):
        await store.ensure_session(
            key,
            agent_id="main",
            platform="telegram",
            chat_id=key.rsplit(":", 1)[-1],
            chat_kind="private",
            thread_id=None,
            now=NOW,
        )
    return store.reminders if isinstance(store, Followups) else make_reminder_store(store)


async def test_add_get_and_list_by_scope(followups: Followups) -> None:
    rs = await reminders(followups)
    a = await rs.add(new("a", at=NOW + timedelta(hours=2)))
    b = await rs.add(new("b", at=NOW + timedelta(hours=1)))
    c = await rs.add(new("c", key=OTHER, at=NOW + timedelta(minutes=90)))
    assert a.id.startswith("rm_") and a.status == "active" and a.attempts == 0
    assert a.target == Target("telegram", "42")
    assert [r.id for r in await rs.list_for_session("main", KEY)] == [b.id, a.id]
    assert await rs.list_for_session("other-agent", KEY) == []
    assert [r.id for r in await rs.list_all()] == [b.id, c.id, a.id]
    assert await rs.get(c.id, agent_id="main", session_key=KEY) is None
    assert (await rs.get(c.id, agent_id="main", session_key=OTHER)) == c


async def test_cancel_is_scope_checked_and_only_for_active(followups: Followups) -> None:
    rs = await reminders(followups)
    r = await rs.add(new())
    assert await rs.cancel(r.id, now=NOW, agent_id="main", session_key=OTHER) is None
    done = await rs.cancel(r.id, now=NOW, agent_id="main", session_key=KEY)
    assert done is not None and done.status == "cancelled"
    assert await rs.cancel(r.id, now=NOW) is None
    assert await rs.list_for_session("main", KEY) == []
    assert len(await rs.list_for_session("main", KEY, statuses=None)) == 1


async def test_claim_once_then_fired_or_failed(followups: Followups) -> None:
    rs = await reminders(followups)
    once = await rs.add(new("once", at=NOW))
    daily = await rs.add(new("daily", at=NOW, cron="0 9 * * *"))
    early = NOW - timedelta(seconds=1)
    assert await rs.claim(once.id, early, worker=W, lease_until=NOW + LEASE) is None  # not due
    claimed = await rs.claim(once.id, NOW, worker=W, lease_until=NOW + LEASE)
    assert claimed is not None and claimed.attempts == 1 and claimed.claimed_at == NOW
    # A second claimer loses.
    assert await rs.claim(once.id, NOW, worker="other", lease_until=NOW + LEASE) is None
    assert await rs.due(NOW) == [daily]  # in flight: not due again
    fired = await rs.mark_fired(once.id, now=NOW, next_fire_at=None)
    assert fired is not None and (fired.status, fired.claimed_at) == ("done", None)

    await rs.claim(daily.id, NOW, worker=W, lease_until=NOW + LEASE)
    tomorrow = NOW + timedelta(days=1)
    moved = await rs.mark_failed(daily.id, now=NOW, error="boom", next_fire_at=tomorrow)
    assert moved is not None
    assert (moved.status, moved.next_fire_at, moved.last_error) == ("active", tomorrow, "boom")
    assert await rs.claimed() == []


async def test_a_send_that_outlived_its_lease_never_settles_the_next_claim(
    followups: Followups,
) -> None:
    """A slow send's late outcome is fenced on its own claim: once a reaper
    failed it and another worker claimed the next occurrence, the late
    `mark_fired` / `mark_failed` change nothing (else that claim would be
    cleared and the occurrence sent a second time)."""
    rs = await reminders(followups)
    daily = await rs.add(new("daily", at=NOW, cron="0 9 * * *"))
    slow = await rs.claim(daily.id, NOW, worker="slow", lease_until=NOW + LEASE)
    assert slow is not None
    assert await rs.begin_sending(slow, worker="slow", now=NOW, lease_until=NOW + LEASE)
    later, tomorrow = NOW + 2 * LEASE, NOW + timedelta(days=1)
    [expired] = await rs.expired_sends(later)
    assert await rs.fail_expired_send(expired, now=later, error="unknown", next_fire_at=tomorrow)
    taken = await rs.claim(daily.id, tomorrow, worker="next", lease_until=tomorrow + LEASE)
    assert taken is not None and taken.attempts == 2

    late = Claim("slow", slow.attempts)
    assert await rs.mark_fired(daily.id, now=later, next_fire_at=tomorrow, claim=late) is None
    assert await rs.mark_failed(daily.id, now=later, error="x", claim=late) is None
    [held] = await rs.claimed()
    assert (held.attempts, held.next_fire_at, held.status) == (2, tomorrow, "active")
    ours = Claim("next", taken.attempts)
    done = await rs.mark_fired(
        daily.id, now=tomorrow, next_fire_at=tomorrow + timedelta(days=1), claim=ours
    )
    assert done is not None and await rs.claimed() == []


async def test_a_reminder_cancelled_in_flight_stays_cancelled(followups: Followups) -> None:
    rs = await reminders(followups)
    r = await rs.add(new(at=NOW, cron="0 9 * * *"))
    await rs.claim(r.id, NOW, worker=W, lease_until=NOW + LEASE)
    await rs.cancel(r.id, now=NOW)
    after = await rs.mark_fired(r.id, now=NOW, next_fire_at=NOW + timedelta(days=1))
    assert after is not None and (after.status, after.next_fire_at) == ("cancelled", NOW)


async def test_next_due_and_due_filter_by_platform(followups: Followups) -> None:
    rs = await reminders(followups)
    assert await rs.next_due() is None
    d = await rs.add(new("discord", at=NOW - timedelta(minutes=5), platform="discord"))
    t = await rs.add(new("telegram", at=NOW + timedelta(minutes=5)))
    assert await rs.next_due() == d.next_fire_at
    assert await rs.next_due(platforms={"telegram"}) == t.next_fire_at
    assert await rs.next_due(platforms=set()) is None
    assert await rs.due(NOW, platforms={"telegram"}) == []
    assert await rs.due(NOW) == [d]


async def test_skip_only_moves_an_unchanged_unclaimed_reminder(followups: Followups) -> None:
    rs = await reminders(followups)
    r = await rs.add(new(at=NOW, cron="0 9 * * *"))
    later = NOW + timedelta(days=1)
    assert (
        await rs.skip(r.id, now=NOW, expected=NOW - timedelta(days=1), next_fire_at=later) is None
    )
    moved = await rs.skip(r.id, now=NOW, expected=NOW, next_fire_at=later)
    assert moved is not None and moved.next_fire_at == later and moved.attempts == 0


async def test_deleting_a_session_deletes_its_reminders(followups: Followups) -> None:
    rs = await reminders(followups)
    mine = await rs.add(new())
    other = await rs.add(new(key=OTHER))
    await followups.delete_session(KEY)
    assert await rs.get(mine.id) is None
    assert await rs.get(other.id) == other


async def test_an_unreadable_due_row_is_marked_failed(sqlite_store: Store) -> None:
    rs = await reminders(sqlite_store)
    bad = await rs.add(new("bad", at=NOW))
    good = await rs.add(new("good", at=NOW))
    sql = "UPDATE reminders SET claimed_at = 'garbage' WHERE id = ?"
    await sqlite_store.connection.run_write(lambda conn: conn.execute(sql, (bad.id,)))  # type: ignore[attr-defined]
    sql = "UPDATE reminders SET claimed_at = NULL, created_at = 'garbage' WHERE id = ?"
    await sqlite_store.connection.run_write(lambda conn: conn.execute(sql, (bad.id,)))  # type: ignore[attr-defined]
    assert await rs.due(NOW) == [good]
    rows = await sqlite_store.connection.fetchall(  # type: ignore[attr-defined]
        "SELECT status, last_error FROM reminders WHERE id = ?", (bad.id,)
    )
    assert rows[0][0] == "failed" and "unreadable" in rows[0][1]
    assert [r.id for r in await rs.list_all()] == [good.id]  # reported and left out


async def test_due_work_is_found_through_indexes(sqlite_store: Store) -> None:
    """Every query the scheduler and the tools run uses an index: none scans
    the reminders table (cost grows with the due rows, not the table)."""
    rs = await reminders(sqlite_store)
    statements: list[str] = []
    db = sqlite_store.connection._db  # type: ignore[attr-defined]
    await db._execute(db._conn.set_trace_callback, statements.append)
    try:
        r = await rs.add(new(at=NOW))
        await rs.next_due()
        await rs.next_due(platforms={"telegram", "discord"})
        await rs.due(NOW, platforms={"telegram"})
        await rs.due(NOW)
        await rs.list_for_session("main", KEY)
        await rs.claim(r.id, NOW, worker=W, lease_until=NOW + LEASE)
        await rs.claimed()
    finally:
        await db._execute(db._conn.set_trace_callback, None)
    queries = [s for s in statements if "FROM reminders" in s and s.lstrip().startswith("SELECT")]
    expected = {
        "ORDER BY next_fire_at LIMIT": "reminders_due",  # next_due and due
        "session_key = ": "reminders_session",
        "claim_phase IS NOT NULL": "reminders_lease",
    }
    checked = 0
    for sql in queries:
        rows = await sqlite_store.connection.fetchall("EXPLAIN QUERY PLAN " + sql)  # type: ignore[attr-defined]
        plan = " | ".join(row[3] for row in rows)
        for marker, index in expected.items():
            if marker in sql:
                assert f"INDEX {index}" in plan, (sql, plan)
                checked += 1
    assert checked == 6


async def test_finding_due_work_does_not_read_finished_rows(sqlite_store: Store) -> None:
    """With many finished and future rows, due() visits only the due end."""
    rs = await reminders(sqlite_store)
    base = to_ms(NOW)

    def fill(conn: sqlite3.Connection) -> None:
        rows = [
            (f"rm_f{i:06d}", "main", KEY, "telegram", "42", None, None, "x", "after", None,
             "UTC", base - 1000 * i, "done", None, None, 0, None, base, base)
            for i in range(20000)
        ] + [
            (f"rm_a{i:06d}", "main", KEY, "telegram", "42", None, None, "x", "after", None,
             "UTC", base + 1000 * (i + 1), "active", None, None, 0, None, base, base)
            for i in range(20000)
        ]  # fmt: skip
        columns = "id, agent_id, session_key, platform, chat_id, thread_id, created_by, text, "
        columns += "kind, cron, timezone, next_fire_at, status, claimed_at, last_fired_at, "
        columns += "attempts, last_error, created_at, updated_at"
        sql = f"INSERT INTO reminders({columns}) VALUES ({', '.join('?' * 19)})"
        conn.executemany(sql, rows)

    await sqlite_store.connection.run_write(fill)  # type: ignore[attr-defined]
    due = await rs.add(new("due", at=NOW - timedelta(seconds=1)))
    progress: list[int] = []
    db = sqlite_store.connection._db  # type: ignore[attr-defined]
    await db._execute(db._conn.set_progress_handler, lambda: progress.append(1), 100)
    try:
        assert await rs.due(NOW) == [due]
        assert await rs.next_due() == due.next_fire_at
    finally:
        await db._execute(db._conn.set_progress_handler, None, 100)
    # A scan of 40,000 rows would take tens of thousands of VM steps.
    assert len(progress) < 50
