"""discord.py's HTTP client aimed at another REST root (`channels.discord.apiBaseUrl`).

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
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.utils import MISSING

DISCORD_ROOT = "https://discord.com"


class _ReroutedSession:
    """An aiohttp session whose requests to Discord's root go to `root`."""

    def __init__(self, session: aiohttp.ClientSession, root: str) -> None:
        self._session = session
        self._root = root

    def request(self, method: str, url: Any, **kwargs: Any) -> Any:
        text = str(url)
        if text.startswith(DISCORD_ROOT + "/"):
            text = self._root + text[len(DISCORD_ROOT) :]
        return self._session.request(method, text, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class RootedHTTPClient(discord.http.HTTPClient):
    """An HTTPClient whose REST root and gateway come from `root`."""

    def __init__(self, root: str, template: discord.http.HTTPClient) -> None:
        # "http://proxy:8080", "http://proxy:8080/api" and ".../api/v10" all
        # name the same root: the path discord.py adds is kept as it is.
        self._root = re.sub(r"(/api(/v\d+)?)?/*$", "", root)
        self._rerouted: Any = MISSING
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
    def _HTTPClient__session(self) -> Any:
        return self._rerouted

    @_HTTPClient__session.setter
    def _HTTPClient__session(self, session: Any) -> None:
        self._rerouted = session if session is MISSING else _ReroutedSession(session, self._root)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        wanted = yarl.URL(url)
        if wanted.host == DiscordWebSocket.DEFAULT_GATEWAY.host:
            # A fresh connection (not a resume, whose URL READY named).
            _, gateway, _ = await self.get_bot_gateway()
            url = str(yarl.URL(gateway).with_query(wanted.query))
        return await super().ws_connect(url, compress=compress)


def use_api_root(client: discord.Client, root: str | None) -> None:
    """Point a client that has not logged in yet at `root` (None: Discord)."""
    if root is None:
        return
    http = RootedHTTPClient(root, client.http)
    # Everything that keeps a reference to the client's HTTPClient: the
    # connection state (models send through it) and the command tree.
    client.http = http
    client._connection.http = http
    tree = getattr(client, "tree", None)
    if tree is not None:
        tree._http = http
