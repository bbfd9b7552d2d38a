"""The Discord adapter (discord.py 2.x): messages in, replies and follow-ups out.

- DMs: every message is a turn. Server channels and group DMs: a turn only
  when the bot is mentioned or replied to. A thread keeps its own session.
  Bots (this one included) and webhooks are never answered.
- Messages take the pipeline of channels/base.py; `allowFrom` (the base's
  allow-list) and `allowGuilds` (channels/discord/scope.Gate) are read from
  the live config, as is the agent.
- Gateway events arrive through a Cog (channels/discord/cog.py); edits and
  deletions of stored messages go to the conversation manager.
- Sending: long text is split by the base class; model output never pings
  @everyone, @here, roles or users. discord.py keeps its own rate-limit
  handling (and its retries of 5xx answers); what it finally raises is
  mapped to a SendResult that says whether a retry is safe.
- Discord re-delivers nothing: what was said while kept was down, or what
  it could not store, is read back from channel history
  (channels/discord/catchup.py).
- `apiBaseUrl` points this client's REST and gateway elsewhere
  (channels/discord/http.py).
- Slash commands live in channels/discord/commands.py, the follow-up
  buttons in channels/discord/views.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
from discord.ext import commands

from channels.base import ChannelAdapter, ChannelContext, ChannelStartError, Said
from channels.discord.catchup import HISTORY_LIMIT, CatchUp
from channels.discord.cog import KeptEvents
from channels.discord.commands import CommandSupport, command_groups, on_tree_error
from channels.discord.errors import describe, send_failure
from channels.discord.http import use_api_root
from channels.discord.scope import PLATFORM, ChatRef, Gate, addressed, clean_text
from channels.discord.views import FollowUpActions, FollowUpButton, followup_view
from channels.discord.zone_button import ZoneActions, ZoneButton
from core.config import DiscordConfig
from core.config_file import secret_from_env
from core.logs import event
from core.messages import Action, Inbound, SendResult, Target, ZoneChoice

log = logging.getLogger("kept.discord")

# Model output may contain "@everyone", "<@&role>" or "<@user>": none may ping.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)
TYPING_REFRESH = 8.0  # seconds; Discord shows "typing" for about 10
STOP_TIMEOUT = 10.0


def intents() -> discord.Intents:
    """Only what the adapter reads: guilds (channels, threads), messages in
    servers and DMs, and their content (privileged: enable "Message Content
    Intent" for the bot in the developer portal)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


if TYPE_CHECKING:
    _BotBase = commands.Bot
else:
    _BotBase = object


class _KeptBehaviour(_BotBase):
    """What kept adds to discord.py's Bot, sharded or not: gateway events
    reach the adapter through the KeptEvents cog, and prefix commands are
    never processed (slash commands are the only commands)."""

    kept_adapter: DiscordAdapter
    kept_followups: FollowUpActions
    kept_zones: ZoneActions

    async def setup_hook(self) -> None:
        # Registered on every start: buttons sent before a restart keep working.
        self.add_dynamic_items(FollowUpButton, ZoneButton)
        # Added before login's connect: the cog's on_connect is in place for
        # the first READY.
        adapter = self.kept_adapter
        await self.add_cog(KeptEvents(adapter, adapter.conversation), override=True)

    async def process_commands(self, message: discord.Message) -> None:
        return None  # no prefix commands (Bot.on_message would look for one)


class KeptBot(_KeptBehaviour, commands.Bot):
    """One process, every shard (Discord's recommendation for small bots)."""


class ShardedKeptBot(_KeptBehaviour, commands.AutoShardedBot):
    """One of several workers: this worker runs `shardIds` of `shardCount`."""


def build_bot(
    adapter: DiscordAdapter, settings: DiscordConfig, **options: Any
) -> KeptBot | ShardedKeptBot:
    common: dict[str, Any] = {
        "command_prefix": commands.when_mentioned,
        "help_command": None,
        "intents": intents(),
        "allowed_mentions": SAFE_MENTIONS,
    }
    bot: KeptBot | ShardedKeptBot
    if settings.shard_count is None:
        bot = KeptBot(**common, **options)
    else:
        bot = ShardedKeptBot(
            **common, shard_count=settings.shard_count, shard_ids=settings.shard_ids, **options
        )
    use_api_root(bot, settings.api_base_url)
    bot.kept_adapter = adapter
    bot.kept_followups = adapter.followups
    bot.kept_zones = adapter.zones
    return bot


class DiscordAdapter(ChannelAdapter[discord.ui.View]):
    platform = PLATFORM
    max_message_length = 2000

    def __init__(self, ctx: ChannelContext, **bot_options: Any) -> None:
        """`bot_options` go to discord.py's client (tests shorten
        guild_ready_timeout, the wait for servers after READY)."""
        super().__init__(handler=ctx.conversation.handle, clock=ctx.clock)
        self._ctx = ctx
        self.conversation = ctx.conversation
        settings = ctx.config().channels.discord
        self.gate = Gate(self.is_allowed, self._settings, ctx.clock)
        self.followups = FollowUpActions(
            commitments=ctx.commitments, config=ctx.config, gate=self.gate, users=ctx.users
        )
        self.zones = ZoneActions(
            users=ctx.users, config=ctx.config, clock=ctx.clock, gate=self.gate
        )
        self.catchup = CatchUp(
            store=ctx.store, clock=ctx.clock, fetch=self._history, deliver=self._deliver
        )
        self._bot = build_bot(self, settings, **bot_options)
        support = CommandSupport(
            commitments=ctx.commitments,
            reminders=ctx.reminders,
            config=ctx.config,
            clock=ctx.clock,
            gate=self.gate,
            users=ctx.users,
        )
        for command in command_groups(support):
            self._bot.tree.add_command(command)
        self._bot.tree.error(on_tree_error)
        self._task: asyncio.Task[None] | None = None
        self._synced = False

    @property
    def bot(self) -> commands.Bot:
        return self._bot

    def _settings(self) -> DiscordConfig:
        return self._ctx.config().channels.discord

    def agent_setting(self) -> str:
        return self._settings().agent

    def allow_list(self) -> list[str]:
        return self._settings().allow_from

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        """Log in (a missing or rejected token is a ChannelStartError), then
        keep the gateway connection in a background task; discord.py
        reconnects on its own. Starting twice never opens a second connection."""
        if self._task is not None and not self._task.done():
            return
        env = self._settings().token_env
        token = secret_from_env(env, self._ctx.environ)
        if token is None:
            raise ChannelStartError(
                f"channels.discord is enabled but ${env} is empty: put the bot token in ${env} "
                "(or name another variable in channels.discord.tokenEnv)"
            )
        try:
            await self._bot.login(token)
        except discord.LoginFailure:
            await self._bot.http.close()
            raise ChannelStartError(
                f"Discord rejected the token in ${env}: copy it again from the developer "
                "portal (Bot > Reset Token)"
            ) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            await self._bot.http.close()
            raise ChannelStartError(f"cannot log in to Discord: {describe(exc)}") from None
        except BaseException:
            await self._bot.http.close()
            raise
        self._task = asyncio.create_task(self._connect(), name="discord-gateway")

    async def _connect(self) -> None:
        try:
            await self._bot.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            event(
                log,
                logging.ERROR,
                "discord_connect_failed",
                reason="privileged intent",
                action="enable Message Content Intent for the bot in the developer portal",
            )
        except Exception as exc:
            event(
                log,
                logging.ERROR,
                "discord_connect_failed",
                error=describe(exc),
                action="check the network and the token; restart kept",
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        await self.catchup.stop()
        if not self._bot.is_closed():
            await self._bot.close()
        if task is not None:
            # close() ends connect(); a task still running after the timeout
            # is cancelled so that stop() always returns.
            _, pending = await asyncio.wait({task}, timeout=STOP_TIMEOUT)
            for left in pending:
                left.cancel()

    async def on_ready(self) -> None:
        user = self._bot.user
        event(
            log,
            logging.INFO,
            "discord_connected",
            name=str(user),
            id=user.id if user else None,
            guilds=len(self._bot.guilds),
        )
        if not self._synced and self._settings().runs_shard(0):
            # Once per process: READY comes again after each full reconnect.
            # With several workers, the one running shard 0 syncs for all.
            self._synced = True
            await self._sync_commands()

    async def _sync_commands(self) -> None:
        dev = self._settings().dev_guild_id
        tree = self._bot.tree
        try:
            if dev:
                guild = discord.Object(id=int(dev))
                tree.copy_global_to(guild=guild)
                synced = await tree.sync(guild=guild)
            else:
                synced = await tree.sync()
        except (discord.HTTPException, ValueError) as exc:
            event(
                log,
                logging.WARNING,
                "discord_commands_not_synced",
                error=describe(exc),
                action="invite the bot with the applications.commands scope; check "
                "channels.discord.devGuildId",
            )
            return
        event(
            log,
            logging.INFO,
            "discord_commands_synced",
            scope=f"guild:{dev}" if dev else "global",
            commands=",".join(sorted(c.name for c in synced)),
        )

    # --- inbound ----------------------------------------------------------------

    async def _deliver(self, message: discord.Message, ref: ChatRef) -> None:
        """A message read back from history takes the live path."""
        inbound = await self.inbound_of(message, ref)
        if inbound is not None:
            await self.take_turn(inbound)

    async def inbound_of(self, message: discord.Message, ref: ChatRef) -> Inbound | None:
        """The turn a message is, or None when it is not one for us."""
        if message.author.bot or message.webhook_id is not None:
            return None  # never answer a bot, this one included: no loops
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return None  # joins, pins, command replies: not something said to us
        me = self._bot.user
        if me is None:
            return None
        if ref.chat_kind != "private" and not addressed(message, me):
            return None
        said = Said(
            target=ref.target,
            chat_kind=ref.chat_kind,
            sender_id=str(message.author.id),
            text=clean_text(message, me),
            username=message.author.name,
            platform_message_id=str(message.id),
            server_id=str(message.guild.id) if message.guild else None,
        )
        if not await self.admit(said) or not said.text:
            return None
        return self.inbound(said)

    async def admits(self, said: Said) -> bool:
        """The allow-list, then allowGuilds."""
        return await self.gate.admits(said.sender_id, said.username, said.server_id, self._bot)

    def _runs_chat(self, channel: object) -> bool:
        """Whether this worker's shards receive the chat's messages: a
        server's go to shard (server id >> 22) % shardCount, DMs to shard 0."""
        settings = self._settings()
        if settings.shard_count is None:
            return True
        guild = getattr(channel, "guild", None)
        shard = 0 if guild is None else (guild.id >> 22) % settings.shard_count
        return settings.runs_shard(shard)

    async def _history(self, ref: ChatRef, after: int) -> list[discord.Message]:
        """Messages of a chat after the id `after`, oldest first (bounded)."""
        channel = self._bot.get_channel(ref.channel_id)
        if channel is None and ref.chat_kind == "channel":
            # Not cached (an archived thread): fetched, so that its messages
            # know their server for allowGuilds.
            channel = await self._bot.fetch_channel(ref.channel_id)
        if not self._runs_chat(channel):
            return []  # another worker's shard reads it
        if channel is None:
            kind = discord.ChannelType.private
            if ref.chat_kind == "group":
                kind = discord.ChannelType.group
            channel = self._bot.get_partial_messageable(ref.channel_id, type=kind)
        if not isinstance(channel, discord.abc.Messageable):
            return []
        history = channel.history(
            limit=HISTORY_LIMIT, after=discord.Object(id=after), oldest_first=True
        )
        return [message async for message in history]

    async def keep_typing(self, target: Target) -> None:
        """Show "typing…" while the model works; a channel that refuses it (no
        permission) still gets its answer."""
        channel = self._channel(target)
        while isinstance(channel, discord.abc.Messageable):
            try:
                await channel.typing()
            except (discord.HTTPException, aiohttp.ClientError, OSError):
                return
            await self._ctx.clock.sleep(TYPING_REFRESH)

    def _channel(self, target: Target) -> object | None:
        try:
            # A thread's messages go to the thread itself.
            channel_id = int(target.thread_id or target.chat_id)
        except ValueError:
            return None
        return self._bot.get_channel(channel_id) or self._bot.get_partial_messageable(channel_id)

    # --- outbound ---------------------------------------------------------------

    def render_actions(self, actions: Sequence[Action | ZoneChoice]) -> discord.ui.View | None:
        """A check-in's buttons (ChannelAdapter.send puts them on its last chunk)."""
        return followup_view(actions)

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: discord.ui.View | None = None,
    ) -> SendResult:
        try:
            # A thread's messages go to the thread itself.
            channel_id = int(target.thread_id or target.chat_id)
        except ValueError:
            return SendResult(error=f"not a Discord channel id: {target}")
        channel = self._bot.get_channel(channel_id) or self._bot.get_partial_messageable(channel_id)
        if not isinstance(channel, discord.abc.Messageable):
            return SendResult(error=f"channel {channel_id} cannot hold messages")
        kwargs: dict[str, Any] = {"allowed_mentions": SAFE_MENTIONS}
        if buttons is not None:
            kwargs["view"] = buttons
        if reply_to is not None and reply_to.isdigit():
            kwargs["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=channel_id, fail_if_not_exists=False
            )
        try:
            sent = await channel.send(text, **kwargs)
        except Exception as exc:
            return send_failure(exc)
        return SendResult(message_id=str(sent.id))
