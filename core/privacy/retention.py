"""Retention that runs: a background pass erases what outlived
`storage.retention` (core/config/model.py), on every worker.

- `messages`: messages older than it (with their full-text rows), and the
  exchanges queued for extraction and the parked platform updates as old
  (both hold a message's text). Sessions stay, even left empty (the SQL
  store says why).
- `closed`: follow-ups and reminders that ended this long ago; an active
  one stays whatever its age.

Each kind goes in batches, one short transaction each, sized by how long
the last one took (`next_size`), and after each the pass rests as long as
the batch took: a turn's write waits behind one batch at most, and most
writes find the store free.
The database keeps it right (core/store/sql/retention.py): two workers'
passes take disjoint rows, and a crash mid-batch rolls that batch back
whole (its rows wait for the next pass). After a pass that erased something, the backend's
erasure purge runs once (a WAL checkpoint, a VACUUM).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.clock import Clock
from core.config.model import RetentionConfig
from core.logs import event
from core.metrics import recorder
from core.privacy.store import RETAINED_KINDS, RetainedKind, RetentionStore

log = logging.getLogger("kept.retention")

# A turn's write queued behind a batch waits for all of it, so a batch is
# sized by the time it takes rather than by a row count alone: what a row
# costs varies by kind and by backend (on SQLite, FTS5's secure-delete
# rewrites the index pages of every term of a deleted message, more the
# larger the index). Each kind's batches start at MIN_BATCH rows and are
# resized after every batch towards BATCH_SECONDS, up to BATCH rows
# (bench/retention.py measures what it costs other chats' writes).
BATCH = 300
MIN_BATCH = 10
BATCH_SECONDS = 0.01
# Rest after a batch, as a share of the time it took: with 1.0 the pass
# holds the store at most half the time, so a turn's write that arrives
# meanwhile usually goes at once; a pass at 1 M messages takes twice as
# long, which a background erasure can afford.
REST = 1.0
# How often the pass runs (the first right after start).
EVERY_SECONDS = 600.0

_BY_MESSAGES: frozenset[RetainedKind] = frozenset(("messages", "queued", "updates"))


@dataclass(frozen=True, slots=True)
class RetentionCutoffs:
    """Rows older than these go; None: that retention keeps forever."""

    messages: datetime | None
    closed: datetime | None

    @classmethod
    def at(cls, now: datetime, policy: RetentionConfig) -> RetentionCutoffs:
        def before(seconds: float | None) -> datetime | None:
            return None if seconds is None else now - timedelta(seconds=seconds)

        return cls(before(policy.messages_seconds), before(policy.closed_seconds))

    def of(self, kind: RetainedKind) -> datetime | None:
        return self.messages if kind in _BY_MESSAGES else self.closed


@dataclass
class RetentionPass:
    """What one pass erased, by kind, and how many transactions it took."""

    erased: dict[RetainedKind, int] = field(default_factory=dict)
    batches: int = 0

    @property
    def total(self) -> int:
        return sum(self.erased.values())


class Retention:
    def __init__(
        self,
        store: RetentionStore,
        policy: Callable[[], RetentionConfig],
        clock: Clock,
        *,
        batch: int = BATCH,
        batch_seconds: float = BATCH_SECONDS,
        every_seconds: float = EVERY_SECONDS,
        rest: float = REST,
    ) -> None:
        self._store = store
        self._policy = policy
        self._clock = clock
        self._batch = batch
        self._batch_seconds = batch_seconds
        self._every = every_seconds
        self._rest = rest
        # Each kind's batch size as the last batches found it (kept across passes).
        self._sizes: dict[RetainedKind, int] = {}

    async def run_once(self) -> RetentionPass:
        """One pass over every kind, with the policy and the time as they are
        now; what it erased. A failing batch ends the pass (its rows stay,
        rolled back); what earlier batches erased is still purged."""
        cutoffs = RetentionCutoffs.at(self._clock.now(), self._policy())
        done = RetentionPass()
        try:
            for kind in RETAINED_KINDS:
                before = cutoffs.of(kind)
                if before is not None:
                    await self._drain(kind, before, done)
            # Not the user's policy: counters that outlived their rule's day.
            await self._store.prune_counters(self._clock.now())
        finally:
            erased = [kind for kind, rows in done.erased.items() if rows]
            if erased:
                await self._store.finish(erased)
        return done

    async def _drain(self, kind: RetainedKind, before: datetime, done: RetentionPass) -> None:
        while True:
            size = self._sizes.get(kind, min(self._batch, MIN_BATCH))
            started = self._clock.now()
            rows = await self._store.erase_batch(kind, before, limit=size)
            took = (self._clock.now() - started).total_seconds()
            done.batches += 1
            if not rows:
                return
            self._sizes[kind] = self.next_size(size, rows, took)
            done.erased[kind] = done.erased.get(kind, 0) + rows
            recorder().retention_erased(kind, rows)
            # Writers queued behind this batch go before the next one, and
            # those that come during the rest find the store free.
            await self._clock.sleep(took * self._rest)

    def next_size(self, size: int, rows: int, took: float) -> int:
        """The next batch's rows after one of `rows` rows (asked for `size`)
        took `took` seconds: what fits BATCH_SECONDS at that pace, at most
        twice `size` (one fast batch is no proof), within MIN_BATCH and the
        configured batch."""
        # Too fast to measure (a clock that did not move): as many as allowed.
        fits = 2 * size if took <= 0 else int(rows * self._batch_seconds / took)
        return max(min(self._batch, MIN_BATCH), min(self._batch, 2 * size, fits))

    async def run(self) -> None:
        """A pass now, then every `every_seconds`."""
        while True:
            try:
                done = await self.run_once()
                if done.total:
                    event(
                        log,
                        logging.INFO,
                        "retention_erased",
                        batches=done.batches,
                        **{kind: rows for kind, rows in done.erased.items()},
                    )
            except Exception as exc:
                event(
                    log,
                    logging.WARNING,
                    "retention_failed",
                    error=repr(exc),
                    action="none if it recurs rarely: the next pass erases what this one "
                    "left; else check the database",
                )
            await self._clock.sleep(self._every)
