"""Step 9, extraction pauses (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import EXTRACTION_PAUSES

SQL = POSTGRES.ddl(EXTRACTION_PAUSES)
