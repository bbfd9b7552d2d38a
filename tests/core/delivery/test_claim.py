"""The claim machine on its own: what each way out of a claim writes.

A recording claim stands in for a store: the guarantees under test are the
claim's (which write its phase leads to, and only one), not the database's
fencing, which the heartbeat and reminder tests cover on both backends."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

import pytest

from core.clock import TestClock
from core.delivery.claim import DeliveryClaim, Phase

LEASE = timedelta(minutes=5)


class RecordingClaim(DeliveryClaim):
    kind = "test"

    def __init__(self, clock: TestClock, *, keeps: bool = True) -> None:
        super().__init__(clock=clock, lease=LEASE, log=logging.getLogger("kept.test"))
        self.keeps = keeps  # whether the fence to `sending` holds
        self.writes: list[tuple[str, str]] = []
        self.sending_lease: datetime | None = None
        self.fail_writes = False
        self.hold: asyncio.Event | None = None

    async def _to_sending(self, now: datetime, lease_until: datetime) -> bool:
        self.sending_lease = lease_until
        return self.keeps

    async def _release(self, now: datetime, error: str) -> None:
        await self._write("release", error)

    async def _fail_unknown(self, now: datetime, cause: str) -> None:
        await self._write("failed_unknown", cause)

    async def _write(self, what: str, detail: str) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_writes:
            raise OSError("database gone")
        self.writes.append((what, detail))

    def _abandoned(self, phase: Phase, why: str) -> None:
        self.writes.append(("abandoned", phase))

    def _fields(self) -> dict[str, object]:
        return {"claim": "c1"}


async def sent(claim: RecordingClaim) -> None:
    """Reach the platform, then break: the send may have happened."""
    async with claim:
        assert await claim.begin_sending()
        raise RuntimeError("adapter broke after the request went out")


async def test_a_send_whose_outcome_is_unknown_is_never_repeated() -> None:
    claim = RecordingClaim(TestClock())
    with pytest.raises(RuntimeError):
        await sent(claim)
    assert [w for w, _ in claim.writes] == ["failed_unknown", "abandoned"]
    assert "while sending" in claim.writes[0][1]
    assert claim.phase == "settled"
    # Nothing can bring it back: no release, no second send, no second record.
    await claim.release("try again")
    with pytest.raises(RuntimeError):
        await claim.begin_sending()
    await claim.abandon(None)
    assert [w for w, _ in claim.writes] == ["failed_unknown", "abandoned"]


async def test_a_stop_while_sending_settles_as_unknown_not_released() -> None:
    claim = RecordingClaim(TestClock())
    entered = asyncio.Event()

    async def turn() -> None:
        async with claim:
            await claim.begin_sending()
            entered.set()
            await asyncio.Event().wait()  # the platform call that never returns

    task = asyncio.create_task(turn())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert claim.writes == [("failed_unknown", "stopped while sending"), ("abandoned", "sending")]


async def test_a_claim_that_never_reached_the_platform_is_released() -> None:
    claim = RecordingClaim(TestClock())
    with pytest.raises(ValueError):
        async with claim:
            raise ValueError("model broke")
    assert claim.writes == [
        ("release", "ValueError('model broke') before sending; released"),
        ("abandoned", "claimed"),
    ]
    assert claim.phase == "settled"


async def test_a_claim_left_unsettled_without_an_error_is_released_too() -> None:
    claim = RecordingClaim(TestClock())
    async with claim:
        pass
    assert claim.writes[0] == ("release", "left unsettled before sending; released")


async def test_a_claim_lost_before_sending_is_released_and_sends_nothing() -> None:
    claim = RecordingClaim(TestClock(), keeps=False)
    async with claim:
        assert not await claim.begin_sending()
    assert claim.writes == [("release", "claim lost before sending")]
    assert claim.phase == "settled"


async def test_sending_renews_the_lease_from_now() -> None:
    clock = TestClock()
    claim = RecordingClaim(clock)
    await clock.advance(60)
    async with claim:
        await claim.begin_sending()
        await claim.settle(lambda now: asyncio.sleep(0))
    assert claim.sending_lease == clock.now() + LEASE


async def test_settling_is_idempotent() -> None:
    claim = RecordingClaim(TestClock())
    records: list[datetime] = []

    async def record(now: datetime) -> str:
        records.append(now)
        return "sent"

    async with claim:
        await claim.begin_sending()
        assert await claim.settle(record) == "sent"
        assert await claim.settle(record) is None
    assert len(records) == 1 and claim.writes == []  # the exit had nothing left to do


async def test_a_claim_in_sending_is_never_released() -> None:
    claim = RecordingClaim(TestClock())
    async with claim:
        await claim.begin_sending()
        with pytest.raises(RuntimeError):
            await claim.release("give it back")
        await claim.settle(lambda now: asyncio.sleep(0))
    assert claim.writes == []


async def test_a_failed_record_is_settled_by_phase_on_exit() -> None:
    claim = RecordingClaim(TestClock())

    async def broken(now: datetime) -> None:
        raise OSError("commit failed")

    with pytest.raises(OSError):
        async with claim:
            await claim.begin_sending()
            await claim.settle(broken)
    assert claim.writes[0][0] == "failed_unknown"


async def test_a_second_stop_does_not_cut_the_settling_short() -> None:
    claim = RecordingClaim(TestClock())
    claim.hold = asyncio.Event()
    entered = asyncio.Event()

    async def turn() -> None:
        async with claim:
            await claim.begin_sending()
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(turn())
    await entered.wait()
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # stopped again while the settle waits on the store
    claim.hold.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert claim.writes[0] == ("failed_unknown", "stopped while sending")


async def test_a_store_that_fails_to_settle_leaves_it_to_the_lease(caplog) -> None:
    claim = RecordingClaim(TestClock())
    claim.fail_writes = True
    with caplog.at_level(logging.INFO, logger="kept.test"):
        with pytest.raises(ValueError):
            async with claim:
                raise ValueError("broke")
        await claim.release("again")  # settled: the lease is in charge now
    assert "test_claim_settle_failed" in caplog.text
    assert claim.phase == "settled" and claim.writes == []


async def test_a_release_the_store_refuses_is_logged_not_raised(caplog) -> None:
    claim = RecordingClaim(TestClock())
    claim.fail_writes = True
    with caplog.at_level(logging.INFO, logger="kept.test"):
        async with claim:
            await claim.release("not served")
    assert "test_claim_release_failed" in caplog.text and claim.phase == "settled"
