"""The optional HTTP listener (`http.listen`): health, readiness, metrics.

- `/healthz`: 200 while the process runs (a liveness probe: restart me if not);
- `/readyz`: 200 when the store answers, every enabled channel is connected
  and the scheduler runs; else 503 with a JSON body naming what is
  not ready (a readiness probe: send me no work yet);
- `/metrics`: Prometheus text format (bot/metrics.py).

It is an aiohttp application, the same server library as Telegram's
webhook intake, so a webhook can be served on this port too (`app` takes
more routes before `start`).

Slow clients cannot take it down: a request's headers must arrive within
`header_timeout` (10 s; aiohttp's keep-alive timer, which also runs from the
moment a connection opens), a mounted route's body within the same time, and
connections are capped below the descriptor limit by channels/listener.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.metrics import CONTENT_TYPE, PrometheusMetrics
from channels.listener import HEADER_TIMEOUT, ServedApp, serve_app
from core.clock import Clock, SystemClock
from core.logs import event

log = logging.getLogger("kept.http")

# What is not ready -> why, or "ok"; the listener asks at every /readyz.
Readiness = Callable[[], Awaitable[dict[str, str]]]
# Reads the scrape-time gauges before /metrics answers.
Refresh = Callable[[], Awaitable[None]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpListener:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        readiness: Readiness,
        metrics: PrometheusMetrics,
        refresh: Refresh,
        clock: Clock | None = None,
        header_timeout: float = HEADER_TIMEOUT,
        max_connections: int | None = None,
    ) -> None:
        self.host = host
        self._clock = clock or SystemClock()
        self.header_timeout = header_timeout
        self._max_connections = max_connections
        self.port = port
        self._readiness = readiness
        self._metrics = metrics
        self._refresh = refresh
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics_page)
        # aiohttp freezes its routes once serving; a channel that starts
        # later (Telegram's webhook) mounts its POST path here instead.
        self.app.router.add_post("/{path:.*}", self._mounted_route)
        self._mounted: dict[str, Handler] = {}
        self._served: ServedApp | None = None

    async def start(self) -> None:
        """Bind and serve; OSError when the address cannot be bound (the
        runtime turns it into a start-up error naming http.listen)."""
        served = await serve_app(
            self.app,
            self.host,
            self.port,
            clock=self._clock,
            header_timeout=self.header_timeout,
            max_connections=self._max_connections,
        )
        self._served = served
        self.port = served.port
        event(
            log,
            logging.INFO,
            "http_listening",
            host=self.host,
            port=self.port,
            max_connections=served.max_connections,
            descriptor_limit=served.descriptor_limit,
        )

    @property
    def connections(self) -> int:
        """Connections open now."""
        return 0 if self._served is None else self._served.connections

    def serves(self, host: str, port: int) -> bool:
        """Whether this listener is the one at host:port."""
        return (host, port) == (self.host, self.port)

    def mount(self, path: str, handler: Handler) -> None:
        """Answer POSTs to `path` with `handler` (Telegram's webhook)."""
        self._mounted[path] = handler

    def unmount(self, path: str) -> None:
        self._mounted.pop(path, None)

    async def _mounted_route(self, request: web.Request) -> web.StreamResponse:
        handler = self._mounted.get(request.path)
        if handler is None:
            raise web.HTTPNotFound()
        try:
            # Read here, under the timeout; the handler's request.json() reuses it.
            async with asyncio.timeout(self.header_timeout):
                await request.read()
        except TimeoutError:
            raise web.HTTPRequestTimeout() from None
        return await handler(request)

    async def stop(self) -> None:
        if self._served is not None:
            await self._served.stop()
            self._served = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        checks = await self._readiness()
        ready = all(state == "ok" for state in checks.values())
        return web.json_response({"ready": ready, "checks": checks}, status=200 if ready else 503)

    async def _metrics_page(self, request: web.Request) -> web.Response:
        await self._refresh()
        body = self._metrics.exposition()
        response = web.Response(body=body)
        # aiohttp's content_type setter refuses parameters; Prometheus wants
        # its version= parameter.
        response.headers["Content-Type"] = CONTENT_TYPE
        return response
