"""The Store port: the message/session/index store every backend implements
(SQLite now, PostgreSQL later). Nothing here imports a backend.

Records are plain frozen dataclasses; times are timezone-aware UTC datetimes.
A message and its full-text row are always written in one transaction.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Self

from core.errors import KeptError
from core.limits.store import Admission, Admitted
from core.messages import ChatKind, storable

if TYPE_CHECKING:
    from core.search.redact import Redactor

Role = Literal["user", "assistant", "tool", "system"]

# Kinds of message rows. Only the INDEXED_KINDS of user/assistant rows get a
# full-text row: tool calls, tool results, reasoning and images never do.
# `limited`: a user's message kept over a rate limit (core/limits/admission.py):
# searchable and erasable like any, never answered, never in the model's history.
MessageKind = Literal[
    "text",
    "tool_call",
    "tool_result",
    "reasoning",
    "image",
    "error",
    "checkin",
    "reminder",
    "limited",
]
INDEXED_ROLES: frozenset[str] = frozenset({"user", "assistant"})
INDEXED_KINDS: frozenset[str] = frozenset({"text", "checkin", "reminder", "limited"})


# A turn's reply: `stored` with the transcript, `sending` just before its
# request leaves for the platform, `sent` once the platform took it.
SendState = Literal["stored", "sending", "sent"]


def is_indexed(role: str, kind: str) -> bool:
    return role in INDEXED_ROLES and kind in INDEXED_KINDS


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: int
    key: str
    agent_id: str
    platform: str
    chat_id: str
    chat_kind: ChatKind
    thread_id: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to store. `in_reply_to` links an assistant reply to the user
    message it answers, which is how unanswered messages are found after a crash."""

    session_key: str
    role: Role
    text: str
    ts: datetime
    kind: MessageKind = "text"
    sender_id: str | None = None
    platform_message_id: str | None = None
    in_reply_to: int | None = None
    # JSON for tool calls / tool results (the OpenAI message shape), else None.
    payload: str | None = None
    # A turn's reply to send: "stored" (see SendState); None for other rows.
    send_state: SendState | None = None

    def __post_init__(self) -> None:
        # Every row of the transcript is built here: a model answer, a tool
        # call's arguments, a check-in or a reminder's text is made storable
        # like a user's message (core.messages.storable).
        object.__setattr__(self, "text", storable(self.text))
        if self.payload is not None:
            object.__setattr__(self, "payload", storable(self.payload))


@dataclass(frozen=True, slots=True)
class MessageRecord:
    id: int
    session_id: int
    session_key: str
    role: Role
    kind: MessageKind
    text: str
    ts: datetime
    sender_id: str | None
    platform_message_id: str | None
    in_reply_to: int | None
    payload: str | None
    active: bool


# kept's recency window, on every backend: a query matching more messages
# in its scope is ranked among its RANK_WINDOW newest matches there. For a
# word that common the newer messages are the better answer anyway, and
# ranking every match would cost time in proportion to how common it is.
RANK_WINDOW = 1000


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Where a search may look. Enforced inside the store's SQL, before LIMIT,
    so rows outside the scope never take result slots."""

    session_key: str | None = None  # only this session
    agent_id: str | None = None  # every session of this agent
    # Both None: everything (the admin CLI only).


@dataclass(frozen=True, slots=True)
class SearchHit:
    message_id: int
    session_key: str
    role: Role
    ts: datetime
    snippet: str  # the original text, redacted, at most 300 characters around the hit
    score: float  # higher is better


@dataclass(frozen=True, slots=True)
class ImportRow:
    """One transcript line from `kept import` (role user, assistant or tool)."""

    session_key: str
    role: Role
    text: str
    ts: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", storable(self.text))


# How far back a turn looks for earlier messages of its session still
# unanswered (another worker's, or a crashed turn's): a bound on one read.
UNANSWERED_LOOKBACK = 50


class DuplicateMessage(KeptError):
    """The platform message was stored before (same platform, chat and id)."""


class UnknownSession(KeptError, LookupError):
    """A message was added to a session key that `ensure_session` never created."""


class Store(abc.ABC):
    """Async persistence for sessions and transcripts."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations in a transaction."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def schema_version(self) -> int: ...

    @abc.abstractmethod
    async def ensure_session(
        self,
        key: str,
        *,
        agent_id: str,
        platform: str,
        chat_id: str,
        chat_kind: ChatKind,
        thread_id: str | None,
        now: datetime,
    ) -> SessionRecord:
        """Return the session with this key, creating it when missing."""

    @abc.abstractmethod
    async def get_session(self, key: str) -> SessionRecord | None: ...

    @abc.abstractmethod
    async def add_message(self, message: NewMessage) -> MessageRecord:
        """Store a message (and its full-text row when indexed) in one transaction.

        The session must exist. Raises DuplicateMessage when a user message
        with the same platform, chat and platform message id is already stored.
        """

    @abc.abstractmethod
    async def admit_message(
        self, message: NewMessage, admission: Admission
    ) -> tuple[MessageRecord, Admitted]:
        """`add_message` for a user's message, deciding its limits in the
        same transaction (core/limits/): over a rate it is stored `limited`
        and counted by no rule; a duplicate counts for nothing either."""

    @abc.abstractmethod
    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        """Record the id the platform gave a message we sent."""

    @abc.abstractmethod
    async def begin_reply_send(self, message_id: int) -> bool:
        """`stored` -> `sending`, durably, just before the reply's request
        leaves; False when it is not `stored` (someone sent it already)."""

    @abc.abstractmethod
    async def reply_sent(self, message_id: int, platform_message_id: str | None) -> None:
        """The platform took the reply: `sent`, with the id it gave it."""

    @abc.abstractmethod
    async def unsent_replies(self, *, since: datetime) -> list[MessageRecord]:
        """Replies stored at or after `since` whose request never left
        (still `stored`), oldest first; none to a message from before its
        session started over (the user never saw it, and closed that
        conversation)."""

    @abc.abstractmethod
    async def history(
        self, session_key: str, *, before_turn_of: int, limit: int, whole: bool = False
    ) -> list[MessageRecord]:
        """Active messages of a session that precede the turn of message
        `before_turn_of`, oldest first, at most `limit` of the latest ones.

        Replies sort directly after the message they answer, so a turn queued
        behind another sees the earlier exchange in conversation order. Only
        turns after the session's start (`start_over`) are read, unless
        `whole` (the operator's transcript).
        """

    @abc.abstractmethod
    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        """User text messages at or after `since` that no stored reply answers,
        oldest first (none from before its session started over)."""

    @abc.abstractmethod
    async def unanswered_up_to(
        self, message: MessageRecord, *, since: datetime
    ) -> list[MessageRecord]:
        """`message` and the user text messages of its session before it
        that no stored reply answers, oldest first: earlier ones only from
        `since` on and among the last UNANSWERED_LOOKBACK messages, `message`
        itself unless it is answered (or no longer active). None from before
        the session started over: they are the earlier conversation's."""

    @abc.abstractmethod
    async def get_message(self, message_id: int) -> MessageRecord | None: ...

    @abc.abstractmethod
    async def start_over(self, session_key: str) -> bool:
        """Start the session's conversation afresh (`/new`): the turns of the
        messages stored so far leave the model's context (`history`) and
        are no longer owed an answer (`unanswered`); they stay stored,
        searchable and erasable. False when no such session is stored."""

    @abc.abstractmethod
    async def context_starts(self, session_keys: Sequence[str]) -> dict[str, int]:
        """For each of these sessions that started over, the id of the last
        message before its start (later turns make up its conversation)."""

    @abc.abstractmethod
    async def sessions_with_last_platform_id(
        self, platform: str
    ) -> list[tuple[SessionRecord, str | None]]:
        """Every session of `platform`, each with the greatest platform
        message id of its stored user messages (ids compared as integers:
        Discord snowflakes grow with time), or None when it has none. What a
        channel reads to catch up on what was said while it was away."""

    # --- search ---------------------------------------------------------------

    @abc.abstractmethod
    async def search(
        self, query: str, *, scope: SearchScope, limit: int, redactor: Redactor
    ) -> list[SearchHit]:
        """Active indexed messages inside `scope` that match every word of
        `query` (plain text, never FTS syntax; see core.search.query), best
        first: a message holding the words as a phrase ranks above one that
        merely holds them all, then by relevance, then newest first. Snippets
        are cut from the text after `redactor` masked it whole. Never raises
        for odd input: a query with nothing searchable gives []."""

    @abc.abstractmethod
    async def messages_around(
        self, session_key: str, *, around_message_id: int | None, limit: int
    ) -> list[MessageRecord]:
        """Active user/assistant messages of indexed kinds, oldest first: at
        most `limit` centred on `around_message_id` (which must be such a
        message of this session, else []), or the latest `limit` when None."""

    # --- lifecycle --------------------------------------------------------------

    @abc.abstractmethod
    async def edit_message(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None:
        """Replace a platform message's text; its full-text row changes in the
        same transaction. None when no such message is stored."""

    @abc.abstractmethod
    async def delete_message(
        self, *, platform: str, chat_id: str, platform_message_id: str
    ) -> bool:
        """Delete a platform message and its full-text row in one transaction;
        False when no such message is stored."""

    @abc.abstractmethod
    async def delete_session(self, session_key: str) -> int:
        """Delete a session with all its rows in one transaction; returns the
        number of messages deleted (0 for an unknown session)."""

    @abc.abstractmethod
    async def import_messages(self, rows: Sequence[ImportRow]) -> int:
        """Bulk-store transcripts, many rows per transaction, without indexing
        them inline: their sessions (created from the keys when missing) are
        marked as behind for `reindex_session`. Returns rows stored. Rows are
        validated before anything is written."""

    @abc.abstractmethod
    async def mark_index_behind(self, session_key: str | None = None) -> int:
        """Mark one session (or every session) for reindexing; returns how many."""

    @abc.abstractmethod
    async def sessions_behind(self, limit: int = 100) -> list[str]:
        """Keys of sessions whose full-text rows are behind their messages."""

    @abc.abstractmethod
    async def reindex_session(self, session_key: str) -> int:
        """Rebuild one session's full-text rows in one transaction and mark it
        current; returns the rows indexed (0 for an unknown session)."""

    async def compact_index(self, pages: int = 500) -> bool:
        """One bounded step (about `pages` pages written) of folding the
        full-text index's small segments together, in its own transaction;
        False when nothing was left to fold. A backend without such segments
        has nothing to do."""
        return False

    async def index_writes(self) -> int:
        """A count that grows with the data writes put into the full-text
        index (compaction does not count; it never shrinks and survives
        restarts): the reconciler compacts once it has grown enough since its
        last pass. 0 for a backend without segments to fold."""
        return 0

    async def checkpoint_log(self) -> bool:
        """Idle upkeep of a write-ahead log the backend keeps itself: fold it
        into the database and cut it back to a bounded size, without waiting
        on other connections; False when one kept it from finishing. A
        backend whose server does this has nothing to do."""
        return True
