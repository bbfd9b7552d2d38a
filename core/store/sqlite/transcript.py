"""SqliteStore: the transcript store (core/store/sql/transcript.py) on a
SQLite connection, with FTS5 as its full-text index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.store.sql.transcript import SqlTranscriptStore
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.index import Fts5Index, IndexShape

__all__ = ["SqliteStore"]


class SqliteStore(SqlTranscriptStore):
    """The transcript store on `target`: a SqliteConnection, or a path (or
    ":memory:") to open one on, with SqliteConnection's `options`. The
    backend's other stores run on `connection`."""

    def __init__(self, target: str | Path | SqliteConnection, **options: Any) -> None:
        connection = (
            target if isinstance(target, SqliteConnection) else SqliteConnection(target, **options)
        )
        self._fts = Fts5Index(connection)
        super().__init__(connection, self._fts)
        self.connection = connection

    async def checkpoint_log(self) -> bool:
        return await self.connection.checkpoint_log()

    async def index_shape(self) -> IndexShape:
        """Levels, segments and write counter of the full-text index."""
        return await self._fts.shape()
