"""The PostgreSQL backend: every store port on one shared connection pool,
for several `kept run` workers on one database.

connection.py   the psycopg pool and transaction helpers
migrations/     the numbered schema migrations (this backend's own numbering)
rows.py         rows ↔ records, times
lexemes.py      kept's tokenizer: a message's tsvector, a query's tsquery
messages.py     PostgresStore: sessions, messages (the transcript Store)
index.py        edits, deletions, imports, rebuilds of the search rows
search.py       search and context reads
"""

from core.store.postgres.connection import PostgresConnection
from core.store.postgres.messages import PostgresStore

__all__ = ["PostgresConnection", "PostgresStore"]
