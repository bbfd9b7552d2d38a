"""Step 16, pairing notices and blocks (core/store/migration_ddl.py), in PostgreSQL's words."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import PAIRING_NOTICES_AND_BLOCKS

SQL = POSTGRES.ddl(PAIRING_NOTICES_AND_BLOCKS)
