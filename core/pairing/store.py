"""The PairingStore port: pending pairing requests and approved users, per
(platform, user id)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime


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
class PairedUser:
    """A user the operator approved: answered in direct messages from now on."""

    platform: str
    user_id: str
    username: str | None
    approved_at: datetime


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
    ) -> PairingRequest | None:
        """The user's pending request: the one stored while it has not
        expired (its code, never a new one), else a new one with `code`.
        None when `max_pending` other requests of the platform are pending.
        Expired requests are forgotten on the way, in the same transaction."""

    @abc.abstractmethod
    async def approve(self, code: str, *, now: datetime) -> PairedUser | None:
        """Store the user of the pending, unexpired request with `code` as
        approved and forget the request; None when no such request exists."""

    @abc.abstractmethod
    async def revoke(self, platform: str, user_id: str) -> bool:
        """Forget an approved user (and any pending request of theirs); True
        if they were approved."""

    @abc.abstractmethod
    async def is_paired(self, platform: str, user_id: str) -> bool:
        """Whether the user was approved."""

    @abc.abstractmethod
    async def pending(self, *, now: datetime) -> list[PairingRequest]:
        """The unexpired requests, oldest first."""

    @abc.abstractmethod
    async def paired(self) -> list[PairedUser]:
        """The approved users, in the order they were approved."""
