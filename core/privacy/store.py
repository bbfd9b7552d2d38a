"""The erasure port: what kept holds from one user, counted, and erased in
one transaction. Which tables it reaches, and how, is core/privacy/holdings.py."""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Literal, get_args

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
    usage: int = 0  # records of the model calls made for them (tokens, role, model)

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


# What a retention pass erases, each kind by its own age: the time of a
# message, of a queued exchange or a parked update (messages retention);
# when a follow-up or a reminder ended (closed retention).
RetainedKind = Literal["messages", "queued", "updates", "follow_ups", "reminders"]
RETAINED_KINDS: tuple[RetainedKind, ...] = get_args(RetainedKind)


class RetentionStore(abc.ABC):
    """Erasing what outlived its retention, a bounded batch per transaction,
    with erasure's guarantees (the deleted text leaves the files, not only
    the queries). Safe from several workers at once: a batch never takes
    a row another worker's batch holds."""

    @abc.abstractmethod
    async def erase_batch(self, kind: RetainedKind, before: datetime, *, limit: int) -> int:
        """Erase up to `limit` rows of `kind` older than `before` (a
        message with its index row) in one transaction, and purge it as an
        erasure does; the rows erased, 0 when none is left (or every one
        left is another worker's now)."""

    @abc.abstractmethod
    async def finish(self, kinds: Collection[RetainedKind]) -> None:
        """Once a pass erased rows of `kinds`: what the backend does after
        an erasure has committed (a WAL checkpoint, a VACUUM), once per
        pass rather than per batch."""

    @abc.abstractmethod
    async def oldest_message(self) -> datetime | None:
        """The time of the oldest stored message; None when there is none."""

    async def prune_counters(self, now: datetime) -> int:
        """Drop the limits' counters no rule reads any more (core/limits/):
        token budgets of days before yesterday, rates idle for an hour.
        They hold a number or a time each, never words; the rows dropped."""
        return 0
