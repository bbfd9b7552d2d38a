"""Two-phase delivery claims with an owner and a lease (commitments and reminders).

A claim used to be one timestamp (`claimed_at`), set before the model call:
a stop or crash during that call left the row looking mid-send, so it ended
`failed` with nothing sent. Now a claim has a phase:

- `claimed`: taken, nothing sent yet (the heartbeat's model call). Released
  back to active on cancellation, or by whoever finds its lease expired.
- `sending`: set in its own transaction just before the platform call. Only
  this phase can end `failed` with an unknown outcome; it is never re-sent.

`claimed_by` names the worker (one per process) and `lease_until` says until
when that worker vouches for the claim, so a live claim of another worker is
told from a dead one. `claimed_at` stays the "has a claim" marker that the due
queries filter on; every statement that ends a claim clears all four columns.
The fence for `sending` also checks `attempts` (counted at claim time), so a
claim that was reaped and taken again by someone else is not mistaken for ours.

Claims written by older code (only `claimed_at`) may have been mid-send: they
become expired `sending` claims, which start-up fails, as before.

The `*_lease` partial indexes answer "claims whose lease has expired" and
"when does the next lease expire"; they replace the `*_claimed` ones.
"""

# The same columns, backfill and index for each table that claims deliveries.
SQL = "".join(
    f"""
ALTER TABLE {table} ADD COLUMN claim_phase TEXT
    CHECK (claim_phase IS NULL OR claim_phase IN ('claimed', 'sending'));
ALTER TABLE {table} ADD COLUMN claimed_by TEXT;
ALTER TABLE {table} ADD COLUMN lease_until INTEGER;

UPDATE {table} SET claim_phase = 'sending', lease_until = claimed_at
    WHERE claimed_at IS NOT NULL;

DROP INDEX {table}_claimed;
CREATE INDEX {table}_lease ON {table}(lease_until) WHERE claim_phase IS NOT NULL;
"""
    for table in ("commitments", "reminders")
)
