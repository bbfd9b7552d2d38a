"""What SQLite does so that erased text leaves the database file.

Freed pages are zeroed as they are freed (`secure_delete`, set on every
connection: sqlite/connection.py). FTS5 does not remove a deleted row's
terms from its index segments; it adds a delete marker and drops the terms
only when the segments holding them are merged, so the erasing transaction
merges every segment into one (`optimize`): the erased words are then in no
segment, and the pages they were on are freed, so zeroed. Last, the WAL,
which still holds the pages as they were before, is copied into the file
and truncated.
"""

from __future__ import annotations

import logging

from core.logs import event
from core.store.sql.database import Transaction
from core.store.sqlite.connection import SqliteConnection

log = logging.getLogger("kept.store")


class SqliteErasurePurge:
    def __init__(self, connection: SqliteConnection) -> None:
        self._connection = connection

    async def in_transaction(self, tx: Transaction) -> None:
        await tx.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")

    async def after(self, tables: frozenset[str]) -> None:
        if not await self._connection.checkpoint_now():
            event(
                log,
                logging.WARNING,
                "erasure_checkpoint_incomplete",
                path=self._connection.path,
                action="another process kept reading the database; the erased text leaves "
                "the WAL at the next checkpoint (the bot's own, or its next start)",
            )
