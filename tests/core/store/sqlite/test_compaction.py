"""SQLite keeps up with live writes: the reconciler folds the index segments
that one-message transactions leave, in bounded steps, once enough writes
went in; and the WAL file is cut back to a bounded size."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from core.clock import TestClock
from core.search.reconcile import IndexReconciler
from core.store import ImportRow, NewMessage
from core.store.sqlite import SqliteStore
from core.store.sqlite.connection import JOURNAL_SIZE_LIMIT
from core.store.sqlite.driver import sqlite3
from tests.core.store.test_contract import T0, add_session, search
from tests.support.store_helpers import index_consistency

KEYS = ["agent:main:telegram:private:1", "agent:main:telegram:private:2"]
OTHER_AGENT = "agent:side:discord:group:3"
THAI = ["ประชุม", "งบประมาณ", "โครงการ", "รายงาน", "ลูกค้า"]
QUERIES = ["budget", "word7", '"about the budget"', "thing3", "งบประมาณ", "ลูกค้า รายงาน", "plan*"]
# A frame of the WAL: a database page and its 24-byte header.
FRAME = 4096 + 24


def text(n: int) -> str:
    thai = THAI[n % 5] + THAI[(n * 3) % 5]
    return f"message {n} about the budget, word{n % 50} thing{n % 13} plan{n % 7} {thai}"


async def write_live(store: SqliteStore, start: int, count: int) -> None:
    """`count` chat messages, one add_message (one transaction) each."""
    keys = [*KEYS, OTHER_AGENT]
    for n in range(start, start + count):
        message = NewMessage(keys[n % 3], "user", text(n), T0 + timedelta(seconds=n))
        await store.add_message(message)


async def answers(store: SqliteStore) -> dict[str, list[tuple[int, float, str]]]:
    """Every query's hits, agent-wide and in one session, in rank order."""
    out = {}
    for q in QUERIES:
        for label, hits in (
            ("agent", await search(store, q, agent="main", limit=50)),
            ("session", await search(store, q, key=KEYS[0], limit=50)),
        ):
            out[f"{label}:{q}"] = [(h.message_id, round(h.score, 9), h.snippet) for h in hits]
    return out


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait (up to a second) for work on the store's threads to show."""
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached within a second")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        for key in (*KEYS, OTHER_AGENT):
            await add_session(opened, key)
        yield opened


def count_steps(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The page budget of every compaction step the store is asked for."""
    asked: list[int] = []
    step = store.compact_index

    async def counted(pages: int = 500) -> bool:
        asked.append(pages)
        return await step(pages)

    monkeypatch.setattr(store, "compact_index", counted)
    return asked


# --- compaction ---------------------------------------------------------------


async def test_live_writes_are_compacted_once_enough_went_in(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = count_steps(store, monkeypatch)
    reconciler = IndexReconciler(store, TestClock(T0), compact_after=300)
    # The first upkeep after a start always makes a pass (nothing to fold yet).
    assert await reconciler.upkeep() == 0
    assert asked == [500]

    await write_live(store, 0, 240)
    shape = await store.index_shape()
    assert shape.leaves_written >= 240
    # Fewer index writes than the threshold since the pass: no step at all.
    assert await reconciler.upkeep() == 0
    assert asked == [500]
    assert await store.index_shape() == shape

    await write_live(store, 240, 120)
    before = await answers(store)
    fragmented = await store.index_shape()
    assert fragmented.segments >= 8
    steps = await reconciler.upkeep()
    assert steps >= 1 and len(asked) == 1 + steps + 1  # the last step finds nothing
    compacted = await store.index_shape()
    assert compacted.segments <= fragmented.segments // 2
    # Folding changes how the index is stored, never what it answers.
    assert await answers(store) == before
    assert await index_consistency(store) == (0, 0)
    assert sum(len(hits) for hits in before.values()) > 100
    # Merges do not count as writes: with nothing new, the next upkeep rests.
    assert compacted.leaves_written == fragmented.leaves_written
    assert await reconciler.upkeep() == 0


async def test_the_running_reconciler_compacts_on_its_idle_tick(store: SqliteStore) -> None:
    clock = TestClock(T0)
    reconciler = IndexReconciler(store, clock, idle_seconds=30, compact_after=100)
    task = asyncio.create_task(reconciler.run())

    async def sleeping() -> bool:
        return clock.sleepers == 1

    try:
        await eventually(sleeping)
        await write_live(store, 0, 360)
        fragmented = await store.index_shape()
        await clock.advance(29)
        assert await store.index_shape() == fragmented

        async def compacted() -> bool:
            return (await store.index_shape()).segments < fragmented.segments

        await clock.advance(1)
        await eventually(compacted)
        await eventually(sleeping)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


class StepMeter(SqliteStore):
    """A store that measures the WAL frames each compaction step writes."""

    frames: list[int]

    async def compact_index(self, pages: int = 500) -> bool:
        # journal_size_limit 0: the checkpoint empties the WAL before each step.
        assert await self.checkpoint_log()
        assert self.connection.wal_bytes() == 0
        more = await super().compact_index(pages)
        self.frames.append(self.connection.wal_bytes() // FRAME)
        return more


def configure(conn: sqlite3.Connection, **options: int) -> None:
    for name, value in options.items():
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES (?, ?)", (name, value))


def unique_words(session: int, n: int) -> str:
    return "".join(f" u{session}x{n}y{j}" for j in range(30))


async def fragmented_meter(path: Path) -> StepMeter:
    """An index of 24 sessions, each indexed in its own transaction, its 24
    segments left unmerged: a few hundred pages to fold."""
    meter = StepMeter(path, journal_size_limit=0)
    meter.frames = []
    await meter.open()
    keys = [f"agent:main:telegram:private:{n}" for n in range(24)]
    rows = [
        ImportRow(key, "user", text(n) + unique_words(s, n), T0 + timedelta(seconds=n))
        for s, key in enumerate(keys)
        for n in range(40)
    ]
    await meter.import_messages(rows)
    # No merging while the segments go in, so they are all there to fold.
    await meter.connection.run_write(lambda conn: configure(conn, automerge=0, crisismerge=64))
    for key in keys:
        await meter.reindex_session(key)
    await meter.connection.run_write(lambda conn: configure(conn, automerge=8, crisismerge=16))
    assert (await meter.index_shape()).segments == len(keys)
    return meter


async def test_a_compaction_step_writes_about_its_page_budget(tmp_path: Path) -> None:
    meter = await fragmented_meter(tmp_path / "kept.sqlite")
    try:
        before = await search(meter, "budget", limit=5)
        steps = await IndexReconciler(meter, TestClock(T0), step_pages=4).compact()
        assert steps >= 5
        # Each step (and so each wait a chat write can have behind one) is a
        # small, bounded part of the whole fold.
        whole = sum(meter.frames)
        assert max(meter.frames) <= whole // 4, (meter.frames, whole)
        assert await search(meter, "budget", limit=5) == before
        assert await index_consistency(meter) == (0, 0)
    finally:
        await meter.close()


# --- the WAL ------------------------------------------------------------------


async def test_the_connection_limits_the_journal_size(store: SqliteStore) -> None:
    rows = await store.connection.fetchall("PRAGMA journal_size_limit")
    assert rows[0][0] == JOURNAL_SIZE_LIMIT


async def test_a_bulk_transaction_leaves_no_large_wal_behind(tmp_path: Path) -> None:
    # One large transaction (an import) grows the WAL far past the limit; the
    # checkpoint after it cannot shrink the file, but the next commit cuts it
    # back to the limit instead of reusing it at full size for good.
    limit = 64 * 1024
    async with SqliteStore(
        tmp_path / "kept.sqlite", wal_autocheckpoint=50, journal_size_limit=limit
    ) as store:
        for key in (*KEYS, OTHER_AGENT):
            await add_session(store, key)
        rows = [
            ImportRow(KEYS[0], "user", text(n) + " padding" * 40, T0 + timedelta(seconds=n))
            for n in range(3000)
        ]
        await store.import_messages(rows)
        assert store.connection.wal_bytes() > 16 * limit
        await write_live(store, 0, 1)
        assert 0 < store.connection.wal_bytes() <= limit


async def test_idle_upkeep_empties_the_wal_a_burst_left(tmp_path: Path) -> None:
    limit = 64 * 1024
    async with SqliteStore(tmp_path / "kept.sqlite", journal_size_limit=limit) as store:
        for key in (*KEYS, OTHER_AGENT):
            await add_session(store, key)
        reconciler = IndexReconciler(store, TestClock(T0), compact_after=10**9)
        await reconciler.upkeep()
        await write_live(store, 0, 200)
        # Below the autocheckpoint, so nothing has checkpointed the burst.
        assert store.connection.wal_bytes() > 8 * limit
        assert await reconciler.upkeep() == 0  # no compaction: only the log
        assert store.connection.wal_bytes() <= limit
        # The log was folded into the database, not lost.
        assert len(await search(store, "budget", agent="main", limit=500)) == 134


async def test_a_reader_elsewhere_does_not_hold_up_the_idle_checkpoint(tmp_path: Path) -> None:
    # Another process in a read transaction: truncating the WAL would have to
    # wait for it (up to the busy timeout, holding up every chat write);
    # instead the checkpoint copies what it can and reports it did not finish.
    async with SqliteStore(tmp_path / "kept.sqlite", journal_size_limit=0) as store:
        for key in (*KEYS, OTHER_AGENT):
            await add_session(store, key)
        await write_live(store, 0, 20)
        reader = sqlite3.connect(store.connection.path, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM messages").fetchone()
            t0 = time.perf_counter()
            assert await store.checkpoint_log() is False
            assert time.perf_counter() - t0 < 0.5
            await write_live(store, 20, 1)  # writes go on meanwhile
        finally:
            reader.close()
        assert await store.checkpoint_log() is True
        assert store.connection.wal_bytes() == 0
