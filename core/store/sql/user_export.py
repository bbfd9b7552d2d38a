"""UserExportStore in SQL written once, on the selection erasure uses
(core/store/sql/user_rows.py), read in one snapshot."""

from __future__ import annotations

from core.privacy.export import (
    ExportedChat,
    ExportedExchange,
    ExportedFollowUp,
    ExportedFollowUpSwitch,
    ExportedMessage,
    ExportedReminder,
    ExportedUsage,
    UserExport,
)
from core.privacy.store import ErasedUser, UserExportStore
from core.store.sql.database import Database, Row, Transaction
from core.store.sql.user_rows import user_rows

_MESSAGE = "m.id, m.role, m.kind, m.sender_id, m.ts, m.text, m.in_reply_to, m.active"


class SqlUserExportStore(UserExportStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d = db.dialect

    def _message(self, row: Row) -> ExportedMessage:
        return ExportedMessage(
            int(row[0]), row[1], row[2], row[3], self._d.from_time(row[4]), row[5], row[6],
            bool(row[7]),
        )  # fmt: skip

    async def export(self, user: ErasedUser) -> UserExport:
        return await self._db.snapshot(lambda tx: self._export(tx, user))

    async def _export(self, tx: Transaction, user: ErasedUser) -> UserExport:
        d = self._d
        rows = await user_rows(tx, user)
        chats: list[ExportedChat] = []
        for c in rows.private:
            found = await tx.fetchall(
                f"SELECT {_MESSAGE} FROM messages m WHERE m.session_id = ? ORDER BY m.id", (c.id,)
            )
            chats.append(
                ExportedChat(c.key, c.agent_id, "private", c.chat_id, c.thread_id,
                             [self._message(r) for r in found])
            )  # fmt: skip
        theirs, params = rows.theirs()
        shared = await tx.fetchall(
            f"SELECT s.key, s.agent_id, s.chat_kind, s.chat_id, s.thread_id, {_MESSAGE} "
            "FROM messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.id IN ({theirs}) OR m.in_reply_to IN ({theirs}) ORDER BY s.key, m.id",
            (*params, *params),
        )
        by_key: dict[str, ExportedChat] = {}
        for r in shared:
            chat = by_key.get(r[0])
            if chat is None:
                chat = by_key[r[0]] = ExportedChat(r[0], r[1], r[2], r[3], r[4])
                chats.append(chat)
            chat.messages.append(self._message(r[5:]))
        where, params = rows.about("commitments")
        follow_ups = [
            ExportedFollowUp(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                d.from_time(r[6]),
                d.from_time(r[7]),
                d.from_time(r[8]),
            )
            for r in await tx.fetchall(
                "SELECT id, session_key, kind, status, reason, suggested_text, due_earliest, "
                f"due_latest, created_at FROM commitments {where} ORDER BY created_at, id",
                params,
            )
        ]
        where, params = rows.about("reminders")
        reminders = [
            ExportedReminder(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                d.from_maybe_time(r[6]),
                r[7],
                d.from_time(r[8]),
            )
            for r in await tx.fetchall(
                "SELECT id, session_key, text, kind, cron, timezone, next_fire_at, status, "
                f"created_at FROM reminders {where} ORDER BY created_at, id",
                params,
            )
        ]
        where, params = rows.about("extraction_jobs")
        queued = [
            ExportedExchange(r[0], r[1], r[2], d.from_time(r[3]))
            for r in await tx.fetchall(
                "SELECT session_key, user_text, assistant_text, created_at "
                f"FROM extraction_jobs {where} ORDER BY id",
                params,
            )
        ]
        zone = await tx.fetchone(
            "SELECT timezone FROM user_zones WHERE platform = ? AND user_id = ?",
            (user.platform, user.user_id),
        )
        paired = await tx.fetchone(
            "SELECT 1 FROM paired_users WHERE platform = ? AND user_id = ?",
            (user.platform, user.user_id),
        )
        agent, agent_params = rows.agent("followup_preferences")
        switches = [
            ExportedFollowUpSwitch(r[0], bool(r[1]), d.from_time(r[2]))
            for r in await tx.fetchall(
                "SELECT agent_id, enabled, updated_at FROM followup_preferences "
                f"WHERE platform = ? AND user_id = ?{agent} ORDER BY agent_id",
                (user.platform, user.user_id, *agent_params),
            )
        ]
        # The same rows an erasure removes (core/store/sql/erasure.py).
        agent, agent_params = rows.agent("model_usage")
        usage = [
            ExportedUsage(d.from_time(r[0]), r[1], r[2], r[3], r[4], int(r[5]), int(r[6]),
                          bool(r[7]))
            for r in await tx.fetchall(
                "SELECT at, agent_id, role, model, chat_id, tokens_in, tokens_out, estimated "
                f"FROM model_usage WHERE platform = ? AND user_id = ?{agent} ORDER BY at, id",
                (user.platform, user.user_id, *agent_params),
            )
        ]  # fmt: skip
        return UserExport(
            user.platform, user.user_id, chats, follow_ups, reminders, queued,
            zone[0] if zone else None, paired is not None, switches, usage,
        )  # fmt: skip
