"""The parked updates on each backend (`storage_url`): parked, listed and
counted; a replay is asked for, handed out once, and a resolved update is
gone; parking the same update again keeps one row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.store.backends import open_backend
from core.store.parked import ParkedUpdate

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def parked(
    update_id: int, *, at: datetime = T0, error: str = "OperationalError: x"
) -> ParkedUpdate:
    payload = f'{{"update_id": {update_id}, "message": {{"text": "\\ud800"}}}}'
    return ParkedUpdate("telegram:1", update_id, "chat:42", payload, error, 5, at)


async def test_parked_updates_are_listed_replayed_once_and_resolved(storage_url: str) -> None:
    async with open_backend(storage_url) as backend:
        store = backend.parked
        assert await store.count() == 0
        await store.park(parked(11, error="bad \ud800 \x00 error"))
        await store.park(parked(10, at=T0 - timedelta(seconds=1)))
        await store.park(ParkedUpdate("telegram:2", 11, "chat:9", "{}", "e", 5, T0))
        assert await store.count() == 3
        listed = await store.listing()
        assert [(p.source, p.update_id) for p in listed] == [
            ("telegram:1", 10),
            ("telegram:1", 11),
            ("telegram:2", 11),
        ]
        assert listed[1].error == "bad \ufffd  error"
        assert listed[1].payload == parked(11).payload
        assert all(p.retry_requested_at is None for p in listed)
        assert await store.take_retries("telegram:1") == []

        assert await store.request_retry(now=T0) == 3
        taken = await store.take_retries("telegram:1")
        assert [p.update_id for p in taken] == [10, 11]
        assert all(p.retry_requested_at == T0 for p in taken)
        assert await store.take_retries("telegram:1") == []  # handed out once
        assert await store.count() == 3  # rows stay until resolved

        # Failed again: parked again, tries added, no replay pending.
        await store.park(parked(10, at=T0 + timedelta(minutes=1), error="again"))
        await store.resolve("telegram:1", 11)
        listed = await store.listing()
        assert [(p.update_id, p.tries, p.error) for p in listed if p.source == "telegram:1"] == [
            (10, 10, "again")
        ]
        assert [p.update_id for p in await store.take_retries("telegram:2")] == [11]

    async with open_backend(storage_url) as reopened:
        assert await reopened.parked.count() == 2
