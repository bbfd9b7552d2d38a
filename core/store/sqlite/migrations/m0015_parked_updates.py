"""Step 15, parked updates (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import PARKED_UPDATES

SQL = SQLITE.ddl(PARKED_UPDATES)
