"""`kept eval extraction | compare | cases` through click's CliRunner, the
run against FakeOpenAI over loopback (the command runs its own event loop,
so it is invoked in a worker thread while the fake serves on the test's).

Figures here use answers whose outcome does not hinge on the extraction
rules (empty answers; perfect answers for the French cases); the exact
figures of every scripted run are in tests/core/evaluation."""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from bot.eval_cmd import _write_run
from core.evaluation.cases import load_cases
from tests.fakes.openai_server import FakeOpenAI, error
from tests.support.eval_scripts import EMPTY, responder

FIXTURES = Path(__file__).resolve().parents[1] / "core" / "evaluation" / "fixtures"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The command sets up logging for its process (root level, handlers);
    later tests in this process capture logs with the defaults."""
    names = ("", "httpx", "httpx2", "openai", "aiosqlite", "discord", "telegram")
    saved = {n: logging.getLogger(n).level for n in names}
    handlers = logging.getLogger().handlers[:]
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger().handlers[:] = handlers


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
def config(tmp_path: Path, fake: FakeOpenAI) -> Path:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"llm": {"baseUrl": fake.base_url, "maxRetries": 0}}))
    return path


async def run_eval(config: Path, *args: str) -> Result:
    return await asyncio.to_thread(
        invoke, "eval", "extraction", "--config", str(config), "--cases", str(FIXTURES), *args
    )


async def test_json_report_of_an_empty_run(fake: FakeOpenAI, config: Path) -> None:
    cases = load_cases(FIXTURES)
    fake.set_default(responder(cases, lambda case: EMPTY))
    result = await run_eval(config, "--json", "--price-in", "0.4", "--price-out", "1.6")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["model"] == "gpt-4.1-mini"
    assert {k: v["cases"] for k, v in doc["composition"].items()} == {"en": 5, "fr": 3, "de": 2}
    m = doc["metrics"]
    assert m["cases"] == 10
    assert m["overall"] == {
        "truePositives": 0,
        "falsePositives": 0,
        "falseNegatives": 8,
        "precision": None,
        "recall": 0.0,
        "f1": None,
    }
    assert m["kindAccuracy"] is None and m["resolvedAccuracy"] == 0.0
    assert (m["tokens"]["tokensIn"], m["tokens"]["tokensOut"]) == (10000, 1000)
    assert m["tokens"]["costPer100"] == pytest.approx(0.056, abs=1e-15)
    assert m["prefilter"]["recallLost"] == 1 / 9
    assert m["prefilter"]["onByDefault"] is False
    assert len(m["worst"]) == 8
    assert len(fake.completions) == 10


async def test_text_report_names_every_block(fake: FakeOpenAI, config: Path) -> None:
    cases = load_cases(FIXTURES)
    fake.set_default(responder(cases, lambda case: EMPTY))
    result = await run_eval(config, "--lang", "de")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 cases: de 2" in out
    for heading in ("precision", "per language", "per kind", "recall lost", "worst cases"):
        assert heading in out
    assert "only if recall lost ≤ 2 %" in out
    assert "de-group" in out  # the one worst case, its follow-up missed


async def test_model_override_and_every_call_failing_still_exit_0(
    fake: FakeOpenAI, config: Path
) -> None:
    fake.set_default(error(400))
    result = await run_eval(config, "--model", "cheap-model", "--limit", "3", "--json")
    assert result.exit_code == 0, result.output
    assert {r.model for r in fake.completions} == {"cheap-model"}
    doc = json.loads(result.stdout)
    assert (doc["model"], doc["metrics"]["errors"]) == ("cheap-model", 3)
    assert "the model failed on all 3 cases" in result.stderr
    written = json.loads(await asyncio.to_thread(config.read_text))
    assert written["llm"].get("models") is None  # the file untouched


async def test_save_two_runs_and_compare_them(
    fake: FakeOpenAI, config: Path, tmp_path: Path
) -> None:
    cases = load_cases(FIXTURES)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    fake.set_default(responder(cases, lambda case: EMPTY))
    first = await run_eval(config, "--lang", "fr", "--save", str(a), "--model", "small")
    fake.set_default(responder(cases, {}))
    second = await run_eval(config, "--lang", "fr", "--save", str(b), "--model", "big")
    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    saved = json.loads(b.read_text())
    assert saved["model"] == "big" and len(saved["results"]) == 3
    assert all(r["rawAnswer"] for r in saved["results"])  # the raw answers are kept

    result = invoke("eval", "compare", str(a), str(b), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["aModel"], doc["bModel"], doc["cases"]) == ("small", "big", 3)
    assert doc["onlyARight"] == []
    assert doc["onlyBRight"] == ["fr-care", "fr-deadline", "fr-two"]
    recall = next(f for f in doc["figures"] if f["name"] == "recall")
    assert (recall["a"], recall["b"], recall["difference"]) == (0.0, 1.0, 1.0)
    text = invoke("eval", "compare", str(a), str(b))
    assert "right only in B (3): fr-care, fr-deadline, fr-two" in text.stdout


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kept: "), result.stderr
    return lines[0]


def test_a_bad_lang_lists_the_languages() -> None:
    line = one_line_error(invoke("eval", "extraction", "--lang", "it", "--cases", str(FIXTURES)))
    assert "en, fr, fa, th, tr, es, de, ar, ja, zh" in line


def test_a_missing_case_set_names_the_option(tmp_path: Path) -> None:
    line = one_line_error(invoke("eval", "extraction", "--cases", str(tmp_path / "nope")))
    assert "--cases" in line
    assert "--cases" in one_line_error(invoke("eval", "cases", "--cases", str(tmp_path)))


def test_compare_refuses_a_file_that_is_not_a_saved_run(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"commitments": []}')
    line = one_line_error(invoke("eval", "compare", str(other), str(other)))
    assert "is not a saved run" in line
    assert "cannot read" in one_line_error(invoke("eval", "compare", str(tmp_path / "x"), "y"))


def test_one_price_without_the_other_is_refused() -> None:
    line = one_line_error(invoke("eval", "extraction", "--price-in", "1", "--cases", str(FIXTURES)))
    assert "--price-out" in line


def test_a_save_path_that_cannot_work_is_refused_before_the_run(tmp_path: Path) -> None:
    where = tmp_path / "missing" / "run.json"
    line = one_line_error(
        invoke("eval", "extraction", "--save", str(where), "--cases", str(FIXTURES))
    )
    assert "does not exist" in line


def test_a_save_that_fails_after_the_run_keeps_it_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        _write_run(tmp_path / "gone" / "run.json", '{"format": "kept-eval-run/1"}')
    assert exited.value.code == 1
    line = capsys.readouterr().err.strip()
    kept_in = Path(line.rsplit(" ", 1)[1])
    assert kept_in.read_text() == '{"format": "kept-eval-run/1"}'


def test_cases_prints_the_composition() -> None:
    result = invoke("eval", "cases", "--cases", str(FIXTURES), "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["cases"] == 10
    assert doc["languages"]["en"]["reminder"] == 1
    assert doc["languages"]["de"]["group"] == 1
    table = invoke("eval", "cases", "--cases", str(FIXTURES)).stdout
    assert "10 cases: en 5, fr 3, de 2" in table


def test_a_case_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "en.jsonl"
    bad.write_bytes(b"\xff\xfe not utf-8")
    assert "cannot read the labelled set" in one_line_error(
        invoke("eval", "cases", "--cases", str(bad))
    )
