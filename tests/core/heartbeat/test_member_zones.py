"""Quiet hours and a check-in's times are read in the zone of the member the
follow-up is about, when they set one; else the agent's, as before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from core.config.model import ActiveHours
from core.heartbeat.active_hours import is_active, next_window_start
from core.users import UserZones
from tests.support.heartbeat_harness import SCOPE, make_harness
from tests.support.scripted_model import text
from tests.support.store_helpers import user_zone_store_for

QUIET = {
    "agents": [
        {
            "id": "main",
            "timezone": "Europe/Paris",
            "heartbeat": {"activeHours": {"start": "08:00", "end": "22:00"}},
        }
    ]
}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def test_the_members_zone_wins_over_the_windows_and_the_agents() -> None:
    hours = ActiveHours(start="08:00", end="22:00")
    at = utc(2026, 12, 1, 23, 30)  # 00:30 Paris, 08:30 Tokyo
    assert not is_active(at, hours, "Europe/Paris")
    assert is_active(at, hours, "Europe/Paris", "Asia/Tokyo")
    own = ActiveHours(start="08:00", end="22:00", timezone="America/New_York")
    assert is_active(utc(2026, 12, 1, 13, 0), own, "UTC")  # 08:00 New York
    assert not is_active(utc(2026, 12, 1, 13, 0), own, "UTC", "Asia/Tokyo")  # 22:00 Tokyo
    assert next_window_start(at, hours, "Europe/Paris") == utc(2026, 12, 2, 7, 0)
    assert next_window_start(utc(2026, 12, 1, 14, 0), hours, "UTC", "Asia/Tokyo") == utc(
        2026, 12, 1, 23, 0
    )


async def test_a_tokyo_members_follow_up_waits_for_morning_in_tokyo(
    tmp_path: Path, storage_url: str
) -> None:
    hb = await make_harness(tmp_path, url=storage_url, config=QUIET)
    try:
        zones = UserZones(user_zone_store_for(hb.store), lambda _agent: "Europe/Paris")
        await zones.set(SCOPE.platform, str(SCOPE.sender_id), "Asia/Tokyo", now=hb.clock.now())
        scheduler = hb.scheduler(zones=zones)
        # 16:00 UTC is 17:00 in Paris (the agent's window is open) and
        # 01:00 in Tokyo (the member's night).
        hb.clock.set(utc(2026, 12, 1, 16, 0))
        c = await hb.seed()
        await scheduler.tick()
        hb.clock.set(utc(2026, 12, 1, 22, 59))  # 07:59 in Tokyo
        await scheduler.tick()
        assert hb.sender.attempts == [] and hb.model.requests == []
        hb.clock.set(utc(2026, 12, 1, 23, 0))  # 08:00 in Tokyo; midnight in Paris
        hb.model.steps.append(text("Good morning! How did it go?"))
        await scheduler.tick()
        assert (await hb.status(c.id)).status == "sent"
        # The check-in's prompt gave the member's local time.
        prompt = hb.model.requests[-1][1][-1]["content"]
        assert "2026-12-02T08:00+09:00 (Asia/Tokyo)" in prompt
    finally:
        await hb.store.close()


async def test_without_a_zone_of_their_own_the_agents_window_applies(
    tmp_path: Path, storage_url: str
) -> None:
    hb = await make_harness(tmp_path, url=storage_url, config=QUIET)
    try:
        zones = UserZones(user_zone_store_for(hb.store), lambda _agent: "Europe/Paris")
        scheduler = hb.scheduler(zones=zones)
        hb.clock.set(utc(2026, 12, 1, 23, 0))  # midnight in Paris
        c = await hb.seed()
        await scheduler.tick()
        assert hb.sender.attempts == []
        hb.clock.set(utc(2026, 12, 2, 7, 0))  # 08:00 in Paris
        hb.model.steps.append(text("Morning! How did it go?"))
        await scheduler.tick()
        assert (await hb.status(c.id)).status == "sent"
    finally:
        await hb.store.close()
