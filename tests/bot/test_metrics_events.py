"""Each place that records an event records it once, where it happens:
check-ins sent or failed, reminders fired, delivery retries, Telegram's
flood control and retries, Discord's 429s (the recorder installed as
`kept run` installs it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import discord
import pytest
from telegram.error import RetryAfter

from bot.metrics import PrometheusMetrics
from channels.discord.errors import send_failure
from channels.telegram.pace import PacedSends
from core import metrics as core_metrics
from core.clock import TestClock
from core.messages import SendResult
from core.store import Store
from tests.bot.test_metrics import value
from tests.core.reminders.test_service import make_harness as reminder_harness
from tests.support.heartbeat_harness import Harness, make_harness
from tests.support.scripted_model import text


@pytest.fixture
def installed() -> Iterator[PrometheusMetrics]:
    metrics = PrometheusMetrics()
    core_metrics.install(metrics)
    yield metrics
    core_metrics.uninstall(metrics)


@pytest.fixture
async def hb(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await make_harness(tmp_path)
    yield harness
    await harness.store.close()


async def test_a_check_in_counts_as_sent_after_a_retried_delivery(
    hb: Harness, installed: PrometheusMetrics
) -> None:
    await hb.seed()
    hb.model.steps.append(text("How did it go?"))
    hb.sender.results = [SendResult(error="refused", retryable=True, retry_after=0)]
    await hb.scheduler().tick()
    assert len(hb.sender.sent) == 1
    assert value(installed, "kept_checkins_total", outcome="sent") == 1
    assert value(installed, "kept_checkins_total", outcome="failed") is None
    assert value(installed, "kept_send_retries_total", platform="telegram") == 1


async def test_a_check_in_the_platform_refused_counts_as_failed(
    hb: Harness, installed: PrometheusMetrics
) -> None:
    await hb.seed()
    hb.model.steps.append(text("How did it go?"))
    hb.sender.results = [SendResult(error="forbidden: blocked by the user")]
    await hb.scheduler().tick()
    assert value(installed, "kept_checkins_total", outcome="failed") == 1
    assert value(installed, "kept_checkins_total", outcome="sent") is None
    assert value(installed, "kept_send_retries_total", platform="telegram") is None


async def test_a_fired_reminder_is_counted_once(
    any_store: Store, clock: TestClock, installed: PrometheusMetrics
) -> None:
    h = await reminder_harness(any_store, clock)
    await h.add(after="20m")
    await clock.advance(20 * 60)
    assert await h.source.fire_due() == 1
    assert await h.source.fire_due() == 0
    assert value(installed, "kept_reminders_fired_total") == 1


async def test_telegram_flood_control_counts_a_429_and_its_retry(
    clock: TestClock, installed: PrometheusMetrics
) -> None:
    # Telegram asks for no wait at all: the retry follows at once.
    answers: list[Exception | bool] = [RetryAfter(0), True]

    async def call() -> bool:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    paced = PacedSends()  # the pace waits out a 429 and sends again
    assert await paced.process_request(call, (), {}, "sendMessage", {"chat_id": 1}, None)
    assert answers == []
    assert value(installed, "kept_send_rate_limited_total", platform="telegram") == 1
    assert value(installed, "kept_send_retries_total", platform="telegram") == 1


def test_a_discord_429_is_counted(installed: PrometheusMetrics) -> None:
    assert send_failure(discord.RateLimited(3.0)).retryable
    assert value(installed, "kept_send_rate_limited_total", platform="discord") == 1
