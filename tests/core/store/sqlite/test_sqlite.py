"""SQLite-only checks: schema, migrations, PRAGMAs, URLs, transactions.

Backend-neutral behaviour is in test_store_contract.py.
"""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.store import ImportRow, MigrationError, UnknownSession
from core.store.base import INDEXED_KINDS, INDEXED_ROLES
from core.store.dialect import SQLITE
from core.store.sql.transcript import BY_PLATFORM_ID, DELETE_BY_PLATFORM_ID, transcript_sql
from core.store.sqlite import SqliteStore
from core.store.sqlite import index as sqlite_index
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.migrations import (
    Migration,
    load_migrations,
    m0021_limits,
    split_sql,
)
from tests.core.store.test_contract import KEY, OTHER, add, add_session, ids, search
from tests.support.store_helpers import count_index_rows, index_consistency, open_store

LATEST = len(load_migrations())


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "kept.sqlite") as opened:
        await add_session(opened, KEY)
        yield opened


def raw(store: SqliteStore) -> sqlite3.Connection:
    """A second connection, as another process would have."""
    conn = sqlite3.connect(store.connection.path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


# --- transactions -------------------------------------------------------------


async def test_message_and_index_row_commit_together(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def explode(*_args: object) -> None:
        raise RuntimeError("index write failed")

    monkeypatch.setattr(sqlite_store._fts, "insert_row", explode)
    with pytest.raises(RuntimeError, match="index write failed"):
        await add(sqlite_store, "lost message")
    # Same, but failing inside SQLite itself rather than in Python.
    monkeypatch.undo()
    monkeypatch.setattr(sqlite_index, "INSERT", "INSERT INTO no_such_fts VALUES (?, ?, ?, ?)")
    with pytest.raises(sqlite3.OperationalError):
        await add(sqlite_store, "lost message")
    monkeypatch.undo()

    assert (await sqlite_store.connection.fetchall("SELECT count(*) FROM messages"))[0][0] == 0
    assert await count_index_rows(sqlite_store) == 0
    # The connection is not left inside a transaction.
    kept = await add(sqlite_store, "kept message")
    assert ids(await search(sqlite_store, "message", key=KEY)) == [kept.id]


async def test_a_failed_import_batch_stores_nothing_of_that_batch(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_index, "_IMPORT", "INSERT INTO nope VALUES (?)")
    row = ImportRow("agent:a:telegram:private:7", "user", "hello", datetime(2025, 1, 1, tzinfo=UTC))
    with pytest.raises(sqlite3.OperationalError):
        await sqlite_store.import_messages([row])
    assert await sqlite_store.get_session(row.session_key) is None
    assert await sqlite_store.sessions_behind() == []


async def test_deleting_sessions_in_sql_removes_their_index_rows(
    sqlite_store: SqliteStore,
) -> None:
    await add(sqlite_store, "bye")
    assert await count_index_rows(sqlite_store) > 0  # indexed, until the session goes
    with raw(sqlite_store) as conn:
        conn.execute("DELETE FROM sessions")
    assert await count_index_rows(sqlite_store) == 0


async def test_hiding_and_showing_a_message_keeps_the_index_in_step(
    sqlite_store: SqliteStore,
) -> None:
    record = await add(sqlite_store, "now you see me")
    tool = await add(sqlite_store, "{}", "tool", kind="tool_result", in_reply_to=record.id)
    conn = raw(sqlite_store)
    conn.execute("UPDATE messages SET active = 0 WHERE id = ?", (record.id,))
    assert await count_index_rows(sqlite_store) == 0
    assert await index_consistency(sqlite_store) == (0, 0)
    conn.execute("UPDATE messages SET active = 0 WHERE id = ?", (tool.id,))
    conn.execute("UPDATE messages SET active = 1 WHERE id = ?", (tool.id,))
    assert await sqlite_store.sessions_behind() == []  # tool rows are never indexed
    conn.execute("UPDATE messages SET active = 1 WHERE id = ?", (record.id,))
    conn.close()
    # SQL cannot build the row; the session waits for the reconciler instead.
    assert await sqlite_store.sessions_behind() == [KEY]
    assert await index_consistency(sqlite_store) == (1, 0)
    assert await sqlite_store.reindex_session(KEY) == 1
    assert ids(await search(sqlite_store, "see")) == [record.id]
    assert await index_consistency(sqlite_store) == (0, 0)


async def test_a_cached_session_id_given_to_another_chat_is_not_reused(
    sqlite_store: SqliteStore,
) -> None:
    await add_session(sqlite_store, OTHER)
    await add(sqlite_store, "cached", key=OTHER)  # OTHER's id is now cached
    # Another process deletes OTHER (the newest session) and creates a new
    # chat, which SQLite gives the freed id.
    with raw(sqlite_store) as conn:
        (old_id,) = conn.execute("SELECT id FROM sessions WHERE key = ?", (OTHER,)).fetchone()
        conn.execute("DELETE FROM sessions WHERE key = ?", (OTHER,))
        conn.execute(
            "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at, "
            "updated_at) VALUES ('agent:a:telegram:private:300', 'a', 'telegram', '300', "
            "'private', 0, 0)"
        )
        (new_id,) = conn.execute("SELECT max(id) FROM sessions").fetchone()
    assert new_id == old_id
    with pytest.raises(UnknownSession):
        await add(sqlite_store, "must not land in chat 300", key=OTHER)
    assert await search(sqlite_store, "land") == []


async def test_history_uses_the_turn_index(sqlite_store: SqliteStore) -> None:
    rows = await sqlite_store.connection.fetchall(
        "EXPLAIN QUERY PLAN " + transcript_sql(SQLITE).history, (KEY, 10, 5)
    )
    plan = " | ".join(r[3] for r in rows)
    assert "INDEX messages_session_turn" in plan, plan
    assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan


async def test_sessions_behind_reads_only_its_partial_index(sqlite_store: SqliteStore) -> None:
    rows = await sqlite_store.connection.fetchall(
        "EXPLAIN QUERY PLAN " + transcript_sql(SQLITE).sessions_behind, (5,)
    )
    plan = " | ".join(r[3] for r in rows)
    assert "sessions_index_behind" in plan and "TEMP B-TREE" not in plan, plan


@pytest.mark.parametrize("sql", [*BY_PLATFORM_ID, *DELETE_BY_PLATFORM_ID])
async def test_platform_id_lookups_use_an_index(sqlite_store: SqliteStore, sql: str) -> None:
    rows = await sqlite_store.connection.fetchall(
        "EXPLAIN QUERY PLAN " + sql, ("telegram", "100", "5")
    )
    plan = " | ".join(r[3] for r in rows)
    assert re.search(r"INDEX messages_(platform_dedupe|sent_platform_id)", plan), plan
    assert "SCAN" not in plan, plan


def test_migration_sql_names_the_indexed_roles_and_kinds() -> None:
    # 0002 spells them out so it never changes meaning; they must agree.
    assert set(ast.literal_eval(m0021_limits.ROLES_SQL)) == INDEXED_ROLES
    assert set(ast.literal_eval(m0021_limits.KINDS_SQL)) == INDEXED_KINDS


async def test_pragmas_in_force(sqlite_store: SqliteStore) -> None:
    async def pragma(name: str) -> object:
        return (await sqlite_store.connection.fetchall(f"PRAGMA {name}"))[0][0]

    assert await pragma("journal_mode") == "wal"
    assert await pragma("foreign_keys") == 1
    assert await pragma("busy_timeout") == 5000
    assert await pragma("synchronous") == 1  # NORMAL
    assert await pragma("cache_size") == -65536
    assert await pragma("wal_autocheckpoint") == 10000


async def test_migrations_apply_once(tmp_path: Path) -> None:
    path = tmp_path / "new" / "kept.sqlite"
    path.parent.mkdir()
    latest = LATEST
    async with SqliteStore(path) as store:
        assert await store.schema_version() == latest
        await add_session(store, KEY)
    async with SqliteStore(path) as store:
        assert await store.schema_version() == latest
        rows = await store.connection.fetchall(
            "SELECT version, name FROM schema_version ORDER BY version"
        )
        assert [r[0] for r in rows] == list(range(1, latest + 1))
        assert tuple(rows[0]) == (1, "transcript")
        assert await store.get_session(KEY) is not None


async def test_failing_migration_rolls_back_and_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "kept.sqlite"
    broken = Migration(
        LATEST + 1, "broken", sql="CREATE TABLE extra (x INTEGER);\nINSERT INTO nope VALUES (1);"
    )
    with pytest.raises(MigrationError, match=f"{LATEST + 1:04d}") as info:
        await SqliteStore(path, migrations=[*load_migrations(), broken]).open()
    assert info.value.version == LATEST + 1
    async with SqliteStore(path) as store:
        assert await store.schema_version() == LATEST
        tables = await store.connection.fetchall(
            "SELECT name FROM sqlite_master WHERE name = 'extra'"
        )
        assert tables == []


async def test_python_migrations_and_sequence_checks(tmp_path: Path) -> None:
    path = tmp_path / "kept.sqlite"

    async def upgrade(db: object) -> None:
        await db.execute("CREATE TABLE extra (x INTEGER)")  # type: ignore[attr-defined]

    migrations = [*load_migrations(), Migration(LATEST + 1, "extra", upgrade=upgrade)]
    async with SqliteStore(path, migrations=migrations) as store:
        assert await store.schema_version() == LATEST + 1
    with pytest.raises(MigrationError, match="newer"):
        await SqliteStore(path).open()
    with pytest.raises(MigrationError, match="expected 0002"):
        await SqliteStore(path, migrations=[migrations[0], Migration(3, "gap", sql="")]).open()


def test_split_sql_respects_literals_comments_and_triggers() -> None:
    script = """
    -- a comment; with a semicolon
    CREATE TABLE t (x TEXT DEFAULT 'a;b'); /* block; comment */
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN
        UPDATE t SET x = 'c;d'; DELETE FROM t WHERE x = ';';
    END;
    INSERT INTO t VALUES ('e') -- no trailing semicolon
    """
    statements = split_sql(script)
    assert len(statements) == 3
    assert "CREATE TRIGGER" in statements[1] and statements[1].endswith("END;")
    conn = sqlite3.connect(":memory:")
    for statement in statements:
        conn.execute(statement)
    assert conn.execute("SELECT x FROM t").fetchall() == [("c;d",)]


async def test_open_store_urls(tmp_path: Path) -> None:
    relative = open_store("sqlite:///data/sub/kept.sqlite", base_dir=tmp_path)
    assert isinstance(relative, SqliteStore)
    assert Path(relative.connection.path) == tmp_path / "data" / "sub" / "kept.sqlite"
    assert (tmp_path / "data" / "sub").is_dir()
    absolute = open_store(f"sqlite:///{tmp_path}/abs/kept.sqlite")
    assert isinstance(absolute, SqliteStore) and Path(absolute.connection.path).is_absolute()
    assert (tmp_path / "abs").is_dir()
    async with open_store("sqlite:///:memory:") as memory:
        await add_session(memory, KEY)
        assert (await add(memory, "in memory")).id == 1
    for bad in ["mysql://localhost/kept", "sqlite://kept.sqlite", "sqlite:///", "kept.sqlite"]:
        with pytest.raises(ValueError, match="sqlite:///"):
            open_store(bad, base_dir=tmp_path)
    with pytest.raises(ValueError, match=r"\?"):
        open_store("sqlite:///kept.sqlite?mode=ro", base_dir=tmp_path)
