"""A PostgreSQL database recorded in the old numbering (13 steps, the third
"followups" holding what SQLite built in five) is renumbered to the shared
steps once, under the migration lock, keeps its rows and continues with the
steps it lacks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from core.store.errors import DatabaseOutdated
from core.store.migration_steps import STEPS
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.migrations import OLD_NUMBERING
from tests.support.old_schema import OLD_POSTGRES_LATEST, build_old_postgres, postgres_schema
from tests.support.postgres import fresh_database

KEY = "agent:a:telegram:private:42"
SHARED = [(s.version, s.name) for s in STEPS]


@pytest.fixture(scope="module")
def fresh_schema(postgres_server: str) -> list[list[tuple[object, ...]]]:
    async def build(url: str) -> None:
        connection = PostgresConnection(url)
        await connection.open()
        await connection.close()

    with fresh_database(postgres_server, "kept_renumber_fresh") as url:
        asyncio.run(build(url))
        return postgres_schema(url)


@pytest.fixture
def old_url(postgres_server: str) -> Iterator[str]:
    with fresh_database(postgres_server, "kept_renumber_old") as url:
        yield url


def _add_rows(url: str, upto: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO sessions(key, agent_id, platform, chat_id, chat_kind, created_at,"
            " updated_at) VALUES (%s, 'a', 'telegram', '42', 'private', now(), now())",
            (KEY,),
        )
        conn.execute(
            "INSERT INTO messages(session_id, platform, chat_id, role, kind, text, ts)"
            " SELECT id, 'telegram', '42', 'user', 'text', 'hello there', now() FROM sessions"
        )
        if upto >= 3:
            conn.execute(
                "INSERT INTO reminders(id, agent_id, session_key, platform, chat_id, text,"
                " kind, timezone, next_fire_at, status, created_at, updated_at)"
                " VALUES ('r1', 'a', %s, 'telegram', '42', 'stretch', 'at', 'UTC', now(),"
                " 'active', now(), now())",
                (KEY,),
            )


def _versions(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version, name, applied_at FROM schema_version ORDER BY version"
        ).fetchall()


@pytest.mark.parametrize("upto", [2, 3, 4, OLD_POSTGRES_LATEST])
async def test_an_old_database_is_renumbered_and_upgraded(
    old_url: str, fresh_schema: list[list[tuple[object, ...]]], upto: int
) -> None:
    build_old_postgres(old_url, upto)
    _add_rows(old_url, upto)
    old_times = {version: at for version, _, at in _versions(old_url)}

    workers = [PostgresConnection(old_url, max_size=2) for _ in range(3)]
    await asyncio.gather(*(w.open() for w in workers))  # together: renumbered once
    try:
        assert {await w.schema_version() for w in workers} == {len(STEPS)}
        rows = await workers[0].fetchall("SELECT text FROM messages")
        assert [r[0] for r in rows] == ["hello there"]
        if upto >= 3:
            reminders = await workers[0].fetchall("SELECT id FROM reminders")
            assert [r[0] for r in reminders] == ["r1"]
    finally:
        for w in workers:
            await w.close()

    versions = _versions(old_url)
    assert [(v, name) for v, name, _ in versions] == SHARED
    applied_at = {v: at for v, _, at in versions}
    for old_version, old in enumerate(OLD_NUMBERING[:upto], start=1):
        assert applied_at[old.reaches] == old_times[old_version]
    assert postgres_schema(old_url) == fresh_schema


async def test_an_old_database_opened_without_migrating_reports_the_shared_version(
    old_url: str,
) -> None:
    build_old_postgres(old_url, 4)  # old 4 (extraction jobs) is shared step 8
    with pytest.raises(DatabaseOutdated, match=f"version 8 .* needs {len(STEPS)}"):
        await PostgresConnection(old_url, migrate=False).open()
    assert _versions(old_url)[2][:2] == (3, "followups")  # not rewritten
