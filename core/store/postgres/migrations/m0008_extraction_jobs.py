"""Step 8, extraction jobs (core/store/migration_ddl.py), in PostgreSQL's
words, with its lease index and trigger."""

from core.store.dialect import POSTGRES
from core.store.migration_ddl import EXTRACTION_JOBS
from core.store.postgres.migrations import delete_with_session

_LEASE_INDEX = "CREATE INDEX extraction_jobs_lease ON extraction_jobs(lease_until NULLS FIRST, id);"

_OWN = f"""
-- A deleted conversation leaves nothing waiting to be read by a model.
{delete_with_session("sessions_delete_extraction_jobs", "extraction_jobs")}

CREATE TRIGGER sessions_delete_extraction_jobs AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_delete_extraction_jobs();
"""

SQL = POSTGRES.ddl(EXTRACTION_JOBS, lease_index=_LEASE_INDEX) + _OWN
