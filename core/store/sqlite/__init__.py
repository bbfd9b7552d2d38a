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
reminders.py    the ReminderStore
extraction_jobs.py  the ExtractionJobStore (the extraction queue)
app_state.py    the AppStateStore (small values the bot keeps about itself)
parked.py       ParkedUpdates (updates parked after failing while others were stored)
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.app_state import SqliteAppStateStore
from core.store.sqlite.commitments import SqliteCommitmentStore
from core.store.sqlite.extraction_jobs import SqliteExtractionJobStore, SqlitePauseStore
from core.store.sqlite.heartbeat import SqliteHeartbeatStore
from core.store.sqlite.messages import SqliteStore
from core.store.sqlite.parked import SqliteParkedUpdates
from core.store.sqlite.reminders import SqliteReminderStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteAppStateStore",
    "SqliteCommitmentStore",
    "SqliteExtractionJobStore",
    "SqliteHeartbeatStore",
    "SqliteParkedUpdates",
    "SqlitePauseStore",
    "SqliteReminderStore",
    "SqliteStore",
    "SqliteWakeChannel",
]
