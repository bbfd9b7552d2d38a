"""`kept doctor`: one line per check (or one JSON object with `--json`),
non-zero exit when any check fails. It creates nothing: a missing database
is reported as missing, not made."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import click

from bot.doctor_files import check_file_privacy
from bot.doctor_platforms import Check, check_discord, check_telegram
from bot.preflight import endpoint_problem
from bot.services import open_storage
from bot.store_access import MISSING_HINT, probe_write
from bot.updates_cmd import parked_check
from core.config.file import ConfigError, config_source, load_config
from core.config.model import KeptConfig
from core.limits.meter import budget_day
from core.limits.store import BOT, BudgetStore
from core.llm import LLMClient, LLMError
from core.privacy.store import RetentionStore
from core.secrets import mask_secrets, masked_url, remember
from core.store.errors import DatabaseMissing, DatabaseOutdated, storage_action

# Below this much free space where the SQLite file lives, the check fails:
# a full disk stops every write, messages included.
MIN_FREE_BYTES = 100 * 1024 * 1024

# How an OpenAI-compatible server without a /models route answers it; any
# other error (refused key, outage, timeout) fails the model check.
NO_MODEL_LIST = ("not_found", "bad_request", "malformed")


async def run_doctor(
    path: Path,
    environ: Mapping[str, str] | None = None,
    *,
    deep: bool = False,
    as_json: bool = False,
) -> int:
    env = environ if environ is not None else os.environ
    checks: list[Check] = []
    try:
        config = load_config(path, env)
        remember(config, env)
        checks.append(Check(True, "config", f"{config_source(path, env)} is valid"))
    except ConfigError as exc:
        checks.append(Check(False, "config", "; ".join(exc.problems)))
        return _report(checks, as_json)
    checks.extend(await _check_database(config))
    checks.extend(check_file_privacy(sqlite_file(config.storage.url)))
    checks.append(_check_disk(config))
    checks.append(await check_telegram(config.channels.telegram, env))
    checks.append(await check_discord(config.channels.discord, env))
    checks.append(_discord_intents(config))
    checks.extend(_posture(config))
    checks.extend(limits_in_force(config))
    checks.extend(await _check_model(config, env, deep=deep))
    return _report(checks, as_json)


async def _check_database(config: KeptConfig) -> list[Check]:
    shown = masked_url(config.storage.url)
    try:
        backend = open_storage(config.storage.url, create=False)
    except DatabaseMissing as exc:
        return [Check(False, "database", f"{exc}; {MISSING_HINT}")]
    except Exception as exc:
        return [Check(False, "database", f"{shown}: {exc}; check storage.url")]
    try:
        await backend.open()
    except DatabaseOutdated as exc:
        # Not a fault: the next start upgrades it; doctor itself never does.
        note = f"{shown}: schema version {exc.version}, this kept needs {exc.needed}"
        return [Check(True, "database", f"{note}; the next `kept run` upgrades it")]
    except Exception as exc:
        return [Check(False, "database", f"{shown}: {exc}; {storage_action(exc)}")]
    try:
        version = await backend.store.schema_version()
        checks = [Check(True, "database", f"{shown} reachable, schema version {version}")]
        try:
            await probe_write(backend, datetime.now(UTC).isoformat())
            checks.append(Check(True, "database write", "a test write succeeded"))
        except Exception as exc:
            checks.append(Check(False, "database write", f"{exc}; {storage_action(exc)}"))
        checks.append(await parked_check(backend))
        checks.append(await _retention(backend.retention, config))
        checks.append(await _spend_today(backend.budgets, config))
        return checks
    finally:
        await backend.close()


async def _retention(store: RetentionStore, config: KeptConfig) -> Check:
    """The retention policy and the oldest message's age. Informational:
    the pass runs in `kept run`, so an older message only means it has not
    run since (or is not running)."""
    policy = config.storage.retention
    messages = f"messages {policy.messages}" if policy.messages else "messages kept forever"
    closed = policy.closed or "kept forever"
    detail = f"{messages}; ended follow-ups and reminders {closed}"
    try:
        oldest = await store.oldest_message()
    except Exception as exc:
        return Check(False, "retention", f"{detail}; the oldest message: {exc}")
    if oldest is None:
        return Check(True, "retention", f"{detail}; no message stored")
    age = datetime.now(UTC) - oldest
    detail = f"{detail}; the oldest message is {_age(age.total_seconds())} old"
    limit = policy.messages_seconds
    if limit is not None and age.total_seconds() > limit:
        detail += " (past the retention: `kept run` erases it at its next pass)"
    return Check(True, "retention", detail)


def _per(value: int | None, unit: str) -> str:
    return f"{value:,} {unit}" if value is not None else "no limit"


def limits_in_force(config: KeptConfig) -> list[Check]:
    """The limits every message and model call is held to (core/limits/).
    Informational: a limit is the operator's choice, never a fault."""
    limits, llm = config.limits, config.llm
    user, chat = limits.per_user, limits.per_chat
    caps = llm.max_output_tokens
    return [
        Check(
            True,
            "rate limits",
            f"per user {_per(user.messages_per_minute, 'messages/min')}; per group "
            f"{_per(chat.messages_per_minute, 'messages/min')} (limits.*.messagesPerMinute)",
        ),
        Check(
            True,
            "token caps",
            f"per user {_per(user.tokens_per_day, 'tokens/day')}; per group "
            f"{_per(chat.tokens_per_day, 'tokens/day')}; whole bot "
            f"{_per(limits.tokens_per_day, 'tokens/day')} (UTC days; limits.*.tokensPerDay)",
        ),
        Check(
            True,
            "output caps",
            f"chat {caps.chat:,}, extraction {caps.extraction:,}, heartbeat "
            f"{caps.heartbeat:,} tokens a call (llm.maxOutputTokens)",
        ),
        Check(
            True,
            "reminder limits",
            f"{_per(user.active_reminders, 'active')} per user "
            "(limits.perUser.activeReminders); a repeating one at most every "
            f"{config.reminders.min_interval} (reminders.minInterval)",
        ),
    ]


async def _spend_today(budgets: BudgetStore, config: KeptConfig) -> Check:
    """The whole bot's tokens this UTC day, against limits.tokensPerDay."""
    day = budget_day(datetime.now(UTC))
    try:
        spent = (await budgets.spent([BOT], day)).get(BOT, 0)
    except Exception as exc:
        return Check(False, "spend today", f"{exc}; {storage_action(exc)}")
    cap = config.limits.tokens_per_day
    if cap is None:
        detail = f"{spent:,} tokens bot-wide on {day} (UTC); no cap (limits.tokensPerDay)"
        return Check(True, "spend today", detail)
    share = 100 * spent / cap
    detail = f"{spent:,} of {cap:,} tokens bot-wide on {day} (UTC, {share:.1f} %)"
    if spent >= cap:
        detail += ": spent, no model call until the next UTC midnight (`kept usage` shows who)"
    return Check(True, "spend today", detail)


def _age(seconds: float) -> str:
    if seconds >= 86_400:
        return f"{int(seconds // 86_400)} d"
    if seconds >= 3_600:
        return f"{int(seconds // 3_600)} h"
    return f"{max(0, int(seconds // 60))} min"


def sqlite_file(url: str) -> Path | None:
    """The SQLite file `storage.url` names (relative to the working
    directory), None for PostgreSQL or an in-memory database."""
    rest = url.removeprefix("sqlite:///")
    if rest == url or rest == ":memory:":
        return None
    return Path(rest).absolute()


def _check_disk(config: KeptConfig) -> Check:
    file = sqlite_file(config.storage.url)
    if file is None:
        return Check(True, "disk space", "not checked: the database is on its server")
    where = file.parent
    while not where.exists() and where != where.parent:
        where = where.parent  # a missing database is reported above; measure its disk
    free = shutil.disk_usage(where).free
    detail = f"{free / 2**30:.1f} GiB free at {where}"
    if free < MIN_FREE_BYTES:
        return Check(False, "disk space", f"{detail}; free some space (a full disk stops writes)")
    return Check(True, "disk space", detail)


def _discord_intents(config: KeptConfig) -> Check:
    """Which gateway intents the Discord client asks for (the developer
    portal must allow a privileged one)."""
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


def _posture(config: KeptConfig) -> list[Check]:
    """Who may talk to each enabled channel. Informational: it never fails.
    dmPolicy, groups and groupPolicy are read when the config has them (an
    older one has only allowFrom and Discord's allowGuilds)."""
    checks = []
    for name in ("telegram", "discord"):
        channel = getattr(config.channels, name)
        if channel.enabled:
            checks.append(Check(True, f"{name} access", f"{_dms(channel)}; {_groups(channel)}"))
    return checks


def _dms(channel: object) -> str:
    allowed = len(getattr(channel, "allow_from", []))
    policy = getattr(channel, "dm_policy", None)
    if policy is None:
        if allowed:
            return f"DMs from the {allowed} users in allowFrom"
        return "DMs from anyone: allowFrom is empty (anyone can use the model key)"
    if policy == "allowlist":
        return f"dmPolicy allowlist: DMs from the {allowed} users in allowFrom"
    if policy == "open":
        return "dmPolicy open: DMs from anyone (anyone can use the model key)"
    if policy == "pairing":
        return "dmPolicy pairing: an unknown user gets a code (`kept pairing approve CODE`)"
    return f"dmPolicy {policy}"


def _groups(channel: object) -> str:
    if getattr(channel, "group_policy", None) == "open":
        return "groups: any (groupPolicy open)"
    groups = getattr(channel, "groups", None)
    if groups is None:
        groups = getattr(channel, "allow_guilds", None) or []
    return f"groups: {len(groups)} listed" if groups else "groups: none listed"


async def _check_model(config: KeptConfig, env: Mapping[str, str], *, deep: bool) -> list[Check]:
    problem = endpoint_problem(config, env)
    if problem is not None:
        return [Check(False, "model", problem)]
    where = config.llm.base_url or env.get("OPENAI_BASE_URL") or "the OpenAI API"
    where = masked_url(where)
    wanted = sorted({config.llm.model_for(r) for r in ("chat", "extraction", "heartbeat")})
    client = LLMClient(config.llm, environ=env)
    try:
        checks = [await _model_list(client, where, wanted, deep=deep)]
        if deep and checks[0].ok:
            checks.append(await _completion(client, config.llm.models.chat))
        return checks
    finally:
        await client.aclose()


async def _model_list(client: LLMClient, where: str, wanted: list[str], *, deep: bool) -> Check:
    try:
        listed = await client.list_models()
    except LLMError as exc:
        if exc.kind not in NO_MODEL_LIST:
            return Check(False, "model", f"{where}: {exc.kind}: {exc}")
        # Several OpenAI-compatible servers have no /models; a completion decides.
        note = "" if deep else "; run `kept doctor --deep` to try one completion"
        return Check(True, "model", f"{where}: reachable, no model list ({exc.kind}){note}")
    except (AttributeError, TypeError):
        return Check(True, "model", f"{where}: reachable, the model list is malformed")
    missing = [m for m in wanted if m not in listed]
    if missing:
        some = ", ".join(sorted(listed)[:5]) or "none"
        return Check(
            False,
            "model",
            f"{where}: {', '.join(repr(m) for m in missing)} not among its {len(listed)} models "
            f"(e.g. {some}); set llm.models.chat (and .extraction, .heartbeat)",
        )
    return Check(True, "model", f"{where}: reachable, {', '.join(wanted)} listed")


async def _completion(client: LLMClient, model: str) -> Check:
    try:
        done = await client.complete("chat", [{"role": "user", "content": "Reply with OK."}])
    except LLMError as exc:
        return Check(False, "model answer", f"{model!r}: {exc.kind}: {exc}")
    return Check(True, "model answer", f"{done.model!r} answered a one-line request")


def _report(checks: list[Check], as_json: bool) -> int:
    # Every detail, whichever check wrote it, on its way out: a URL's
    # password, a secret query parameter or a token never reaches the terminal.
    checks = [Check(c.ok, c.name, mask_secrets(c.detail)) for c in checks]
    ok = all(c.ok for c in checks)
    if as_json:
        click.echo(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        for c in checks:
            click.echo(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<15} {c.detail}")
    return 0 if ok else 1
