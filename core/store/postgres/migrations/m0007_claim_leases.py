"""Two-phase delivery claims with an owner and a lease (commitments and reminders).

A delivery claim has two phases (`claimed`, then `sending` just before the
platform call), an owner (`claimed_by`, one worker id per process) and a
lease (`lease_until`). `claimed_at` stays the "has a claim" marker the due
queries filter on; every statement that ends a claim clears all four.

The `*_lease` partial indexes answer "claims whose lease has ended" and
"when does the next lease end".
"""

# The same columns and index for each table that claims deliveries.
SQL = "".join(
    f"""
ALTER TABLE {table}
    ADD COLUMN claim_phase text CHECK (claim_phase IN ('claimed', 'sending')),
    ADD COLUMN claimed_by text,
    ADD COLUMN lease_until timestamptz;

CREATE INDEX {table}_lease ON {table}(lease_until) WHERE claim_phase IS NOT NULL;
"""
    for table in ("commitments", "reminders")
)
