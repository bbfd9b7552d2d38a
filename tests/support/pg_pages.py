"""What PostgreSQL's heap pages hold, read from the relation files as
pageinspect's `heap_page_items` would (the test server ships no contrib
modules): the bytes of every tuple an item pointer still points at, live
or dead. A tuple VACUUM pruned has no storage any more (LP_UNUSED, or
LP_DEAD without length) and is not read."""

from __future__ import annotations

import struct
from pathlib import Path

from core.store.postgres import PostgresConnection

PAGE = 8192
HEADER = 24
LP_NORMAL = 1


def tuples(relation_file: Path) -> list[bytes]:
    data = relation_file.read_bytes() if relation_file.exists() else b""
    found = []
    for start in range(0, len(data) - PAGE + 1, PAGE):
        page = data[start : start + PAGE]
        pd_lower = struct.unpack_from("<H", page, 12)[0]
        for at in range(HEADER, pd_lower, 4):
            (item,) = struct.unpack_from("<I", page, at)
            offset, flags, length = item & 0x7FFF, (item >> 15) & 0x3, item >> 17
            if flags == LP_NORMAL and length:
                found.append(page[offset : offset + length])
    return found


async def tables_holding(db: PostgresConnection, needle: bytes, tables: list[str]) -> list[str]:
    """The tables (with their TOAST tables) one of whose tuples, live or
    dead, holds `needle`, after a checkpoint wrote every page to its file."""
    await db.write("CHECKPOINT")
    (directory,) = (await db.fetchall("SHOW data_directory"))[0]
    holding = []
    for table in tables:
        rows = await db.fetchall(
            "SELECT pg_relation_filepath(c.oid), pg_relation_filepath(c.reltoastrelid) "
            "FROM pg_class c WHERE c.oid = %s::regclass",
            (table,),
        )
        for path in rows[0]:
            if path is not None and any(needle in t for t in tuples(Path(directory) / path)):
                holding.append(table)
                break
    return holding
