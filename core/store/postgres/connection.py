"""The PostgreSQL connection pool every PostgreSQL store shares.

psycopg 3's async pool, in autocommit mode: every unit of work opens its own
transaction (`transaction()`), so a statement never runs in a transaction
someone else left open. Server-side prepared statements are off
(`prepare_threshold=None`): with them, PostgreSQL may switch a reused search
statement to a generic plan that walks the whole primary key, and PgBouncer in
transaction mode cannot keep them anyway. `plan_cache_mode` is set to
`force_custom_plan` as well, for statements a driver prepares on its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from psycopg import AsyncConnection, OperationalError
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from core.errors import KeptError
from core.store.dialect import POSTGRES, PostgresDialect
from core.store.postgres.migrations import (
    Migration,
    current_version,
    load_migrations,
    open_schema,
)
from core.store.sql.database import Params, Row, Work

# Enough for a worker's concurrent turns, heartbeat and reminders; a busy
# pool makes callers wait (up to POOL_TIMEOUT) rather than open more.
POOL_MAX = 10
POOL_TIMEOUT = 30.0

# How long opening waits for the server before saying why it cannot connect.
CONNECT_TIMEOUT = 10

Connection = AsyncConnection[TupleRow]
T = TypeVar("T")


class DatabaseUnreachable(KeptError, ConnectionError):
    """The server named by storage.url refused or never answered, in one line."""


async def _configure(conn: Connection) -> None:
    await conn.execute("SET plan_cache_mode = force_custom_plan")
    await conn.execute("SET TIME ZONE 'UTC'")


# A listener asks the server whether it is still there after this much
# silence (seconds, real time): a connection lost without a word would
# otherwise wait forever.
LISTEN_CHECK = 60.0


async def notifications(
    conn: AsyncConnection[tuple[object, ...]], *, check_every: float = LISTEN_CHECK
) -> AsyncIterator[str]:
    """The payloads of the notifications `conn` (which LISTENs) receives,
    until it is closed; raises psycopg.Error when the server is gone."""
    while not conn.closed:
        async for note in conn.notifies(timeout=check_every):
            yield note.payload
        if not conn.closed:
            await conn.execute("SELECT 1")


class _Statements:
    """The Transaction of a body on one pooled connection inside its
    transaction; `?` placeholders become psycopg's through the dialect."""

    __slots__ = ("_conn",)
    dialect: PostgresDialect = POSTGRES

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        cursor = await self._conn.execute(POSTGRES.sql(sql), params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        async with self._conn.cursor() as cursor:
            await cursor.executemany(POSTGRES.sql(sql), rows)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        cursor = await self._conn.execute(POSTGRES.sql(sql), params)
        return await cursor.fetchall()

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        cursor = await self._conn.execute(POSTGRES.sql(sql), params)
        return await cursor.fetchone()

    async def serialize(self, namespace: int, key: str) -> None:
        await self._conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (namespace, key))


class PostgresConnection:
    """The pool and the transaction helpers; opening it applies pending
    migrations (under an advisory lock, so workers starting together apply
    each migration once); `migrate=False`: refuses a database whose schema
    is not the code's, changing nothing."""

    dialect: PostgresDialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        migrations: Sequence[Migration] | None = None,
        max_size: int = POOL_MAX,
        migrate: bool = True,
    ) -> None:
        self.url = url
        self._migrations = list(migrations) if migrations is not None else load_migrations()
        self._migrate = migrate
        self._max_size = max_size
        self._pool: AsyncConnectionPool[Connection] | None = None

    async def open(self) -> None:
        if self._pool is not None:
            return
        # One direct connection first: a wrong host, database or password
        # fails here at once with the server's reason, where the pool would
        # retry for POOL_TIMEOUT and then report only a timeout.
        try:
            first = await AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
        except OperationalError as exc:
            reason = " ".join(str(exc).split())
            raise DatabaseUnreachable(f"cannot connect to PostgreSQL: {reason}") from exc
        await first.close()
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self._max_size,
            timeout=POOL_TIMEOUT,
            kwargs={"autocommit": True, "prepare_threshold": None},
            configure=_configure,
            open=False,
        )
        await pool.open(wait=True, timeout=POOL_TIMEOUT)
        try:
            async with pool.connection() as conn:
                await open_schema(conn, self._migrations, migrate=self._migrate)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require(self) -> AsyncConnectionPool[Connection]:
        if self._pool is None:
            raise RuntimeError("store is not open; call open() first")
        return self._pool

    @asynccontextmanager
    async def transaction(self, *, durable: bool = True) -> AsyncIterator[Connection]:
        """A connection inside one transaction, committed when the block ends
        (rolled back on an exception).

        `durable=False` commits without waiting for the WAL flush
        (`synchronous_commit = off`): for transcript writes, where a power
        loss may lose the last moments but never corrupts, as SQLite's WAL
        with synchronous=NORMAL. Claims and status changes keep the default.
        """
        async with self._require().connection() as conn, conn.transaction():
            if not durable:
                await conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A connection in autocommit mode, for single statements and reads
        that need no snapshot."""
        async with self._require().connection() as conn:
            yield conn

    async def write(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[TupleRow]:
        """One statement as its own transaction, committed durably: one trip
        to the server where `transaction()` takes three (BEGIN, the
        statement, COMMIT). Returns the rows of its RETURNING clause, if any."""
        async with self.connection() as conn:
            cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
            return await cursor.fetchall() if cursor.description else []

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        async with self.connection() as conn:
            cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
            return await cursor.fetchall()

    async def transact(self, work: Work[T], *, durable: bool = True, bulk: bool = False) -> T:
        """The Database port (core/store/sql/database.py): `work` inside
        `transaction(durable=…)`; `bulk` changes nothing here."""
        async with self.transaction(durable=durable) as conn:
            return await work(_Statements(conn))

    async def snapshot(self, work: Work[T]) -> T:
        async with self._require().connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return await work(_Statements(conn))

    async def reads(self, work: Work[T]) -> T:
        """`work`'s statements on one pooled connection outside any
        transaction: reads that need no shared snapshot, without the two
        trips BEGIN and COMMIT would add."""
        async with self.connection() as conn:
            return await work(_Statements(conn))

    async def query(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.fetchall(POSTGRES.sql(sql), params)

    async def execute(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.write(POSTGRES.sql(sql), params)

    async def schema_version(self) -> int:
        async with self.connection() as conn:
            return await current_version(conn)
