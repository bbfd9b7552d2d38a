"""The runner's bound, deadline and synthetic scope, with an in-process model
(every call reaches the model on the loop's first turns, so the count of
calls in flight is exact, not a race)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from core.evaluation.cases import load_cases
from core.evaluation.runner import RunSettings, run_cases, scope_of
from core.llm import Completion, Role

FIXTURES = Path(__file__).parent / "fixtures"
EMPTY = '{"candidates": [], "resolved": []}'


class GatedModel:
    """Answers nothing until `gate` is set; counts the calls waiting on it."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most = 0
        self.prompts: list[dict[str, Any]] = []

    async def complete(
        self,
        role: Role,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        self.prompts.append(json.loads(messages[-1]["content"]))
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        return Completion(EMPTY, [], "stop", "m")


async def test_no_more_calls_in_flight_than_the_bound() -> None:
    cases = load_cases(FIXTURES)
    model = GatedModel()
    run = asyncio.create_task(
        run_cases(
            model, cases, RunSettings(heartbeat_seconds=1800, call_deadline=10, concurrency=3)
        )
    )
    for _ in range(50):  # far more turns than ten calls need to reach the model
        await asyncio.sleep(0)
    assert model.in_flight == 3
    model.gate.set()
    results = await run
    assert (model.most, len(results), len(model.prompts)) == (3, 10, 10)


async def test_a_call_past_its_deadline_is_that_case_s_error() -> None:
    cases = load_cases(FIXTURES)[:2]
    model = GatedModel()  # never opened
    results = await run_cases(
        model, cases, RunSettings(heartbeat_seconds=1800, call_deadline=0.05, concurrency=2)
    )
    assert [r.error for r in results] == ["TimeoutError: no answer within 0.05s"] * 2
    assert [r.false_negatives for r in results] == [len(c.expect.candidates) for c in cases]


async def test_each_case_is_its_own_synthetic_scope_with_its_pending_items() -> None:
    cases = {c.id: c for c in load_cases(FIXTURES)}
    group, resolves = cases["de-group"], cases["en-resolves"]
    assert scope_of(group).session_key == "agent:eval:eval:group:de-group"
    assert (scope_of(group).agent_id, scope_of(group).sender_id) == ("eval", "user")
    model = GatedModel()
    model.gate.set()
    await run_cases(model, [resolves], RunSettings(1800, 10))
    sent = model.prompts[0]
    assert [p["id"] for p in sent["pending"]] == ["cm_interview0001"]
    assert sent["now"] == "2026-03-10T17:00-04:00"
    assert sent["exchanges"][0]["user"] == resolves.exchanges[0].user
