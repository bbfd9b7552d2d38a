"""`kept pairing list [--json]`, `kept pairing approve CODE` and
`kept pairing revoke PLATFORM:USER`: the
operator's side of dmPolicy `pairing` (core/pairing). An unknown user who
writes to the bot in a direct message gets a one-time code; approving it
makes them a user the bot answers.

stdout carries the answer (text, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from bot.context import config_option, fail, resolve_config_path
from bot.pairing_notify import NotTold, tell_approved
from bot.store_access import load_or_fail, opened_backend
from core.clock import SystemClock
from core.config import KeptConfig
from core.pairing import PairedUser, Pairing, PairingRequest, normalize_code


@click.group("pairing")
def pairing_group() -> None:
    """Approve users who asked to talk to the bot (channels.<platform>.dmPolicy: pairing)."""


PLATFORMS = ("telegram", "discord")


def _user(text: str) -> tuple[str, str]:
    platform, sep, user_id = text.partition(":")
    platform, user_id = platform.strip().lower(), user_id.strip()
    if not sep or not user_id or platform not in PLATFORMS:
        fail(
            f"{text!r} is not PLATFORM:USER "
            f"(PLATFORM one of {', '.join(PLATFORMS)}), e.g. telegram:42"
        )
    return platform, user_id


def _who(platform: str, user_id: str, username: str | None) -> str:
    return f"{platform}:{user_id}" + (f" (@{username})" if username else "")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _pending_json(request: PairingRequest) -> dict[str, Any]:
    return {
        "code": request.code,
        "platform": request.platform,
        "userId": request.user_id,
        "username": request.username,
        "requestedAt": request.created_at.isoformat(),
        "expiresAt": request.expires_at.isoformat(),
    }


def _paired_json(user: PairedUser) -> dict[str, Any]:
    return {
        "platform": user.platform,
        "userId": user.user_id,
        "username": user.username,
        "approvedAt": user.approved_at.isoformat(),
    }


@pairing_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def list_cmd(as_json: bool, config_path: Path | None) -> None:
    """Pending codes (unexpired) and the users already approved."""
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> tuple[list[PairingRequest], list[PairedUser]]:
        async with opened_backend(config) as backend:
            pairing = Pairing(backend.pairing, SystemClock())
            try:
                return await pairing.pending(), await pairing.paired()
            except Exception as exc:  # a storage error: one line, no traceback
                fail(f"cannot read the pairing requests: {exc}")

    pending, paired = asyncio.run(main())
    if as_json:
        document = {
            "pending": [_pending_json(r) for r in pending],
            "approved": [_paired_json(u) for u in paired],
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    click.echo(f"pending ({len(pending)}):")
    for request in pending:
        who = _who(request.platform, request.user_id, request.username)
        click.echo(f"  {request.code}  {who}  expires {_when(request.expires_at)}")
    if not pending:
        click.echo("  none")
    click.echo(f"approved ({len(paired)}):")
    for user in paired:
        who = _who(user.platform, user.user_id, user.username)
        click.echo(f"  {who}  approved {_when(user.approved_at)}")
    if not paired:
        click.echo("  none")


@pairing_group.command("approve")
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--silent", is_flag=True, help="Do not tell the user they were approved.")
@config_option
def approve_cmd(code: str, as_json: bool, silent: bool, config_path: Path | None) -> None:
    """Approve the user who was given CODE: the bot answers them from their next
    message, and tells them so in their DM (not with --silent)."""
    wanted = normalize_code(code)
    if not wanted:
        fail(f"{code!r} is not a pairing code (see `kept pairing list`)")
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> PairedUser | None:
        async with opened_backend(config) as backend:
            try:
                return await Pairing(backend.pairing, SystemClock()).approve(wanted)
            except Exception as exc:  # a storage error: one line, no traceback
                fail(f"cannot store the approval: {exc}")

    user = asyncio.run(main())
    if user is None:
        fail(
            f"no pending pairing request has the code {wanted} "
            "(codes expire after an hour; see `kept pairing list`)"
        )
    not_told = "--silent" if silent else asyncio.run(_tell(config, user))
    if as_json:
        document = {**_paired_json(user), "told": not_told is None, "notTold": not_told}
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    who = _who(user.platform, user.user_id, user.username)
    told = "told them so" if not_told is None else f"not told ({not_told})"
    click.echo(f"approved {who}: the bot answers them from their next message; {told}")


async def _tell(config: KeptConfig, user: PairedUser) -> str | None:
    """None when the user was told, else why not (the approval stands either way)."""
    try:
        await tell_approved(config, os.environ, user)
    except NotTold as exc:
        return str(exc)
    return None


@pairing_group.command("revoke")
@click.argument("user", metavar="PLATFORM:USER")
@config_option
def revoke_cmd(user: str, config_path: Path | None) -> None:
    """Forget an approved user: under dmPolicy pairing they get a new code next time."""
    platform, user_id = _user(user)
    config = load_or_fail(resolve_config_path(config_path))

    async def main() -> bool:
        async with opened_backend(config) as backend:
            try:
                return await Pairing(backend.pairing, SystemClock()).revoke(platform, user_id)
            except Exception as exc:  # a storage error: one line, no traceback
                fail(f"cannot store the revocation: {exc}")

    if not asyncio.run(main()):
        fail(f"{platform}:{user_id} is not an approved user (see `kept pairing list`)")
    click.echo(f"revoked {platform}:{user_id}")
