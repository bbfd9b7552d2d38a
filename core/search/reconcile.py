"""Background index reconciliation: sessions whose full-text rows are behind
their messages (after an import, or a reindex request) are rebuilt in batches,
one session per transaction, so chat writes are never blocked for long."""

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


class IndexReconciler:
    def __init__(
        self, store: Store, clock: Clock, *, batch: int = 50, idle_seconds: float = 30
    ) -> None:
        self._store = store
        self._clock = clock
        self._batch = batch
        self._idle = idle_seconds
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
                    await self._compact()
                return done
            for key in keys:
                rows = await self._store.reindex_session(key)
                done += 1
                if progress is not None:
                    progress(key, rows)
            # Yield between batches so conversation turns get the database.
            await asyncio.sleep(0)

    async def _compact(self) -> None:
        """Fold the segments a pass left behind, one short transaction per
        step, so the next live writes do not pay for the bulk ones."""
        for _ in range(MAX_COMPACT_STEPS):
            if not await self._store.compact_index():
                return
            await asyncio.sleep(0)

    async def run(self) -> None:
        """Reconcile now, then whenever woken or every `idle_seconds`."""
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
            self._wake.clear()
            sleeper = asyncio.create_task(self._clock.sleep(self._idle))
            waker = asyncio.create_task(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()
