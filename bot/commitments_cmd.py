"""`kept commitments [list] | dismiss ID... | snooze ID --for 2h|--until ISO`.

stdout carries the answer (a table, or one JSON document with --json);
problems go to stderr as one `kept: ...` line each, with a non-zero exit.
The commands are the chat slash commands' (core/commands), with the
admin's view: every agent and chat; their answers are worded as the chats
word them (core/commands/wording.py), times in UTC.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich import box
from rich.table import Table

from bot.context import config_option, fail, require_agent, resolve_config_path
from bot.output import member_label, print_table, scope_label
from bot.store_access import load_or_fail, opened_backend
from core.clock import SystemClock, iso_utc
from core.commands import Change, FollowUpCommands, wording
from core.commands.times import snooze_duration
from core.commitments.model import ACTIVE_STATUSES, STATUSES, Commitment, to_json
from core.commitments.service import CommitmentService

if TYPE_CHECKING:
    from core.store.backends import Backend

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@asynccontextmanager
async def _opened(config_path: Path | None, agent_id: str | None) -> AsyncIterator[Backend]:
    config = load_or_fail(resolve_config_path(config_path))
    require_agent(config, agent_id)
    async with opened_backend(config) as backend:
        yield backend


def _commands(backend: Backend) -> FollowUpCommands:
    """The operator's commands: every agent and chat (core/commands)."""
    return FollowUpCommands(CommitmentService(backend.commitments, SystemClock()))


def _run(
    config_path: Path | None,
    work: Callable[[Backend], Awaitable[T]],
    *,
    agent_id: str | None = None,
) -> T:
    if config_path is None:
        # `kept commitments --config X dismiss ID`: the option went to the group.
        parent = click.get_current_context().parent
        config_path = parent.params.get("config_path") if parent is not None else None

    async def main() -> T:
        async with _opened(config_path, agent_id) as backend:
            return await work(backend)

    return asyncio.run(main())


async def _snooze_and_wake(
    backend: Backend, commitment_id: str, duration: timedelta | None, until: datetime | None
) -> Change:
    """Snooze, then tell a running bot to look at its due times again: a
    reopened `sent` follow-up may be due before the time its heartbeat
    sleeps until. PostgreSQL carries the nudge by NOTIFY; on SQLite the
    bot's wake channel notices this process's commit by itself."""
    change = await _commands(backend).snooze(commitment_id, duration=duration, until=until)
    if change.done and backend.wake_channel is not None:
        await backend.wake_channel.publish()
    return change


def _echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


# --- list --------------------------------------------------------------------


def _list_options(func: F) -> F:
    for option in reversed(
        [
            click.option("--all", "show_all", is_flag=True, help="Every status, not just active."),
            click.option("--agent", "agent_id", default=None, help="Only this agent's."),
            click.option(
                "--status",
                "statuses",
                multiple=True,
                metavar="S",
                help=f"Only this status (repeatable): {', '.join(STATUSES)}.",
            ),
            click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout."),
        ]
    ):
        func = option(func)
    return config_option(func)


@click.group("commitments", invoke_without_command=True)
@_list_options
@click.pass_context
def commitments_group(
    ctx: click.Context,
    config_path: Path | None,
    show_all: bool,
    agent_id: str | None,
    statuses: tuple[str, ...],
    as_json: bool,
) -> None:
    """Inferred follow-ups: list (the default), dismiss, snooze."""
    if ctx.invoked_subcommand is None:
        _list(config_path, show_all, agent_id, statuses, as_json)


@commitments_group.command("list")
@_list_options
def list_cmd(
    config_path: Path | None,
    show_all: bool,
    agent_id: str | None,
    statuses: tuple[str, ...],
    as_json: bool,
) -> None:
    """Active (pending and snoozed) commitments, soonest due first."""
    _list(config_path, show_all, agent_id, statuses, as_json)


def _list(
    config_path: Path | None,
    show_all: bool,
    agent_id: str | None,
    statuses: tuple[str, ...],
    as_json: bool,
) -> None:
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown:
        fail(f"unknown status {unknown[0]!r}; valid statuses: {', '.join(STATUSES)}")
    wanted = tuple(statuses) if statuses else (STATUSES if show_all else ACTIVE_STATUSES)
    listing = _run(
        config_path,
        lambda b: _commands(b).list(statuses=wanted, agent_id=agent_id),
        agent_id=agent_id,
    )
    found = [item.record for item in listing.items if isinstance(item.record, Commitment)]
    if as_json:
        _echo_json({"commitments": [to_json(c) for c in found]})
        return
    if not found:
        hint = "" if show_all or statuses else " Use --all to include every status."
        click.echo(wording.list_heading(listing, "commitments", wording.OPERATOR) + hint)
        return
    # A terminal gets its own width; a pipe or file gets room for whole rows
    # (rich would otherwise squeeze the table into 80 columns).
    print_table(_table(found, detailed=show_all or bool(statuses)))


def _due(c: Commitment) -> str:
    # Month-day is enough: windows last days and start within weeks (--json
    # has the full times).
    start, end = c.due_earliest.astimezone(UTC), c.due_latest.astimezone(UTC)
    return f"{start:%m-%d %H:%M} → {end:%m-%d %H:%M}"


def _table(found: list[Commitment], *, detailed: bool) -> Table:
    table = Table(
        title=f"{len(found)} commitment{'s' if len(found) != 1 else ''}",
        caption="scope: agent / platform / chat \\[#thread]; member: the user id whose message "
        "it came from, who alone (or a chat admin) sees it in a group; times in UTC",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("id", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("kind", overflow="fold")
    table.add_column("due")
    table.add_column("scope")
    table.add_column("member", overflow="fold")
    table.add_column("suggested text", ratio=1)
    if detailed:
        table.add_column("tries", justify="right")
        table.add_column("last error", overflow="fold")
    for c in found:
        row = [
            c.id,
            c.status,
            c.kind,
            _due(c),
            scope_label(c.agent_id, c.platform, c.chat_id, c.thread_id),
            member_label(c.sender_id),
            c.suggested_text,
        ]
        if detailed:
            row += [str(c.attempts), c.last_error or ""]
        table.add_row(*row)
    return table


# --- dismiss -------------------------------------------------------------------


@commitments_group.command("dismiss")
@click.argument("ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def dismiss_cmd(ids: tuple[str, ...], as_json: bool, config_path: Path | None) -> None:
    """Dismiss commitments by id (active ones, or a delivered check-in's);
    exit 1 if any could not be dismissed."""
    changes = _run(config_path, lambda s: _commands(s).dismiss(ids))
    failed = [c for c in changes if not c.done]
    if as_json:
        _echo_json(
            {
                "dismissed": [c.id for c in changes if c.done],
                "failed": [{"id": c.id, "reason": c.reason} for c in failed],
            }
        )
    else:
        for change in changes:
            if change.done:
                click.echo(wording.change(change, wording.OPERATOR))
        for change in failed:
            click.echo(f"kept: {wording.change(change, wording.OPERATOR)}", err=True)
    if failed:
        raise SystemExit(1)


# --- snooze --------------------------------------------------------------------


def _parse_until(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        fail(f"--until: not an ISO 8601 time: {text!r} (e.g. 2026-12-02T09:00+01:00)")


@commitments_group.command("snooze")
@click.argument("commitment_id", metavar="ID")
@click.option("--for", "duration", default=None, help="How long, with a unit: 2h, 30m, 1d.")
@click.option(
    "--until",
    "until",
    default=None,
    help="ISO 8601 time; without an offset it is read in the commitment's time zone.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def snooze_cmd(
    commitment_id: str,
    duration: str | None,
    until: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """Move a commitment's due window to start later, and mark it snoozed
    (a delivered check-in's comes up again then). Never sooner than it is due."""
    if (duration is None) == (until is None):
        fail("give exactly one of --for DURATION or --until TIME")
    delta: timedelta | None = None
    if duration is not None:
        try:
            delta = snooze_duration(duration)
        except ValueError as exc:
            fail(f"--for: {exc}")
    when = _parse_until(until) if until is not None else None

    change = _run(config_path, lambda b: _snooze_and_wake(b, commitment_id, delta, when))
    if not change.done or change.item is None or not isinstance(change.item.record, Commitment):
        fail(wording.change(change, wording.OPERATOR))
    done = change.item.record
    if as_json:
        _echo_json({"commitment": to_json(done), "snoozedUntil": iso_utc(done.snoozed_until)})
    else:
        click.echo(wording.change(change, wording.OPERATOR))
