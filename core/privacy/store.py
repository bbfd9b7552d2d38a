"""The erasure port: what kept holds from one user, counted, and erased in
one transaction. Which tables it reaches, and how, is core/privacy/holdings.py."""

from __future__ import annotations

import abc
from dataclasses import dataclass, fields
from datetime import datetime

from core.messages import ChatKind
from core.privacy.export import UserExport


@dataclass(frozen=True, slots=True)
class ErasedUser:
    """Whose data: a platform user, under one agent or (None) every agent."""

    platform: str
    user_id: str
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ErasureCounts:
    """What an erasure removes (or removed): the user's private chats whole,
    and in shared chats only their own rows and the bot's replies to them."""

    chats: int = 0  # private chats erased whole
    messages: int = 0  # every message removed: theirs, and the bot's in those chats
    follow_ups: int = 0
    reminders: int = 0
    queued: int = 0  # exchanges waiting for the extraction model
    updates: int = 0  # raw platform updates parked or queued from their private chats
    settings: int = 0  # their time zone, follow-up switch, a pending pairing request

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


class ErasureStore(abc.ABC):
    @abc.abstractmethod
    async def count(self, user: ErasedUser) -> ErasureCounts:
        """What `erase` would remove now; changes nothing."""

    @abc.abstractmethod
    async def erase(self, user: ErasedUser) -> ErasureCounts:
        """Remove everything `count` counts, in one transaction (a failure
        or a crash leaves all of it); what was removed. Full-text entries go
        with their messages. The pairing approval and the operator's block
        stay (holdings.py says why)."""

    @abc.abstractmethod
    async def count_session(self, session_key: str) -> ErasureCounts:
        """What `erase_session` would remove now; changes nothing."""

    @abc.abstractmethod
    async def erase_session(self, session_key: str) -> ErasureCounts:
        """Remove one chat's session whole, every member's part of it (a
        group's transcript, say), with its follow-ups, reminders and queued
        exchanges, in one transaction; what was removed (`chats` counts the
        session)."""


@dataclass(frozen=True, slots=True)
class ChatSummary:
    """One stored chat (session), as the operator sees it before acting on
    a request about it."""

    key: str
    kind: ChatKind
    members: int  # distinct people who wrote in it
    messages: int
    first: datetime | None  # None: no message stored
    last: datetime | None


class StoredChats(abc.ABC):
    @abc.abstractmethod
    async def chats(self, member: tuple[str, str] | None = None) -> list[ChatSummary]:
        """Every stored chat, most recently active first; with `member`
        (platform, user id), only the chats that hold something of theirs:
        their private chats and the shared chats they wrote in."""


class UserExportStore(abc.ABC):
    @abc.abstractmethod
    async def export(self, user: ErasedUser) -> UserExport:
        """Everything kept holds from or about `user`, read in one snapshot:
        the same rows `ErasureStore.erase` would remove, and their pairing
        approval."""


@dataclass(frozen=True, slots=True)
class PrivacyStores:
    """The ports the chat commands /forget, /mydata and /export act through."""

    erasure: ErasureStore
    exports: UserExportStore
    chats: StoredChats
