"""The PairingStore port: pending pairing requests, approved users and
blocked users, per (platform, user id)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

# What the store knows of a user who is not on `allowFrom`.
Standing = Literal["approved", "blocked", "unknown"]


@dataclass(frozen=True, slots=True)
class PairingRequest:
    """An unknown user's pending request: the code they were given."""

    platform: str
    user_id: str
    code: str
    username: str | None
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class PairingOffer:
    """The user's pending request, and whether the notice with its code is
    to be sent now (a new code, or the last notice long enough ago)."""

    request: PairingRequest
    notify: bool


@dataclass(frozen=True, slots=True)
class PairedUser:
    """A user the operator approved: answered in direct messages from now on."""

    platform: str
    user_id: str
    username: str | None
    approved_at: datetime


@dataclass(frozen=True, slots=True)
class BlockedUser:
    """A user the operator blocked: never answered in a direct message and
    never offered a code, until unblocked."""

    platform: str
    user_id: str
    username: str | None
    blocked_at: datetime


@dataclass(frozen=True, slots=True)
class Blocking:
    """What `block` did: the block, and what it took away."""

    user: BlockedUser
    dropped_codes: tuple[str, ...]
    was_approved: bool


class PairingStore(abc.ABC):
    @abc.abstractmethod
    async def request(
        self,
        platform: str,
        user_id: str,
        username: str | None,
        *,
        code: str,
        now: datetime,
        expires_at: datetime,
        max_pending: int,
        notify_every: timedelta | None,
    ) -> PairingOffer | None:
        """The user's pending request: the one stored while it has not
        expired (its code, never a new one), else a new one with `code`.
        When the platform already has `max_pending` requests, the oldest
        are dropped to make room: a newcomer is never refused. None when the
        user is blocked.

        `notify` is true, and the moment recorded, for a new request and when
        the last notice is `notify_every` old; `notify_every=None` records
        nothing (an answer the user gets anyway, such as a slash command's).
        A user whose notice is not due costs one read and no write. Expired
        requests are forgotten on the way, in the same transaction."""

    @abc.abstractmethod
    async def approve(self, code: str, *, now: datetime) -> PairedUser | None:
        """Store the user of the pending, unexpired request with `code` as
        approved and forget the request; None when no such request exists."""

    @abc.abstractmethod
    async def reject(self, code: str, *, now: datetime) -> PairingRequest | None:
        """Forget the pending, unexpired request with `code`; None when no
        such request exists."""

    @abc.abstractmethod
    async def revoke(self, platform: str, user_id: str) -> bool:
        """Forget an approved user (and any pending request of theirs); True
        if they were approved."""

    @abc.abstractmethod
    async def block(
        self, platform: str, user_id: str, username: str | None, *, now: datetime
    ) -> Blocking:
        """Block the user: their pending request and approval are forgotten
        in the same transaction. Blocking again keeps the first block."""

    @abc.abstractmethod
    async def unblock(self, platform: str, user_id: str) -> BlockedUser | None:
        """Lift a block; None when the user was not blocked."""

    @abc.abstractmethod
    async def standing(self, platform: str, user_id: str) -> Standing:
        """Whether the user was approved, blocked, or neither (one read)."""

    @abc.abstractmethod
    async def is_paired(self, platform: str, user_id: str) -> bool:
        """Whether the user was approved."""

    @abc.abstractmethod
    async def pending(self, *, now: datetime) -> list[PairingRequest]:
        """The unexpired requests, oldest first."""

    @abc.abstractmethod
    async def paired(self) -> list[PairedUser]:
        """The approved users, in the order they were approved."""

    @abc.abstractmethod
    async def blocked(self) -> list[BlockedUser]:
        """The blocked users, in the order they were blocked."""
