"""Step 18, follow-up preferences (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import FOLLOWUP_PREFERENCES

SQL = SQLITE.ddl(FOLLOWUP_PREFERENCES)
