"""The port a backend's runner implements for SQL written once: a database
that runs a transaction body, and the transaction that body talks to.

A body is an `async def work(tx) -> T` that awaits only its transaction's
statements. PostgreSQL runs it as ordinary asyncio code on a pooled
connection; SQLite drives it to its end on its worker thread in one trip
(nothing in it may wait on anything else: see sqlite/connection.py), so the
same body costs SQLite one hop to its thread however many statements it
runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from core.store.dialect import Dialect

T = TypeVar("T")
Row = tuple[Any, ...]
Params = Sequence[Any]


class Transaction(Protocol):
    """The statements of one transaction; SQL with `?` placeholders."""

    @property
    def dialect(self) -> Dialect: ...

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None: ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None: ...

    async def serialize(self, namespace: int, key: str) -> None:
        """Hold, until this transaction ends, the one lock writers deciding
        about `key` (within `namespace`) take: two such transactions never
        decide at once. SQLite's write transactions already exclude each
        other, so it does nothing there."""
        ...


Work = Callable[[Transaction], Awaitable[T]]


class Database(Protocol):
    """A backend's connection as SQL written once uses it."""

    @property
    def dialect(self) -> Dialect: ...

    async def transact(self, work: Work[T], *, durable: bool = True, bulk: bool = False) -> T:
        """Run `work` in one write transaction: committed when it returns,
        rolled back when it raises. `durable=False` may return before the
        commit is flushed to disk (transcript rows; a power loss may lose the
        last moments, never corrupt). `bulk`: a large transaction (an
        import, a reindex) that a backend may keep off the live connection."""
        ...

    async def snapshot(self, work: Work[T]) -> T:
        """Run `work` in one read transaction: its statements see one snapshot."""
        ...

    async def query(self, sql: str, params: Params = ()) -> list[Row]:
        """One read outside any transaction (no snapshot needed)."""
        ...

    async def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """One statement as its own durable transaction (one trip); the rows
        of its RETURNING clause, if it has one."""
        ...
