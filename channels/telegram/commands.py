"""Telegram's slash commands and the follow-up buttons: parse and render.

What a command or a press does, and what the asker may see, is decided once
for every platform in core/commands (its chat; in groups the asker's own
unless they are a chat administrator). This module turns `/snooze ID 2h` or
a button's callback data into that call, and the typed result into
Telegram's text, toast and edited message. None of it is a conversation
turn: nothing here reaches the model or the transcript.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram import BotCommand, CallbackQuery, Message
from telegram.error import TelegramError

from channels.context import ChannelContext
from channels.telegram.lists import keyboard, list_text
from core.commands import wording
from core.commands.buttons import unpack
from core.commands.lists import list_actions, list_name
from core.commands.registry import (
    COMMANDS,
    Changed,
    HelpShown,
    Invocation,
    ListShown,
    Result,
    Told,
    UnknownCommand,
    WrongUsage,
    ZonesUnavailable,
)
from core.commands.results import Page
from core.commands.rights import (
    RIGHTS_COMMANDS,
    DataShown,
    ExportMade,
    ForgetAsked,
    ForgetOutcome,
)
from core.commands.times import local_time
from core.commands.timezone import ZoneAnswer, ZoneOutcome
from core.commitments.visibility import Asker, ChatAccess
from core.limits.spend import UsageShown
from core.logs import event
from core.messages import (
    Action,
    ButtonAction,
    ChatKind,
    ForgetChoice,
    ItemAction,
    ListName,
    PageAction,
    ReminderSnooze,
    Target,
    ZoneChoice,
)

log = logging.getLogger("kept.telegram")

PLATFORM = "telegram"
# The command menu (setMyCommands), from the one registry.
BOT_COMMANDS = [BotCommand(c.name, c.summary) for c in COMMANDS.commands]

HELP = (
    "I'm kept, a chat assistant that remembers what we left open. If you mention "
    "something coming up (an interview, a deadline), I may check in afterwards, once, "
    'here in this chat. Ask me for exact reminders too ("remind me at 9 to call Sam").\n\n'
    "Commands:\n"
    + "\n".join(f"/{c.name} — {c.summary}" for c in COMMANDS.commands)
    + "\n\nIn groups, mention me or reply to me to talk."
)
MAX_TEXT = 4096
# The largest file a bot may send (sendDocument).
MAX_DOCUMENT = 50 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CommandOrigin:
    """The chat a command or button press came from, and who pressed it."""

    # The agent the config named when the command or press arrived: one
    # reading per command, so an edited file applies to the next one.
    agent_id: str
    target: Target
    chat_kind: ChatKind
    session_key: str
    user_id: str
    user_name: str
    # A group admin posting as the group: Telegram hides who it is, but only
    # admins can do that.
    anonymous_admin: bool = False


@dataclass(frozen=True, slots=True)
class CommandReply:
    """A command's reply: its text and the buttons under it."""

    text: str
    actions: tuple[ButtonAction, ...] = ()
    # A file sent with `text` as its caption (/export): its name and bytes.
    document: tuple[str, bytes] | None = None


Reply = Callable[[CommandOrigin, CommandReply, str | None], Awaitable[None]]
IsAdmin = Callable[[CommandOrigin], Awaitable[bool]]
NO_LONGER_WORKS = wording.NO_LONGER_WORKS


class TelegramCommands:
    def __init__(self, ctx: ChannelContext, reply: Reply, is_admin: IsAdmin) -> None:
        self._ctx = ctx
        self._reply = reply
        self._is_admin = is_admin

    # --- commands ------------------------------------------------------------

    async def run(self, name: str, args: list[str], origin: CommandOrigin, message_id: str) -> None:
        call = self._call(origin)
        result: Result
        if origin.anonymous_admin and name in RIGHTS_COMMANDS:
            # Every anonymous admin posts as one user id (the group's bot):
            # their data is nobody's in particular.
            result = Told(wording.ANONYMOUS_RIGHTS)
        else:
            result = await COMMANDS.run(name, args, call)
        event(
            log,
            logging.INFO,
            "telegram_command",
            agent=origin.agent_id,
            session=origin.session_key,
            command=name,
            user=origin.user_id,
        )
        quote: str | None = message_id
        for reply in await self._replies(result, call):
            await self._reply(origin, reply, quote)
            quote = None

    async def _replies(self, result: Result, call: Invocation) -> list[CommandReply]:
        """A command's messages: one, or /mydata's summary and this chat's lists."""
        if not isinstance(result, DataShown):
            return [await self._render(result, call)]
        replies = [CommandReply(wording.my_data(result))]
        for name, page in (("commitments", result.followups), ("reminders", result.reminders)):
            if page.listing.items:
                replies.append(await self._shown(page, name, call))  # type: ignore[arg-type]
        return replies

    async def _render(self, result: Result, call: Invocation) -> CommandReply:
        """A command's typed result as Telegram's text and buttons."""
        match result:
            case HelpShown():
                return CommandReply(HELP)
            case UnknownCommand(name):
                return CommandReply(wording.unknown_command(name))
            case WrongUsage(command):
                return CommandReply(wording.usage(command.usage))
            case ZonesUnavailable():
                return CommandReply(wording.ZONES_UNAVAILABLE)
            case ListShown(name, page, _):
                return await self._shown(page, name, call)
            case Changed(changes):
                return CommandReply(wording.changes(list(changes), await self._style(call)))
            case ZoneAnswer():
                return CommandReply(wording.zone(result))
            case Told(text):
                return CommandReply(text)
            case ForgetAsked(counts, actions):
                return CommandReply(wording.forget_prompt(counts), actions)
            case DataShown():
                return CommandReply(wording.my_data(result))
            case ExportMade(filename, data, chats):
                if len(data) > MAX_DOCUMENT:
                    return CommandReply(wording.export_too_large(len(data), MAX_DOCUMENT))
                return CommandReply(wording.export_sent(chats), document=(filename, data))
            case UsageShown():
                return CommandReply(wording.usage_today(result))

    async def _shown(self, page: Page, name: ListName, call: Invocation) -> CommandReply:
        """A list page as a message: its text and its buttons, times in the
        viewer's zone."""
        text = list_text(page, name, await call.timezone(), call.user_id)
        return CommandReply(text, list_actions(page, name, call.user_id))

    async def _style(self, call: Invocation) -> wording.Style:
        zone = await call.timezone()
        return wording.Style(when=lambda moment: local_time(moment, zone))

    # --- the follow-up buttons -------------------------------------------------

    async def on_callback(
        self, query: CallbackQuery, message: Message | None, origin: CommandOrigin | None
    ) -> None:
        """Act on a button: a check-in's, a list's, a fired reminder's or a
        proposed time zone's."""
        action = unpack(query.data)
        if isinstance(action, ForgetChoice) and origin is not None and message is not None:
            await self._forget_press(query, message, origin, action)
            return
        if isinstance(action, ZoneChoice) and origin is not None and message is not None:
            await self._on_zone_choice(query, message, origin, action)
            return
        if action is None or origin is None or message is None:
            await _answer(query, NO_LONGER_WORKS)
            return
        event(
            log,
            logging.INFO,
            "telegram_button",
            agent=origin.agent_id,
            session=origin.session_key,
            button=type(action).__name__,
            user=origin.user_id,
        )
        match action:
            case Action():
                await self._followup_press(query, message, origin, action)
            case ItemAction() | PageAction():
                await self._list_press(query, message, origin, action)
            case ReminderSnooze():
                await self._reminder_snooze(query, message, origin, action)

    async def _followup_press(
        self, query: CallbackQuery, message: Message, origin: CommandOrigin, action: Action
    ) -> None:
        """A check-in's Dismiss / Snooze: tell the presser in a toast, and show
        what happened under the follow-up (its buttons go away)."""
        call = self._call(origin)
        pressed = await call.followups().press(action)
        note = wording.pressed(pressed, origin.user_name, await self._style(call))
        await _settle(query, message, note, refused=not pressed.changed)

    async def _list_press(
        self,
        query: CallbackQuery,
        message: Message,
        origin: CommandOrigin,
        action: ItemAction | PageAction,
    ) -> None:
        """A list's row button or Prev / Next: act, then show the list again in place."""
        call = self._call(origin)
        answer = await call.lists().press(action)
        name = list_name(action)
        if answer.page is None:
            refusal = wording.someone_elses_list(name, wording.Style(when=str))
            await _answer(query, refusal, alert=True)
            return
        change = answer.change
        if change is not None:
            note = wording.change(change, await self._style(call))
            await _answer(query, note[:190], alert=not change.done)
        else:
            await _answer(query, "")
        shown = await self._shown(answer.page, name, call)
        try:
            await message.edit_text(shown.text, reply_markup=keyboard(shown.actions))
        except TelegramError as exc:  # "not modified" when nothing changed
            event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)

    async def _reminder_snooze(
        self, query: CallbackQuery, message: Message, origin: CommandOrigin, action: ReminderSnooze
    ) -> None:
        """A fired reminder's Snooze: it comes back once after the delay."""
        call = self._call(origin)
        change = await call.reminder_commands().snooze_fired(action)
        note = wording.snoozed_by(change, origin.user_name, await self._style(call))
        await _settle(query, message, note, refused=not change.done or change.item is None)

    async def _on_zone_choice(
        self, query: CallbackQuery, message: Message, origin: CommandOrigin, choice: ZoneChoice
    ) -> None:
        """The set_timezone tool's Yes / No: only the user it was offered to
        may answer; their answer replaces the buttons."""
        commands = self._call(origin).zones()
        if commands is None:
            await _answer(query, NO_LONGER_WORKS)
            return
        answer = await commands.confirm(choice)
        event(
            log,
            logging.INFO,
            "telegram_zone_button",
            agent=origin.agent_id,
            session=origin.session_key,
            user=origin.user_id,
            outcome=answer.outcome.value,
        )
        refused = answer.outcome in (ZoneOutcome.NOT_YOURS, ZoneOutcome.INVALID)
        await _settle(query, message, wording.zone(answer), refused=refused)

    async def _forget_press(
        self, query: CallbackQuery, message: Message, origin: CommandOrigin, choice: ForgetChoice
    ) -> None:
        """A /forget prompt's Erase / Cancel: only the user who asked may
        answer, within the lapse; the answer replaces the buttons."""
        rights = self._call(origin).rights()
        if rights is None:
            await _answer(query, NO_LONGER_WORKS)
            return
        answer = await rights.answer_forget(choice)
        event(
            log,
            logging.INFO,
            "telegram_forget_button",
            agent=origin.agent_id,
            session=origin.session_key,
            user=origin.user_id,
            outcome=answer.outcome.value,
            erased=answer.counts.total,
        )
        refused = answer.outcome is ForgetOutcome.NOT_YOURS
        await _settle(query, message, wording.forget_answer(answer), refused=refused)

    # --- scope and permission ------------------------------------------------

    def _call(self, origin: CommandOrigin) -> Invocation:
        asker = Asker(origin.agent_id, origin.session_key, origin.chat_kind, origin.user_id)

        async def is_admin() -> bool:
            return origin.anonymous_admin or await self._is_admin(origin)

        ctx = self._ctx
        return Invocation(
            PLATFORM,
            ChatAccess(asker, is_admin),
            ctx.commitments,
            ctx.reminders,
            ctx.clock,
            ctx.config,
            ctx.users,
            start_over=ctx.start_over,
            privacy=ctx.privacy,
            followup_prefs=ctx.followup_prefs,
            spend=ctx.spend,
        )


async def _settle(query: CallbackQuery, message: Message, note: str, *, refused: bool) -> None:
    """A press's answer: refused, a toast the presser must dismiss (the
    buttons stay for whoever may press them); done, a toast and the note
    under the message in place of its buttons."""
    # Toasts hold 200 characters.
    await _answer(query, note[:190], alert=refused)
    if not refused:
        await _close(message, note)


async def _close(message: Message, note: str) -> None:
    """Say under a message what its button did; its buttons go away."""
    line = f"— {note}"
    original = (message.text or "")[: MAX_TEXT - len(line) - 2]
    try:
        await message.edit_text(f"{original}\n\n{line}")
    except TelegramError as exc:
        event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)


async def _answer(query: CallbackQuery, text: str, *, alert: bool = False) -> None:
    try:
        await query.answer(text=text, show_alert=alert)
    except TelegramError as exc:  # the spinner stops by itself after a while
        event(log, logging.WARNING, "telegram_answer_failed", error=type(exc).__name__)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: list[str]
    # `/help@kept_bot` rather than `/help`: unmistakably for this bot, even
    # in a group with other bots.
    addressed: bool

    @property
    def known(self) -> bool:
        return COMMANDS.get(self.name) is not None


def command_of(message: Message, bot_username: str) -> Command | bool | None:
    """The command in a message to this bot; False for a command addressed
    to another bot (`/help@other_bot`); None when the message is no command."""
    text = message.text or ""
    entity = next(iter(message.entities or ()), None)
    if entity is None or entity.type != "bot_command" or entity.offset != 0:
        return None
    head, *args = text.split()
    name, _, addressee = head[1:].partition("@")
    if addressee and addressee.lower() != bot_username.lower():
        return False
    return Command(name.lower(), args, addressed=bool(addressee))
