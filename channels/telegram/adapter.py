"""The Telegram channel: python-telegram-bot's Bot for the API calls
(connected in connect.py, kept up in connection.py, paced in pace.py), our
own update loop (intake.py) so nothing is confirmed before it is stored, the
ways updates arrive (arrival.py: polling, one leader polling for every
worker through shared_updates.py, or the webhook), the handlers that take them
(dispatch.py), commands in commands.py and lists in lists.py, Markdown as
entities in format.py, at-most-once sending in send.py, "typing…" in
typing_action.py and the admin check in admins.py.

Chats map to sessions: a private chat is `private`, a group or supergroup
`group`, a channel `channel`; a forum topic adds its thread id, and replies
go back to the same topic. In groups the bot takes a turn only when
mentioned, replied to, or given a command; everything else there is neither
answered nor stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, Update

from channels.base import Access, ChannelAdapter
from channels.context import ChannelContext
from channels.departure import Departure
from channels.telegram.admins import chat_admin
from channels.telegram.arrival import PollTimes
from channels.telegram.commands import CommandOrigin, CommandReply, TelegramCommands
from channels.telegram.connection import TelegramConnection
from channels.telegram.dispatch import (
    ButtonPressHandler,
    EditHandler,
    MessageHandler,
    UpdateHandler,
    dispatch,
)
from channels.telegram.format import MAX_UTF16, TelegramChunk, telegram_chunks
from channels.telegram.intake import MarkSafe, UpdateIntake
from channels.telegram.lists import keyboard
from channels.telegram.pace import TELEGRAM_PACE, Pace
from channels.telegram.send import send_document, send_message
from channels.telegram.shared_updates import MAX_CLAIMED_CHATS, SharedUpdates
from channels.telegram.typing_action import TypingIndicator
from core.config.model import TelegramConfig
from core.logs import event
from core.messages import ButtonAction, Outbound, SendResult, Target

log = logging.getLogger("kept.telegram")


class TelegramAdapter(ChannelAdapter[InlineKeyboardMarkup, TelegramChunk]):
    platform = "telegram"
    max_message_length = MAX_UTF16  # UTF-16 code units, as Telegram counts

    def __init__(
        self,
        ctx: ChannelContext,
        *,
        poll_timeout: float = 25.0,
        request_timeout: float = 10.0,
        stop_grace: float | None = None,
        max_claimed_chats: int = MAX_CLAIMED_CHATS,
        pace: Pace = TELEGRAM_PACE,
    ) -> None:
        """`pace`: the send budgets (channels/telegram/pace.py); tests shrink them."""
        super().__init__(handler=ctx.conversation.handle, clock=ctx.clock, pairing=ctx.pairing)
        self._ctx = ctx
        # None: shutdown.graceSeconds, read when the stop begins.
        self._stop_grace = stop_grace
        self._connection = TelegramConnection(
            ctx,
            self._process,
            self._started,
            times=PollTimes(poll_timeout, request_timeout, max_claimed_chats),
            pace=pace,
            worker=f"telegram-{id(self):x}",
        )
        self._typing = TypingIndicator(lambda: self._connection.bot, pace, ctx.clock)
        self._turns: set[asyncio.Task[None]] = set()
        commands = TelegramCommands(ctx, self._reply, self._is_admin)
        self._handlers: tuple[UpdateHandler[Any], ...] = (
            ButtonPressHandler(self, commands),
            EditHandler(self, ctx),
            MessageHandler(self, self._connection, commands, self._turns),
        )

    def _config(self) -> TelegramConfig:
        return self._ctx.config().channels.telegram

    def agent_setting(self) -> str:
        return self._config().agent

    def access(self) -> Access:
        return Access.of(self._config())

    # --- lifecycle --------------------------------------------------------------

    async def start(self) -> None:
        """Connect and take updates. A token the Bot API rejects (or any
        other fixable problem) fails at once, as one line; an API that does
        not answer (network, 5xx) does not: the adapter starts unconnected
        (/readyz says so, nothing is sent through it) and keeps trying, with
        backoff on the injected clock, in the background."""
        await self._connection.start()

    def _started(self, mode: str) -> None:
        self.announce_access()
        bot = self._connection.bot
        event(
            log,
            logging.INFO,
            "telegram_started",
            running_as=f"@{self.username}",
            bot_id=bot.id if bot is not None else None,
            mode=mode,
            agent=self.agent_id,
        )

    @property
    def username(self) -> str:
        return self._connection.username

    @property
    def shared_updates(self) -> SharedUpdates | None:
        """Several workers on PostgreSQL: the queue of polled updates."""
        return self._connection.shared_updates

    @property
    def leader_looks(self) -> int:
        """Times this worker asked for the polling role."""
        return self._connection.leader_looks

    @property
    def _intake(self) -> UpdateIntake | None:
        return self._connection.intake

    @property
    def connected(self) -> bool:
        """Token accepted and updates coming in (polling, webhook or queue),
        and polling not failing again and again: /readyz."""
        return self._connection.connected

    @property
    def accepts_sends(self) -> bool:
        """Connected to the Bot API (getMe answered): until then the
        heartbeat and recovery wait instead of spending their attempts."""
        return self._connection.bot is not None

    @property
    def polling(self) -> bool:
        """Whether this worker calls getUpdates now."""
        return self._connection.polling

    async def stop(self) -> None:
        """Stop taking updates, let running work finish for the grace period
        seconds, then cancel it: a cancelled turn's message is stored and is
        answered after the restart; an unprocessed update is not confirmed."""
        loop = asyncio.get_running_loop()
        grace = self._stop_grace
        if grace is None:
            grace = self._ctx.config().shutdown.grace_seconds
        deadline = loop.time() + grace
        await self._connection.stop_taking(grace)
        turns = list(self._turns)
        if turns:
            await asyncio.wait(turns, timeout=max(0.0, deadline - loop.time()))
            for task in turns:
                task.cancel()
            await asyncio.gather(*turns, return_exceptions=True)
        await self._connection.close()
        cancelled = sum(1 for t in turns if t.cancelled()) or None
        event(log, logging.INFO, "telegram_stopped", agent=self.agent_id, cancelled=cancelled)

    # --- sending --------------------------------------------------------------

    def render_actions(self, actions: Sequence[ButtonAction]) -> InlineKeyboardMarkup | None:
        """A message's buttons (ChannelAdapter.send puts them on its last chunk)."""
        return keyboard(actions)

    def prepare(self, text: str) -> list[TelegramChunk]:
        """The model's Markdown as Telegram text with entities, in chunks of
        at most 4,096 UTF-16 units (channels/telegram/format.py)."""
        return telegram_chunks(text, self.max_message_length)

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: InlineKeyboardMarkup | None = None,
        *,
        ping: bool = False,
    ) -> SendResult:
        return await self.send_chunk(target, TelegramChunk(text), reply_to, buttons)

    async def send_chunk(
        self,
        target: Target,
        chunk: TelegramChunk,
        reply_to: str | None,
        buttons: InlineKeyboardMarkup | None = None,
        *,
        ping: bool = False,  # Telegram notifies a quoted message's author either way
        departure: Departure | None = None,
    ) -> SendResult:
        """One message; `departure` goes to the pace (channels/telegram/pace.py),
        which calls it once the message may leave, just before the request."""
        bot = self._connection.bot
        if bot is None:
            return SendResult(error="the Telegram adapter is not running", retryable=True)
        return await send_message(
            bot,
            target,
            chunk,
            reply_to,
            buttons,
            departure,
            self._ctx.clock,
            secret=self._connection.token,
        )

    async def _reply(
        self, origin: CommandOrigin, reply: CommandReply, reply_to: str | None
    ) -> None:
        bot = self._connection.bot
        if reply.document is not None and bot is not None:
            filename, data = reply.document
            result = await send_document(
                bot,
                origin.target,
                filename,
                data,
                reply.text,
                reply_to,
                self._ctx.clock,
                secret=self._connection.token,
            )
            if not result.ok:
                event(
                    log,
                    logging.WARNING,
                    "telegram_document_failed",
                    agent=origin.agent_id,
                    session=origin.session_key,
                    bytes=len(data),
                    error=result.error,
                )
            return
        await self.send(
            Outbound(
                target=origin.target,
                text=reply.text,
                reply_to_platform_id=reply_to,
                actions=reply.actions,
            )
        )

    async def keep_typing(self, target: Target) -> None:
        """ "typing…" while a model call runs (ChannelAdapter.typing_during);
        none when as many chats as the pace lets out at once type already."""
        await self._typing.keep_typing(target)

    # --- updates and who is asking ------------------------------------------------------

    async def _process(self, update: Update, mark_safe: MarkSafe) -> None:
        # Commands and button presses reach TelegramCommands from the
        # handlers in dispatch.py (MessageHandler, ButtonPressHandler).
        await dispatch(self._handlers, update, mark_safe)

    async def _is_admin(self, origin: CommandOrigin) -> bool:
        return await self.chat_admin(origin.target, origin.user_id)

    async def chat_admin(self, target: Target, user_id: str) -> bool:
        """An administrator or the creator of the chat (getChatMember)."""
        bot: Bot | None = self._connection.bot
        return await chat_admin(bot, target, user_id, token=self._connection.token)
