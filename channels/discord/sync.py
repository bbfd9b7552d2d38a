"""Slash command sync at start, only when the command tree changed.

Every `tree.sync()` overwrites the application's commands on Discord (a
rate-limited bulk call; global changes take a while to reach every client),
so it is skipped when nothing changed: the hash of the payload `sync()`
would send is stored in the database (core/store/app_state.py) under the
application and the scope (`global`, or `guild:<id>` for
`channels.discord.devGuildId`), and compared at the next start.

The hash is stored only after Discord accepted the sync: a failed or
interrupted sync is tried again at the next start. A sync failure, or a
database that cannot be read or written, is logged with what to do and never
stops the bot: the commands Discord already has keep working.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import discord
from discord import app_commands

from channels.discord.errors import describe
from core.logs import event
from core.store.app_state import AppStateStore

log = logging.getLogger("kept.discord")

SYNC_ACTION = (
    "invite the bot with the applications.commands scope; check channels.discord.devGuildId; "
    "kept syncs again at the next start"
)


def tree_payload(tree: app_commands.CommandTree[Any], guild: discord.Object | None) -> list[Any]:
    """What `tree.sync(guild=...)` sends to Discord (no translator is set)."""
    return [command.to_dict(tree) for command in tree.get_commands(guild=guild)]


def tree_digest(payload: list[Any]) -> str:
    """A stable hash of a sync payload: the same commands give the same hash
    in every process (keys sorted, no whitespace)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def state_key(application_id: int, scope: str) -> str:
    return f"discord.commands:{application_id}:{scope}"


async def sync_commands(
    bot: discord.Client,
    tree: app_commands.CommandTree[Any],
    *,
    dev_guild_id: str | None,
    app_state: AppStateStore | None,
) -> bool:
    """Sync the tree to Discord unless the stored hash says Discord already
    has it. True when a sync request was made and accepted. Without an
    app-state store every start syncs."""
    guild = discord.Object(id=int(dev_guild_id)) if dev_guild_id else None
    scope = f"guild:{dev_guild_id}" if dev_guild_id else "global"
    if guild is not None:
        tree.copy_global_to(guild=guild)
    digest = tree_digest(tree_payload(tree, guild))
    key = state_key(bot.application_id or 0, scope)
    if app_state is not None and await _stored(app_state, key) == digest:
        event(log, logging.INFO, "discord_commands_unchanged", scope=scope, hash=digest[:12])
        return False
    try:
        synced = await tree.sync(guild=guild)
    except Exception as exc:
        # Discord keeps the commands it has; the next start tries again.
        event(
            log,
            logging.WARNING,
            "discord_commands_not_synced",
            scope=scope,
            error=describe(exc),
            action=SYNC_ACTION,
        )
        return False
    event(
        log,
        logging.INFO,
        "discord_commands_synced",
        scope=scope,
        commands=",".join(sorted(c.name for c in synced)),
        hash=digest[:12],
    )
    if app_state is not None:
        await _store(app_state, key, digest)
    return True


async def _stored(app_state: AppStateStore, key: str) -> str | None:
    try:
        return await app_state.get(key)
    except Exception as exc:
        # Unknown: syncing once more is harmless, skipping might leave a change unsent.
        event(
            log,
            logging.WARNING,
            "discord_commands_hash_unread",
            key=key,
            error=repr(exc),
            action="check the database (kept doctor); the commands are synced anyway",
        )
        return None


async def _store(app_state: AppStateStore, key: str, digest: str) -> None:
    try:
        await app_state.put(key, digest)
    except Exception as exc:
        event(
            log,
            logging.WARNING,
            "discord_commands_hash_not_stored",
            key=key,
            error=repr(exc),
            action="check the database (kept doctor); the next start syncs the commands again",
        )
