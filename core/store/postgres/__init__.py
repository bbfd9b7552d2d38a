"""The PostgreSQL backend: every store port on one shared connection pool,
for several `kept run` workers on one database.

connection.py   the psycopg pool and transaction helpers
migrations/     the shared schema steps (core/store/migration_steps.py) in its DDL
lexemes.py      kept's tokenizer: a message's tsvector, a query's tsquery
index.py        TsvectorIndex: the transcript's search rows, their upkeep
search.py       the tsvector search statements
transcript.py   PostgresStore: the transcript Store (core/store/sql/transcript.py) on tsvector
due_claims.py   one statement claims a page of chats' due follow-ups, each chat whole
locks.py        the session guard: a chat's turns on one worker at a time
wake.py         LISTEN/NOTIFY: a follow-up stored by one worker wakes the others
updates.py      the UpdateQueue: polled updates handed to every worker
"""

from core.store.postgres.connection import PostgresConnection
from core.store.postgres.locks import PostgresSessionGuard
from core.store.postgres.transcript import PostgresStore
from core.store.postgres.updates import PostgresUpdateQueue
from core.store.postgres.wake import PostgresWakeChannel

__all__ = [
    "PostgresConnection",
    "PostgresSessionGuard",
    "PostgresStore",
    "PostgresUpdateQueue",
    "PostgresWakeChannel",
]
