"""Extraction pauses live in the database: on every backend, two workers
(two stores on one database) agree on one pause, logged once, and on one
resume, logged once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from core.clock import TestClock
from core.commitments.pause import PAUSE_LOOK, Pauses
from core.store.backends import Backend, open_backend

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PAUSE = timedelta(minutes=10)
KEY = "agent:main:telegram:private:42"
LOG = "kept.commitments"


@pytest.fixture
async def two_workers(storage_url: str) -> AsyncIterator[tuple[Backend, Backend]]:
    first, second = open_backend(storage_url), open_backend(storage_url)
    async with first, second:
        yield first, second


async def test_a_pause_begins_once_and_a_live_one_stands(
    two_workers: tuple[Backend, Backend],
) -> None:
    store = two_workers[0].extraction_pauses
    assert await store.paused_until("main") is None
    began = await store.pause("main", until=T0 + PAUSE, kind="auth", error="401", now=T0)
    assert began.began and began.until == T0 + PAUSE
    later = T0 + timedelta(minutes=1)
    stands = await store.pause("main", until=later + PAUSE, kind="auth", error="401", now=later)
    assert not stands.began and stands.until == T0 + PAUSE
    assert await store.paused_until("main") == T0 + PAUSE
    assert await store.paused_until("other") is None
    ended = T0 + PAUSE
    again = await store.pause("main", until=ended + PAUSE, kind="auth", error="401", now=ended)
    assert again.began and again.until == ended + PAUSE
    assert await store.resume("main")
    assert not await store.resume("main")
    assert await store.paused_until("main") is None


async def test_one_workers_pause_stops_every_worker_and_is_logged_once(
    two_workers: tuple[Backend, Backend], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    clock = TestClock(T0)
    a = Pauses(two_workers[0].extraction_pauses, clock, PAUSE)
    b = Pauses(two_workers[1].extraction_pauses, clock, PAUSE)
    assert not await b.paused("main")  # b looked before the pause

    await a.failed("main", KEY, "auth", "Error code: 401")
    assert await a.paused("main")
    # b trusts its last look for PAUSE_LOOK at most, then reads the pause.
    await clock.advance(PAUSE_LOOK.total_seconds())
    assert await b.paused("main")
    await b.failed("main", KEY, "auth", "Error code: 401")  # a call already under way
    assert caplog.text.count("extraction_paused") == 1

    await clock.advance(PAUSE.total_seconds())
    assert not await a.paused("main") and not await b.paused("main")
    await b.succeeded("main")
    await a.succeeded("main")
    assert caplog.text.count("extraction_resumed") == 1
    assert await two_workers[0].extraction_pauses.paused_until("main") is None


async def test_a_worker_started_during_a_pause_keeps_it(
    two_workers: tuple[Backend, Backend],
) -> None:
    clock = TestClock(T0)
    await Pauses(two_workers[0].extraction_pauses, clock, PAUSE).failed("main", KEY, "auth", "401")
    await clock.advance(60)
    fresh = Pauses(two_workers[1].extraction_pauses, clock, PAUSE)
    assert await fresh.paused("main")
    assert not await fresh.paused("other-agent")


async def test_other_errors_never_pause(two_workers: tuple[Backend, Backend]) -> None:
    clock = TestClock(T0)
    pauses = Pauses(two_workers[0].extraction_pauses, clock, PAUSE)
    await pauses.failed("main", KEY, "timeout", "no answer within 65s")
    await pauses.failed("main", KEY, "server", "Error code: 500")
    assert not await pauses.paused("main")
    assert await two_workers[0].extraction_pauses.paused_until("main") is None
    # What does pause, on the same pauses: a refused key.
    await pauses.failed("main", KEY, "auth", "Error code: 401")
    assert await pauses.paused("main")
    assert await two_workers[0].extraction_pauses.paused_until("main") == T0 + PAUSE
