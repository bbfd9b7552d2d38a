"""The stored chats, for the operator who acts on a user's request:
`kept sessions list [--user PLATFORM:USER] [--json]` (each chat's kind,
members, messages, first and last time), `kept sessions show SESSION_KEY
[--limit N] [--json]` (the transcript, newest last) and `kept sessions
forget SESSION_KEY [--yes] [--json]` (the chat erased whole, every member's
part of it).

stdout carries the answer (one line, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
from rich import box
from rich.table import Table

from bot.confirm import confirm_or_fail
from bot.context import config_option, fail, resolve_config_path
from bot.output import counts_json, print_table
from bot.store_access import load_or_fail, on_backend, opened_backend
from bot.users_cmd import parse_user
from core.clock import iso_utc
from core.commands import wording
from core.messages import parse_session_key
from core.privacy.export import message_json
from core.privacy.store import ChatSummary
from core.store.base import MessageRecord


@click.group("sessions")
def sessions_group() -> None:
    """Stored chats (sessions): list them, show one's transcript, erase one whole."""


def _key(key: str) -> str:
    try:
        parse_session_key(key)
    except ValueError as exc:
        fail(f"{key!r} is not a session key ({exc}), e.g. agent:main:telegram:group:-100123")
    return key


@sessions_group.command("list")
@click.option("--user", "member", metavar="PLATFORM:USER", help="Only the chats holding theirs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def list_cmd(member: str | None, as_json: bool, config_path: Path | None) -> None:
    """Every stored chat, most recently active first."""
    who = parse_user(member) if member is not None else None
    config = load_or_fail(resolve_config_path(config_path))

    found: list[ChatSummary] = on_backend(config, lambda backend: backend.chats.chats(who))
    if as_json:
        document = {
            "sessions": [
                {
                    "key": c.key,
                    "kind": c.kind,
                    "members": c.members,
                    "messages": c.messages,
                    "first": iso_utc(c.first),
                    "last": iso_utc(c.last),
                }
                for c in found
            ]
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    if not found:
        click.echo("No chats are stored." if who is None else f"Nothing is stored from {member}.")
        return
    table = Table(box=box.SIMPLE, caption="times in UTC")
    for column in ("session key", "kind", "members", "messages", "first", "last"):
        table.add_column(column, justify="right" if column in ("members", "messages") else "left")
    for c in found:
        first, last = iso_utc(c.first) or "-", iso_utc(c.last) or "-"
        table.add_row(c.key, c.kind, str(c.members), str(c.messages), first, last)
    print_table(table)


@sessions_group.command("show")
@click.argument("key", metavar="SESSION_KEY")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def show_cmd(key: str, limit: int, as_json: bool, config_path: Path | None) -> None:
    """One chat's transcript: its latest LIMIT messages, newest last."""
    _key(key)
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> list[MessageRecord] | None:
        async with opened_backend(config) as backend:
            if await backend.store.get_session(key) is None:
                return None
            # The whole transcript: also what came before a `/new`.
            return await backend.store.history(key, before_turn_of=2**62, limit=limit, whole=True)

    shown = asyncio.run(main())
    if shown is None:
        fail(f"No chat {key} is stored.")
    if as_json:
        document = {
            "sessionKey": key,
            "messages": [message_json(m) for m in shown],
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    for m in shown:
        who = m.sender_id if m.role == "user" and m.sender_id else m.role
        click.echo(f"{iso_utc(m.ts)}  {who}: {m.text}")


@sessions_group.command("forget")
@click.argument("key", metavar="SESSION_KEY")
@click.option("--yes", is_flag=True, help="Erase without asking.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def forget_cmd(key: str, yes: bool, as_json: bool, config_path: Path | None) -> None:
    """Erase one chat's session whole: every member's messages and the bot's,
    with the chat's follow-ups, reminders and queued exchanges."""
    _key(key)
    config = load_or_fail(resolve_config_path(config_path))

    planned = on_backend(config, lambda backend: backend.erasure.count_session(key))
    if not planned.chats:
        fail(wording.session_erasure(planned, key, done=False))
    confirm_or_fail(wording.session_erasure(planned, key, done=False), yes=yes)
    erased = on_backend(config, lambda backend: backend.erasure.erase_session(key))
    if as_json:
        document = {"sessionKey": key, "erased": bool(erased.chats), "counts": counts_json(erased)}
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    click.echo(wording.session_erasure(erased, key, done=True))
