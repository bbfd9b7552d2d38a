"""Step 22, reminder creators (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import REMINDER_CREATORS

SQL = SQLITE.ddl(REMINDER_CREATORS)
