"""The PostgreSQL backend: every store port on one shared connection pool,
for several `kept run` workers on one database.

connection.py   the psycopg pool and transaction helpers
migrations/     the numbered schema migrations (this backend's own numbering)
lexemes.py      kept's tokenizer: a message's tsvector, a query's tsquery
index.py        TsvectorIndex: the transcript's search rows, their upkeep
search.py       the tsvector search statements
transcript.py   PostgresStore: the transcript Store (core/store/sql/transcript.py) on tsvector
claims.py       what the follow-up stores share: claim columns, fence, aware times
commitments.py  the CommitmentStore
heartbeat.py    the HeartbeatStore (delivery claims of commitments)
reminders.py    the ReminderStore
extraction_jobs.py  the ExtractionJobStore (the extraction queue) and PauseStore
locks.py        the session guard: a chat's turns on one worker at a time
wake.py         LISTEN/NOTIFY: a follow-up stored by one worker wakes the others
updates.py      the UpdateQueue: polled updates handed to every worker
app_state.py    the AppStateStore (small values the bot keeps about itself)
users.py        the UserZoneStore (each user's own time zone)
parked.py       ParkedUpdates (updates parked after failing while others were stored)
"""

from core.store.postgres.app_state import PostgresAppStateStore
from core.store.postgres.commitments import PostgresCommitmentStore
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.extraction_jobs import PostgresExtractionJobStore, PostgresPauseStore
from core.store.postgres.heartbeat import PostgresHeartbeatStore
from core.store.postgres.locks import PostgresSessionGuard
from core.store.postgres.parked import PostgresParkedUpdates
from core.store.postgres.reminders import PostgresReminderStore
from core.store.postgres.transcript import PostgresStore
from core.store.postgres.updates import PostgresUpdateQueue
from core.store.postgres.users import PostgresUserZoneStore
from core.store.postgres.wake import PostgresWakeChannel

__all__ = [
    "PostgresAppStateStore",
    "PostgresCommitmentStore",
    "PostgresConnection",
    "PostgresExtractionJobStore",
    "PostgresHeartbeatStore",
    "PostgresParkedUpdates",
    "PostgresPauseStore",
    "PostgresReminderStore",
    "PostgresSessionGuard",
    "PostgresStore",
    "PostgresUpdateQueue",
    "PostgresUserZoneStore",
    "PostgresWakeChannel",
]
