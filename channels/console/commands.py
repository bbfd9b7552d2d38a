"""`kept chat`'s local commands: parsed here, answered by the same
platform-neutral command layer as Telegram's and Discord's (core/commands),
rendered as rich tables and lines. None of it is a conversation turn:
nothing here reaches the model or the transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from channels.base import ChannelContext
from core.commands import FollowUpCommands, Listing, Outcome, ReminderCommands
from core.commands.times import agent_timezone, local_time
from core.commands.timezone import TimezoneCommands, describe
from core.commitments.visibility import Asker, ChatAccess
from core.messages import ZoneChoice

PLATFORM = "console"
COMMANDS: list[tuple[str, str]] = [
    ("help", "What kept does and these commands"),
    ("commitments", "Your open follow-ups in this chat"),
    ("dismiss", "Drop follow-ups: /dismiss ID [ID…]"),
    ("snooze", "Postpone a follow-up: /snooze ID 2h"),
    ("reminders", "Your reminders in this chat"),
    ("cancel", "Cancel a reminder: /cancel ID"),
    ("timezone", "Your time zone: /timezone [Europe/Paris]"),
    ("quit", "Leave (also /exit, Ctrl-D, or Ctrl-C twice)"),
]
QUIT_WORDS = frozenset({"quit", "exit"})


@dataclass(frozen=True, slots=True)
class Parsed:
    name: str
    args: list[str]


def parse(line: str) -> Parsed | None:
    """`/name args…`, or None for a line that is no command."""
    if not line.startswith("/") or line.startswith("//"):
        return None
    head, *args = line[1:].split()
    return Parsed(head.lower(), args) if head else None


class ConsoleCommands:
    def __init__(
        self,
        ctx: ChannelContext,
        asker: Callable[[], Asker],
    ) -> None:
        """`asker`: who types, in which session (read per command, as the
        agent can change with the config)."""
        self._ctx = ctx
        self._asker = asker

    async def run(self, command: Parsed) -> RenderableType:
        handler = {
            "help": self._help,
            "commitments": self._commitments,
            "dismiss": self._dismiss,
            "snooze": self._snooze,
            "reminders": self._reminders,
            "cancel": self._cancel,
            "timezone": self._timezone,
        }.get(command.name)
        if handler is None:
            return Text(f"Unknown command /{command.name}. /help lists what I understand here.")
        return await handler(command.args)

    async def _help(self, args: list[str]) -> RenderableType:
        table = Table.grid(padding=(0, 2))
        for name, description in COMMANDS:
            table.add_row(f"/{name}", description)
        intro = Text(
            "Talk to kept as in any chat. If you mention something coming up, it may "
            "check in afterwards, once, here. Ctrl-C stops an answer; start a line with "
            "// to say something that begins with /. Commands:"
        )
        return _stack(intro, table)

    async def _commitments(self, args: list[str]) -> RenderableType:
        listing = await self._followups().list()
        if not listing.items:
            return Text("No open follow-ups in this chat.")
        tz = await self._zone()
        table = _table("id", "kind", "due", "status", "text", title="Open follow-ups")
        for item in listing.items:
            table.add_row(
                item.id,
                item.subkind.replace("_", " "),
                local_time(item.due, tz),
                item.status,
                item.text,
            )
        return _stack(table, Text("Drop one with /dismiss ID, postpone it with /snooze ID 2h."))

    async def _dismiss(self, args: list[str]) -> RenderableType:
        if not args:
            return Text("Usage: /dismiss ID (the ids are in /commitments)")
        changes = await self._followups().dismiss(args)
        return Text(
            "\n".join(
                f"Dismissed {c.id}: I won't follow up on it." if c.done else f"{c.id}: {c.reason}"
                for c in changes
            )
        )

    async def _snooze(self, args: list[str]) -> RenderableType:
        if len(args) != 2:
            return Text("Usage: /snooze ID 2h (a duration like 30m, 2h or 3d)")
        commitment_id, duration = args
        change = await self._followups().snooze(commitment_id, duration=duration)
        if change.outcome is Outcome.INVALID_DURATION:
            return Text(f"{change.reason}.")
        if not change.done or change.item is None:
            return Text(f"{change.id}: {change.reason}")
        until = local_time(change.item.due, await self._zone())
        return Text(f"Snoozed {change.id} until {until}.")

    async def _reminders(self, args: list[str]) -> RenderableType:
        listing: Listing = await self._reminder_commands().list()
        if not listing.items:
            return Text("No reminders in this chat.")
        table = _table("id", "when", "repeats", "text", title="Reminders")
        tz = await self._zone()
        for r in listing.items:
            # A repeating one names its own zone, which the user may not share.
            repeats = f"{r.repeats} ({r.timezone})" if r.repeats else ""
            table.add_row(r.id, local_time(r.due, tz), repeats, r.text)
        return _stack(table, Text("Cancel one with /cancel ID."))

    async def _cancel(self, args: list[str]) -> RenderableType:
        if len(args) != 1:
            return Text("Usage: /cancel ID (the ids are in /reminders)")
        change = await self._reminder_commands().cancel(args[0])
        if change.outcome is Outcome.NOT_FOUND:
            return Text(f"{change.id}: not found")
        if not change.done:
            return Text(f"{change.id}: not active any more")
        return Text(f"Cancelled {change.id}.")

    async def _timezone(self, args: list[str]) -> RenderableType:
        commands = self._zone_commands()
        if commands is None:
            return Text(f"Time zones are not available here; times are in {await self._zone()}.")
        return Text(describe(await commands.run(" ".join(args))))

    async def confirm_zone(self, choice: ZoneChoice) -> RenderableType:
        """The user's y / n to a zone the chat model proposed (set_timezone)."""
        commands = self._zone_commands()
        if commands is None:
            return Text("Time zones are not available here.")
        return Text(describe(await commands.confirm(choice)))

    def _zone_commands(self) -> TimezoneCommands | None:
        if self._ctx.users is None:
            return None
        asker = self._asker()
        return TimezoneCommands(
            self._ctx.users,
            self._ctx.clock,
            agent_id=asker.agent_id,
            platform=PLATFORM,
            user_id=asker.user_id,
        )

    async def _zone(self) -> str:
        """The zone the user reads times in: theirs, else the agent's."""
        asker = self._asker()
        if self._ctx.users is None:
            return agent_timezone(self._ctx.config(), asker.agent_id)
        return await self._ctx.users.of(asker.agent_id, PLATFORM, asker.user_id)

    def _access(self) -> ChatAccess:
        async def never_admin() -> bool:
            return False  # a private session: nobody else's to see

        return ChatAccess(self._asker(), never_admin)

    def _followups(self) -> FollowUpCommands:
        return FollowUpCommands(self._ctx.commitments, self._access())

    def _reminder_commands(self) -> ReminderCommands:
        return ReminderCommands(self._ctx.reminders.store, self._ctx.clock, self._access())


def _table(*columns: str, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        # Ids and times stay whole (they are copied into commands); text folds.
        table.add_column(column, overflow="fold", no_wrap=column != "text")
    return table


def _stack(*parts: RenderableType) -> RenderableType:
    return Group(*parts)
