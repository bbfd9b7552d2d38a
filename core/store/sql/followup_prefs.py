"""FollowUpPreferenceStore in SQL written once: a user's own setting in
`followup_preferences` (per agent, platform and user), a shared chat's in
`chat_followup_preferences` (per session key).

`SILENCED` (core/store/sql/silenced.py) is the same test as a condition on a
`commitments` row, for the
statement that moves a check-in to sending (core/store/sql/heartbeat.py):
a switch made while the model wrote the check-in stops it there, in the
database, whichever worker holds it.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from core.store.sql.commitments import ACTIVE
from core.store.sql.database import Database, Transaction
from core.users.followup_prefs import DISMISSED_REASON
from core.users.store import FollowUpPreferenceStore, FollowUpState, FollowUpSubject, Switched

# Three parameters a user: stays below every SQLite build's limit on host
# parameters (999 before 3.32) and PostgreSQL's (65,535).
_CHUNK = 300


class SqlFollowUpPreferenceStore(FollowUpPreferenceStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._d = db.dialect

    async def state(
        self, agent_id: str, platform: str, user_id: str, session_key: str | None = None
    ) -> FollowUpState:
        async def read(tx: Transaction) -> FollowUpState:
            own = await tx.fetchone(
                "SELECT enabled, updated_at FROM followup_preferences "
                "WHERE agent_id = ? AND platform = ? AND user_id = ?",
                (agent_id, platform, user_id),
            )
            chat = None
            if session_key is not None:
                chat = await tx.fetchone(
                    "SELECT enabled, updated_at FROM chat_followup_preferences "
                    "WHERE session_key = ?",
                    (session_key,),
                )
            return FollowUpState(
                bool(own[0]) if own else None,
                bool(chat[0]) if chat else None,
                self._d.from_time(own[1]) if own else None,
                self._d.from_time(chat[1]) if chat else None,
            )

        return await self._db.snapshot(read)

    async def set_user(
        self, agent_id: str, platform: str, user_id: str, enabled: bool, *, now: datetime
    ) -> Switched:
        async def work(tx: Transaction) -> Switched:
            before = await tx.fetchone(
                "SELECT enabled FROM followup_preferences "
                "WHERE agent_id = ? AND platform = ? AND user_id = ?",
                (agent_id, platform, user_id),
            )
            await tx.execute(
                "INSERT INTO followup_preferences (agent_id, platform, user_id, enabled, "
                "updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id, platform, user_id) "
                "DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
                (agent_id, platform, user_id, int(enabled), self._d.time(now)),
            )
            was = True if before is None else bool(before[0])
            if enabled:
                return Switched(True, changed=not was)
            where = "WHERE agent_id = ? AND platform = ? AND sender_id = ?"
            return await self._silence(tx, where, (agent_id, platform, user_id), now, was)

        return await self._db.transact(work)

    async def set_chat(
        self, agent_id: str, session_key: str, enabled: bool, *, now: datetime
    ) -> Switched:
        async def work(tx: Transaction) -> Switched:
            before = await tx.fetchone(
                "SELECT enabled FROM chat_followup_preferences WHERE session_key = ?",
                (session_key,),
            )
            await tx.execute(
                "INSERT INTO chat_followup_preferences (session_key, enabled, updated_at) "
                "VALUES (?, ?, ?) ON CONFLICT (session_key) "
                "DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
                (session_key, int(enabled), self._d.time(now)),
            )
            was = True if before is None else bool(before[0])
            if enabled:
                return Switched(True, changed=not was)
            where = "WHERE agent_id = ? AND session_key = ?"
            return await self._silence(tx, where, (agent_id, session_key), now, was)

        return await self._db.transact(work)

    async def _silence(
        self,
        tx: Transaction,
        where: str,
        params: tuple[str, ...],
        now: datetime,
        was: bool,
    ) -> Switched:
        """Dismiss the active follow-ups `where` picks, with the reason, and
        drop its exchanges waiting for extraction. A check-in a worker is
        writing meanwhile is then no longer active, so it is never sent."""
        at = self._d.time(now)
        dismissed = await tx.execute(
            "UPDATE commitments SET status = 'dismissed', dismissed_at = ?, updated_at = ?, "
            f"last_error = ? {where} AND {ACTIVE}",
            (at, at, DISMISSED_REASON, *params),
        )
        unqueued = await tx.execute(f"DELETE FROM extraction_jobs {where}", params)
        return Switched(False, changed=was, dismissed=dismissed, unqueued=unqueued)

    async def silenced(self, subjects: Collection[FollowUpSubject]) -> set[FollowUpSubject]:
        wanted = list(dict.fromkeys(subjects))
        users = list(
            dict.fromkeys((s.agent_id, s.platform, s.user_id) for s in wanted if s.user_id)
        )
        keys = list(dict.fromkeys(s.session_key for s in wanted))
        off_users: set[tuple[str, str, str | None]] = set()
        off_chats: set[str] = set()
        for start in range(0, len(users), _CHUNK):
            chunk = users[start : start + _CHUNK]
            # Triples of equalities, as user_zones reads pairs: SQLite
            # answers a row-value IN by scanning the table.
            triples = " OR ".join("(agent_id = ? AND platform = ? AND user_id = ?)" for _ in chunk)
            rows = await self._db.query(
                "SELECT agent_id, platform, user_id FROM followup_preferences "
                f"WHERE enabled = 0 AND ({triples})",
                tuple(v for key in chunk for v in key),
            )
            off_users.update((r[0], r[1], r[2]) for r in rows)
        for start in range(0, len(keys), _CHUNK):
            listed, params = self._d.in_list(keys[start : start + _CHUNK])
            rows = await self._db.query(
                "SELECT session_key FROM chat_followup_preferences "
                f"WHERE enabled = 0 AND session_key {listed}",
                params,
            )
            off_chats.update(r[0] for r in rows)
        return {
            s
            for s in wanted
            if s.session_key in off_chats or (s.agent_id, s.platform, s.user_id) in off_users
        }
