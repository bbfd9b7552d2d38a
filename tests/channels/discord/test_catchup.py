"""Discord catches up on what it missed: messages said while the bot was
down (read from the channel history on every READY), and messages it
received but could not store (retried with backoff until storing works).
The real discord.py client runs against the fake Discord; see
test_discord_gateway_e2e for the harness."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import discord
import pytest

from channels.discord import DiscordAdapter
from channels.discord.catchup import HISTORY_LIMIT, HISTORY_WINDOW
from channels.media import REFUSED_NOTICE
from core.store.base import NewMessage
from core.store.sqlite.driver import sqlite3
from tests.fakes.discord_server import Script
from tests.support.discord_harness import DiscordHarness, discord_harness
from tests.support.store_faults import Unstorable


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path) as h:
        yield h


async def answered(harness: DiscordHarness, count: int) -> list[str]:
    await harness.fake.wait_for(lambda: len(harness.fake.texts()) >= count)
    return harness.fake.texts()


async def settled(harness: DiscordHarness, adapter: DiscordAdapter) -> None:
    """The catch-up finished and no live message is held."""
    await adapter.catchup.idle()
    await harness.fake.wait_for(lambda: adapter.catchup.held == 0)


async def user_texts(harness: DiscordHarness, key: str) -> list[str]:
    return [text for role, text in await harness.transcript(key) if role == "user"]


# --- the store query -----------------------------------------------------------


async def test_the_store_names_each_session_with_its_newest_user_message_id(
    harness: DiscordHarness,
) -> None:
    store, now = harness.store, harness.clock.now()
    keys = {
        "dm": "agent:main:discord:private:111",
        "quiet": "agent:main:discord:channel:222:thread:333",
        "telegram": "agent:main:telegram:private:42",
    }
    for name, key in keys.items():
        platform, kind, chat = key.split(":")[2:5]
        await store.ensure_session(
            key,
            agent_id="main",
            platform=platform,
            chat_id=chat,
            chat_kind=kind,  # type: ignore[arg-type]
            thread_id="333" if name == "quiet" else None,
            now=now,
        )
    # Ids compare as numbers ("999" < "1000"); the bot's own messages and
    # messages without a platform id do not count.
    for role, platform_id in [("user", "999"), ("user", "1000"), ("assistant", "5000")]:
        await store.add_message(
            NewMessage(keys["dm"], role, "x", now, platform_message_id=platform_id)  # type: ignore[arg-type]
        )
    await store.add_message(NewMessage(keys["dm"], "user", "imported", now))
    await store.add_message(NewMessage(keys["telegram"], "user", "x", now, platform_message_id="7"))

    found = await store.sessions_with_last_platform_id("discord")

    assert [(s.key, s.thread_id, last) for s, last in found] == [
        (keys["dm"], None, "1000"),
        (keys["quiet"], "333", None),
    ]


# --- after downtime -------------------------------------------------------------


async def test_what_was_said_while_down_is_answered_once_in_order(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake = harness.fake
    dm = fake.dm(fake.ana)
    adapter = await harness.start()
    one = await fake.say("one")
    await fake.say("in the channel", channel=fake.general, mention=True)
    await answered(harness, 2)
    await harness.stop(adapter)

    await fake.say("two", live=False)
    await fake.say("lunch anyone?", channel=fake.general, author=fake.ben, live=False)
    await fake.say("three", live=False)
    await fake.say("still there?", channel=fake.general, mention=True, live=False)
    await fake.say("are you?", channel=fake.general, author=fake.ben, live=False)

    adapter = await harness.start()
    await answered(harness, 5)
    await settled(harness, adapter)

    assert fake.texts(dm) == ["echo: one", "echo: two", "echo: three"]
    assert fake.texts(fake.general) == ["echo: in the channel", "echo: still there?"]
    assert await user_texts(harness, harness.dm_key()) == ["one", "two", "three"]
    channel_key = f"agent:main:discord:channel:{fake.general}"
    assert await user_texts(harness, channel_key) == ["in the channel", "still there?"]
    reads = {c.path: c.query for c in fake.calls_to("history")}
    assert reads[f"channels/{dm}/messages"] == {"limit": str(HISTORY_LIMIT), "after": one["id"]}
    assert "discord_caught_up" in caplog.text

    # A later READY finds nothing new: nothing is answered twice.
    await harness.reconnect(adapter)
    await settled(harness, adapter)
    assert len(fake.texts()) == 5


async def test_a_reconnect_catches_up_on_what_the_gateway_never_delivered(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await fake.say("lost in transit", live=False)

    await harness.reconnect(adapter)

    assert await answered(harness, 2) == ["echo: one", "echo: lost in transit"]


async def test_a_thread_catches_up_in_the_thread(harness: DiscordHarness) -> None:
    fake = harness.fake
    adapter = await harness.start()
    thread = await fake.thread(fake.general)
    await fake.wait_for(lambda: adapter.bot.get_channel(thread))
    await fake.say("plan my week", channel=thread, mention=True)
    await answered(harness, 1)
    await harness.stop(adapter)
    await fake.say("and the weekend?", channel=thread, mention=True, live=False)

    adapter = await harness.start()

    assert await answered(harness, 2) == ["echo: plan my week", "echo: and the weekend?"]
    assert fake.texts(thread) == fake.texts()
    key = f"agent:main:discord:channel:{fake.general}:thread:{thread}"
    assert await user_texts(harness, key) == ["plan my week", "and the weekend?"]


async def test_history_is_read_at_most_a_day_back(harness: DiscordHarness) -> None:
    fake, clock = harness.fake, harness.clock
    start = clock.now()
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await harness.stop(adapter)
    clock.set(start + timedelta(hours=1))
    await fake.say("too old by now", live=False)
    clock.set(start + timedelta(hours=29))
    await fake.say("recent", live=False)
    clock.set(start + timedelta(hours=30))

    adapter = await harness.start()
    await answered(harness, 2)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: recent"]
    floor = discord.utils.time_snowflake(clock.now() - HISTORY_WINDOW)
    assert fake.calls_to("history")[-1].query == {"limit": "100", "after": str(floor)}


async def test_a_channel_the_bot_may_not_read_is_skipped_with_the_fix_named(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("in the channel", channel=fake.general, mention=True)
    await fake.say("one")
    await answered(harness, 2)
    await harness.stop(adapter)
    await fake.say("still there?", channel=fake.general, mention=True, live=False)
    await fake.say("two", live=False)
    # The channel's session is older, so it is read first.
    fake.script("history", Script(403, "Missing Access", code=50001))

    adapter = await harness.start()
    await answered(harness, 3)
    await settled(harness, adapter)

    assert fake.texts()[2:] == ["echo: two"]
    assert "discord_catch_up_skipped" in caplog.text
    assert "Read Message History" in caplog.text


# --- live messages during a catch-up --------------------------------------------


async def test_a_live_message_waits_for_the_history_before_it(harness: DiscordHarness) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await harness.stop(adapter)
    await fake.say("two", live=False)
    await fake.say("three", live=False)
    history = fake.hold("history")

    adapter = await harness.start()
    await fake.wait_for(lambda: fake.calls_to("history"))
    # Said live while the history read is held: in the history too, since
    # the held answer is made after the release.
    await fake.say("four")
    await fake.wait_for(lambda: fake.texts()[1:] or adapter.catchup.held)
    assert fake.texts() == ["echo: one"]
    history.set()
    await answered(harness, 4)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: two", "echo: three", "echo: four"]
    assert await user_texts(harness, harness.dm_key()) == ["one", "two", "three", "four"]


async def test_a_live_message_waits_until_the_sessions_are_listed(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await harness.stop(adapter)
    await fake.say("two", live=False)
    listing = harness.storage.listing = asyncio.Event()

    adapter = await harness.start()
    # Stored before the listing, "three" would be the newest stored id and
    # hide "two" from the history read.
    await fake.say("three")
    await fake.wait_for(lambda: fake.texts()[1:] or adapter.catchup.held)
    assert fake.texts() == ["echo: one"]
    listing.set()
    await answered(harness, 3)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: two", "echo: three"]


# --- after a storage outage ---------------------------------------------------------


async def test_messages_not_stored_are_answered_once_in_order_when_storage_is_back(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    fake, clock, storage = harness.fake, harness.clock, harness.storage
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)

    storage.down = True
    await fake.say("two")
    # The live store fails, then the catch-up's first try: it backs off.
    await fake.wait_for(lambda: storage.refused == 2 and clock.sleepers == 1)
    await fake.say("three")
    await fake.wait_for(lambda: adapter.catchup.held == 1)
    await clock.advance(1)
    await fake.wait_for(lambda: storage.refused == 3 and clock.sleepers == 1)
    assert fake.texts() == ["echo: one"]
    assert adapter.catchup.behind() == [fake.dm(fake.ana)]

    storage.down = False
    await clock.advance(2)  # the second backoff
    await answered(harness, 3)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: two", "echo: three"]
    assert await user_texts(harness, harness.dm_key()) == ["one", "two", "three"]
    failures = [
        r.getMessage() for r in caplog.records if "discord_storage_failed" in r.getMessage()
    ]
    assert len(failures) == 1  # one line per outage, not one per retry
    assert "database is locked" in failures[0]
    assert "one kept per SQLite file" in failures[0]  # what the operator should do
    assert "discord_storage_recovered" in caplog.text

    await fake.say("four")
    assert (await answered(harness, 4))[-1] == "echo: four"


async def test_a_storage_outage_during_the_catch_up_after_downtime(
    harness: DiscordHarness,
) -> None:
    fake, clock, storage = harness.fake, harness.clock, harness.storage
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await harness.stop(adapter)
    await fake.say("two", live=False)
    await fake.say("three", live=False)
    storage.down = True

    adapter = await harness.start()
    await fake.wait_for(lambda: storage.refused == 1 and clock.sleepers == 1)
    await fake.say("four")
    await fake.wait_for(lambda: adapter.catchup.held == 1)
    storage.down = False
    await clock.advance(1)
    await answered(harness, 4)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: two", "echo: three", "echo: four"]
    assert await user_texts(harness, harness.dm_key()) == ["one", "two", "three", "four"]


async def test_other_channels_go_on_while_one_is_behind(harness: DiscordHarness) -> None:
    fake, clock, storage = harness.fake, harness.clock, harness.storage
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    storage.down = True
    await fake.say("two")
    await fake.wait_for(lambda: storage.refused == 2 and clock.sleepers == 1)
    storage.down = False

    # Storing works again, but Ana's DM waits for its retry: what she says
    # now is held behind "two". Ben's DM goes on.
    await fake.say("three")
    await fake.wait_for(lambda: adapter.catchup.held == 1)
    await fake.say("hello", author=fake.ben)
    await answered(harness, 2)
    assert fake.texts()[1:] == ["echo: hello"]

    await clock.advance(1)
    await answered(harness, 4)
    await settled(harness, adapter)
    assert fake.texts(fake.dm(fake.ana)) == ["echo: one", "echo: two", "echo: three"]


async def test_messages_held_at_a_stop_are_answered_after_the_restart(
    harness: DiscordHarness,
) -> None:
    fake, clock, storage = harness.fake, harness.clock, harness.storage
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    storage.down = True
    await fake.say("two")
    await fake.wait_for(lambda: storage.refused == 2 and clock.sleepers == 1)
    await fake.say("three")
    await fake.wait_for(lambda: adapter.catchup.held == 1)

    # Storing works again, but the retry has not run when kept stops: stored
    # now, "three" would hide "two" from the next start's history read.
    storage.down = False
    await harness.stop(adapter)
    await fake.wait_for(lambda: adapter.catchup.held == 0)
    assert fake.texts() == ["echo: one"]
    assert await user_texts(harness, harness.dm_key()) == ["one"]
    adapter = await harness.start()
    await answered(harness, 3)
    await settled(harness, adapter)

    assert fake.texts() == ["echo: one", "echo: two", "echo: three"]
    assert await user_texts(harness, harness.dm_key()) == ["one", "two", "three"]


async def test_a_failed_history_read_is_retried_with_backoff(harness: DiscordHarness) -> None:
    fake, clock = harness.fake, harness.clock
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    await harness.stop(adapter)
    await fake.say("two", live=False)
    fake.script("history", Script(400, "Bad Request"))

    adapter = await harness.start()
    await fake.wait_for(lambda: len(fake.calls_to("history")) == 1 and clock.sleepers == 1)
    assert fake.texts() == ["echo: one"]
    await clock.advance(1)

    assert await answered(harness, 2) == ["echo: one", "echo: two"]
    await settled(harness, adapter)


async def test_a_reconnect_cuts_a_backoff_short(harness: DiscordHarness) -> None:
    fake, clock = harness.fake, harness.clock
    adapter = await harness.start()
    await fake.say("one")
    await answered(harness, 1)
    # The turn's "typing…" refresh sleeps on the clock too: let it end, so
    # the one sleeper below is the catch-up's backoff.
    await fake.wait_for(lambda: clock.sleepers == 0)
    await fake.say("two", live=False)
    fake.script("history", Script(400, "Bad Request"))
    await harness.reconnect(adapter)
    await fake.wait_for(lambda: clock.sleepers == 1)

    # Live messages wait for the listing a READY starts: not for the backoff
    # (the clock never moves here, so an uncut backoff would never end).
    await harness.reconnect(adapter)
    await fake.say("hello", author=fake.ben)

    await answered(harness, 3)
    await settled(harness, adapter)
    assert sorted(fake.texts()[1:]) == ["echo: hello", "echo: two"]  # two chats: any order
    await fake.wait_for(lambda: clock.sleepers == 0)  # the last turn's typing ends too


async def test_a_real_write_lock_past_the_busy_timeout_is_caught_up_once_it_is_gone(
    tmp_path: Path,
) -> None:
    async with discord_harness(tmp_path, busy_timeout=0.05) as harness:
        fake, clock = harness.fake, harness.clock
        adapter = await harness.start()
        # Another process holds SQLite's write lock for longer than the busy timeout.
        blocker = sqlite3.connect(tmp_path / "kept.sqlite", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            await fake.say("locked out")
            await fake.wait_for(lambda: adapter.catchup.behind() and clock.sleepers)
            assert fake.texts() == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        for _ in range(200):
            if fake.texts():
                break
            await clock.advance(1)
            await asyncio.sleep(0.01)
        await settled(harness, adapter)

        assert fake.texts() == ["echo: locked out"]
        assert await user_texts(harness, harness.dm_key()) == ["locked out"]


async def test_a_channel_keeps_no_lock_once_nothing_is_in_it(harness: DiscordHarness) -> None:
    fake, model = harness.fake, harness.model
    adapter = await harness.start()
    # A channel is held while each turn is in the model: the count going back to
    # zero is not a count that never moved.
    in_turn: list[tuple[str, int]] = []
    complete = model.complete

    async def watched(role: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if role not in ("extraction", "heartbeat"):
            in_turn.append((messages[-1]["content"], adapter.catchup.busy_channels))
        return await complete(role, messages, **kwargs)

    model.complete = watched  # type: ignore[method-assign]
    await fake.say("one")
    await fake.say("hello", author=fake.ben)
    await fake.say("in the channel", channel=fake.general, mention=True)
    await answered(harness, 3)
    await settled(harness, adapter)
    await fake.wait_for(lambda: adapter.catchup.busy_channels == 0, within=1.0)
    assert adapter.catchup.busy_channels == 0
    assert sorted(text for text, _ in in_turn) == ["hello", "in the channel", "one"]
    assert all(held >= 1 for _, held in in_turn), in_turn

    # A READY catches up every known channel, each holding its channel.
    await fake.say("lost in transit", live=False)
    await harness.reconnect(adapter)
    await answered(harness, 4)
    await settled(harness, adapter)
    await fake.wait_for(lambda: adapter.catchup.busy_channels == 0, within=1.0)
    assert adapter.catchup.busy_channels == 0
    assert in_turn[3][0] == "lost in transit" and in_turn[3][1] >= 1, in_turn
    assert "echo: lost in transit" in fake.texts()


async def test_a_message_the_store_refuses_is_told_once_and_holds_nothing(
    harness: DiscordHarness,
) -> None:
    fake, clock = harness.fake, harness.clock
    refuses = Unstorable(harness.store, sessions={harness.dm_key()}, poison="\ud800")
    adapter = await harness.start()
    await fake.say("a message the store refuses")
    await fake.wait_for(lambda: fake.texts() == [REFUSED_NOTICE])
    await settled(harness, adapter)
    assert adapter.catchup.held == 0 and adapter.catchup.behind() == []
    await fake.say("hello", author=fake.ben)
    await answered(harness, 2)
    for _ in range(30):  # no retry comes later
        await clock.advance(1)
        await asyncio.sleep(0)
    assert refuses.attempts == 1
    assert fake.texts() == [REFUSED_NOTICE, "echo: hello"]


async def test_an_attachment_read_back_by_the_catch_up_gets_no_notice(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("one")
    await fake.wait_for(lambda: fake.texts())
    await harness.stop(adapter)
    photo = await fake.say("", live=False)
    photo["attachments"] = [
        {"id": "9", "filename": "a.png", "size": 1, "url": "u", "proxy_url": "u"}
    ]
    await fake.say("two", live=False)

    adapter = await harness.start()
    await fake.wait_for(lambda: len(fake.texts()) >= 2)
    await adapter.catchup.idle()

    assert fake.texts() == ["echo: one", "echo: two"]
