"""`kept doctor`: one line per check, non-zero exit when any check fails."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from bot.services import open_storage
from core.config import KeptConfig
from core.config_file import ConfigError, load_config
from core.llm import LLMClient, LLMError
from core.store.errors import masked_url


@dataclass(frozen=True)
class Check:
    ok: bool
    name: str
    detail: str


async def run_doctor(path: Path, environ: Mapping[str, str] | None = None) -> int:
    env = environ if environ is not None else os.environ
    checks: list[Check] = []
    try:
        config = load_config(path)
        checks.append(Check(True, "config", f"{path} is valid"))
    except ConfigError as exc:
        checks.append(Check(False, "config", "; ".join(exc.problems)))
        _print(checks)
        return 1
    checks.append(await _check_database(config))
    checks.extend(_check_tokens(config, env))
    checks.append(_discord_intents(config))
    checks.append(await _check_model(config, env))
    _print(checks)
    return 0 if all(c.ok for c in checks) else 1


async def _check_database(config: KeptConfig) -> Check:
    shown = masked_url(config.storage.url)
    try:
        backend = open_storage(config.storage.url)
        await backend.open()
        try:
            version = await backend.store.schema_version()
        finally:
            await backend.close()
    except Exception as exc:
        return Check(False, "database", f"{shown}: {exc}; check storage.url")
    return Check(True, "database", f"{shown} reachable, schema version {version}")


def _check_tokens(config: KeptConfig, env: Mapping[str, str]) -> list[Check]:
    checks = []
    for name in ("telegram", "discord"):
        channel = getattr(config.channels, name)
        present = bool(env.get(channel.token_env))
        state = "set" if present else "not set"
        if channel.enabled:
            detail = f"${channel.token_env} {state}"
            if not present:
                detail += f"; export it or set channels.{name}.tokenEnv"
            checks.append(Check(present, f"{name} token", detail))
        else:
            checks.append(Check(True, f"{name} token", f"${channel.token_env} {state} (disabled)"))
    key_set = bool(env.get(config.llm.api_key_env))
    if not key_set and config.llm.base_url is None:
        checks.append(
            Check(
                False,
                "model key",
                f"${config.llm.api_key_env} not set; export it or set llm.baseUrl",
            )
        )
    else:
        checks.append(
            Check(True, "model key", f"${config.llm.api_key_env} {'set' if key_set else 'not set'}")
        )
    return checks


def _discord_intents(config: KeptConfig) -> Check:
    """Which gateway intents the Discord client asks for (nothing is
    connected: the developer portal must allow a privileged one)."""
    # Imported here: discord.py is heavy, and only this line needs it.
    from channels.discord.adapter import intent_names, intents

    settings = config.channels.discord
    names = ", ".join(intent_names(intents(settings.message_content_intent)))
    if settings.message_content_intent:
        detail = (
            f"{names}; Message Content is privileged: enable it for the bot in the developer "
            "portal (Bot > Privileged Gateway Intents)"
        )
    else:
        detail = (
            f"{names}; no privileged intent: DMs and messages that mention the bot are read, "
            "replies that do not ping it are ignored (channels.discord.messageContentIntent)"
        )
    if not settings.enabled:
        detail += " (disabled)"
    return Check(True, "discord intents", detail)


async def _check_model(config: KeptConfig, env: Mapping[str, str]) -> Check:
    client = LLMClient(config.llm, environ=env)
    try:
        detail = await client.ping()
    except LLMError as exc:
        where = config.llm.base_url or "the default endpoint"
        return Check(False, "model", f"{where}: {exc.kind}: {exc}")
    finally:
        await client.aclose()
    return Check(True, "model", detail)


def _print(checks: list[Check]) -> None:
    for c in checks:
        click.echo(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<15} {c.detail}")
