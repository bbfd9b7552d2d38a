"""`kept search` on each backend: a relevance that tells hits of different
quality apart (the backends' raw scores were all shown as 0.00), and the
query's words highlighted in the table and located in --json."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from bot.cli import main
from core.search.service import relevance
from core.search.snippet import match_spans

KEY = "agent:main:telegram:private:1"
# Most messages hold "budget", so SQLite's bm25 for it is about 1e-6 (FTS5
# floors the IDF of a word in more than half the rows): the case that
# printed 0.00 for every hit.
TEXTS = [
    "budget budget budget review",  # the word often, in a short message
    "Noted the budget.",
    "The Budget is 500 euros",
    "a long message about many things where the budget is mentioned only once "
    "among lots of other words that go on and on",
    "hello there",
]
MATCH = "\x1b[1;30;43m"  # bold black on yellow: bot/search_cmd.py's MATCH_STYLE


def setup(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "kept.json"
    config.write_text(json.dumps({"storage": {"url": url}}))
    data = tmp_path / "import.jsonl"
    lines = [
        {"session": KEY, "role": "user", "text": text, "ts": f"2026-11-01T10:0{n}:00Z"}
        for n, text in enumerate(TEXTS)
    ]
    data.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = CliRunner().invoke(main, ["import", str(data), "--config", str(config)])
    assert result.exit_code == 0, result.output
    return config


def search(config: Path, *args: str, color: bool = False) -> str:
    env = {"FORCE_COLOR": "1"} if color else {"FORCE_COLOR": "", "NO_COLOR": "1"}
    result = CliRunner().invoke(main, ["search", *args, "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_hits_of_different_quality_get_distinct_nonzero_relevance(
    tmp_path: Path, storage_url: str
) -> None:
    config = setup(tmp_path, storage_url)
    results = json.loads(search(config, "budget", "--json"))["results"]
    assert len(results) == 4
    levels = [r["relevance"] for r in results]
    assert levels[0] == 1.0
    assert all(level > 0 for level in levels)
    assert levels == sorted(levels, reverse=True)
    # The repeated word in a short message beats the long message's one mention.
    assert results[0]["snippet"] == "budget budget budget review"
    assert results[-1]["snippet"].startswith("a long message")
    assert len(set(levels)) > 1
    assert all(r["score"] > 0 for r in results)  # the backend's own, no longer rounded away

    table = search(config, "budget")
    for level in levels:
        assert f"{level:.2f}" in table
    assert "0.00" not in table


def test_matched_words_are_highlighted_in_the_table(tmp_path: Path, storage_url: str) -> None:
    config = setup(tmp_path, storage_url)
    table = search(config, "budget", color=True)
    assert f"{MATCH}budget\x1b[0m" in table
    assert f"{MATCH}Budget\x1b[0m" in table  # as written, matched folded
    assert f"{MATCH}500" not in table
    prefix = search(config, "eur*", color=True)
    assert f"{MATCH}euros\x1b[0m" in prefix  # a prefix query marks the whole word
    plain = search(config, "budget")
    assert "\x1b[" not in plain  # a pipe without colours gets plain text


def test_json_gives_match_spans_in_the_snippet(tmp_path: Path, storage_url: str) -> None:
    config = setup(tmp_path, storage_url)
    results = json.loads(search(config, "budget euros", "--json"))["results"]
    assert [r["snippet"] for r in results] == ["The Budget is 500 euros"]
    snippet, spans = results[0]["snippet"], results[0]["matches"]
    assert [snippet[a:b] for a, b in spans] == ["Budget", "euros"]


def test_relevance_follows_the_order_and_shares_ties() -> None:
    assert relevance([3.0, 2.0, 2.0, 0.5]) == [1.0, 0.6667, 0.6667, 0.3333]
    assert relevance([1.2e-6, 1.1e-6]) == [1.0, 0.5]  # tiny scores still differ
    assert relevance([]) == []


def test_match_spans_mark_whole_words_folded_and_unspaced_scripts() -> None:
    def marked(text: str, terms: list[str], prefixes: tuple[str, ...] = ()) -> list[str]:
        return [text[a:b] for a, b in match_spans(text, terms, prefixes)]

    assert marked("support the port", ["port"]) == ["port"]
    assert marked("École et ecole", ["ecole"]) == ["École", "ecole"]
    assert marked("budgets and budget", ["budget"], ("budget",)) == ["budgets", "budget"]
    assert marked("東京タワーに行った", ["東京"]) == ["東京"]
    assert marked("new york", ["new york", "new", "york"]) == ["new york"]
    assert marked("🎉 party time 🎉", ["party"]) == ["party"]
    assert re.sub(r"\s", "", "".join(marked("a b", []))) == ""
