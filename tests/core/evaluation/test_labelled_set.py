"""The labels agree with the rules: a model answering exactly what the
labelled set (core/evaluation/data/extraction) expects — each window at the middle of
its ranges, confidence 0.95 — scores perfectly through the real extraction call. A
label the rules can never meet (a window they clamp away, a group follow-up
they refuse, a mixed case whose follow-up they drop) fails here."""

from __future__ import annotations

from core.commitments.exchange import Exchange
from core.commitments.prefilter import worth_extracting
from core.config.model import CommitmentsConfig, KeptConfig, LlmConfig
from core.evaluation.cases import labelled_set, load_cases
from core.evaluation.metrics import metrics
from core.evaluation.runner import RunSettings, run_cases
from core.llm import LLMClient
from tests.fakes.openai_server import FakeOpenAI
from tests.support.eval_scripts import responder

LABELLED_SET = labelled_set()


async def test_a_perfect_answer_to_every_labelled_case_scores_perfectly() -> None:
    files = [f for f in LABELLED_SET.iterdir() if f.name.endswith(".jsonl")]
    assert files, f"{LABELLED_SET} has no .jsonl case files (the labelled set lands there)"
    cases = load_cases(LABELLED_SET)
    # The worker's own heartbeat lead and deadline, from the default config.
    settings = RunSettings.from_config(KeptConfig(), concurrency=8)
    async with FakeOpenAI() as fake:
        fake.set_default(responder(cases, {}))
        llm = LLMClient(LlmConfig(base_url=fake.base_url, max_retries=0), environ={})
        try:
            results = await run_cases(llm, cases, settings)
        finally:
            await llm.aclose()
    m = metrics(results)
    wrong = [(w.id, w.score, w.problem) for w in m.worst]
    assert wrong == [], "labels the rules cannot meet (see the worst cases)"
    assert (m.overall.precision, m.overall.recall) == (1.0, 1.0)
    assert (m.kind_accuracy, m.sensitivity_accuracy, m.window_hit_rate) == (1.0, 1.0, 1.0)
    assert m.resolved_accuracy == 1.0
    assert (m.unusable, m.errors) == (0, 0)


def test_the_pre_filter_is_on_by_default_only_while_it_loses_at_most_2_percent() -> None:
    # Measurable without a model: the labelled positives (expected follow-ups
    # and resolved ids) of the cases the pre-filter would not send.
    cases = load_cases(LABELLED_SET)
    positives = lost = 0
    for case in cases:
        count = len(case.expect.candidates) + len(case.expect.resolved)
        exchanges = [Exchange(n, e.user, e.assistant) for n, e in enumerate(case.exchanges)]
        positives += count
        if not worth_extracting(exchanges, pending=bool(case.pending)):
            lost += count
    assert positives >= 200
    assert CommitmentsConfig().prefilter is (lost / positives <= 0.02)
