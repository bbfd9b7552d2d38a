"""Every table of a fresh database, on each backend, is in the one list of
what each table holds of a user's (core/privacy/holdings.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.privacy.holdings import HOLDINGS, Reach, compare, holdings
from core.store.base import Store
from core.store.postgres import PostgresStore
from tests.support.followups import store_rows
from tests.support.store_helpers import open_any_store


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    async with open_any_store(storage_url) as opened:
        yield opened


async def schema_tables(store: Store) -> tuple[str, list[str]]:
    """The backend's name and its tables, as a user's data could sit in them:
    an FTS5 table's shadow tables count as the virtual table."""
    if isinstance(store, PostgresStore):
        rows = await store_rows(
            store,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
        )
        return "postgres", [r[0] for r in rows]
    rows = await store_rows(
        store,
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    virtual = [n for n, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")]
    return "sqlite", [n for n, _ in rows if not any(n.startswith(f"{v}_") for v in virtual)]


async def test_every_table_of_the_schema_is_listed_with_what_it_holds(store: Store) -> None:
    backend, tables = await schema_tables(store)
    assert len(tables) >= 15  # the schema was read: sessions, messages, … are there
    assert "messages" in tables and "sessions" in tables
    mismatch = compare(tables, backend)
    assert not mismatch, str(mismatch)


async def test_a_new_table_is_named_until_it_is_listed(store: Store) -> None:
    backend, tables = await schema_tables(store)
    mismatch = compare([*tables, "user_notes"], backend)
    assert mismatch.unlisted == ("user_notes",) and mismatch.absent == ()
    assert "user_notes" in str(mismatch) and "core/privacy/holdings.py" in str(mismatch)
    dropped = compare([t for t in tables if t != "reminders"], backend)
    assert dropped.absent == ("reminders",) and "reminders" in str(dropped)


def test_the_list_names_each_table_once_and_keeps_only_decisions_and_counters() -> None:
    names = [h.table for h in HOLDINGS]
    assert len(names) == len(set(names))
    kept = {h.table for h in HOLDINGS if h.reach is not Reach.NONE and not h.erased}
    # The operator's pairing decisions, and the limits' counters (a time and
    # a number a subject: erasing them would reset a rate or a cap).
    assert kept == {"paired_users", "pairing_blocks", "rate_windows", "token_budgets"}
    assert {h.table for h in holdings("sqlite")} ^ {h.table for h in holdings("postgres")} == {
        "messages_fts",
        "message_search",
        "agents",
        "update_queue",
    }
