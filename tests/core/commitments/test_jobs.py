"""The extraction queue survives stops and crashes: exchanges waiting for
the extraction pass are job rows, released at stop and adopted by the next
worker (at start, or once a dead worker's lease runs out)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from core.commitments.extraction import JOB_LEASE, ExtractionWorker
from core.llm import LLMClient
from core.store.sql.commitments import SqlCommitmentStore
from core.store.sql.extraction_jobs import SqlExtractionJobStore, SqlPauseStore
from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from tests.core.commitments.test_extraction import (
    LOG,
    SCOPE_42,
    Harness,
    answer,
    interview,
    make_harness,
)
from tests.fakes.openai_server import hang
from tests.support.store_helpers import commitment_store_for

__all__ = ["make_harness"]  # the fixture, shared with the other module


async def job_rows(store: SqliteStore) -> list[tuple[str | None, str]]:
    rows = await store.connection.fetchall(
        "SELECT claimed_by, user_text FROM extraction_jobs ORDER BY id"
    )
    return [(r[0], r[1]) for r in rows]


def second_worker(
    h: Harness, store: SqliteStore, worker: str
) -> tuple[ExtractionWorker, LLMClient]:
    """Another process's worker, with its own model client (close it: its
    pooled connection to the fake would leak into later tests)."""
    llm = LLMClient(h.config[0].llm, environ={"OPENAI_API_KEY": "sk-test"}, clock=h.clock)
    return ExtractionWorker(
        store=commitment_store_for(store),
        jobs=SqlExtractionJobStore(store.connection),
        pauses=SqlPauseStore(store.connection),
        llm=llm,
        config=lambda: h.config[0],
        clock=h.clock,
        worker=worker,
        batch_seconds=0,
    ), llm


async def test_an_exchange_is_a_job_row_until_it_is_extracted(make_harness) -> None:
    h: Harness = await make_harness(batch_seconds=60.0)
    await h.say("I have an interview tomorrow", settle=False)
    await h.manager.drain()
    assert await job_rows(h.store) == [("w1", "I have an interview tomorrow")]
    h.extraction.append(answer(interview()))
    await h.clock.advance(60)
    await h.settle()
    assert await job_rows(h.store) == []
    assert [c.reason for c in await h.stored()] == ["user has a job interview tomorrow"]


async def test_a_stop_leaves_the_queue_to_the_next_start(
    make_harness, tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    h: Harness = await make_harness(batch_seconds=60.0)
    h.extraction.append(hang())  # the batch is mid-call when the stop comes
    await h.say("I have an interview tomorrow", settle=False)
    await h.say("and my sister visits on friday", settle=False)
    await h.manager.drain()
    await h.worker.stop(drain_seconds=0.05)
    assert "extraction_queued_at_stop count=2" in caplog.text
    assert [who for who, _ in await job_rows(h.store)] == [None, None]
    # A restart: a new process (a new worker id) on the reopened database.
    await h.store.close()
    store = SqliteStore(tmp_path / "kept.sqlite")
    await store.open()
    restarted, llm = second_worker(h, store, "w2")
    try:
        h.extraction.append(answer(interview()))
        restarted.start()
        await asyncio.wait_for(restarted.wait_idle(), 5)
        _, request = h.extraction_requests()
        assert "interview tomorrow" in (request.last_user_text or "")
        assert "sister visits" in (request.last_user_text or "")
        assert await job_rows(store) == []
        await restarted.stop(drain_seconds=0.1)
    finally:
        await llm.aclose()
        await store.close()
        await h.store.open()  # the harness closes it


async def test_a_dead_workers_jobs_are_adopted_when_its_lease_runs_out(make_harness) -> None:
    h: Harness = await make_harness()
    h.extraction.append(hang())  # the first worker is stuck in its model call
    await h.say("I have an interview tomorrow", settle=False)
    await h.manager.drain()
    await h.fake.wait_for_completions(2)
    # It "dies": nothing of it runs any more, and it releases nothing.
    h.worker._running = False
    tasks = [queue.task for queue in h.worker._queues.values()] + [h.worker._adopter]
    for task in tasks:
        assert task is not None
        task.cancel()
    assert await job_rows(h.store) == [("w1", "I have an interview tomorrow")]
    other, llm = second_worker(h, h.store, "w2")
    try:
        await h.clock.advance(JOB_LEASE.total_seconds() - 1)
        assert await other.adopt() == 0  # a live lease is never taken over
        assert await job_rows(h.store) == [("w1", "I have an interview tomorrow")]
        h.extraction.append(answer(interview()))
        await h.clock.advance(1)
        assert await other.adopt() == 1
        await asyncio.wait_for(other.wait_idle(), 5)
        assert await job_rows(h.store) == []
        assert [c.reason for c in await h.stored()] == ["user has a job interview tomorrow"]
        assert len(h.extraction_requests()) == 2
    finally:
        await other.stop(drain_seconds=0.1)
        await llm.aclose()


async def test_a_batch_whose_follow_ups_could_not_be_stored_stays_queued(
    make_harness, monkeypatch
) -> None:
    h: Harness = await make_harness()
    real = SqlCommitmentStore.apply_extractions
    refusals: list[int] = []

    async def refuse_once(self: SqlCommitmentStore, *args: Any, **kwargs: Any) -> Any:
        if not refusals:
            refusals.append(1)
            raise sqlite3.OperationalError("database or disk is full")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SqlCommitmentStore, "apply_extractions", refuse_once)
    h.extraction.append(answer(interview()))
    await h.say("I have an interview tomorrow")
    assert refusals == [1] and await h.stored() == []
    # Not lost: still the worker's job, extracted again once its lease runs out.
    assert await job_rows(h.store) == [("w1", "I have an interview tomorrow")]
    h.extraction.append(answer(interview()))
    await h.clock.advance(JOB_LEASE.total_seconds())
    assert await h.worker.adopt() == 1
    await h.settle()
    assert await job_rows(h.store) == []
    assert [c.reason for c in await h.stored()] == ["user has a job interview tomorrow"]


async def test_deleting_a_conversation_deletes_its_waiting_jobs(make_harness) -> None:
    h: Harness = await make_harness(batch_seconds=60.0)
    await h.say("I have an interview tomorrow", settle=False)
    await h.say("unrelated", chat="7", settle=False)
    await h.manager.drain()
    await h.store.delete_session(SCOPE_42.session_key)
    assert await job_rows(h.store) == [("w1", "unrelated")]
