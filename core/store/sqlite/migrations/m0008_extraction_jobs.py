"""Step 8, extraction jobs (core/store/migration_ddl.py), in SQLite's words,
with its lease index and trigger."""

from core.store.dialect import SQLITE
from core.store.migration_ddl import EXTRACTION_JOBS

_LEASE_INDEX = (
    "CREATE INDEX extraction_jobs_lease ON extraction_jobs(coalesce(lease_until, 0), id);"
)

_OWN = """
-- A deleted conversation leaves nothing waiting to be read by a model.
CREATE TRIGGER extraction_jobs_session_delete AFTER DELETE ON sessions BEGIN
    DELETE FROM extraction_jobs WHERE session_key = old.key;
END;
"""

SQL = SQLITE.ddl(EXTRACTION_JOBS, lease_index=_LEASE_INDEX) + _OWN
