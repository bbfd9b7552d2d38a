"""The set_timezone tool proposes; it never stores."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.messages import Target, ZoneChoice
from core.store.backends import Backend, open_backend
from core.tools import ToolContext, ToolRegistry
from core.users import UserZones
from core.users.tools import register_user_tools

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[Backend]:
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as opened:
        yield opened


def ctx(platform: str = "telegram", sender: str | None = "42") -> ToolContext:
    target = Target(platform, "42")
    key = f"agent:main:{platform}:private:42"
    return ToolContext("main", key, target, "private", sender, T0)


async def call(tools: ToolRegistry, context: ToolContext, zone: str) -> dict[str, object]:
    return json.loads(await tools.call("set_timezone", json.dumps({"timezone": zone}), context))


@pytest.fixture
def setup(backend: Backend) -> tuple[ToolRegistry, UserZones]:
    zones = UserZones(backend.user_zones, lambda _agent: "UTC")
    tools = ToolRegistry()
    register_user_tools(tools, zones)
    return tools, zones


async def test_a_proposal_offers_yes_and_no_to_the_user_and_stores_nothing(
    setup: tuple[ToolRegistry, UserZones],
) -> None:
    tools, zones = setup
    context = ctx()
    result = await call(tools, context, "asia/tokyo")
    assert result["status"] == "proposed" and result["timezone"] == "Asia/Tokyo"
    assert context.offers == [
        ZoneChoice("42", "Asia/Tokyo", True),
        ZoneChoice("42", "Asia/Tokyo", False),
    ]
    assert await zones.own("telegram", "42") is None
    # Proposed twice in one turn: still one pair of buttons.
    await call(tools, context, "Asia/Tokyo")
    assert len(context.offers) == 2


async def test_no_offer_for_a_bad_zone_the_same_zone_or_a_platform_that_cannot_ask(
    setup: tuple[ToolRegistry, UserZones],
) -> None:
    tools, zones = setup
    context = ctx()
    assert "unknown time zone" in str((await call(tools, context, "Mars/Olympus"))["error"])
    await zones.set("telegram", "42", "Asia/Tokyo", now=T0)
    assert (await call(tools, context, "Asia/Tokyo"))["status"] == "unchanged"
    elsewhere = ctx("pipe")  # no way to ask there: the user is told the command
    answer = await call(tools, elsewhere, "Europe/Paris")
    assert answer["status"] == "not_offered" and "/timezone Europe/Paris" in str(answer["note"])
    nobody = ctx(sender=None)
    assert "error" in await call(tools, nobody, "Europe/Paris")
    assert context.offers == elsewhere.offers == nobody.offers == []
    console = ctx("console")  # kept chat asks y / n
    assert (await call(tools, console, "Europe/Paris"))["status"] == "proposed"
    assert [o.accept for o in console.offers] == [True, False]
