"""An extraction answer cut at the output cap (finish_reason "length"): when
its text is not valid JSON it is an invalid answer like any other — nothing
stored, logged as `extraction_unusable`, counted by the evaluation — and its
reason names the cap. The real LLMClient against FakeOpenAI, the batch on
both backends."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from core.clock import TestClock
from core.commitments.batch import BatchExtractor
from core.commitments.exchange import Exchange
from core.commitments.extraction_call import TRUNCATED, run_extraction
from core.commitments.jobs import ExtractionJob
from core.commitments.pause import Pauses
from core.commitments.store import Filter
from core.config.model import LlmConfig
from core.evaluation.cases import load_cases
from core.evaluation.metrics import metrics
from core.evaluation.runner import RunSettings, run_cases
from core.llm import LLMClient
from core.store.backends import Backend, open_backend
from tests.core.commitments.test_extraction import (
    LOG,
    PARIS,
    SCOPE_42,
    START,
    answer,
    interview,
    make_config,
)
from tests.fakes.openai_server import FakeOpenAI, reply
from tests.support.eval_scripts import responder

CUT = answer(interview())[:80]  # the answer as a model stopped at its cap wrote it
INTERVIEW = Exchange(7, "I have a job interview tomorrow afternoon", "Good luck!")
FIXTURES = Path(__file__).parents[1] / "evaluation" / "fixtures"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    client = LLMClient(LlmConfig(base_url=fake.base_url, max_retries=0), environ={})
    yield client
    await client.aclose()


async def extract(llm: LLMClient) -> tuple[str | None, int]:
    """One extraction call: why its answer was unusable (None: usable), and what it accepted."""
    outcome = await run_extraction(
        llm,
        scope=SCOPE_42,
        exchanges=[INTERVIEW],
        pending=[],
        now=START,
        timezone="Europe/Paris",
        heartbeat_seconds=1800,
        created_at=lambda: START,
    )
    assert (outcome.answer is None) == (outcome.unusable is not None)
    return outcome.unusable, len(outcome.accepted)


async def test_a_cut_answer_is_unusable_and_says_it_was_cut(
    fake: FakeOpenAI, llm: LLMClient
) -> None:
    fake.push(reply(CUT, finish_reason="length", usage=(900, 512)))
    why, accepted = await extract(llm)
    assert why is not None and why.startswith(TRUNCATED) and "not valid JSON" in why
    assert accepted == 0
    assert fake.last.max_tokens == 512  # llm.maxOutputTokens.extraction's default
    # The same text, not cut: unusable too, without the cap in the reason.
    fake.push(reply(CUT))
    why, _ = await extract(llm)
    assert why is not None and why.startswith("not valid JSON")
    # Cut only after the JSON closed (a fence, then prose): the answer is whole, and used.
    fence = f"```json\n{answer(interview())}\n```\nI chose this because the user"
    fake.push(reply(fence, finish_reason="length"))
    assert await extract(llm) == (None, 1)


async def test_the_evaluation_counts_a_cut_answer_as_invalid(fake: FakeOpenAI) -> None:
    cases = load_cases(FIXTURES)
    cut = {"en-interview": reply(CUT, finish_reason="length", usage=(1000, 512))}
    fake.set_default(responder(cases, cut))
    llm = LLMClient(LlmConfig(base_url=fake.base_url, max_retries=0), environ={})
    try:
        settings = RunSettings(heartbeat_seconds=1800, call_deadline=10, concurrency=3)
        results = await run_cases(llm, cases, settings)
    finally:
        await llm.aclose()
    m = metrics(results, price_in=0.4, price_out=1.6)
    assert (m.unusable, m.calls) == (1, len(cases))
    [bad] = [r for r in results if r.unusable is not None]
    assert bad.id == "en-interview" and bad.unusable.startswith(TRUNCATED)


@pytest.fixture
async def backend(storage_url: str) -> AsyncIterator[Backend]:
    async with open_backend(storage_url) as opened:
        yield opened


async def test_a_cut_answer_stores_nothing_and_is_logged_as_unusable(
    fake: FakeOpenAI, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOG)
    clock = TestClock(START)
    config = make_config(fake.base_url, enabled=True, every="30m")
    llm = LLMClient(config.llm, environ={}, clock=clock)
    extractor = BatchExtractor(
        store=backend.commitments,
        llm=llm,
        config=lambda: config,
        clock=clock,
        pauses=Pauses(backend.extraction_pauses, clock, timedelta(minutes=10)),
        exchanges_per_call=4,
        backlog_exchanges_per_call=8,
        concurrency=1,
        on_stored=None,
    )
    job = ExtractionJob(1, SCOPE_42, INTERVIEW)
    try:
        fake.push(reply(CUT, finish_reason="length"))
        await extractor.process("main", [job])
        assert extractor.requests == 1 and fake.last.model == "extract-model"
        assert await backend.commitments.list(Filter()) == []
        [line] = [r.getMessage() for r in caplog.records if "extraction_unusable" in r.getMessage()]
        assert TRUNCATED in line and "not valid JSON" in line
        # An answer at the cap is the model's, not the endpoint's fault: no pause.
        assert await backend.extraction_pauses.paused_until("main") is None

        # The positive control: the whole answer, on the same path, is stored.
        fake.push(reply(answer(interview())))
        await extractor.process("main", [ExtractionJob(2, SCOPE_42, INTERVIEW)])
        [stored] = await backend.commitments.list(Filter())
        assert stored.scope == SCOPE_42 and stored.due_timezone == str(PARIS)
        assert caplog.text.count("extraction_unusable") == 1
    finally:
        await llm.aclose()
