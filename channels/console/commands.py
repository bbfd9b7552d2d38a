"""`kept chat`'s local commands: parsed here, answered by the same
platform-neutral command layer as Telegram's and Discord's (core/commands),
rendered as rich tables and lines. None of it is a conversation turn:
nothing here reaches the model or the transcript.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from channels.context import ChannelContext
from core.commands import wording
from core.commands.registry import (
    COMMANDS as REGISTRY,
)
from core.commands.registry import (
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
from core.commands.results import Listing
from core.commands.rights import DataShown, ExportMade, ForgetAsked
from core.commands.times import local_time
from core.commands.timezone import ZoneAnswer
from core.commitments.visibility import Asker, ChatAccess
from core.limits.spend import UsageShown
from core.messages import ForgetChoice, ListName, ZoneChoice

PLATFORM = "console"
# The registry's commands, and the console's own way out.
COMMANDS: list[tuple[str, str]] = [(c.name, c.summary) for c in REGISTRY.commands] + [
    ("quit", "Leave (also /exit, Ctrl-D, or Ctrl-C twice)")
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
        *,
        export_dir: Path | None = None,
    ) -> None:
        """`asker`: who types, in which session (read per command, as the
        agent can change with the config). `export_dir`: where /export
        writes its file (default: the current directory)."""
        self._ctx = ctx
        self._asker = asker
        self._export_dir = export_dir
        # The /forget question the next line answers (a `yes` erases).
        self._forget: ForgetChoice | None = None

    async def run(self, command: Parsed) -> RenderableType:
        call = self._call()
        return await self._render(await REGISTRY.run(command.name, command.args, call), call)

    async def _render(self, result: Result, call: Invocation) -> RenderableType:
        match result:
            case HelpShown():
                return _help()
            case UnknownCommand(name):
                return Text(wording.unknown_command(name))
            case WrongUsage(command):
                return Text(wording.usage(command.usage))
            case ZonesUnavailable():
                return Text(wording.ZONES_UNAVAILABLE)
            case ListShown(name, page, _):
                return _listing(page.listing, name, await call.timezone())
            case Changed(changes):
                zone = await call.timezone()
                style = wording.Style(when=lambda moment: local_time(moment, zone))
                return Text(wording.changes(list(changes), style))
            case ZoneAnswer():
                return Text(wording.zone(result))
            case Told(text):
                return Text(text)
            case ForgetAsked(counts, actions):
                self._forget = next((a for a in actions if a.erase), None)
                return Text(wording.forget_prompt(counts, typed=True))
            case DataShown():
                return await self._my_data(result, call)
            case ExportMade():
                return Text(self._write_export(result))
            case UsageShown():
                return Text(wording.usage_today(result))

    @property
    def forget_asked(self) -> bool:
        return self._forget is not None

    async def answer_forget(self, erase: bool) -> RenderableType:
        """The line after /forget's question: `yes` erases (within the lapse),
        anything else cancels."""
        asked, self._forget = self._forget, None
        rights = self._call().rights()
        if asked is None or rights is None:
            return Text(wording.NO_LONGER_WORKS)
        return Text(wording.forget_answer(await rights.answer_forget(replace(asked, erase=erase))))

    async def _my_data(self, shown: DataShown, call: Invocation) -> RenderableType:
        zone = await call.timezone()
        parts: list[RenderableType] = [Text(wording.my_data(shown))]
        for name, page in (("commitments", shown.followups), ("reminders", shown.reminders)):
            if page.listing.items:
                parts.append(_listing(page.listing, name, zone))  # type: ignore[arg-type]
        return _stack(*parts)

    def _write_export(self, made: ExportMade) -> str:
        """The export as a new file (0600), as `kept users export --out` writes it."""
        path = (self._export_dir or Path.cwd()) / made.filename
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return wording.export_exists(str(path))
        except OSError as exc:
            return wording.export_not_written(str(path), exc.strerror or str(exc))
        with os.fdopen(fd, "wb") as file:
            file.write(made.data)
        return wording.export_saved(str(path), made.chats)

    async def confirm_zone(self, choice: ZoneChoice) -> RenderableType:
        """The user's y / n to a zone the chat model proposed (set_timezone)."""
        commands = self._call().zones()
        if commands is None:
            return Text(wording.ZONES_UNAVAILABLE)
        return Text(wording.zone(await commands.confirm(choice)))

    def _call(self) -> Invocation:
        async def never_admin() -> bool:
            return False  # a private session: nobody else's to see

        ctx = self._ctx
        return Invocation(
            PLATFORM,
            ChatAccess(self._asker(), never_admin),
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


def _help() -> RenderableType:
    table = Table.grid(padding=(0, 2))
    for name, description in COMMANDS:
        table.add_row(f"/{name}", description)
    intro = Text(
        "Talk to kept as in any chat. If you mention something coming up, it may "
        "check in afterwards, once, here. Ctrl-C stops an answer; start a line with "
        "// to say something that begins with /. Commands:"
    )
    return _stack(intro, table)


def _listing(listing: Listing, name: ListName, tz: str) -> RenderableType:
    """A whole listing as one table, times in the user's zone."""
    heading = wording.list_heading(listing, name)
    if not listing.items:
        return Text(heading)
    if name == "reminders":
        table = _table("id", "when", "repeats", "text", title=heading.rstrip(":"))
        for r in listing.items:
            # A repeating one names its own zone, which the user may not share.
            repeats = f"{r.repeats} ({r.timezone})" if r.repeats else ""
            table.add_row(r.id, local_time(r.due, tz), repeats, r.text)
    else:
        table = _table("id", "kind", "due", "status", "text", title=heading.rstrip(":"))
        for item in listing.items:
            table.add_row(
                item.id,
                item.subkind.replace("_", " "),
                local_time(item.due, tz),
                item.status,
                item.text,
            )
    return _stack(table, Text(wording.list_footer(name, wording.Style(when=str))))


def _table(*columns: str, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        # Ids and times stay whole (they are copied into commands); text folds.
        table.add_column(column, overflow="fold", no_wrap=column != "text")
    return table


def _stack(*parts: RenderableType) -> RenderableType:
    return Group(*parts)
