"""Every query the heartbeat, the reminder scheduler and the expiry sweep run
on PostgreSQL can use its index: the partial indexes' WHERE is implied by the
statements as the stores write them, so finding due work costs the due rows,
not the table.

The tables here are small, so the plans are taken with sequential scans
switched off: a statement that cannot use its index still shows a Seq Scan.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from core.commitments.expiry import sweep_expired
from core.commitments.model import Scope
from core.messages import Target
from core.reminders.model import NewReminder
from core.store.postgres.connection import PostgresConnection
from tests.core.store.postgres.test_claims_pg import candidate
from tests.support.followups import Followups, postgres_followups

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
SCOPE = Scope(
    "main", "agent:main:telegram:private:1", "telegram", "1", None, "1", chat_kind="private"
)


@pytest.fixture
async def worker(postgres_url: str) -> AsyncIterator[Followups]:
    db = PostgresConnection(postgres_url, max_size=2)
    await db.open()
    try:
        yield postgres_followups(db)
    finally:
        await db.close()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """(query, params) of every statement the stores run from here on."""
    seen: list[tuple[str, Any]] = []
    original = psycopg.AsyncConnection.execute

    async def recording(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str):
            seen.append((query, params))
        return await original(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", recording)
    yield seen


async def plans(url: str, statements: list[tuple[str, Any]], marker: str) -> list[str]:
    """The plan of every recorded statement containing `marker`."""
    found = []
    recorded = list(statements)  # this function's own statements are recorded too
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("SET enable_seqscan = off")
        for query, params in recorded:
            if marker in query and not query.startswith("EXPLAIN"):
                cursor = await conn.execute("EXPLAIN " + query, params)
                found.append("\n".join(r[0] for r in await cursor.fetchall()))
        await conn.rollback()
    return found


def uses(plan: str, index: str) -> bool:
    """`index` is one index name, or several separated by `|` (either will do:
    the planner picks)."""
    return any(name in plan for name in index.split("|")) and "Seq Scan" not in plan


async def test_heartbeat_and_expiry_queries_use_their_indexes(
    worker: Followups, statements: list[tuple[str, Any]], postgres_url: str
) -> None:
    applied = await worker.commitments.apply_extraction(SCOPE, [candidate(SCOPE)], [], now=NOW)
    [c] = applied.created
    statements.clear()
    hb = worker.heartbeat
    await hb.due_unclaimed(now=NOW, limit=500)
    await hb.next_due_after(NOW)
    await hb.next_lease_expiry()
    await hb.sent_times_since("main", SCOPE.session_key, NOW - timedelta(days=1))
    await hb.claim([c.id], worker="w", now=NOW, lease_until=NOW + LEASE)
    await hb.reap_expired_claims(now=NOW + LEASE)
    await sweep_expired(worker.commitments, now=NOW)
    await worker.commitments.active_for_scopes([SCOPE])
    later = NOW + timedelta(days=1)
    await worker.commitments.snooze_sent(c.id, until=later, latest=later, now=NOW)

    expected = {
        "claimed_at IS NULL ORDER BY due_earliest": "commitments_due",
        "min(due_earliest)": "commitments_due",
        "min(lease_until)": "commitments_lease",
        "sent_at >= ": "commitments_sent",
        "FOR UPDATE SKIP LOCKED) UPDATE": "commitments_pkey",
        "claim_phase = %s AND lease_until <= %s": "commitments_lease",
        "status = 'expired'": "commitments_expiry",
        "session_key = ANY": "commitments_dedupe|commitments_session",
        # snooze_sent's reopen check looks up active twins of the session
        "FROM commitments AS twin": "commitments_dedupe|commitments_session",
    }
    for marker, index in expected.items():
        found = await plans(postgres_url, statements, marker)
        assert found, marker
        for plan in found:
            assert uses(plan, index), (marker, plan)


async def test_reminder_queries_use_their_indexes(
    worker: Followups, statements: list[tuple[str, Any]], postgres_url: str
) -> None:
    r = await worker.reminders.add(
        NewReminder(
            agent_id="main",
            session_key=SCOPE.session_key,
            target=Target("telegram", "1"),
            created_by="1",
            text="stretch",
            kind="after",
            cron=None,
            timezone="UTC",
            next_fire_at=NOW,
            created_at=NOW,
        )
    )
    statements.clear()
    rs = worker.reminders
    await rs.next_due()
    await rs.next_due(platforms={"telegram", "discord"})
    await rs.due(NOW, platforms={"telegram"})
    await rs.due(NOW)
    await rs.list_for_session("main", SCOPE.session_key)
    await rs.claim(r.id, NOW, worker="w", lease_until=NOW + LEASE)
    await rs.claimed()
    await rs.expired_sends(NOW + LEASE)
    await rs.release_expired_claims(NOW + LEASE)

    expected = {
        "ORDER BY next_fire_at LIMIT %s": "reminders_due",  # due
        "ORDER BY next_fire_at LIMIT 1": "reminders_due",  # next_due
        "WHERE session_key = %s": "reminders_session",
        "claim_phase IS NOT NULL": "reminders_lease",
        "claim_phase = 'sending'": "reminders_lease",
        "claim_phase = 'claimed' AND lease_until <= %s": "reminders_lease",
    }
    for marker, index in expected.items():
        found = await plans(postgres_url, statements, marker)
        assert found, marker
        for plan in found:
            assert uses(plan, index), (marker, plan)
