"""The transcript Store written once: sessions, messages, their lifecycle and
the reads a turn makes, over a `Database` and the backend's full-text index
(index.py), which writes and searches its own rows.

Every method is one transaction or one read. Transcript rows are written
`durable=False` (a power loss may lose the last moments, never corrupt);
what allows an external effect (`begin_reply_send`), deletions of whole
sessions and index marks commit durably. Imports, reindexing, session
deletes and very long texts are `bulk` transactions, which SQLite keeps off
its live connection. The session of a new message is looked up by key
inside its INSERT: always the session that has this key now (an id cached
in Python could name a session deleted since, whose id another chat may
have been given). No row inserted means no such session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from core.limits.store import Admission, Admitted
from core.messages import ChatKind, parse_session_key
from core.search.query import build_query
from core.search.snippet import make_snippet
from core.store.base import (
    INDEXED_KINDS,
    INDEXED_ROLES,
    UNANSWERED_LOOKBACK,
    DuplicateMessage,
    ImportRow,
    MessageRecord,
    NewMessage,
    SearchHit,
    SearchScope,
    SessionRecord,
    Store,
    UnknownSession,
    is_indexed,
)
from core.store.dialect import Dialect, placeholders
from core.store.sql.database import Database, Params, Row, Transaction
from core.store.sql.index import BULK_TEXT_CHARS, Before, FullTextIndex, scores
from core.store.sql.limits import take_hold, take_rates

if TYPE_CHECKING:
    from core.search.redact import Redactor

__all__ = ["Connection", "SqlTranscriptStore"]

# Rows per import transaction: large enough for bulk speed, small enough that
# a live message waits at most about a tenth of a second for the write lock.
IMPORT_BATCH = 5000

# Import roles → the kind of row they become. A tool line is a tool result
# and, like every tool row, is never indexed.
IMPORT_KINDS = {"user": "text", "assistant": "text", "tool": "tool_result"}

# Both follow the field order of the record dataclasses.
SESSION_FIELDS = (
    "id, key, agent_id, platform, chat_id, chat_kind, thread_id, created_at, updated_at"
)
SESSION_COLUMNS = ", ".join(f"s.{field}" for field in SESSION_FIELDS.split(", "))
# `m` is messages, `s` its session.
MESSAGE_COLUMNS = (
    "m.id, m.session_id, s.key, m.role, m.kind, m.text, m.ts, m.sender_id, "
    "m.platform_message_id, m.in_reply_to, m.payload, m.active"
)
# The columns a new message sets beyond its session's, in MESSAGE_INSERT's order.
NEW_MESSAGE_COLUMNS = (
    "role, kind, text, payload, sender_id, platform_message_id, in_reply_to, ts, send_state"
)
# Parameters: NEW_MESSAGE_COLUMNS' values, then the session key.
MESSAGE_INSERT = (
    f"INSERT INTO messages(session_id, platform, chat_id, {NEW_MESSAGE_COLUMNS}) "
    "SELECT id, platform, chat_id, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM sessions WHERE key = ? "
    "RETURNING id, session_id"
)
IMPORT_COLUMNS = "session_id, platform, chat_id, role, kind, text, ts"

_IN_ROLES = f"({', '.join(repr(r) for r in sorted(INDEXED_ROLES))})"
_IN_KINDS = f"({', '.join(repr(k) for k in sorted(INDEXED_KINDS))})"
# `m` is a message that has (when active) or would have a full-text row.
INDEXED_SQL = f"m.role IN {_IN_ROLES} AND m.kind IN {_IN_KINDS}"

# A platform message is a user row (unique index messages_platform_dedupe)
# or one the bot sent (messages_sent_platform_id); each query repeats its
# index's WHERE term so the planner can use the partial index.
_PLATFORM_ID = "platform = ? AND chat_id = ? AND platform_message_id = ?"
BY_PLATFORM_ID = tuple(
    f"SELECT id, session_id, role, kind, active FROM messages WHERE {_PLATFORM_ID} AND {role} "
    "ORDER BY id DESC"
    for role in ("role = 'user'", "role <> 'user'")
)
DELETE_BY_PLATFORM_ID = tuple(
    f"DELETE FROM messages WHERE {_PLATFORM_ID} AND {role}"
    for role in ("role = 'user'", "role <> 'user'")
)

# `m` is in its session's conversation: stored after the session last started
# over (`s` is its session; a reply counts as its turn, the message it answers).
IN_CONVERSATION = "m.id > coalesce(s.context_after, 0) "
TURN_IN_CONVERSATION = "coalesce(m.in_reply_to, m.id) > coalesce(s.context_after, 0) "

_UNANSWERED_TAIL = (
    # Only a final reply (or the apology for a failed turn) answers a
    # message; a turn that crashed between tool rounds is unanswered.
    "AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.in_reply_to = m.id "
    "AND r.role = 'assistant' AND r.kind IN ('text', 'error')) "
)


@dataclass(frozen=True, slots=True)
class TranscriptSql:
    """The statements that spell a dialect's words, built once per dialect."""

    session_upsert: str
    get_session: str
    get_message: str
    unsent_replies: str
    history: str
    whole_history: str
    unanswered: str
    unanswered_up_to: str
    last_platform_id: str
    sessions_behind: str
    context_latest: str
    context_before: str
    context_from: str
    session_to_change: str
    import_session: str
    indexed_messages: str
    start_over: str


@lru_cache(maxsize=2)
def transcript_sql(d: Dialect) -> TranscriptSql:
    active = f"m.active = {d.true}"
    with_session = "FROM messages m JOIN sessions s ON s.id = m.session_id "
    history = (
        f"SELECT {MESSAGE_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id "
        "WHERE s.key = ? AND coalesce(m.in_reply_to, m.id) < ? {}"
        f"AND {active} ORDER BY coalesce(m.in_reply_to, m.id) DESC, m.id DESC LIMIT ?"
    )
    # messages_session (session_id, id) walks the session in id order either way.
    context = (
        f"SELECT {MESSAGE_COLUMNS} FROM sessions s {d.join_in_order} messages m "
        f"ON m.session_id = s.id WHERE s.key = ? AND {active} AND {INDEXED_SQL} "
    )
    return TranscriptSql(
        session_upsert=(
            "INSERT INTO sessions AS s(key, agent_id, platform, chat_id, chat_kind, thread_id, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE "
            f"SET updated_at = {d.greatest('s.updated_at', 'excluded.updated_at')} "
            f"RETURNING {SESSION_FIELDS}"
        ),
        get_session=f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE key = ?",
        get_message=f"SELECT {MESSAGE_COLUMNS} {with_session}WHERE m.id = ?",
        unsent_replies=(
            f"SELECT {MESSAGE_COLUMNS} {with_session}"
            f"WHERE m.send_state = 'stored' AND m.ts >= ? AND {active} "
            f"AND {TURN_IN_CONVERSATION}ORDER BY m.ts, m.id"
        ),
        # Walks messages_session_turn backwards from the turn and stops
        # after `limit` rows, or at the session's start (a bound of the same
        # range, so the turns before it are never read); history() reverses
        # them rather than sorting again in SQL.
        history=history.format(f"AND {TURN_IN_CONVERSATION}"),
        whole_history=history.format(""),
        unanswered=(
            f"SELECT {MESSAGE_COLUMNS} {with_session}"
            f"WHERE m.role = 'user' AND m.kind = 'text' AND m.ts >= ? AND {active} "
            f"AND {IN_CONVERSATION}{_UNANSWERED_TAIL}ORDER BY m.ts, m.id"
        ),
        # The session's last messages up to the turn's own (a bounded walk
        # of messages_session backwards), then those still owed an answer.
        unanswered_up_to=(
            f"SELECT {MESSAGE_COLUMNS} FROM ("
            "SELECT * FROM messages WHERE session_id = ? AND id <= ? ORDER BY id DESC LIMIT ?"
            ") m JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.role = 'user' AND m.kind = 'text' AND {active} AND (m.id = ? OR m.ts >= ?) "
            f"AND {IN_CONVERSATION}{_UNANSWERED_TAIL}ORDER BY m.id"
        ),
        # Platform ids are compared as integers (Discord snowflakes grow with time).
        last_platform_id=(
            f"SELECT {SESSION_COLUMNS}, (SELECT m.platform_message_id FROM messages m "
            "WHERE m.session_id = s.id AND m.role = 'user' AND m.platform_message_id IS NOT NULL "
            f"ORDER BY {d.as_number('m.platform_message_id')} DESC NULLS LAST LIMIT 1) "
            "FROM sessions s WHERE s.platform = ? ORDER BY s.id"
        ),
        # The partial index sessions_index_behind holds exactly these sessions.
        sessions_behind=(
            f"SELECT key FROM sessions WHERE index_behind = {d.true} ORDER BY id LIMIT ?"
        ),
        context_latest=context + "ORDER BY m.id DESC LIMIT ?",
        context_before=context + "AND m.id < ? ORDER BY m.id DESC LIMIT ?",
        context_from=context + "AND m.id >= ? ORDER BY m.id LIMIT ?",
        session_to_change=f"SELECT id FROM sessions WHERE key = ?{d.for_update}",
        import_session=(
            "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, thread_id, "
            f"created_at, updated_at, index_behind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {d.true}) "
            f"ON CONFLICT(key) DO UPDATE SET index_behind = {d.true} "
            "RETURNING id, platform, chat_id"
        ),
        indexed_messages=(
            f"SELECT m.id, m.text FROM messages m WHERE m.session_id = ? AND {active} "
            f"AND {INDEXED_SQL}"
        ),
        # After the session's last message (one step back on messages_session).
        # Never moved back: a start stays where it was when the newest
        # messages are deleted since.
        start_over=(
            "UPDATE sessions SET context_after = "
            + d.greatest(
                "coalesce(context_after, 0)",
                "coalesce((SELECT max(m.id) FROM messages m WHERE m.session_id = sessions.id), 0)",
            )
            + " WHERE key = ? RETURNING context_after"
        ),
    )


class Connection(Database, Protocol):
    """The backend's runner as the transcript store drives it: it opens
    (applying migrations) and closes with the store."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def schema_version(self) -> int: ...


class SqlTranscriptStore(Store):
    """The transcript store on `connection`, whose full-text rows `index`
    keeps; the backend's other stores run on the same connection."""

    def __init__(self, connection: Connection, index: FullTextIndex) -> None:
        self._db = connection
        self._index = index
        self._d: Dialect = connection.dialect
        self._sql = transcript_sql(self._d)

    @property
    def database(self) -> Connection:
        return self._db

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        return await self._db.schema_version()

    def _session(self, row: Row) -> SessionRecord:
        t = self._d.from_time
        return SessionRecord(*row[:7], created_at=t(row[7]), updated_at=t(row[8]))

    def _message(self, row: Row) -> MessageRecord:
        return MessageRecord(*row[:6], self._d.from_time(row[6]), *row[7:11], active=bool(row[11]))

    async def _messages(self, sql: str, params: Params) -> list[MessageRecord]:
        return [self._message(row) for row in await self._db.query(sql, params)]

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
        at = self._d.time(now)
        params = (key, agent_id, platform, chat_id, chat_kind, thread_id, at, at)

        async def work(tx: Transaction) -> Row | None:
            return await tx.fetchone(self._sql.session_upsert, params)

        row = await self._db.transact(work, durable=False)
        assert row is not None  # an upsert with RETURNING always returns its row
        return self._session(row)

    async def get_session(self, key: str) -> SessionRecord | None:
        rows = await self._db.query(self._sql.get_session, (key,))
        return self._session(rows[0]) if rows else None

    async def add_message(self, message: NewMessage) -> MessageRecord:
        return await self._add(message, None)

    async def admit_message(
        self, message: NewMessage, admission: Admission
    ) -> tuple[MessageRecord, Admitted]:
        decided: list[Admitted] = []

        async def before(tx: Transaction) -> str:
            # Run again from the start if the transaction is retried: only
            # the last run's decision is the one committed.
            decided.clear()
            verdict = await take_rates(tx, admission.rules, admission.now)
            hold = None
            if verdict.allowed and admission.caps:
                hold = await take_hold(tx, admission.caps, admission.day, admission.tokens)
            decided.append(Admitted(verdict, hold))
            return message.kind if verdict.allowed else "limited"

        record = await self._add(message, before)
        admitted = decided[-1]
        if not admitted.verdict.allowed:
            record = dataclasses.replace(record, kind="limited")
        return record, admitted

    async def _add(self, message: NewMessage, before: Before | None) -> MessageRecord:
        m = message
        ts = self._d.time(m.ts)
        values = (m.role, m.kind, m.text, m.payload, m.sender_id, m.platform_message_id)
        values += (m.in_reply_to, ts, m.send_state, m.session_key)
        indexed = is_indexed(m.role, m.kind)
        try:
            row = await self._index.add_message(values, m.text, indexed=indexed, before=before)
        except Exception as exc:
            if self._d.is_unique_violation(exc):
                raise DuplicateMessage(
                    f"user message {m.platform_message_id!r} in session "
                    f"{m.session_key!r} is already stored"
                ) from exc
            if self._d.is_foreign_key_violation(exc):
                raise UnknownSession(f"in_reply_to message {m.in_reply_to} does not exist") from exc
            raise
        if row is None:
            raise UnknownSession(f"no session {m.session_key!r}; call ensure_session first")
        message_id, session_id = row
        return MessageRecord(
            message_id, session_id, m.session_key, m.role, m.kind, m.text,
            self._d.from_time(ts), m.sender_id, m.platform_message_id, m.in_reply_to,
            m.payload, active=True,
        )  # fmt: skip

    async def set_platform_message_id(self, message_id: int, platform_message_id: str) -> None:
        sql = "UPDATE messages SET platform_message_id = ? WHERE id = ? RETURNING id"
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def _record_platform_id(
        self, sql: str, message_id: int, platform_message_id: str | None
    ) -> None:
        """Run `sql` (platform id, message id) on one message: a platform id
        another message holds is DuplicateMessage, no such message LookupError."""

        async def work(tx: Transaction) -> Row | None:
            return await tx.fetchone(sql, (platform_message_id, message_id))

        try:
            row = await self._db.transact(work, durable=False)
        except Exception as exc:
            if self._d.is_unique_violation(exc):
                raise DuplicateMessage(
                    f"platform message id {platform_message_id!r} is already stored"
                ) from exc
            raise
        if row is None:
            raise LookupError(f"no message with id {message_id}")

    async def begin_reply_send(self, message_id: int) -> bool:
        # Durable: the send it allows is an external effect (and its commit
        # flushes the reply's own asynchronous one before it).
        sql = (
            "UPDATE messages SET send_state = 'sending' "
            "WHERE id = ? AND send_state = 'stored' RETURNING id"
        )

        async def work(tx: Transaction) -> Row | None:
            return await tx.fetchone(sql, (message_id,))

        return await self._db.transact(work) is not None

    async def reply_sent(self, message_id: int, platform_message_id: str | None) -> None:
        sql = (
            "UPDATE messages SET send_state = 'sent', "
            "platform_message_id = coalesce(?, platform_message_id) WHERE id = ? RETURNING id"
        )
        await self._record_platform_id(sql, message_id, platform_message_id)

    async def unsent_replies(self, *, since: datetime) -> list[MessageRecord]:
        return await self._messages(self._sql.unsent_replies, (self._d.time(since),))

    async def history(
        self, session_key: str, *, before_turn_of: int, limit: int, whole: bool = False
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        sql = self._sql.whole_history if whole else self._sql.history
        rows = await self._db.query(sql, (session_key, before_turn_of, limit))
        return [self._message(row) for row in reversed(rows)]

    async def unanswered(self, *, since: datetime) -> list[MessageRecord]:
        return await self._messages(self._sql.unanswered, (self._d.time(since),))

    async def unanswered_up_to(
        self, message: MessageRecord, *, since: datetime
    ) -> list[MessageRecord]:
        params = (message.session_id, message.id, UNANSWERED_LOOKBACK, message.id)
        return await self._messages(self._sql.unanswered_up_to, (*params, self._d.time(since)))

    async def sessions_with_last_platform_id(
        self, platform: str
    ) -> list[tuple[SessionRecord, str | None]]:
        rows = await self._db.query(self._sql.last_platform_id, (platform,))
        return [(self._session(row), row[9]) for row in rows]

    async def get_message(self, message_id: int) -> MessageRecord | None:
        rows = await self._messages(self._sql.get_message, (message_id,))
        return rows[0] if rows else None

    async def start_over(self, session_key: str) -> bool:
        async def work(tx: Transaction) -> Row | None:
            return await tx.fetchone(self._sql.start_over, (session_key,))

        return await self._db.transact(work) is not None

    async def context_starts(self, session_keys: Sequence[str]) -> dict[str, int]:
        keys = list(dict.fromkeys(session_keys))
        if not keys:
            return {}
        sql = (
            f"SELECT key, context_after FROM sessions WHERE key IN ({placeholders(len(keys))}) "
            "AND context_after IS NOT NULL"
        )
        return {str(key): int(after) for key, after in await self._db.query(sql, tuple(keys))}

    # --- search ---------------------------------------------------------------

    async def search(
        self, query: str, *, scope: SearchScope, limit: int, redactor: Redactor
    ) -> list[SearchHit]:
        parsed = build_query(query)
        if parsed is None or limit <= 0:
            return []
        matches = await self._index.search(parsed, scope, limit)
        # Redaction sees the whole text, so a secret is masked before any cut
        # could leave half of it inside the snippet.
        return [
            SearchHit(
                message_id=match.id,
                session_key=match.session_key,
                role=match.role,  # type: ignore[arg-type]
                ts=match.ts,
                snippet=make_snippet(redactor.redact(match.text), parsed.terms),
                score=score,
            )
            for match, score in zip(matches, scores(matches), strict=True)
        ]

    async def messages_around(
        self, session_key: str, *, around_message_id: int | None, limit: int
    ) -> list[MessageRecord]:
        if limit <= 0:
            return []
        sql = self._sql
        anchor = around_message_id

        async def work(tx: Transaction) -> list[Row]:
            if anchor is None:
                return (await tx.fetchall(sql.context_latest, (session_key, limit)))[::-1]
            after = await tx.fetchall(sql.context_from, (session_key, anchor, limit))
            if not after or after[0][0] != anchor:
                # Not a visible message of this session: say nothing about it.
                return []
            before = await tx.fetchall(sql.context_before, (session_key, anchor, limit))
            # Centre the anchor; a side with fewer messages leaves its share to the other.
            want_before = max((limit - 1) // 2, limit - len(after))
            take_before = min(len(before), want_before)
            return before[:take_before][::-1] + after[: limit - take_before]

        return [self._message(row) for row in await self._index.read(work)]

    # --- lifecycle --------------------------------------------------------------

    async def edit_message(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None:
        key = (platform, chat_id, platform_message_id)

        async def work(tx: Transaction) -> Row | None:
            """New text for every row of that platform message; the first, re-read."""
            found = [row for sql in BY_PLATFORM_ID for row in await tx.fetchall(sql, key)]
            for message_id, session_id, role, kind, active in found:
                await tx.execute("UPDATE messages SET text = ? WHERE id = ?", (text, message_id))
                await self._index.drop_row(tx, message_id, session_id)
                if active and is_indexed(role, kind):
                    await self._index.insert_row(tx, message_id, session_id, text)
            if not found:
                return None
            return await tx.fetchone(self._sql.get_message, (found[0][0],))

        bulk = len(text) > BULK_TEXT_CHARS
        row = await self._db.transact(work, durable=False, bulk=bulk)
        return self._message(row) if row is not None else None

    async def delete_message(
        self, *, platform: str, chat_id: str, platform_message_id: str
    ) -> bool:
        # The index drops the message's row itself (a trigger, or ON DELETE CASCADE).
        key = (platform, chat_id, platform_message_id)

        async def work(tx: Transaction) -> bool:
            return sum([await tx.execute(sql, key) for sql in DELETE_BY_PLATFORM_ID]) > 0

        return await self._db.transact(work, durable=False)

    async def delete_session(self, session_key: str) -> int:
        async def work(tx: Transaction) -> int:
            row = await tx.fetchone(self._sql.session_to_change, (session_key,))
            if row is None:
                return 0
            counted = await tx.fetchone("SELECT count(*) FROM messages WHERE session_id = ?", row)
            # Messages (and with them their index rows) go by ON DELETE CASCADE.
            await tx.execute("DELETE FROM sessions WHERE id = ?", row)
            return int(counted[0]) if counted else 0

        return await self._db.transact(work, bulk=True)

    def _check_import(self, rows: Sequence[ImportRow]) -> list[tuple[str, str, str, str, Any]]:
        """(key, role, kind, text, stored ts) per row; ValueError names the first bad row."""
        checked = []
        for number, row in enumerate(rows, 1):
            kind = IMPORT_KINDS.get(row.role)
            if kind is None:
                raise ValueError(
                    f"import row {number}: role {row.role!r} is not user/assistant/tool"
                )
            try:
                parse_session_key(row.session_key)
                ts = self._d.time(row.ts)
            except ValueError as exc:
                raise ValueError(f"import row {number}: {exc}") from exc
            checked.append((row.session_key, row.role, kind, row.text, ts))
        return checked

    async def import_messages(self, rows: Sequence[ImportRow]) -> int:
        # Grouped by session (time order within it; stable, so file order
        # breaks ties): consecutive inserts then touch the same pages of the
        # per-session indexes, which keeps a large import fast.
        checked = sorted(self._check_import(rows), key=lambda r: (r[0], r[4]))
        stored = 0
        for start in range(0, len(checked), IMPORT_BATCH):
            batch = checked[start : start + IMPORT_BATCH]
            stored += await self._db.transact(
                lambda tx, b=batch: self._import_batch(tx, b), durable=False, bulk=True
            )
        return stored

    async def _import_batch(
        self, tx: Transaction, rows: Sequence[tuple[str, str, str, str, Any]]
    ) -> int:
        """Store checked rows and put their sessions behind; no index rows."""
        sessions: dict[str, Row] = {}
        for key, *_, ts in rows:
            if key in sessions:
                continue
            parts = parse_session_key(key)
            target = parts.target
            values = (key, parts.agent_id, target.platform, target.chat_id, parts.chat_kind)
            found = await tx.fetchone(self._sql.import_session, (*values, target.thread_id, ts, ts))
            assert found is not None  # an upsert with RETURNING always returns its row
            sessions[key] = tuple(found)
        # sessions[key] is (session_id, platform, chat_id), the first columns.
        values = [(*sessions[key], role, kind, text, ts) for key, role, kind, text, ts in rows]
        await self._index.insert_imported(tx, values)
        return len(rows)

    async def mark_index_behind(self, session_key: str | None = None) -> int:
        sql = f"UPDATE sessions SET index_behind = {self._d.true}"

        async def work(tx: Transaction) -> int:
            if session_key is None:
                return await tx.execute(sql)
            return await tx.execute(sql + " WHERE key = ?", (session_key,))

        return await self._db.transact(work)

    async def sessions_behind(self, limit: int = 100) -> list[str]:
        rows = await self._db.query(self._sql.sessions_behind, (limit,))
        return [row[0] for row in rows]

    async def reindex_session(self, session_key: str) -> int:
        async def work(tx: Transaction) -> int:
            """Drop and rebuild one session's index rows; mark the session current."""
            row = await tx.fetchone("SELECT id FROM sessions WHERE key = ?", (session_key,))
            if row is None:
                return 0
            session_id = int(row[0])
            messages = await tx.fetchall(self._sql.indexed_messages, (session_id,))
            await self._index.rebuild_session(tx, session_id, messages)
            await tx.execute(
                f"UPDATE sessions SET index_behind = {self._d.false} WHERE id = ?", (session_id,)
            )
            return len(messages)

        return await self._db.transact(work, durable=False, bulk=True)

    async def compact_index(self, pages: int = 500) -> bool:
        return await self._index.compact(pages)

    async def index_writes(self) -> int:
        return await self._index.writes()
