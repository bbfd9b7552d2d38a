"""The full-text index a transcript store keeps beside its messages: the part
of the transcript each backend writes its own way (SQLite's FTS5 table,
PostgreSQL's tsvector rows), behind one small interface.

The transcript's rows are written once (transcript.py); an index is asked
only what touches its own rows: a message's row written or dropped inside
the transcript's transaction, one session's rows rebuilt, a search, and its
upkeep. It also says how a new message and its row go in together, and how
an import's batch is inserted, since each backend has its own fastest way
(one trip to SQLite's thread; one statement to PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol, TypeVar

from core.search.query import SearchQuery
from core.store.base import SearchScope
from core.store.sql.database import Params, Transaction, Work

T = TypeVar("T")

# Longer texts are written as bulk transactions (Database.transact): a
# backend may keep them off its live connection.
BULK_TEXT_CHARS = 16_384


class Match(NamedTuple):
    """One search result as an index ranks it."""

    id: int
    session_key: str
    role: str
    ts: datetime
    text: str
    # Higher is better, comparable within one search.
    relevance: float
    # The message holds the whole query as a phrase.
    phrase: bool


# Run at the start of a message's insert transaction; the kind it is stored as.
Before = Callable[[Transaction], Awaitable[str]]


class FullTextIndex(Protocol):
    async def add_message(
        self, values: Params, text: str, *, indexed: bool, before: Before | None = None
    ) -> Params | None:
        """Insert a message (transcript.MESSAGE_INSERT's parameters) and,
        when `indexed`, its row of `text`, as one durable=False write:
        (message id, session id), or None when no session has its key.
        `before` runs first in the same transaction and gives the row's
        kind (a message over a rate is stored `limited`). Driver errors
        pass through (the transcript maps them)."""
        ...

    async def insert_row(
        self, tx: Transaction, message_id: int, session_id: int, text: str
    ) -> None: ...

    async def drop_row(self, tx: Transaction, message_id: int, session_id: int) -> None:
        """Drop the message's row, if it has one."""
        ...

    async def rebuild_session(
        self, tx: Transaction, session_id: int, messages: Sequence[Params]
    ) -> None:
        """Drop every row of the session (and of its messages, whatever
        session a row names), then write one row per (message id, text)."""
        ...

    async def insert_imported(self, tx: Transaction, rows: Sequence[Params]) -> None:
        """Insert an import's message rows (transcript.IMPORT_COLUMNS), no index rows."""
        ...

    async def read(self, work: Work[T]) -> T:
        """The reads of one lookup, run the cheapest way this backend can
        keep them in step."""
        ...

    async def search(self, query: SearchQuery, scope: SearchScope, limit: int) -> list[Match]:
        """The best `limit` matches inside `scope`, best first (see Store.search)."""
        ...

    async def compact(self, pages: int) -> bool:
        """See Store.compact_index."""
        ...

    async def writes(self) -> int:
        """See Store.index_writes."""
        ...


def scores(matches: Sequence[Match]) -> list[float]:
    """Higher-is-better scores, in the matches' order: phrase matches get the
    smallest uniform bonus that puts each of them above every other result,
    so the scores agree with the order."""
    plain = [m.relevance for m in matches]
    best_other = max((s for s, m in zip(plain, matches, strict=True) if not m.phrase), default=None)
    worst_phrase = min((s for s, m in zip(plain, matches, strict=True) if m.phrase), default=None)
    if best_other is None or worst_phrase is None or worst_phrase > best_other:
        return plain
    bonus = best_other - worst_phrase + 1.0
    return [s + bonus if m.phrase else s for s, m in zip(plain, matches, strict=True)]
