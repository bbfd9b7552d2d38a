"""discord.py's HTTP client, sending a message at most once and aimed at another
REST root (`channels.discord.apiBaseUrl`) when one is set.

discord.py builds every URL from the class-wide `Route.BASE` and connects to
the fixed `wss://gateway.discord.gg` (a non-sharded client never asks
`/gateway/bot`). Changing those globals would point every client in the
process at the new root, so this client rewrites URLs per instance instead:

- REST calls and interaction callbacks (discord.py's webhook adapter sends
  those through this client's aiohttp session) go to the same path under
  the configured root: `https://discord.com/api/v10/users/@me` becomes
  `<apiBaseUrl>/api/v10/users/@me`;
- the gateway URL comes from the root's `GET /gateway/bot` answer, as a
  REST proxy (nirn-proxy) or a fake server gives it.

Every client, rerouted or not, also keeps a message at most once: discord.py
sends a request again after a 504 or 524 (a gateway-edge timeout), but a
message POST that timed out at the edge may have been posted, and sending
it again would post it twice. Such an answer ends the send at once, as a
DiscordServerError whose outcome errors.py calls unknown.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import json_or_text
from discord.utils import MISSING

from channels.discord.errors import UNKNOWN_5XX

DISCORD_ROOT = "https://discord.com"


# A message being created: what must never be sent twice.
_MESSAGE_POST = re.compile(r"/channels/\d+/messages$")


class _AtMostOnce:
    """One request's context: a message POST answered with a gateway-edge
    timeout raises instead of returning, so discord.py cannot send it again."""

    def __init__(self, request: Any, guarded: bool) -> None:
        self._request = request
        self._guarded = guarded

    async def __aenter__(self) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await self._request.__aenter__()
        if self._guarded and response.status in UNKNOWN_5XX:
            data = await json_or_text(response)
            await self._request.__aexit__(None, None, None)
            raise discord.DiscordServerError(response, data)
        return response

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._request.__aexit__(*exc)


class _Session:
    """discord.py's aiohttp session, requests to Discord's root rerouted to
    `root` (None: not rerouted) and message POSTs sent at most once."""

    def __init__(self, session: aiohttp.ClientSession, root: str | None) -> None:
        self._session = session
        self._root = root

    def request(self, method: str, url: Any, **kwargs: Any) -> Any:
        text = str(url)
        if self._root is not None and text.startswith(DISCORD_ROOT + "/"):
            text = self._root + text[len(DISCORD_ROOT) :]
        guarded = method == "POST" and _MESSAGE_POST.search(yarl.URL(text).path) is not None
        return _AtMostOnce(self._session.request(method, text, **kwargs), guarded)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class KeptHTTPClient(discord.http.HTTPClient):
    """An HTTPClient that sends a message at most once, and whose REST root
    and gateway come from `root` when one is given."""

    def __init__(self, root: str | None, template: discord.http.HTTPClient) -> None:
        # "http://proxy:8080", "http://proxy:8080/api" and ".../api/v10" all
        # name the same root: the path discord.py adds is kept as it is.
        self._root = None if root is None else re.sub(r"(/api(/v\d+)?)?/*$", "", root)
        self._wrapped: Any = MISSING
        super().__init__(
            template.loop,
            template.connector if template.connector is not MISSING else None,
            proxy=template.proxy,
            proxy_auth=template.proxy_auth,
            unsync_clock=not template.use_clock,
            http_trace=template.http_trace,
            max_ratelimit_timeout=template.max_ratelimit_timeout,
        )

    # HTTPClient keeps its session in the name-mangled `__session`; every
    # assignment (at login, and MISSING after close) passes through here, so
    # whatever discord.py sends through it is rerouted.
    @property
    def root(self) -> str | None:
        """Where requests go instead of Discord; None: Discord itself."""
        return self._root

    @property
    def _HTTPClient__session(self) -> Any:
        return self._wrapped

    @_HTTPClient__session.setter
    def _HTTPClient__session(self, session: Any) -> None:
        self._wrapped = session if session is MISSING else _Session(session, self._root)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        wanted = yarl.URL(url)
        if self._root is not None and wanted.host == DiscordWebSocket.DEFAULT_GATEWAY.host:
            # A fresh connection (not a resume, whose URL READY named).
            _, gateway, _ = await self.get_bot_gateway()
            url = str(yarl.URL(gateway).with_query(wanted.query))
        return await super().ws_connect(url, compress=compress)


def install_http(client: discord.Client, root: str | None) -> None:
    """Give a client that has not logged in yet kept's HTTP client, pointed
    at `root` (None: Discord)."""
    http = KeptHTTPClient(root, client.http)
    # Everything that keeps a reference to the client's HTTPClient: the
    # connection state (models send through it) and the command tree.
    client.http = http
    client._connection.http = http
    tree = getattr(client, "tree", None)
    if tree is not None:
        tree._http = http
