"""The schema's history: one list of steps both backends follow.

Each backend keeps its DDL per step in its own `migrations/` package, one
module `mNNNN_<name>.py` per step below, so "schema 14" means the same on
SQLite and PostgreSQL. DDL both build alike is written once
(core/store/migration_ddl.py) and rendered by each module in its words. A
step that one backend does not need (its feature is the other backend's own)
is a module there with empty SQL.

Before this list, each backend had its own numbering (SQLite 15 steps,
PostgreSQL 13). A database still recorded that way is renumbered once, on
its next migrating open: `renumber` maps its `schema_version` rows to this
list, from the backend's `LegacyStep`s.

What each backend's runner does alike lives here too: finding its step
modules, checking their numbering, refusing a schema newer than the code,
and naming the step that failed. Running a step in a transaction (and
skipping it when another process applied it meanwhile) is the backend's.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from core.store.errors import MigrationError, check_schema, refuse_newer

_MODULE_NAME = re.compile(r"^m(\d{4})_(\w+)$")


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
            "followup_preferences",
            "conversation_starts",
            "retention_indexes",
            "limits",
            "reminder_creators",
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


def same_steps(first: int, last: int | None = None) -> tuple[LegacyStep, ...]:
    """Old steps that were the shared steps `first` to `last` (default: the
    last), one each under the same name."""
    return tuple(LegacyStep(step.name, step.version) for step in STEPS[first - 1 : last])


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


def recorded_version(applied: Sequence[tuple[int, str]], legacy: Sequence[LegacyStep]) -> int:
    """The version `schema_version`'s rows (`applied`) record, in this list's
    numbering also while they are still in the old one (`legacy`)."""
    replaced = renumber(applied, legacy)
    if replaced is not None:
        return replaced[-1][1].version
    return max((version for version, _ in applied), default=0)


C = TypeVar("C")


# Not slots: a frozen slotted Generic breaks Migration[C](…) on Python 3.11.
@dataclass(frozen=True)
class Migration(Generic[C]):
    """One step as a backend runs it: its SQL (empty for a step that is the
    other backend's), and for a change SQL alone cannot make an `upgrade` of
    the backend's connection `C` (SQLite: re-deriving full-text columns)."""

    version: int
    name: str
    sql: str | None = None
    upgrade: Callable[[C], Awaitable[None]] | None = None


def step_modules(package: str, path: Iterable[str], backend: str) -> list[Migration[Any]]:
    """The steps of a backend's migrations package (its `__name__` and
    `__path__`), one module `mNNNN_<name>` each with its `SQL` and
    `upgrade`, in version order; MigrationError unless they are exactly the
    shared steps."""
    found: list[Migration[Any]] = []
    for info in pkgutil.iter_modules(path):
        match = _MODULE_NAME.match(info.name)
        if match is not None:
            m = importlib.import_module(f"{package}.{info.name}")
            sql, upgrade = getattr(m, "SQL", None), getattr(m, "upgrade", None)
            found.append(Migration(int(match.group(1)), match.group(2), sql, upgrade))
    found.sort(key=lambda migration: migration.version)
    if [(m.version, m.name) for m in found] != [(s.version, s.name) for s in STEPS]:
        names = [f"{m.version:04d}_{m.name}" for m in found]
        raise MigrationError(
            f"the {backend} migrations must be the shared steps "
            f"(core/store/migration_steps.py); found {names}"
        )
    return found


async def run_steps(
    migrations: Sequence[Migration[C]],
    *,
    migrate: bool,
    current: Callable[[], Awaitable[int]],
    prepare: Callable[[], Awaitable[None]],
    apply: Callable[[Migration[C]], Awaitable[None]],
) -> None:
    """With `migrate`, bring a schema up to the last of `migrations`:
    `prepare` makes `schema_version` ready (created, renumbered), `apply`
    runs one step in its own transaction with its row, rolled back when it
    raises. Without, refuse a schema that is not the code's, changing
    nothing. `current` is the version recorded (0 for a fresh database).
    """
    if not migrate:
        check_schema(await current(), len(migrations))
        return
    # A gap or duplicate means a step was misnamed; applying around it would
    # record a version whose schema was never built.
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migrations must be numbered 1, 2, 3, … without gaps; "
                f"expected {expected:04d}, found {migration.version:04d} ({migration.name})"
            )
    await prepare()
    version = await current()
    refuse_newer(version, len(migrations))
    for migration in migrations[version:]:
        try:
            await apply(migration)
        except Exception as exc:
            raise MigrationError(
                f"migration {migration.version:04d} ({migration.name}) failed and was "
                f"rolled back: {exc}",
                version=migration.version,
            ) from exc
