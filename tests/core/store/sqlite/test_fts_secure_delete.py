"""The full-text index runs with FTS5's secure-delete: a deleted message's
terms leave the index with it, not at the next merge. A database whose
index predates the setting gets it at its next writable open, and that
open merges the segments once so no earlier delete leaves terms behind."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime
from pathlib import Path

from core.store.backends import Backend, open_backend
from core.store.base import NewMessage
from core.store.sqlite import SqliteStore

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
KEY = "agent:main:telegram:group:-500"


def word() -> str:
    return "".join(random.choice(string.ascii_lowercase) for _ in range(14))


def connection(backend: Backend):  # type: ignore[no-untyped-def]
    store = backend.store
    assert isinstance(store, SqliteStore)
    return store.connection


async def secure_delete(backend: Backend) -> object:
    rows = await connection(backend).execute(
        "SELECT v FROM messages_fts_config WHERE k = 'secure-delete'"
    )
    return rows[0][0] if rows else None


async def write(backend: Backend, text: str) -> int:
    await backend.store.ensure_session(
        KEY, agent_id="main", platform="telegram", chat_id="-500", chat_kind="group",
        thread_id=None, now=NOW,
    )  # fmt: skip
    stored = await backend.store.add_message(NewMessage(KEY, "user", text, NOW, sender_id="1"))
    for _ in range(100):  # neighbours, so the word's index pages hold more than it
        await backend.store.add_message(NewMessage(KEY, "user", word(), NOW, sender_id="2"))
    return int(stored.id)


def holds(path: str, needle: bytes) -> bool:
    return any(
        Path(path + suffix).exists() and needle in Path(path + suffix).read_bytes()
        for suffix in ("", "-wal")
    )


async def in_files(backend: Backend, needle: bytes) -> bool:
    db = connection(backend)
    await db.checkpoint_now()
    return holds(db.path, needle)


async def test_a_deleted_message_leaves_the_index_files_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    secret = word()
    async with open_backend(url) as backend:
        assert await secure_delete(backend) == 1
        message_id = await write(backend, f"my {secret} plan")
        assert await in_files(backend, secret[4:].encode())
        await connection(backend).execute("DELETE FROM messages WHERE id = ?", (message_id,))
        assert not await in_files(backend, secret[4:].encode())


async def test_an_index_from_before_the_setting_is_switched_and_merged_at_open(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    secret = word()
    async with open_backend(url) as backend:
        # As kept built the index before it used secure-delete.
        await connection(backend).execute(
            "INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 0)"
        )
        message_id = await write(backend, f"my {secret} plan")
        await connection(backend).execute("DELETE FROM messages WHERE id = ?", (message_id,))
        # Without the setting the deleted terms stay in the index's segments.
        assert await in_files(backend, secret[4:].encode())
    async with open_backend(url) as backend:
        assert await secure_delete(backend) == 1
        assert not await in_files(backend, secret[4:].encode())
