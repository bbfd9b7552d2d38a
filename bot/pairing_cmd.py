"""`kept pairing list [--json]`, `approve CODE`, `reject CODE`,
`revoke PLATFORM:USER`, `block PLATFORM:USER` and `unblock PLATFORM:USER`:
the operator's side of dmPolicy `pairing` (core/pairing). An unknown user
who writes to the bot in a direct message gets a one-time code; approving
it makes them a user the bot answers, rejecting it drops it, blocking them
means the bot never answers them in a direct message, not even with a code.

A user is named by id (`telegram:42`) or, as `allowFrom` allows, by
username (`telegram:@ana`, or `@ana` when only one platform knows it): the
username kept last saw with their code, approval or block.

stdout carries the answer (text, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from bot.context import config_option, fail, resolve_config_path
from bot.pairing_notify import NotTold, tell_approved
from bot.store_access import load_or_fail, opened_backend
from core.clock import SystemClock
from core.config.model import KeptConfig
from core.pairing import (
    BlockedUser,
    Blocking,
    PairedUser,
    Pairing,
    PairingRequest,
    normalize_code,
    same_username,
)

T = TypeVar("T")


@click.group("pairing")
def pairing_group() -> None:
    """Approve, reject or block users who asked to talk to the bot
    (channels.<platform>.dmPolicy: pairing)."""


PLATFORMS = ("telegram", "discord")
USER_FORMAT = (
    f"PLATFORM:USER (PLATFORM one of {', '.join(PLATFORMS)}; USER an id or @username), "
    "e.g. telegram:42 or telegram:@ana"
)


@dataclass(frozen=True, slots=True)
class Named:
    """A user as typed: an id on a platform, or a username (on a platform,
    or on whichever platform knows it)."""

    platform: str | None
    user_id: str | None
    username: str | None

    def __str__(self) -> str:
        return f"{self.platform}:" * (self.platform is not None) + (
            self.user_id or f"@{self.username}"
        )


def _named(text: str) -> Named:
    typed = text.strip()
    if typed.startswith("@") and len(typed) > 1:
        return Named(None, None, typed[1:])
    platform, sep, user = typed.partition(":")
    platform, user = platform.strip().lower(), user.strip()
    if not sep or not user.lstrip("@") or platform not in PLATFORMS:
        fail(f"{text!r} is not {USER_FORMAT}")
    if user.isascii() and user.isdigit():
        return Named(platform, user, None)
    return Named(platform, None, user.lstrip("@"))


def _run(config: KeptConfig, doing: str, work: Callable[[Pairing], Awaitable[T]]) -> T:
    """`work` on the configured database (never created here); a storage
    error is one line naming what could not be done."""

    async def main() -> T:
        async with opened_backend(config) as backend:
            try:
                return await work(Pairing(backend.pairing, SystemClock()))
            except Exception as exc:  # a storage error: one line, no traceback
                fail(f"cannot {doing}: {exc}")

    return asyncio.run(main())


async def _resolve(
    pairing: Pairing, named: Named, among: list[PairedUser] | list[BlockedUser] | None, what: str
) -> tuple[str, str]:
    """The (platform, user id) `named` stands for. A username is looked up
    among `among` (None: every user kept knows: pending, approved, blocked);
    one line and exit 1 when it names nobody, or several people."""
    if named.user_id is not None:
        assert named.platform is not None
        return named.platform, named.user_id
    assert named.username is not None
    if among is None:
        found = await pairing.known_as(named.username, named.platform)
    else:
        found = {
            (u.platform, u.user_id)
            for u in among
            if (named.platform is None or u.platform == named.platform)
            and same_username(u.username, named.username)
        }
    if not found:
        where = f" on {named.platform}" if named.platform else ""
        fail(f"no {what} is known as @{named.username}{where} (see `kept pairing list`)")
    if len(found) > 1:
        ids = ", ".join(f"{p}:{u}" for p, u in sorted(found))
        fail(f"@{named.username} names several users ({ids}): give PLATFORM:ID")
    [user] = found
    return user


def _who(platform: str, user_id: str, username: str | None) -> str:
    return f"{platform}:{user_id}" + (f" (@{username})" if username else "")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _echo_json(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))


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


def _blocked_json(user: BlockedUser) -> dict[str, Any]:
    return {
        "platform": user.platform,
        "userId": user.user_id,
        "username": user.username,
        "blockedAt": user.blocked_at.isoformat(),
    }


def _code(code: str) -> str:
    wanted = normalize_code(code)
    if not wanted:
        fail(f"{code!r} is not a pairing code (see `kept pairing list`)")
    return wanted


@pairing_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def list_cmd(as_json: bool, config_path: Path | None) -> None:
    """Pending codes (unexpired), the users approved and the users blocked."""
    config = load_or_fail(resolve_config_path(config_path))

    async def read(
        pairing: Pairing,
    ) -> tuple[list[PairingRequest], list[PairedUser], list[BlockedUser]]:
        return await pairing.pending(), await pairing.paired(), await pairing.blocked()

    pending, paired, blocked = _run(config, "read the pairing requests", read)
    if as_json:
        _echo_json(
            {
                "pending": [_pending_json(r) for r in pending],
                "approved": [_paired_json(u) for u in paired],
                "blocked": [_blocked_json(u) for u in blocked],
            }
        )
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
    click.echo(f"blocked ({len(blocked)}):")
    for blocked_user in blocked:
        who = _who(blocked_user.platform, blocked_user.user_id, blocked_user.username)
        click.echo(f"  {who}  blocked {_when(blocked_user.blocked_at)}")
    if not blocked:
        click.echo("  none")


@pairing_group.command("approve")
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--silent", is_flag=True, help="Do not tell the user they were approved.")
@config_option
def approve_cmd(code: str, as_json: bool, silent: bool, config_path: Path | None) -> None:
    """Approve the user who was given CODE: the bot answers them from their next
    message, and tells them so in their DM (not with --silent)."""
    wanted = _code(code)
    config = load_or_fail(resolve_config_path(config_path))
    user = _run(config, "store the approval", lambda pairing: pairing.approve(wanted))
    if user is None:
        fail(
            f"no pending pairing request has the code {wanted} "
            "(codes expire after an hour; see `kept pairing list`)"
        )
    not_told = "--silent" if silent else asyncio.run(_tell(config, user))
    if as_json:
        _echo_json({**_paired_json(user), "told": not_told is None, "notTold": not_told})
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


@pairing_group.command("reject")
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def reject_cmd(code: str, as_json: bool, config_path: Path | None) -> None:
    """Drop the pending CODE. The user is not told; if they write again they get
    a new code (`kept pairing block` keeps them out for good)."""
    wanted = _code(code)
    config = load_or_fail(resolve_config_path(config_path))
    request = _run(config, "drop the pairing request", lambda pairing: pairing.reject(wanted))
    if request is None:
        fail(
            f"no pending pairing request has the code {wanted} "
            "(codes expire after an hour; see `kept pairing list`)"
        )
    if as_json:
        _echo_json(_pending_json(request))
        return
    who = _who(request.platform, request.user_id, request.username)
    click.echo(
        f"rejected {request.code} of {who}: they are not told; "
        f"`kept pairing block {request.platform}:{request.user_id}` keeps them out"
    )


@pairing_group.command("revoke")
@click.argument("user", metavar="PLATFORM:USER")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def revoke_cmd(user: str, as_json: bool, config_path: Path | None) -> None:
    """Forget an approved user (by id or @username): under dmPolicy pairing they
    get a new code next time."""
    named = _named(user)
    config = load_or_fail(resolve_config_path(config_path))

    async def revoke(pairing: Pairing) -> tuple[str, str, bool]:
        platform, user_id = await _resolve(pairing, named, await pairing.paired(), "approved user")
        return platform, user_id, await pairing.revoke(platform, user_id)

    platform, user_id, revoked = _run(config, "store the revocation", revoke)
    if not revoked:
        fail(f"{platform}:{user_id} is not an approved user (see `kept pairing list`)")
    if as_json:
        _echo_json({"platform": platform, "userId": user_id, "revoked": True})
        return
    click.echo(f"revoked {platform}:{user_id}")


@pairing_group.command("block")
@click.argument("user", metavar="PLATFORM:USER")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def block_cmd(user: str, as_json: bool, config_path: Path | None) -> None:
    """Block a user (by id, or by the @username kept saw with their code): the bot
    never answers their direct messages, whatever dmPolicy says, and offers no
    code; their pending code and approval are dropped. Not told; see `unblock`."""
    named = _named(user)
    config = load_or_fail(resolve_config_path(config_path))

    async def block(pairing: Pairing) -> Blocking:
        platform, user_id = await _resolve(pairing, named, None, "user")
        return await pairing.block(platform, user_id)

    blocking = _run(config, "store the block", block)
    blocked = blocking.user
    if as_json:
        _echo_json(
            {
                **_blocked_json(blocked),
                "droppedCodes": list(blocking.dropped_codes),
                "wasApproved": blocking.was_approved,
            }
        )
        return
    dropped = [f"dropped code {c}" for c in blocking.dropped_codes]
    dropped += ["revoked their approval"] if blocking.was_approved else []
    also = f"; {', '.join(dropped)}" if dropped else ""
    who = _who(blocked.platform, blocked.user_id, blocked.username)
    click.echo(f"blocked {who}: the bot sends them nothing, not even a code{also}")


@pairing_group.command("unblock")
@click.argument("user", metavar="PLATFORM:USER")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def unblock_cmd(user: str, as_json: bool, config_path: Path | None) -> None:
    """Lift a block: the user is a stranger again (under dmPolicy pairing they get
    a code when they write next; an approval dropped by the block is not back)."""
    named = _named(user)
    config = load_or_fail(resolve_config_path(config_path))

    async def unblock(pairing: Pairing) -> BlockedUser | None:
        blocked = await pairing.blocked()
        platform, user_id = await _resolve(pairing, named, blocked, "blocked user")
        return await pairing.unblock(platform, user_id)

    lifted = _run(config, "lift the block", unblock)
    if lifted is None:
        fail(f"{named} is not a blocked user (see `kept pairing list`)")
    if as_json:
        _echo_json(_blocked_json(lifted))
        return
    who = _who(lifted.platform, lifted.user_id, lifted.username)
    click.echo(f"unblocked {who}: under dmPolicy pairing they get a code when they write next")
