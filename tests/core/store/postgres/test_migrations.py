"""The PostgreSQL backend's schema: migrations apply once, in order, even
when several workers open the database at the same moment."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from core.store.errors import MigrationError
from core.store.postgres.connection import PostgresConnection
from core.store.postgres.migrations import Migration, load_migrations


async def test_opening_applies_every_migration_once(postgres_url: str) -> None:
    workers = [PostgresConnection(postgres_url, max_size=2) for _ in range(3)]
    await asyncio.gather(*(w.open() for w in workers))
    try:
        versions = {await w.schema_version() for w in workers}
        assert versions == {len(load_migrations())}
    finally:
        for w in workers:
            await w.close()
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, len(load_migrations()) + 1))


async def test_a_failing_migration_is_rolled_back_and_named(postgres_url: str) -> None:
    good = load_migrations()
    bad = Migration(len(good) + 1, "broken", "CREATE TABLE half_done (x int); SELECT 1/0;")
    connection = PostgresConnection(postgres_url, migrations=[*good, bad])
    with pytest.raises(MigrationError, match=f"{bad.version:04d} \\(broken\\)"):
        await connection.open()
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('half_done')").fetchone() == (None,)
        version = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    assert version == (len(good),)


async def test_a_database_newer_than_the_code_is_refused(postgres_url: str) -> None:
    first = PostgresConnection(postgres_url)
    await first.open()
    await first.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version, name) VALUES (999, 'future')")
    try:
        with pytest.raises(MigrationError, match="newer than this code"):
            await PostgresConnection(postgres_url).open()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("DELETE FROM schema_version WHERE version = 999")
