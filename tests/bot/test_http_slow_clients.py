"""The HTTP listener survives slow clients: real sockets on 127.0.0.1 that
send half a request and stall, a connection cap, a header timeout, and an
accept that fails for want of descriptors (a fake accept, the real loop)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bot.http import HttpListener
from bot.metrics import PrometheusMetrics
from channels.listener import GuardedListener, connection_cap
from core.clock import TestClock

HALF_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"


async def ready() -> dict[str, str]:
    return {"store": "ok"}


async def nothing() -> None:
    return None


@pytest.fixture
async def listener() -> AsyncIterator[HttpListener]:
    http = HttpListener(
        "127.0.0.1",
        0,
        readiness=ready,
        metrics=PrometheusMetrics(),
        refresh=nothing,
        header_timeout=0.3,
        max_connections=4,
    )
    await http.start()
    try:
        yield http
    finally:
        await http.stop()


async def stall(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HALF_REQUEST)
    await writer.drain()
    return reader, writer


async def test_stalled_half_requests_beyond_the_cap_leave_healthz_answering(
    listener: HttpListener,
) -> None:
    stalled = [await stall(listener.port) for _ in range(12)]
    await asyncio.sleep(0.05)
    assert listener.connections == 4  # the rest wait in the backlog, holding no descriptor
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=3)
    url = f"http://127.0.0.1:{listener.port}/healthz"
    async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as response:
        assert response.status == 200
        assert await response.json() == {"status": "ok"}
    # The stalled ones were cut at the header timeout, a few at a time.
    assert time.monotonic() - started < 2.5
    assert listener.connections <= 4
    for _, writer in stalled:
        writer.close()
    for _, writer in stalled:
        await writer.wait_closed()


async def test_a_stalled_header_is_cut_at_the_timeout(listener: HttpListener) -> None:
    reader, writer = await stall(listener.port)
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 2) == b""  # closed, nothing answered
    assert 0.2 <= time.monotonic() - started < 1.5
    writer.close()
    await writer.wait_closed()
    # A whole request on a fresh connection is answered as usual.
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await asyncio.wait_for(reader.read(), 2)).startswith(b"HTTP/1.1 200")
    writer.close()
    await writer.wait_closed()


async def test_a_mounted_route_whose_body_stalls_gets_408(listener: HttpListener) -> None:
    async def hook(request: object) -> object:
        raise AssertionError("the handler must not run")

    listener.mount("/hook", hook)  # type: ignore[arg-type]
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    answer = await asyncio.wait_for(reader.readline(), 2)
    assert answer.startswith(b"HTTP/1.1 408")
    assert await asyncio.wait_for(reader.read(), 2)  # then closed (within a second)
    writer.close()
    await writer.wait_closed()


def test_the_cap_leaves_descriptors_to_everything_else() -> None:
    assert connection_cap(1024) == 768
    assert connection_cap(65536) == 4096
    assert connection_cap(300) == 44
    assert all(connection_cap(n) < n for n in (64, 300, 1024, 20000, 65536))


async def test_an_accept_out_of_descriptors_is_logged_once_a_minute_and_never_spins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = TestClock()
    tries = 0

    async def no_descriptors(sock: socket.socket) -> tuple[socket.socket, object]:
        nonlocal tries
        tries += 1
        raise OSError(errno.EMFILE, "Too many open files")

    loop_errors: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: loop_errors.append(context))
    guarded = GuardedListener(
        asyncio.Protocol, "127.0.0.1", 0, max_connections=4, clock=clock, accept=no_descriptors
    )
    try:
        with caplog.at_level(logging.WARNING, logger="kept.http"):
            await guarded.start()
            await asyncio.sleep(0.01)
            for _ in range(59):
                await clock.advance(1)
            assert tries == 60  # one try a second, not a busy loop
            failures = [r for r in caplog.records if "http_accept_failed" in r.getMessage()]
            assert len(failures) == 1
            message = failures[0].getMessage()
            assert "error=EMFILE" in message and "LimitNOFILE" in message
            for _ in range(2):
                await clock.advance(1)
            failures = [r for r in caplog.records if "http_accept_failed" in r.getMessage()]
            assert len(failures) == 2  # a minute later, once more
    finally:
        await guarded.close()
        loop.set_exception_handler(None)
    assert loop_errors == []  # asyncio's own "out of system resource" never fired
