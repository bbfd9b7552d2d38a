"""Scripted extraction answers for the evaluator's tests, served by FakeOpenAI.

Each request is tied back to its case by the latest exchange's user text
(the prompt sends the exchanges as JSON data), so concurrent calls get the
right answer whatever order they arrive in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from core.evaluation.cases import Case, Range
from tests.fakes.openai_server import Behaviour, json_body, last_user_text

# What every scripted call reports, unless a script says otherwise.
TOKENS_IN = 1000
TOKENS_OUT = 100

EMPTY = json.dumps({"candidates": [], "resolved": []})


def midpoint(span: Range) -> datetime:
    return span.lo + (span.hi - span.lo) / 2


def candidate(
    kind: str,
    earliest: datetime,
    latest: datetime | None = None,
    *,
    sensitivity: str = "routine",
    key: str,
    reason: str = "scripted follow-up",
    confidence: float = 0.95,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "sensitivity": sensitivity,
        "source": "inferred_user_context",
        "dueWindow": {
            "earliest": earliest.isoformat(),
            "latest": latest.isoformat() if latest is not None else None,
        },
        "reason": reason,
        "suggestedText": "How did it go?",
        "confidence": confidence,
        "dedupeKey": key,
    }


def perfect_candidates(case: Case) -> list[dict[str, Any]]:
    """The expected follow-ups, each window at the middle of its ranges."""
    return [
        candidate(
            e.kind,
            midpoint(e.earliest),
            midpoint(e.latest) if e.latest is not None else None,
            sensitivity=e.sensitivity,
            key=f"followup:{n}",
        )
        for n, e in enumerate(case.expect.candidates)
    ]


def answer(candidates: Sequence[dict[str, Any]], resolved: Sequence[str] = ()) -> str:
    return json.dumps({"candidates": list(candidates), "resolved": list(resolved)})


def perfect(case: Case) -> str:
    return answer(perfect_candidates(case), case.expect.resolved)


def completion(
    text: str, usage: tuple[int, int] | None = (TOKENS_IN, TOKENS_OUT), model: str = "fake-model"
) -> Behaviour:
    """A chat completion with exactly this usage (None: the server reports none)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-eval",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return json_body(body)


Script = Callable[[Case], Behaviour | str]


def case_of(cases: Sequence[Case], body: Any) -> Case:
    data = json.loads(last_user_text(body) or "{}")
    latest = data["exchanges"][-1]["user"]
    for case in cases:
        if case.exchanges[-1].user.strip() == latest:
            return case
    raise AssertionError(f"no case has the exchange {latest!r}")


def responder(
    cases: Sequence[Case], script: Script | Mapping[str, Behaviour | str], default: Script = perfect
) -> Callable[[Any], Behaviour]:
    """A FakeOpenAI default answering each case by `script` (a function, or
    answers by case id with `default` for the rest); strings get the usual usage."""

    def answer_for(body: Any) -> Behaviour:
        case = case_of(cases, body)
        if isinstance(script, Mapping):
            out = script[case.id] if case.id in script else default(case)
        else:
            out = script(case)
        return completion(out) if isinstance(out, str) else out

    return answer_for
