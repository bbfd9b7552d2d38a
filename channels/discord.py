"""The Discord adapter (discord.py 2.x): messages in, replies and follow-ups out.

- DMs: every message is a turn. Server channels and group DMs: a turn only
  when the bot is mentioned or replied to. A thread keeps its own session.
  Bots (this one included) and webhooks are never answered.
- `allowFrom` / `allowGuilds` are read from the live config (channels/
  discord_scope.Gate), as is the agent.
- Edits and deletions of stored messages update the transcript and its
  search index.
- Sending: long text is split by the base class; model output never pings
  @everyone, @here, roles or users. discord.py keeps its own rate-limit
  handling (and its retries of 5xx answers); what it finally raises is
  mapped to a SendResult that says whether a retry is safe.
- Discord re-delivers nothing: what was said while kept was down, or what
  it could not store, is read back from channel history
  (channels/discord_catchup.py).
- `apiBaseUrl` points this client's REST and gateway elsewhere
  (channels/discord_http.py).
- Slash commands live in channels/discord_commands.py, the follow-up
  buttons in channels/discord_views.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import discord
from discord.ext import commands

from channels.base import ChannelAdapter, ChannelContext, ChannelStartError
from channels.chunked import send_with_actions
from channels.discord_catchup import HISTORY_LIMIT, CatchUp
from channels.discord_commands import CommandSupport, command_groups, on_tree_error
from channels.discord_errors import describe, send_failure
from channels.discord_http import use_api_root
from channels.discord_scope import PLATFORM, ChatRef, Gate, addressed, chat_of, clean_text
from channels.discord_views import FollowUpActions, FollowUpButton, followup_view
from core.config import DiscordConfig
from core.config_file import secret_from_env
from core.conversation import MessageNotStored
from core.logs import event
from core.messages import Action, Inbound, Outbound, SendResult, Target

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


class KeptBot(commands.Bot):
    """discord.py's Bot with its events routed to the adapter. Prefix
    commands are never processed: slash commands are the only commands."""

    def __init__(self, adapter: DiscordAdapter, api_root: str | None, **options: Any) -> None:
        super().__init__(
            command_prefix=commands.when_mentioned,
            help_command=None,
            intents=intents(),
            allowed_mentions=SAFE_MENTIONS,
            **options,
        )
        use_api_root(self, api_root)
        self.kept_adapter = adapter
        self.kept_followups: FollowUpActions = adapter.followups

    async def setup_hook(self) -> None:
        # Registered on every start: buttons sent before a restart keep working.
        self.add_dynamic_items(FollowUpButton)

    async def on_connect(self) -> None:
        # Dispatched while READY is parsed, before any later event: the
        # catch-up is in place before the first live message is handled.
        self.kept_adapter.catchup.connected()

    async def on_ready(self) -> None:
        await self.kept_adapter._on_ready()

    async def on_message(self, message: discord.Message) -> None:
        await self.kept_adapter._on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        await self.kept_adapter._on_edit(payload)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        await self.kept_adapter._on_delete(payload.channel_id, [payload.message_id])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        await self.kept_adapter._on_delete(payload.channel_id, sorted(payload.message_ids))


class DiscordAdapter(ChannelAdapter):
    platform = PLATFORM
    max_message_length = 2000

    def __init__(self, ctx: ChannelContext, **bot_options: Any) -> None:
        """`bot_options` go to discord.py's client (tests shorten
        guild_ready_timeout, the wait for servers after READY)."""
        settings = ctx.config().channels.discord
        super().__init__(
            agent_id=settings.agent, allow_from=settings.allow_from, handler=ctx.handle
        )
        self._ctx = ctx
        self.gate = Gate(self._settings, ctx.clock)
        self.followups = FollowUpActions(
            commitments=ctx.commitments, config=ctx.config, gate=self.gate
        )
        self.catchup = CatchUp(
            store=ctx.store, clock=ctx.clock, fetch=self._history, deliver=self._deliver
        )
        self._bot = KeptBot(self, settings.api_base_url, **bot_options)
        support = CommandSupport(
            commitments=ctx.commitments,
            reminders=ctx.reminders,
            config=ctx.config,
            clock=ctx.clock,
            gate=self.gate,
        )
        for group in command_groups(support):
            self._bot.tree.add_command(group)
        self._bot.tree.error(on_tree_error)
        self._task: asyncio.Task[None] | None = None
        self._synced = False

    @property
    def bot(self) -> commands.Bot:
        return self._bot

    def _settings(self) -> DiscordConfig:
        return self._ctx.config().channels.discord

    def is_allowed(self, user_id: str, username: str | None = None) -> bool:
        return self.gate.user_allowed(user_id, username)

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

    async def _on_ready(self) -> None:
        user = self._bot.user
        event(
            log,
            logging.INFO,
            "discord_connected",
            name=str(user),
            id=user.id if user else None,
            guilds=len(self._bot.guilds),
        )
        if not self._synced:
            # Once per process: READY comes again after each full reconnect.
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

    async def _on_message(self, message: discord.Message) -> None:
        ref = chat_of(message.channel)
        if ref is None:
            return
        inbound = await self._inbound(message, ref)
        if inbound is None:
            return
        async with self.catchup.lane(ref.channel_id) as open_:
            if not open_:
                return  # stopping
            try:
                await self._answer(inbound, message.channel)
            except MessageNotStored as exc:
                # Not confirmed anywhere: the catch-up reads it from the
                # channel's history once storing works again.
                self.catchup.not_stored(ref, message.id, exc)

    async def _deliver(self, message: discord.Message, ref: ChatRef) -> None:
        """A message read back from history takes the live path."""
        inbound = await self._inbound(message, ref)
        if inbound is not None:
            await self._answer(inbound, message.channel)

    async def _inbound(self, message: discord.Message, ref: ChatRef) -> Inbound | None:
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
        guild_id = message.guild.id if message.guild else None
        if not await self.gate.allowed(message.author, guild_id, self._bot):
            event(
                log, logging.INFO, "discord_inbound_refused", user=message.author.id, guild=guild_id
            )
            return None
        text = clean_text(message, me)
        if not text:
            return None
        return Inbound(
            agent_id=self._settings().agent,
            target=ref.target,
            chat_kind=ref.chat_kind,
            sender_id=str(message.author.id),
            text=text,
            ts=self._ctx.clock.now(),
            platform_message_id=str(message.id),
            sender_name=message.author.display_name,
        )

    async def _answer(self, inbound: Inbound, channel: discord.abc.Messageable) -> None:
        """One turn; raises MessageNotStored when the message was not stored."""
        try:
            async with self._typing(channel):
                await self._ctx.handle(inbound)
        except MessageNotStored:
            raise
        except Exception as exc:
            event(
                log,
                logging.ERROR,
                "discord_turn_failed",
                session=inbound.session_key,
                message=inbound.platform_message_id,
                error=repr(exc),
            )

    async def _history(self, ref: ChatRef, after: int) -> list[discord.Message]:
        """Messages of a chat after the id `after`, oldest first (bounded)."""
        channel = self._bot.get_channel(ref.channel_id)
        if channel is None and ref.chat_kind == "channel":
            # Not cached (an archived thread): fetched, so that its messages
            # know their server for allowGuilds.
            channel = await self._bot.fetch_channel(ref.channel_id)
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

    @contextlib.asynccontextmanager
    async def _typing(self, channel: discord.abc.Messageable) -> AsyncIterator[None]:
        """Show "typing…" while the model works; a channel that refuses it (no
        permission) still gets its answer."""

        async def refresh() -> None:
            while True:
                await self._ctx.clock.sleep(TYPING_REFRESH)
                await channel.typing()

        try:
            await channel.typing()
        except (discord.HTTPException, aiohttp.ClientError, OSError):
            yield
            return
        task = asyncio.create_task(refresh())
        # A refresh that fails only ends the indicator; its error is dropped.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            yield
        finally:
            task.cancel()

    async def _on_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        message, me = payload.message, self._bot.user
        if me is None or message.author.bot:
            return  # our own edits (a follow-up showing "Dismissed") change nothing
        before = payload.cached_message
        ref = chat_of(message.channel)
        # Only messages that can have been turns: DMs, and server messages
        # addressed to the bot (before or after the edit). Other edits in a
        # busy server never touch the database.
        if not (
            (ref is not None and ref.chat_kind == "private")
            or addressed(message, me)
            or (before is not None and addressed(before, me))
        ):
            return
        text = clean_text(message, me)
        if not text or (before is not None and clean_text(before, me) == text):
            return  # an embed unfurled, or nothing we keep changed
        for chat_id in await self._chat_ids(payload.channel_id, message.channel):
            record = await self._ctx.store.edit_message(
                platform=PLATFORM, chat_id=chat_id, platform_message_id=str(message.id), text=text
            )
            if record is not None:
                event(
                    log,
                    logging.INFO,
                    "discord_message_edited",
                    session=record.session_key,
                    message=record.id,
                )
                return

    async def _on_delete(self, channel_id: int, message_ids: list[int]) -> None:
        channel = self._bot.get_channel(channel_id)
        chat_ids = await self._chat_ids(channel_id, channel)
        for message_id in message_ids:
            for chat_id in chat_ids:
                if await self._ctx.store.delete_message(
                    platform=PLATFORM, chat_id=chat_id, platform_message_id=str(message_id)
                ):
                    event(
                        log,
                        logging.INFO,
                        "discord_message_deleted",
                        chat=chat_id,
                        message=message_id,
                    )
                    break

    async def _chat_ids(self, channel_id: int, channel: object) -> list[str]:
        """Chat ids a message of this channel may be stored under: a thread's
        messages live under the parent's chat id, so an uncached thread is
        fetched to learn its parent; the channel id itself is tried too."""
        ref = chat_of(channel) if channel is not None else None
        if ref is None:
            with contextlib.suppress(discord.HTTPException, discord.ClientException):
                ref = chat_of(await self._bot.fetch_channel(channel_id))
        ids = [ref.target.chat_id] if ref is not None else []
        return ids if str(channel_id) in ids else [*ids, str(channel_id)]

    # --- outbound ---------------------------------------------------------------

    async def send(self, outbound: Outbound) -> SendResult:
        """A heartbeat check-in gets its buttons on its last chunk
        (channels/chunked.py)."""
        if not outbound.actions:
            return await super().send(outbound)
        return await send_with_actions(
            outbound, self.max_message_length, self._send_chunk, platform=self.platform
        )

    async def _send_chunk(
        self, target: Target, text: str, reply_to: str | None, actions: Sequence[Action]
    ) -> SendResult:
        return await self.send_text(target, text, reply_to, view=followup_view(actions))

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        *,
        view: discord.ui.View | None = None,
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
        if view is not None:
            kwargs["view"] = view
        if reply_to is not None and reply_to.isdigit():
            kwargs["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=channel_id, fail_if_not_exists=False
            )
        try:
            sent = await channel.send(text, **kwargs)
        except Exception as exc:
            return send_failure(exc)
        return SendResult(message_id=str(sent.id))
