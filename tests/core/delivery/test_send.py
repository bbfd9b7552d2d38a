from __future__ import annotations

from core.clock import TestClock
from core.delivery.send import deliver_once
from core.messages import Outbound, SendResult, Target


class ScriptedSender:
    def __init__(self, *results: SendResult) -> None:
        self.results = list(results)
        self.calls = 0

    async def send(self, outbound: Outbound) -> SendResult:
        self.calls += 1
        return self.results.pop(0)


OUT = Outbound(Target("telegram", "1"), "How did the interview go?")


async def test_rate_limited_then_sent_is_one_message_sent_late():
    clock = TestClock()
    sender = ScriptedSender(SendResult(error="429", retryable=True, retry_after=0), SendResult("9"))
    delivery = await deliver_once(sender, OUT, clock)
    assert delivery.outcome == "sent" and delivery.message_id == "9"
    assert sender.calls == 2 and delivery.attempts == 2


async def test_unknown_outcome_is_never_retried():
    sender = ScriptedSender(SendResult(error="timeout after send", unknown=True), SendResult("2"))
    delivery = await deliver_once(sender, OUT, TestClock())
    assert delivery.outcome == "unknown" and delivery.message_id is None
    assert sender.calls == 1


async def test_permanent_error_fails_at_once():
    sender = ScriptedSender(SendResult(error="Forbidden: bot was blocked by the user"))
    delivery = await deliver_once(sender, OUT, TestClock())
    assert delivery.outcome == "failed" and sender.calls == 1


async def test_retryable_errors_give_up_after_the_cap():
    sender = ScriptedSender(*[SendResult(error="502", retryable=True, retry_after=0)] * 5)
    delivery = await deliver_once(sender, OUT, TestClock(), max_attempts=3)
    assert delivery.outcome == "failed" and sender.calls == 3
