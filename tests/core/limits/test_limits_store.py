"""The limits' stores on both backends: GCRA rates, token holds and
records, and the lock that makes two workers count against one row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from core.limits.store import BOT, CallUsage, Cap, Hold, RateRule, RateVerdict, Spent, Subject
from core.store.backends import Backend, open_backend
from core.store.sql.limits import take_rates
from tests.support.pg_helpers import opened_backends

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ALICE = Subject("user", "telegram", "alice")
GROUP = Subject("chat", "telegram", "-100")
DAY = "2026-12-04"


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    opened = open_backend(storage_url)
    await opened.open()
    yield opened
    await opened.close()


async def take(backend: Backend, rules: list[RateRule], now: datetime) -> RateVerdict:
    """One message against `rules`, as Store.admit_message decides it."""
    return await backend.database.transact(lambda tx: take_rates(tx, rules, now), durable=False)


def usage(tokens_in: int, tokens_out: int, *, user: str = "alice") -> CallUsage:
    return CallUsage(
        at=NOW, agent_id="main", role="chat", model="m", platform="telegram", user_id=user,
        chat_id=user, shared=False, tokens_in=tokens_in, tokens_out=tokens_out, estimated=False,
    )  # fmt: skip


# --- rates ---------------------------------------------------------------------


async def test_a_burst_passes_then_one_message_every_interval(backend: Backend) -> None:
    rule = [RateRule(ALICE, 6)]  # six at once, then one every 10 s
    verdicts = [await take(backend, rule, NOW) for _ in range(7)]
    assert [v.allowed for v in verdicts] == [True] * 6 + [False]
    refused = verdicts[-1]
    assert refused.limit == "user_rate" and refused.notify
    assert refused.retry_at == NOW + timedelta(seconds=10)
    # Not yet, and not told again within the minute.
    again = await take(backend, rule, NOW + timedelta(seconds=9))
    assert not again.allowed and not again.notify
    assert (await take(backend, rule, NOW + timedelta(seconds=10))).allowed
    assert not (await take(backend, rule, NOW + timedelta(seconds=10))).allowed
    # A minute of quiet gives the whole burst back.
    later = NOW + timedelta(minutes=2)
    assert all([(await take(backend, rule, later)).allowed for _ in range(6)])
    told = await take(backend, rule, later)
    assert not told.allowed and told.notify  # a new minute: told once more


async def test_a_refusal_counts_against_no_rule(backend: Backend) -> None:
    # The chat is full; the user's own rule must not lose a message to it.
    user, chat = RateRule(ALICE, 2), RateRule(GROUP, 1)
    assert (await take(backend, [user, chat], NOW)).allowed
    refused = await take(backend, [user, chat], NOW)
    assert not refused.allowed and refused.limit == "chat_rate"
    assert (await take(backend, [user], NOW)).allowed  # still one left for alice
    assert not (await take(backend, [user], NOW)).allowed


async def test_subjects_are_counted_apart(backend: Backend) -> None:
    bob = Subject("user", "telegram", "bob")
    other_platform = Subject("user", "discord", "alice")
    assert (await take(backend, [RateRule(ALICE, 1)], NOW)).allowed
    assert not (await take(backend, [RateRule(ALICE, 1)], NOW)).allowed
    assert (await take(backend, [RateRule(bob, 1)], NOW)).allowed
    assert (await take(backend, [RateRule(other_platform, 1)], NOW)).allowed


# --- budgets -------------------------------------------------------------------


async def test_a_hold_is_refused_once_spent_and_held_reach_the_cap(backend: Backend) -> None:
    caps = [Cap(ALICE, 1000), Cap(BOT, 10_000)]
    first = await backend.budgets.hold(caps, DAY, 600)
    assert isinstance(first, Hold)
    # 600 held is below 1000: a second call may start (the overshoot bound
    # is one call's worth), and then nothing more.
    second = await backend.budgets.hold(caps, DAY, 600)
    assert isinstance(second, Hold)
    third = await backend.budgets.hold(caps, DAY, 1)
    assert isinstance(third, Spent) and third.cap.subject == ALICE
    # The refusal held nothing anywhere (the bot's row too was rolled back).
    await backend.budgets.release(first)
    await backend.budgets.release(second)
    assert isinstance(await backend.budgets.hold(caps, DAY, 999), Hold)


async def test_recording_replaces_the_hold_with_what_was_used(backend: Backend) -> None:
    caps = [Cap(ALICE, 1000)]
    hold = await backend.budgets.hold(caps, DAY, 900)
    assert isinstance(hold, Hold)
    await backend.budgets.record(usage(300, 50), [ALICE, BOT], DAY, hold)
    assert await backend.budgets.spent([ALICE, BOT, GROUP], DAY) == {ALICE: 350, BOT: 350}
    assert isinstance(await backend.budgets.hold(caps, DAY, 900), Hold)  # 350 < 1000
    await backend.budgets.record(usage(600, 100), [ALICE, BOT], DAY, None)
    spent = await backend.budgets.hold(caps, DAY, 1)
    assert isinstance(spent, Spent) and spent.spent == 1050
    # Another day starts from nothing.
    assert isinstance(await backend.budgets.hold(caps, "2026-12-05", 900), Hold)


async def test_the_spent_notice_is_given_once_a_day(backend: Backend) -> None:
    await backend.budgets.record(usage(10, 10), [ALICE], DAY, None)
    assert await backend.budgets.first_notice(ALICE, DAY)
    assert not await backend.budgets.first_notice(ALICE, DAY)
    await backend.budgets.record(usage(10, 10), [ALICE], "2026-12-05", None)
    assert await backend.budgets.first_notice(ALICE, "2026-12-05")


async def test_usage_is_grouped_and_ordered_by_tokens(backend: Backend) -> None:
    await backend.budgets.record(usage(100, 10), [BOT], DAY, None)
    await backend.budgets.record(usage(1000, 10, user="bob"), [BOT], DAY, None)
    lines = await backend.usage.usage(NOW - timedelta(days=1), "user")
    assert [(x.key, x.calls, x.tokens_in, x.tokens_out) for x in lines] == [
        ("telegram:bob", 1, 1000, 10),
        ("telegram:alice", 1, 100, 10),
    ]
    assert await backend.usage.usage(NOW + timedelta(seconds=1), "user") == []


# --- two workers (PostgreSQL) ----------------------------------------------------


@pytest.fixture
async def two_workers(postgres_url: str) -> AsyncIterator[tuple[str, list[Backend]]]:
    async with opened_backends(postgres_url, 2) as backends:
        yield postgres_url, backends


async def _locked_row(url: str, sql: str) -> psycopg.AsyncConnection:
    """Another worker in the middle of its decision: its transaction has
    written the row and not committed yet."""
    conn = await psycopg.AsyncConnection.connect(url)
    await conn.execute(sql)
    return conn


async def test_a_second_worker_waits_for_the_first_rate_decision(
    two_workers: tuple[str, list[Backend]],
) -> None:
    url, (first, second) = two_workers
    rule = [RateRule(ALICE, 1)]
    assert (await take(first, rule, NOW - timedelta(minutes=5))).allowed
    # Worker one has just counted alice's one message of this minute.
    tat = NOW + timedelta(minutes=1)
    conn = await _locked_row(
        url,
        f"UPDATE rate_windows SET tat = '{tat.isoformat()}' WHERE subject_id = 'alice'",
    )
    try:
        taking = asyncio.create_task(take(second, rule, NOW))
        await asyncio.sleep(0.2)
        assert not taking.done()  # it waits on the row instead of reading around it
        await conn.commit()
        verdict = await asyncio.wait_for(taking, 5)
    finally:
        await conn.close()
    assert not verdict.allowed


async def test_a_second_worker_sees_the_first_workers_hold(
    two_workers: tuple[str, list[Backend]],
) -> None:
    url, (first, second) = two_workers
    caps = [Cap(ALICE, 1000)]
    assert isinstance(await first.budgets.hold(caps, DAY, 1), Hold)
    conn = await _locked_row(
        url, "UPDATE token_budgets SET held = held + 5000 WHERE subject_id = 'alice'"
    )
    try:
        holding = asyncio.create_task(second.budgets.hold(caps, DAY, 10))
        await asyncio.sleep(0.2)
        assert not holding.done()
        await conn.commit()
        outcome = await asyncio.wait_for(holding, 5)
    finally:
        await conn.close()
    assert isinstance(outcome, Spent)


async def test_retention_drops_the_counters_no_rule_reads_any_more(backend: Backend) -> None:
    await backend.budgets.record(usage(10, 0), [ALICE], "2026-12-02", None)
    await backend.budgets.record(usage(10, 0), [ALICE], "2026-12-03", None)
    await take(backend, [RateRule(ALICE, 1)], NOW - timedelta(hours=2))
    await take(backend, [RateRule(GROUP, 1)], NOW)
    assert await backend.retention.prune_counters(NOW) == 2
    assert await backend.budgets.spent([ALICE], "2026-12-03") == {ALICE: 10}
    assert await backend.budgets.spent([ALICE], "2026-12-02") == {}
    # The group's window is live: still one message a minute.
    assert not (await take(backend, [RateRule(GROUP, 1)], NOW)).allowed
    assert (await take(backend, [RateRule(ALICE, 1)], NOW)).allowed


async def test_usage_records_go_with_the_messages_retention(backend: Backend) -> None:
    old = CallUsage(
        at=NOW - timedelta(days=400), agent_id="main", role="chat", model="m",
        platform="telegram", user_id="alice", chat_id="alice", shared=False, tokens_in=5,
        tokens_out=5, estimated=False,
    )  # fmt: skip
    await backend.budgets.record(old, [BOT], "2025-10-30", None)
    await backend.budgets.record(usage(1, 1), [BOT], DAY, None)
    assert await backend.retention.erase_batch("usage", NOW - timedelta(days=365), limit=10) == 1
    lines = await backend.usage.usage(NOW - timedelta(days=1000), "role")
    assert [(x.key, x.calls) for x in lines] == [("chat", 1)]
