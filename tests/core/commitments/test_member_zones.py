"""A follow-up's due window is worked out and kept in the zone of the member
it is about (their own, set with /timezone), else the agent's."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from core.store.sql.users import SqlUserZoneStore
from core.users import UserZones
from tests.core.commitments.test_extraction import (  # noqa: F401  (make_harness: a fixture)
    START,
    answer,
    interview,
    make_harness,
)

TOKYO = ZoneInfo("Asia/Tokyo")


async def test_the_window_is_in_the_members_own_zone(make_harness: Callable[..., Any]) -> None:  # noqa: F811
    holder: list[UserZones] = []

    class LateZones(UserZones):
        """The worker is built before the store is open: the zones follow it."""

        def __init__(self) -> None:
            pass

        async def many(self, users):  # type: ignore[no-untyped-def,override]
            return await holder[0].many(users)

    h = await make_harness(zones=LateZones())
    zones = UserZones(SqlUserZoneStore(h.store.connection), lambda _agent: "Europe/Paris")
    holder.append(zones)
    await zones.set("telegram", "u42", "Asia/Tokyo", now=START)

    evening = datetime(2026, 12, 1, 18, 0, tzinfo=TOKYO)
    window = {
        "earliest": evening.isoformat(),
        "latest": (evening + timedelta(hours=18)).isoformat(),
    }
    h.extraction.append(answer(interview(dueWindow=window)))
    await h.say("I have an interview tomorrow", chat="42")
    sent = json.loads(h.extraction_requests()[-1].last_user_text or "")
    assert sent["timezone"] == "Asia/Tokyo" and sent["now"] == "2026-11-30T18:00+09:00"

    h.extraction.append(answer(interview(dedupeKey="interview:other")))
    await h.say("I have an interview tomorrow too", chat="43")  # u43: no zone of their own
    sent = json.loads(h.extraction_requests()[-1].last_user_text or "")
    assert sent["timezone"] == "Europe/Paris"

    stored = {c.sender_id: c for c in await h.stored()}
    assert stored["u42"].due_timezone == "Asia/Tokyo"
    assert stored["u42"].due_earliest == evening
    assert stored["u43"].due_timezone == "Europe/Paris"
