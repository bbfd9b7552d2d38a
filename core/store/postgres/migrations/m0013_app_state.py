"""Step 13, app state (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import APP_STATE

SQL = POSTGRES.ddl(APP_STATE)
