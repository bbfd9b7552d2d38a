"""Several workers split Discord's gateway by shard: each identifies with
its own shards, only shard 0's worker syncs the slash commands, and each
catches up only the chats its shards receive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.config.model import KeptConfig
from core.store.base import NewMessage
from tests.support.discord_harness import DiscordHarness, discord_harness


@pytest.fixture
async def sharded(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path, shardCount=2, shardIds=[1]) as h:
        yield h


async def test_a_worker_identifies_with_its_own_shards_and_leaves_sync_to_shard_0(
    sharded: DiscordHarness,
) -> None:
    adapter = await sharded.start()
    assert [i["shard"] for i in sharded.fake.identifies] == [[1, 2]]
    assert adapter.bot.shard_count == 2
    assert sharded.fake.calls_to("commands") == []


async def test_a_worker_catches_up_only_the_chats_its_shards_receive(
    sharded: DiscordHarness,
) -> None:
    fake, store, now = sharded.fake, sharded.store, sharded.clock.now()
    dm = fake.dm(fake.ana)
    for kind, chat in (("private", dm), ("channel", fake.general)):
        key = f"agent:main:discord:{kind}:{chat}"
        await store.ensure_session(
            key,
            agent_id="main",
            platform="discord",
            chat_id=str(chat),
            chat_kind=kind,  # type: ignore[arg-type]
            thread_id=None,
            now=now,
        )
        await store.add_message(NewMessage(key, "user", "x", now, platform_message_id="1"))
    adapter = await sharded.start()
    await adapter.catchup.idle()
    read = {c.path for c in fake.calls_to("history")}
    assert f"channels/{dm}/messages" not in read  # DMs arrive on shard 0
    guild_on_ours = (fake.guild_id >> 22) % 2 == 1
    assert (f"channels/{fake.general}/messages" in read) == guild_on_ours


def test_shard_ids_are_checked_against_the_shard_count() -> None:
    with pytest.raises(ValueError, match="shardIds: needs shardCount"):
        KeptConfig.model_validate({"channels": {"discord": {"shardIds": [0]}}})
    with pytest.raises(ValueError, match=r"shardIds: \[3\] must be below shardCount"):
        KeptConfig.model_validate({"channels": {"discord": {"shardCount": 2, "shardIds": [3]}}})
    with pytest.raises(ValueError, match="shardIds: lists a shard twice"):
        KeptConfig.model_validate({"channels": {"discord": {"shardCount": 2, "shardIds": [1, 1]}}})
    settings = KeptConfig.model_validate(
        {"channels": {"discord": {"shardCount": 4, "shardIds": [1, 3]}}}
    ).channels.discord
    assert [settings.runs_shard(i) for i in range(4)] == [False, True, False, True]
    assert KeptConfig().channels.discord.runs_shard(7)
