"""A TCP listener slow clients cannot exhaust: kept's own accept loop under
an HTTP server's protocol factory (aiohttp's).

asyncio's own server accepts whatever arrives until the process runs out of
descriptors, and then logs `socket.accept() out of system resource` for every
try. Here, instead:
- at most `max_connections` are open at once (below RLIMIT_NOFILE, leaving
  room for the database, the platform clients and the log files); beyond it
  nothing is accepted, so new connections wait in the kernel's backlog (and
  are refused by it when that is full) and no descriptor is spent;
- an accept that fails for want of resources (EMFILE, ENFILE, ...) waits a
  second before the next try, and is logged at most once a minute, with the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime

from aiohttp import web

from core.clock import Clock
from core.logs import event

log = logging.getLogger("kept.http")

# The most connections a listener holds, whatever the descriptor limit.
MAX_CONNECTIONS = 4096
# Descriptors left to everything else: a quarter of the limit, at least this.
MIN_HEADROOM = 256
# A kernel backlog this long (capped by net.core.somaxconn) holds a burst of
# connections while every slot is taken, without a descriptor each.
BACKLOG = 1024
# After a failed accept, the next try waits this long (no busy loop).
ACCEPT_RETRY = 1.0
# A failed accept or a full listener is logged at most this often.
REPORT_EVERY = 60.0
# The most the soft descriptor limit is raised to, towards the hard one.
NOFILE_TARGET = 65536

_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_CLIENT_GONE = {errno.ECONNABORTED, errno.EPROTO, errno.EINTR, errno.EAGAIN}

Accept = Callable[[socket.socket], Awaitable[tuple[socket.socket, object]]]


def descriptor_limit() -> int:
    """The soft RLIMIT_NOFILE, raised first towards the hard limit (up to
    NOFILE_TARGET): kept waits with epoll, never select(), so the old 1024
    default only makes it run out sooner."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = NOFILE_TARGET if hard == resource.RLIM_INFINITY else min(hard, NOFILE_TARGET)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
    return NOFILE_TARGET if soft == resource.RLIM_INFINITY else soft


def connection_cap(limit: int) -> int:
    """Connections one listener may hold under a descriptor limit of `limit`."""
    headroom = max(MIN_HEADROOM, limit // 4)
    return max(1, min(MAX_CONNECTIONS, limit - headroom))


class _Counted(asyncio.Protocol):
    """The server's protocol, with a callback when its connection ends."""

    def __init__(self, inner: asyncio.Protocol, done: Callable[[], None]) -> None:
        self._inner = inner
        self._done: Callable[[], None] | None = done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._inner.connection_lost(exc)
        finally:
            self.finish()

    def finish(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done()

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class GuardedListener:
    """Serves `factory`'s protocol on host:port, at most `max_connections`
    at once (see the module's docstring)."""

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        *,
        max_connections: int,
        clock: Clock,
        accept: Accept | None = None,
        backlog: int = BACKLOG,
    ) -> None:
        self._factory = factory
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self._clock = clock
        self._accept = accept
        self._backlog = backlog
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._open = 0
        self._room = asyncio.Event()
        self._room.set()
        self._reported: dict[str, datetime] = {}

    @property
    def connections(self) -> int:
        return self._open

    @property
    def sockets(self) -> list[socket.socket]:
        return list(self._sockets)

    async def start(self) -> None:
        """Bind every address host:port resolves to; OSError when one cannot be."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(self._backlog)
                sock.setblocking(False)
        except BaseException:
            self._close_sockets()
            raise
        if self.port == 0:
            self.port = self._sockets[0].getsockname()[1]
        for sock in self._sockets:
            self._tasks.append(asyncio.create_task(self._serve(sock), name="http-accept"))

    async def close(self) -> None:
        """Stop accepting; open connections are the server's to close."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self._close_sockets()

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        accept = self._accept or loop.sock_accept
        while True:
            if not self._room.is_set():
                self._report(
                    "full",
                    "http_connections_full",
                    max_connections=self.max_connections,
                    note="new connections wait in the backlog until one closes",
                    action="look for clients that hold connections open; a request's "
                    "headers must arrive within the header timeout",
                )
                await self._room.wait()
            try:
                conn, _ = await accept(sock)
            except OSError as exc:
                if exc.errno in _CLIENT_GONE:
                    continue
                self._accept_failed(exc)
                await self._clock.sleep(ACCEPT_RETRY)
                continue
            await self._start_connection(loop, conn)

    async def _start_connection(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        self._open += 1
        if self._open >= self.max_connections:
            self._room.clear()
        counted = _Counted(self._factory(), self._closed)
        try:
            conn.setblocking(False)
            await loop.connect_accepted_socket(lambda: counted, conn)
        except (OSError, RuntimeError):
            conn.close()
            counted.finish()

    def _closed(self) -> None:
        self._open -= 1
        if self._open < self.max_connections:
            self._room.set()

    def _accept_failed(self, exc: OSError) -> None:
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        if exc.errno in _OUT_OF_RESOURCES:
            action = (
                "the process is out of file descriptors: raise LimitNOFILE in the systemd "
                "unit (deploy/kept.service sets 65536) or `ulimit -n`; kept retries each second"
            )
        else:
            action = "kept retries each second; report this if it goes on"
        self._report(
            f"accept:{name}",
            "http_accept_failed",
            error=name,
            detail=exc.strerror or str(exc),
            open_connections=self._open,
            action=action,
        )

    def _report(self, key: str, name: str, **fields: object) -> None:
        now = self._clock.now()
        last = self._reported.get(key)
        if last is not None and (now - last).total_seconds() < REPORT_EVERY:
            return
        self._reported[key] = now
        event(log, logging.WARNING, name, host=self.host, port=self.port, **fields)


# Seconds a client has to send a request's headers (aiohttp's keep-alive
# timer, which also runs from the moment a connection opens).
HEADER_TIMEOUT = 10.0


class ServedApp:
    """An aiohttp application on a GuardedListener: what `serve_app` returns."""

    def __init__(self, runner: web.AppRunner, listener: GuardedListener, limit: int) -> None:
        self._runner = runner
        self._listener = listener
        self.descriptor_limit = limit

    @property
    def port(self) -> int:
        return self._listener.port

    @property
    def max_connections(self) -> int:
        return self._listener.max_connections

    @property
    def connections(self) -> int:
        return self._listener.connections

    async def stop(self) -> None:
        """Stop accepting, then let aiohttp close the open connections."""
        await self._listener.close()
        await self._runner.cleanup()


async def serve_app(
    app: web.Application,
    host: str,
    port: int,
    *,
    clock: Clock,
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int | None = None,
) -> ServedApp:
    """Serve `app` on host:port with a header timeout and a connection cap
    (from the descriptor limit unless given); OSError when it cannot bind."""
    # The rest of a body left unread (a stalled one) is drained for at most
    # a second, not aiohttp's ten, before the connection closes.
    runner = web.AppRunner(
        app,
        access_log=None,
        keepalive_timeout=header_timeout,
        lingering_time=min(1.0, header_timeout),
    )
    await runner.setup()
    assert runner.server is not None
    limit = descriptor_limit()
    cap = max_connections or connection_cap(limit)
    listener = GuardedListener(runner.server, host, port, max_connections=cap, clock=clock)
    try:
        await listener.start()
    except BaseException:
        await runner.cleanup()
        raise
    return ServedApp(runner, listener, limit)
