"""The SQLite backend: every store port on one shared connection.

connection.py   the aiosqlite connection, its lock, one-trip transactions
migrations/     the numbered schema migrations
rows.py         rows ↔ records, times
fts.py          what a message's full-text row holds
messages.py     SqliteStore: sessions, messages (the transcript Store)
index.py        edits, deletions, imports, rebuilds of the full-text index
search.py       search and context reads
commitments.py  the CommitmentStore
heartbeat.py    the HeartbeatStore
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.commitments import SqliteCommitmentStore
from core.store.sqlite.heartbeat import SqliteHeartbeatStore
from core.store.sqlite.messages import SqliteStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteCommitmentStore",
    "SqliteHeartbeatStore",
    "SqliteStore",
    "SqliteWakeChannel",
]
