"""`kept usage`, on both backends: the groups with their calls, tokens,
share and estimated calls; the cost where llm.prices prices every model
of a group (else "-", and the footer names the unpriced models); --json;
--since; bad input is one line; it never creates a database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from core.limits.store import CallUsage
from core.store.backends import open_backend

PRICES = {"small": {"input": 1.0, "output": 2.0}}


def call(tokens_in: int, tokens_out: int, user: str, model: str, **over: Any) -> CallUsage:
    fields: dict[str, Any] = {
        "at": datetime.now(UTC) - timedelta(hours=1), "agent_id": "main", "role": "chat",
        "model": model, "platform": "telegram", "user_id": user, "chat_id": user,
        "shared": False, "tokens_in": tokens_in, "tokens_out": tokens_out, "estimated": False,
    }  # fmt: skip
    fields.update(over)
    return CallUsage(**fields)


@pytest.fixture
async def cfg(tmp_path: Path, storage_url: str) -> Path:
    async with open_backend(storage_url) as backend:
        day = datetime.now(UTC).date().isoformat()
        for usage in (
            call(600_000, 100_000, "ann", "small"),
            call(200_000, 100_000, "ben", "small", estimated=True),
            call(50_000, 0, "ben", "big", role="extraction"),
            call(1, 1, "old", "small", at=datetime.now(UTC) - timedelta(days=10)),
        ):
            await backend.budgets.record(usage, [], day, None)
    path = tmp_path / "kept.json"
    doc = {"storage": {"url": storage_url}, "llm": {"prices": PRICES}}
    path.write_text(json.dumps(doc))
    return path


def usage(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["usage", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def test_json_has_each_group_its_share_cost_and_a_total(cfg: Path) -> None:
    code, out, err = usage(cfg, "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["by"] == "user" and doc["since"].endswith("Z")
    groups = {g["key"]: g for g in doc["groups"]}
    assert list(groups) == ["telegram:ann", "telegram:ben"]  # the old call is outside 7d
    ann, ben = groups["telegram:ann"], groups["telegram:ben"]
    assert (ann["calls"], ann["tokensIn"], ann["tokensOut"]) == (1, 600_000, 100_000)
    assert (ann["sharePercent"], ben["sharePercent"]) == (66.67, 33.33)
    # 0.6 M in at $1 + 0.1 M out at $2.
    assert ann["costUsd"] == pytest.approx(0.8)
    # Ben used "big" too, which has no price: no partial sum.
    assert ben["costUsd"] is None and ben["estimatedCalls"] == 1
    assert doc["unpricedModels"] == ["big"]
    whole = doc["total"]
    assert (whole["calls"], whole["tokensIn"], whole["tokensOut"]) == (3, 850_000, 200_000)
    assert whole["costUsd"] is None and whole["sharePercent"] == 100.0


def test_by_model_prices_the_priced_one(cfg: Path) -> None:
    code, out, _ = usage(cfg, "--by", "model", "--json")
    groups = {g["key"]: g for g in json.loads(out)["groups"]}
    assert code == 0 and set(groups) == {"small", "big"}
    # 0.8 M in at $1 + 0.2 M out at $2.
    assert groups["small"]["costUsd"] == pytest.approx(1.2)
    assert groups["big"]["costUsd"] is None


def test_the_table_shows_columns_a_total_and_the_unpriced_models(cfg: Path) -> None:
    code, out, err = usage(cfg, "--by", "role")
    assert (code, err) == (0, "")
    for column in ("role", "calls", "tokens in", "tokens out", "share", "estimated", "cost"):
        assert column in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["chat"][1:4] == ["2", "800,000", "200,000"]
    assert rows["chat"][-1] == "1.2000" and rows["extraction"][-1] == "-"
    assert rows["total"][1:4] == ["3", "850,000", "200,000"]
    assert "No price in llm.prices for: big" in out
    assert "estimated: calls whose endpoint reported no usage" in out


def test_since_widens_the_window(cfg: Path) -> None:
    code, out, _ = usage(cfg, "--since", "30d", "--json")
    assert code == 0
    assert "telegram:old" in {g["key"] for g in json.loads(out)["groups"]}
    code, out, _ = usage(cfg, "--since", "2000-01-01", "--json")
    assert code == 0 and json.loads(out)["total"]["calls"] == 4


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "soon"], "is neither a duration (7d, 24h) nor an ISO date"),
        (["--since", "0"], "is no span of time"),
        (["--since", "2999-01-01"], "is in the future"),
        (["--by", "colour"], "kept: --by 'colour' is none of user, chat, agent, role, model"),
    ],
)
def test_bad_input_is_one_line(cfg: Path, args: list[str], says: str) -> None:
    code, out, err = usage(cfg, *args)
    assert code != 0 and out == ""
    assert says in err and err.count("\n") == 1


def test_a_missing_database_is_one_line_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "kept.sqlite"
    cfg = tmp_path / "kept.json"
    cfg.write_text(json.dumps({"storage": {"url": f"sqlite:///{missing}"}}))
    code, out, err = usage(cfg)
    assert (code, out) == (1, "") and err.startswith("kept: no database at")
    assert err.count("\n") == 1 and not missing.parent.exists()


@pytest.fixture
async def empty(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path}/empty.sqlite"
    async with open_backend(url):
        pass
    cfg = tmp_path / "empty.json"
    cfg.write_text(json.dumps({"storage": {"url": url}}))
    return cfg


def test_an_empty_database_has_no_calls(empty: Path) -> None:
    code, out, _ = usage(empty)
    assert code == 0 and out.startswith("No model calls since ")
    code, out, _ = usage(empty, "--json")
    doc = json.loads(out)
    assert (doc["groups"], doc["total"]["calls"], doc["unpricedModels"]) == ([], 0, [])
