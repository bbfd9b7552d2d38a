"""`kept updates list [--json]` and `kept updates retry [--json]`: the
platform updates parked after failing while other chats' were stored
(core/store/parked.py).

`retry` only asks: it marks every parked update for a replay, which a
running `kept run` takes within a few seconds (or the next one at its
start) and feeds through its own processing, with its channel's token,
send pace and session locks, the one place an update is ever processed.
The command never creates a database.

stdout carries the answer (one line, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.context import config_option, resolve_config_path
from bot.doctor_platforms import Check
from bot.store_access import load_or_fail, opened_backend
from channels.telegram.parking import REPLAY_EVERY
from core.clock import SystemClock, iso_utc
from core.store.parked import ParkedUpdate

if TYPE_CHECKING:
    from core.store.backends import Backend

# How many parked updates `kept doctor` names (the count says the rest).
DOCTOR_SHOWN = 5


@click.group("updates")
def updates_group() -> None:
    """Platform updates parked after failing while others were stored."""


def _json(parked: ParkedUpdate) -> dict[str, Any]:
    return {
        "source": parked.source,
        "updateId": parked.update_id,
        "chat": parked.chat_key,
        "error": parked.error,
        "tries": parked.tries,
        "parkedAt": iso_utc(parked.parked_at),
        "retryRequestedAt": (
            iso_utc(parked.retry_requested_at) if parked.retry_requested_at else None
        ),
    }


def describe(parked: ParkedUpdate) -> str:
    """One parked update in a line: whose, which, why."""
    return (
        f"{parked.source} update {parked.update_id} ({parked.chat_key}), {parked.tries} tries, "
        f"parked {iso_utc(parked.parked_at)}: {parked.error}"
    )


@updates_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def list_cmd(as_json: bool, config_path: Path | None) -> None:
    """The parked updates, oldest first."""
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> list[ParkedUpdate]:
        async with opened_backend(config) as backend:
            return await backend.parked.listing(limit=1000)

    parked = asyncio.run(main())
    if as_json:
        click.echo(json.dumps({"parked": [_json(p) for p in parked]}, ensure_ascii=False))
        return
    if not parked:
        click.echo("no parked updates")
    for item in parked:
        click.echo(describe(item))


@updates_group.command("retry")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def retry_cmd(as_json: bool, config_path: Path | None) -> None:
    """Ask the running bot to replay every parked update."""
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> int:
        async with opened_backend(config) as backend:
            return await backend.parked.request_retry(now=SystemClock().now())

    marked = asyncio.run(main())
    if as_json:
        click.echo(json.dumps({"retryRequested": marked}))
    elif marked == 0:
        click.echo("no parked updates")
    else:
        noun = "update" if marked == 1 else "updates"
        click.echo(
            f"{marked} parked {noun} marked for retry: a running `kept run` replays them "
            f"within {REPLAY_EVERY:g} s (else the next one at its start)"
        )


async def parked_check(backend: Backend) -> Check:
    """`kept doctor`'s line about parked updates: each is a message nobody
    answered, so any fails the check."""
    try:
        count = await backend.parked.count()
        shown = await backend.parked.listing(limit=DOCTOR_SHOWN)
    except Exception as exc:
        return Check(False, "parked updates", f"cannot be read: {exc}")
    if count == 0:
        return Check(True, "parked updates", "none")
    more = f"; and {count - len(shown)} more" if count > len(shown) else ""
    lines = "; ".join(describe(p) for p in shown)
    return Check(
        False,
        "parked updates",
        f"{count} parked: {lines}{more}; fix the cause, then `kept updates retry`",
    )
