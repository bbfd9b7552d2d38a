"""The background reconciler indexes every session an import left behind,
then folds the index segments that bulk work left, so later live writes and
queries do not pay for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.clock import TestClock
from core.search.reconcile import IndexReconciler
from core.search.redact import Redactor
from core.store import ImportRow, NewMessage, SearchScope, Store
from core.store.postgres import PostgresStore
from core.store.sql.index import BULK_TEXT_CHARS
from core.store.sqlite import SqliteStore
from tests.core.store.test_contract import T0
from tests.support import pg_helpers
from tests.support.store_helpers import count_index_rows, index_consistency, open_any_store

KEYS = [f"agent:main:telegram:private:{n}" for n in range(12)]


ROWS = [
    ImportRow(key, role, f"message {n} about the budget", T0 + timedelta(seconds=n))
    for key in KEYS
    for n, role in enumerate(["user", "assistant"] * 5)
]


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    """Each backend's store, after an import."""
    async with open_any_store(storage_url) as opened:
        if isinstance(opened, PostgresStore):
            # Autovacuum's analyze also folds GIN's pending list; the tests
            # below decide when folding happens.
            await pg_helpers.execute(
                opened, "ALTER TABLE message_search SET (autovacuum_enabled = false)"
            )
        assert await opened.import_messages(ROWS) == len(ROWS)
        yield opened


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The SQLite store after an import, for checks of its connections."""
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        assert await opened.import_messages(ROWS) == len(ROWS)
        yield opened


async def live_changes(store: SqliteStore) -> int:
    """Changes made through the store's live connection so far."""
    return await store.connection.run_read(lambda conn: conn.total_changes)


async def test_run_once_indexes_every_session_behind_then_compacts(store: Store) -> None:
    seen: list[tuple[str, int]] = []
    reconciler = IndexReconciler(store, TestClock(T0), batch=5)
    assert await reconciler.run_once(lambda key, rows: seen.append((key, rows))) == len(KEYS)
    assert sorted(seen) == sorted((key, 10) for key in KEYS)
    assert await store.sessions_behind() == []
    assert await index_consistency(store) == (0, 0)
    assert await count_index_rows(store) == 10 * len(KEYS)
    # Nothing is left to fold: the pass compacted what its transactions left.
    assert await store.compact_index() is False
    # A pass with nothing behind does nothing.
    assert await reconciler.run_once() == 0


async def test_reindexing_session_by_session_leaves_segments_to_fold(store: Store) -> None:
    # The control for the test above: one transaction per session leaves
    # small segments that a compaction step folds, after which it reports done.
    for key in KEYS:
        await store.reindex_session(key)
    assert await store.compact_index() is True
    steps = 1
    while await store.compact_index():
        steps += 1
        assert steps < 100
    assert await index_consistency(store) == (0, 0)
    assert await count_index_rows(store) == 10 * len(KEYS)
    hits = await store.search(
        "budget", scope=SearchScope(), limit=10 * len(KEYS) + 1, redactor=Redactor()
    )
    assert len(hits) == 10 * len(KEYS)


async def test_bulk_jobs_leave_the_live_connection_alone(lite: SqliteStore) -> None:
    # FTS5 keeps a per-connection table sized by the largest transaction;
    # imports, reindexing, compaction and session deletes run on the store's
    # second connection, so the live one (chat writes, searches) made none of
    # their changes, yet sees all of them.
    before = await live_changes(lite)
    await IndexReconciler(lite, TestClock(T0)).run_once()
    more = [ImportRow(KEYS[0], "user", "one more about the budget", T0)]
    assert await lite.import_messages(more) == 1
    assert await lite.reindex_session(KEYS[0]) == 11
    assert await lite.delete_session(KEYS[1]) == 10
    assert await live_changes(lite) == before
    assert await count_index_rows(lite) == 10 * len(KEYS) + 1 - 10
    assert await index_consistency(lite) == (0, 0)
    # Writes from the live connection still work alongside.
    session = await lite.get_session(KEYS[2])
    assert session is not None


async def test_a_very_long_message_is_written_on_the_bulk_connection(lite: SqliteStore) -> None:
    key = KEYS[0]
    await lite.ensure_session(
        key, agent_id="main", platform="telegram", chat_id="0", chat_kind="private",
        thread_id=None, now=T0,
    )  # fmt: skip
    before = await live_changes(lite)
    long_text = " ".join(f"word{n}" for n in range(BULK_TEXT_CHARS // 5)) + " needle"
    record = await lite.add_message(NewMessage(key, "user", long_text, T0))
    assert await live_changes(lite) == before
    await lite.add_message(NewMessage(key, "user", "short needle", T0))
    assert await live_changes(lite) > before
    hits = await lite.search(
        "needle", scope=SearchScope(session_key=key), limit=5, redactor=Redactor()
    )
    assert record.id in [h.message_id for h in hits]
