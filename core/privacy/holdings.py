"""Every table kept's schema has, and what of a user's each one holds.

This is the one list erasure, export and retention read. It names every
table on both backends, including those that hold nothing of anyone's, so a
table the schema gains cannot hold a user's data unnoticed:
tests/core/privacy/test_holdings.py compares the list with a fresh database's
tables on each backend and fails until the new table is here.

How a table reaches a user (`Reach`) decides how a user's rows in it are
found. `erased` says whether erasing a user removes them. The tables that
stay stay on purpose: the pairing approval (the user can go on talking),
the operator's block (the operator's decision, not the user's data to take
back), and the limits' counters (a time and a number, no words, gone within
a day or two: erasing them would let an erasure reset a rate or a cap).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Backend = Literal["sqlite", "postgres"]
BOTH: frozenset[Backend] = frozenset(("sqlite", "postgres"))


class Reach(StrEnum):
    # A chat's own rows (by session id or session key): a private chat's
    # are all the user's; in a group only what `SENDER` rows pick out.
    SESSION = "session"
    # Rows a member wrote or that are about them, in any chat (a sender or
    # creator column), and the bot's replies to them.
    SENDER = "sender"
    # Rows keyed by the platform user themselves (settings, pairing).
    USER = "user"
    # Rows derived from a message (its full-text entry): they go with it.
    MESSAGE = "message"
    # Raw platform updates, keyed by the chat they came from.
    CHAT = "chat"
    # Nothing of any user's.
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Holding:
    table: str
    reach: Reach
    what: str  # what of a user's it holds, or why nothing
    erased: bool
    backends: frozenset[Backend] = BOTH


HOLDINGS: tuple[Holding, ...] = (
    Holding(
        "sessions",
        Reach.SESSION,
        "one chat: platform, chat id, kind, thread; a private chat's is the user's own",
        erased=True,
    ),
    Holding(
        "messages",
        Reach.SENDER,
        "what a user wrote (sender_id) and the bot's replies to it (in_reply_to)",
        erased=True,
    ),
    Holding(
        "messages_fts",
        Reach.MESSAGE,
        "the searchable words of each message (FTS5, with its shadow tables)",
        erased=True,
        backends=frozenset(("sqlite",)),
    ),
    Holding(
        "message_search",
        Reach.MESSAGE,
        "the searchable lexemes of each message",
        erased=True,
        backends=frozenset(("postgres",)),
    ),
    Holding(
        "commitments",
        Reach.SENDER,
        "follow-ups inferred about a member (sender_id): reason and suggested text",
        erased=True,
    ),
    Holding(
        "reminders",
        Reach.SENDER,
        "reminders a member set (created_by), with their text",
        erased=True,
    ),
    Holding(
        "extraction_jobs",
        Reach.SENDER,
        "exchanges queued for the extraction model: the user's text and the reply",
        erased=True,
    ),
    Holding(
        "heartbeat_turns",
        Reach.SESSION,
        "when a chat last had a check-in turn",
        erased=True,
    ),
    Holding(
        "parked_updates",
        Reach.CHAT,
        "platform updates that could not be stored yet, raw (their text included)",
        erased=True,
    ),
    Holding(
        "update_queue",
        Reach.CHAT,
        "polled platform updates handed between workers, raw, until purged",
        erased=True,
        backends=frozenset(("postgres",)),
    ),
    Holding("user_zones", Reach.USER, "a member's own time zone", erased=True),
    Holding(
        "followup_preferences",
        Reach.USER,
        "a member's own follow-up switch (on or off), per agent",
        erased=True,
    ),
    Holding(
        "chat_followup_preferences",
        Reach.SESSION,
        "a group's follow-up switch, set by its admin (nobody's in particular): "
        "goes with the chat's session",
        erased=True,
    ),
    Holding(
        "pairing_requests",
        Reach.USER,
        "a pending pairing code and the username it was asked under",
        erased=True,
    ),
    Holding(
        "paired_users",
        Reach.USER,
        "the operator's approval and the username at approval; kept: the user goes on talking",
        erased=False,
    ),
    Holding(
        "pairing_blocks",
        Reach.USER,
        "the operator's block and the username; kept: the operator's decision",
        erased=False,
    ),
    Holding(
        "model_usage",
        Reach.USER,
        "each model call made for a user (role, model, tokens; the chat it was for)",
        erased=True,
    ),
    Holding(
        "rate_windows",
        Reach.USER,
        "when a user (or a group) may next write within its rate: a time, kept "
        "until it lapses (a minute or so), so an erasure cannot reset a limit",
        erased=False,
    ),
    Holding(
        "token_budgets",
        Reach.USER,
        "a user's (or a group's) tokens spent per UTC day, a number; kept until "
        "retention drops past days, so an erasure cannot reset a cap",
        erased=False,
    ),
    Holding(
        "agents",
        Reach.NONE,
        "agent ids by their slot in message ids",
        erased=False,
        backends=frozenset(("sqlite",)),
    ),
    Holding("app_state", Reach.NONE, "process-wide values (a command tree's hash)", erased=False),
    Holding(
        "extraction_pauses",
        Reach.NONE,
        "an agent's extraction paused after its endpoint failed",
        erased=False,
    ),
    Holding("schema_version", Reach.NONE, "the migrations applied", erased=False),
)


def holdings(backend: Backend) -> tuple[Holding, ...]:
    return tuple(h for h in HOLDINGS if backend in h.backends)


@dataclass(frozen=True, slots=True)
class Mismatch:
    unlisted: tuple[str, ...]  # in the schema, not in HOLDINGS
    absent: tuple[str, ...]  # in HOLDINGS for this backend, not in the schema

    def __bool__(self) -> bool:
        return bool(self.unlisted or self.absent)

    def __str__(self) -> str:
        parts = []
        if self.unlisted:
            parts.append(
                "tables not in core/privacy/holdings.py (say what of a user's each holds): "
                + ", ".join(self.unlisted)
            )
        if self.absent:
            parts.append("listed but not in the schema: " + ", ".join(self.absent))
        return "; ".join(parts)


def compare(tables: Iterable[str], backend: Backend) -> Mismatch:
    """How a schema's tables differ from the list for `backend`."""
    found = set(tables)
    listed = {h.table for h in holdings(backend)}
    return Mismatch(tuple(sorted(found - listed)), tuple(sorted(listed - found)))
