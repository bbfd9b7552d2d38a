"""What the heartbeat asks of persistence, beyond the CommitmentStore.

A delivery claim has two phases (see migration m0007): `claimed` while the
model call runs, `sending` from just before the platform call. Every method
that moves or ends a claim is fenced on the claimant: the worker id and the
commitment's attempt count as returned by `claim`, so a claim that expired
and was taken again by someone else is never touched by its first owner.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from core.commitments.model import Commitment, Scope

Final = Literal["sent", "dismissed", "failed"]


@dataclass(frozen=True, slots=True)
class ReapedClaims:
    """Claims whose lease had expired: `released` never reached `sending`
    (back to active), `failed` did (outcome unknown, never re-sent)."""

    released: list[Commitment] = field(default_factory=list)
    failed: list[Commitment] = field(default_factory=list)


class HeartbeatStore(abc.ABC):
    @abc.abstractmethod
    async def due_unclaimed(
        self, *, now: datetime, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Commitment]:
        """Active, unclaimed commitments due at `now` (indexed), soonest first
        (by due_earliest, then id); `after` = the (due_earliest, id) of the
        last row of the previous page."""

    @abc.abstractmethod
    async def next_due_after(self, now: datetime) -> datetime | None:
        """The earliest due_earliest after `now` of any active commitment (indexed)."""

    @abc.abstractmethod
    async def claim(
        self, ids: Sequence[str], *, worker: str, now: datetime, lease_until: datetime
    ) -> list[Commitment]:
        """In one transaction, claim (phase `claimed`) those still active and
        unclaimed, counting the attempt; returns what was claimed, with the
        attempt count that fences the later steps."""

    @abc.abstractmethod
    async def claim_due(
        self,
        scopes: Sequence[Scope],
        *,
        per_scope: int,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> list[Commitment]:
        """In one transaction, claim (as `claim` does) each scope's first
        `per_scope` due, unclaimed commitments (soonest first); rows another
        worker is claiming at that moment are passed over."""

    @abc.abstractmethod
    async def begin_sending(
        self,
        claimed: Sequence[Commitment],
        *,
        worker: str,
        now: datetime,
        lease_until: datetime,
    ) -> bool:
        """In one transaction: move every claim to `sending` (lease renewed),
        only if each is still ours, in phase `claimed`, with a live lease, and
        still active and due. False (and nothing changed) otherwise."""

    @abc.abstractmethod
    async def release(
        self, claimed: Sequence[Commitment], *, worker: str, now: datetime, error: str
    ) -> None:
        """Drop our `claimed` claims (never a `sending` one); the commitments
        stay as they are (active ones are due again); record why."""

    @abc.abstractmethod
    async def finish(
        self,
        claimed: Sequence[Commitment],
        status: Final,
        *,
        worker: str,
        now: datetime,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of our claim and drop it. The status changes only
        while the commitment is active (a user's dismiss meanwhile stands); a
        send is stamped either way, so it counts toward the daily cap."""

    @abc.abstractmethod
    async def reap_expired_claims(self, *, now: datetime) -> ReapedClaims:
        """Claims of any worker whose lease ended at or before `now`:
        `claimed` ones are released, `sending` ones become `failed`."""

    @abc.abstractmethod
    async def next_lease_expiry(self) -> datetime | None:
        """When the earliest live claim's lease ends (indexed)."""

    @abc.abstractmethod
    async def record_turn_unless_recent(
        self, agent_id: str, session_key: str, *, now: datetime, every: timedelta
    ) -> datetime | None:
        """In one statement: record a turn at `now` unless the last one was
        less than `every` ago. None when recorded, else that last turn."""

    @abc.abstractmethod
    async def last_turns(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
        """The last turn of each (agent id, session key) that had one, in one read."""

    @abc.abstractmethod
    async def sent_times_since(
        self, agent_id: str, session_key: str, since: datetime
    ) -> list[datetime]:
        """Send times of this agent session's commitments since `since`, oldest first."""

    @abc.abstractmethod
    async def recent_checkin_texts(self, session_key: str, since: datetime) -> list[str]:
        """Check-ins written into this session's transcript since `since`."""

    @abc.abstractmethod
    async def dismiss_silenced(
        self, ids: Sequence[str], *, now: datetime, reason: str
    ) -> list[str]:
        """Dismiss, with `reason`, those of `ids` that are still active and
        unclaimed and whose member or chat switched follow-ups off, the
        preference read in the same statement; the ids dismissed."""
