"""The extraction prompt's examples never come from the evaluation set: a model
shown a case's own words in its instructions would be measured on what it
was given, not on what it understood."""

from __future__ import annotations

import re

from core.commitments.prompt import SYSTEM_PROMPT
from core.commitments.text import fold
from core.evaluation.cases import Case, labelled_set, load_cases

SET = labelled_set()
SHINGLE = 5  # words in a row that would make a case's sentence the prompt's


def _texts(case: Case) -> list[str]:
    texts = [t for e in case.exchanges for t in (e.user, e.assistant)]
    texts += [c.note for c in case.expect.candidates]
    texts += [p.reason for p in case.pending] + [p.dedupe_key for p in case.pending]
    return [fold(t) for t in texts]


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text)
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def test_the_labelled_set_is_there() -> None:
    cases = load_cases(SET)
    assert len(cases) >= 300
    assert all(sum(c.lang == lang for c in cases) >= 20 for lang in {c.lang for c in cases})
    assert len({c.lang for c in cases}) == 10


def test_no_example_of_the_prompt_appears_in_a_case() -> None:
    # Every quoted example of the prompt: "remind me at 3 pm", the JSON
    # example's reason, suggested text and dedupe key, and so on.
    # Single words are the answer's keys and values ("reason", "routine"), not examples.
    quoted = re.findall(r'"([^"]{6,})"', SYSTEM_PROMPT)
    examples = {fold(q) for q in quoted if " " in q or ":" in q}
    examples -= {fold(k) for k in ("event_check_in", "inferred_user_context")}
    assert any("remind me at 3 pm" in e for e in examples)  # the parse found the examples
    found = [
        (case.id, example)
        for case in load_cases(SET)
        for text in _texts(case)
        for example in examples
        if example in text
    ]
    assert found == []


def test_no_sentence_of_a_case_appears_in_the_prompt() -> None:
    prompt = _shingles(fold(SYSTEM_PROMPT))
    shared = [
        (case.id, " ".join(s))
        for case in load_cases(SET)
        for text in _texts(case)
        for s in _shingles(text) & prompt
    ]
    assert shared == []
    # The comparison has words on both sides, and finds a sentence the prompt has.
    assert len(prompt) > 100
    assert sum(len(_shingles(text)) for case in load_cases(SET) for text in _texts(case)) > 1000
    planted = fold("As I said, " + SYSTEM_PROMPT[:400])
    assert _shingles(planted) & prompt
