"""Connecting to the Bot API: the token, the bot kept sends through, and a
webhook's registration. Each failure a user can fix is one line saying what
to fix (a ChannelStartError), never the token. A network failure or a 5xx
is not one of those: TelegramUnreachable says to try again later (the
adapter does, with backoff)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from telegram import Bot
from telegram.error import InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from channels.base import ChannelStartError
from channels.context import WebRoutes
from channels.telegram.intake import ALLOWED_UPDATES, UpdateIntake
from channels.telegram.pace import Pace, PacedSends
from channels.telegram.send import retry_after_seconds, scrub
from core.config.file import secret_from_env
from core.config.model import TelegramConfig, TelegramWebhookConfig

DEFAULT_ROOT = "https://api.telegram.org"


class TelegramUnreachable(ChannelStartError):
    """The Bot API did not answer, or answered 5xx / 429: worth retrying
    (a network outage at boot must not leave the service failed)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


async def connect(
    tg: TelegramConfig,
    environ: Mapping[str, str],
    *,
    request: Callable[[], HTTPXRequest],
    pace: Pace,
) -> tuple[ExtBot[None], str]:
    """The bot, initialised (getMe answered), and its token."""
    token = secret_from_env(tg.token_env, environ)
    if token is None:
        raise ChannelStartError(
            f"channels.telegram is enabled but ${tg.token_env} is not set: put the bot "
            f"token from @BotFather there (channels.telegram.tokenEnv names the variable)"
        )
    root = (tg.base_url or DEFAULT_ROOT).rstrip("/")
    # ExtBot: only it takes a rate limiter. Every send of kept goes through
    # this bot (a CallbackQuery's own methods use the bot it was read with).
    bot: ExtBot[None] = ExtBot(
        token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        request=request(),
        get_updates_request=request(),
        rate_limiter=PacedSends(pace),
    )
    try:
        await bot.initialize()  # calls getMe
    except InvalidToken:
        await bot.shutdown()
        # `from None`: PTB's message quotes the token.
        raise ChannelStartError(
            f"Telegram rejected the token in ${tg.token_env} (401 Unauthorized): "
            f"copy it again from @BotFather"
        ) from None
    except (NetworkError, RetryAfter) as exc:  # NetworkError: also timeouts and 5xx
        await bot.shutdown()
        raise TelegramUnreachable(
            f"cannot reach the Telegram Bot API at {root} (channels.telegram.baseUrl): "
            f"{scrub(str(exc), token)}",
            retry_after=retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None,
        ) from None
    except TelegramError as exc:
        await bot.shutdown()
        raise ChannelStartError(
            f"the Telegram Bot API at {root} (channels.telegram.baseUrl) refused getMe: "
            f"{scrub(str(exc), token)}"
        ) from None
    return bot, token


async def start_webhook(
    bot: Bot,
    intake: UpdateIntake,
    hook: TelegramWebhookConfig,
    environ: Mapping[str, str],
    *,
    token: str,
    shared: WebRoutes | None = None,
) -> None:
    """Serve the webhook (on the `shared` listener when it has the
    webhook's address), then tell Telegram where it is."""
    secret = secret_from_env(hook.secret_token_env, environ)
    if secret is None:
        raise ChannelStartError(
            f"channels.telegram.webhook is set but ${hook.secret_token_env} is not: put a "
            f"random secret (letters, digits, _ and -) there"
        )
    path = urlsplit(hook.url).path or "/"
    try:
        await intake.start_webhook(
            bot,
            host=hook.listen_host,
            port=hook.port,
            path=path,
            secret_token=secret,
            shared=shared,
        )
    except OSError as exc:  # the port is taken, or the host is not this machine's
        raise ChannelStartError(
            f"channels.telegram.webhook: cannot listen on {hook.listen_host}:{hook.port} "
            f"({exc.strerror or exc}); free the port or change webhook.listenHost / webhook.port"
        ) from None
    try:
        await bot.set_webhook(hook.url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
    except TelegramError as exc:
        raise ChannelStartError(
            f"Telegram refused the webhook {hook.url} (channels.telegram.webhook.url): "
            f"{scrub(str(exc), token)}"
        ) from None
