"""Step 17, reply send state (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import REPLY_SEND_STATE

SQL = POSTGRES.ddl(REPLY_SEND_STATE)
