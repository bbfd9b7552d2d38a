from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from core.config.model import KeptConfig
from core.messages import Target
from core.search import service as service_module
from core.search.service import INDEXING_TTL, SessionSearch
from core.search.tools import register_search_tools
from core.store.base import SearchScope, Store
from core.tools import ToolContext, ToolRegistry
from tests.core.store.test_contract import T0, add, add_session
from tests.support.store_helpers import open_any_store


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


# --- truncated: more matches than returned ------------------------------------

MAIN_A = "agent:main:telegram:private:1"
MAIN_B = "agent:main:telegram:private:2"
OTHER_AGENT = "agent:other:telegram:private:3"


@pytest.fixture
async def store(storage_url: str) -> AsyncIterator[Store]:
    """Each backend's store."""
    async with open_any_store(storage_url) as opened:
        yield opened


@pytest.fixture
async def search(store: Store) -> SessionSearch:
    """Five "budget" messages: three in MAIN_A, one in MAIN_B, one of another agent."""
    for key in (MAIN_A, MAIN_B, OTHER_AGENT):
        await add_session(store, key)
    for at, key in enumerate((MAIN_A, MAIN_A, MAIN_A, MAIN_B, OTHER_AGENT)):
        await add(store, f"budget note {at}", at=at, key=key)
    return SessionSearch(store, KeptConfig)


@pytest.mark.parametrize(
    ("scope", "matches"),
    [
        (SearchScope(session_key=MAIN_A), 3),
        (SearchScope(agent_id="main"), 4),
        (SearchScope(), 5),  # the admin's: every agent, merged
    ],
)
async def test_truncated_says_whether_more_matches_exist(
    search: SessionSearch, scope: SearchScope, matches: int
) -> None:
    exact = await search.search("budget", scope, matches)
    assert len(exact.results) == matches and exact.truncated is False

    short = await search.search("budget", scope, matches - 1)
    assert len(short.results) == matches - 1, "the row fetched to tell is dropped"
    assert short.truncated is True
    # The same best rows, in the same order, as the search that got them all.
    assert [r["messageId"] for r in short.results] == [
        r["messageId"] for r in exact.results[: matches - 1]
    ]
    assert set(short.as_json()) == {"results", "indexing", "truncated"}


async def test_the_size_budget_still_truncates(
    search: SessionSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Snippets are short: a smaller budget stands in for 32 KiB of them.
    monkeypatch.setattr(service_module, "MAX_RESULT_BYTES", 400)
    answer = await search.search("budget", SearchScope(session_key=MAIN_A), 3)
    assert 0 < len(answer.results) < 3 and answer.truncated is True


async def test_the_agents_tool_reports_truncated(search: SessionSearch) -> None:
    tools = ToolRegistry()
    register_search_tools(tools, search)
    ctx = ToolContext(
        agent_id="main",
        session_key=MAIN_A,
        target=Target("telegram", "1"),
        chat_kind="private",
        sender_id="1",
        now=T0,
    )
    # Visibility "self" (the default): MAIN_A's three matches.
    short = json.loads(await tools.call("sessions_search", '{"query": "budget", "limit": 2}', ctx))
    assert len(short["results"]) == 2 and short["truncated"] is True
    exact = json.loads(await tools.call("sessions_search", '{"query": "budget", "limit": 3}', ctx))
    assert len(exact["results"]) == 3 and exact["truncated"] is False
