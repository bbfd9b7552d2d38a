"""SqliteStore: the transcript store (core/store/sql/transcript.py) on a
SQLite connection, with FTS5 as its full-text index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.clock import Clock
from core.store.sql.transcript import SqlTranscriptStore
from core.store.sqlite.connection import (
    BUSY_TIMEOUT,
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
    SqliteConnection,
)
from core.store.sqlite.index import Fts5Index, IndexShape
from core.store.sqlite.migrations import Migration

__all__ = ["SqliteStore"]


class SqliteStore(SqlTranscriptStore):
    """The transcript store on `target`: a SqliteConnection, or a path (or
    ":memory:") to open one on with the options given. The backend's other
    stores run on `connection`."""

    def __init__(
        self,
        target: str | Path | SqliteConnection,
        *,
        migrations: Sequence[Migration] | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
        wal_autocheckpoint: int = WAL_AUTOCHECKPOINT_PAGES,
        journal_size_limit: int = JOURNAL_SIZE_LIMIT,
        migrate: bool = True,
        clock: Clock | None = None,
    ) -> None:
        if isinstance(target, SqliteConnection):
            connection = target
        else:
            connection = SqliteConnection(
                target,
                migrations=migrations,
                busy_timeout=busy_timeout,
                wal_autocheckpoint=wal_autocheckpoint,
                journal_size_limit=journal_size_limit,
                migrate=migrate,
                clock=clock,
            )
        self._fts = Fts5Index(connection)
        super().__init__(connection, self._fts)
        self.connection = connection

    async def checkpoint_log(self) -> bool:
        return await self.connection.checkpoint_log()

    async def index_shape(self) -> IndexShape:
        """Levels, segments and write counter of the full-text index."""
        return await self._fts.shape()
