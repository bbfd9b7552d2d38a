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
from core.commands import Change, FollowUpCommands, Outcome, ReminderCommands
from core.commands.buttons import from_compact, zone_from_compact
from core.commands.times import agent_timezone, local_time
from core.commands.timezone import TimezoneCommands, ZoneOutcome, describe
from core.commitments.visibility import Asker, ChatAccess
from core.logs import event
from core.messages import ChatKind, Target, ZoneChoice

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


Reply = Callable[[Where, str, str | None], Awaitable[None]]
IsAdmin = Callable[[Where], Awaitable[bool]]


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
        if handler is None:
            text = f"Unknown command /{name}. /help lists what I understand."
        else:
            text = await handler(args, where)
        event(
            log,
            logging.INFO,
            "telegram_command",
            agent=where.agent_id,
            session=where.session_key,
            command=name,
            user=where.user_id,
        )
        await self._reply(where, text, message_id)

    async def _help(self, args: list[str], where: Where) -> str:
        return HELP

    async def _commitments(self, args: list[str], where: Where) -> str:
        listing = await self._followups(where).list()
        if not listing.items:
            if listing.shared and not listing.everyones:
                return "You have no open follow-ups in this chat."
            return "No open follow-ups in this chat."
        tz = await self._timezone(where)
        if not listing.shared:
            lines = ["Open follow-ups in this chat:"]
        elif listing.everyones:
            lines = ["Open follow-ups in this chat, everyone's (you are an admin):"]
        else:
            lines = ["Your open follow-ups in this chat:"]
        for item in listing.items:
            snoozed = ", snoozed" if item.status == "snoozed" else ""
            owner = f", {_owner(item.owner, where)}" if listing.everyones else ""
            lines.append(
                f"• {item.id} — {item.subkind.replace('_', ' ')}{owner}, "
                f"due {local_time(item.due, tz)}{snoozed}\n"
                f"  {item.text}"
            )
        lines.append("Drop one with /dismiss ID, postpone it with /snooze ID 2h.")
        return "\n".join(lines)

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
            return f"{duration_text!r} is not a duration; try 30m, 2h or 3d."
        if not change.done or change.item is None:
            return f"{change.id}: {change.reason}"
        until = local_time(change.item.due, await self._timezone(where))
        return f"Snoozed {change.id} until {until}."

    async def _reminders(self, args: list[str], where: Where) -> str:
        listing = await self._reminder_commands(where).list()
        if not listing.items:
            if listing.others_hidden:
                return "You have no reminders in this chat."
            return "No reminders in this chat."
        lines = ["Reminders in this chat:"]
        tz = await self._timezone(where)
        for r in listing.items:
            # A cron is read in its own zone, which the viewer may not share.
            repeat = f", repeats ({r.repeats}, {r.timezone})" if r.repeats else ""
            lines.append(f"• {r.id} — {local_time(r.due, tz)}{repeat}\n  {r.text}")
        lines.append("Cancel one with /cancel ID.")
        return "\n".join(lines)

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
        """Act on a follow-up's button, tell the presser in a toast, and show
        what happened under the follow-up (its buttons go away)."""
        choice = zone_from_compact(query.data)
        if choice is not None and where is not None and message is not None:
            await self._on_zone_choice(query, message, where, choice)
            return
        action = from_compact(query.data)
        if action is None or where is None or message is None:
            await _answer(query, "This button no longer works.")
            return
        pressed = await self._followups(where).press(action)
        event(
            log,
            logging.INFO,
            "telegram_button",
            agent=where.agent_id,
            session=where.session_key,
            action=action.verb,
            ids=",".join(action.commitment_ids),
            changed=len(pressed.changed),
        )
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
        line = f"— {note}"
        original = (message.text or "")[: MAX_TEXT - len(line) - 2]
        try:
            await message.edit_text(f"{original}\n\n{line}")
        except TelegramError as exc:
            event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)

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
        line = f"— {text}"
        original = (message.text or "")[: MAX_TEXT - len(line) - 2]
        try:
            await message.edit_text(f"{original}\n\n{line}")
        except TelegramError as exc:
            event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)

    # --- scope and permission ------------------------------------------------

    def _access(self, where: Where) -> ChatAccess:
        asker = Asker(where.agent_id, where.session_key, where.chat_kind, where.user_id)

        async def is_admin() -> bool:
            return where.anonymous_admin or await self._is_admin(where)

        return ChatAccess(asker, is_admin)

    def _followups(self, where: Where) -> FollowUpCommands:
        return FollowUpCommands(self._ctx.commitments, self._access(where))

    def _reminder_commands(self, where: Where) -> ReminderCommands:
        return ReminderCommands(self._ctx.reminders.store, self._ctx.clock, self._access(where))

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


async def _answer(query: CallbackQuery, text: str, *, alert: bool = False) -> None:
    try:
        await query.answer(text=text, show_alert=alert)
    except TelegramError as exc:  # the spinner stops by itself after a while
        event(log, logging.WARNING, "telegram_answer_failed", error=type(exc).__name__)


def _owner(sender_id: str | None, where: Where) -> str:
    """Whose a follow-up is, for an admin's listing (Telegram gives a bot no
    names for user ids it has not been sent, so the id it is)."""
    if sender_id is None:
        return "nobody's"
    return "yours" if sender_id == where.user_id else f"user {sender_id}"


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
