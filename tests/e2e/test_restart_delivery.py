"""The headline of "a restart never loses a follow-up", end to end: a real
`kept run` process (python -m bot, this worktree's code) against the fake
Bot API and the fake model server. SIGTERM lands while the heartbeat's model
call is held open by the fake; the process exits cleanly having sent
nothing, the follow-up still pending; after a restart it is delivered once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.commitments.model import NewCommitment, Scope
from tests.fakes.openai_server import FakeOpenAI, hang, reply
from tests.fakes.telegram_server import TOKEN, FakeTelegram
from tests.support.store_helpers import commitment_store_for, open_store

ROOT = Path(__file__).resolve().parents[2]
CHAT = 4242001
WHERE = Scope(
    "main", f"agent:main:telegram:private:{CHAT}", "telegram", str(CHAT), None, str(CHAT),
    chat_kind="private",
)  # fmt: skip
CHECK_IN = "Hi! How did the interview go?"


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeTelegram, FakeOpenAI]]:
    async with FakeTelegram() as telegram, FakeOpenAI() as model:
        yield telegram, model


def write_config(tmp_path: Path, telegram: FakeTelegram, model: FakeOpenAI) -> Path:
    doc = {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        # The user is let in: a check-in goes only to a chat that is served.
        "channels": {
            "telegram": {"enabled": True, "baseUrl": telegram.root, "allowFrom": [str(CHAT)]}
        },
        "llm": {"baseUrl": model.base_url, "maxRetries": 0},
        "commitments": {"enabled": True},
        # A real process on the real clock: no quiet hours, whatever the hour.
        "agents": [{"id": "main", "heartbeat": {"every": "1s", "activeHours": None}}],
        # The held model call outlives this grace: the stop must cancel it.
        "shutdown": {"graceSeconds": 0.2},
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


async def seed(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    try:
        now = datetime.now(UTC)
        await store.ensure_session(
            WHERE.session_key, agent_id="main", platform="telegram", chat_id=str(CHAT),
            chat_kind="private", thread_id=None, now=now,
        )  # fmt: skip
        new = NewCommitment(
            scope=WHERE, kind="event_check_in", sensitivity="routine",
            source="inferred_user_context", reason="user has a job interview",
            suggested_text="How did the interview go?", dedupe_key="interview",
            confidence=0.9, due_earliest=now - timedelta(minutes=1),
            due_latest=now + timedelta(hours=36), due_timezone="UTC",
            source_message_id=None, created_at=now,
        )  # fmt: skip
        await commitment_store_for(store).apply_extraction(WHERE, [new], [], now=now)
    finally:
        await store.close()


async def state(tmp_path: Path) -> tuple[str, str | None, int]:
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    try:
        sql = "SELECT status, claim_phase, attempts FROM commitments"
        [row] = await store.connection.fetchall(sql)  # type: ignore[attr-defined]
        return row[0], row[1], row[2]
    finally:
        await store.close()


async def start(cfg: Path, log: Path) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "OPENAI_API_KEY": "sk-test",
    }
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", "--config", str(cfg),
            cwd=ROOT, env=env, stdout=out, stderr=out,
        )  # fmt: skip


def said(log: Path) -> str:
    """What the process logged (for a failing assertion's message)."""
    return log.read_text() if log.exists() else ""


async def stop(process: asyncio.subprocess.Process, log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(process.wait(), 10)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"kept run did not stop:\n{said(log)}") from None
    assert code == 0, said(log)


def heartbeat_requests(model: FakeOpenAI) -> int:
    return sum(1 for r in model.completions if "check-in" in (r.system_text or ""))


async def until(check: object, log: Path, within: float = 10.0) -> None:
    assert callable(check)
    for _ in range(int(within / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out; the process said:\n{said(log)}")


@pytest.mark.slow
async def test_sigterm_during_the_model_call_then_restart_delivers_once(
    tmp_path: Path, fakes: tuple[FakeTelegram, FakeOpenAI]
) -> None:
    telegram, model = fakes
    cfg = write_config(tmp_path, telegram, model)
    log = tmp_path / "kept.log"
    await seed(tmp_path)

    model.set_default(hang())  # the heartbeat's model call never answers
    first = await start(cfg, log)
    try:
        await until(lambda: heartbeat_requests(model) == 1, log)
    finally:
        await stop(first, log)
    assert telegram.calls_to("sendMessage") == []
    status, phase, attempts = await state(tmp_path)
    assert (status, phase, attempts) == ("pending", None, 1), said(log)

    model.set_default(reply(CHECK_IN))
    second = await start(cfg, log)
    try:
        await until(lambda: telegram.calls_to("sendMessage"), log)
        # A few heartbeat intervals more: nothing else goes out.
        await asyncio.sleep(0.5)
    finally:
        await stop(second, log)
    sends = telegram.calls_to("sendMessage")
    assert [(int(c.params["chat_id"]), c.params["text"]) for c in sends] == [(CHAT, CHECK_IN)]
    assert (await state(tmp_path))[:2] == ("sent", None)
