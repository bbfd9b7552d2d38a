"""Which of kept's handlers takes an update, and what it does with it.

As in PTB's handlers (telegram/ext/_handlers/basehandler.py), each handler
has a `check_update` that says whether the update is its own (returning
what it read, or None) and a `handle_update` that acts on it; the first
handler whose check answers takes the update. kept runs them from its own
intake (intake.py) rather than PTB's Application, so that nothing is
confirmed before it is stored: `handle_update` gets the intake's
`mark_safe` instead of a CallbackContext.

A message is for kept in a private chat, or in a group when it mentions or
replies to the bot or is one of its commands; everything else there is
neither answered nor stored."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from telegram import CallbackQuery, Chat, Message, Update, User
from telegram.error import TelegramError

from channels.base import AddressedMessage, ChannelAdapter
from channels.context import ChannelContext
from channels.media import MediaKind, unreadable_notice
from channels.telegram.commands import Command, CommandOrigin, TelegramCommands, command_of
from channels.telegram.intake import MarkSafe
from channels.telegram.messages import (
    addressed_message_of,
    addressed_to,
    anonymous_admin,
    chat_kind,
    media_kind,
    target_of,
)
from core.errors import MessageNotStored
from core.logs import event
from core.messages import ChatKind, Inbound, Outbound, session_key

log = logging.getLogger("kept.telegram")

Checked = TypeVar("Checked")
Channel = ChannelAdapter[Any, Any]


class UpdateHandler(Protocol[Checked]):
    def check_update(self, update: Update) -> Checked | None:
        """What this handler read of `update`, or None: not its update."""

    async def handle_update(self, update: Update, checked: Checked, mark_safe: MarkSafe) -> None:
        """Act on an update `check_update` took."""


class BotIdentity(Protocol):
    """Who the bot is, once connected (connection.py)."""

    @property
    def username(self) -> str: ...

    @property
    def bot_id(self) -> int | None: ...


@dataclass(frozen=True)
class Heard:
    """A message meant for kept, before its sender is admitted."""

    message: Message
    user: User
    kind: ChatKind
    addressed: AddressedMessage
    # What kept cannot read (a photo without a caption...); None: text.
    media: MediaKind | None
    command: Command | None


def heard_of(message: Message, bot: BotIdentity) -> Heard | None:
    """The message as kept hears it, or None when it is not for kept."""
    user = message.from_user
    text = message.text or message.caption or ""
    # A caption is text: such a message is answered like any other.
    media = None if text.strip() else media_kind(message)
    if user is None or not (text.strip() or media):
        return None  # service messages (joins, pins) say nothing to answer
    if user.is_bot and not anonymous_admin(message):
        return None  # other bots (and our own echoes) never start a turn
    kind = chat_kind(message.chat.type)
    if kind == "channel":
        return None
    command = command_of(message, bot.username)
    if command is False:
        return None  # `/cmd@other_bot`
    if isinstance(command, Command):
        # In a group, a bare unknown command is probably another bot's.
        for_us = command.known or command.addressed or kind == "private"
    else:
        for_us = kind == "private" or addressed_to(message, bot.bot_id, bot.username)
    if not for_us:
        return None  # group chatter: neither answered nor stored
    addressed = addressed_message_of(message, kind, text)
    return Heard(
        message, user, kind, addressed, media, command if isinstance(command, Command) else None
    )


def origin_of(
    channel: Channel,
    message: Message,
    kind: ChatKind,
    user: User,
    *,
    anonymous: bool = True,
) -> CommandOrigin:
    """Where a command or button press came from, for the commands."""
    target = target_of(message)
    agent = channel.agent_id  # the live setting, read once for this command
    return CommandOrigin(
        agent_id=agent,
        target=target,
        chat_kind=kind,
        session_key=session_key(agent, target, kind),
        user_id=str(user.id),
        user_name=user.full_name,
        anonymous_admin=anonymous and anonymous_admin(message),
    )


async def serves(channel: Channel, chat: Chat, user: User) -> bool:
    """Whether `user` is answered in `chat` (edits and button presses: a
    pairing code is offered only for a message)."""
    verdict = await channel.admission(
        chat_kind(chat.type), str(user.id), user.username, str(chat.id)
    )
    return verdict == "yes"


class ButtonPressHandler:
    """A press on one of kept's buttons, from a user kept serves there."""

    def __init__(self, channel: Channel, commands: TelegramCommands) -> None:
        self._channel = channel
        self._commands = commands

    def check_update(self, update: Update) -> CallbackQuery | None:
        return update.callback_query

    async def handle_update(self, update: Update, query: CallbackQuery, _: MarkSafe) -> None:
        user = query.from_user
        # Even a message too old to read still names its chat.
        chat = query.message.chat if query.message is not None else None
        if chat is None or not await serves(self._channel, chat, user):
            with contextlib.suppress(TelegramError):
                await query.answer()  # stop the spinner, say nothing
            return
        message = query.message if isinstance(query.message, Message) else None
        origin = None
        if message is not None:
            kind = chat_kind(message.chat.type)
            origin = origin_of(self._channel, message, kind, user, anonymous=False)
        await self._commands.on_callback(query, message, origin)


class EditHandler:
    """An edited text, stored over the message it edits."""

    def __init__(self, channel: Channel, ctx: ChannelContext) -> None:
        self._channel = channel
        self._ctx = ctx

    def check_update(self, update: Update) -> Message | None:
        message = update.edited_message
        if message is None or message.from_user is None:
            return None
        return message if message.text or message.caption else None

    async def handle_update(self, update: Update, message: Message, _: MarkSafe) -> None:
        user = message.from_user
        assert user is not None  # checked
        if not await serves(self._channel, message.chat, user):
            return
        # Raises MessageNotStored when the store fails: an edit is something
        # the user said too, held and retried like a message.
        await self._ctx.conversation.edit(
            platform=self._channel.platform,
            chat_id=str(message.chat.id),
            platform_message_id=str(message.message_id),
            text=str(message.text or message.caption),
        )


class MessageHandler:
    """A message for kept from an admitted sender: a notice for what kept
    cannot read, a command, or a turn."""

    def __init__(
        self,
        channel: Channel,
        bot: BotIdentity,
        commands: TelegramCommands,
        turns: set[asyncio.Task[None]],
    ) -> None:
        self._channel = channel
        self._bot = bot
        self._commands = commands
        self._turns = turns

    def check_update(self, update: Update) -> Heard | None:
        return heard_of(update.message, self._bot) if update.message is not None else None

    async def handle_update(self, update: Update, heard: Heard, mark_safe: MarkSafe) -> None:
        if not await self._channel.admit(heard.addressed):
            return
        if heard.media is not None:
            await self._say_unreadable(heard.addressed, heard.media, mark_safe)
        elif heard.command is not None:
            origin = origin_of(self._channel, heard.message, heard.kind, heard.user)
            message_id = str(heard.message.message_id)
            await self._commands.run(heard.command.name, heard.command.args, origin, message_id)
        else:
            await self._start_turn(self._channel.inbound(heard.addressed), mark_safe)

    async def _say_unreadable(
        self, addressed: AddressedMessage, media: MediaKind, mark_safe: MarkSafe
    ) -> None:
        """The fixed notice (channels/media.py), quoting the message in a group.
        Nothing is stored, so the update is safe at once; a failed notice is
        logged by `send` and not tried again."""
        mark_safe()
        event(
            log, logging.INFO, "telegram_media_unread", chat=addressed.target.chat_id, media=media
        )
        reply_to = addressed.platform_message_id if addressed.chat_kind == "group" else None
        text = unreadable_notice(media)
        await self._channel.send(
            Outbound(target=addressed.target, text=text, reply_to_platform_id=reply_to)
        )

    async def _start_turn(self, inbound: Inbound, mark_safe: MarkSafe) -> None:
        """Run the turn in the background; return once its message is stored
        (or the turn is over), so the update can be confirmed. A message that
        could not be stored raises MessageNotStored: the intake holds it
        unconfirmed and tries again."""
        stored = asyncio.Event()
        task = asyncio.create_task(
            self._channel.run_turn(inbound, on_stored=stored.set),
            name=f"telegram-turn-{inbound.target}",
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


async def dispatch(
    handlers: Sequence[UpdateHandler[Any]], update: Update, mark_safe: MarkSafe
) -> None:
    """The first handler that takes `update` handles it; an update none takes
    (channel posts, member changes) has nothing to answer."""
    for handler in handlers:
        checked = handler.check_update(update)
        if checked is not None:
            await handler.handle_update(update, checked, mark_safe)
            return
