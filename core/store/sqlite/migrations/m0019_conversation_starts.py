"""Step 19, conversation starts (core/store/migration_ddl.py), in SQLite's words."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import CONVERSATION_STARTS

SQL = SQLITE.ddl(CONVERSATION_STARTS)
