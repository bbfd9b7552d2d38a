"""`/usage` through the real CommandTree on the dpytest bot, on both
backends: an ephemeral answer with the user's own UTC day and what is left
of `limits.perUser.tokensPerDay`; in a server channel still only theirs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import discord
import pytest

from tests.support.discord_dpytest import Responses, Rig, build_rig, said_privately, slash
from tests.support.usage_rows import record_call

CAP = {"limits": {"perUser": {"tokensPerDay": 10_000}}}


@pytest.fixture
async def rig(tmp_path: Path, storage_url: str) -> AsyncIterator[Rig]:
    rig = await build_rig(tmp_path, CAP, storage_url=storage_url)
    yield rig
    await rig.close()


async def seed(rig: Rig, alice: discord.Member, bob: discord.Member, channel: str) -> None:
    backend, now = rig.services.backend, rig.clock.now()
    await record_call(backend, "discord", str(alice.id), 1200, 300, now - timedelta(hours=1))
    await record_call(backend, "discord", str(bob.id), 4000, 4000, now, chat=channel)


async def test_in_a_dm_it_shows_the_users_own_day(rig: Rig, answers: Responses) -> None:
    alice, bob = rig.member(0), rig.member(1)
    dm = await alice.create_dm()
    await slash(rig.bot, "usage", channel=dm, user=alice._user)
    assert said_privately(answers).startswith(
        "Your use of the model today (the UTC day 2026-11-30): 0 calls"
    )
    await seed(rig, alice, bob, str(rig.channel(0).id))
    await slash(rig.bot, "usage", channel=dm, user=alice._user)
    shown = said_privately(answers)
    assert "1 call, 1,200 tokens in, 300 tokens out" in shown
    assert "Your daily allowance: 10,000 tokens, 8,500 left" in shown
    assert "nobody else's" not in shown  # a DM is theirs anyway
    assert rig.model.requests == []


async def test_in_a_server_channel_only_the_askers_own(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    await seed(rig, alice, bob, str(channel.id))
    await slash(rig.bot, "usage", channel=channel, user=alice)
    mine = said_privately(answers)
    assert "1 call, 1,200 tokens in" in mine and "4,000" not in mine
    assert "This is your own use, in every chat with me; nobody else's is shown." in mine
    await slash(rig.bot, "usage", channel=channel, user=bob)
    assert "1 call, 4,000 tokens in, 4,000 tokens out" in said_privately(answers)
