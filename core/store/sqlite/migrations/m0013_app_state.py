"""Step 13, app state (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import APP_STATE

SQL = SQLITE.ddl(APP_STATE)
