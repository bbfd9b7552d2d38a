"""The Database port SQL written once runs on (core/store/sql/database.py),
on each backend: a transaction commits when its body returns and leaves
nothing when it raises, a snapshot reads, one-statement writes return their
RETURNING rows, `?` placeholders and literal `%` mean the same on both, and
times go through the dialect unchanged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from core.store.backends import open_backend
from core.store.sql.database import Transaction

WHEN = datetime(2026, 3, 29, 1, 30, 15, 123000, tzinfo=UTC)


async def test_a_body_commits_on_return_and_leaves_nothing_when_it_raises(
    storage_url: str,
) -> None:
    async with open_backend(storage_url) as backend:
        db = backend.database

        async def put(tx: Transaction) -> int:
            await tx.execute("INSERT INTO app_state (key, value) VALUES (?, ?)", ("a", "1%"))
            return await tx.execute("UPDATE app_state SET value = ? WHERE key = ?", ("2%", "a"))

        assert await db.transact(put) == 1

        async def put_then_fail(tx: Transaction) -> None:
            await tx.execute("INSERT INTO app_state (key, value) VALUES (?, ?)", ("b", "x"))
            raise LookupError("no")

        with pytest.raises(LookupError):
            await db.transact(put_then_fail)

        async def read(tx: Transaction) -> list[tuple[object, ...]]:
            return await tx.fetchall("SELECT key, value FROM app_state ORDER BY key")

        assert await db.snapshot(read) == [("a", "2%")]
        # A literal % in SQL, with parameters and without.
        assert await db.query("SELECT value FROM app_state WHERE value LIKE '2%'") == [("2%",)]
        assert await db.query("SELECT key FROM app_state WHERE value LIKE ?", ("2%",)) == [("a",)]
        assert await db.execute("DELETE FROM app_state WHERE key = ? RETURNING value", ("a",)) == [
            ("2%",)
        ]
        assert await db.execute("DELETE FROM app_state WHERE key = ? RETURNING value", ("a",)) == []


async def test_times_round_trip_through_the_dialect(storage_url: str) -> None:
    async with open_backend(storage_url) as backend:
        db = backend.database
        d = db.dialect
        await db.execute(
            "INSERT INTO paired_users (platform, user_id, username, approved_at) "
            "VALUES (?, ?, ?, ?)",
            ("telegram", "1", None, d.time(WHEN)),
        )
        [(stored,)] = await db.query("SELECT approved_at FROM paired_users")
        assert d.from_time(stored) == WHEN
        assert d.from_time(stored).tzinfo is UTC
        with pytest.raises(ValueError, match="naive"):
            d.time(WHEN.replace(tzinfo=None))


async def test_a_sqlite_body_that_waits_on_anything_else_is_refused_and_rolled_back() -> None:
    async with open_backend("sqlite:///:memory:") as backend:
        db = backend.database

        async def waits(tx: Transaction) -> None:
            await tx.execute("INSERT INTO app_state (key, value) VALUES (?, ?)", ("c", "x"))
            await asyncio.sleep(0)

        with pytest.raises(RuntimeError, match="awaited something other"):
            await db.transact(waits)
        assert await db.query("SELECT key FROM app_state") == []
