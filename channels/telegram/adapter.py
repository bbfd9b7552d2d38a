"""The Telegram channel: python-telegram-bot's Bot for the API calls
(connected in channels/telegram/connect.py, paced in pace.py), our own update
loop (intake.py) so nothing is confirmed before it is stored, the queue
through which one polling worker hands updates to every worker (handoff.py),
commands in commands.py and lists in lists.py, Markdown as entities in
format.py, at-most-once sending in send.py.

Chats map to sessions as DESIGN.md says: a private chat is `private`, a group
or supergroup `group`, a channel `channel`; a forum topic adds its thread id,
and replies go back to the same topic. In groups the bot takes a turn only
when mentioned, replied to, or given a command; everything else there is
neither answered nor stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from telegram import (
    Bot,
    CallbackQuery,
    Chat,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction, ChatMemberStatus
from telegram.error import TelegramError
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from channels.base import Access, ChannelAdapter, ChannelContext, ChannelStartError, Departure, Said
from channels.media import MediaKind, unreadable_notice
from channels.telegram.commands import (
    BOT_COMMANDS,
    Answer,
    Command,
    TelegramCommands,
    Where,
    command_of,
)
from channels.telegram.connect import TelegramUnreachable, connect, start_webhook
from channels.telegram.format import MAX_UTF16, TelegramChunk, telegram_chunks
from channels.telegram.handoff import MAX_LANES, UpdateHandoff, poll_while_leader
from channels.telegram.intake import MarkSafe, UpdateIntake
from channels.telegram.lists import keyboard
from channels.telegram.messages import (
    addressed_to,
    anonymous_admin,
    chat_id_param,
    chat_kind,
    media_kind,
    said_of,
    target_of,
)
from channels.telegram.pace import TELEGRAM_PACE, Pace
from channels.telegram.send import scrub, send_formatted
from core.config.model import TelegramConfig
from core.conversation.manager import MessageNotStored
from core.logs import event
from core.messages import ButtonAction, ChatKind, Inbound, Outbound, SendResult, Target, session_key

log = logging.getLogger("kept.telegram")

TYPING_EVERY = 4.5  # Telegram shows "typing…" for 5 s per chat action
# Retrying a Bot API that did not answer at start: 1, 2, 4 … seconds, at most this.
MAX_CONNECT_BACKOFF = 60.0
# getUpdates failures in a row that make the adapter not ready (one or two
# are a blip; the loop backs off 1, 2, 4 … seconds between them).
POLL_FAILURES_NOT_READY = 3
# Connections beyond what the pace lets out at once, and the typing it
# allows besides: getUpdates, admin checks, a callback's answer.
SPARE_CONNECTIONS = 8
ADMIN_STATUSES = {ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR}


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
        handoff_lanes: int = MAX_LANES,
        pace: Pace = TELEGRAM_PACE,
    ) -> None:
        """`pace`: the send budgets (channels/telegram/pace.py); tests shrink them."""
        super().__init__(handler=ctx.conversation.handle, clock=ctx.clock, pairing=ctx.pairing)
        self._ctx = ctx
        self._poll_timeout = poll_timeout
        self._request_timeout = request_timeout
        # None: shutdown.graceSeconds, read when the stop begins.
        self._stop_grace = stop_grace
        self._bot: Bot | None = None
        self._token = ""
        self.username = ""
        self._intake: UpdateIntake | None = None
        # Retrying the first connection in the background (network down at start).
        self._connecting: asyncio.Task[None] | None = None
        self._leading: asyncio.Task[None] | None = None
        self._handoff_lanes = handoff_lanes
        self._pace = pace
        # Several workers on PostgreSQL: the queue of polled updates.
        self.handoff: UpdateHandoff | None = None
        self.leader_looks = 0  # times this worker asked for the polling role
        self._turns: set[asyncio.Task[None]] = set()
        # Chats showing "typing…" now: at most as many as the pace lets
        # replies out at once, so a burst spends no more on chat actions
        # than on its replies.
        self._typing = 0
        self._commands = TelegramCommands(ctx, self._reply, self._is_admin)

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
        tg = self._config()
        try:
            bot, token = await connect(
                tg, self._ctx.environ, request=self._request, pace=self._pace
            )
        except TelegramUnreachable as exc:
            self._connecting = asyncio.create_task(
                self._connect_later(exc), name="telegram-connect"
            )
            return
        await self._started(bot, token, tg)

    async def _connect_later(self, first: TelegramUnreachable) -> None:
        failures, error = 1, first
        while True:
            wait = error.retry_after or min(MAX_CONNECT_BACKOFF, 2.0 ** (failures - 1))
            event(
                log,
                logging.WARNING if failures < 5 else logging.ERROR,
                "telegram_unreachable",
                error=str(error),
                failures=failures,
                retry_in_s=wait,
                action="kept keeps trying and is not ready until it connects; check the "
                "network or channels.telegram.baseUrl",
            )
            await self._ctx.clock.sleep(wait)
            tg = self._config()
            try:
                bot, token = await connect(
                    tg, self._ctx.environ, request=self._request, pace=self._pace
                )
                await self._started(bot, token, tg)
                return
            except TelegramUnreachable as exc:
                failures, error = failures + 1, exc
            except ChannelStartError as exc:  # e.g. the token, rejected once it answered
                event(
                    log,
                    logging.ERROR,
                    "telegram_start_failed",
                    error=str(exc),
                    action="fix it and restart kept; Telegram stays off (not ready) until then",
                )
                return

    async def _started(self, bot: ExtBot[None], token: str, tg: TelegramConfig) -> None:
        self._bot, self._token, self.username = bot, token, bot.username
        try:
            await bot.set_my_commands(BOT_COMMANDS)
        except TelegramError as exc:  # the menu is a convenience; the commands work without
            event(
                log, logging.WARNING, "telegram_commands_menu_failed", error=scrub(str(exc), token)
            )
        intake = UpdateIntake(self._process, self._ctx.clock, secret=token, parked=self._ctx.parked)
        try:
            mode = await self._start_intake(bot, intake, tg)
        except BaseException:
            await intake.stop(0)
            await bot.shutdown()
            self._bot = None
            raise
        self._intake = intake
        self.announce_access()
        event(
            log,
            logging.INFO,
            "telegram_started",
            running_as=f"@{self.username}",
            bot_id=bot.id,
            mode=mode,
            agent=self.agent_id,
        )

    def _request(self) -> HTTPXRequest:
        """The HTTP client: one connection for each message the pace lets out
        at once and each chat it lets type, and a few more. Not PTB's 256:
        httpcore looks through its pool on every request."""
        t = self._request_timeout
        size = 2 * self._pace.overall.limit + SPARE_CONNECTIONS
        return HTTPXRequest(
            connection_pool_size=size,
            connect_timeout=t,
            read_timeout=t,
            write_timeout=t,
            pool_timeout=t,
        )

    async def _start_intake(self, bot: Bot, intake: UpdateIntake, tg: TelegramConfig) -> str:
        hook = tg.webhook
        if hook is None:
            try:
                # A webhook left over from another deployment makes getUpdates
                # fail with 409; removing it keeps its pending updates.
                await bot.delete_webhook(drop_pending_updates=False)
            except TelegramError as exc:
                event(
                    log,
                    logging.WARNING,
                    "telegram_delete_webhook_failed",
                    error=scrub(str(exc), self._token),
                )
            if self._ctx.leadership is None or self._ctx.updates is None:
                intake.start_polling(
                    bot, timeout=self._poll_timeout, read_timeout=self._request_timeout
                )
                return "polling"
            handoff = UpdateHandoff(
                self._ctx.updates,
                intake,
                bot,
                self._ctx.clock,
                worker=self._ctx.worker or f"telegram-{id(self):x}",
                secret=self._token,
                max_lanes=self._handoff_lanes,
            )
            handoff.start()
            self.handoff = handoff
            self._leading = asyncio.create_task(
                poll_while_leader(
                    self._ctx.leadership,
                    bot,
                    intake,
                    handoff,
                    self._ctx.clock,
                    poll_timeout=self._poll_timeout,
                    read_timeout=self._request_timeout,
                    looked=self._looked,
                ),
                name="telegram-leader",
            )
            return "polling (one worker polls, every worker answers)"
        await start_webhook(
            bot, intake, hook, self._ctx.environ, token=self._token, shared=self._ctx.web
        )
        return "webhook"

    @property
    def connected(self) -> bool:
        """Token accepted and updates coming in (polling, webhook or queue),
        and polling not failing again and again: /readyz."""
        intake = self._intake
        return (
            self._bot is not None
            and intake is not None
            and intake.poll_failures < POLL_FAILURES_NOT_READY
        )

    @property
    def accepts_sends(self) -> bool:
        """Connected to the Bot API (getMe answered): until then the
        heartbeat and recovery wait instead of spending their attempts."""
        return self._bot is not None

    @property
    def polling(self) -> bool:
        """Whether this worker calls getUpdates now."""
        return self._intake is not None and self._intake.polling

    def _looked(self) -> None:
        self.leader_looks += 1

    async def stop(self) -> None:
        """Stop taking updates, let running work finish for the grace period
        seconds, then cancel it: a cancelled turn's message is stored and is
        answered after the restart; an unprocessed update is not confirmed."""
        connecting, self._connecting = self._connecting, None
        if connecting is not None:
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await connecting
        loop = asyncio.get_running_loop()
        grace = self._stop_grace
        if grace is None:
            grace = self._ctx.config().shutdown.grace_seconds
        deadline = loop.time() + grace
        leading, self._leading = self._leading, None
        if leading is not None:
            leading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await leading
            if self._ctx.leadership is not None and self._bot is not None:
                await self._ctx.leadership.resign(f"telegram-poll:{self._bot.id}")
        if self.handoff is not None:
            await self.handoff.stop_claiming()
        if self._intake is not None:
            await self._intake.stop(grace)
            self._intake = None
        if self.handoff is not None:
            await self.handoff.close()
            self.handoff = None
        turns = list(self._turns)
        if turns:
            await asyncio.wait(turns, timeout=max(0.0, deadline - loop.time()))
            for task in turns:
                task.cancel()
            await asyncio.gather(*turns, return_exceptions=True)
        if self._bot is not None:
            await self._bot.shutdown()
            self._bot = None
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
        bot = self._bot
        if bot is None:
            return SendResult(error="the Telegram adapter is not running", retryable=True)
        try:
            thread = int(target.thread_id) if target.thread_id is not None else None
            reply_id = int(reply_to) if reply_to is not None else None
        except ValueError:
            return SendResult(error=f"not a Telegram thread or message id in {target}")
        reply = None
        if reply_id is not None:
            reply = ReplyParameters(message_id=reply_id, allow_sending_without_reply=True)

        async def call(text: str, entities: list[MessageEntity] | None) -> Message:
            # Entities, never parse_mode: nothing in the text needs escaping.
            return await bot.send_message(
                chat_id=chat_id_param(target.chat_id),
                text=text,
                entities=entities,
                message_thread_id=thread,
                reply_parameters=reply,
                reply_markup=buttons,
                rate_limit_args=departure,
            )

        return await send_formatted(
            call, chunk, self._ctx.clock, secret=self._token, chat=target.chat_id
        )

    async def _reply(self, where: Where, answer: Answer, reply_to: str | None) -> None:
        await self.send(
            Outbound(
                target=where.target,
                text=answer.text,
                reply_to_platform_id=reply_to,
                actions=answer.actions,
            )
        )

    # --- updates ------------------------------------------------------------------

    async def _process(self, update: Update, mark_safe: MarkSafe) -> None:
        if update.callback_query is not None:
            await self._on_callback(update.callback_query)
        elif update.edited_message is not None:
            await self._on_edit(update.edited_message)
        elif update.message is not None:
            await self._on_message(update.message, mark_safe)
        # Anything else (channel posts, member changes) has nothing to answer.

    async def _on_message(self, message: Message, mark_safe: MarkSafe) -> None:
        user = message.from_user
        text = message.text or message.caption or ""
        # A caption is text: such a message is answered like any other.
        media = None if text.strip() else media_kind(message)
        if user is None or not (text.strip() or media):
            return  # service messages (joins, pins) say nothing to answer
        if user.is_bot and not anonymous_admin(message):
            return  # other bots (and our own echoes) never start a turn
        kind = chat_kind(message.chat.type)
        if kind == "channel":
            return
        command = command_of(message, self.username)
        if command is False:
            return  # `/cmd@other_bot`
        if isinstance(command, Command):
            # In a group, a bare unknown command is probably another bot's.
            for_us = command.known or command.addressed or kind == "private"
        else:
            for_us = kind == "private" or addressed_to(message, self._bot_id(), self.username)
        if not for_us:
            return  # group chatter: neither answered nor stored
        said = said_of(message, kind, text)
        if not await self.admit(said):
            return
        if media is not None:
            await self._say_unreadable(said, media, mark_safe)
            return
        if isinstance(command, Command):
            where = self._where(message, kind, str(user.id), user.full_name)
            await self._commands.run(command.name, command.args, where, str(message.message_id))
            return
        inbound = self.inbound(said)
        await self._start_turn(inbound, mark_safe)

    async def _say_unreadable(self, said: Said, media: MediaKind, mark_safe: MarkSafe) -> None:
        """The fixed notice (channels/media.py), quoting the message in a group.
        Nothing is stored, so the update is safe at once; a failed notice is
        logged by `send` and not tried again."""
        mark_safe()
        event(log, logging.INFO, "telegram_media_unread", chat=said.target.chat_id, media=media)
        reply_to = said.platform_message_id if said.chat_kind == "group" else None
        text = unreadable_notice(media)
        await self.send(Outbound(target=said.target, text=text, reply_to_platform_id=reply_to))

    async def _start_turn(self, inbound: Inbound, mark_safe: MarkSafe) -> None:
        """Run the turn in the background; return once its message is stored
        (or the turn is over), so the update can be confirmed. A message that
        could not be stored raises MessageNotStored: the intake holds it
        unconfirmed and tries again."""
        stored = asyncio.Event()
        task = asyncio.create_task(
            self.take_turn(inbound, on_stored=stored.set), name=f"telegram-turn-{inbound.target}"
        )
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)
        waiter = asyncio.create_task(stored.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not stored.is_set() and task.done() and not task.cancelled():
            failure = task.exception()
            if isinstance(failure, MessageNotStored):
                raise failure
        mark_safe()

    async def keep_typing(self, target: Target) -> None:
        """ "typing…" while a model call runs (ChannelAdapter.typing_during);
        none when as many chats as the pace lets out at once type already."""
        bot = self._bot
        if bot is None or self._typing >= self._pace.overall.limit:
            return
        thread = int(target.thread_id) if target.thread_id is not None else None
        self._typing += 1
        try:
            while True:
                try:
                    await bot.send_chat_action(
                        chat_id_param(target.chat_id), ChatAction.TYPING, message_thread_id=thread
                    )
                except TelegramError:
                    return  # cosmetic: a chat we cannot type in will show the reply's error
                await self._ctx.clock.sleep(TYPING_EVERY)
        finally:
            self._typing -= 1

    async def _on_edit(self, message: Message) -> None:
        user = message.from_user
        text = message.text or message.caption
        if user is None or not text or not await self._serves(message.chat, user):
            return
        # Raises MessageNotStored when the store fails: an edit is something
        # the user said too, held and retried like a message.
        await self._ctx.conversation.edit(
            platform=self.platform,
            chat_id=str(message.chat.id),
            platform_message_id=str(message.message_id),
            text=text,
        )

    async def _on_callback(self, query: CallbackQuery) -> None:
        user = query.from_user
        # Even a message too old to read still names its chat.
        chat = query.message.chat if query.message is not None else None
        if chat is None or not await self._serves(chat, user):
            with contextlib.suppress(TelegramError):
                await query.answer()  # stop the spinner, say nothing
            return
        message = query.message if isinstance(query.message, Message) else None
        where = None
        if message is not None:
            kind = chat_kind(message.chat.type)
            where = self._where(message, kind, str(user.id), user.full_name, anonymous=False)
        await self._commands.on_callback(query, message, where)

    # --- who and where ----------------------------------------------------------------

    async def _serves(self, chat: Chat, user: User) -> bool:
        """Whether `user` is answered in `chat` (edits and button presses: a
        pairing code is offered only for a message)."""
        verdict = await self.admission(
            chat_kind(chat.type), str(user.id), user.username, str(chat.id)
        )
        return verdict == "yes"

    def _where(
        self, message: Message, kind: ChatKind, user_id: str, name: str, *, anonymous: bool = True
    ) -> Where:
        target = target_of(message)
        agent = self.agent_id  # the live setting, read once for this command
        return Where(
            agent_id=agent,
            target=target,
            chat_kind=kind,
            session_key=session_key(agent, target, kind),
            user_id=user_id,
            user_name=name,
            anonymous_admin=anonymous and anonymous_admin(message),
        )

    def _bot_id(self) -> int | None:
        return self._bot.id if self._bot is not None else None

    async def _is_admin(self, where: Where) -> bool:
        return await self.chat_admin(where.target, where.user_id)

    async def chat_admin(self, target: Target, user_id: str) -> bool:
        """An administrator or the creator of the chat (getChatMember)."""
        bot = self._bot
        if bot is None or not user_id.lstrip("-").isdigit():
            return False
        try:
            member = await bot.get_chat_member(chat_id_param(target.chat_id), int(user_id))
        except TelegramError as exc:
            event(
                log,
                logging.WARNING,
                "telegram_admin_check_failed",
                chat=target.chat_id,
                error=scrub(str(exc), self._token),
            )
            return False  # refuse when unsure
        return member.status in ADMIN_STATUSES
