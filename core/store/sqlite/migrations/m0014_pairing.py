"""Step 14, pairing (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import PAIRING

SQL = SQLITE.ddl(PAIRING)
