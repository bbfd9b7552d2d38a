from __future__ import annotations

from typing import Any, cast

from core.config import KeptConfig
from core.search.service import INDEXING_TTL, SessionSearch
from core.store.base import Store


class BehindStore:
    """Just enough of a Store for the `indexing` flag: counts its queries."""

    def __init__(self) -> None:
        self.behind: list[str] = []
        self.calls = 0

    async def sessions_behind(self, limit: int = 100) -> list[str]:
        self.calls += 1
        return self.behind[:limit]


async def test_the_indexing_flag_is_reused_for_a_moment() -> None:
    store = BehindStore()
    now = [100.0]
    config = cast(Any, lambda: KeptConfig())
    service = SessionSearch(cast(Store, store), config, clock=lambda: now[0])
    assert await service.indexing() is False
    store.behind = ["agent:main:telegram:private:1"]
    now[0] += INDEXING_TTL / 2
    # Still inside the TTL: one trip to the store in all.
    assert await service.indexing() is False and store.calls == 1
    now[0] += INDEXING_TTL
    assert await service.indexing() is True and store.calls == 2
    store.behind = []
    now[0] += INDEXING_TTL
    assert await service.indexing() is False and store.calls == 3
    # A clock that goes backwards never pins a stale value.
    now[0] -= 10 * INDEXING_TTL
    assert await service.indexing() is False and store.calls == 4
