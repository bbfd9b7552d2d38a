"""Numbered schema migrations for the SQLite backend.

The steps are the ones both backends follow (core/store/migration_steps.py).
Each is a module `mNNNN_<name>.py` in this package with either a
`SQL` string (statements separated by `;`) or an `async def upgrade(db)` for
changes SQL alone cannot make (e.g. re-deriving full-text columns in Python).
Migrations live in Python modules rather than .sql files so that they ship in
a wheel without package-data configuration.

`open_schema` runs each pending migration in its own BEGIN IMMEDIATE
transaction together with its `schema_version` row, so a failure leaves the
database at the previous version. A database recorded in this backend's old
numbering (`OLD_NUMBERING`) is renumbered first, in a transaction of its own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from contextlib import suppress
from functools import partial

import aiosqlite

from core.store import migration_steps
from core.store.migration_steps import (
    LegacyStep,
    Step,
    recorded_version,
    renumber,
    run_steps,
    same_steps,
    step_modules,
)
from core.store.sqlite.driver import sqlite3

# This backend's numbering before the shared list: its first step was named
# "initial", and update queue and search scope (PostgreSQL's) came between
# extraction pauses and user zones.
OLD_NUMBERING = (LegacyStep("initial", 1), *same_steps(2, 9), *same_steps(12))

Migration = migration_steps.Migration[aiosqlite.Connection]


async def apply_step(db: aiosqlite.Connection, migration: Migration) -> None:
    """A step's statements and upgrade, in the caller's transaction."""
    for statement in split_sql(migration.sql or ""):
        await db.execute(statement)
    if migration.upgrade is not None:
        await migration.upgrade(db)


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
    return step_modules(__name__, __path__, "SQLite")


async def current_version(db: aiosqlite.Connection) -> int:
    """The schema version in the shared numbering, also for a database still
    recorded in the old one (opened without migrating); 0 for a database
    never migrated. Creates nothing."""
    found = await db.execute_fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    )
    return recorded_version(await _applied(db), OLD_NUMBERING) if list(found) else 0


async def _applied(db: aiosqlite.Connection) -> list[tuple[int, str]]:
    rows = await db.execute_fetchall("SELECT version, name FROM schema_version")
    return [(int(version), str(name)) for version, name in rows]


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


async def open_schema(
    db: aiosqlite.Connection, migrations: Sequence[Migration], *, migrate: bool
) -> None:
    """Bring the schema up to the last migration, or with `migrate=False`
    refuse one that is not the code's (migration_steps.run_steps). `db`
    must be in autocommit mode (isolation_level=None)."""

    async def prepare() -> None:
        await db.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        await _renumber_old_versions(db)

    async def apply(migration: Migration) -> None:
        await db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the write lock.
            if await current_version(db) < migration.version:
                await apply_step(db, migration)
                await db.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, int(time.time() * 1000)),
                )
            await db.execute("COMMIT")
        except BaseException:
            await _rollback(db)
            raise

    current = partial(current_version, db)
    await run_steps(migrations, migrate=migrate, current=current, prepare=prepare, apply=apply)
    if migrate and await current_version(db) >= _RANGED_INDEX:
        await _ensure_secure_delete(db)


# The step whose index (`messages_fts`, rebuilt by m0006) is the one in use.
_RANGED_INDEX = 6


async def _ensure_secure_delete(db: aiosqlite.Connection) -> None:
    """FTS5's `secure-delete`, which removes a deleted row's terms from the
    index instead of leaving them in its segments until they merge, is a
    setting stored in the index, not a schema step: it needs SQLite 3.42
    (core/store/sqlite/driver.py), and a database written with it cannot be
    read by an older SQLite. Set once, on the first writable open that can;
    the same transaction merges the segments once, so no delete made before
    it leaves terms behind."""
    found = await (
        await db.execute("SELECT v FROM messages_fts_config WHERE k = 'secure-delete'")
    ).fetchone()
    if found is not None and found[0] == 1:
        return
    await db.execute("BEGIN IMMEDIATE")
    try:
        await db.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1)")
        await db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
        await db.execute("COMMIT")
    except BaseException:
        await _rollback(db)
        raise
