"""The timezone command's answers and the zone buttons' payloads (version 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.clock import TestClock
from core.commands.buttons import (
    COMPACT_LIMIT,
    FULL_LIMIT,
    decode_compact,
    encode_compact,
    from_compact,
    from_full,
    zone_from_compact,
    zone_from_full,
    zone_to_compact,
    zone_to_full,
)
from core.commands.timezone import TimezoneCommands, ZoneOutcome
from core.messages import ZoneChoice
from core.store.backends import open_backend
from core.users import UserZones

LONGEST = "America/Argentina/ComodRivadavia"


@pytest.mark.parametrize(
    "choice",
    [
        ZoneChoice("42", "Europe/Paris", True),
        ZoneChoice("1234567890123", LONGEST, False),
        ZoneChoice("42", "Etc/GMT+5", True),
    ],
)
def test_compact_payloads_round_trip_within_telegrams_64_bytes(choice: ZoneChoice) -> None:
    data = zone_to_compact(choice)
    assert data is not None and len(data.encode()) <= COMPACT_LIMIT
    assert zone_from_compact(data) == choice
    assert from_compact(data) is None  # never mistaken for a follow-up button
    # ... nor for a fired reminder's snooze, through the one entry point.
    assert decode_compact(data) == choice and encode_compact(choice) == data


def test_full_payloads_round_trip_within_discords_100_characters() -> None:
    choice = ZoneChoice("123456789012345678901", LONGEST, True)  # a long snowflake
    data = zone_to_full(choice)
    assert data is not None and len(data) <= FULL_LIMIT
    assert zone_from_full(data) == choice and from_full(data) is None
    assert zone_from_full(zone_to_full(ZoneChoice("7", "UTC", False))) == ZoneChoice(
        "7", "UTC", False
    )


@pytest.mark.parametrize(
    "data",
    ["t:y:42", "t:x:42:UTC", "t:y:4 2:UTC", "t:y:42:Europe/Paris;drop", "t:y:42:UTC\n", "", None],
)
def test_anything_else_is_no_zone_button(data: str | None) -> None:
    assert zone_from_compact(data) is None
    assert zone_from_full(data) is None


def test_a_choice_that_cannot_be_carried_gets_no_button() -> None:
    assert zone_to_compact(ZoneChoice("42", "Europe/Paris x")) is None
    assert zone_to_compact(ZoneChoice("9" * 40, LONGEST)) is None  # over 64 bytes


@pytest.fixture
async def zones(tmp_path: Path) -> AsyncIterator[UserZones]:
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as backend:
        yield UserZones(backend.user_zones, lambda _agent: "Europe/Berlin")


async def test_run_shows_sets_and_clears(zones: UserZones) -> None:
    clock = TestClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    commands = TimezoneCommands(zones, clock, agent_id="main", platform="telegram", user_id="42")
    shown = await commands.run("")
    assert (shown.outcome, shown.timezone, shown.own) == (ZoneOutcome.SHOWN, "Europe/Berlin", False)
    set_ = await commands.run("asia/tokyo")
    assert (set_.outcome, set_.timezone, set_.own) == (ZoneOutcome.SET, "Asia/Tokyo", True)
    assert set_.local_now.hour == 17
    bad = await commands.run("Narnia")
    assert bad.outcome is ZoneOutcome.INVALID and bad.timezone == "Asia/Tokyo"
    assert (await commands.run("clear")).outcome is ZoneOutcome.CLEARED
    assert (await commands.run("clear")).outcome is ZoneOutcome.NOT_SET


async def test_a_choice_is_confirmed_only_by_its_user(zones: UserZones) -> None:
    clock = TestClock()
    mine = TimezoneCommands(zones, clock, agent_id="main", platform="discord", user_id="1")
    theirs = TimezoneCommands(zones, clock, agent_id="main", platform="discord", user_id="2")
    choice = ZoneChoice("1", "Asia/Tokyo")
    assert (await theirs.confirm(choice)).outcome is ZoneOutcome.NOT_YOURS
    assert await zones.own("discord", "2") is None and await zones.own("discord", "1") is None
    declined = await mine.confirm(ZoneChoice("1", "Asia/Tokyo", accept=False))
    assert declined.outcome is ZoneOutcome.DECLINED and await zones.own("discord", "1") is None
    assert (await mine.confirm(choice)).outcome is ZoneOutcome.SET
    assert await zones.own("discord", "1") == "Asia/Tokyo"
