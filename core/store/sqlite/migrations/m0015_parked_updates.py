"""Updates parked after failing while others were stored (core/store/parked.py)."""

SQL = """
CREATE TABLE parked_updates (
    source              TEXT NOT NULL,
    update_id           INTEGER NOT NULL,
    lane                TEXT NOT NULL,
    payload             TEXT NOT NULL,
    error               TEXT NOT NULL,
    tries               INTEGER NOT NULL,
    parked_at           INTEGER NOT NULL,
    retry_requested_at  INTEGER,
    PRIMARY KEY (source, update_id)
);
"""
