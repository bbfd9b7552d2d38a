"""Step 17, reply send state (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import REPLY_SEND_STATE

SQL = SQLITE.ddl(REPLY_SEND_STATE)
