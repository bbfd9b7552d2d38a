"""Updates parked after failing while others were stored (core/store/parked.py)."""

SQL = """
CREATE TABLE parked_updates (
    source              text NOT NULL,
    update_id           bigint NOT NULL,
    lane                text NOT NULL,
    payload             text NOT NULL,
    error               text NOT NULL,
    tries               integer NOT NULL,
    parked_at           timestamptz NOT NULL,
    retry_requested_at  timestamptz,
    PRIMARY KEY (source, update_id)
);
"""
