"""Step 20, retention indexes (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import RETENTION_INDEXES

SQL = SQLITE.ddl(RETENTION_INDEXES)
