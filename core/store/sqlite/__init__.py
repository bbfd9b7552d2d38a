"""The SQLite backend: every store port on one shared connection.

connection.py   SqliteConnection: the aiosqlite connection, its lock, one-trip transactions
migrations/     the shared schema steps (core/store/migration_steps.py) in its DDL
fts.py          what a message's full-text row holds
index.py        Fts5Index: the transcript's full-text rows, their upkeep
search.py       the FTS5 search statements
transcript.py   SqliteStore: the transcript Store (core/store/sql/transcript.py) on FTS5
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.transcript import SqliteStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteConnection",
    "SqliteStore",
    "SqliteWakeChannel",
]
