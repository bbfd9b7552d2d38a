"""Retention, on each backend: messages older than `storage.retention.messages`
go with their index rows (search no longer finds them), newer ones stay;
follow-ups and reminders that ended longer ago than `closed` go, active ones
of any age stay; null keeps everything. Batches are bounded (several
transactions for more rows than one batch), and two passes at once on one
database both finish with every row erased once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.clock import TestClock
from core.config.model import RetentionConfig
from core.messages import Target
from core.privacy.retention import Retention
from core.privacy.store import RetainedKind, RetentionStore
from core.reminders.model import NewReminder
from core.store.backends import Backend, open_backend
from core.store.base import NewMessage
from tests.support.followups import store_rows
from tests.support.user_data import PRIVATE, follow_up, found, scope, session, texts

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=400)
RECENT = NOW - timedelta(days=10)
POLICY = RetentionConfig(messages="365d", closed="90d")
KEEP = RetentionConfig(messages=None, closed=None)


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        await session(opened, PRIVATE, "111", "private")
        yield opened


def retention(backend: Backend, policy: RetentionConfig = POLICY, **kwargs: Any) -> Retention:
    return Retention(backend.retention, lambda: policy, TestClock(NOW), **kwargs)


async def exchange(backend: Backend, said: str, answer: str, when: datetime) -> int:
    asked = await backend.store.add_message(
        NewMessage(PRIVATE, "user", said, when, sender_id="111")
    )
    await backend.store.add_message(
        NewMessage(PRIVATE, "assistant", answer, when, in_reply_to=asked.id)
    )
    return asked.id


async def test_old_messages_go_with_their_index_rows_and_newer_ones_stay(
    backend: Backend,
) -> None:
    await exchange(backend, "the old quokkaword story", "old answer", OLD)
    late_question = await backend.store.add_message(
        NewMessage(PRIVATE, "user", "asked long ago", OLD, sender_id="111")
    )
    # Answered within the retention: the reply stays, pointing at nothing.
    await backend.store.add_message(
        NewMessage(PRIVATE, "assistant", "answered lately", RECENT, in_reply_to=late_question.id)
    )
    await exchange(backend, "the new wombatword story", "new answer", RECENT)
    assert await found(backend, "quokkaword") == {PRIVATE}

    done = await retention(backend).run_once()

    assert done.erased == {"messages": 3}
    assert await texts(backend) == ["answered lately", "new answer", "the new wombatword story"]
    assert await found(backend, "quokkaword") == set()
    assert await found(backend, "wombatword") == {PRIVATE}
    replies = await store_rows(
        backend.store, "SELECT in_reply_to FROM messages WHERE text = ?", ("answered lately",)
    )
    assert replies == [(None,)]
    # The chat itself stays, for its next message.
    assert await store_rows(backend.store, "SELECT key FROM sessions") == [(PRIVATE,)]
    assert await backend.retention.oldest_message() == RECENT
    # A second pass finds nothing more.
    assert (await retention(backend).run_once()).total == 0


async def ended_and_active(backend: Backend) -> None:
    """Two follow-ups and two reminders that ended 100 and 10 days ago, and
    one of each still active though created long ago."""
    where = scope(PRIVATE, "111", "111", "private")
    for reason in ("ended long ago", "ended lately", "still pending"):
        await follow_up(backend, where, reason)
    ids = dict(await store_rows(backend.store, "SELECT reason, id FROM commitments"))
    await backend.commitments.dismiss(ids["ended long ago"], now=NOW - timedelta(days=100))
    await backend.commitments.dismiss(ids["ended lately"], now=RECENT)
    for text in ("cancelled long ago", "cancelled lately", "still active"):
        added = await backend.reminders.add(
            NewReminder(
                agent_id="main", session_key=PRIVATE, target=Target("telegram", "111"),
                created_by="111", text=text, kind="after", cron=None, timezone="UTC",
                next_fire_at=NOW + timedelta(hours=2), created_at=OLD,
            )
        )  # fmt: skip
        if text.startswith("cancelled"):
            when = NOW - timedelta(days=100) if "long" in text else RECENT
            assert await backend.reminders.cancel(added.id, now=when) is not None


async def test_ended_follow_ups_and_reminders_go_after_closed_active_ones_stay(
    backend: Backend,
) -> None:
    await ended_and_active(backend)

    done = await retention(backend).run_once()

    assert done.erased == {"follow_ups": 1, "reminders": 1}
    reasons = {r[0] for r in await store_rows(backend.store, "SELECT reason FROM commitments")}
    assert reasons == {"ended lately", "still pending"}
    left = {r[0] for r in await store_rows(backend.store, "SELECT text FROM reminders")}
    assert left == {"cancelled lately", "still active"}


async def test_null_retention_erases_nothing(backend: Backend) -> None:
    await exchange(backend, "the old quokkaword story", "old answer", OLD)
    await ended_and_active(backend)
    before = await texts(backend)

    assert (await retention(backend, KEEP).run_once()).total == 0
    assert await texts(backend) == before
    assert len(await store_rows(backend.store, "SELECT id FROM commitments")) == 3
    # The same rows under a retention do go (the control).
    assert (await retention(backend).run_once()).total == 4


async def test_batches_are_bounded_one_transaction_each(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(10):
        await exchange(backend, f"old question {n}", f"old answer {n}", OLD)
    await exchange(backend, "a new question", "a new answer", RECENT)
    erased: list[int] = []
    db = backend.database
    transact = db.transact

    async def counted(work: Any, **kwargs: Any) -> Any:
        result = await transact(work, **kwargs)
        if isinstance(result, int):
            erased.append(result)
        return result

    monkeypatch.setattr(db, "transact", counted)
    done = await retention(
        backend, RetentionConfig(messages="365d", closed=None), batch=7
    ).run_once()

    assert done.erased == {"messages": 20}
    # 20 messages in batches of at most 7, each its own transaction, until
    # one finds nothing (then the two smaller kinds find nothing either).
    assert erased[:4] == [7, 7, 6, 0]
    assert all(rows <= 7 for rows in erased)
    assert await texts(backend) == ["a new answer", "a new question"]


async def test_two_passes_at_once_both_finish_and_erase_each_row_once(storage_url: str) -> None:
    async with open_backend(storage_url) as first, open_backend(storage_url) as second:
        await session(first, PRIVATE, "111", "private")
        for n in range(60):
            await exchange(first, f"old question {n}", f"old answer {n}", OLD)
        await exchange(first, "a new question", "a new answer", RECENT)
        await ended_and_active(first)

        passes = await asyncio.wait_for(
            asyncio.gather(
                retention(first, batch=5).run_once(), retention(second, batch=5).run_once()
            ),
            timeout=60,
        )

        totals: dict[str, int] = {}
        for done in passes:
            for kind, rows in done.erased.items():
                totals[kind] = totals.get(kind, 0) + rows
        assert totals == {"messages": 120, "follow_ups": 1, "reminders": 1}
        assert await texts(first) == ["a new answer", "a new question"]


async def test_metrics_count_the_erased_rows_by_kind(backend: Backend) -> None:
    from bot.metrics import PrometheusMetrics
    from core import metrics as core_metrics
    from tests.bot.test_metrics import value

    metrics = PrometheusMetrics()
    core_metrics.install(metrics)
    try:
        for n in range(4):
            await exchange(backend, f"old question {n}", f"old answer {n}", OLD)
        await ended_and_active(backend)
        assert value(metrics, "kept_retention_erased_total", kind="messages") is None
        await retention(backend, batch=3).run_once()
    finally:
        core_metrics.uninstall(metrics)
    assert value(metrics, "kept_retention_erased_total", kind="messages") == 8
    assert value(metrics, "kept_retention_erased_total", kind="follow_ups") == 1
    assert value(metrics, "kept_retention_erased_total", kind="reminders") == 1
    assert value(metrics, "kept_retention_erased_total", kind="queued") is None


async def test_the_loop_passes_at_start_then_every_interval(backend: Backend) -> None:
    clock = TestClock(NOW)
    loop = Retention(backend.retention, lambda: POLICY, clock, every_seconds=600)
    await exchange(backend, "old question", "old answer", OLD)
    task = asyncio.create_task(loop.run())
    try:
        for _ in range(50):
            if not await texts(backend):
                break
            await asyncio.sleep(0.01)
        assert await texts(backend) == []
        # Within the retention for five more minutes: the next pass erases it.
        await exchange(backend, "asked", "answered", NOW - timedelta(days=365, seconds=-300))
        assert await texts(backend) == ["answered", "asked"]
        for _ in range(100):
            if clock.sleepers:
                break  # the first pass is over: the loop waits for the next
            await asyncio.sleep(0.01)
        await clock.advance(600)
        for _ in range(50):
            if not await texts(backend):
                break
            await asyncio.sleep(0.01)
        assert await texts(backend) == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_pass_beside_an_erasure_of_the_same_rows_neither_fails_nor_waits_forever(
    storage_url: str,
) -> None:
    from core.privacy.store import ErasedUser

    async with open_backend(storage_url) as first, open_backend(storage_url) as second:
        await session(first, PRIVATE, "111", "private")
        for n in range(60):
            await exchange(first, f"old question {n}", f"old answer {n}", OLD)
        await exchange(first, "a new question", "a new answer", RECENT)
        assert len(await texts(first)) == 122

        await asyncio.wait_for(
            asyncio.gather(
                retention(first, batch=5).run_once(),
                second.erasure.erase(ErasedUser("telegram", "111", "main")),
            ),
            timeout=60,
        )
        assert await texts(first) == []


async def test_queued_exchanges_and_parked_updates_as_old_as_erased_messages_go(
    backend: Backend,
) -> None:
    from core.commitments.exchange import Exchange
    from core.commitments.jobs import NewJob
    from core.store.parked import ParkedUpdate

    for n, when in enumerate((OLD, RECENT)):
        job = NewJob(scope(PRIVATE, "111", "111", "private"), Exchange(n + 1, f"said {n}", "ok"))
        await backend.extraction_jobs.enqueue(job, worker="w", now=when, lease_until=when)
        await backend.parked.park(
            ParkedUpdate("telegram:1", n, "chat:111", f'{{"text": "parked {n}"}}', "e", 1, when)
        )

    done = await retention(backend).run_once()

    assert done.erased == {"queued": 1, "updates": 1}
    jobs = await store_rows(backend.store, "SELECT user_text FROM extraction_jobs")
    assert jobs == [("said 1",)]
    assert [p.update_id for p in await backend.parked.listing()] == [1]


class SlowRows(RetentionStore):
    """`rows` due messages, each costing `per_row` seconds of the test clock
    to erase; the limits the pass asked for, in order."""

    def __init__(self, clock: TestClock, rows: int, per_row: float) -> None:
        self._clock, self._left, self._per_row = clock, rows, per_row
        self.limits: list[int] = []

    async def erase_batch(self, kind: RetainedKind, before: datetime, *, limit: int) -> int:
        if kind != "messages":
            return 0
        self.limits.append(limit)
        rows = min(limit, self._left)
        self._left -= rows
        self._clock.set(self._clock.now() + timedelta(seconds=rows * self._per_row))
        return rows

    async def finish(self, kinds: Collection[RetainedKind]) -> None:
        return None

    async def oldest_message(self) -> datetime | None:
        return None


@pytest.mark.parametrize(
    ("per_row", "settles_at"),
    [(0.001, 20), (0.0001, 200), (0.00001, 300), (0.01, 10)],
)
async def test_a_batch_is_sized_to_take_about_batch_seconds(
    per_row: float, settles_at: int
) -> None:
    clock = TestClock(NOW)
    store = SlowRows(clock, 20_000, per_row)
    # No rest: the test clock would hold the pass until a test moved it.
    loop = Retention(store, lambda: POLICY, clock, batch=300, batch_seconds=0.02, rest=0)
    await loop.run_once()
    # Starts small, doubles at most, never past the configured batch, and
    # settles where a batch takes 20 ms (at least 10 rows, however slow).
    assert store.limits[0] == 10
    assert all(b <= 2 * a for a, b in zip(store.limits, store.limits[1:], strict=False))
    assert max(store.limits) <= 300
    assert store.limits[-3:-1] == [settles_at, settles_at]


async def test_after_each_batch_the_pass_rests_as_long_as_the_batch_took() -> None:
    clock = TestClock(NOW)
    store = SlowRows(clock, 25, 0.001)  # a 10-row batch takes 10 ms
    loop = Retention(store, lambda: POLICY, clock, batch=300, batch_seconds=0.02)
    task = asyncio.create_task(loop.run_once())
    try:
        for _ in range(100):
            if clock.sleepers:
                break
            await asyncio.sleep(0.01)
        # One batch, then the pass waits on the clock before the next.
        assert store.limits == [10] and clock.sleepers == 1
        await clock.advance(0.009)
        assert store.limits == [10]
        await clock.advance(0.001)
        for _ in range(100):
            if len(store.limits) > 1:
                break
            await asyncio.sleep(0.01)
        assert store.limits == [10, 20]  # the rest (15 rows) in a second batch
        while not task.done():
            await clock.advance(0.1)
        assert (await task).erased == {"messages": 25}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
