"""Prometheus metrics: core's recorder port (core/metrics.py) on prometheus-client.

Counters and the latency histogram are fed as things happen; the two
gauges that describe state (commitments by status, the extraction queue)
are read when Prometheus scrapes (`refresh`), so they cost nothing between
scrapes and are never stale by more than one scrape.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    exposition,
    generate_latest,
)

from core.commitments.model import STATUSES
from core.logs import event
from core.messages import Outbound, Sender, SendResult
from core.metrics import CheckinOutcome, Limit, TokenDirection, recorder

log = logging.getLogger("kept.metrics")

CONTENT_TYPE = exposition.CONTENT_TYPE_LATEST
# A turn waits on the model: seconds, up to its timeout and retries.
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
# A scrape must answer even when the database is stuck.
STORE_READ_TIMEOUT = 2.0


class StatusCounts(Protocol):
    async def count_by_status(self) -> dict[str, int]: ...


class QueueDepth(Protocol):
    @property
    def queued(self) -> int: ...


class PrometheusMetrics:
    """One registry per runtime (not prometheus-client's global one), so
    tests and a second runtime in one process start from zero."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._in = Counter(
            "kept_messages_in", "User messages stored for a turn", ["platform"], registry=r
        )
        self._out = Counter(
            "kept_messages_out", "Messages the bot sent (replies, check-ins, reminders)",
            ["platform"], registry=r,
        )  # fmt: skip
        self._turn = Histogram(
            "kept_turn_seconds", "One conversation turn, from the stored message to the sent reply",
            ["platform"], buckets=TURN_BUCKETS, registry=r,
        )  # fmt: skip
        self._calls = Counter("kept_model_calls", "Model calls", ["role"], registry=r)
        self._errors = Counter(
            "kept_model_errors", "Model calls that failed, by error kind", ["role", "kind"],
            registry=r,
        )  # fmt: skip
        self._checkins = Counter(
            "kept_checkins", "Heartbeat check-ins by outcome", ["outcome"], registry=r
        )
        self._reminders = Counter("kept_reminders_fired", "Reminders delivered", registry=r)
        self._skipped = Counter(
            "kept_extraction_skipped",
            "Exchanges the pre-filter kept from the extraction model (no time, event, "
            "wellbeing or promise cue)",
            registry=r,
        )
        self._retries = Counter(
            "kept_send_retries", "Sends tried again (certainly not delivered before)",
            ["platform"], registry=r,
        )  # fmt: skip
        self._limited = Counter(
            "kept_send_rate_limited", "429 answers (flood control) to a send", ["platform"],
            registry=r,
        )  # fmt: skip
        self._refused = Counter(
            "kept_messages_refused", "User messages the store can never take (confirmed, "
            "the sender told)", ["platform"], registry=r,
        )  # fmt: skip
        self._parked = Counter(
            "kept_updates_parked", "Updates parked after failing while others were stored "
            "(see `kept doctor`, `kept updates retry`)", ["platform"], registry=r,
        )  # fmt: skip
        self._commitments = Gauge(
            "kept_commitments", "Commitments by status (read at scrape time)", ["status"],
            registry=r,
        )  # fmt: skip
        self._queue = Gauge(
            "kept_extraction_queue_depth", "Replies waiting for commitment extraction in this "
            "process", registry=r,
        )  # fmt: skip
        self._retention = Counter(
            "kept_retention_erased", "Rows erased by retention (storage.retention), by kind",
            ["kind"], registry=r,
        )  # fmt: skip
        self._tokens = Counter(
            "kept_model_tokens", "Model tokens by role and direction (in: prompt, out: "
            "completion; estimated where the endpoint gave no usage)", ["role", "direction"],
            registry=r,
        )  # fmt: skip
        self._over = Counter(
            "kept_limited", "Messages not answered and model calls not made, by the limit "
            "that stopped them (see `kept doctor`, `limits` in the config)", ["limit"],
            registry=r,
        )  # fmt: skip

    # --- core.metrics.Metrics ------------------------------------------------

    def message_in(self, platform: str) -> None:
        self._in.labels(platform).inc()

    def message_out(self, platform: str) -> None:
        self._out.labels(platform).inc()

    def turn_seconds(self, platform: str, seconds: float) -> None:
        self._turn.labels(platform).observe(seconds)

    def model_call(self, role: str, error: str | None = None) -> None:
        self._calls.labels(role).inc()
        if error is not None:
            self._errors.labels(role, error).inc()

    def checkin(self, outcome: CheckinOutcome) -> None:
        self._checkins.labels(outcome).inc()

    def reminder_fired(self) -> None:
        self._reminders.inc()

    def send_retry(self, platform: str) -> None:
        self._retries.labels(platform).inc()

    def rate_limited(self, platform: str) -> None:
        self._limited.labels(platform).inc()

    def extraction_skipped(self, exchanges: int) -> None:
        self._skipped.inc(exchanges)

    def message_refused(self, platform: str) -> None:
        self._refused.labels(platform).inc()

    def update_parked(self, platform: str) -> None:
        self._parked.labels(platform).inc()

    def retention_erased(self, kind: str, rows: int) -> None:
        self._retention.labels(kind).inc(rows)

    def model_tokens(self, role: str, direction: TokenDirection, tokens: int) -> None:
        self._tokens.labels(role, direction).inc(tokens)

    def over_limit(self, limit: Limit) -> None:
        self._over.labels(limit).inc()

    # --- scrape time -----------------------------------------------------------

    async def refresh(
        self, commitments: StatusCounts | None, extraction: QueueDepth | None
    ) -> None:
        """Read the gauges' values now. A store that does not answer in time
        leaves the last values (the scrape still answers) and logs why."""
        if extraction is not None:
            self._queue.set(extraction.queued)
        if commitments is None:
            return
        try:
            async with asyncio.timeout(STORE_READ_TIMEOUT):
                counts = await commitments.count_by_status()
        except Exception as exc:
            event(
                log,
                logging.WARNING,
                "metrics_store_read_failed",
                error=repr(exc),
                action="check the database; kept_commitments keeps its last values",
            )
            return
        for status in sorted({*STATUSES, *counts}):
            self._commitments.labels(status).set(counts.get(status, 0))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MeteredSender:
    """The runtime's Sender, counting each message that reached its platform."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender

    async def send(self, outbound: Outbound) -> SendResult:
        result = await self._sender.send(outbound)
        if result.ok:
            recorder().message_out(outbound.target.platform)
        return result
