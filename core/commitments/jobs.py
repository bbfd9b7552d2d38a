"""The extraction queue's port: exchanges waiting for the extraction pass,
as rows in the database, so a crash or a stop loses none of them.

A job is claimed by the worker that queued it (its lease says until when it
vouches for it); a stopping worker releases its jobs, and a job whose lease
ran out (its worker died) is taken over by whichever worker looks next.
Extracting an exchange twice (a lease that ran out under a live worker) is
harmless: the store merges a follow-up it already has by its dedupe key.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from core.commitments.exchange import Exchange
from core.commitments.model import Scope


@dataclass(frozen=True, slots=True)
class NewJob:
    scope: Scope  # its chat_kind is the stored session's, for the group privacy rule
    exchange: Exchange


@dataclass(frozen=True, slots=True)
class ExtractionJob:
    id: int
    scope: Scope
    exchange: Exchange


class ExtractionJobStore(abc.ABC):
    @abc.abstractmethod
    async def enqueue(
        self, job: NewJob, *, worker: str, now: datetime, lease_until: datetime
    ) -> ExtractionJob | None:
        """Store the job, claimed by `worker` until `lease_until`; None, and
        nothing stored, when its member or its chat switched follow-ups off
        (read in the same transaction)."""

    @abc.abstractmethod
    async def claim_orphans(
        self, *, worker: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ExtractionJob]:
        """Claim up to `limit` jobs nobody vouches for (released, or their
        lease ran out before `now`), oldest first."""

    @abc.abstractmethod
    async def renew(self, ids: Sequence[int], *, worker: str, lease_until: datetime) -> None:
        """Extend `worker`'s claim on the jobs it still holds."""

    @abc.abstractmethod
    async def existing(self, ids: Sequence[int]) -> set[int]:
        """Those of `ids` still stored: a job erased with its user, or
        dropped when its member switched follow-ups off, is gone even from
        the worker holding a copy in memory."""

    @abc.abstractmethod
    async def complete(self, ids: Sequence[int], *, worker: str) -> None:
        """The jobs are done (whatever the model answered): remove them."""

    @abc.abstractmethod
    async def release(self, *, worker: str) -> int:
        """Give up every job `worker` holds (at stop); return how many."""

    @abc.abstractmethod
    async def next_orphan_at(self, now: datetime) -> datetime | None:
        """When the earliest job nobody vouches for becomes claimable: `now`
        if one already is, the earliest lease end otherwise, None if there
        are no jobs."""
