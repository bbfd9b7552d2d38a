"""What SQLite does so that erased text leaves the database file.

Freed pages are zeroed as they are freed (`secure_delete`, set on every
connection: sqlite/connection.py). The full-text index runs with FTS5's
`secure-delete` option (set at open: sqlite/migrations/__init__.py), so a
deleted row's terms leave its segments in the deleting transaction itself,
instead of staying behind a delete marker until the segments merge: the
transaction needs nothing more. Last, the WAL, which still holds the pages
as they were before, is copied into the file and truncated.
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
        """Nothing: secure-delete removed the terms with the rows."""

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
