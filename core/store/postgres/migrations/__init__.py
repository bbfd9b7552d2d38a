"""Numbered schema migrations for the PostgreSQL backend.

Each migration is a module `mNNNN_<name>.py` in this package with a `SQL`
string (PostgreSQL runs a multi-statement string in one `execute` when it
has no parameters). Numbering is the backend's own: it need not follow the
SQLite backend's.

`apply_migrations` runs each pending migration in its own transaction
together with its `schema_version` row, after taking a transaction-level
advisory lock, so workers starting at the same moment apply it once and a
failure leaves the database at the previous version.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.store.errors import MigrationError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

_MODULE_NAME = re.compile(r"^m(\d{4})_(\w+)$")

# An arbitrary constant naming "kept's schema" among advisory locks.
MIGRATION_LOCK = 0x6B657074  # "kept"


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
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migrations must be numbered 1, 2, 3, … without gaps; "
                f"expected {expected:04d}, found {migration.version:04d} ({migration.name})"
            )
    return found


async def current_version(conn: AsyncConnection[Any]) -> int:
    cursor = await conn.execute(
        "SELECT coalesce(max(version), 0) FROM schema_version"
        if await _has_version_table(conn)
        else "SELECT 0"
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


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
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
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
