"""What the heartbeat asks of persistence, beyond the CommitmentStore."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from core.commitments.model import Commitment

Final = Literal["sent", "dismissed", "failed"]


class HeartbeatStore(abc.ABC):
    @abc.abstractmethod
    async def due_unclaimed(self, *, now: datetime, limit: int) -> list[Commitment]:
        """Active, unclaimed commitments due at `now` (indexed), soonest first."""

    @abc.abstractmethod
    async def next_due_after(self, now: datetime) -> datetime | None:
        """The earliest due_earliest after `now` of any active commitment (indexed)."""

    @abc.abstractmethod
    async def claim(self, ids: Sequence[str], *, now: datetime) -> list[Commitment]:
        """In one transaction, claim those still active and unclaimed (attempt
        counted); returns what was claimed."""

    @abc.abstractmethod
    async def release(self, ids: Sequence[str], *, now: datetime, error: str) -> None:
        """Drop the claim, keep the commitments active, record why."""

    @abc.abstractmethod
    async def finish(
        self,
        ids: Sequence[str],
        status: Final,
        *,
        now: datetime,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of a claimed delivery and drop the claim."""

    @abc.abstractmethod
    async def fail_unconfirmed_claims(self, *, now: datetime) -> list[Commitment]:
        """At start-up: claims left by a crash become `failed` (never resent)."""

    @abc.abstractmethod
    async def last_turn_at(self, agent_id: str, session_key: str) -> datetime | None: ...

    @abc.abstractmethod
    async def record_turn(self, agent_id: str, session_key: str, *, now: datetime) -> None: ...

    @abc.abstractmethod
    async def sent_times_since(
        self, agent_id: str, session_key: str, since: datetime
    ) -> list[datetime]:
        """Send times of this agent session's commitments since `since`, oldest first."""

    @abc.abstractmethod
    async def recent_checkin_texts(self, session_key: str, since: datetime) -> list[str]:
        """Check-ins written into this session's transcript since `since`."""


def heartbeat_store_for(store: object) -> HeartbeatStore:
    from core.store.sqlite import SqliteStore
    from core.store.sqlite_heartbeat import SqliteHeartbeatStore

    if isinstance(store, SqliteStore):
        return SqliteHeartbeatStore(store)
    raise TypeError(f"no heartbeat store for {type(store).__name__}")
