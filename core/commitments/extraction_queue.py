"""One agent's extraction queue in memory: which waiting exchanges go next.

A session's exchanges wait until the session has been quiet for the batch
window (or the longest wait has passed since its oldest one), then go
together: a burst of messages in one chat becomes a few model calls instead
of one per message, however busy the bot is. A batch takes only as many
sessions as the model works on at once (a few rounds of calls), so the
sessions left waiting keep gathering exchanges: the slower the model is
behind, the more each call carries. A queue backed up past its mark takes
the sessions waiting longest at once, window or not, so memory stays
bounded. The jobs themselves are rows in the database (jobs.py); this
only orders the worker's copies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from core.commitments.jobs import ExtractionJob
from core.commitments.model import Scope


@dataclass
class AgentExtractionQueue:
    items: list[ExtractionJob] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # something is queued
    full: asyncio.Event = field(default_factory=asyncio.Event)  # backed up: no waiting
    task: asyncio.Task[None] | None = None
    # Per session: when its oldest and its newest waiting exchange arrived.
    first: dict[Scope, datetime] = field(default_factory=dict)
    last: dict[Scope, datetime] = field(default_factory=dict)

    def add(self, job: ExtractionJob, now: datetime) -> None:
        self.items.append(job)
        self.first.setdefault(job.scope, now)
        self.last[job.scope] = now
        self.wake.set()

    def next_ready(self, quiet: timedelta, longest: timedelta) -> datetime | None:
        """When the first waiting session becomes ready; None when none waits."""
        return min((self._ready_at(s, quiet, longest) for s in self.first), default=None)

    def _ready_at(self, scope: Scope, quiet: timedelta, longest: timedelta) -> datetime:
        """Quiet for `quiet` since its newest exchange, or waiting `longest` since its oldest."""
        return min(self.last[scope] + quiet, self.first[scope] + longest)

    def take(
        self,
        now: datetime,
        *,
        quiet: timedelta,
        longest: timedelta,
        limit: int,
        sessions: int,
        every: bool,
    ) -> list[ExtractionJob]:
        """Up to `limit` jobs of at most `sessions` whole ready sessions, the
        one waiting longest first (`every`: every session counts as ready).
        Only the last session taken may be cut at the limit; its rest stays
        queued. A session left for the next batch keeps gathering exchanges,
        so behind a slow model each call carries more of them."""
        ready = [
            s
            for s in sorted(self.first, key=self.first.__getitem__)
            if every or self._ready_at(s, quiet, longest) <= now
        ][:sessions]
        by_scope: dict[Scope, list[ExtractionJob]] = {s: [] for s in ready}
        for job in self.items:
            if job.scope in by_scope:
                by_scope[job.scope].append(job)
        taken: list[ExtractionJob] = []
        for scope in ready:
            room = limit - len(taken)
            if room <= 0:
                break
            jobs = by_scope[scope]
            taken.extend(jobs[:room])
            if len(jobs) <= room:
                del self.first[scope], self.last[scope]
        chosen = {job.id for job in taken}
        self.items = [job for job in self.items if job.id not in chosen]
        if not self.items:
            self.wake.clear()
        return taken
