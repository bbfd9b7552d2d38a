"""The UserZoneStore contract, on every backend (`storage_url`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from core.store.backends import Backend, open_backend
from core.users import UserZones, ZoneError

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


async def test_a_zone_is_stored_per_platform_and_user(backend: Backend) -> None:
    zones = backend.user_zones
    assert await zones.zone("telegram", "42") is None
    stored = await zones.set_zone("telegram", "42", "Asia/Tokyo", now=T0)
    assert stored.timezone == "Asia/Tokyo" and stored.updated_at == T0
    found = await zones.zone("telegram", "42")
    assert found is not None and found.timezone == "Asia/Tokyo" and found.updated_at == T0
    # The same id on another platform is another person.
    assert await zones.zone("discord", "42") is None


async def test_setting_again_replaces_and_clearing_forgets(backend: Backend) -> None:
    zones = backend.user_zones
    await zones.set_zone("telegram", "42", "Asia/Tokyo", now=T0)
    await zones.set_zone("telegram", "42", "Europe/Paris", now=T0 + timedelta(hours=1))
    found = await zones.zone("telegram", "42")
    assert found is not None and found.timezone == "Europe/Paris"
    assert found.updated_at == T0 + timedelta(hours=1)
    assert await zones.clear_zone("telegram", "42") is True
    assert await zones.zone("telegram", "42") is None
    assert await zones.clear_zone("telegram", "42") is False


async def test_many_zones_are_read_at_once(backend: Backend) -> None:
    zones = backend.user_zones
    await zones.set_zone("telegram", "1", "Asia/Tokyo", now=T0)
    await zones.set_zone("discord", "1", "Europe/Paris", now=T0)
    await zones.set_zone("telegram", "2", "America/New_York", now=T0)
    found = await zones.zones([("telegram", "1"), ("discord", "1"), ("telegram", "3")])
    assert found == {("telegram", "1"): "Asia/Tokyo", ("discord", "1"): "Europe/Paris"}
    assert await zones.zones([]) == {}
    # More users than one statement's parameters hold.
    many = [("telegram", str(i)) for i in range(1000)]
    assert await zones.zones(many) == {
        ("telegram", "1"): "Asia/Tokyo",
        ("telegram", "2"): "America/New_York",
    }


async def test_the_resolver_falls_back_to_the_agent_zone(backend: Backend) -> None:
    users = UserZones(backend.user_zones, lambda agent: {"main": "Europe/Berlin"}.get(agent, "UTC"))
    assert await users.of("main", "telegram", "42") == "Europe/Berlin"
    assert await users.of("main", "telegram", None) == "Europe/Berlin"
    await users.set("telegram", "42", "asia/tokyo", now=T0)
    assert await users.of("main", "telegram", "42") == "Asia/Tokyo"
    with pytest.raises(ZoneError, match="unknown time zone 'Mars/Olympus'"):
        await users.set("telegram", "42", "Mars/Olympus", now=T0)
    assert await users.of("main", "telegram", "42") == "Asia/Tokyo"
