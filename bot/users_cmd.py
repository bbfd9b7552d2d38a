"""`kept users timezone PLATFORM:USER [ZONE | --clear] [--json]`: the admin's
view of a user's own time zone (what `/timezone` sets in a chat).
`kept users forget PLATFORM:USER [--yes] [--json]`: erase everything kept
holds from a user, under every agent (core/privacy).
`kept users export PLATFORM:USER [--out FILE]`: everything kept holds from
or about a user, one JSON document (core/privacy/export.py).
`kept users followups PLATFORM:USER [on|off] [--agent AGENT] [--json]`: show
or switch a user's own follow-ups (what `/followups` does in a private chat),
under every configured agent or one.

stdout carries the answer (one line, worded as /timezone's, about the
named user: core/commands/wording.py; or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.confirm import confirm_or_fail
from bot.context import config_option, fail, resolve_config_path
from bot.output import counts_json
from bot.services import database_errors
from bot.store_access import load_or_fail, on_backend, opened_backend
from core.clock import SystemClock, iso_utc
from core.commands import wording
from core.commands.timezone import TimezoneCommands, ZoneAnswer, ZoneOutcome
from core.config.model import KeptConfig
from core.privacy.export import document_text
from core.privacy.store import ErasedUser, ErasureCounts
from core.store import MigrationError
from core.store.errors import masked_url
from core.users import FollowUpPreferences, FollowUpState, Switched, UserZones
from core.users.followup_prefs import parse_switch

if TYPE_CHECKING:
    from core.store.backends import Backend

PLATFORMS = ("telegram", "discord", "console")


@click.group("users")
def users_group() -> None:
    """Per-user settings and data: a user's own time zone and follow-ups; erasing what kept
    holds from them."""


def parse_user(text: str) -> tuple[str, str]:
    platform, sep, user_id = text.partition(":")
    platform = platform.strip().lower()
    user_id = user_id.strip()
    if not sep or not user_id or platform not in PLATFORMS:
        fail(
            f"{text!r} is not PLATFORM:USER "
            f"(PLATFORM one of {', '.join(PLATFORMS)}), e.g. telegram:42"
        )
    return platform, user_id


def _agent(config: KeptConfig, platform: str) -> str:
    """The agent that serves the platform, whose zone applies without one."""
    channel = getattr(config.channels, platform, None)
    agent = getattr(channel, "agent", None)
    return agent if isinstance(agent, str) else config.agents[0].id


@users_group.command("timezone")
@click.argument("user", metavar="PLATFORM:USER")
@click.argument("zone", metavar="[ZONE]", required=False)
@click.option("--clear", is_flag=True, help="Forget the user's zone (the agent's applies).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def timezone_cmd(
    user: str, zone: str | None, clear: bool, as_json: bool, config_path: Path | None
) -> None:
    """Show, set (ZONE, an IANA name such as Europe/Paris) or --clear a user's time zone."""
    platform, user_id = parse_user(user)
    if zone is not None and clear:
        fail("give a ZONE or --clear, not both")
    config = load_or_fail(resolve_config_path(config_path))
    agent_id = _agent(config, platform)

    async def main() -> ZoneAnswer:
        # Never create=True: like every command but run, chat and import, a
        # mistyped storage.url is "no database at ...", not a fresh database.
        try:
            async with opened_backend(config) as backend:
                zones = UserZones(
                    backend.user_zones, lambda agent: config.agent_or_default(agent).timezone
                )
                commands = TimezoneCommands(
                    zones, SystemClock(), agent_id=agent_id, platform=platform, user_id=user_id
                )
                if clear:
                    return await commands.clear()
                if zone is not None:
                    return await commands.set(zone)
                return await commands.show()
        except (OSError, MigrationError, *database_errors()) as exc:
            fail(f"cannot use the database {masked_url(config.storage.url)}: {exc}")

    answer = asyncio.run(main())
    who = f"{platform}:{user_id}"
    if answer.outcome is ZoneOutcome.INVALID:
        fail(wording.zone(answer, who))
    if as_json:
        document = {
            "platform": platform,
            "userId": user_id,
            "timezone": answer.timezone if answer.own else None,
            "effectiveTimezone": answer.timezone,
            "changed": answer.outcome in (ZoneOutcome.SET, ZoneOutcome.CLEARED),
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    click.echo(wording.zone(answer, who))


def _counts_document(who: ErasedUser, counts: ErasureCounts, *, erased: bool) -> str:
    document = {
        "platform": who.platform,
        "userId": who.user_id,
        "erased": erased,
        "counts": counts_json(counts),
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


@users_group.command("forget")
@click.argument("user", metavar="PLATFORM:USER")
@click.option("--yes", is_flag=True, help="Erase without asking.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def forget_cmd(user: str, yes: bool, as_json: bool, config_path: Path | None) -> None:
    """Erase everything kept holds from a user, under every agent: their private
    chats whole; in groups their messages, the bot's replies to them, their
    follow-ups and reminders; their settings. Their pairing approval stays."""
    platform, user_id = parse_user(user)
    who = ErasedUser(platform, user_id)
    shown = f"{platform}:{user_id}"
    config = load_or_fail(resolve_config_path(config_path))

    planned = on_backend(config, lambda backend: backend.erasure.count(who))
    if planned.total:
        confirm_or_fail(wording.erasure(planned, done=False, who=shown), yes=yes)
    erased = on_backend(config, lambda b: b.erasure.erase(who)) if planned.total else planned
    if as_json:
        click.echo(_counts_document(who, erased, erased=bool(erased.total)))
        return
    click.echo(wording.erasure(erased, done=True, who=shown))


@users_group.command("export")
@click.argument("user", metavar="PLATFORM:USER")
@click.option(
    "--out", type=click.Path(path_type=Path), help="Write to FILE (a new file, 0600), not stdout."
)
@config_option
def export_cmd(user: str, out: Path | None, config_path: Path | None) -> None:
    """Everything kept holds from or about a user, under every agent, as one
    JSON document: nothing of anyone else's."""
    platform, user_id = parse_user(user)
    config = load_or_fail(resolve_config_path(config_path))
    if out is not None and out.exists():
        fail(f"{out} already exists; name a new file")
    if out is not None and not out.parent.is_dir():
        fail(f"no directory {out.parent} to write the export in")
    exported = on_backend(config, lambda b: b.exports.export(ErasedUser(platform, user_id)))
    text = document_text(exported, at=SystemClock().now())
    if out is None:
        click.echo(text)
        return
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text + "\n")
    chats = len(exported.chats)
    click.echo(f"Exported what I hold from {platform}:{user_id} ({chats} chats) to {out}.")


@users_group.command("followups")
@click.argument("user", metavar="PLATFORM:USER")
@click.argument("state", metavar="[on|off]", required=False)
@click.option(
    "--agent", "agent_id", default=None, help="Only this agent (default: every configured agent)."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def followups_cmd(
    user: str, state: str | None, agent_id: str | None, as_json: bool, config_path: Path | None
) -> None:
    """Show, or switch on or off, whether kept follows up with a user: off,
    their messages are no longer sent to the extraction model, their pending
    follow-ups are dismissed and no check-in is sent to them. Reminders stay."""
    platform, user_id = parse_user(user)
    enabled = None
    if state is not None:
        enabled = parse_switch(state)
        if enabled is None:
            fail(f"{state!r} is neither on nor off")
    config = load_or_fail(resolve_config_path(config_path))
    agents = [agent.id for agent in config.agents]
    if agent_id is not None:
        if agent_id not in agents:
            fail(f"no agent {agent_id!r} in the config (agents: {', '.join(agents)})")
        agents = [agent_id]

    async def work(backend: Backend) -> list[tuple[str, FollowUpState, Switched | None]]:
        prefs = FollowUpPreferences(backend.followup_prefs)
        now = SystemClock().now()
        found: list[tuple[str, FollowUpState, Switched | None]] = []
        for agent in agents:
            switched = None
            if enabled is not None:
                switched = await prefs.set_user(agent, platform, user_id, enabled, now=now)
            found.append((agent, await prefs.state(agent, platform, user_id), switched))
        return found

    answers = on_backend(config, work)
    who = f"{platform}:{user_id}"
    if as_json:
        document = {
            "platform": platform,
            "userId": user_id,
            "agents": [
                {
                    "agentId": agent,
                    "on": found.on,
                    "set": found.own is not None,
                    "updatedAt": iso_utc(found.own_updated_at),
                    "changed": bool(switched and switched.changed),
                    "dismissed": switched.dismissed if switched else 0,
                    "unqueued": switched.unqueued if switched else 0,
                }
                for agent, found, switched in answers
            ],
        }
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    for agent, found, switched in answers:
        click.echo(wording.followups_of(who, agent, found, switched))
