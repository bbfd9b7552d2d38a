"""`kept sessions forget SESSION_KEY [--yes] [--json]`: erase one chat's
session whole (a group's transcript, say), every member's part of it.

stdout carries the answer (one line, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from bot.confirm import confirm_or_fail
from bot.context import config_option, fail, resolve_config_path
from bot.output import counts_json
from bot.store_access import load_or_fail, opened_backend
from core.commands import wording
from core.messages import parse_session_key
from core.privacy.store import ErasureCounts


@click.group("sessions")
def sessions_group() -> None:
    """Stored chats (sessions): erasing one whole."""


@sessions_group.command("forget")
@click.argument("key", metavar="SESSION_KEY")
@click.option("--yes", is_flag=True, help="Erase without asking.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def forget_cmd(key: str, yes: bool, as_json: bool, config_path: Path | None) -> None:
    """Erase one chat's session whole: every member's messages and the bot's,
    with the chat's follow-ups, reminders and queued exchanges."""
    try:
        parse_session_key(key)
    except ValueError as exc:
        fail(f"{key!r} is not a session key ({exc}), e.g. agent:main:telegram:group:-100123")
    config = load_or_fail(resolve_config_path(config_path))

    async def count() -> ErasureCounts:
        async with opened_backend(config) as backend:
            return await backend.erasure.count_session(key)

    async def erase() -> ErasureCounts:
        async with opened_backend(config) as backend:
            return await backend.erasure.erase_session(key)

    planned = asyncio.run(count())
    if not planned.chats:
        fail(wording.session_erasure(planned, key, done=False))
    confirm_or_fail(wording.session_erasure(planned, key, done=False), yes=yes)
    erased = asyncio.run(erase())
    if as_json:
        document = {"sessionKey": key, "erased": bool(erased.chats), "counts": counts_json(erased)}
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    click.echo(wording.session_erasure(erased, key, done=True))
