"""Numbered schema migrations for the SQLite backend.

The steps are the ones both backends follow (core/store/migration_steps.py).
Each is a module `mNNNN_<name>.py` in this package with either a
`SQL` string (statements separated by `;`) or an `async def upgrade(db)` for
changes SQL alone cannot make (e.g. re-deriving full-text columns in Python).
Migrations live in Python modules rather than .sql files so that they ship in
a wheel without package-data configuration.

`apply_migrations` runs each pending migration in its own BEGIN IMMEDIATE
transaction together with its `schema_version` row, so a failure leaves the
database at the previous version. A database recorded in this backend's old
numbering (`OLD_NUMBERING`) is renumbered first, in a transaction of its own.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

import aiosqlite

from core.store.errors import MigrationError
from core.store.migration_steps import STEPS, LegacyStep, Step, renumber

Upgrade = Callable[[aiosqlite.Connection], Awaitable[None]]

_MODULE_NAME = re.compile(r"^m(\d{4})_(\w+)$")

# This backend's numbering before the shared list: each old step, and the
# shared version a database that had applied it has reached (update queue
# and search scope, PostgreSQL's, came between extraction pauses and user zones).
OLD_NUMBERING: tuple[LegacyStep, ...] = tuple(
    LegacyStep(name, reaches)
    for name, reaches in (
        ("initial", 1),
        ("search", 2),
        ("commitments", 3),
        ("reminders", 4),
        ("heartbeat", 5),
        ("agent_ranges", 6),
        ("claim_leases", 7),
        ("extraction_jobs", 8),
        ("extraction_pauses", 9),
        ("user_zones", 12),
        ("app_state", 13),
        ("pairing", 14),
        ("parked_updates", 15),
        ("pairing_notices_and_blocks", 16),
        ("reply_send_state", 17),
    )
)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str | None = None
    upgrade: Upgrade | None = None

    async def apply(self, db: aiosqlite.Connection) -> None:
        if self.sql is not None:
            for statement in split_sql(self.sql):
                await db.execute(statement)
        if self.upgrade is not None:
            await self.upgrade(db)


def split_sql(script: str) -> list[str]:
    """Split a script into single statements.

    `executescript` cannot be used: in Python 3.11 it commits any open
    transaction first, which would break one-transaction-per-migration.
    `sqlite3.complete_statement` knows about string literals, comments and
    trigger bodies, so a `;` only ends a statement where SQLite says it does.
    """
    statements: list[str] = []
    start = 0
    for match in re.finditer(";", script):
        candidate = script[start : match.end()]
        if sqlite3.complete_statement(candidate):
            if _has_code(candidate):
                statements.append(candidate.strip())
            start = match.end()
    rest = script[start:]
    if _has_code(rest):
        statements.append(rest.strip())
    return statements


def _has_code(sql: str) -> bool:
    without_comments = re.sub(r"--[^\n]*|/\*.*?\*/", "", sql, flags=re.DOTALL)
    return without_comments.strip(" \t\r\n;") != ""


def load_migrations() -> list[Migration]:
    """The migrations in this package, in version order."""
    found: list[Migration] = []
    for info in pkgutil.iter_modules(__path__):
        match = _MODULE_NAME.match(info.name)
        if match is None:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(
            Migration(
                version=int(match.group(1)),
                name=match.group(2),
                sql=getattr(module, "SQL", None),
                upgrade=getattr(module, "upgrade", None),
            )
        )
    found.sort(key=lambda m: m.version)
    if [(m.version, m.name) for m in found] != [(s.version, s.name) for s in STEPS]:
        raise MigrationError(
            "the SQLite migrations must be the shared steps (core/store/migration_steps.py); "
            f"found {[f'{m.version:04d}_{m.name}' for m in found]}"
        )
    return found


def _check_sequence(migrations: Sequence[Migration]) -> None:
    # A gap or duplicate means a file was misnamed; applying around it would
    # record a version whose schema was never built.
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migrations must be numbered 1, 2, 3, … without gaps; "
                f"expected {expected:04d}, found {migration.version:04d} ({migration.name})"
            )


async def current_version(db: aiosqlite.Connection) -> int:
    """The schema version in the shared numbering, also for a database still
    recorded in the old one (opened without migrating)."""
    applied = await _applied(db)
    replaced = renumber(applied, OLD_NUMBERING)
    if replaced is not None:
        return replaced[-1][1].version
    return max((version for version, _ in applied), default=0)


async def _applied(db: aiosqlite.Connection) -> list[tuple[int, str]]:
    rows = await db.execute_fetchall("SELECT version, name FROM schema_version")
    return [(int(version), str(name)) for version, name in rows]


async def existing_version(db: aiosqlite.Connection) -> int:
    """The schema version, 0 for a database never migrated; creates nothing."""
    found = await db.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    )
    return await current_version(db) if list(found) else 0


async def _rollback(db: aiosqlite.Connection) -> None:
    # The failed statement may already have ended the transaction.
    with suppress(sqlite3.OperationalError):
        await db.execute("ROLLBACK")


async def _renumber_old_versions(db: aiosqlite.Connection) -> None:
    """Rewrite `schema_version` from the old numbering to the shared one,
    keeping each step's time of application; a no-op once done."""
    if renumber(await _applied(db), OLD_NUMBERING) is None:
        return
    await db.execute("BEGIN IMMEDIATE")
    try:
        # Read under the write lock: another process may have renumbered.
        replaced = renumber(await _applied(db), OLD_NUMBERING)
        if replaced is not None:
            await _rewrite_versions(db, replaced)
        await db.execute("COMMIT")
    except BaseException:
        await _rollback(db)
        raise


async def _rewrite_versions(db: aiosqlite.Connection, replaced: list[tuple[int, Step]]) -> None:
    rows = await db.execute_fetchall("SELECT version, applied_at FROM schema_version")
    times = {int(version): int(at) for version, at in rows}
    await db.execute("DELETE FROM schema_version")
    await db.executemany(
        "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
        [(step.version, step.name, times[old]) for old, step in replaced],
    )


async def apply_migrations(db: aiosqlite.Connection, migrations: Sequence[Migration]) -> int:
    """Bring the schema up to the last migration; return the resulting version.

    `db` must be in autocommit mode (isolation_level=None).
    """
    _check_sequence(migrations)
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    await _renumber_old_versions(db)
    version = await current_version(db)
    if version > len(migrations):
        raise MigrationError(
            f"database schema version {version} is newer than this code knows "
            f"(latest migration {len(migrations)}); refusing to open it",
            version=version,
        )
    for migration in migrations[version:]:
        await db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the write lock.
            if await current_version(db) >= migration.version:
                await db.execute("COMMIT")
                continue
            await migration.apply(db)
            await db.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
            await db.execute("COMMIT")
        except Exception as exc:
            await _rollback(db)
            raise MigrationError(
                f"migration {migration.version:04d} ({migration.name}) failed and was "
                f"rolled back: {exc}",
                version=migration.version,
            ) from exc
        except BaseException:
            await _rollback(db)
            raise
        version = migration.version
    return version
