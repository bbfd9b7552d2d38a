"""A SQLite database recorded in the old numbering (15 steps) is renumbered
to the shared steps once, keeps its rows, and continues with the steps it
lacks; opened without migrating it reports the shared version."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store.errors import DatabaseOutdated
from core.store.migration_steps import STEPS
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.migrations import OLD_NUMBERING
from tests.support.old_schema import OLD_SQLITE_LATEST, build_old_sqlite, sqlite_schema

KEY = "agent:a:telegram:private:42"
T0 = 1_700_000_000_000


def _add_rows(path: Path, upto: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at,"
            " updated_at) VALUES (?, 'a', 'telegram', '42', 'private', ?, ?)",
            (KEY, T0, T0),
        )
        conn.execute(
            "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts)"
            " VALUES (1, 'telegram', '42', 'user', 'text', 'hello there', ?)",
            (T0,),
        )
        if upto >= 4:
            conn.execute(
                "INSERT INTO reminders(id, agent_id, session_key, platform, chat_id, text,"
                " kind, timezone, next_fire_at, status, created_at, updated_at)"
                " VALUES ('r1', 'a', ?, 'telegram', '42', 'stretch', 'at', 'UTC', ?, 'active',"
                " ?, ?)",
                (KEY, T0 + 60_000, T0, T0),
            )


def _versions(path: Path) -> list[tuple[int, str, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT version, name, applied_at FROM schema_version ORDER BY version"
        ).fetchall()


@pytest.mark.parametrize("upto", [1, 9, 10, OLD_SQLITE_LATEST])
async def test_an_old_database_is_renumbered_and_upgraded(tmp_path: Path, upto: int) -> None:
    old = tmp_path / "old.sqlite"
    await build_old_sqlite(old, upto)
    _add_rows(old, upto)
    old_times = {version: at for version, _, at in _versions(old)}

    async with SqliteStore(old) as store:
        assert await store.schema_version() == len(STEPS)
        assert await store.get_session(KEY) is not None
        rows = await store.connection.fetchall("SELECT text FROM messages")
        assert [r[0] for r in rows] == ["hello there"]
        if upto >= 4:
            reminders = await store.connection.fetchall("SELECT id FROM reminders")
            assert [r[0] for r in reminders] == ["r1"]

    versions = _versions(old)
    assert [(v, name) for v, name, _ in versions] == [(s.version, s.name) for s in STEPS]
    # A renumbered step keeps the time the old step was applied.
    reached = {old_v: s.reaches for old_v, s in enumerate(OLD_NUMBERING[:upto], start=1)}
    applied_at = {v: at for v, _, at in versions}
    for old_version, new_version in reached.items():
        assert applied_at[new_version] == old_times[old_version]

    fresh = tmp_path / "fresh.sqlite"
    async with SqliteStore(fresh):
        pass
    assert sqlite_schema(old) == sqlite_schema(fresh)

    async with SqliteStore(old) as again:  # once only
        assert await again.schema_version() == len(STEPS)
    assert _versions(old) == versions


async def test_an_old_database_opened_without_migrating_reports_the_shared_version(
    tmp_path: Path,
) -> None:
    complete = tmp_path / "complete.sqlite"
    await build_old_sqlite(complete)
    async with SqliteStore(complete, migrate=False) as store:
        assert await store.schema_version() == len(STEPS)
    assert _versions(complete)[0][:2] == (1, "initial")  # not rewritten

    behind = tmp_path / "behind.sqlite"
    await build_old_sqlite(behind, 10)  # old 10 (user zones) is shared step 12
    with pytest.raises(DatabaseOutdated, match=f"version 12 .* needs {len(STEPS)}"):
        await SqliteStore(behind, migrate=False).open()
