"""Zone names as users type them."""

from __future__ import annotations

import pytest

from core.users import ZoneError, parse_zone, suggest_zones
from core.users.zones import UserZones


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("Europe/Paris", "Europe/Paris"),
        ("europe/paris", "Europe/Paris"),
        ("  Asia/Tokyo ", "Asia/Tokyo"),
        ("utc", "UTC"),
        ("America/New York", "America/New_York"),
    ],
)
def test_a_zone_is_matched_without_regard_to_case(typed: str, name: str) -> None:
    assert parse_zone(typed) == name


@pytest.mark.parametrize("typed", ["Paris", "Mars/Olympus", "+02:00", "../etc/passwd", ""])
def test_what_names_no_zone_is_one_clear_line(typed: str) -> None:
    with pytest.raises(ZoneError) as raised:
        parse_zone(typed)
    assert "\n" not in str(raised.value)


def test_a_city_alone_is_answered_with_its_zone() -> None:
    with pytest.raises(ZoneError, match="did you mean Europe/Paris"):
        parse_zone("Paris")


def test_suggestions_by_prefix_city_and_substring() -> None:
    assert suggest_zones("europe/pa") == ["Europe/Paris"]
    assert suggest_zones("tokyo")[0] == "Asia/Tokyo"
    assert "America/Argentina/Buenos_Aires" in suggest_zones("buenos")
    assert len(suggest_zones("")) == 25
    assert suggest_zones("zzzz") == []
    assert all(not n.startswith(("posix/", "right/")) for n in suggest_zones("", limit=10_000))


async def test_an_unreadable_store_falls_back_to_the_agent_zone() -> None:
    class Broken:
        async def zone(self, platform: str, user_id: str) -> None:
            raise OSError("disk I/O error")

        async def zones(self, users: object) -> None:
            raise OSError("disk I/O error")

    users = UserZones(Broken(), lambda agent: "Europe/Berlin")  # type: ignore[arg-type]
    assert await users.of("main", "telegram", "42") == "Europe/Berlin"
    assert await users.many([("telegram", "42")]) == {}
