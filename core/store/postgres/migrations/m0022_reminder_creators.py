"""Step 22, reminder creators (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import REMINDER_CREATORS

SQL = POSTGRES.ddl(REMINDER_CREATORS)
