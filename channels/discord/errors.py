"""What a failed Discord send means for a retry (see core.messages.SendResult).

discord.py has already waited out rate limits and retried 500/502 answers
by the time it raises (never a message POST answered 504/524: see
http.py); this decides what core may do next:

- retryable: Discord certainly did not take the message (the connection
  was never made, a 503, a 429 it gave up on);
- unknown: it may have been posted (a timeout after the request went out, a
  gateway-edge timeout, a connection lost mid-request): never resent;
- otherwise a plain failure (Forbidden: DMs closed or a missing permission;
  NotFound: the channel is gone), which the heartbeat records as failed.
"""

from __future__ import annotations

import aiohttp
import discord

from core.messages import SendResult
from core.metrics import recorder

# Gateway-edge timeouts: the request reached Discord, which may have posted it.
UNKNOWN_5XX = frozenset({504, 524})


def send_failure(exc: BaseException) -> SendResult:
    """The SendResult for an exception raised by a send."""
    if isinstance(exc, discord.Forbidden):
        # 50007: the user's DMs are closed to the bot; else a missing permission.
        return SendResult(error=f"forbidden: {describe(exc)}")
    if isinstance(exc, discord.NotFound):
        return SendResult(error=f"channel not found: {describe(exc)}")
    if isinstance(exc, discord.RateLimited):
        recorder().rate_limited("discord")
        return SendResult(error="rate limited", retryable=True, retry_after=exc.retry_after)
    if isinstance(exc, discord.DiscordServerError):
        if exc.status in UNKNOWN_5XX:
            return SendResult(error=f"discord timed out: {describe(exc)}", unknown=True)
        return SendResult(error=f"discord server error: {describe(exc)}", retryable=True)
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            recorder().rate_limited("discord")
            return SendResult(error=f"rate limited: {describe(exc)}", retryable=True)
        return SendResult(error=f"rejected: {describe(exc)}")
    if isinstance(exc, aiohttp.ClientConnectorError | _connect_timeout()):
        # The connection was never made: nothing reached Discord.
        return SendResult(error=f"cannot connect: {describe(exc)}", retryable=True)
    if isinstance(exc, TimeoutError):
        # The request may have been posted: a retry could post it twice.
        return SendResult(error="timed out after sending", unknown=True)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return SendResult(error=f"connection lost: {describe(exc)}", unknown=True)
    if isinstance(exc, discord.ClientException):
        return SendResult(error=f"cannot send: {describe(exc)}")
    return SendResult(error=f"unexpected: {exc!r}", unknown=True)


def _connect_timeout() -> type[BaseException]:
    # aiohttp >= 3.10 tells a connect timeout (nothing sent) from a read timeout.
    return getattr(aiohttp, "ConnectionTimeoutError", aiohttp.ClientConnectorError)


def describe(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        code = f" code={exc.code}" if exc.code else ""
        return f"HTTP {exc.status}{code} {exc.text}".strip()
    return f"{type(exc).__name__}: {exc}"
