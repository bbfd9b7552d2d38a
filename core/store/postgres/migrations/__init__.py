"""Numbered schema migrations for the PostgreSQL backend.

The steps are the ones both backends follow (core/store/migration_steps.py).
Each is a module `mNNNN_<name>.py` in this package with a `SQL` string
(PostgreSQL runs a multi-statement string in one `execute` when it has no
parameters); empty for a step only SQLite needs.

`apply_migrations` runs each pending migration in its own transaction
together with its `schema_version` row, after taking a transaction-level
advisory lock, so workers starting at the same moment apply it once and a
failure leaves the database at the previous version. A database recorded in
this backend's old numbering (`OLD_NUMBERING`) is renumbered first, under the
same lock.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.store.errors import MigrationError
from core.store.migration_steps import STEPS, LegacyStep, renumber

if TYPE_CHECKING:
    from psycopg import AsyncConnection

_MODULE_NAME = re.compile(r"^m(\d{4})_(\w+)$")

# An arbitrary constant naming "kept's schema" among advisory locks.
MIGRATION_LOCK = 0x6B657074  # "kept"

# This backend's numbering before the shared list: each old step, and the
# shared version a database that had applied it has reached. The old third
# step ("followups") created in one go what SQLite built in steps 3 to 7.
OLD_NUMBERING: tuple[LegacyStep, ...] = tuple(
    LegacyStep(name, reaches)
    for name, reaches in (
        ("transcript", 1),
        ("search", 2),
        ("followups", 7),
        ("extraction_jobs", 8),
        ("extraction_pauses", 9),
        ("update_queue", 10),
        ("search_scope", 11),
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
    sql: str


def load_migrations() -> list[Migration]:
    """The migrations in this package, in version order."""
    found: list[Migration] = []
    for info in pkgutil.iter_modules(__path__):
        match = _MODULE_NAME.match(info.name)
        if match is None:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(Migration(int(match.group(1)), match.group(2), module.SQL))
    found.sort(key=lambda m: m.version)
    if [(m.version, m.name) for m in found] != [(s.version, s.name) for s in STEPS]:
        raise MigrationError(
            "the PostgreSQL migrations must be the shared steps "
            f"(core/store/migration_steps.py); found "
            f"{[f'{m.version:04d}_{m.name}' for m in found]}"
        )
    return found


def _check_sequence(migrations: Sequence[Migration]) -> None:
    # A gap or duplicate means a step was misnamed; applying around it would
    # record a version whose schema was never built.
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migrations must be numbered 1, 2, 3, … without gaps; "
                f"expected {expected:04d}, found {migration.version:04d} ({migration.name})"
            )


async def current_version(conn: AsyncConnection[Any]) -> int:
    """The schema version in the shared numbering, also for a database still
    recorded in the old one (opened without migrating)."""
    if not await _has_version_table(conn):
        return 0
    applied = await _applied(conn)
    replaced = renumber(applied, OLD_NUMBERING)
    if replaced is not None:
        return replaced[-1][1].version
    return max((version for version, _ in applied), default=0)


async def _applied(conn: AsyncConnection[Any]) -> list[tuple[int, str]]:
    cursor = await conn.execute("SELECT version, name FROM schema_version")
    return [(int(version), str(name)) for version, name in await cursor.fetchall()]


async def _renumber_old_versions(conn: AsyncConnection[Any]) -> None:
    """Rewrite `schema_version` from the old numbering to the shared one,
    keeping each step's time of application; a no-op once done. The caller
    holds the migration lock, in a transaction."""
    replaced = renumber(await _applied(conn), OLD_NUMBERING)
    if replaced is None:
        return
    cursor = await conn.execute("SELECT version, applied_at FROM schema_version")
    times = dict(await cursor.fetchall())
    await conn.execute("DELETE FROM schema_version")
    async with conn.cursor() as rows:
        await rows.executemany(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (%s, %s, %s)",
            [(step.version, step.name, times[old]) for old, step in replaced],
        )


async def _has_version_table(conn: AsyncConnection[Any]) -> bool:
    cursor = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    row = await cursor.fetchone()
    return bool(row and row[0])


async def apply_migrations(
    conn: AsyncConnection[Any], migrations: Sequence[Migration] | None = None
) -> int:
    """Bring the schema up to the last migration; return the resulting
    version. `conn` must be in autocommit mode."""
    migrations = list(migrations) if migrations is not None else load_migrations()
    _check_sequence(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await _renumber_old_versions(conn)
    version = await current_version(conn)
    if version > len(migrations):
        raise MigrationError(
            f"database schema version {version} is newer than this code knows "
            f"(latest migration {len(migrations)}); refusing to open it",
            version=version,
        )
    for migration in migrations[version:]:
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                # Another worker may have applied it while we waited for the lock.
                if await current_version(conn) >= migration.version:
                    continue
                if migration.sql.strip():
                    await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
        except MigrationError:
            raise
        except Exception as exc:
            raise MigrationError(
                f"migration {migration.version:04d} ({migration.name}) failed and was "
                f"rolled back: {exc}",
                version=migration.version,
            ) from exc
    return await current_version(conn)
