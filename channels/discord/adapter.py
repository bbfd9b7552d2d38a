"""The Discord adapter (discord.py 2.x): messages in, replies and follow-ups out.

- DMs: every message is a turn. Server channels and group DMs: a turn only
  when the bot is mentioned or replied to. A thread keeps its own session.
  Bots (this one included) and webhooks are never answered.
- Intents: no privileged one by default. DMs and messages that mention the
  bot (a reply that pings it too) carry their text without Message Content;
  a reply whose ping was switched off arrives empty and is ignored, unless
  `messageContentIntent` asks for the intent. A message without text is
  never a turn.
- Messages take the pipeline of channels/base.py, which decides who is
  answered (`dmPolicy`, `allowFrom`, `groups` of server ids, `groupPolicy`,
  read from the live config, as is the agent); slash commands and buttons
  ask the same through channels/discord/scope.Gate.
- Gateway events arrive through a Cog (channels/discord/cog.py); edits and
  deletions of stored messages go to the conversation manager.
- Sending: long text is split by the base class; model output never pings
  @everyone, @here, roles or users. discord.py paces sends ahead of time
  (per route bucket, the channel being one of its keys: a bucket whose
  X-RateLimit-Remaining reached 0 holds the next request until its reset),
  so kept adds no limiter of its own; it also waits out 429s and retries 5xx
  answers. What it finally raises is mapped to a SendResult that says
  whether a retry is safe.
- A message with only attachments or stickers gets one fixed notice of what
  kept can read (channels/media.py).
- Discord re-delivers nothing: what was said while kept was down, or what
  it could not store, is read back from channel history
  (channels/discord/catchup.py).
- `apiBaseUrl` points this client's REST and gateway elsewhere
  (channels/discord/http.py).
- Slash commands live in channels/discord/commands.py (synced at start only
  when they changed: channels/discord/sync.py), the follow-up buttons in
  channels/discord/views.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
from discord.ext import commands

from channels.base import Access, AddressedMessage, ChannelAdapter, ChannelStartError
from channels.context import ChannelContext
from channels.discord.catchup import HISTORY_LIMIT, CatchUp
from channels.discord.cog import KeptEvents
from channels.discord.commands import CommandSupport, command_groups, on_tree_error
from channels.discord.errors import describe, send_failure
from channels.discord.forget_button import ForgetActions
from channels.discord.http import install_http
from channels.discord.lists import ListPresses
from channels.discord.scope import PLATFORM, ChatRef, Gate, addressed, clean_text, media_kind
from channels.discord.sync import sync_commands
from channels.discord.views import DYNAMIC_BUTTONS, FollowUpActions, buttons_view
from channels.discord.zone_button import ZoneActions
from channels.media import MediaKind, unreadable_notice
from channels.split import split_markdown
from core.config.file import secret_from_env
from core.config.model import DiscordConfig
from core.logs import event
from core.messages import ButtonAction, Inbound, Outbound, SendResult, Target

log = logging.getLogger("kept.discord")

# Model output may contain "@everyone", "<@&role>" or "<@user>": none may ping.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)
TYPING_REFRESH = 8.0  # seconds; Discord shows "typing" for about 10
STOP_TIMEOUT = 10.0


def intents(message_content: bool = False) -> discord.Intents:
    """Only what the adapter reads: guilds (channels, threads), messages in
    servers and DMs; their content only when `message_content` (privileged:
    enable "Message Content Intent" for the bot in the developer portal)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = message_content
    return wanted


def intent_names(wanted: discord.Intents) -> list[str]:
    """The intents a client asks for, by discord.py's names (for logs and
    `kept doctor`)."""
    return [name for name, on in wanted if on]


def withheld(message: discord.Message) -> bool:
    """Whether Discord left the message's content out (no Message Content
    intent, not a DM, not mentioning the bot): everything a user can post
    is empty. Stickers are not withheld, and a message without any of these
    has nothing to answer anyway."""
    return not (
        message.content
        or message.attachments
        or message.embeds
        or message.stickers
        or message.poll is not None
    )


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
    kept_lists: ListPresses
    kept_zones: ZoneActions
    kept_forget: ForgetActions

    async def setup_hook(self) -> None:
        # Registered on every start: buttons sent before a restart keep working.
        self.add_dynamic_items(*DYNAMIC_BUTTONS)
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
        "intents": intents(settings.message_content_intent),
        "allowed_mentions": SAFE_MENTIONS,
    }
    bot: KeptBot | ShardedKeptBot
    if settings.shard_count is None:
        bot = KeptBot(**common, **options)
    else:
        bot = ShardedKeptBot(
            **common, shard_count=settings.shard_count, shard_ids=settings.shard_ids, **options
        )
    install_http(bot, settings.api_base_url)
    bot.kept_adapter = adapter
    bot.kept_followups = adapter.followups
    bot.kept_lists = adapter.lists
    bot.kept_zones = adapter.zones
    bot.kept_forget = adapter.forget
    return bot


class DiscordAdapter(ChannelAdapter[discord.ui.View]):
    platform = PLATFORM
    max_message_length = 2000

    def __init__(self, ctx: ChannelContext, **bot_options: Any) -> None:
        """`bot_options` go to discord.py's client (tests shorten
        guild_ready_timeout, the wait for servers after READY)."""
        super().__init__(handler=ctx.conversation.handle, clock=ctx.clock, pairing=ctx.pairing)
        self._ctx = ctx
        self.conversation = ctx.conversation
        settings = ctx.config().channels.discord
        self.gate = Gate(self.admission, self.pairing_text)
        self.followups = FollowUpActions(
            commitments=ctx.commitments, config=ctx.config, gate=self.gate, users=ctx.users
        )
        self.zones = ZoneActions(
            users=ctx.users, config=ctx.config, clock=ctx.clock, gate=self.gate
        )
        self.forget = ForgetActions(
            privacy=ctx.privacy, config=ctx.config, clock=ctx.clock, gate=self.gate
        )
        self.lists = ListPresses(
            commitments=ctx.commitments,
            reminders=ctx.reminders,
            config=ctx.config,
            clock=ctx.clock,
            gate=self.gate,
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
            start_over=ctx.start_over,
            privacy=ctx.privacy,
            followup_prefs=ctx.followup_prefs,
            spend=ctx.spend,
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

    def access(self) -> Access:
        return Access.of(self._settings())

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
        event(
            log,
            logging.INFO,
            "discord_intents",
            intents=",".join(intent_names(self._bot.intents)),
            message_content=self._bot.intents.message_content,
        )
        self.announce_access()
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
                intents=",".join(intent_names(self._bot.intents)),
                action="enable Message Content Intent for the bot in the developer portal, "
                "or set channels.discord.messageContentIntent to false; restart kept",
            )
        except Exception as exc:
            event(
                log,
                logging.ERROR,
                "discord_connect_failed",
                error=describe(exc),
                action="check the network and the token; restart kept",
            )

    @property
    def connected(self) -> bool:
        """The gateway session is up (READY came, the connection runs): /readyz."""
        task = self._task
        return task is not None and not task.done() and self._bot.is_ready()

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
        await sync_commands(
            self._bot,
            self._bot.tree,
            dev_guild_id=self._settings().dev_guild_id,
            app_state=self._ctx.app_state,
        )

    # --- inbound ----------------------------------------------------------------

    async def _deliver(self, message: discord.Message, ref: ChatRef) -> None:
        """A message read back from history takes the live path (but gets no
        notice for what kept cannot read: it was never stored, so it would be
        read back, and noticed, again after every restart)."""
        inbound = await self.inbound_of(message, ref, live=False)
        if inbound is not None:
            await self.run_turn(inbound)

    async def inbound_of(
        self, message: discord.Message, ref: ChatRef, *, live: bool = True
    ) -> Inbound | None:
        """The turn a message is, or None when it is not one for us. A `live`
        message for us with no text, only attachments or stickers, gets the
        notice of what kept can read (channels/media.py) and is no turn."""
        if message.author.bot or message.webhook_id is not None:
            return None  # never answer a bot, this one included: no loops
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return None  # joins, pins, command replies: not something said to us
        me = self._bot.user
        if me is None:
            return None
        if ref.chat_kind != "private" and not addressed(message, me):
            return None
        if withheld(message):
            # A reply to the bot without its ping, read without the Message
            # Content intent: there is no text to answer.
            event(
                log,
                logging.DEBUG,
                "discord_message_without_content",
                chat=ref.target.chat_id,
                message=message.id,
                action="set channels.discord.messageContentIntent to true to answer "
                "replies that do not ping the bot",
            )
            return None
        to_us = AddressedMessage(
            target=ref.target,
            chat_kind=ref.chat_kind,
            sender_id=str(message.author.id),
            text=clean_text(message, me),
            username=message.author.name,
            platform_message_id=str(message.id),
            server_id=str(message.guild.id) if message.guild else None,
        )
        # Read back from history, the sender was offered their code when new.
        if not await self.admit(to_us, offer_code=live):
            return None
        if not to_us.text:
            media = media_kind(message)
            if live and media is not None:
                await self._say_unreadable(to_us, media)
            return None
        return self.inbound(to_us)

    async def _say_unreadable(self, to_us: AddressedMessage, media: MediaKind) -> None:
        """The fixed notice, once, in the message's chat; in a server it
        quotes the message it is about. Not stored, never the model's."""
        event(log, logging.INFO, "discord_media_unread", chat=to_us.target.chat_id, media=media)
        reply_to = to_us.platform_message_id if to_us.chat_kind != "private" else None
        text = unreadable_notice(media)
        await self.send(Outbound(target=to_us.target, text=text, reply_to_platform_id=reply_to))

    async def group_of(self, target: Target) -> str | None:
        """The server a channel belongs to (`groups` lists servers): from the
        client's cache, else asked of Discord; None when neither knows it."""
        try:
            channel_id = int(target.chat_id)
        except ValueError:
            return None
        channel: object = self._bot.get_channel(channel_id)
        if channel is None:
            try:
                channel = await self._bot.fetch_channel(channel_id)
            except discord.DiscordException:
                return None
        guild = getattr(channel, "guild", None)
        return str(guild.id) if guild is not None else None

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

    async def chat_admin(self, target: Target, user_id: str) -> bool:
        """Manage Messages in the chat's channel (or thread), overwrites
        included, as the slash commands read it; False outside a server or
        when the member cannot be looked up."""
        channel = self._channel(target)
        guild = getattr(channel, "guild", None)
        if guild is None or not user_id.isdigit() or not hasattr(channel, "permissions_for"):
            return False
        try:
            member = guild.get_member(int(user_id)) or await guild.fetch_member(int(user_id))
        except (discord.HTTPException, aiohttp.ClientError, OSError):
            return False  # refuse when unsure
        return bool(channel.permissions_for(member).manage_messages)

    def _channel(self, target: Target) -> object | None:
        try:
            # A thread's messages go to the thread itself.
            channel_id = int(target.thread_id or target.chat_id)
        except ValueError:
            return None
        return self._bot.get_channel(channel_id) or self._bot.get_partial_messageable(channel_id)

    # --- outbound ---------------------------------------------------------------

    def render_actions(self, actions: Sequence[ButtonAction]) -> discord.ui.View | None:
        """A check-in's buttons (ChannelAdapter.send puts them on its last chunk)."""
        return buttons_view(actions)

    def prepare(self, text: str) -> list[str]:
        """Markdown chunks of at most 2,000 characters, a code block cut in two
        closed and reopened with its language (channels/split.py)."""
        return split_markdown(text, self.max_message_length)

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: discord.ui.View | None = None,
        *,
        ping: bool = False,
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
            # Quoting shows what is answered; the author of a message just
            # answered is watching already, the member a check-in is about
            # may not be.
            kwargs["mention_author"] = ping
        try:
            sent = await channel.send(text, **kwargs)
        except Exception as exc:
            return send_failure(exc)
        return SendResult(message_id=str(sent.id))
