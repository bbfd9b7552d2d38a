"""The UserZoneStore port: one time zone per (platform, user id)."""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

# A user as kept knows one: user ids are only unique within a platform.
UserKey = tuple[str, str]  # (platform, user id)


@dataclass(frozen=True, slots=True)
class UserZone:
    platform: str
    user_id: str
    timezone: str  # an IANA name, validated before it is stored
    updated_at: datetime


class UserZoneStore(abc.ABC):
    @abc.abstractmethod
    async def set_zone(
        self, platform: str, user_id: str, timezone: str, *, now: datetime
    ) -> UserZone:
        """Store (or replace) the user's zone; returns what was stored."""

    @abc.abstractmethod
    async def zone(self, platform: str, user_id: str) -> UserZone | None:
        """The user's zone, None when they set none."""

    @abc.abstractmethod
    async def zones(self, users: Collection[UserKey]) -> dict[UserKey, str]:
        """The zones of those of `users` that set one (one read for a page)."""

    @abc.abstractmethod
    async def clear_zone(self, platform: str, user_id: str) -> bool:
        """Forget the user's zone; True if there was one."""
