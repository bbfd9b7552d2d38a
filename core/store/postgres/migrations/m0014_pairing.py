"""Step 14, pairing (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import PAIRING

SQL = POSTGRES.ddl(PAIRING)
