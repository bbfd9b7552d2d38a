"""Step 16, pairing notices and blocks (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import PAIRING_NOTICES_AND_BLOCKS

SQL = SQLITE.ddl(PAIRING_NOTICES_AND_BLOCKS)
