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

from channels.base import ChannelContext
from channels.telegram.lists import commitments_text, keyboard, list_actions, reminders_text
from core.commands import Change, FollowUpCommands, Outcome, ReminderCommands
from core.commands.buttons import unpack
from core.commands.lists import ListCommands
from core.commands.results import Page
from core.commands.times import agent_timezone, local_time
from core.commands.timezone import TimezoneCommands, ZoneOutcome, describe
from core.commitments.visibility import Asker, ChatAccess
from core.logs import event
from core.messages import (
    Action,
    ButtonAction,
    ChatKind,
    ItemAction,
    ListName,
    PageAction,
    ReminderSnooze,
    Target,
    ZoneChoice,
)

log = logging.getLogger("kept.telegram")

COMMANDS: list[tuple[str, str]] = [
    ("help", "What kept does and the commands"),
    ("commitments", "Your open follow-ups in this chat"),
    ("dismiss", "Drop a follow-up: /dismiss ID"),
    ("snooze", "Postpone a follow-up: /snooze ID 2h"),
    ("reminders", "Your reminders in this chat"),
    ("cancel", "Cancel a reminder: /cancel ID"),
    ("timezone", "Your time zone: /timezone Europe/Paris"),
]
BOT_COMMANDS = [BotCommand(name, description) for name, description in COMMANDS]

HELP = (
    "I'm kept, a chat assistant that remembers what we left open. If you mention "
    "something coming up (an interview, a deadline), I may check in afterwards, once, "
    'here in this chat. Ask me for exact reminders too ("remind me at 9 to call Sam").\n\n'
    "Commands:\n"
    + "\n".join(f"/{name} — {description}" for name, description in COMMANDS)
    + "\n\nIn groups, mention me or reply to me to talk."
)
MAX_TEXT = 4096


@dataclass(frozen=True, slots=True)
class Where:
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
class Answer:
    """A command's reply: its text and the buttons under it."""

    text: str
    actions: tuple[ButtonAction, ...] = ()


Reply = Callable[[Where, Answer, str | None], Awaitable[None]]
IsAdmin = Callable[[Where], Awaitable[bool]]
NO_LONGER_WORKS = "This button no longer works."


class TelegramCommands:
    def __init__(self, ctx: ChannelContext, reply: Reply, is_admin: IsAdmin) -> None:
        self._ctx = ctx
        self._reply = reply
        self._is_admin = is_admin

    # --- commands ------------------------------------------------------------

    async def run(self, name: str, args: list[str], where: Where, message_id: str) -> None:
        handler = {
            "start": self._help,
            "help": self._help,
            "commitments": self._commitments,
            "dismiss": self._dismiss,
            "snooze": self._snooze,
            "reminders": self._reminders,
            "cancel": self._cancel,
            "timezone": self._timezone_command,
        }.get(name)
        answer: str | Answer
        if handler is None:
            answer = f"Unknown command /{name}. /help lists what I understand."
        else:
            answer = await handler(args, where)
        event(
            log,
            logging.INFO,
            "telegram_command",
            agent=where.agent_id,
            session=where.session_key,
            command=name,
            user=where.user_id,
        )
        await self._reply(where, Answer(answer) if isinstance(answer, str) else answer, message_id)

    async def _help(self, args: list[str], where: Where) -> str:
        return HELP

    async def _commitments(self, args: list[str], where: Where) -> Answer:
        return await self._shown(await self._lists(where).page("commitments"), "commitments", where)

    async def _dismiss(self, args: list[str], where: Where) -> str:
        if not args:
            return "Usage: /dismiss ID (the ids are in /commitments)"
        changes = await self._followups(where).dismiss(args)
        return "\n".join(
            f"Dismissed {c.id}: I won't follow up on it." if c.done else f"{c.id}: {c.reason}"
            for c in changes
        )

    async def _snooze(self, args: list[str], where: Where) -> str:
        if len(args) != 2:
            return "Usage: /snooze ID 2h (a duration like 30m, 2h or 3d)"
        commitment_id, duration_text = args
        change = await self._followups(where).snooze(commitment_id, duration=duration_text)
        if change.outcome is Outcome.INVALID_DURATION:
            return f"{change.reason}."  # e.g. a bare number, which has no unit
        if not change.done or change.item is None:
            return f"{change.id}: {change.reason}"
        until = local_time(change.item.due, await self._timezone(where))
        return f"Snoozed {change.id} until {until}."

    async def _reminders(self, args: list[str], where: Where) -> Answer:
        return await self._shown(await self._lists(where).page("reminders"), "reminders", where)

    async def _shown(self, page: Page, name: ListName, where: Where) -> Answer:
        """A list page as a message: its text and its buttons, times in the
        viewer's zone."""
        tz = await self._timezone(where)
        if name == "commitments":
            text = commitments_text(page, tz, where.user_id)
        else:
            text = reminders_text(page, tz)
        return Answer(text, list_actions(page, name, where.user_id))

    async def _timezone_command(self, args: list[str], where: Where) -> str:
        commands = self._zone_commands(where)
        if commands is None:
            return "Time zones are not available here."
        return describe(await commands.run(" ".join(args)))

    async def _cancel(self, args: list[str], where: Where) -> str:
        if len(args) != 1:
            return "Usage: /cancel ID (the ids are in /reminders)"
        change = await self._reminder_commands(where).cancel(args[0])
        if change.outcome is Outcome.NOT_FOUND:
            return f"{change.id}: not found"
        if not change.done:  # fired or cancelled before
            return f"{change.id}: not active any more"
        return f"Cancelled {change.id}."

    # --- the follow-up buttons -------------------------------------------------

    async def on_callback(
        self, query: CallbackQuery, message: Message | None, where: Where | None
    ) -> None:
        """Act on a button: a check-in's, a list's, a fired reminder's or a
        proposed time zone's."""
        action = unpack(query.data)
        if isinstance(action, ZoneChoice) and where is not None and message is not None:
            await self._on_zone_choice(query, message, where, action)
            return
        if action is None or where is None or message is None:
            await _answer(query, NO_LONGER_WORKS)
            return
        event(
            log,
            logging.INFO,
            "telegram_button",
            agent=where.agent_id,
            session=where.session_key,
            button=type(action).__name__,
            user=where.user_id,
        )
        match action:
            case Action():
                await self._followup_press(query, message, where, action)
            case ItemAction() | PageAction():
                await self._list_press(query, message, where, action)
            case ReminderSnooze():
                await self._reminder_snooze(query, message, where, action)

    async def _followup_press(
        self, query: CallbackQuery, message: Message, where: Where, action: Action
    ) -> None:
        """A check-in's Dismiss / Snooze: tell the presser in a toast, and show
        what happened under the follow-up (its buttons go away)."""
        pressed = await self._followups(where).press(action)
        if not pressed.changed:
            problems = "; ".join(dict.fromkeys(_unchanged(c) for c in pressed.unchanged))
            # Toasts hold 200 characters.
            await _answer(query, (problems or "Not found in this chat.")[:190], alert=True)
            return
        if pressed.until is None:
            note = f"Dismissed by {where.user_name}."
        else:
            until = local_time(pressed.until, await self._timezone(where))
            note = f"Snoozed by {where.user_name} until {until}."
        await _answer(query, note)
        await _close(message, note)

    async def _list_press(
        self, query: CallbackQuery, message: Message, where: Where, action: ItemAction | PageAction
    ) -> None:
        """A list's row button or Prev / Next: act, then show the list again in place."""
        answer = await self._lists(where).press(action)
        name = list_name(action)
        if answer.page is None:
            refusal = f"This list is someone else's: send /{name} for yours."
            await _answer(query, refusal, alert=True)
            return
        change = answer.change
        if change is not None and not change.done:
            await _answer(query, _unchanged(change)[:190], alert=True)
        elif change is not None:
            await _answer(query, await self._done_note(change, where))
        else:
            await _answer(query, "")
        shown = await self._shown(answer.page, name, where)
        try:
            await message.edit_text(shown.text, reply_markup=keyboard(shown.actions))
        except TelegramError as exc:  # "not modified" when nothing changed
            event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)

    async def _done_note(self, change: Change, where: Where) -> str:
        item = change.item
        if item is None or item.kind == "reminder":
            return f"Cancelled {change.id}."
        if item.status == "dismissed":
            return f"Dismissed {change.id}."
        return f"Snoozed {change.id} until {local_time(item.due, await self._timezone(where))}."

    async def _reminder_snooze(
        self, query: CallbackQuery, message: Message, where: Where, action: ReminderSnooze
    ) -> None:
        """A fired reminder's Snooze: it comes back once after the delay."""
        change = await self._reminder_commands(where).snooze_fired(action)
        if not change.done or change.item is None:
            if change.outcome is Outcome.NOT_FOUND:
                text = "Not found in this chat."
            else:
                text = f"Nothing changed: {change.reason}."
            await _answer(query, text[:190], alert=True)
            return
        until = local_time(change.item.due, await self._timezone(where))
        note = f"Snoozed by {where.user_name} until {until}."
        await _answer(query, note)
        await _close(message, note)

    async def _on_zone_choice(
        self, query: CallbackQuery, message: Message, where: Where, choice: ZoneChoice
    ) -> None:
        """The set_timezone tool's Yes / No: only the user it was offered to
        may answer; their answer replaces the buttons."""
        commands = self._zone_commands(where)
        if commands is None:
            await _answer(query, "This button no longer works.")
            return
        answer = await commands.confirm(choice)
        event(
            log,
            logging.INFO,
            "telegram_zone_button",
            agent=where.agent_id,
            session=where.session_key,
            user=where.user_id,
            outcome=answer.outcome.value,
        )
        text = describe(answer)
        if answer.outcome in (ZoneOutcome.NOT_YOURS, ZoneOutcome.INVALID):
            await _answer(query, text[:190], alert=True)
            return
        await _answer(query, text[:190])
        await _close(message, text)

    # --- scope and permission ------------------------------------------------

    def _access(self, where: Where) -> ChatAccess:
        asker = Asker(where.agent_id, where.session_key, where.chat_kind, where.user_id)

        async def is_admin() -> bool:
            return where.anonymous_admin or await self._is_admin(where)

        return ChatAccess(asker, is_admin)

    def _followups(self, where: Where) -> FollowUpCommands:
        return FollowUpCommands(self._ctx.commitments, self._access(where))

    def _reminder_commands(self, where: Where) -> ReminderCommands:
        reminders = self._ctx.reminders
        return ReminderCommands(
            reminders.store, self._ctx.clock, self._access(where), service=reminders
        )

    def _lists(self, where: Where) -> ListCommands:
        access = self._access(where)
        reminders = self._ctx.reminders
        return ListCommands(
            FollowUpCommands(self._ctx.commitments, access),
            ReminderCommands(reminders.store, self._ctx.clock, access, service=reminders),
            access,
        )

    def _zone_commands(self, where: Where) -> TimezoneCommands | None:
        if self._ctx.users is None:
            return None
        return TimezoneCommands(
            self._ctx.users,
            self._ctx.clock,
            agent_id=where.agent_id,
            platform="telegram",
            user_id=where.user_id,
        )

    async def _timezone(self, where: Where) -> str:
        """The zone the asker reads times in: theirs, else the agent's."""
        if self._ctx.users is None:
            return agent_timezone(self._ctx.config(), where.agent_id)
        return await self._ctx.users.of(where.agent_id, "telegram", where.user_id)


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


def list_name(action: ItemAction | PageAction) -> ListName:
    """Which list a list's button belongs to."""
    if isinstance(action, PageAction):
        return action.listing
    return "reminders" if action.verb == "cancel" else "commitments"


def _unchanged(change: Change) -> str:
    if change.outcome is Outcome.NOT_FOUND:
        return "Not found in this chat."
    return f"Nothing changed: {change.reason}."


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: list[str]
    # `/help@kept_bot` rather than `/help`: unmistakably for this bot, even
    # in a group with other bots.
    addressed: bool

    @property
    def known(self) -> bool:
        return self.name == "start" or any(self.name == name for name, _ in COMMANDS)


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
