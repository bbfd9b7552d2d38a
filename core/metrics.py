"""Counting what the process does, for an operator's dashboard: the port.

core and channels record events through `recorder()`, one line at the place
that already logs them; what records them is chosen by the application
(bot/metrics.py: Prometheus, installed while `http.listen` is set). Until one
is installed every call is a no-op, so core never depends on a metrics
library and a test that does not look at metrics pays nothing.

A process-wide recorder rather than a constructor argument: the events
happen in module-level helpers as well as in services (Telegram's
`send_once`, Discord's `send_failure`), and a count is no guarantee that
any behaviour rests on.
"""

from __future__ import annotations

from typing import Literal, Protocol

CheckinOutcome = Literal["sent", "failed"]
TokenDirection = Literal["in", "out"]
# What stopped a message or a model call (core/limits/): a rate per minute or
# a token budget per day, of a user, a shared chat or the whole bot; or a
# reminder refused (too many waiting, or repeating too often).
Limit = Literal[
    "user_rate",
    "chat_rate",
    "user_tokens",
    "chat_tokens",
    "bot_tokens",
    "user_reminders",
    "reminder_interval",
]


class Metrics(Protocol):
    def message_in(self, platform: str) -> None:
        """A user's message was stored for a turn (duplicates are not counted)."""

    def message_out(self, platform: str) -> None:
        """A message the bot sent reached the platform."""

    def turn_seconds(self, platform: str, seconds: float) -> None:
        """One conversation turn took `seconds`, from the stored message to the sent reply."""

    def model_call(self, role: str, error: str | None = None) -> None:
        """One model call of `role` ended; `error` is the LLMError kind when it failed."""

    def checkin(self, outcome: CheckinOutcome) -> None:
        """A heartbeat check-in was sent, or failed for good."""

    def reminder_fired(self) -> None:
        """A reminder was delivered."""

    def send_retry(self, platform: str) -> None:
        """A send was tried again after a failure the platform certainly did not accept."""

    def rate_limited(self, platform: str) -> None:
        """The platform answered a send with 429 (flood control)."""

    def extraction_skipped(self, exchanges: int) -> None:
        """The pre-filter kept `exchanges` without a cue from the extraction model."""

    def message_refused(self, platform: str) -> None:
        """The store refused a user's message for good (a value it can never take)."""

    def update_parked(self, platform: str) -> None:
        """An update that kept failing while others were stored was parked."""

    def retention_erased(self, kind: str, rows: int) -> None:
        """A retention batch erased `rows` rows of `kind` (core/privacy/retention.py)."""

    def model_tokens(self, role: str, direction: TokenDirection, tokens: int) -> None:
        """A model call of `role` used `tokens` in (prompt) or out (completion)."""

    def over_limit(self, limit: Limit) -> None:
        """A message was not answered, or a model call not made, because of `limit`."""


class NoMetrics:
    """The default: records nothing."""

    def message_in(self, platform: str) -> None:
        pass

    def message_out(self, platform: str) -> None:
        pass

    def turn_seconds(self, platform: str, seconds: float) -> None:
        pass

    def model_call(self, role: str, error: str | None = None) -> None:
        pass

    def checkin(self, outcome: CheckinOutcome) -> None:
        pass

    def reminder_fired(self) -> None:
        pass

    def send_retry(self, platform: str) -> None:
        pass

    def rate_limited(self, platform: str) -> None:
        pass

    def extraction_skipped(self, exchanges: int) -> None:
        pass

    def message_refused(self, platform: str) -> None:
        pass

    def update_parked(self, platform: str) -> None:
        pass

    def retention_erased(self, kind: str, rows: int) -> None:
        pass

    def model_tokens(self, role: str, direction: TokenDirection, tokens: int) -> None:
        pass

    def over_limit(self, limit: Limit) -> None:
        pass


NO_METRICS = NoMetrics()
_current: Metrics = NO_METRICS


def recorder() -> Metrics:
    """The installed recorder (a no-op one when none is)."""
    return _current


def install(metrics: Metrics) -> None:
    """Record into `metrics` from now on (bot.runtime, while it runs)."""
    global _current
    _current = metrics


def uninstall(metrics: Metrics) -> None:
    """Back to the no-op recorder, if `metrics` is still the installed one
    (a later runtime in the same process may have installed its own)."""
    global _current
    if _current is metrics:
        _current = NO_METRICS
