"""PostgresStore: the transcript store (core/store/sql/transcript.py) on a
PostgreSQL connection pool, with tsvector rows as its full-text index."""

from __future__ import annotations

from core.store.postgres.connection import PostgresConnection
from core.store.postgres.index import TsvectorIndex
from core.store.sql.transcript import SqlTranscriptStore

__all__ = ["PostgresStore"]


class PostgresStore(SqlTranscriptStore):
    """The transcript store on `target`: a PostgresConnection, or a URL to
    open one on. The backend's other stores run on `connection`."""

    def __init__(self, target: str | PostgresConnection, *, migrate: bool = True) -> None:
        connection = (
            target
            if isinstance(target, PostgresConnection)
            else PostgresConnection(target, migrate=migrate)
        )
        super().__init__(connection, TsvectorIndex(connection))
        self.connection = connection
