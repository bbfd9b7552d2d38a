"""Discord's gateway events reach the adapter through the KeptEvents cog
(channels/discord/cog.py); its on_connect keeps discord.py's timing: the
catch-up is in place before the first live message after a READY. The real
discord.py client runs against the fake Discord (see test_discord_gateway_e2e)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.discord import DiscordAdapter
from channels.discord.cog import KeptEvents
from tests.support.discord_harness import DiscordHarness, discord_harness

# discord.py dispatches on_ready this long after the last GUILD_CREATE: far
# past the test, so only on_connect can have readied the catch-up in time.
READY_LATE = 60.0


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path) as h:
        yield h


async def test_the_cog_carries_every_gateway_listener(harness: DiscordHarness) -> None:
    adapter = await harness.start()
    cog = adapter.bot.get_cog("KeptEvents")
    assert isinstance(cog, KeptEvents)
    assert {name for name, _ in cog.get_listeners()} == {
        "on_connect",
        "on_ready",
        "on_message",
        "on_raw_message_edit",
        "on_raw_message_delete",
        "on_raw_bulk_message_delete",
    }


async def test_a_live_message_right_behind_ready_waits_for_the_catch_up(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    adapter = await harness.start()
    await fake.say("one")
    await fake.wait_for(lambda: len(fake.texts()) >= 1)
    await harness.stop(adapter)
    await fake.say("two", live=False)  # said while kept was down

    real_ready = fake._ready

    async def ready_then_live_message(shard: list[int] | None) -> None:
        await real_ready(shard)
        await fake.say("three")  # MESSAGE_CREATE right behind READY and GUILD_CREATE

    fake._ready = ready_then_live_message  # type: ignore[method-assign]
    late = DiscordAdapter(harness.context(), guild_ready_timeout=READY_LATE)
    harness.adapters.append(late)
    await late.start()
    harness.router.add(late)

    await fake.wait_for(lambda: len(fake.texts()) >= 3)
    assert fake.texts() == ["echo: one", "echo: two", "echo: three"]
    users = [text for role, text in await harness.transcript(harness.dm_key()) if role == "user"]
    assert users == ["one", "two", "three"]
