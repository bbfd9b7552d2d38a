"""Test rig for the Discord adapter: dpytest for messages, hand-built
interaction payloads for slash commands and buttons.

Things dpytest 0.7 does not do for a discord.py 2.7 bot, handled here:

- `dpytest.configure` replaces the bot's ConnectionState, so everything set
  on the old one is lost: the event loop (`typing()` needs it), the command
  tree link (interactions would never reach the tree) and registered dynamic
  items (setup_hook is run again afterwards).
- Its members are only cached with the members intent, which the adapter
  rightly does not ask for; the test state gets it (mentions are resolved
  through the member cache).
- It has no threads, no message references and no interactions: threads are
  created through `parse_thread_create`, replies through `parse_message_create`
  with a `message_reference`, interactions from their gateway payloads with
  the HTTP answer captured by patching the webhook adapter.
- Its fake HTTP reads the caller's local `channel`, so a wrapper around
  `send_message` must hold a local of that name.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import discord
import discord.ext.test as dpytest
from discord.ext.test import callbacks, factories
from discord.webhook.async_ import AsyncWebhookAdapter

from bot.services import Services, build_services
from channels.context import ChannelContext
from channels.discord import DiscordAdapter
from channels.discord.scope import chat_of
from channels.router import AdapterRouter
from core.clock import TestClock
from core.commitments.model import Commitment, NewCommitment, Scope
from core.config.model import KeptConfig
from core.store import Store
from core.store.backends import open_backend, sqlite_backend
from tests.support.access import OPEN_ACCESS
from tests.support.scripted_model import ScriptedModel
from tests.support.store_helpers import open_store

THREAD_METADATA = {
    "archived": False,
    "auto_archive_duration": 1440,
    "archive_timestamp": "2026-11-30T09:00:00+00:00",
    "locked": False,
}


async def attach(bot: discord.Client, *, members: int = 3, channels: int = 2) -> Any:
    """Configure dpytest for `bot` (see the module docstring); returns its config."""
    await bot._async_setup_hook()  # type: ignore[attr-defined]
    state = bot._connection  # type: ignore[attr-defined]
    cached = discord.Intents(state.intents.value)
    cached.members = True
    state._intents = cached
    state.member_cache_flags = discord.MemberCacheFlags.from_intents(cached)
    dpytest.configure(bot, members=members, text_channels=channels, voice_channels=0)
    fake = bot._connection  # type: ignore[attr-defined]
    fake.loop = asyncio.get_running_loop()
    fake._command_tree = getattr(bot, "tree", None)
    fake.application_id = bot.user.id if bot.user else None
    await bot.setup_hook()
    return dpytest.get_config()


def make_thread(bot: discord.Client, parent: discord.TextChannel, owner: discord.Member) -> Any:
    data = {
        "id": str(factories.make_id()),
        "guild_id": str(parent.guild.id),
        "parent_id": str(parent.id),
        "owner_id": str(owner.id),
        "name": "interview prep",
        "type": discord.ChannelType.public_thread.value,
        "message_count": 0,
        "member_count": 1,
        "rate_limit_per_user": 0,
        "thread_metadata": THREAD_METADATA,
    }
    bot._connection.parse_thread_create(data)  # type: ignore[attr-defined]
    return parent.guild.get_thread(int(data["id"]))


async def reply_to(
    bot: discord.Client, content: str, channel: Any, author: Any, replied: discord.Message
) -> discord.Message:
    """A message from `author` replying to `replied` (dpytest has no replies)."""
    data = factories.make_message_dict(channel, author, content=content, type=19)
    data["message_reference"] = {
        "message_id": str(replied.id),
        "channel_id": str(replied.channel.id),
        "guild_id": str(replied.guild.id) if replied.guild else None,
    }
    data["referenced_message"] = message_dict(replied)
    state = bot._connection  # type: ignore[attr-defined]
    state.parse_message_create(data)
    await dpytest.run_all_events()
    return state._get_message(int(data["id"]))


def message_dict(message: discord.Message) -> dict[str, Any]:
    """A message as gateway JSON (dpytest's own version leaves out the channel)."""
    data = factories.dict_from_message(message)
    data["channel_id"] = str(message.channel.id)
    if message.guild is not None:
        data["guild_id"] = str(message.guild.id)
    return data


def sent_messages() -> list[discord.Message]:
    """Every message the bot sent since the last call, oldest first."""
    out = []
    while not dpytest.sent_queue.empty():
        out.append(dpytest.get_message())
    return out


def record_payloads(bot: discord.Client) -> list[dict[str, Any]]:
    """Record the JSON payload of every message the bot sends."""
    http = bot.http
    original = http.send_message
    payloads: list[dict[str, Any]] = []

    async def send_message(channel_id: int, *, params: Any) -> Any:
        # dpytest's fake reads `channel` from its caller's frame: be that caller.
        channel = sys._getframe(1).f_locals.get("channel")  # noqa: F841
        payloads.append(dict(params.payload or {}))
        return await original(channel_id, params=params)

    http.send_message = send_message  # type: ignore[method-assign]
    return payloads


# --- interactions -----------------------------------------------------------

_ids = itertools.count(1)


@dataclass
class Responses:
    """Interaction callbacks the bot made: (type, data) in order."""

    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # The files sent with them (an ephemeral /export): name and bytes.
    files: list[tuple[str, bytes]] = field(default_factory=list)


def _payload_json(multipart: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The JSON part of a multipart request (a message with files)."""
    part = next((p for p in multipart or () if p.get("name") == "payload_json"), None)
    return json.loads(part["value"]) if part is not None else {}


def capture_responses(monkeypatch: Any) -> Responses:
    seen = Responses()

    def create_interaction_response(
        self: Any, interaction_id: int, token: str, *, session: Any, params: Any, **_: Any
    ) -> Awaitable[dict[str, Any]]:
        payload = params.payload or _payload_json(params.multipart)
        seen.calls.append((payload.get("type", 0), payload.get("data") or {}))
        seen.files += [(f.filename or "", f.fp.read()) for f in params.files or ()]

        async def answer() -> dict[str, Any]:
            return {"interaction": {"id": str(interaction_id), "type": payload.get("type", 0)}}

        return answer()

    def execute_webhook(
        self: Any, webhook_id: int, token: str, *, payload: Any = None, files: Any = None, **_: Any
    ) -> Awaitable[dict[str, Any]]:
        """A follow-up message (a second ephemeral answer): recorded as type 0."""
        data = dict(payload or {})
        seen.calls.append((0, data))
        seen.files += [(f.filename or "", f.fp.read()) for f in files or ()]

        async def answer() -> dict[str, Any]:
            return {
                "id": str(factories.make_id()), "channel_id": str(webhook_id),
                "author": {"id": str(webhook_id), "username": "kept", "discriminator": "0000",
                           "avatar": None, "bot": True},
                "content": data.get("content", ""), "timestamp": "2026-11-30T09:00:00+00:00",
                "edited_timestamp": None, "tts": False, "mention_everyone": False,
                "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
                "pinned": False, "type": 0, "flags": data.get("flags", 0), "components": [],
            }  # fmt: skip

        return answer()

    monkeypatch.setattr(
        AsyncWebhookAdapter, "create_interaction_response", create_interaction_response
    )
    monkeypatch.setattr(AsyncWebhookAdapter, "execute_webhook", execute_webhook)
    return seen


def _channel_payload(channel: Any) -> dict[str, Any]:
    if isinstance(channel, discord.DMChannel):
        return {"id": str(channel.id), "type": 1}
    data: dict[str, Any] = {
        "id": str(channel.id),
        "type": channel.type.value,
        "guild_id": str(channel.guild.id),
        "name": channel.name,
    }
    if isinstance(channel, discord.Thread):
        data["parent_id"] = str(channel.parent_id)
        data["thread_metadata"] = THREAD_METADATA
    return data


def interaction_payload(
    bot: discord.Client,
    *,
    kind: int,
    data: dict[str, Any],
    channel: Any,
    user: discord.abc.User,
    permissions: discord.Permissions | None = None,
    message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": str(factories.make_id()),
        "application_id": str(bot.user.id if bot.user else 1),
        "type": kind,
        "token": f"token-{next(_ids)}",
        "version": 1,
        "data": data,
        "channel_id": str(channel.id),
        "channel": _channel_payload(channel),
        "locale": "en-US",
        "attachment_size_limit": 8 * 1024 * 1024,
        "entitlements": [],
        "authorizing_integration_owners": {},
        "app_permissions": "0",
    }
    user_data = factories.dict_from_user(user)
    guild = getattr(channel, "guild", None)
    if guild is not None:
        payload["guild_id"] = str(guild.id)
        payload["context"] = 0
        perms = permissions if permissions is not None else discord.Permissions.none()
        payload["member"] = {
            "user": user_data,
            "roles": [],
            "joined_at": "2026-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
            "permissions": str(perms.value),
            "nick": getattr(user, "nick", None),
        }
    else:
        payload["context"] = 1
        payload["user"] = user_data
    if message is not None:
        payload["message"] = message
    return payload


def _option(name: str, value: str, focused: bool) -> dict[str, Any]:
    opt: dict[str, Any] = {"name": name, "type": 3, "value": value}
    if focused:
        opt["focused"] = True
    return opt


async def slash(
    bot: discord.ext.commands.Bot,
    command: str,
    *,
    channel: Any,
    user: discord.abc.User,
    options: dict[str, str] | None = None,
    permissions: discord.Permissions | None = None,
    focused: str | None = None,
    files_up_to: int = 0,
) -> None:
    """Run `/group sub` or a top-level `/name` through the real CommandTree
    (dpytest does not dispatch interactions); with `focused`, as the
    autocomplete request for that option; `files_up_to`: the attachment size
    limit the interaction names, when not the default."""
    group, _, sub = command.partition(" ")
    opts = [_option(k, v, k == focused) for k, v in (options or {}).items()]
    data: dict[str, Any] = {
        "id": "1",
        "name": group,
        "type": 1,
        "options": [{"name": sub, "type": 1, "options": opts}] if sub else opts,
    }
    if getattr(channel, "guild", None) is not None:
        data["guild_id"] = str(channel.guild.id)
    kind = 4 if focused else 2
    payload = interaction_payload(
        bot, kind=kind, data=data, channel=channel, user=user, permissions=permissions
    )
    if files_up_to:
        payload["attachment_size_limit"] = files_up_to
    interaction = discord.Interaction(data=payload, state=bot._connection)  # type: ignore[arg-type]
    await bot.tree._call(interaction)


EPHEMERAL = 64


def said_privately(answers: Responses) -> str:
    """The last interaction answer's text, which only the asker sees."""
    kind, data = answers.calls[-1]
    assert kind == 4 and data.get("flags", 0) & EPHEMERAL
    return str(data["content"])


async def click(
    bot: discord.Client,
    *,
    message: discord.Message,
    components: list[dict[str, Any]],
    custom_id: str,
    user: discord.abc.User,
    permissions: discord.Permissions | None = None,
) -> None:
    """A button click, dispatched as the gateway would (INTERACTION_CREATE)."""
    msg = message_dict(message)
    msg["components"] = components
    payload = interaction_payload(
        bot,
        kind=3,
        data={"custom_id": custom_id, "component_type": 2},
        channel=message.channel,
        user=user,
        permissions=permissions,
        message=msg,
    )
    before = asyncio.all_tasks()
    bot._connection.parse_interaction_create(payload)  # type: ignore[attr-defined]
    for _ in range(3):  # the dynamic item task, then what it starts
        new = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()]
        if not new:
            break
        await asyncio.gather(*new, return_exceptions=True)
        before |= set(new)


def button_ids(payload: dict[str, Any]) -> list[str]:
    """custom_ids of the buttons in a sent message payload."""
    return [c["custom_id"] for row in payload.get("components", []) for c in row["components"]]


# --- the whole rig -------------------------------------------------------------


@dataclass
class Rig:
    """Real services on a temp SQLite store, the adapter on a dpytest bot."""

    clock: TestClock
    store: Store
    model: Any  # a core.llm.Model: ScriptedModel unless the test brings its own
    router: AdapterRouter
    services: Services
    adapter: DiscordAdapter
    config: KeptConfig
    dp: Any
    typing: list[Any] = field(default_factory=list)

    @property
    def bot(self) -> discord.ext.commands.Bot:
        return self.adapter.bot

    @property
    def guild(self) -> discord.Guild:
        return self.dp.guilds[0]

    def member(self, index: int) -> discord.Member:
        return self.dp.members[index]

    def channel(self, index: int) -> discord.TextChannel:
        return self.dp.channels[index]

    def scope(self, channel: Any, sender: Any) -> Scope:
        """The commitment scope of a chat and sender, as the adapter maps it."""
        ref = chat_of(channel)
        assert ref is not None
        key = ref.session_key("main")
        t = ref.target
        return Scope(
            "main", key, "discord", t.chat_id, t.thread_id, str(sender.id), chat_kind=ref.chat_kind
        )

    async def seed(
        self, channel: Any, sender: Any, suggested: str = "How did it go?"
    ) -> Commitment:
        """An active commitment of `sender` in `channel`'s session, due in 6 hours."""
        ref = chat_of(channel)
        assert ref is not None
        scope, now = self.scope(channel, sender), self.clock.now()
        await self.store.ensure_session(
            scope.session_key,
            agent_id="main",
            platform="discord",
            chat_id=scope.chat_id,
            chat_kind=ref.chat_kind,
            thread_id=scope.thread_id,
            now=now,
        )
        new = NewCommitment(
            scope=scope,
            kind="event_check_in",
            sensitivity="routine",
            source="inferred_user_context",
            reason="user has a job interview",
            suggested_text=suggested,
            dedupe_key=f"k-{suggested}-{scope.session_key}-{scope.sender_id}",
            confidence=0.9,
            due_earliest=now + timedelta(hours=6),
            due_latest=now + timedelta(hours=30),
            due_timezone="UTC",
            source_message_id=None,
            created_at=now,
        )
        store = self.services.backend.commitments
        return (await store.apply_extraction(scope, [new], [], now=now)).created[0]

    async def status(self, commitment_id: str) -> str:
        found = await self.services.backend.commitments.get(commitment_id)
        assert found is not None
        return found.status

    async def settle(self) -> None:
        """Let the background extraction pass finish (its batch window is on the clock)."""
        await dpytest.run_all_events()
        await self.services.manager.drain()
        for _ in range(500):
            if self.services.extraction.queued == 0:
                break
            await self.clock.advance(1)
            await asyncio.sleep(0.005)
        await asyncio.wait_for(self.services.extraction.wait_idle(), 5)

    async def close(self) -> None:
        await self.services.manager.drain()
        await self.services.extraction.stop(drain_seconds=0.5)
        await dpytest.empty_queue()
        callbacks.remove_callback("send_typing")
        await self.services.backend.close()


async def build_rig(
    tmp_path: Any,
    config: dict[str, Any] | None = None,
    model: Any = None,
    clock: TestClock | None = None,
    storage_url: str | None = None,
) -> Rig:
    """`storage_url`: the backend to run on (the storage_url fixture's);
    default a SQLite file in `tmp_path`."""
    settings: dict[str, Any] = {
        "commitments": {"enabled": True},
        "channels": {"discord": {"enabled": True, **OPEN_ACCESS}},
        "agents": [{"id": "main", "timezone": "Europe/Paris"}],
    }
    settings.update(config or {})
    kept = KeptConfig.model_validate(settings)
    clock = clock or TestClock()
    if storage_url is not None:
        backend = open_backend(storage_url)
    else:
        backend = sqlite_backend(open_store(f"sqlite:///{tmp_path}/kept.sqlite"))
    await backend.open()
    store = backend.store
    model = model if model is not None else ScriptedModel()
    router = AdapterRouter()
    holder: list[KeptConfig] = [kept]
    services = build_services(
        backend=backend,
        llm=model,  # type: ignore[arg-type]
        sender=router,
        config=lambda: holder[0],
        clock=clock,
        platforms=lambda: router.platforms,
    )
    ctx = ChannelContext(
        conversation=services.manager,
        store=store,
        commitments=services.commitments,
        reminders=services.reminders,
        config=lambda: holder[0],
        clock=clock,
        environ={},
        users=services.users,
        pairing=services.pairing,
        start_over=services.start_over,
        privacy=services.privacy,
        followup_prefs=services.followup_prefs,
        spend=services.spend,
    )
    adapter = DiscordAdapter(ctx)
    router.add(adapter)
    dp = await attach(adapter.bot)
    await dpytest.empty_queue()
    services.extraction.start()
    rig = Rig(clock, store, model, router, services, adapter, kept, dp)

    async def on_typing(channel: Any) -> None:
        rig.typing.append(channel)

    callbacks.set_callback(on_typing, "send_typing")
    return rig
