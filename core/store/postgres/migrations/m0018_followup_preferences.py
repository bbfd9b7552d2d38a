"""Step 18, follow-up preferences (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import FOLLOWUP_PREFERENCES

SQL = POSTGRES.ddl(FOLLOWUP_PREFERENCES)
