"""One extraction call, start to end: the prompt, the model, the strict
parser and the code rules — the single path both the extraction worker and
`kept eval extraction` take, so what the evaluation measures is what runs.

The model's errors (LLMError, TimeoutError from the caller's deadline) are
the caller's to handle: the worker pauses on some of them, the evaluation
counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from core.commitments.candidates import ExtractionAnswer, UnusableAnswer, parse_answer
from core.commitments.exchange import Exchange
from core.commitments.model import Commitment, NewCommitment, Scope
from core.commitments.prompt import build_messages
from core.commitments.rules import Rejection, evaluate
from core.llm import Completion, Model

TRUNCATED = "cut off at the output cap (finish_reason length; see llm.maxOutputTokens.extraction)"


@dataclass(frozen=True, slots=True)
class ExtractionOutcome:
    """What one call gave and what the rules made of it."""

    completion: Completion
    answer: ExtractionAnswer | None  # None: the text was not a usable answer
    unusable: str | None  # why not, when it was not
    accepted: list[NewCommitment] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    # The pending ids the answer closed, only ever ids the model was shown.
    resolved: list[str] = field(default_factory=list)


async def run_extraction(
    llm: Model,
    *,
    scope: Scope,
    exchanges: Sequence[Exchange],
    pending: Sequence[Commitment],
    now: datetime,
    timezone: str,
    heartbeat_seconds: float,
    created_at: Callable[[], datetime],
) -> ExtractionOutcome:
    """Ask the extraction model about `exchanges` and apply the rules.

    `now` is the time the model is told; `created_at` gives the time the
    record would be written, read after the call (a slow model's answer
    must not be due sooner than one heartbeat after it is stored)."""
    messages = build_messages(now=now, timezone=timezone, exchanges=exchanges, pending=pending)
    completion = await llm.complete("extraction", messages, tools=None)
    try:
        answer = parse_answer(completion.text)
    except UnusableAnswer as exc:
        # Unusable like any other (nothing of it is kept, it is counted and
        # logged the same); the reason names the cap, the likelier fix.
        # A cut answer that still parses was complete: JSON cannot be cut valid.
        why = f"{TRUNCATED}: {exc}" if completion.truncated else str(exc)
        return ExtractionOutcome(completion, None, why)
    accepted, rejected = evaluate(
        answer.candidates,
        scope=scope,
        exchanges=exchanges,
        now=now,
        created_at=created_at(),
        heartbeat_seconds=heartbeat_seconds,
        timezone=timezone,
    )
    shown = {c.id for c in pending}
    resolved = list(dict.fromkeys(i for i in answer.resolved if i in shown))
    return ExtractionOutcome(completion, answer, None, accepted, rejected, resolved)
