"""The schema's history: one list of steps both backends follow.

Each backend keeps its DDL per step in its own `migrations/` package, one
module `mNNNN_<name>.py` per step below, so "schema 14" means the same on
SQLite and PostgreSQL. A step that one backend does not need (its feature is
the other backend's own) is a module there with empty SQL.

Before this list, each backend had its own numbering (SQLite 15 steps,
PostgreSQL 13). A database still recorded that way is renumbered once, on
its next migrating open: `renumber` maps its `schema_version` rows to this
list, from the backend's `LegacyStep`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Step:
    version: int
    name: str


STEPS: tuple[Step, ...] = tuple(
    Step(version, name)
    for version, name in enumerate(
        (
            "transcript",
            "search",
            "commitments",
            "reminders",
            "heartbeat",
            "agent_ranges",  # SQLite only
            "claim_leases",
            "extraction_jobs",
            "extraction_pauses",
            "update_queue",  # PostgreSQL only
            "search_scope",  # PostgreSQL only
            "user_zones",
            "app_state",
            "pairing",
            "parked_updates",
            "pairing_notices_and_blocks",
            "reply_send_state",
        ),
        start=1,
    )
)


@dataclass(frozen=True, slots=True)
class LegacyStep:
    """One step of a backend's old numbering (its version is its place in
    the list): its name as `schema_version` recorded it, and the version in
    `STEPS` a database that had applied it has reached."""

    name: str
    reaches: int


def renumber(
    applied: Sequence[tuple[int, str]], legacy: Sequence[LegacyStep]
) -> list[tuple[int, Step]] | None:
    """The rows `schema_version` should hold instead of `applied` (its
    `(version, name)` rows), each paired with the old version whose row it
    replaces; None when `applied` is not in the old numbering (fresh, already
    renumbered, or not recognised, which the caller then judges as it is).

    Recognised only when the rows are exactly the old steps 1…N by name, so
    a database in the new numbering (or a newer one) is never rewritten.
    """
    rows = sorted(applied)
    count = len(rows)
    if count == 0 or count > len(legacy):
        return None
    if rows != [(version, old.name) for version, old in enumerate(legacy[:count], start=1)]:
        return None
    if rows == [(step.version, step.name) for step in STEPS[:count]]:
        return None
    replaced: list[tuple[int, Step]] = []
    reached = 0
    for version, old in enumerate(legacy[:count], start=1):
        replaced.extend((version, step) for step in STEPS[reached : old.reaches])
        reached = old.reaches
    return replaced
