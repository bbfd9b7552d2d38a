"""What the commitment, heartbeat and reminder stores on PostgreSQL share: the
claim columns, the fence, and the check that every time is timezone-aware.

Claims run several workers against one database, so they are written for
concurrency, not just for one writer:

- a claim picks its rows with `SELECT … FOR UPDATE SKIP LOCKED`: a row
  another worker is claiming right now is passed over, not waited on, and two
  workers never claim the same row;
- `begin_sending` and every step after it are fenced on the claimant (worker
  id) and the attempt it claimed, so a claim that expired and was taken again
  by someone else is never moved or ended by its first owner;
- claims and status changes commit durably (`synchronous_commit` on).
"""

from __future__ import annotations

from datetime import datetime

# Ends a claim: every claim column goes, so no later statement sees a leftover.
NO_CLAIM = "claimed_at = NULL, claim_phase = NULL, claimed_by = NULL, lease_until = NULL"
# The fence: the claimant and the attempt it claimed.
OURS = "claimed_by = %s AND attempts = %s"
ERROR_CHARS = 500


def aware(value: datetime) -> datetime:
    """`value`, refused when naive: PostgreSQL would read a naive time in the
    session's zone and silently shift it."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: the store needs timezone-aware times")
    return value


def maybe_aware(value: datetime | None) -> datetime | None:
    return None if value is None else aware(value)
