"""The SQLite backend: every store port on one shared connection.

connection.py   SqliteConnection: the aiosqlite connection, its lock, one-trip transactions
migrations/     the numbered schema migrations
rows.py         times as stored
fts.py          what a message's full-text row holds
index.py        Fts5Index: the transcript's full-text rows, their upkeep
search.py       the FTS5 search statements
transcript.py   SqliteStore: the transcript Store (core/store/sql/transcript.py) on FTS5
commitments.py  the CommitmentStore
heartbeat.py    the HeartbeatStore
reminders.py    the ReminderStore
extraction_jobs.py  the ExtractionJobStore (the extraction queue)
app_state.py    the AppStateStore (small values the bot keeps about itself)
users.py        the UserZoneStore (each user's own time zone)
parked.py       ParkedUpdates (updates parked after failing while others were stored)
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.app_state import SqliteAppStateStore
from core.store.sqlite.commitments import SqliteCommitmentStore
from core.store.sqlite.connection import SqliteConnection
from core.store.sqlite.extraction_jobs import SqliteExtractionJobStore, SqlitePauseStore
from core.store.sqlite.heartbeat import SqliteHeartbeatStore
from core.store.sqlite.parked import SqliteParkedUpdates
from core.store.sqlite.reminders import SqliteReminderStore
from core.store.sqlite.transcript import SqliteStore
from core.store.sqlite.users import SqliteUserZoneStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteAppStateStore",
    "SqliteCommitmentStore",
    "SqliteConnection",
    "SqliteExtractionJobStore",
    "SqliteHeartbeatStore",
    "SqliteParkedUpdates",
    "SqlitePauseStore",
    "SqliteReminderStore",
    "SqliteStore",
    "SqliteUserZoneStore",
    "SqliteWakeChannel",
]
