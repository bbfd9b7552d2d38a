"""The SQLite backend: every store port on one shared connection.

connection.py   the aiosqlite connection, its lock, one-trip transactions
migrations/     the numbered schema migrations
rows.py         rows ↔ records, times
fts.py          what a message's full-text row holds
messages.py     SqliteStore: sessions, messages (the transcript Store)
index.py        edits, deletions, imports, rebuilds of the full-text index
search.py       search and context reads
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.messages import SqliteStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteStore",
    "SqliteWakeChannel",
]
