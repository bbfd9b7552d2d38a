"""The ErasureStore in SQL written once.

A user's private chats go whole (the session, and with it by cascade its
messages and their full-text rows); in shared chats their own messages and
the bot's replies to them go (replies first: deleting a message sets its
replies' `in_reply_to` to NULL). Follow-ups, reminders and queued
extraction jobs go in their private chats and wherever they are the member
the row is about. Counting and erasing read the same statements, so the
counts a user is shown are what is removed.
"""

from __future__ import annotations

from typing import Protocol

from core.privacy.holdings import Reach, holdings
from core.privacy.store import ErasedUser, ErasureCounts, ErasureStore
from core.store.sql.database import Database, Params, Transaction
from core.store.sql.user_rows import user_rows

ERASURE_NAMESPACE = 0x6B65  # "ke"


class Purge(Protocol):
    """What a backend does so that erased text is gone from its files, not
    only from its queries (each backend's erasure.py)."""

    async def in_transaction(self, tx: Transaction) -> None:
        """Inside the erasing transaction, after its deletes."""
        ...

    async def after(self, tables: frozenset[str]) -> None:
        """Once that transaction has committed; `tables` are the ones it touched."""
        ...


class SqlErasureStore(ErasureStore):
    def __init__(self, db: Database, purge: Purge) -> None:
        self._db = db
        self._d = db.dialect
        self._purge = purge
        self._tables = {h.table for h in holdings(self._d.name)}
        # The tables an erasure deletes from, directly or by cascade and trigger.
        self._erased = frozenset(
            h.table for h in holdings(self._d.name) if h.erased and h.reach is not Reach.NONE
        )

    async def count(self, user: ErasedUser) -> ErasureCounts:
        return await self._db.snapshot(lambda tx: self._erase(tx, user, delete=False))

    async def erase(self, user: ErasedUser) -> ErasureCounts:
        counts = await self._db.transact(lambda tx: self._erase(tx, user, delete=True), bulk=True)
        if counts.total:
            await self._purge.after(self._erased)
        return counts

    async def count_session(self, session_key: str) -> ErasureCounts:
        return await self._db.snapshot(lambda tx: self._session(tx, session_key, delete=False))

    async def erase_session(self, session_key: str) -> ErasureCounts:
        counts = await self._db.transact(
            lambda tx: self._session(tx, session_key, delete=True), bulk=True
        )
        if counts.chats:
            await self._purge.after(self._erased)
        return counts

    async def _session(self, tx: Transaction, key: str, *, delete: bool) -> ErasureCounts:
        async def counted(sql: str, params: Params) -> int:
            found = await tx.fetchone(sql, params)
            return int(found[0]) if found else 0

        # A group's follow-up switch goes with its session: a chat kept
        # forgets starts over with follow-ups on. It may exist before any
        # message is stored (a command is no turn), so it is looked at alone.
        switch = await counted(
            "SELECT count(*) FROM chat_followup_preferences WHERE session_key = ?", (key,)
        )
        if delete and switch:
            await tx.execute("DELETE FROM chat_followup_preferences WHERE session_key = ?", (key,))
        row = await tx.fetchone("SELECT id FROM sessions WHERE key = ?", (key,))
        if row is None:
            return ErasureCounts(settings=switch)

        counts = ErasureCounts(
            chats=1,
            messages=await counted("SELECT count(*) FROM messages WHERE session_id = ?", row),
            follow_ups=await counted(
                "SELECT count(*) FROM commitments WHERE session_key = ?", (key,)
            ),
            reminders=await counted("SELECT count(*) FROM reminders WHERE session_key = ?", (key,)),
            queued=await counted(
                "SELECT count(*) FROM extraction_jobs WHERE session_key = ?", (key,)
            ),
            settings=switch,
        )
        if delete:
            # Messages (with their index rows) by cascade; follow-ups,
            # reminders, jobs and the heartbeat's record by trigger.
            await tx.execute("DELETE FROM sessions WHERE id = ?", row)
            if counts.messages:
                await self._purge.in_transaction(tx)
        return counts

    async def _erase(self, tx: Transaction, user: ErasedUser, *, delete: bool) -> ErasureCounts:
        if delete:
            # Two erasures of one user at once (a double press): the second
            # waits, then counts what the first left, so neither reports rows
            # the other removed (PostgreSQL's READ COMMITTED would let both
            # count the same rows).
            await tx.serialize(ERASURE_NAMESPACE, f"{user.platform}:{user.user_id}")
        rows = await user_rows(tx, user)
        ids_in, ids = rows.private_ids()
        keys_in, keys = rows.private_keys()

        # Everything is counted before anything is deleted: deleting a
        # session also deletes its follow-ups, reminders and jobs (triggers).
        deletes: list[tuple[str, Params]] = []

        async def run(select_count: str, delete_sql: str, params: Params) -> int:
            counted = await tx.fetchone(select_count, params)
            number = int(counted[0]) if counted else 0
            if number:
                deletes.append((delete_sql, params))
            return number

        # Theirs in shared chats, and the bot's replies to those (first:
        # deleting a message sets its replies' in_reply_to to NULL).
        theirs, shared = rows.theirs()
        replies = await run(
            f"SELECT count(*) FROM messages WHERE in_reply_to IN ({theirs})",
            f"DELETE FROM messages WHERE in_reply_to IN ({theirs})",
            shared,
        )
        own = await run(
            f"SELECT count(*) FROM messages WHERE id IN ({theirs})",
            f"DELETE FROM messages WHERE id IN ({theirs})",
            shared,
        )
        in_private = await run(
            f"SELECT count(*) FROM messages WHERE session_id {ids_in}",
            f"DELETE FROM sessions WHERE id {ids_in}",
            ids,
        )

        def about(table: str) -> tuple[str, str, Params]:
            where, params = rows.about(table)
            return f"SELECT count(*) FROM {table} {where}", f"DELETE FROM {table} {where}", params

        follow_ups = await run(*about("commitments"))
        reminders = await run(*about("reminders"))
        queued = await run(*about("extraction_jobs"))
        await run(
            f"SELECT count(*) FROM heartbeat_turns WHERE session_key {keys_in}",
            f"DELETE FROM heartbeat_turns WHERE session_key {keys_in}",
            keys,
        )
        updates = 0
        if rows.lanes():
            lanes_in, lanes = self._d.in_list(rows.lanes())
            for table in ("parked_updates", "update_queue"):
                if table in self._tables:
                    where = f"WHERE source LIKE ? AND lane {lanes_in}"
                    updates += await run(
                        f"SELECT count(*) FROM {table} {where}",
                        f"DELETE FROM {table} {where}",
                        (f"{user.platform}:%", *lanes),
                    )
        settings = 0
        for table in ("user_zones", "pairing_requests"):
            where = "WHERE platform = ? AND user_id = ?"
            settings += await run(
                f"SELECT count(*) FROM {table} {where}",
                f"DELETE FROM {table} {where}",
                (user.platform, user.user_id),
            )
        # Their own follow-up switch (a group's, set by an admin, is the
        # chat's and stays with it).
        agent, agent_params = rows.agent("followup_preferences")
        where = f"WHERE platform = ? AND user_id = ?{agent}"
        settings += await run(
            f"SELECT count(*) FROM followup_preferences {where}",
            f"DELETE FROM followup_preferences {where}",
            (user.platform, user.user_id, *agent_params),
        )
        # What their model calls used: the operator's totals lose them.
        agent, agent_params = rows.agent("model_usage")
        where = f"WHERE platform = ? AND user_id = ?{agent}"
        usage = await run(
            f"SELECT count(*) FROM model_usage {where}",
            f"DELETE FROM model_usage {where}",
            (user.platform, user.user_id, *agent_params),
        )
        messages = replies + own + in_private
        if delete and deletes:
            for sql, params in deletes:
                await tx.execute(sql, params)
            # Only erased messages have words in the full-text index.
            if messages:
                await self._purge.in_transaction(tx)
        return ErasureCounts(
            chats=len(rows.private),
            messages=messages,
            follow_ups=follow_ups,
            reminders=reminders,
            queued=queued,
            updates=updates,
            settings=settings,
            usage=usage,
        )
