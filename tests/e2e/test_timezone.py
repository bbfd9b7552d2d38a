"""End to end: `/timezone` through the real client libraries against the fake
Bot API and the fake Discord gateway, and the next chat turn's prompt in the
zone just set."""

from __future__ import annotations

from pathlib import Path

from tests.support.discord_harness import discord_harness
from tests.support.telegram_harness import telegram_harness


async def test_telegram_timezone_then_a_turn_in_that_zone(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path, agents=[{"id": "main", "timezone": "UTC"}]) as tg:
        await tg.start()
        await tg.fake.push_message("/timezone Asia/Tokyo", chat_id=42)
        await tg.fake.wait_for(lambda: tg.fake.sent)
        assert tg.fake.texts() == [
            "Your time zone is now Asia/Tokyo (it is Mon 30 Nov 18:00 there)."
        ]

        await tg.fake.push_message("what time is it for me?", chat_id=42)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) == 2)
        system = tg.model.requests[0][1][0]["content"]
        assert "Current time for the user: Monday 2026-11-30 18:00 (Asia/Tokyo)" in system
        assert "on Telegram, in a private chat" in system
        # Another user of the same bot still reads the agent's zone.
        await tg.fake.push_message("and for me?", chat_id=43)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) == 3)
        other = next(r for r in tg.model.requests if r[1][-1]["content"] == "and for me?")
        assert "(UTC)" in other[1][0]["content"]


async def test_discord_timezone_through_the_gateway(tmp_path: Path) -> None:
    async with discord_harness(tmp_path) as harness:
        fake = harness.fake
        await harness.start()
        data = {
            "id": "1",
            "name": "timezone",
            "type": 1,
            "options": [{"name": "zone", "type": 3, "value": "europe/paris"}],
        }
        await fake.interact(data, channel=fake.dm(fake.ana))
        await fake.wait_for(lambda: fake.callbacks)
        _, body = fake.callbacks[0]
        assert body["type"] == 4 and body["data"]["flags"] & 64  # ephemeral
        assert body["data"]["content"].startswith("Your time zone is now Europe/Paris")
        found = await harness.services.backend.user_zones.zone("discord", fake.ana["id"])
        assert found is not None and found.timezone == "Europe/Paris"

        # Autocomplete (type 4) offers IANA names.
        data["options"] = [{"name": "zone", "type": 3, "value": "asia/tok", "focused": True}]
        await fake.interact(data, channel=fake.dm(fake.ana), kind=4)
        await fake.wait_for(lambda: len(fake.callbacks) == 2)
        _, body = fake.callbacks[1]
        assert body["type"] == 8
        assert [c["value"] for c in body["data"]["choices"]] == ["Asia/Tokyo"]
