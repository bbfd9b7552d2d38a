"""`kept users followups PLATFORM:USER [on|off] [--agent AGENT] [--json]`
through click's CliRunner, on a real database file holding two members'
data under two agents (tests/support/user_data.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from core.users.followup_prefs import DISMISSED_REASON
from tests.support.user_data import ANN, BEN, seeded_config


@pytest.fixture
async def cfg(tmp_path: Path) -> Path:
    path = await seeded_config(tmp_path)
    config = json.loads(path.read_text())
    config["agents"] = [{"id": "main"}, {"id": "side"}]
    path.write_text(json.dumps(config))
    return path


def kept(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["users", "followups", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def rows(cfg: Path, sql: str) -> list[tuple[object, ...]]:
    url = json.loads(cfg.read_text())["storage"]["url"]
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return db.execute(sql).fetchall()


def test_show_then_switch_off_under_every_agent_then_on_under_one(cfg: Path) -> None:
    code, out, err = kept(cfg, f"telegram:{ANN}")
    assert (code, err) == (0, "")
    assert out == (
        f"telegram:{ANN}: follow-ups on under agent main (never switched).\n"
        f"telegram:{ANN}: follow-ups on under agent side (never switched).\n"
    )
    assert rows(cfg, "SELECT count(*) FROM followup_preferences") == [(0,)]  # read only

    code, out, err = kept(cfg, f"telegram:{ANN}", "off")
    assert (code, err) == (0, "")
    assert out == (
        f"telegram:{ANN}: follow-ups now off under agent main; 2 pending follow-ups "
        "dismissed, 1 queued exchange dropped.\n"
        f"telegram:{ANN}: follow-ups now off under agent side; 1 pending follow-up dismissed.\n"
    )
    statuses = dict(rows(cfg, "SELECT reason, status || ':' || coalesce(last_error, '') "
                              "FROM commitments"))  # fmt: skip
    assert statuses["the interview"] == statuses["elsewhere"] == f"dismissed:{DISMISSED_REASON}"
    assert statuses["ben's match"] == "pending:"  # another member's
    assert kept(cfg, f"telegram:{BEN}")[1].startswith(f"telegram:{BEN}: follow-ups on")

    code, out, _ = kept(cfg, f"telegram:{ANN}", "on", "--agent", "main", "--json")
    assert code == 0
    [main_agent] = json.loads(out)["agents"]
    assert main_agent["agentId"] == "main" and main_agent["on"] is True
    assert (main_agent["set"], main_agent["changed"], main_agent["dismissed"]) == (True, True, 0)
    code, out, _ = kept(cfg, f"telegram:{ANN}", "--json")
    shown = {a["agentId"]: a["on"] for a in json.loads(out)["agents"]}
    assert shown == {"main": True, "side": False}
    assert "follow-ups off under agent side (since 20" in kept(cfg, f"telegram:{ANN}")[1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([f"telegram:{ANN}", "maybe"], "'maybe' is neither on nor off"),
        ([f"telegram:{ANN}", "off", "--agent", "nope"], "no agent 'nope' in the config"),
        (["telegram42", "off"], "is not PLATFORM:USER"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(cfg: Path, args: list[str], said: str) -> None:
    code, out, err = kept(cfg, *args)
    assert code != 0 and out == ""
    assert said in err and len(err.strip().splitlines()) == 1
    assert rows(cfg, "SELECT count(*) FROM followup_preferences") == [(0,)]
    assert rows(cfg, "SELECT count(*) FROM commitments WHERE status = 'dismissed'") == [(0,)]


@pytest.mark.parametrize("args", [[f"telegram:{ANN}"], [f"telegram:{ANN}", "off"]])
def test_a_mistyped_storage_url_creates_no_database(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nowhere" / "kept.sqlite"
    cfg = tmp_path / "kept.json"
    cfg.write_text(json.dumps({"storage": {"url": f"sqlite:///{missing}"}}))
    code, out, err = kept(cfg, *args)
    assert code != 0 and out == ""
    assert "no database" in err.lower() and len(err.strip().splitlines()) == 1
    assert not missing.parent.exists()
