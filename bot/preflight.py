"""What `kept run` and `kept chat` check before starting anything: a start
that would only fail later (at the first message, or at a platform's login)
is refused at once, with one line saying what to set."""

from __future__ import annotations

from collections.abc import Mapping

from core.config.file import secret_from_env
from core.config.model import KeptConfig


def endpoint_problem(config: KeptConfig, env: Mapping[str, str]) -> str | None:
    """No key and no endpoint of one's own: every model call would be refused.
    A local endpoint (llm.baseUrl or $OPENAI_BASE_URL) may need no key."""
    llm = config.llm
    if secret_from_env(llm.api_key_env, env) is not None:
        return None
    if llm.base_url or secret_from_env("OPENAI_BASE_URL", env):
        return None
    return (
        f"no model API key: export {llm.api_key_env}=<your key> (llm.apiKeyEnv names the "
        "variable), or point llm.baseUrl (or $OPENAI_BASE_URL) at an endpoint that needs none"
    )


def channel_token_problem(config: KeptConfig, env: Mapping[str, str]) -> str | None:
    """An enabled channel whose token variable is empty could never log in."""
    for name in ("telegram", "discord"):
        channel = getattr(config.channels, name)
        if channel.enabled and secret_from_env(channel.token_env, env) is None:
            where = "@BotFather" if name == "telegram" else "the Discord developer portal"
            return (
                f"channels.{name} is enabled but ${channel.token_env} is empty: export the bot "
                f"token from {where} there (channels.{name}.tokenEnv names the variable), "
                f"or set channels.{name}.enabled to false"
            )
    return None


def startup_problem(
    config: KeptConfig, env: Mapping[str, str], *, channels: bool, no_channel: str
) -> str | None:
    """The first reason not to start, or None. `channels`: the command starts
    the enabled channels (`kept run`; `no_channel` is what it says when none
    is); `kept chat` talks in the terminal only."""
    problem = endpoint_problem(config, env)
    if problem is None and channels:
        enabled = config.channels.telegram.enabled or config.channels.discord.enabled
        problem = channel_token_problem(config, env) if enabled else no_channel
    return problem
