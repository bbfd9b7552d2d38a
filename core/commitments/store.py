"""The CommitmentStore interface: what extraction, the heartbeat, the CLI and
the slash commands ask of persistence. The SQLite implementation lives in
core/store/sqlite/commitments.py; a PostgreSQL one would implement the same.

Every method that acts on a record by id also takes the scope or filter that
must match, so scope checks happen in the same statement as the change.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.commitments.model import Commitment, NewCommitment, Scope, Status
from core.commitments.rules import MergedFields, merge_fields

# How a duplicate candidate changes the active commitment it duplicates: a
# feature rule (rules.merge_fields) that the store applies inside its
# transaction, so the row it merges into is the one it reads.
MergeRule = Callable[[Commitment, NewCommitment], MergedFields]


@dataclass(frozen=True, slots=True)
class Filter:
    """Which commitments a caller may see or change.

    The admin CLI leaves everything None (all of them). A slash command sets
    agent_id and session_key to its chat, and sender_id to the user who asked,
    so an id from another chat or user simply does not exist for it.
    """

    agent_id: str | None = None
    session_key: str | None = None
    sender_id: str | None = None
    statuses: Collection[Status] | None = None  # None: every status


@dataclass(frozen=True, slots=True)
class ScopeResult:
    """What one extraction answer asks for in one scope, after the rules."""

    scope: Scope
    new: Sequence[NewCommitment]
    resolved_ids: Sequence[str]


@dataclass(frozen=True, slots=True)
class Applied:
    """What one extraction answer changed, in one transaction."""

    created: list[Commitment] = field(default_factory=list)
    merged: list[Commitment] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)


class CommitmentStore(abc.ABC):
    # --- extraction ------------------------------------------------------------

    @abc.abstractmethod
    async def active_for_scopes(self, scopes: Sequence[Scope]) -> dict[Scope, list[Commitment]]:
        """Active (pending or snoozed) commitments of each scope, by due time.
        One query for a whole batch; a scope without any maps to []."""

    @abc.abstractmethod
    async def apply_extractions(
        self, results: Sequence[ScopeResult], *, now: datetime, merge: MergeRule
    ) -> Applied:
        """In one transaction, for each result: mark its `resolved_ids`
        resolved when they are active and belong to exactly its scope (others
        are ignored), then insert each new commitment, or write `merge(active,
        new)` into the active one with the same scope and dedupe key. A topic
        resolved by the same result is not reopened."""

    async def apply_extraction(
        self,
        scope: Scope,
        new: Sequence[NewCommitment],
        resolved_ids: Sequence[str],
        *,
        now: datetime,
        merge: MergeRule = merge_fields,
    ) -> Applied:
        """`apply_extractions` for a single scope."""
        results = [ScopeResult(scope, new, resolved_ids)]
        return await self.apply_extractions(results, now=now, merge=merge)

    # --- list / dismiss / snooze ---------------------------------------------

    @abc.abstractmethod
    async def get(self, commitment_id: str, where: Filter | None = None) -> Commitment | None:
        """The commitment, or None when it does not exist or `where` excludes it."""

    @abc.abstractmethod
    async def list(self, where: Filter, *, limit: int | None = None) -> list[Commitment]:
        """Matching commitments, soonest due first."""

    @abc.abstractmethod
    async def dismiss(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        """Set an active commitment `dismissed`; None when it is not active
        or not visible through `where` (see `get` to tell which)."""

    @abc.abstractmethod
    async def snooze(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        """Set an active commitment `snoozed` with due window [until, latest]."""

    # --- the follow-up buttons -----------------------------------------------

    @abc.abstractmethod
    async def dismiss_sent(
        self, commitment_id: str, *, now: datetime, where: Filter | None = None
    ) -> Commitment | None:
        """Close a `sent` commitment as `dismissed` (its follow-up's Dismiss
        button), keeping `sent_at` so the rolling cap still counts that
        delivery; None when it is not `sent` or not visible through `where`."""

    @abc.abstractmethod
    async def snooze_sent(
        self,
        commitment_id: str,
        *,
        until: datetime,
        latest: datetime,
        now: datetime,
        where: Filter | None = None,
    ) -> Commitment | None:
        """Reopen a `sent` commitment as `snoozed` with due window [until,
        latest] (its follow-up's Snooze button), keeping `sent_at` and
        clearing any claim. None when it is not `sent`, not visible through
        `where`, or another active commitment of its scope already has its
        dedupe key (only one may be active)."""

    @abc.abstractmethod
    async def count_by_status(self) -> dict[str, int]:
        """How many commitments are in each status that has any (the
        metrics gauge, read when Prometheus scrapes)."""

    # --- lifecycle (expiry) ----------------------------------------------------

    @abc.abstractmethod
    async def expire(self, *, before: datetime, now: datetime) -> int:
        """Active commitments whose due_latest is before `before` become
        `expired`. Uses the partial due_latest index: cost grows with the
        rows that expire, not with the table. Returns how many changed."""
