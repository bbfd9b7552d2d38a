from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

from bot.cli import main
from tests.support.store_helpers import index_consistency, open_store

LINES = [
    {"session": "agent:main:telegram:private:1", "role": "user", "text": "The budget is 500 euros",
     "ts": "2026-11-01T10:00:00Z"},
    {"session": "agent:main:telegram:private:1", "role": "assistant", "text": "Noted the budget.",
     "ts": "2026-11-01T10:00:05Z"},
    {"session": "agent:main:discord:channel:9:thread:4", "role": "user",
     "text": "budget review thursday", "ts": "2026-11-02T10:00:00+01:00"},
    {"session": "agent:other:telegram:private:2", "role": "user", "text": "other agent budget",
     "ts": "2026-11-03T10:00:00Z"},
    {"session": "agent:main:telegram:private:1", "role": "tool", "text": "{\"budget\": 1}",
     "ts": "2026-11-01T10:00:03Z"},
]  # fmt: skip


def setup(tmp_path: Path, lines: list[dict] | None = None) -> tuple[Path, Path]:
    config = tmp_path / "kept.json"
    url, agents = f"sqlite:///{tmp_path}/kept.sqlite", [{"id": "main"}, {"id": "other"}]
    config.write_text(json.dumps({"storage": {"url": url}, "agents": agents}))
    data = tmp_path / "import.jsonl"
    data.write_text("\n".join(json.dumps(x) for x in (lines or LINES)) + "\n")
    return config, data


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def consistency(tmp_path: Path) -> tuple[int, int]:
    async def go() -> tuple[int, int]:
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        await store.open()
        try:
            return await index_consistency(store)
        finally:
            await store.close()

    return asyncio.run(go())


def test_import_then_search_json(tmp_path):
    config, data = setup(tmp_path)
    code, out, err = run("import", str(data), "--config", str(config))
    assert code == 0, err
    assert "imported 5 messages" in out
    assert consistency(tmp_path) == (0, 0)

    code, out, err = run("search", "budget", "--json", "--config", str(config))
    assert code == 0, err
    answer = json.loads(out)
    assert answer["indexing"] is False and answer["truncated"] is False
    assert all(
        set(r) == {"sessionKey", "timestamp", "role", "snippet", "score", "relevance", "matches"}
        for r in answer["results"]
    )
    keys = {r["sessionKey"] for r in answer["results"]}
    # Admin search sees every chat of every agent; tool rows are never indexed.
    assert keys == {
        "agent:main:telegram:private:1",
        "agent:main:discord:channel:9:thread:4",
        "agent:other:telegram:private:2",
    }
    assert len(answer["results"]) == 4
    assert all(r["timestamp"].endswith("Z") for r in answer["results"])


def test_search_filters_by_agent_and_session(tmp_path):
    config, data = setup(tmp_path)
    run("import", str(data), "--config", str(config))
    code, out, _ = run("search", "budget", "--agent", "other", "--json", "--config", str(config))
    assert code == 0
    assert {r["sessionKey"] for r in json.loads(out)["results"]} == {
        "agent:other:telegram:private:2"
    }
    session = "agent:main:telegram:private:1"
    code, out, _ = run("search", "budget", "--session", session, "--json", "--config", str(config))
    assert {r["sessionKey"] for r in json.loads(out)["results"]} == {session}
    code, out, err = run("search", "budget", "--session", "nonsense", "--config", str(config))
    assert code != 0 and "--session" in err


def test_import_with_a_bad_line_imports_nothing(tmp_path):
    bad = [*LINES[:2], {"session": "agent:main:telegram:private:1", "role": "boss", "text": "x",
                        "ts": "2026-11-01T10:00:00Z"}, {"session": "s", "role": "user",
                        "text": "x", "ts": "2026-11-01T10:00:00"}]  # fmt: skip
    config, data = setup(tmp_path, bad)
    code, _, err = run("import", str(data), "--config", str(config))
    assert code != 0
    assert ":3: role" in err and ":4:" in err
    assert "nothing was imported" in err
    # Nothing was written: not even an empty database (search reports it missing).
    code, _, err = run("search", "budget", "--json", "--config", str(config))
    assert code == 1 and "no database at" in err


def test_reindex_rebuilds_and_keeps_results(tmp_path):
    config, data = setup(tmp_path)
    run("import", str(data), "--config", str(config))
    code, out, err = run("reindex", "--config", str(config))
    assert code == 0, err
    assert "reindexed 3 session(s)" in out
    code, out, err = run(
        "reindex", "--session", "agent:main:telegram:private:1", "--config", str(config)
    )
    assert code == 0 and "reindexed 1 session(s)" in out
    assert consistency(tmp_path) == (0, 0)
    _, out, _ = run("search", "budget", "--json", "--config", str(config))
    assert len(json.loads(out)["results"]) == 4


def test_search_table_output(tmp_path):
    config, data = setup(tmp_path)
    run("import", str(data), "--config", str(config))
    code, out, _ = run("search", "thursday", "--config", str(config))
    assert code == 0
    assert "budget review" in out and "thursday" in out
    code, out, _ = run("search", "zzzunfound", "--config", str(config))
    assert "no results" in out


def test_truncated_when_more_matches_exist_than_the_limit(tmp_path):
    config, data = setup(tmp_path)
    run("import", str(data), "--config", str(config))  # four indexed "budget" matches
    code, out, err = run("search", "budget", "--limit", "3", "--json", "--config", str(config))
    assert code == 0, err
    answer = json.loads(out)
    assert len(answer["results"]) == 3 and answer["truncated"] is True
    assert set(answer) == {"results", "indexing", "truncated"}
    code, out, _ = run("search", "budget", "--limit", "4", "--json", "--config", str(config))
    answer = json.loads(out)
    assert len(answer["results"]) == 4 and answer["truncated"] is False

    code, out, _ = run("search", "budget", "--limit", "3", "--config", str(config))
    assert code == 0 and "more matches exist than shown" in out
    code, out, _ = run("search", "budget", "--limit", "4", "--config", str(config))
    assert code == 0 and "more matches" not in out


def test_import_makes_surrogates_and_nul_storable(tmp_path):
    odd = [
        {"session": "agent:main:telegram:private:1", "role": "user",
         "text": "broken \ud800 surrogate quokka", "ts": "2026-11-01T10:00:00Z"},
        {"session": "agent:main:telegram:private:1", "role": "user",
         "text": "nul\u0000byte quokka", "ts": "2026-11-01T10:00:01Z"},
    ]  # fmt: skip
    config, data = setup(tmp_path, odd)  # JSON escapes: \ud800 and \u0000 in the file
    code, out, err = run("import", str(data), "--config", str(config))
    assert code == 0, err
    assert "imported 2 messages" in out
    code, out, err = run("search", "quokka", "--json", "--config", str(config))
    assert code == 0, err
    snippets = sorted(r["snippet"] for r in json.loads(out)["results"])
    assert snippets == ["broken \ufffd surrogate quokka", "nulbyte quokka"]
