"""Step 19, conversation starts (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import CONVERSATION_STARTS

SQL = POSTGRES.ddl(CONVERSATION_STARTS)
