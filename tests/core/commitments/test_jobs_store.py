"""The ExtractionJobStore contract, on every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.commitments.exchange import Exchange
from core.commitments.jobs import ExtractionJob, ExtractionJobStore, NewJob
from core.commitments.model import Scope
from core.store.backends import Backend, open_backend

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=15)
KEY = "agent:main:telegram:private:42"
SCOPE = Scope("main", KEY, "telegram", "42", None, "u42", chat_kind="private")
BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    opened = open_backend(url)
    async with opened:
        await opened.store.ensure_session(
            KEY,
            agent_id="main",
            platform="telegram",
            chat_id="42",
            chat_kind="private",
            thread_id=None,
            now=T0,
        )
        yield opened


def job(text: str) -> NewJob:
    return NewJob(SCOPE, Exchange(1, text, "ok"))


async def enqueue(
    jobs: ExtractionJobStore, text: str, worker: str = "w1", at: datetime = T0
) -> ExtractionJob:
    return await jobs.enqueue(job(text), worker=worker, now=at, lease_until=at + LEASE)


async def test_a_job_comes_back_whole(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    stored = await enqueue(jobs, "interview tomorrow")
    await jobs.release(worker="w1")
    [back] = await jobs.claim_orphans(worker="w2", now=T0, lease_until=T0 + LEASE, limit=10)
    assert back == stored
    assert back.scope == SCOPE and back.scope.chat_kind == "private"
    assert back.exchange == Exchange(1, "interview tomorrow", "ok")


async def test_only_jobs_nobody_vouches_for_are_claimed_oldest_first(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    live = await enqueue(jobs, "live", at=T0 + timedelta(minutes=5))
    dead = await enqueue(jobs, "dead", worker="gone")
    released = await enqueue(jobs, "released", worker="stopped")
    assert await jobs.release(worker="stopped") == 1
    assert await jobs.next_orphan_at(T0) == T0
    now = T0 + LEASE  # "dead"'s lease ends now; "live"'s in five minutes
    claimed = await jobs.claim_orphans(worker="w2", now=now, lease_until=now + LEASE, limit=10)
    assert [j.id for j in claimed] == [dead.id, released.id]
    assert await jobs.claim_orphans(worker="w3", now=now, lease_until=now + LEASE, limit=10) == []
    assert await jobs.next_orphan_at(now) == T0 + timedelta(minutes=5) + LEASE
    assert live.id not in {j.id for j in claimed}


async def test_the_limit_bounds_a_claim(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    for i in range(5):
        await enqueue(jobs, f"job {i}")
    await jobs.release(worker="w1")
    first = await jobs.claim_orphans(worker="w2", now=T0, lease_until=T0 + LEASE, limit=2)
    second = await jobs.claim_orphans(worker="w3", now=T0, lease_until=T0 + LEASE, limit=10)
    assert [j.exchange.user_text for j in first] == ["job 0", "job 1"]
    assert [j.exchange.user_text for j in second] == ["job 2", "job 3", "job 4"]


async def test_renewing_keeps_a_lease_alive_and_complete_removes(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    a = await enqueue(jobs, "a")
    b = await enqueue(jobs, "b")
    await jobs.renew([a.id], worker="w1", lease_until=T0 + 2 * LEASE)
    await jobs.renew([b.id], worker="not-the-owner", lease_until=T0 + 9 * LEASE)
    now = T0 + LEASE
    claimed = await jobs.claim_orphans(worker="w2", now=now, lease_until=now + LEASE, limit=10)
    assert [j.id for j in claimed] == [b.id]
    await jobs.complete([a.id, b.id], worker="w2")
    assert await jobs.next_orphan_at(now) is None
    assert await jobs.release(worker="w1") == 0


async def test_deleting_the_session_deletes_its_jobs(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    await enqueue(jobs, "private matter")
    assert await jobs.next_orphan_at(T0) is not None  # there, until the session goes
    await backend.store.delete_session(KEY)
    assert await jobs.next_orphan_at(T0) is None


async def test_existing_names_the_jobs_still_stored(backend: Backend) -> None:
    jobs = backend.extraction_jobs
    first, second = await enqueue(jobs, "one"), await enqueue(jobs, "two")
    assert await jobs.existing([first.id, second.id, 10**9]) == {first.id, second.id}
    await jobs.complete([first.id], worker="w1")
    assert await jobs.existing([first.id, second.id]) == {second.id}
    assert await jobs.existing([]) == set()
