"""The CommitmentStore interface: what extraction, the heartbeat, the CLI and
the slash commands ask of persistence. The SQLite implementation lives in
core/store/sqlite_commitments.py; a PostgreSQL one would implement the same.

Every method that acts on a record by id also takes the scope or filter that
must match, so scope checks happen in the same statement as the change.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from core.commitments.model import Commitment, NewCommitment, Scope, Status

if TYPE_CHECKING:
    from core.store.base import Store


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
    async def apply_extractions(self, results: Sequence[ScopeResult], *, now: datetime) -> Applied:
        """In one transaction, for each result: mark its `resolved_ids`
        resolved when they are active and belong to exactly its scope (others
        are ignored), then insert each new commitment, or merge it into the
        active one with the same scope and dedupe key (higher confidence kept,
        window widened). A topic resolved by the same result is not reopened."""

    async def apply_extraction(
        self,
        scope: Scope,
        new: Sequence[NewCommitment],
        resolved_ids: Sequence[str],
        *,
        now: datetime,
    ) -> Applied:
        """`apply_extractions` for a single scope."""
        return await self.apply_extractions([ScopeResult(scope, new, resolved_ids)], now=now)

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

    # --- lifecycle (expiry, heartbeat) ---------------------------------------

    @abc.abstractmethod
    async def expire(self, *, before: datetime, now: datetime) -> int:
        """Active commitments whose due_latest is before `before` become
        `expired`. Uses the partial due_latest index: cost grows with the
        rows that expire, not with the table. Returns how many changed."""

    @abc.abstractmethod
    async def due(self, *, now: datetime, limit: int = 100) -> list[Commitment]:
        """Active commitments with due_earliest <= now <= due_latest, soonest first."""

    @abc.abstractmethod
    async def next_due_at(self) -> datetime | None:
        """The earliest due_earliest of any active commitment (to sleep until)."""

    @abc.abstractmethod
    async def sent_count_since(self, agent_id: str, session_key: str, since: datetime) -> int:
        """Commitments of this agent session sent at or after `since` (maxPerDay)."""

    @abc.abstractmethod
    async def mark_sent(
        self, commitment_id: str, *, now: datetime, message_id: str | None
    ) -> Commitment | None:
        """Active → `sent`, recording the platform message id; None if not active."""

    @abc.abstractmethod
    async def record_failure(
        self, commitment_id: str, *, now: datetime, error: str, give_up: bool
    ) -> Commitment | None:
        """Count a failed delivery attempt; `give_up` sets status `failed`."""


def commitment_store_for(store: Store) -> CommitmentStore:
    """The CommitmentStore built on an opened transcript store's connection."""
    # Imported here: the backend module imports this one for the interface.
    from core.store.sqlite import SqliteStore
    from core.store.sqlite_commitments import SqliteCommitmentStore

    if isinstance(store, SqliteStore):
        return SqliteCommitmentStore(store)
    raise TypeError(f"no commitment store for {type(store).__name__}")
