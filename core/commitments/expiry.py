"""Expiry: active commitments past `latest` plus a grace period become `expired`.

The sweep is one UPDATE over the partial due_latest index of active
rows, so its cost grows with the rows that expire, not with the table: a
database with years of finished commitments sweeps as fast as a new one.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from core.commitments.store import CommitmentStore
from core.logs import event

log = logging.getLogger("kept.commitments")

# Long enough for a follow-up due late in the evening to still go out when
# the active hours begin next morning; short enough that a stale check-in
# about last week never arrives.
EXPIRY_GRACE = timedelta(hours=12)


async def sweep_expired(
    store: CommitmentStore, *, now: datetime, grace: timedelta = EXPIRY_GRACE
) -> int:
    """Expire what is due; returns how many commitments changed."""
    count = await store.expire(before=now - grace, now=now)
    if count:
        event(log, logging.INFO, "commitments_expired", count=count)
    return count
