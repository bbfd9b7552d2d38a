"""Step 9, extraction pauses (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import EXTRACTION_PAUSES

SQL = SQLITE.ddl(EXTRACTION_PAUSES)
