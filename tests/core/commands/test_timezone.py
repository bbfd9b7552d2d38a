"""The timezone command's answers (the zone buttons' payloads: test_buttons.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.clock import TestClock
from core.commands import wording
from core.commands.timezone import TimezoneCommands, ZoneOutcome
from core.messages import ZoneChoice
from core.store.backends import open_backend
from core.users import UserZones


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


async def test_an_answer_is_worded_once_for_the_asker_and_for_the_operator(
    zones: UserZones,
) -> None:
    """`/timezone` speaks to the asker; `kept users timezone` says the same
    about the user it names, without the chat's how-to."""
    clock = TestClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    commands = TimezoneCommands(zones, clock, agent_id="main", platform="telegram", user_id="42")
    shown = await commands.run("")
    assert wording.zone(shown) == (
        "You have no time zone of your own; I use Europe/Berlin (Tue 01 Dec 09:00). "
        "Set yours with /timezone Area/City, e.g. /timezone Europe/Paris."
    )
    assert wording.zone(shown, "telegram:42") == (
        "telegram:42 has no time zone of their own; I use Europe/Berlin (Tue 01 Dec 09:00)."
    )
    set_ = await commands.run("asia/tokyo")
    assert wording.zone(set_) == "Your time zone is now Asia/Tokyo (it is Tue 01 Dec 17:00 there)."
    assert wording.zone(set_, "telegram:42") == (
        "telegram:42's time zone is now Asia/Tokyo (it is Tue 01 Dec 17:00 there)."
    )
    bad = await commands.run("Narnia")
    assert wording.zone(bad) == wording.zone(bad, "telegram:42")
    assert wording.zone(bad).endswith(" Nothing changed.")
    cleared = await commands.run("clear")
    assert wording.zone(cleared, "telegram:42") == (
        "telegram:42's time zone is cleared; I use Europe/Berlin (the default) again."
    )
    assert wording.zone(await commands.run("clear"), "telegram:42") == (
        "telegram:42 had no time zone of their own; I use Europe/Berlin (the default)."
    )
