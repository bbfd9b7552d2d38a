"""The SQLite backend: every store port on one shared connection.

connection.py   the aiosqlite connection, its lock, one-trip transactions
migrations/     the numbered schema migrations
rows.py         rows ↔ records, times
fts.py          what a message's full-text row holds
messages.py     SqliteStore: sessions, messages (the transcript Store)
index.py        edits, deletions, imports, rebuilds of the full-text index
search.py       search and context reads
reminders.py    the ReminderStore
extraction_jobs.py  the ExtractionJobStore (the extraction queue)
app_state.py    the AppStateStore (small values the bot keeps about itself)
users.py        the UserZoneStore (each user's own time zone)
parked.py       ParkedUpdates (updates parked after failing while others were stored)
wake.py         the WakeChannel: another process's commit (the CLI) wakes the heartbeat
"""

from core.store.sqlite.app_state import SqliteAppStateStore
from core.store.sqlite.extraction_jobs import SqliteExtractionJobStore, SqlitePauseStore
from core.store.sqlite.messages import SqliteStore
from core.store.sqlite.parked import SqliteParkedUpdates
from core.store.sqlite.reminders import SqliteReminderStore
from core.store.sqlite.users import SqliteUserZoneStore
from core.store.sqlite.wake import SqliteWakeChannel

__all__ = [
    "SqliteAppStateStore",
    "SqliteExtractionJobStore",
    "SqliteParkedUpdates",
    "SqlitePauseStore",
    "SqliteReminderStore",
    "SqliteStore",
    "SqliteUserZoneStore",
    "SqliteWakeChannel",
]
