"""Discord: a message with only attachments or stickers, where a text would
be answered, gets the fixed notice of what kept can read, on dpytest. That a
message read back from history by the catch-up does not (it is never stored,
so it would be noticed again after every restart) is in test_catchup.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import discord
import discord.ext.test as dpytest

from channels.discord.scope import media_kind
from channels.media import unreadable_notice
from tests.support.discord_dpytest import Rig, build_rig, record_payloads, sent_messages


def mention(rig: Rig) -> str:
    assert rig.bot.user is not None
    return f"<@{rig.bot.user.id}>"


async def test_an_attachment_only_dm_gets_the_notice_once(rig: Rig) -> None:
    payloads = record_payloads(rig.bot)
    user = rig.member(0)
    dm = await user.create_dm()

    await dpytest.message("", dm, user._user, attachments=["holiday.jpg"])

    [notice] = sent_messages()
    assert notice.channel.id == dm.id
    assert notice.content == unreadable_notice("photo")
    assert "message_reference" not in payloads[0]  # a DM needs no quote
    assert rig.model.requests == []
    key = f"agent:main:discord:private:{dm.id}"
    assert await rig.store.history(key, before_turn_of=10**12, limit=10) == []


async def test_text_beside_an_attachment_is_answered_as_text(rig: Rig) -> None:
    user = rig.member(0)
    dm = await user.create_dm()

    await dpytest.message("what do you think?", dm, user._user, attachments=["plan.pdf"])

    [reply] = sent_messages()
    assert reply.content == "echo: what do you think?"


async def test_in_a_server_only_an_addressed_attachment_gets_the_notice(rig: Rig) -> None:
    payloads = record_payloads(rig.bot)
    channel, user = rig.channel(0), rig.member(0)

    await dpytest.message("", channel, user, attachments=["song.mp3"])
    assert sent_messages() == []

    asked = await dpytest.message(mention(rig), channel, user, attachments=["song.mp3"])
    [notice] = sent_messages()
    assert notice.channel.id == channel.id
    assert notice.content == unreadable_notice("audio")
    [payload] = payloads
    assert payload["message_reference"]["message_id"] == asked.id  # quotes what it is about


async def test_an_attachment_from_someone_not_allowed_gets_nothing(tmp_path: Path) -> None:
    rig = await build_rig(
        tmp_path,
        {
            "channels": {
                "discord": {"enabled": True, "dmPolicy": "allowlist", "allowFrom": ["nobody"]}
            }
        },
    )
    try:
        user = rig.member(0)
        dm = await user.create_dm()
        await dpytest.message("", dm, user._user, attachments=["a.png"])
        assert sent_messages() == []
        # Once allowed, the same attachment gets the notice.
        rig.config.channels.discord.allow_from = [str(user.id)]
        await dpytest.message("", dm, user._user, attachments=["a.png"])
        [notice] = sent_messages()
        assert notice.content == unreadable_notice("photo")
    finally:
        await rig.close()


def _message(**fields: Any) -> discord.Message:
    base: dict[str, Any] = {
        "stickers": [],
        "attachments": [],
        "flags": discord.MessageFlags(),
    }
    return SimpleNamespace(**{**base, **fields})  # type: ignore[return-value]


def _attachment(filename: str, content_type: str | None = None) -> Any:
    return SimpleNamespace(filename=filename, content_type=content_type)


def test_media_kind_reads_stickers_voice_messages_and_content_types() -> None:
    voice = discord.MessageFlags(voice=True)
    assert media_kind(_message(stickers=[object()])) == "sticker"
    assert media_kind(_message(attachments=[_attachment("voice.ogg")], flags=voice)) == "voice"
    assert media_kind(_message(attachments=[_attachment("x", "image/png")])) == "photo"
    assert media_kind(_message(attachments=[_attachment("x", "image/gif")])) == "animation"
    assert media_kind(_message(attachments=[_attachment("clip.mp4")])) == "video"
    assert media_kind(_message(attachments=[_attachment("notes.bin")])) == "file"
    assert media_kind(_message()) is None
