"""Step 20, retention indexes (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import RETENTION_INDEXES

SQL = POSTGRES.ddl(RETENTION_INDEXES)
