"""Step 15, parked updates (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import PARKED_UPDATES

SQL = POSTGRES.ddl(PARKED_UPDATES)
