"""What PostgreSQL does so that erased text is in no tuple: deleted rows
stay in their pages as dead tuples until a VACUUM prunes them, so the
tables an erasure touched are vacuumed once it has committed (outside any
transaction, as VACUUM must run; it takes no lock that stops reads or
writes)."""

from __future__ import annotations

from core.store.postgres.connection import PostgresConnection
from core.store.sql.database import Transaction


class PostgresErasurePurge:
    def __init__(self, connection: PostgresConnection) -> None:
        self._connection = connection

    async def in_transaction(self, tx: Transaction) -> None:
        return None

    async def after(self, tables: frozenset[str]) -> None:
        await self._connection.write(f"VACUUM {', '.join(sorted(tables))}")
