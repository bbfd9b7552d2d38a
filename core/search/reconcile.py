"""Background index upkeep.

- Reconciliation: sessions whose full-text rows are behind their messages
  (after an import, or a reindex request) are rebuilt in batches, one session
  per transaction, so chat writes are never blocked for long.
- Compaction: every write adds a small segment to the full-text index, which
  the index folds together only lazily; a query reads every segment. Once
  enough writes have gone in since the last pass, the segments are folded in
  bounded steps (one short transaction each, live writes queued in between).
- The write-ahead log is cut back to a bounded size when idle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from core.clock import Clock
from core.logs import event
from core.store.base import Store

log = logging.getLogger("kept.search")

Progress = Callable[[str, int], None]

# About 500 pages each: enough for an index of tens of millions of messages.
MAX_COMPACT_STEPS = 10_000
# Pages one compaction step writes: a few milliseconds of work, so a chat
# write queued behind a step waits about that long.
COMPACT_STEP_PAGES = 500
# Index leaf pages written (a short message writes one) that make a pass
# worth it: small segments are cheap to fold, and each one left unfolded
# costs every query a lookup per term.
COMPACT_AFTER_WRITES = 64


class IndexReconciler:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        batch: int = 50,
        idle_seconds: float = 30,
        compact_after: int = COMPACT_AFTER_WRITES,
        step_pages: int = COMPACT_STEP_PAGES,
    ) -> None:
        self._store = store
        self._clock = clock
        self._batch = batch
        self._idle = idle_seconds
        self._compact_after = compact_after
        self._step_pages = step_pages
        # store.index_writes() when the last compaction pass began; None
        # until one ran in this process, so a restart always starts with one.
        self._compacted_at: int | None = None
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_once(self, progress: Progress | None = None) -> int:
        """Index every session that is behind; returns sessions indexed."""
        done = 0
        while True:
            keys = await self._store.sessions_behind(limit=self._batch)
            if not keys:
                if done:
                    await self.compact()
                return done
            for key in keys:
                rows = await self._store.reindex_session(key)
                done += 1
                if progress is not None:
                    progress(key, rows)
            # Yield between batches so conversation turns get the database.
            await asyncio.sleep(0)

    async def compact(self) -> int:
        """Fold the segments writes left behind, one short transaction per
        step, so queries and later writes do not pay for them; returns the
        steps taken."""
        self._compacted_at = await self._store.index_writes()
        for step in range(MAX_COMPACT_STEPS):
            if not await self._store.compact_index(self._step_pages):
                return step
            # Chat writes waiting for the database go before the next step.
            await asyncio.sleep(0)
        return MAX_COMPACT_STEPS

    async def upkeep(self) -> int:
        """The idle work: a compaction pass once enough writes went into the
        index since the last one, then the write-ahead log cut back. Returns
        compaction steps taken."""
        writes = await self._store.index_writes()
        steps = 0
        if self._compacted_at is None or writes - self._compacted_at >= self._compact_after:
            steps = await self.compact()
        if not await self._store.checkpoint_log():
            event(
                log,
                logging.DEBUG,
                "wal_checkpoint_deferred",
                reason="another connection was reading",
                action="none; it is retried when next idle",
            )
        return steps

    async def run(self) -> None:
        """Reconcile and do the upkeep now, then whenever woken or every
        `idle_seconds`."""
        while True:
            try:
                done = await self.run_once()
                if done:
                    event(log, logging.INFO, "index_reconciled", sessions=done)
            except Exception as exc:
                event(
                    log,
                    logging.ERROR,
                    "index_reconcile_failed",
                    error=repr(exc),
                    action="run `kept reindex` and check the database file",
                )
            try:
                steps = await self.upkeep()
                if steps:
                    event(log, logging.DEBUG, "index_compacted", steps=steps)
            except Exception as exc:
                event(
                    log,
                    logging.WARNING,
                    "index_upkeep_failed",
                    error=repr(exc),
                    action="none if it recurs rarely (search stays correct, only slower); "
                    "else check the database file and disk space",
                )
            self._wake.clear()
            sleeper = asyncio.create_task(self._clock.sleep(self._idle))
            waker = asyncio.create_task(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()
