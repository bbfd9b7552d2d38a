"""One-off Bot API calls for the CLI, outside a running adapter: `probe`
(getMe: is the token accepted, and by which bot) and `send_direct` (one
message into a user's private chat, e.g. "you're approved").

Each is one request through PTB's Bot, never repeated: a second "you're in"
is worse than none. The HTTP status of a refusal is kept for the operator's
line (PTB's errors carry only Telegram's description), and the token never
appears in what comes back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telegram import Bot
from telegram.error import InvalidToken, TelegramError
from telegram.request import HTTPXRequest

from channels.probe import (
    PROBE_TIMEOUT_SECONDS,
    BotAccount,
    DirectSendFailed,
    TokenRejected,
    UnexpectedAnswer,
    Unreachable,
)
from channels.telegram.connect import DEFAULT_ROOT
from channels.telegram.send import scrub
from core.config.model import TelegramConfig

T = TypeVar("T")


class _StatusKept(HTTPXRequest):
    """PTB's HTTP request that remembers the status of the last answer (None:
    no answer came)."""

    status: int | None = None

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        status, payload = await super().do_request(*args, **kwargs)
        self.status = status
        return status, payload


def api_root(settings: TelegramConfig) -> str:
    """The Bot API root the channel talks to."""
    return (settings.base_url or DEFAULT_ROOT).rstrip("/")


async def probe(settings: TelegramConfig, token: str) -> BotAccount:
    """The bot `token` belongs to (getMe); a ProbeFailed says why not."""
    root = api_root(settings)
    try:
        status, me = await _one_call(root, token, lambda bot: bot.get_me())
    except TelegramError as exc:
        raise Unreachable(root, _reason(exc, token)) from None
    if isinstance(me, InvalidToken) and status is not None:
        raise TokenRejected(root, status)
    if isinstance(me, TelegramError):
        raise UnexpectedAnswer(root, status or 0)
    return BotAccount(
        id=str(me.id),
        username=me.username or "",
        reads_all_group_messages=bool(me.can_read_all_group_messages),
    )


async def send_direct(settings: TelegramConfig, token: str, user_id: str, text: str) -> None:
    """`text` into the private chat of `user_id` with the bot (in Telegram it
    has the user's id); DirectSendFailed says why not."""
    root = api_root(settings)
    try:
        status, sent = await _one_call(
            root, token, lambda bot: bot.send_message(chat_id=int(user_id), text=text)
        )
    except TelegramError as exc:
        raise DirectSendFailed(
            f"the platform could not be reached ({_reason(exc, token)})"
        ) from None
    if isinstance(sent, TelegramError):
        raise DirectSendFailed(f"the platform refused (HTTP {status})")


async def _one_call(
    root: str, token: str, call: Callable[[Bot], Awaitable[T]]
) -> tuple[int | None, T | TelegramError]:
    """`call`'s result, or the error of an answer that refused it, with the
    answer's status; an error that came without an answer is raised."""
    timeout = PROBE_TIMEOUT_SECONDS
    request = _StatusKept(
        connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout, pool_timeout=timeout
    )
    # No bot.initialize(): it would ask getMe first, a second request.
    bot = Bot(token, base_url=f"{root}/bot", request=request, get_updates_request=request)
    try:
        await request.initialize()
        try:
            result: T | TelegramError = await call(bot)
        except TelegramError as exc:
            if request.status is None:
                raise
            result = exc
        return request.status, result
    finally:
        await request.shutdown()


def _reason(exc: TelegramError, token: str) -> str:
    # PTB wraps httpx's error; its own text is what the network said.
    cause = exc.__cause__ or exc
    return scrub(str(cause) or type(cause).__name__, token)
