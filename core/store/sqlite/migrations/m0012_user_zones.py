"""Step 12, user zones (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import USER_ZONES

SQL = SQLITE.ddl(USER_ZONES)
