"""The per-user settings ports: one time zone per (platform, user id); the
follow-up preferences (a user's own per agent, a shared chat's)."""

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


# --- follow-up preferences ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class FollowUpSubject:
    """Whom an exchange or a follow-up is about, where: what a preference is
    looked up by (a commitment's or an extraction job's scope)."""

    agent_id: str
    platform: str
    user_id: str | None  # None: nobody's in particular (only the chat's setting applies)
    session_key: str


@dataclass(frozen=True, slots=True)
class FollowUpState:
    """The follow-up settings that apply to one user in one chat. None: never
    set, which means on."""

    own: bool | None  # the user's own, the same in every chat of the agent on the platform
    chat: bool | None  # the shared chat's, set by its admin (None in a private chat)
    own_updated_at: datetime | None = None
    chat_updated_at: datetime | None = None

    @property
    def on(self) -> bool:
        """Follow-ups reach this user here: neither setting is off."""
        return self.own is not False and self.chat is not False


@dataclass(frozen=True, slots=True)
class Switched:
    """What switching a preference changed, in one transaction."""

    enabled: bool
    changed: bool  # False: it already was so
    dismissed: int = 0  # pending follow-ups dismissed (switching off)
    unqueued: int = 0  # exchanges waiting for extraction dropped (switching off)


class FollowUpPreferenceStore(abc.ABC):
    @abc.abstractmethod
    async def state(
        self, agent_id: str, platform: str, user_id: str, session_key: str | None = None
    ) -> FollowUpState:
        """The user's own setting and (with `session_key`) the chat's."""

    @abc.abstractmethod
    async def set_user(
        self, agent_id: str, platform: str, user_id: str, enabled: bool, *, now: datetime
    ) -> Switched:
        """Store the user's own setting. Switching off also, in the same
        transaction, dismisses their active follow-ups under the agent (with
        the reason) and drops their exchanges waiting for extraction."""

    @abc.abstractmethod
    async def set_chat(
        self, agent_id: str, session_key: str, enabled: bool, *, now: datetime
    ) -> Switched:
        """Store a shared chat's setting, for every member; switching off
        does to the chat's follow-ups and queued exchanges what `set_user` does."""

    @abc.abstractmethod
    async def silenced(self, subjects: Collection[FollowUpSubject]) -> set[FollowUpSubject]:
        """Those of `subjects` whose user or chat switched follow-ups off
        (one read for a batch or a page)."""
