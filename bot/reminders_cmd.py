"""`kept reminders [--all] [--json]` and `kept reminders cancel ID`.

stdout carries the answer (a table, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit. This is
the admin's view of the chats' /reminders and /cancel (core/commands): every
agent and chat, its answers worded as the chats word them
(core/commands/wording.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich import box
from rich.table import Table

from bot.context import config_option, fail, resolve_config_path
from bot.output import print_table, scope_label
from bot.services import database_errors
from bot.store_access import load_or_fail, opened_backend
from core.clock import SystemClock
from core.commands import ReminderCommands, wording
from core.reminders.model import Reminder, to_json
from core.reminders.schedule import local_iso
from core.reminders.store import ReminderStore
from core.store import MigrationError

T = TypeVar("T")


def _run(config_path: Path | None, work: Callable[[ReminderStore], Awaitable[T]]) -> T:
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> T:
        try:
            async with opened_backend(config) as backend:
                return await work(backend.reminders)
        except (OSError, MigrationError, *database_errors()) as exc:  # locked, unreadable, newer
            fail(f"cannot use the database {config.storage.url}: {exc}")

    return asyncio.run(main())


def _commands(store: ReminderStore) -> ReminderCommands:
    """The operator's commands: every agent and chat (core/commands)."""
    return ReminderCommands(store, SystemClock())


def _echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


@click.group("reminders", invoke_without_command=True)
@click.option("--all", "show_all", is_flag=True, help="Every status, not just active.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
@click.pass_context
def reminders_group(
    ctx: click.Context, show_all: bool, as_json: bool, config_path: Path | None
) -> None:
    """Exact reminders (scheduled tasks): list (the default), cancel."""
    # `kept reminders --config X cancel ID` works as well as `... cancel ID --config X`.
    ctx.obj = {"config_path": config_path}
    if ctx.invoked_subcommand is not None:
        return
    statuses = None if show_all else ("active",)
    listing = _run(config_path, lambda store: _commands(store).list(statuses=statuses))
    found = [item.record for item in listing.items if isinstance(item.record, Reminder)]
    if as_json:
        _echo_json({"reminders": [to_json(r) for r in found]})
        return
    if not found:
        hint = "" if show_all else " Use --all to include finished ones."
        click.echo(wording.list_heading(listing, "reminders", wording.OPERATOR) + hint)
        return
    print_table(_table(found, detailed=show_all))


def _schedule(r: Reminder) -> str:
    return f"cron {r.cron}" if r.cron is not None else f"once ({r.kind})"


def _table(found: list[Reminder], *, detailed: bool) -> Table:
    table = Table(
        title=f"{len(found)} reminder{'s' if len(found) != 1 else ''}",
        caption="next fire in the reminder's time zone; scope: agent / platform / chat \\[#thread]",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("id", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("next fire", no_wrap=True)
    table.add_column("schedule")
    table.add_column("scope")
    table.add_column("text", ratio=1)
    if detailed:
        table.add_column("tries", justify="right")
        table.add_column("last error", overflow="fold")
    for r in found:
        # A finished reminder has no next time; its stored one would mislead.
        next_fire = f"{local_iso(r.next_fire_at, r.timezone)} {r.timezone}"
        if r.status != "active":
            next_fire = "-"
        row = [
            r.id,
            r.status,
            next_fire,
            _schedule(r),
            scope_label(r.agent_id, r.platform, r.chat_id, r.thread_id),
            r.text,
        ]
        if detailed:
            row += [str(r.attempts), r.last_error or ""]
        table.add_row(*row)
    return table


@reminders_group.command("cancel")
@click.argument("reminder_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
@click.pass_context
def cancel_cmd(
    ctx: click.Context, reminder_id: str, as_json: bool, config_path: Path | None
) -> None:
    """Cancel an active reminder; exit 1 if it is unknown or already finished."""
    path = config_path or (ctx.obj or {}).get("config_path")
    change = _run(path, lambda store: _commands(store).cancel(reminder_id))
    if not change.done or change.item is None or not isinstance(change.item.record, Reminder):
        fail(wording.change(change, wording.OPERATOR))
    if as_json:
        _echo_json({"cancelled": to_json(change.item.record)})
    else:
        click.echo(wording.change(change, wording.OPERATOR))
