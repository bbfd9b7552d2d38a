from __future__ import annotations

import asyncio
import json
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest

from bot import runtime as runtime_module
from bot.doctor import run_doctor
from bot.runtime import Runtime, StartupError, serve
from core.clock import TestClock
from core.commitments.model import NewCommitment, Scope
from core.config.file import load_config
from core.config.model import ConfigError, validate_document
from core.messages import Target
from tests.fakes.openai_server import FakeOpenAI, hang
from tests.support.adapters import QuietAdapter, RecordingAdapter, ignore
from tests.support.store_helpers import open_store


class FakeTelegram(QuietAdapter):
    platform = "telegram"

    def __init__(self) -> None:
        super().__init__(agent_id="main", allow_from=(), handler=ignore)
        self.started = asyncio.Event()
        self.stopped = False

    async def start(self) -> None:
        self.started.set()

    async def stop(self) -> None:
        self.stopped = True


def write_config(tmp_path: Path, **overrides: object) -> Path:
    doc: dict[str, object] = {"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}
    doc.update(overrides)
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


async def test_serve_stops_cleanly_on_sigterm(tmp_path, monkeypatch):
    adapter = FakeTelegram()
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", lambda rt: adapter)
    path = write_config(tmp_path, channels={"telegram": {"enabled": True}})
    runtime = Runtime(path, load_config(path), clock=TestClock())
    task = asyncio.create_task(serve(runtime))
    await asyncio.wait_for(adapter.started.wait(), 5)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 5)
    assert adapter.stopped
    assert runtime.router.platforms == set()


async def test_enabled_channel_without_adapter_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delitem(runtime_module.ADAPTER_FACTORIES, "discord", raising=False)
    path = write_config(tmp_path, channels={"discord": {"enabled": True}})
    runtime = Runtime(path, load_config(path), clock=TestClock())
    with pytest.raises(StartupError, match=r"channels\.discord\.enabled"):
        await serve(runtime)


async def test_running_process_applies_a_changed_config_and_survives_a_bad_one(tmp_path):
    path = write_config(tmp_path, commitments={"enabled": False})
    clock = TestClock()
    runtime = Runtime(path, load_config(path), clock=clock)
    await runtime.start_core()
    try:
        assert runtime.config.commitments.enabled is False
        doc = json.loads(path.read_text())
        doc["commitments"] = {"enabled": True}
        path.write_text(json.dumps(doc))
        for _ in range(3):
            await clock.advance(5)
        assert runtime.config.commitments.enabled is True
        path.write_text('{"commitments": {"enabled": "perhaps"}}')
        for _ in range(3):
            await clock.advance(5)
        assert runtime.config.commitments.enabled is True
    finally:
        await runtime.stop()


# --- stop order: heartbeat work first (with grace), then the adapters ----------------------


class OrderedAdapter(RecordingAdapter):
    """Records sends and its stop in one list, to read the order back."""

    platform = "telegram"

    def __init__(self) -> None:
        super().__init__(agent_id="main")


async def runtime_with_due_follow_up(
    tmp_path: Path, fake: FakeOpenAI, adapter: OrderedAdapter, monkeypatch: pytest.MonkeyPatch
) -> Runtime:
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", lambda rt: adapter)
    path = write_config(
        tmp_path,
        channels={"telegram": {"enabled": True}},
        llm={"baseUrl": fake.base_url, "maxRetries": 0},
        commitments={"enabled": True},
    )
    runtime = Runtime(path, load_config(path), clock=TestClock(), environ={"OPENAI_API_KEY": "k"})
    await runtime.start_core()
    assert runtime.services is not None
    store, now = runtime.store, runtime.clock.now()
    where = Scope(
        "main", "agent:main:telegram:private:42", "telegram", "42", None, "42", chat_kind="private"
    )
    await store.ensure_session(
        where.session_key, agent_id="main", platform="telegram", chat_id="42",
        chat_kind="private", thread_id=None, now=now,
    )  # fmt: skip
    new = NewCommitment(
        scope=where, kind="event_check_in", sensitivity="routine",
        source="inferred_user_context", reason="an interview", suggested_text="How did it go?",
        dedupe_key="interview", confidence=0.9, due_earliest=now,
        due_latest=now + timedelta(hours=36), due_timezone="UTC", source_message_id=None,
        created_at=now,
    )  # fmt: skip
    await runtime.services.backend.commitments.apply_extraction(where, [new], [], now=now)
    return runtime


async def commitment_state(tmp_path: Path) -> tuple[str, str | None]:
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    try:
        sql = "SELECT status, claim_phase FROM commitments"
        rows = await store.connection.fetchall(sql)  # type: ignore[attr-defined]
        [(status, phase)] = [tuple(r) for r in rows]
        return status, phase
    finally:
        await store.close()


async def test_stop_lets_the_heartbeat_turn_finish_before_the_adapters_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = asyncio.Event()

    async def held(body: object) -> str:
        await gate.wait()
        return "How did it go?"

    adapter = OrderedAdapter()
    async with FakeOpenAI() as fake:
        fake.set_default(held)
        runtime = await runtime_with_due_follow_up(tmp_path, fake, adapter, monkeypatch)
        await runtime.start_adapters([adapter])
        await fake.wait_for_completions(1, within=2)
        stopping = asyncio.create_task(runtime.stop())
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert adapter.events == []  # the model call is in flight: adapters still up
        gate.set()
        await asyncio.wait_for(stopping, 5)
    assert adapter.events == ["sent How did it go?", "stopped"]
    assert await commitment_state(tmp_path) == ("sent", None)


async def test_stop_past_the_grace_cancels_the_turn_and_releases_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = OrderedAdapter()
    async with FakeOpenAI() as fake:
        fake.set_default(hang())
        runtime = await runtime_with_due_follow_up(tmp_path, fake, adapter, monkeypatch)
        clock = runtime.clock
        assert isinstance(clock, TestClock)
        await runtime.start_adapters([adapter])
        await fake.wait_for_completions(1, within=2)
        stopping = asyncio.create_task(runtime.stop())
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert adapter.events == []
        await clock.advance(runtime.stop_grace - 1)
        await asyncio.sleep(0.01)
        assert adapter.events == [] and not stopping.done()  # still within the grace
        await clock.advance(1)
        await asyncio.wait_for(stopping, 5)
    assert adapter.events == ["stopped"]
    assert await commitment_state(tmp_path) == ("pending", None)


class RefusingAdapter(OrderedAdapter):
    """An adapter that no longer serves the chat (its user was revoked)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def delivery_refusal(
        self, target: Target, chat_kind: str, member: str | None
    ) -> str | None:
        self.asked.set()
        return f"user {member} is not approved"


async def test_the_runtime_asks_the_adapter_before_a_follow_up_and_sends_nothing_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = RefusingAdapter()
    async with FakeOpenAI() as fake:
        fake.set_default("How did it go?")
        runtime = await runtime_with_due_follow_up(tmp_path, fake, adapter, monkeypatch)
        await runtime.start_adapters([adapter])
        await asyncio.wait_for(adapter.asked.wait(), 5)
        await runtime.stop()
        assert fake.completions == []
    assert adapter.events == ["stopped"]
    assert await commitment_state(tmp_path) == ("pending", None)


@pytest.mark.parametrize("value", ["soon", -1, 601])
def test_a_bad_stop_grace_is_one_clear_line(value: object) -> None:
    with pytest.raises(ConfigError, match=r"shutdown\.graceSeconds"):
        validate_document({"shutdown": {"graceSeconds": value}}, "kept.json")


async def test_doctor_never_prints_the_database_password(tmp_path, capsys, postgres_url):
    # A PostgreSQL that refuses this user: the error line names the URL, masked.
    url = postgres_url.replace("postgresql://postgres", "postgresql://kept:s3cret-pw", 1)
    path = write_config(tmp_path, storage={"url": url})
    code = await run_doctor(path, environ={})
    out = capsys.readouterr().out
    assert code == 1
    assert "database" in out and "kept:***@" in out
    assert "s3cret-pw" not in out


async def test_kept_run_erases_what_outlived_the_retention_once_started(tmp_path, monkeypatch):
    from core.store.base import NewMessage
    from tests.support.followups import store_rows

    clock = TestClock()
    key = "agent:main:telegram:private:42"
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    await store.ensure_session(
        key, agent_id="main", platform="telegram", chat_id="42", chat_kind="private",
        thread_id=None, now=clock.now(),
    )  # fmt: skip
    for days, text in ((400, "long ago"), (10, "lately")):
        when = clock.now() - timedelta(days=days)
        await store.add_message(NewMessage(key, "user", text, when, sender_id="42"))
    await store.close()
    adapter = FakeTelegram()
    monkeypatch.setitem(runtime_module.ADAPTER_FACTORIES, "telegram", lambda rt: adapter)
    path = write_config(
        tmp_path,
        channels={"telegram": {"enabled": True}},
        storage={"url": f"sqlite:///{tmp_path}/kept.sqlite", "retention": {"messages": "365d"}},
    )
    runtime = Runtime(path, load_config(path), clock=clock)
    await runtime.start_core()
    try:
        await runtime.start_adapters(runtime.build_channel_adapters())
        assert "retention" in {t.get_name() for t in runtime._tasks}
        for _ in range(100):
            left = await store_rows(runtime.store, "SELECT text FROM messages")
            if len(left) == 1:
                break
            await asyncio.sleep(0.02)
        assert left == [("lately",)]
    finally:
        await runtime.stop()
