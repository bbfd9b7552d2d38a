"""`kept doctor`'s platform checks: is the token accepted, and by which bot.
Each platform's probe makes the one read-only call; this words its answer
as a line. The token never appears in a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from channels.discord import probe as discord_probe
from channels.probe import NotABot, ProbeFailed, TokenRejected, UnexpectedAnswer, Unreachable
from channels.telegram import probe as telegram_probe
from core.config.file import secret_from_env
from core.config.model import DiscordConfig, TelegramConfig


@dataclass(frozen=True)
class Check:
    ok: bool
    name: str
    detail: str


async def check_telegram(settings: TelegramConfig, env: Mapping[str, str]) -> Check:
    """Telegram's getMe with the configured token."""
    name = "telegram"
    if not settings.enabled:
        return Check(True, name, "disabled (channels.telegram.enabled)")
    token = secret_from_env(settings.token_env, env)
    if token is None:
        return Check(False, name, _no_token("telegram", settings.token_env, "@BotFather"))
    try:
        me = await telegram_probe.probe(settings, token)
    except TokenRejected as exc:
        return Check(
            False,
            name,
            f"getMe: the token in ${settings.token_env} was rejected ({exc.status}); put the bot "
            "token from @BotFather there",
        )
    except ProbeFailed as exc:
        return Check(False, name, _failed("getMe", exc, "channels.telegram.baseUrl"))
    groups = (
        "reads every group message"
        if me.reads_all_group_messages
        else "privacy mode on: in groups it sees commands, mentions and replies to it"
    )
    return Check(True, name, f"getMe: @{me.username} (id {me.id}); {groups}")


async def check_discord(settings: DiscordConfig, env: Mapping[str, str]) -> Check:
    """Discord's /users/@me with the configured token."""
    name = "discord"
    if not settings.enabled:
        return Check(True, name, "disabled (channels.discord.enabled)")
    token = secret_from_env(settings.token_env, env)
    if token is None:
        return Check(
            False, name, _no_token("discord", settings.token_env, "the Discord developer portal")
        )
    try:
        me = await discord_probe.probe(settings, token)
    except TokenRejected as exc:
        return Check(
            False,
            name,
            f"/users/@me: the token in ${settings.token_env} was rejected ({exc.status}); put "
            "the bot token from the developer portal (Bot > Token) there",
        )
    except NotABot:
        return Check(False, name, f"${settings.token_env} is not a bot's token")
    except ProbeFailed as exc:
        return Check(False, name, _failed("/users/@me", exc, "channels.discord.apiBaseUrl"))
    return Check(True, name, f"/users/@me: {me.username} (id {me.id})")


def _no_token(platform: str, variable: str, where: str) -> str:
    return (
        f"enabled but ${variable} is empty: export the bot token from {where} there "
        f"(channels.{platform}.tokenEnv names the variable)"
    )


def _failed(call: str, exc: ProbeFailed, key: str) -> str:
    if isinstance(exc, Unreachable):
        return f"cannot reach {exc.root}: {exc.reason}; check the network (or {key})"
    status = exc.status if isinstance(exc, UnexpectedAnswer) else None
    return f"{call}: unexpected answer (HTTP {status}) from {exc.root}"
