"""One-off REST calls for the CLI, outside a running bot: `probe`
(/users/@me: is the token accepted, and by which bot) and `send_direct` (one
message into a user's DM with the bot, e.g. "you're approved").

Each request goes once, through aiohttp as the rest of the package: not
through discord.py's HTTPClient, which sends again after a 5xx and waits out
rate limits, where the operator wants one answer now (and a second
"you're in" is worse than none). The token never appears in what comes back."""

from __future__ import annotations

from typing import Any

import aiohttp

from channels.discord.http import DISCORD_ROOT
from channels.probe import (
    PROBE_TIMEOUT_SECONDS,
    BotAccount,
    DirectSendFailed,
    NotABot,
    TokenRejected,
    UnexpectedAnswer,
    Unreachable,
)
from core.config.model import DiscordConfig

API_PATH = "/api/v10"


def api_root(settings: DiscordConfig) -> str:
    """The REST root the CLI talks to (`channels.discord.apiBaseUrl` or Discord)."""
    return (settings.api_base_url or DISCORD_ROOT).rstrip("/")


async def probe(settings: DiscordConfig, token: str) -> BotAccount:
    """The bot `token` belongs to; a ProbeFailed says why not."""
    root = api_root(settings)
    try:
        status, body = await _request("GET", f"{root}{API_PATH}/users/@me", token)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Unreachable(root, _reason(exc, token)) from None
    if status == 401:
        raise TokenRejected(root, status)
    if status != 200 or not isinstance(body, dict) or "id" not in body:
        raise UnexpectedAnswer(root, status)
    if not body.get("bot", False):
        raise NotABot(root)
    return BotAccount(id=str(body["id"]), username=str(body.get("username")))


async def send_direct(settings: DiscordConfig, token: str, user_id: str, text: str) -> None:
    """`text` into the DM of `user_id` with the bot; DirectSendFailed says why not."""
    api = api_root(settings) + API_PATH
    dm = await _post(f"{api}/users/@me/channels", {"recipient_id": user_id}, token)
    channel = dm.get("id") if isinstance(dm, dict) else None
    if not isinstance(channel, str):
        raise DirectSendFailed("Discord did not open a DM with them")
    await _post(f"{api}/channels/{channel}/messages", {"content": text}, token)


async def _post(url: str, body: dict[str, Any], token: str) -> Any:
    try:
        status, answer = await _request("POST", url, token, body)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DirectSendFailed(
            f"the platform could not be reached ({_reason(exc, token)})"
        ) from None
    if status >= 300:
        raise DirectSendFailed(f"the platform refused (HTTP {status})")
    return answer


async def _request(
    method: str, url: str, token: str, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """One request; the status and the JSON body (None: not JSON)."""
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SECONDS)
    headers = {"Authorization": f"Bot {token}"}
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.request(method, url, json=body, headers=headers) as response,
    ):
        try:
            answer = await response.json(content_type=None)
        except ValueError:
            answer = None
        return response.status, answer


def _reason(exc: BaseException, token: str) -> str:
    return (str(exc) or type(exc).__name__).replace(token, "***")
