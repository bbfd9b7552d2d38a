"""Telegram's slash commands and the follow-up buttons.

None of this is a conversation turn: nothing here reaches the model or the
transcript. Every lookup is scoped to the chat (agent + session key) the
command came from, and in groups to the member who asks unless they are a
chat administrator (core/commitments/visibility.py): an id from another chat,
or another member's, is "not found" exactly like an id that never existed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from telegram import BotCommand, CallbackQuery, Message
from telegram.error import TelegramError

from channels.base import ChannelContext
from channels.telegram_send import DISMISS, unpack_callback
from core.commitments.model import Commitment
from core.commitments.service import SnoozeError
from core.commitments.store import Filter
from core.commitments.visibility import Asker, ChatAccess
from core.config import parse_duration
from core.logs import event
from core.messages import ChatKind, Target

log = logging.getLogger("kept.telegram")

COMMANDS: list[tuple[str, str]] = [
    ("help", "What kept does and the commands"),
    ("commitments", "Your open follow-ups in this chat"),
    ("dismiss", "Drop a follow-up: /dismiss ID"),
    ("snooze", "Postpone a follow-up: /snooze ID 2h"),
    ("reminders", "Your reminders in this chat"),
    ("cancel", "Cancel a reminder: /cancel ID"),
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
SNOOZE_BUTTON = timedelta(days=1)
MAX_TEXT = 4096


@dataclass(frozen=True, slots=True)
class Where:
    """The chat a command or button press came from, and who pressed it."""

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
    def __init__(self, ctx: ChannelContext, agent_id: str, reply: Reply, is_admin: IsAdmin) -> None:
        self._ctx = ctx
        self._agent_id = agent_id
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
        }.get(name)
        if handler is None:
            text = f"Unknown command /{name}. /help lists what I understand."
        else:
            text = await handler(args, where)
        event(
            log,
            logging.INFO,
            "telegram_command",
            agent=self._agent_id,
            session=where.session_key,
            command=name,
            user=where.user_id,
        )
        await self._reply(where, text, message_id)

    async def _help(self, args: list[str], where: Where) -> str:
        return HELP

    async def _commitments(self, args: list[str], where: Where) -> str:
        access = self._access(where)
        found = await self._ctx.commitments.visible(access)
        everyones = await access.admin()
        if not found:
            if access.shared and not everyones:
                return "You have no open follow-ups in this chat."
            return "No open follow-ups in this chat."
        tz = self._timezone()
        if not access.shared:
            lines = ["Open follow-ups in this chat:"]
        elif everyones:
            lines = ["Open follow-ups in this chat, everyone's (you are an admin):"]
        else:
            lines = ["Your open follow-ups in this chat:"]
        for c in found:
            snoozed = ", snoozed" if c.status == "snoozed" else ""
            owner = f", {_owner(c.sender_id, where)}" if everyones else ""
            lines.append(
                f"• {c.id} — {c.kind.replace('_', ' ')}{owner}, "
                f"due {when(c.due_earliest, tz)}{snoozed}\n"
                f"  {c.suggested_text}"
            )
        lines.append("Drop one with /dismiss ID, postpone it with /snooze ID 2h.")
        return "\n".join(lines)

    async def _dismiss(self, args: list[str], where: Where) -> str:
        if not args:
            return "Usage: /dismiss ID (the ids are in /commitments)"
        lines = [await self._dismiss_one(commitment_id, where) for commitment_id in args]
        return "\n".join(lines)

    async def _dismiss_one(self, commitment_id: str, where: Where) -> str:
        found = await self._find(commitment_id, where)
        if found is None:
            return f"{commitment_id}: not found"
        outcome = await self._ctx.commitments.dismiss([commitment_id], found[1])
        if outcome.dismissed:
            return f"Dismissed {commitment_id}: I won't follow up on it."
        return f"{commitment_id}: {outcome.failed[0][1]}"

    async def _snooze(self, args: list[str], where: Where) -> str:
        if len(args) != 2:
            return "Usage: /snooze ID 2h (a duration like 30m, 2h or 3d)"
        commitment_id, duration_text = args
        try:
            duration = timedelta(seconds=parse_duration(duration_text))
        except ValueError:
            return f"{duration_text!r} is not a duration; try 30m, 2h or 3d."
        found = await self._find(commitment_id, where)
        if found is None:
            return f"{commitment_id}: not found"
        try:
            done = await self._ctx.commitments.snooze(
                commitment_id, duration=duration, where=found[1]
            )
        except SnoozeError as exc:
            return str(exc) if str(exc).startswith(commitment_id) else f"{commitment_id}: {exc}"
        return f"Snoozed {commitment_id} until {when(done.due_earliest, self._timezone())}."

    async def _reminders(self, args: list[str], where: Where) -> str:
        # Reminders follow the follow-ups' rule: in groups a member sees and
        # cancels the ones they asked for, an admin every one.
        access = self._access(where)
        every = await self._ctx.reminders.list_for_session(self._agent_id, where.session_key)
        found = [r for r in every if await access.may_manage(r.created_by)]
        if not found:
            if every:
                return "You have no reminders in this chat."
            return "No reminders in this chat."
        lines = ["Reminders in this chat:"]
        for r in found:
            repeat = f", repeats ({r.cron})" if r.cron else ""
            lines.append(f"• {r.id} — {when(r.next_fire_at, r.timezone)}{repeat}\n  {r.text}")
        lines.append("Cancel one with /cancel ID.")
        return "\n".join(lines)

    async def _cancel(self, args: list[str], where: Where) -> str:
        if len(args) != 1:
            return "Usage: /cancel ID (the ids are in /reminders)"
        reminder_id = args[0]
        found = await self._ctx.reminders.list_for_session(self._agent_id, where.session_key)
        reminder = next((r for r in found if r.id == reminder_id), None)
        if reminder is None or not await self._access(where).may_manage(reminder.created_by):
            return f"{reminder_id}: not found"
        done = await self._ctx.reminders.cancel(
            reminder_id, agent_id=self._agent_id, session_key=where.session_key
        )
        if done is None:  # fired or cancelled since we looked
            return f"{reminder_id}: not active any more"
        return f"Cancelled {reminder_id}."

    # --- the follow-up buttons -------------------------------------------------

    async def on_callback(
        self, query: CallbackQuery, message: Message | None, where: Where | None
    ) -> None:
        """Act on a follow-up's button, tell the presser in a toast, and show
        what happened under the follow-up (its buttons go away)."""
        parsed = unpack_callback(query.data)
        if parsed is None or where is None or message is None:
            await _answer(query, "This button no longer works.")
            return
        action, ids = parsed
        access = self._access(where)
        results = [await self._button_one(action, i, where, access) for i in ids]
        changed = [line for ok, line in results if ok]
        event(
            log,
            logging.INFO,
            "telegram_button",
            agent=self._agent_id,
            session=where.session_key,
            action=action,
            ids=",".join(ids),
            changed=len(changed),
        )
        if not changed:
            problems = "; ".join(dict.fromkeys(line for _, line in results))
            await _answer(query, problems[:190], alert=True)  # toasts hold 200 characters
            return
        await _answer(query, changed[0])
        line = f"— {changed[0]}"
        original = (message.text or "")[: MAX_TEXT - len(line) - 2]
        try:
            await message.edit_text(f"{original}\n\n{line}")
        except TelegramError as exc:
            event(log, logging.WARNING, "telegram_edit_failed", error=type(exc).__name__)

    async def _button_one(
        self, action: str, commitment_id: str, where: Where, access: ChatAccess
    ) -> tuple[bool, str]:
        found = await self._ctx.commitments.find(access, commitment_id)
        if found is None:  # also another member's, for a non-admin
            return False, "Not found in this chat."
        # Core decides what a press means, on a delivered (`sent`) follow-up
        # as on an active one: Dismiss closes it, Snooze brings it up again
        # through the heartbeat a day later.
        scope = found[1]
        if action == DISMISS:
            dismissed = await self._ctx.commitments.followup_dismiss([commitment_id], scope)
            if dismissed.dismissed:
                return True, f"Dismissed by {where.user_name}."
            return False, _unchanged(dismissed.failed[0][1])
        snoozed = await self._ctx.commitments.followup_snooze(
            [commitment_id], duration=SNOOZE_BUTTON, where=scope
        )
        if not snoozed.snoozed:
            return False, _unchanged(snoozed.failed[0][1])
        until = when(snoozed.snoozed[0].due_earliest, self._timezone())
        return True, f"Snoozed by {where.user_name} until {until}."

    # --- scope and permission ------------------------------------------------

    def _access(self, where: Where) -> ChatAccess:
        asker = Asker(self._agent_id, where.session_key, where.chat_kind, where.user_id)

        async def is_admin() -> bool:
            return where.anonymous_admin or await self._is_admin(where)

        return ChatAccess(asker, is_admin)

    async def _find(self, commitment_id: str, where: Where) -> tuple[Commitment, Filter] | None:
        """The commitment and the filter to change it through; None when it is
        not this chat's or, in a group, neither the asker's nor are they an
        admin. The admin is asked only about another member's commitment."""
        return await self._ctx.commitments.find(self._access(where), commitment_id)

    def _timezone(self) -> str:
        try:
            return self._ctx.config().agent(self._agent_id).timezone
        except KeyError:
            return "UTC"


async def _answer(query: CallbackQuery, text: str, *, alert: bool = False) -> None:
    try:
        await query.answer(text=text, show_alert=alert)
    except TelegramError as exc:  # the spinner stops by itself after a while
        event(log, logging.WARNING, "telegram_answer_failed", error=type(exc).__name__)


def when(moment: datetime, timezone: str) -> str:
    """`Tue 01 Dec 18:00 (Europe/Paris)`: a due time as the user reads it."""
    try:
        zone = ZoneInfo(timezone)
    except (ValueError, KeyError):
        zone, timezone = ZoneInfo("UTC"), "UTC"
    return f"{moment.astimezone(zone):%a %d %b %H:%M} ({timezone})"


def _owner(sender_id: str | None, where: Where) -> str:
    """Whose a follow-up is, for an admin's listing (Telegram gives a bot no
    names for user ids it has not been sent, so the id it is)."""
    if sender_id is None:
        return "nobody's"
    return "yours" if sender_id == where.user_id else f"user {sender_id}"


def _unchanged(reason: str) -> str:
    return f"Nothing changed: {reason}."


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
