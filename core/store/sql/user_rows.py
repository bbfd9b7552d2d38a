"""Which rows are a user's, written once for erasure and export.

A user's private chats are the private sessions of their platform whose
chat is theirs or that hold a message of theirs (a Discord DM's channel id
is not the user's id). In shared chats their rows are their own messages
and the bot's replies to those; follow-ups, reminders and queued exchanges
are theirs in their private chats and wherever they are the member the row
is about.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.privacy.store import ErasedUser
from core.store.dialect import Dialect
from core.store.sql.database import Params, Transaction

# The column naming the member a row is about, per table.
MEMBER_COLUMN = {
    "commitments": "sender_id",
    "reminders": "created_by",
    "extraction_jobs": "sender_id",
}


@dataclass(frozen=True, slots=True)
class PrivateChat:
    id: int
    key: str
    chat_id: str
    agent_id: str
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class UserRows:
    """The SQL that picks one user's rows, for one transaction's statements."""

    user: ErasedUser
    private: list[PrivateChat]
    dialect: Dialect

    def agent(self, table: str) -> tuple[str, Params]:
        """` AND <table>.agent_id = ?` when one agent's rows are meant."""
        if self.user.agent_id is None:
            return "", ()
        return f" AND {table}.agent_id = ?", (self.user.agent_id,)

    def theirs(self) -> tuple[str, Params]:
        """`SELECT m.id …`: their own messages in shared chats."""
        agent, ps = self.agent("s")
        sql = (
            "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE s.platform = ? AND s.chat_kind <> 'private'{agent} AND m.sender_id = ?"
        )
        return sql, (self.user.platform, *ps, self.user.user_id)

    def private_ids(self) -> tuple[str, Params]:
        return self.dialect.in_list([c.id for c in self.private] or [-1])

    def private_keys(self) -> tuple[str, Params]:
        return self.dialect.in_list([c.key for c in self.private] or [""])

    def about(self, table: str) -> tuple[str, Params]:
        """`WHERE …` for the rows of `table` that are the user's."""
        agent, ps = self.agent(table)
        keys_in, keys = self.private_keys()
        where = (
            f"WHERE platform = ?{agent} AND (session_key {keys_in} OR {MEMBER_COLUMN[table]} = ?)"
        )
        return where, (self.user.platform, *ps, *keys, self.user.user_id)

    def lanes(self) -> list[str]:
        """The update queues' keys of their private chats."""
        return sorted({f"chat:{c.chat_id}" for c in self.private})


async def user_rows(tx: Transaction, user: ErasedUser) -> UserRows:
    agent, ps = ("", ()) if user.agent_id is None else (" AND s.agent_id = ?", (user.agent_id,))
    rows = await tx.fetchall(
        "SELECT s.id, s.key, s.chat_id, s.agent_id, s.thread_id FROM sessions s "
        f"WHERE s.platform = ? AND s.chat_kind = 'private'{agent} AND "
        "(s.chat_id = ? OR EXISTS (SELECT 1 FROM messages m "
        "WHERE m.session_id = s.id AND m.sender_id = ?)) ORDER BY s.key",
        (user.platform, *ps, user.user_id, user.user_id),
    )
    private = [PrivateChat(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4]) for r in rows]
    return UserRows(user, private, tx.dialect)
