"""End to end: /export and /forget on Discord through the real discord.py
client against the fake Discord gateway and REST API: the export arrives as
an attachment of the ephemeral answer (multipart payload_json + files[0]),
and the Erase button works after the prompt."""

from __future__ import annotations

import json
from pathlib import Path

from core.commands.buttons import unpack
from core.messages import ForgetChoice
from core.privacy.export import document
from core.privacy.store import ErasedUser, ErasureCounts
from tests.support.discord_harness import discord_harness
from tests.support.scripted_model import text


async def test_discord_export_is_an_attachment_and_forget_erases(tmp_path: Path) -> None:
    async with discord_harness(tmp_path) as harness:
        fake = harness.fake
        await harness.start()
        dm = fake.dm(fake.ana)
        ana = ErasedUser("discord", fake.ana["id"])
        harness.model.steps.append(text("Good luck!"))
        await fake.say("my zebracorn interview is tomorrow", channel=dm)
        await fake.wait_for(lambda: fake.sent)
        await harness.services.manager.drain()

        await fake.interact({"id": "1", "name": "export", "type": 1}, channel=dm)
        await fake.wait_for(lambda: fake.callbacks)
        _, body = fake.callbacks[0]
        assert body["type"] == 4 and body["data"]["flags"] & 64  # ephemeral
        assert body["data"]["content"] == (
            "Everything I hold from you, from 1 chat, as one JSON document."
        )
        [attached] = fake.callback_files[0]
        assert attached.field == "files[0]"
        assert attached.filename == f"kept-export-discord-{fake.ana['id']}.json"
        sent = json.loads(attached.data)
        expected = document(
            await harness.services.backend.exports.export(ana), at=harness.clock.now()
        )
        assert sent == expected
        assert "my zebracorn interview is tomorrow" in attached.data.decode()

        await fake.interact({"id": "2", "name": "forget", "type": 1}, channel=dm)
        await fake.wait_for(lambda: len(fake.callbacks) == 2)
        _, body = fake.callbacks[1]
        assert body["data"]["content"].startswith(
            "This erases what I hold from you, in every chat: 1 private chat, 2 messages, "
            "1 usage record."
        )
        rows = body["data"]["components"]
        erase = rows[0]["components"][0]["custom_id"]
        assert isinstance(unpack(erase), ForgetChoice)

        prompt = fake.ephemeral(dm, body["data"]["content"], rows)
        press = {"custom_id": erase, "component_type": 2}
        await fake.interact(press, channel=dm, kind=3, message=prompt)
        await fake.wait_for(lambda: len(fake.callbacks) == 3)
        _, body = fake.callbacks[2]
        assert body["type"] == 7  # the prompt, edited: its buttons go
        assert body["data"]["content"].endswith(
            "-# Erased what I held from you: 1 private chat, 2 messages, 1 usage record. "
            "You can go on talking to me."
        )
        assert await harness.services.backend.erasure.count(ana) == ErasureCounts()
