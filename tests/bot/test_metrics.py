"""The metrics port and its Prometheus recorder: what each event counts, the
scrape-time gauges read from the store (both backends), and the `http`
config section."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.metrics import MeteredSender, PrometheusMetrics
from core import metrics as core_metrics
from core.clock import TestClock
from core.commitments.model import NewCommitment, Scope
from core.config.model import ConfigError, KeptConfig, LlmConfig, validate_document
from core.llm import LLMClient, LLMError
from core.messages import Outbound, SendResult, Target
from tests.fakes.openai_server import FakeOpenAI, error, reply
from tests.support.followups import Followups

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def samples(metrics: PrometheusMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape, by name and labels."""
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: PrometheusMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


@pytest.fixture
def installed() -> Iterator[PrometheusMetrics]:
    metrics = PrometheusMetrics()
    core_metrics.install(metrics)
    yield metrics
    core_metrics.uninstall(metrics)


def test_without_a_recorder_every_call_is_a_no_op() -> None:
    assert core_metrics.recorder() is core_metrics.NO_METRICS
    core_metrics.recorder().message_in("telegram")  # nothing to see, nothing raised


def test_uninstall_leaves_a_later_recorder_in_place() -> None:
    first, second = PrometheusMetrics(), PrometheusMetrics()
    core_metrics.install(first)
    core_metrics.install(second)
    core_metrics.uninstall(first)
    assert core_metrics.recorder() is second
    core_metrics.uninstall(second)
    assert core_metrics.recorder() is core_metrics.NO_METRICS


def test_each_event_counts_under_its_labels(installed: PrometheusMetrics) -> None:
    rec = core_metrics.recorder()
    rec.message_in("telegram")
    rec.message_in("telegram")
    rec.message_out("discord")
    rec.turn_seconds("telegram", 0.3)
    rec.model_call("chat")
    rec.model_call("extraction", "timeout")
    rec.checkin("sent")
    rec.checkin("failed")
    rec.reminder_fired()
    rec.send_retry("telegram")
    rec.rate_limited("discord")
    rec.extraction_skipped(3)

    assert value(installed, "kept_messages_in_total", platform="telegram") == 2
    assert value(installed, "kept_messages_out_total", platform="discord") == 1
    assert value(installed, "kept_turn_seconds_bucket", platform="telegram", le="0.25") == 0
    assert value(installed, "kept_turn_seconds_bucket", platform="telegram", le="0.5") == 1
    assert value(installed, "kept_model_calls_total", role="chat") == 1
    assert value(installed, "kept_model_calls_total", role="extraction") == 1
    assert value(installed, "kept_model_errors_total", role="extraction", kind="timeout") == 1
    assert value(installed, "kept_model_errors_total", role="chat", kind="timeout") is None
    assert value(installed, "kept_checkins_total", outcome="sent") == 1
    assert value(installed, "kept_checkins_total", outcome="failed") == 1
    assert value(installed, "kept_reminders_fired_total") == 1
    assert value(installed, "kept_send_retries_total", platform="telegram") == 1
    assert value(installed, "kept_send_rate_limited_total", platform="discord") == 1
    assert value(installed, "kept_extraction_skipped_total") == 3


async def test_model_calls_and_errors_are_counted_per_role(installed: PrometheusMetrics) -> None:
    async with FakeOpenAI() as fake:
        config = LlmConfig(base_url=fake.base_url, max_retries=0)
        client = LLMClient(config, environ={"OPENAI_API_KEY": "sk-test"}, clock=TestClock())
        try:
            fake.push(reply("fine"), error(500), error(401))
            await client.complete("chat", [{"role": "user", "content": "hi"}])
            with pytest.raises(LLMError):
                await client.complete("extraction", [{"role": "user", "content": "hi"}])
            with pytest.raises(LLMError):
                await client.complete("heartbeat", [{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()

    for role in ("chat", "extraction", "heartbeat"):
        assert value(installed, "kept_model_calls_total", role=role) == 1
    assert value(installed, "kept_model_errors_total", role="chat", kind="server") is None
    assert value(installed, "kept_model_errors_total", role="extraction", kind="server") == 1
    assert value(installed, "kept_model_errors_total", role="heartbeat", kind="auth") == 1


class _Sender:
    def __init__(self, *results: SendResult) -> None:
        self._results = list(results)

    async def send(self, outbound: Outbound) -> SendResult:
        return self._results.pop(0)


async def test_only_messages_that_reached_the_platform_count_as_out(
    installed: PrometheusMetrics,
) -> None:
    sender = MeteredSender(_Sender(SendResult(message_id="1"), SendResult(error="forbidden")))
    outbound = Outbound(target=Target("telegram", "42"), text="hi")
    assert (await sender.send(outbound)).ok
    assert not (await sender.send(outbound)).ok
    assert value(installed, "kept_messages_out_total", platform="telegram") == 1


def _commitment(scope: Scope, key: str) -> NewCommitment:
    return NewCommitment(
        scope=scope,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason="user has an interview",
        suggested_text="How did it go?",
        dedupe_key=key,
        confidence=0.8,
        due_earliest=NOW + timedelta(hours=10),
        due_latest=NOW + timedelta(hours=20),
        due_timezone="UTC",
        source_message_id=1,
        created_at=NOW,
    )


async def test_commitments_by_status_are_read_from_the_store_at_scrape_time(
    followups: Followups,
) -> None:
    scope = Scope(
        "main", "agent:main:telegram:private:5", "telegram", "5", None, "ana", chat_kind="private"
    )
    await followups.ensure_session(scope.session_key, now=NOW)
    store = followups.commitments
    metrics = PrometheusMetrics()
    await metrics.refresh(store, None)
    assert value(metrics, "kept_commitments", status="pending") == 0

    applied = await store.apply_extraction(
        scope, [_commitment(scope, "a"), _commitment(scope, "b")], [], now=NOW
    )
    await store.dismiss(applied.created[0].id, now=NOW)
    assert await store.count_by_status() == {"pending": 1, "dismissed": 1}

    await metrics.refresh(store, None)
    assert value(metrics, "kept_commitments", status="pending") == 1
    assert value(metrics, "kept_commitments", status="dismissed") == 1
    assert value(metrics, "kept_commitments", status="sent") == 0


class _Stuck:
    async def count_by_status(self) -> dict[str, int]:
        raise OSError("database is locked")


class _Queue:
    queued = 7


async def test_a_store_that_fails_leaves_the_last_values_and_the_scrape_answers() -> None:
    metrics = PrometheusMetrics()
    await metrics.refresh(_Stuck(), _Queue())
    assert value(metrics, "kept_extraction_queue_depth") == 7
    assert value(metrics, "kept_commitments", status="pending") is None


def test_http_is_off_by_default_and_listen_is_host_and_port() -> None:
    assert KeptConfig().http.address() is None
    config = validate_document({"http": {"listen": "127.0.0.1:8080"}}, "kept.json")
    assert config.http.address() == ("127.0.0.1", 8080)
    assert validate_document({"http": {"listen": "[::1]:9"}}, "k").http.address() == ("::1", 9)


@pytest.mark.parametrize("listen", ["8080", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_bad_listen_address_is_one_line_naming_the_key(listen: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_document({"http": {"listen": listen}}, "kept.json")
    assert caught.value.problems == [
        f"kept.json: http.listen: expected host:port such as '127.0.0.1:8080' "
        f"(port 1-65535), got {listen!r}"
    ]
