"""/forget, /mydata and /export in `kept chat`, on each backend: the question
with its counts answered by a `yes` line within 5 minutes on the clock (any
other line cancels), what /mydata shows, and /export's file."""

from __future__ import annotations

import asyncio
import io
import json
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.services import Services, build_services
from channels.console import ConsoleAdapter
from channels.console.lines import PlainLineReader
from channels.context import ChannelContext
from channels.router import AdapterRouter
from core.clock import TestClock
from core.config.model import KeptConfig
from core.privacy.export import document
from core.privacy.store import ErasedUser, ErasureCounts
from core.store.backends import open_backend
from tests.channels.test_console import Pipe
from tests.support.scripted_model import ScriptedModel, text

ANN = ErasedUser("console", "ann")


@dataclass
class Chat:
    console: ConsoleAdapter
    stdin: Pipe
    out: io.StringIO
    model: ScriptedModel
    services: Services
    clock: TestClock
    exports: Path
    run: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.run = asyncio.create_task(self.console.run())

    async def until(self, check: Callable[[], bool], what: str) -> None:
        for _ in range(400):
            if check():
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what}; out={self.out.getvalue()!r}")

    async def say(self, line: str, shown: str) -> str:
        """Type a line; the output it added, once `shown` is in it."""
        before = len(self.out.getvalue())
        self.stdin.send(line)
        await self.until(lambda: shown in self.out.getvalue()[before:], shown)
        return self.out.getvalue()[before:]

    async def held(self) -> ErasureCounts:
        return await self.services.backend.erasure.count(ANN)


@pytest.fixture
async def chat(tmp_path: Path, storage_url: str) -> AsyncIterator[Chat]:
    backend = open_backend(storage_url)
    await backend.open()
    clock = TestClock()
    model = ScriptedModel()
    router = AdapterRouter()
    config = KeptConfig.model_validate({"agents": [{"id": "main", "timezone": "Europe/Paris"}]})
    services = build_services(
        backend=backend,
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: config,
        clock=clock,
        platforms=lambda: router.platforms,
    )
    context = ChannelContext(
        conversation=services.manager,
        store=backend.store,
        commitments=services.commitments,
        reminders=services.reminders,
        config=lambda: config,
        clock=clock,
        environ={},
        users=services.users,
        privacy=services.privacy,
        spend=services.spend,
    )
    stdin, out = Pipe(), io.StringIO()
    exports = tmp_path / "exports"
    exports.mkdir()
    console = ConsoleAdapter(
        agent_id="main",
        context=context,
        clock=clock,
        reader=PlainLineReader(stdin.reader),
        stdout=out,
        stderr=io.StringIO(),
        user="ann",
        export_dir=exports,
    )
    router.add(console)
    harness = Chat(console, stdin, out, model, services, clock, exports)
    harness.start()
    try:
        yield harness
    finally:
        stdin.close()
        if harness.run is not None and not harness.run.done():
            harness.run.cancel()
            await asyncio.gather(harness.run, return_exceptions=True)
        await services.manager.drain()
        await services.extraction.stop(drain_seconds=0.1)
        await backend.close()
        stdin.reader.close()


async def talked(chat: Chat) -> None:
    """Two stored messages and an own time zone: something to erase."""
    chat.model.steps.append(text("Good luck with it!"))
    await chat.say("my zebracorn interview is tomorrow", "Good luck with it!")
    await chat.say("/timezone Asia/Tokyo", "Your time zone is now Asia/Tokyo")


# The usage record: the one model call the talk made, charged to the user.
WHAT = "1 private chat, 2 messages, 1 setting, 1 usage record"


async def test_forget_asks_then_a_yes_within_five_minutes_erases(chat: Chat) -> None:
    await talked(chat)
    asked = await chat.say("/forget", "anything else cancels")
    assert f"This erases what I hold from you, in every chat: {WHAT}." in asked
    assert "Type yes within 5 minutes to erase it; anything else cancels." in asked
    assert await chat.held() == ErasureCounts(chats=1, messages=2, settings=1, usage=1)

    await chat.clock.advance(4 * 60 + 59)
    done = await chat.say("yes", "You can go on talking")
    assert f"Erased what I held from you: {WHAT}." in done
    assert await chat.held() == ErasureCounts()

    # Still talking, and what is said from now on is held again.
    chat.model.steps.append(text("Hello again"))
    await chat.say("hi", "Hello again")
    assert await chat.held() == ErasureCounts(chats=1, messages=2, usage=1)
    asked = await chat.say("/forget", "anything else cancels")
    assert "1 private chat, 2 messages, 1 usage record." in asked


async def test_a_yes_after_five_minutes_lapses_and_other_lines_cancel(chat: Chat) -> None:
    await talked(chat)
    await chat.say("/forget", "anything else cancels")
    await chat.clock.advance(5 * 60 + 1)
    lapsed = await chat.say("yes", "lapsed")
    assert "This question lapsed after 5 minutes: nothing was erased." in lapsed
    assert await chat.held() == ErasureCounts(chats=1, messages=2, settings=1, usage=1)

    await chat.say("/forget", "anything else cancels")
    assert "Cancelled: nothing was erased." in await chat.say("no", "Cancelled")

    # Any other line cancels, and is then read as usual.
    await chat.say("/forget", "anything else cancels")
    chat.model.steps.append(text("Sure, tell me more"))
    out = await chat.say("I changed my mind", "Sure, tell me more")
    assert "Cancelled: nothing was erased." in out
    assert await chat.held() == ErasureCounts(chats=1, messages=4, settings=1, usage=2)


async def test_mydata_export_and_help(chat: Chat) -> None:
    await talked(chat)
    shown = await chat.say("/mydata", "erases it")
    assert "What I hold about you:" in shown
    assert "2 messages (yours and my replies) in 1 chat" in shown
    assert "time zone: Asia/Tokyo (your own)" in shown

    said = await chat.say("/export", "Exported")
    path = chat.exports / "kept-export-console-ann.json"
    assert f"Exported what I hold from you (1 chat) to {path}." in " ".join(said.split())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    expected = document(await chat.services.backend.exports.export(ANN), at=chat.clock.now())
    assert written == expected
    assert "my zebracorn interview is tomorrow" in path.read_text()
    assert "already exists" in await chat.say("/export", "already exists")

    listed = await chat.say("/help", "/quit")
    for name in ("/forget", "/mydata", "/export"):
        assert name in listed
