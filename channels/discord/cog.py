"""Discord's gateway events, as a `commands.Cog` the bot adds in setup_hook.

- connect: the catch-up learns of every READY (channels/discord/catchup.py);
- ready: the adapter logs the connection and syncs the slash commands once;
- a message: the pipeline in channels/base.py, holding its channel
  (catch-up first); one that could not be stored goes to the catch-up, which
  reads it back from the channel's history once storing works again;
- edits and deletions of stored messages go to the conversation manager,
  which updates the transcript and its search index.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import discord
from discord.ext import commands

from channels.context import Conversation
from channels.discord.scope import PLATFORM, addressed, chat_of, clean_text
from core.errors import MessageNotStored
from core.logs import event

if TYPE_CHECKING:
    from channels.discord.adapter import DiscordAdapter

log = logging.getLogger("kept.discord")


class KeptEvents(commands.Cog):
    def __init__(self, adapter: DiscordAdapter, conversation: Conversation) -> None:
        self._adapter = adapter
        self._conversation = conversation

    @commands.Cog.listener()
    async def on_connect(self) -> None:
        # Dispatched while READY is parsed, before any later event (a cog's
        # listener is scheduled at the same point as the client's own
        # on_connect): the catch-up is in place before the first live message
        # is handled.
        self._adapter.catchup.connected()

    @commands.Cog.listener()
    async def on_ready(self) -> None:
        await self._adapter.on_ready()

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        adapter = self._adapter
        ref = chat_of(message.channel)
        if ref is None:
            return
        inbound = await adapter.inbound_of(message, ref)
        if inbound is None:
            return
        async with adapter.catchup.hold_channel(ref.channel_id) as open_:
            if not open_:
                return  # stopping
            try:
                await adapter.run_turn(inbound)
            except MessageNotStored as exc:
                # Not confirmed anywhere: the catch-up reads it from the
                # channel's history once storing works again.
                adapter.catchup.not_stored(ref, message.id, exc)

    @commands.Cog.listener()
    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        message, me = payload.message, self._adapter.bot.user
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
        try:
            for chat_id in await self._chat_ids(payload.channel_id, message.channel):
                if await self._conversation.edit(
                    platform=PLATFORM,
                    chat_id=chat_id,
                    platform_message_id=str(message.id),
                    text=text,
                ):
                    return
        except MessageNotStored as exc:
            self._not_stored("edit", message.id, exc)

    @commands.Cog.listener()
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        await self._deleted(payload.channel_id, [payload.message_id])

    @commands.Cog.listener()
    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        await self._deleted(payload.channel_id, sorted(payload.message_ids))

    async def _deleted(self, channel_id: int, message_ids: list[int]) -> None:
        channel = self._adapter.bot.get_channel(channel_id)
        chat_ids = await self._chat_ids(channel_id, channel)
        for message_id in message_ids:
            try:
                for chat_id in chat_ids:
                    if await self._conversation.delete(
                        platform=PLATFORM, chat_id=chat_id, platform_message_id=str(message_id)
                    ):
                        break
            except MessageNotStored as exc:
                self._not_stored("delete", message_id, exc)

    async def _chat_ids(self, channel_id: int, channel: object) -> list[str]:
        """Chat ids a message of this channel may be stored under: a thread's
        messages live under the parent's chat id, so an uncached thread is
        fetched to learn its parent; the channel id itself is tried too."""
        ref = chat_of(channel) if channel is not None else None
        if ref is None:
            with contextlib.suppress(discord.HTTPException, discord.ClientException):
                ref = chat_of(await self._adapter.bot.fetch_channel(channel_id))
        ids = [ref.target.chat_id] if ref is not None else []
        return ids if str(channel_id) in ids else [*ids, str(channel_id)]

    @staticmethod
    def _not_stored(change: str, message_id: int, exc: MessageNotStored) -> None:
        # Discord re-delivers no edit or deletion, and history shows only the
        # latest text: the transcript keeps the old version of this message.
        event(
            log,
            logging.ERROR,
            f"discord_{change}_not_stored",
            message=message_id,
            error=repr(exc.__cause__ or exc),
            action=exc.action,
        )
