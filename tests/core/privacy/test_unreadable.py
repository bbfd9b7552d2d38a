"""Erased means unreadable: after an erasure reports done, the erased words
are in no byte of the SQLite database file or its WAL, and in no live or
dead tuple of a PostgreSQL table. Each check is first shown to find the
word while it is stored."""

from __future__ import annotations

import random
import string
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.privacy.store import ErasedUser
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage
from core.store.postgres import PostgresStore
from core.store.sqlite import SqliteStore
from tests.support.pg_pages import tables_holding

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ANN = "111"
PRIVATE = f"agent:main:telegram:private:{ANN}"
GROUP = "agent:main:telegram:group:-500"
TABLES = ["messages", "message_search", "extraction_jobs", "commitments", "sessions"]


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


def unique_word() -> str:
    return "".join(random.choice(string.ascii_lowercase) for _ in range(14))


async def write(backend: Backend, word: str) -> None:
    for key, chat, kind in ((PRIVATE, ANN, "private"), (GROUP, "-500", "group")):
        await backend.store.ensure_session(
            key, agent_id="main", platform="telegram", chat_id=chat, chat_kind=kind,
            thread_id=None, now=NOW,
        )  # fmt: skip
        asked = await backend.store.add_message(
            NewMessage(key, "user", f"my {word} plan", NOW, sender_id=ANN)
        )
        await backend.store.add_message(
            NewMessage(key, "assistant", f"about {word}", NOW, in_reply_to=asked.id)
        )
    # Other members' words around it, so its index pages hold more than it.
    for _ in range(200):
        await backend.store.add_message(
            NewMessage(GROUP, "user", f"{unique_word()} {unique_word()}", NOW, sender_id="222")
        )


def sqlite_bytes_holding(store: SqliteStore, needle: bytes) -> list[str]:
    holding = []
    for suffix in ("", "-wal"):
        path = Path(store.connection.path + suffix)
        if path.exists() and needle in path.read_bytes():
            holding.append(path.name)
    return holding


async def holding(backend: Backend, needle: bytes) -> list[str]:
    store = backend.store
    if isinstance(store, PostgresStore):
        return await tables_holding(store.connection, needle, TABLES)
    assert isinstance(store, SqliteStore)
    return sqlite_bytes_holding(store, needle)


async def test_an_erased_word_is_in_no_byte_and_no_tuple(backend: Backend) -> None:
    word = unique_word()
    await write(backend, word)
    # The index keeps a term's first letters shared with its neighbour: the
    # tail of the word is what stands in every place that holds it.
    tail = word[4:].encode()
    assert await holding(backend, tail) != []
    counts = await backend.erasure.erase(ErasedUser("telegram", ANN, "main"))
    assert counts.messages == 4 and counts.chats == 1
    assert await holding(backend, tail) == []


async def test_a_whole_chat_erased_leaves_no_byte_either(backend: Backend) -> None:
    word = unique_word()
    await write(backend, word)
    only_private = unique_word()
    asked = await backend.store.add_message(
        NewMessage(PRIVATE, "user", f"just {only_private} here", NOW, sender_id=ANN)
    )
    await backend.store.add_message(
        NewMessage(PRIVATE, "assistant", "ok", NOW, in_reply_to=asked.id)
    )
    await write(backend, unique_word())  # more index pages after it
    tail = only_private[4:].encode()
    assert await holding(backend, tail) != []
    counts = await backend.erasure.erase_session(PRIVATE)
    assert counts.chats == 1 and counts.messages == 6  # two writes' exchanges, and this one
    assert await holding(backend, tail) == []
    assert await holding(backend, word[4:].encode()) != []  # the group's copy stays


async def test_a_word_erased_by_retention_is_in_no_byte_and_no_tuple(backend: Backend) -> None:
    from datetime import timedelta

    from core.clock import TestClock
    from core.config.model import RetentionConfig
    from core.privacy.retention import Retention

    old = NOW - timedelta(days=400)
    word, kept = unique_word(), unique_word()
    await backend.store.ensure_session(
        PRIVATE, agent_id="main", platform="telegram", chat_id=ANN, chat_kind="private",
        thread_id=None, now=old,
    )  # fmt: skip
    asked = await backend.store.add_message(
        NewMessage(PRIVATE, "user", f"my {word} plan", old, sender_id=ANN)
    )
    await backend.store.add_message(
        NewMessage(PRIVATE, "assistant", f"about {word}", old, in_reply_to=asked.id)
    )
    for _ in range(200):  # newer words around it, in the same index pages
        await backend.store.add_message(
            NewMessage(PRIVATE, "user", f"{kept} {unique_word()}", NOW, sender_id=ANN)
        )
    tail = word[4:].encode()
    assert await holding(backend, tail) != []
    policy = RetentionConfig(messages="365d", closed=None)
    done = await Retention(backend.retention, lambda: policy, TestClock(NOW), batch=1).run_once()
    assert done.erased == {"messages": 2}
    assert await holding(backend, tail) == []
    assert await holding(backend, kept[4:].encode()) != []
