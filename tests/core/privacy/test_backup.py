"""`kept backup` on SQLite: a copy taken during a write burst holds every
message stored before it started, searchable, its index agreeing with its
transcript; it is 0600, checked, and never written over an existing file.
(PostgreSQL is backed up with pg_dump: tests/bot/test_backup_cmd.py.)"""

from __future__ import annotations

import asyncio
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.privacy.backup import BackupFailed, RestoreRefused
from core.search.redact import Redactor
from core.store.backends import Backend, open_backend
from core.store.base import ImportRow, NewMessage, SearchScope
from core.store.sqlite.driver import sqlite3
from tests.support.store_helpers import index_consistency

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
KEY = "agent:main:telegram:private:1"


async def burst(
    backend: Backend, stop: asyncio.Event, written: list[int], going: asyncio.Event
) -> None:
    n = 0
    while not stop.is_set():
        if n == 20:
            going.set()
        n += 1
        stored = await backend.store.add_message(
            NewMessage(KEY, "user", f"burst message {n}", NOW, sender_id="1")
        )
        written.append(stored.id)


async def test_a_backup_during_a_write_burst_holds_all_that_came_before(tmp_path: Path) -> None:
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as backend:
        await backend.store.ensure_session(
            KEY, agent_id="main", platform="telegram", chat_id="1", chat_kind="private",
            thread_id=None, now=NOW,
        )  # fmt: skip
        rows = [ImportRow(KEY, "user", f"older words number {n}", NOW) for n in range(20_000)]
        await backend.store.import_messages(rows)
        await backend.store.reindex_session(KEY)
        await backend.store.add_message(NewMessage(KEY, "user", "the quokkasaurus", NOW))
        stop, going, written = asyncio.Event(), asyncio.Event(), []
        writer = asyncio.create_task(burst(backend, stop, written, going))
        await asyncio.wait_for(going.wait(), 5)  # the burst is under way
        before = list(written)
        done = await backend.backup.backup(tmp_path / "copy.sqlite")  # type: ignore[union-attr]
        stop.set()
        await writer  # the burst went on through the backup, and ended without an error
    copy = tmp_path / "copy.sqlite"
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert f"{copy.name}-wal" not in os.listdir(tmp_path)  # one self-contained file
    assert done.messages >= 20_000 + 1 + len(before) and done.schema_version >= 17
    async with open_backend(f"sqlite:///{copy}", create=False) as restored:
        for message_id in (before[0], before[-1]):
            assert await restored.store.get_message(message_id) is not None
        hits = await restored.store.search(
            "quokkasaurus", scope=SearchScope(session_key=KEY), limit=5, redactor=Redactor()
        )
        assert [h.snippet for h in hits] == ["the quokkasaurus"]
        assert await index_consistency(restored.store) == (0, 0)


async def test_an_existing_file_is_never_written_over(tmp_path: Path) -> None:
    target = tmp_path / "copy.sqlite"
    target.write_bytes(b"precious")
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as backend:
        assert backend.backup is not None
        with pytest.raises(BackupFailed, match="already exists"):
            await backend.backup.backup(target)
        assert target.read_bytes() == b"precious"
        done = await backend.backup.backup(tmp_path / "fresh.sqlite")
        assert done.messages == 0 and (tmp_path / "fresh.sqlite").exists()


async def stored_texts(url: str) -> list[str]:
    async with open_backend(url, create=False) as backend:
        history = await backend.store.history(KEY, before_turn_of=2**62, limit=100)
        return [m.text for m in history]


async def made_backup(tmp_path: Path) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    async with open_backend(url) as backend:
        await backend.store.ensure_session(
            KEY, agent_id="main", platform="telegram", chat_id="1", chat_kind="private",
            thread_id=None, now=NOW,
        )  # fmt: skip
        await backend.store.add_message(NewMessage(KEY, "user", "before the backup", NOW))
        assert backend.backup is not None
        await backend.backup.backup(tmp_path / "copy.sqlite")
        await backend.store.add_message(NewMessage(KEY, "user", "after the backup", NOW))
    return url, tmp_path / "copy.sqlite"


async def test_a_restore_puts_the_backup_back_and_keeps_the_replaced_file(tmp_path: Path) -> None:
    url, copy = await made_backup(tmp_path)
    backend = open_backend(url, create=False)  # not opened: nobody holds the database
    assert backend.backup is not None
    done = await backend.backup.restore(copy)
    assert done.messages == 1 and done.replaced is not None
    assert await stored_texts(url) == ["before the backup"]
    assert stat.S_IMODE((tmp_path / "kept.sqlite").stat().st_mode) == 0o600
    replaced = f"sqlite:///{done.replaced}"
    assert await stored_texts(replaced) == ["before the backup", "after the backup"]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".restoring")]


async def test_a_restore_is_refused_while_the_database_is_open(tmp_path: Path) -> None:
    url, copy = await made_backup(tmp_path)
    async with open_backend(url) as running:  # a `kept run`
        idle = open_backend(url, create=False)
        assert idle.backup is not None
        with pytest.raises(RestoreRefused, match="is in use"):
            await idle.backup.restore(copy)
        history = await running.store.history(KEY, before_turn_of=2**62, limit=10)
        assert [m.text for m in history] == ["before the backup", "after the backup"]
    assert sorted(n for n in os.listdir(tmp_path) if "replaced" in n or "restoring" in n) == []
    # Closed, the same restore goes through.
    assert (await idle.backup.restore(copy)).messages == 1


async def test_a_damaged_or_newer_backup_is_refused(tmp_path: Path) -> None:
    url, copy = await made_backup(tmp_path)
    backend = open_backend(url, create=False)
    assert backend.backup is not None
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RestoreRefused, match="is not a kept database"):
        await backend.backup.restore(junk)
    with sqlite3.connect(copy) as newer:
        newer.execute("INSERT INTO schema_version VALUES (999, 'from the future', 0)")
    with pytest.raises(RestoreRefused, match="newer than this code"):
        await backend.backup.restore(copy)
    with pytest.raises(RestoreRefused, match="no backup at"):
        await backend.backup.restore(tmp_path / "missing.sqlite")
    assert await stored_texts(url) == ["before the backup", "after the backup"]
