"""What `kept usage` and `/usage` read (SqlUsageStore), on both backends:
every grouping, the per-model split that prices need, estimated calls,
the window's start, and one user's own calls (nobody else's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from core.limits.store import CallUsage, UsageLine
from core.store.backends import Backend, open_backend

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
DAY = "2026-12-04"


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    opened = open_backend(storage_url)
    await opened.open()
    yield opened
    await opened.close()


def call(
    tokens_in: int,
    tokens_out: int,
    *,
    user: str | None = "alice",
    platform: str | None = "telegram",
    chat: str | None = None,
    agent: str = "main",
    role: str = "chat",
    model: str = "small",
    estimated: bool = False,
    at: datetime = NOW,
) -> CallUsage:
    return CallUsage(
        at=at, agent_id=agent, role=role, model=model, platform=platform, user_id=user,
        chat_id=chat if chat is not None else user, shared=chat is not None and chat != user,
        tokens_in=tokens_in, tokens_out=tokens_out, estimated=estimated,
    )  # fmt: skip


async def seed(backend: Backend) -> None:
    for usage in (
        call(100, 10),
        call(200, 20, model="big", estimated=True),
        call(50, 5, chat="-100", role="extraction"),
        call(1000, 100, user="bob", agent="side", model="big"),
        call(7, 3, user="alice", platform="discord"),
        # A call no user pays for (a bot-wide one): its own line.
        call(1, 1, user=None, platform=None, chat=None, role="heartbeat"),
        # Before the window: counted nowhere below.
        call(9999, 9999, at=NOW - timedelta(days=8)),
    ):
        await backend.budgets.record(usage, [], DAY, None)


def shown(lines: list[UsageLine]) -> list[tuple[str, int, int, int, int]]:
    return [(x.key, x.calls, x.tokens_in, x.tokens_out, x.estimated_calls) for x in lines]


SINCE = NOW - timedelta(days=7)


async def test_every_grouping_sums_its_calls_largest_first(backend: Backend) -> None:
    await seed(backend)
    usage = backend.usage
    assert shown(await usage.usage(SINCE, "user")) == [
        ("telegram:bob", 1, 1000, 100, 0),
        ("telegram:alice", 3, 350, 35, 1),
        ("discord:alice", 1, 7, 3, 0),
        ("(no user)", 1, 1, 1, 0),
    ]
    assert shown(await usage.usage(SINCE, "chat")) == [
        ("telegram:bob", 1, 1000, 100, 0),
        ("telegram:alice", 2, 300, 30, 1),
        ("telegram:-100", 1, 50, 5, 0),
        ("discord:alice", 1, 7, 3, 0),
        ("(no chat)", 1, 1, 1, 0),
    ]
    assert shown(await usage.usage(SINCE, "agent")) == [
        ("side", 1, 1000, 100, 0),
        ("main", 5, 358, 39, 1),
    ]
    assert shown(await usage.usage(SINCE, "role")) == [
        ("chat", 4, 1307, 133, 1),
        ("extraction", 1, 50, 5, 0),
        ("heartbeat", 1, 1, 1, 0),
    ]
    assert shown(await usage.usage(SINCE, "model")) == [
        ("big", 2, 1200, 120, 1),
        ("small", 4, 158, 19, 0),
    ]


async def test_a_group_keeps_its_tokens_per_model_for_pricing(backend: Backend) -> None:
    await seed(backend)
    alice = next(x for x in await backend.usage.usage(SINCE, "user") if x.key == "telegram:alice")
    assert alice.by_model == (("big", 200, 20), ("small", 150, 15))


async def test_the_window_starts_where_it_is_asked(backend: Backend) -> None:
    await seed(backend)
    everything = await backend.usage.usage(NOW - timedelta(days=30), "model")
    assert sum(x.calls for x in everything) == 7  # the old call, with a wider window
    assert await backend.usage.usage(NOW + timedelta(seconds=1), "user") == []


async def test_a_users_own_usage_is_theirs_on_that_platform_only(backend: Backend) -> None:
    await seed(backend)
    mine = await backend.usage.user_usage("telegram", "alice", SINCE)
    assert shown([mine]) == [("telegram:alice", 3, 350, 35, 1)]
    assert mine.by_model == (("big", 200, 20), ("small", 150, 15))
    nobody = await backend.usage.user_usage("telegram", "carol", SINCE)
    assert nobody == UsageLine("telegram:carol", 0, 0, 0, 0)
