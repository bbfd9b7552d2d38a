"""open_backend(url): every store of one database, and ports that never pull
a backend in."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from core.store.backends import open_backend
from core.store.postgres import PostgresStore
from core.store.postgres.connection import DatabaseUnreachable
from tests.core.commitments.test_store import ALICE, NOW, new
from tests.core.reminders.test_store import new as new_reminder

ROOT = Path(__file__).resolve().parents[3]


async def test_every_store_of_a_backend_works_on_one_database(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path}/kept.sqlite")
    async with backend:
        applied = await backend.commitments.apply_extraction(ALICE, [new()], [], now=NOW)
        [created] = applied.created
        # The heartbeat store sees, claims and sends what the commitment store wrote.
        due = await backend.heartbeat.due_unclaimed(now=NOW + timedelta(hours=12), limit=10)
        assert [c.id for c in due] == [created.id]
        claimed = await backend.heartbeat.claim(
            [created.id], worker="w", now=NOW, lease_until=NOW + timedelta(minutes=5)
        )
        await backend.heartbeat.finish(claimed, "sent", worker="w", now=NOW, message_id="m1")
        sent = await backend.commitments.get(created.id)
        assert sent is not None and sent.status == "sent"
        await backend.store.ensure_session(
            "agent:main:telegram:private:42",
            agent_id="main",
            platform="telegram",
            chat_id="42",
            chat_kind="private",
            thread_id=None,
            now=NOW,
        )
        reminder = await backend.reminders.add(new_reminder(key="agent:main:telegram:private:42"))
        assert await backend.reminders.get(reminder.id) == reminder
    # One connection: closing the backend closed every store.
    reopened = open_backend(f"sqlite:///{tmp_path}/kept.sqlite")
    async with reopened:
        assert (await reopened.commitments.get(created.id)) == sent
        assert await reopened.reminders.get(reminder.id) == reminder


@pytest.mark.slow
def test_importing_the_ports_imports_no_backend() -> None:
    code = (
        "import sys\n"
        "import core.store, core.store.base, core.commitments, core.commitments.store\n"
        "import core.heartbeat.store, core.reminders, core.reminders.store\n"
        "import core.conversation.manager, core.search.service\n"
        "def backends():\n"
        "    return sorted(m for m in sys.modules if m.startswith(('core.store.sqlite', "
        "'core.store.postgres', 'core.store.backends', 'aiosqlite', 'psycopg')))\n"
        "assert not backends(), backends()\n"
        # The same look sees a backend once one is imported.
        "import core.store.backends\n"
        "print(' '.join(backends()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert {"core.store.backends", "aiosqlite"} <= set(done.stdout.split()), done.stdout


async def test_a_postgresql_url_opens_the_postgres_backend(postgres_url: str) -> None:
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        backend = open_backend(url)
        assert isinstance(backend.store, PostgresStore)
        async with backend:
            await backend.store.ensure_session(
                "agent:main:telegram:private:42",
                agent_id="main",
                platform="telegram",
                chat_id="42",
                chat_kind="private",
                thread_id=None,
                now=NOW,
            )
            assert await backend.store.get_session("agent:main:telegram:private:42") is not None
        # Closing the backend closed its one pool.
        with pytest.raises(RuntimeError, match="not open"):
            await backend.store.get_session("agent:main:telegram:private:42")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/kept", "unsupported storage URL 'mysql://db/kept': expected sqlite:///"),
        ("postgresql:/db", "malformed storage URL 'postgresql:/db'"),
        ("postgresql://u@h/db?bogus=1", 'invalid URI query parameter: "bogus"; expected post'),
        ("postgresql://u:s3cret@h/db?bogus=1", "'postgresql://u:***@h/db?bogus=1'"),
        ("postgresql://u:s3cret@[::1/db", "'postgresql://u:***@[::1/db'"),
        ("sqlite://x", "malformed storage URL 'sqlite://x'"),
    ],
)
def test_a_bad_url_is_one_clear_line(url: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        open_backend(url)
    text = str(raised.value)
    assert message in text and "\n" not in text, text
    assert "s3cret" not in text, text


async def test_an_unreachable_server_is_one_clear_line_at_once(tmp_path: Path) -> None:
    # A Unix socket directory with no server in it: refused at once, and the
    # pool does not retry for its timeout before saying so.
    backend = open_backend(f"postgresql:///kept?host={tmp_path}")
    with pytest.raises(DatabaseUnreachable) as raised:
        await asyncio.wait_for(backend.open(), timeout=5)
    text = str(raised.value)
    assert text.startswith("cannot connect to PostgreSQL: ") and "\n" not in text, text
    assert str(tmp_path) in text
