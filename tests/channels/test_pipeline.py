"""The one channel pipeline (channels/base.py): allow-list -> Inbound ->
typing -> manager -> error capture, and what every platform takes from it:
the agent and the allow-list read from the live config, edits and deletions
through the conversation manager."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import discord.ext.test as dpytest
import pytest

from channels.base import AddressedMessage
from channels.context import DuringModel
from core.clock import TestClock
from core.commitments.model import Scope
from core.errors import MessageNotStored
from core.messages import Inbound, Target
from core.store.sqlite.driver import sqlite3
from tests.support.adapters import QuietAdapter
from tests.support.discord_dpytest import Rig, build_rig, message_dict, sent_messages
from tests.support.telegram_harness import scope, telegram_harness

TWO_AGENTS = [{"id": "main"}, {"id": "second"}]


class Pipe(QuietAdapter):
    """An adapter whose settings live in a dict, as a platform's live config."""

    platform = "pipe"

    def __init__(self, handler: Any, settings: dict[str, Any]) -> None:
        super().__init__(handler=handler, clock=TestClock())
        self.settings = settings
        self.typed: list[Target] = []
        self.typing_stopped = asyncio.Event()

    def agent_setting(self) -> str:
        return str(self.settings["agent"])

    def allow_list(self) -> list[str]:
        return list(self.settings["allow"])

    async def keep_typing(self, target: Target) -> None:
        self.typed.append(target)
        try:
            await asyncio.Event().wait()
        finally:
            self.typing_stopped.set()


def addressed(sender: str = "7", username: str | None = "ann") -> AddressedMessage:
    return AddressedMessage(
        target=Target("pipe", "c1"),
        chat_kind="private",
        sender_id=sender,
        text="hello",
        username=username,
        platform_message_id="m1",
    )


async def test_agent_and_allow_list_are_read_on_every_message() -> None:
    settings: dict[str, Any] = {"agent": "main", "allow": []}
    pipe = Pipe(None, settings)
    assert await pipe.admit(addressed())
    assert pipe.inbound(addressed()).session_key == "agent:main:pipe:private:c1"

    settings.update(agent="second", allow=["@bob"])
    assert not await pipe.admit(addressed())
    assert await pipe.admit(addressed(username="Bob"))
    assert pipe.inbound(addressed()).session_key == "agent:second:pipe:private:c1"


async def test_typing_shows_only_while_the_model_call_runs() -> None:
    """Stored and waiting for its chat's turn: no "typing…"; it starts when
    the manager enters the model call and stops when that ends, before the
    reply waits for the pace."""
    store_now, call_now, answer_now, sending = (asyncio.Event() for _ in range(4))

    async def handle(
        inbound: Inbound,
        *,
        on_stored: Callable[[], object] | None = None,
        during_model: DuringModel | None = None,
    ) -> None:
        await store_now.wait()
        assert on_stored is not None and during_model is not None
        on_stored()
        await call_now.wait()  # queued behind the chat's earlier turn
        async with during_model():
            await answer_now.wait()
        await sending.wait()  # the reply waits for the pace

    pipe = Pipe(handle, {"agent": "main", "allow": []})
    stored: list[bool] = []
    turn = asyncio.create_task(
        pipe.run_turn(pipe.inbound(addressed()), on_stored=lambda: stored.append(True))
    )
    store_now.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert stored == [True] and pipe.typed == []  # stored, waiting: nothing typed

    call_now.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert pipe.typed == [Target("pipe", "c1")]
    assert not pipe.typing_stopped.is_set()

    answer_now.set()
    await asyncio.wait_for(pipe.typing_stopped.wait(), 1)  # before the send
    assert not turn.done()
    sending.set()
    await turn
    assert pipe.typed == [Target("pipe", "c1")]


async def test_a_message_not_stored_is_raised_and_never_typed() -> None:
    async def handle(
        inbound: Inbound, *, on_stored: Callable[[], object] | None = None, **_: object
    ) -> None:
        raise MessageNotStored("disk full") from sqlite3.OperationalError("disk full")

    pipe = Pipe(handle, {"agent": "main", "allow": []})
    with pytest.raises(MessageNotStored):
        await pipe.run_turn(pipe.inbound(addressed()))
    assert pipe.typed == []


async def test_a_failed_turn_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def handle(
        inbound: Inbound, *, on_stored: Callable[[], object] | None = None, **_: object
    ) -> None:
        assert on_stored is not None
        on_stored()
        raise RuntimeError("a bug")

    pipe = Pipe(handle, {"agent": "main", "allow": []})
    await pipe.run_turn(pipe.inbound(addressed()))
    [line] = [r.getMessage() for r in caplog.records if "pipe_turn_failed" in r.getMessage()]
    assert "session=agent:main:pipe:private:c1" in line and "a bug" in line
    for _ in range(10):
        await asyncio.sleep(0)
    assert not pipe.typed or pipe.typing_stopped.is_set()  # no indicator outlives the turn


# --- Telegram and Discord read their agent the same way: live -----------------


async def test_telegram_reads_its_agent_per_message(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path, agents=TWO_AGENTS) as tg:
        await tg.start()
        await tg.fake.push_message("first", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 1)

        tg.config.channels.telegram.agent = "second"  # as the config watcher applies an edit
        await tg.fake.push_message("second", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

        main = await tg.transcript("agent:main:telegram:private:42")
        second = await tg.transcript("agent:second:telegram:private:42")
        assert [t for role, _, t in main if role == "user"] == ["first"]
        assert [t for role, _, t in second if role == "user"] == ["second"]


async def test_telegram_commands_read_their_agent_per_command(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path, agents=TWO_AGENTS) as tg:
        mains = await tg.seed(scope(42), "main's follow-up")
        seconds = await tg.seed(
            Scope(
                "second",
                "agent:second:telegram:private:42",
                "telegram",
                "42",
                None,
                "42",
                chat_kind="private",
            ),
            "second's follow-up",
        )
        await tg.start()
        await tg.fake.push_message("/commitments", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 1)

        tg.config.channels.telegram.agent = "second"  # as the config watcher applies an edit
        await tg.fake.push_message("/commitments", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

        first, second = tg.fake.texts()
        assert mains.id in first and seconds.id not in first
        assert seconds.id in second and mains.id not in second


async def test_telegram_reads_its_allow_list_per_message(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path) as tg:
        await tg.start()
        await tg.fake.push_message("open door", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 1)

        tg.config.channels.telegram.dm_policy = "allowlist"
        tg.config.channels.telegram.allow_from = ["77"]
        refused = await tg.fake.push_message("still me", chat_id=42)
        await tg.fake.wait_for(lambda: refused["update_id"] in tg.fake.confirmed)

        assert tg.fake.texts() == ["echo: open door"]
        users = [
            t for r, _, t in await tg.transcript("agent:main:telegram:private:42") if r == "user"
        ]
        assert users == ["open door"]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await build_rig(tmp_path, config={"agents": TWO_AGENTS})
    yield rig
    await rig.close()


async def user_texts(rig: Rig, key: str) -> list[str]:
    rows = await rig.store.history(key, before_turn_of=10**12, limit=100)
    return [r.text for r in rows if r.role == "user"]


async def test_discord_reads_its_agent_per_message(rig: Rig) -> None:
    user = rig.member(0)
    dm = await user.create_dm()
    await dpytest.message("first", dm, user._user)

    rig.config.channels.discord.agent = "second"
    await dpytest.message("second", dm, user._user)

    assert len(sent_messages()) == 2
    assert await user_texts(rig, f"agent:main:discord:private:{dm.id}") == ["first"]
    assert await user_texts(rig, f"agent:second:discord:private:{dm.id}") == ["second"]


# --- Discord edits go through the manager; a store failure is logged ------------


async def test_a_discord_edit_that_cannot_be_stored_is_logged_with_the_fix(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    user = rig.member(0)
    dm = await user.create_dm()
    sent = await dpytest.message("my flight is on tuesday", dm, user._user)
    sent_messages()
    key = f"agent:main:discord:private:{dm.id}"

    async def disk_full(**fields: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    real = rig.store.edit_message
    rig.store.edit_message = disk_full  # type: ignore[method-assign]
    errors: list[str] = []

    async def on_error(event_name: str, *args: Any, **kwargs: Any) -> None:
        errors.append(event_name)

    rig.bot.on_error = on_error  # type: ignore[method-assign]
    data = message_dict(sent)
    data["content"] = "my flight is on wednesday"
    rig.bot._connection.parse_message_update(data)  # type: ignore[attr-defined]
    await dpytest.run_all_events()

    rig.store.edit_message = real  # type: ignore[method-assign]
    assert errors == []  # handled by the cog, not left to discord.py's error handler
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    [line] = [m for m in lines if "discord_edit_not_stored" in m]
    assert f"message={sent.id}" in line and "action=" in line
    assert await user_texts(rig, key) == ["my flight is on tuesday"]
