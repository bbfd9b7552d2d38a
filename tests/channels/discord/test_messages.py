"""Discord message flows through dpytest: which messages become turns, where
the reply goes, how it is split, and that model output never pings anyone."""

from __future__ import annotations

import discord
import discord.ext.test as dpytest

from channels.discord.adapter import intents
from core.search.redact import Redactor
from core.store.base import SearchScope
from tests.support.discord_dpytest import (
    Rig,
    make_thread,
    message_dict,
    record_payloads,
    reply_to,
    sent_messages,
)
from tests.support.scripted_model import text
from tests.support.store_helpers import index_consistency


def mention(rig: Rig) -> str:
    assert rig.bot.user is not None
    return f"<@{rig.bot.user.id}>"


async def found(rig: Rig, key: str, words: str) -> bool:
    scope = SearchScope(session_key=key)
    return bool(await rig.store.search(words, scope=scope, limit=5, redactor=Redactor()))


async def history(rig: Rig, key: str) -> list[tuple[str, str]]:
    rows = await rig.store.history(key, before_turn_of=10**12, limit=100)
    return [(r.role, r.text) for r in rows]


async def test_a_dm_is_a_turn_in_the_private_session(rig: Rig) -> None:
    user = rig.member(0)
    dm = await user.create_dm()

    await dpytest.message("hello there", dm, user._user)

    [reply] = sent_messages()
    assert reply.channel.id == dm.id
    assert reply.content == "echo: hello there"
    key = f"agent:main:discord:private:{dm.id}"
    assert await history(rig, key) == [("user", "hello there"), ("assistant", "echo: hello there")]
    assert rig.typing, "typing is shown while the model works"


async def test_server_message_needs_a_mention(rig: Rig) -> None:
    channel, user = rig.channel(0), rig.member(0)

    await dpytest.message("just chatting among ourselves", channel, user)
    assert sent_messages() == []
    assert rig.model.requests == []

    await dpytest.message(f"{mention(rig)} what's up?", channel, user)
    [reply] = sent_messages()
    assert reply.channel.id == channel.id
    # The bot's own mention is not part of what the model reads.
    assert reply.content == "echo: what's up?"
    key = f"agent:main:discord:channel:{channel.id}"
    assert (await history(rig, key))[0] == ("user", "what's up?")


async def test_other_mentions_read_as_names(rig: Rig) -> None:
    channel, user, friend = rig.channel(0), rig.member(0), rig.member(1)

    await dpytest.message(f"{mention(rig)} say hi to <@{friend.id}>", channel, user)

    [reply] = sent_messages()
    assert reply.content == f"echo: say hi to @{friend.display_name}"


async def test_a_reply_to_the_bot_is_a_turn_without_mention(rig: Rig) -> None:
    channel, user = rig.channel(0), rig.member(0)
    await dpytest.message(f"{mention(rig)} first", channel, user)
    [first] = sent_messages()

    await reply_to(rig.bot, "and a follow-up question", channel, user, first)

    [second] = sent_messages()
    assert second.content == "echo: and a follow-up question"


async def test_a_thread_keeps_its_own_session_and_gets_the_reply(rig: Rig) -> None:
    channel, user = rig.channel(0), rig.member(0)
    thread = make_thread(rig.bot, channel, user)

    await dpytest.message(f"{mention(rig)} in the thread", thread, user)

    [reply] = sent_messages()
    assert reply.channel.id == thread.id
    key = f"agent:main:discord:channel:{channel.id}:thread:{thread.id}"
    assert await history(rig, key) == [
        ("user", "in the thread"),
        ("assistant", "echo: in the thread"),
    ]
    session = await rig.store.get_session(key)
    assert session is not None
    assert (session.chat_id, session.thread_id) == (str(channel.id), str(thread.id))
    # The parent channel's session is another one, and stays empty.
    assert await rig.store.get_session(f"agent:main:discord:channel:{channel.id}") is None


async def test_the_bots_own_messages_are_ignored(rig: Rig) -> None:
    channel = rig.channel(0)

    await channel.send(f"{mention(rig)} talking to myself")
    await dpytest.run_all_events()

    assert [m.content for m in sent_messages()] == [f"{mention(rig)} talking to myself"]
    assert rig.model.requests == []


async def test_another_bots_message_is_ignored(rig: Rig) -> None:
    channel = rig.channel(0)
    other = discord.ext.test.backend.make_user("OtherBot", "0042")
    other.bot = True
    discord.ext.test.backend.make_member(other, rig.guild)

    await dpytest.message(f"{mention(rig)} beep", channel, rig.guild.get_member(other.id))

    assert sent_messages() == []
    assert rig.model.requests == []


async def test_a_long_reply_goes_out_in_two_messages(rig: Rig) -> None:
    first = "First paragraph. " * 70  # ~1,200 characters
    second = "Second paragraph. " * 100  # ~1,800 characters
    answer = f"{first.strip()}\n\n{second.strip()}"
    assert len(answer) > 2900
    rig.model.steps.append(text(answer))
    channel, user = rig.channel(0), rig.member(0)

    await dpytest.message(f"{mention(rig)} tell me a lot", channel, user)

    parts = [m.content for m in sent_messages()]
    assert len(parts) == 2
    assert all(len(p) <= 2000 for p in parts)
    assert parts == [first.strip(), second.strip()]  # split at the paragraph


async def test_everyone_and_roles_in_model_output_never_ping(rig: Rig) -> None:
    payloads = record_payloads(rig.bot)
    role = discord.ext.test.backend.make_role("mods", rig.guild)
    rig.model.steps.append(text(f"@everyone @here <@&{role.id}> <@{rig.member(1).id}> look!"))
    channel, user = rig.channel(0), rig.member(0)

    await dpytest.message(f"{mention(rig)} announce it", channel, user)

    [payload] = payloads
    assert payload["content"].startswith("@everyone @here")
    allowed = payload["allowed_mentions"]
    assert allowed["parse"] == []  # no everyone, no roles, no users
    assert not allowed.get("roles") and not allowed.get("users")


async def test_an_everyone_message_is_not_addressed_to_the_bot(rig: Rig) -> None:
    await dpytest.message("@everyone meeting at 5", rig.channel(0), rig.member(0))
    assert sent_messages() == []
    # The same message that does mention the bot is answered.
    await dpytest.message(f"{mention(rig)} @everyone meeting at 5", rig.channel(0), rig.member(0))
    [reply] = sent_messages()
    assert reply.content == "echo: @everyone meeting at 5"


async def test_allow_from_in_dms_and_groups_in_servers(rig: Rig) -> None:
    channel, allowed, stranger = rig.channel(0), rig.member(0), rig.member(1)
    settings = rig.config.channels.discord
    settings.dm_policy = "allowlist"
    settings.allow_from = [str(allowed.id)]

    await dpytest.message("hello?", await stranger.create_dm(), stranger._user)
    assert sent_messages() == []
    await dpytest.message("hello?", await allowed.create_dm(), allowed._user)
    assert [m.content for m in sent_messages()] == ["echo: hello?"]

    settings.group_policy = "allowlist"
    settings.groups = ["123456789012345678"]  # not this server
    await dpytest.message(f"{mention(rig)} hi again", channel, allowed)
    assert sent_messages() == []

    # A listed server: every member is served, not only `allowFrom`.
    settings.groups = [str(rig.guild.id)]
    await dpytest.message(f"{mention(rig)} hi", channel, stranger)
    await dpytest.message(f"{mention(rig)} hi", channel, allowed)
    assert len(sent_messages()) == 2

    # The old name of `groups` is still read.
    settings.groups = []
    settings.allow_guilds = [str(rig.guild.id)]
    await dpytest.message(f"{mention(rig)} and now?", channel, stranger)
    assert len(sent_messages()) == 1


async def test_edits_and_deletions_update_transcript_and_index(rig: Rig) -> None:
    rig.model.steps.append(text("Noted."))
    channel, user = rig.channel(0), rig.member(0)
    sent = await dpytest.message(f"{mention(rig)} my flight is on tuesday", channel, user)
    sent_messages()
    key = f"agent:main:discord:channel:{channel.id}"

    data = message_dict(sent)
    data["content"] = f"{mention(rig)} my flight is on wednesday"
    rig.bot._connection.parse_message_update(data)
    await dpytest.run_all_events()

    assert (await history(rig, key))[0] == ("user", "my flight is on wednesday")
    assert await found(rig, key, "wednesday") and not await found(rig, key, "tuesday")

    discord.ext.test.backend.delete_message(sent)
    await dpytest.run_all_events()
    assert [r for r, _ in await history(rig, key)] == ["assistant"]
    assert await index_consistency(rig.store, key) == (0, 0)


def test_intents_are_limited_to_what_is_needed() -> None:
    wanted = intents()
    assert not wanted.message_content  # privileged: only when configured
    assert intents(message_content=True).message_content
    assert wanted.guild_messages and wanted.dm_messages
    assert wanted.guilds
    assert not wanted.members and not wanted.presences and not wanted.typing
    assert not wanted.reactions and not wanted.voice_states
