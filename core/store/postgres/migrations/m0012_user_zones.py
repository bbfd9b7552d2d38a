"""Step 12, user zones (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import USER_ZONES

SQL = POSTGRES.ddl(USER_ZONES)
