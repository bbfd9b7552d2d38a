"""Numbered schema migrations for the PostgreSQL backend.

The steps are the ones both backends follow (core/store/migration_steps.py).
Each is a module `mNNNN_<name>.py` in this package with a `SQL` string
(PostgreSQL runs a multi-statement string in one `execute` when it has no
parameters); empty for a step only SQLite needs.

`open_schema` runs each pending migration in its own transaction
together with its `schema_version` row, after taking a transaction-level
advisory lock, so workers starting at the same moment apply it once and a
failure leaves the database at the previous version. A database recorded in
this backend's old numbering (`OLD_NUMBERING`) is renumbered first, under the
same lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from core.store import migration_steps
from core.store.migration_steps import (
    LegacyStep,
    recorded_version,
    renumber,
    run_steps,
    same_steps,
    step_modules,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

# An arbitrary constant naming "kept's schema" among advisory locks.
MIGRATION_LOCK = 0x6B657074  # "kept"

# This backend's numbering before the shared list: its third step
# ("followups") created in one go what SQLite built in steps 3 to 7.
OLD_NUMBERING = (*same_steps(1, 2), LegacyStep("followups", 7), *same_steps(8))

Migration = migration_steps.Migration["AsyncConnection[Any]"]


def delete_with_session(function: str, *tables: str) -> str:
    """The trigger function `function`, deleting a deleted session's rows of
    `tables` (CREATE OR REPLACE: a later step gives it a longer list). Steps
    3 to 5 and 8 build with it: a change is a new step, as for their SQL."""
    deletes = "".join(f"    DELETE FROM {table} WHERE session_key = OLD.key;\n" for table in tables)
    return (
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n{deletes}    RETURN NULL;\nEND $$;\n"
    )


def load_migrations() -> list[Migration]:
    """The migrations in this package, in version order."""
    return step_modules(__name__, __path__, "PostgreSQL")


async def current_version(conn: AsyncConnection[Any]) -> int:
    """The schema version in the shared numbering, also for a database still
    recorded in the old one (opened without migrating)."""
    if not await _has_version_table(conn):
        return 0
    return recorded_version(await _applied(conn), OLD_NUMBERING)


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


async def open_schema(
    conn: AsyncConnection[Any], migrations: Sequence[Migration], *, migrate: bool
) -> None:
    """Bring the schema up to the last migration, or with `migrate=False`
    refuse one that is not the code's (migration_steps.run_steps). `conn`
    must be in autocommit mode."""

    async def prepare() -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            await _renumber_old_versions(conn)

    async def apply(migration: Migration) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            # Another worker may have applied it while we waited for the lock.
            if await current_version(conn) >= migration.version:
                return
            if migration.sql and migration.sql.strip():
                await conn.execute(migration.sql.encode())
            await conn.execute(
                "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )

    current = partial(current_version, conn)
    await run_steps(migrations, migrate=migrate, current=current, prepare=prepare, apply=apply)
