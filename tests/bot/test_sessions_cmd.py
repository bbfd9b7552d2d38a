"""`kept sessions list` and `kept sessions show`: what the operator sees
before acting on a user's request; read-only, never creating anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from core.store.backends import open_backend
from tests.support.user_data import (
    ANN,
    BEN_PRIVATE,
    GROUP,
    OTHER_AGENT,
    PRIVATE,
    seeded_config,
)


@pytest.fixture
async def cfg(tmp_path: Path) -> Path:
    return await seeded_config(tmp_path)


def sessions(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["sessions", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_every_chat_or_a_members_own(cfg: Path) -> None:
    code, out, err = sessions(cfg, "list", "--json")
    assert (code, err) == (0, "")
    listed = {s["key"]: s for s in json.loads(out)["sessions"]}
    assert set(listed) == {PRIVATE, BEN_PRIVATE, GROUP, OTHER_AGENT}
    assert (listed[GROUP]["kind"], listed[GROUP]["members"], listed[GROUP]["messages"]) == (
        "group",
        2,
        4,
    )
    assert listed[GROUP]["first"].endswith("Z") and listed[GROUP]["last"].endswith("Z")
    code, out, _ = sessions(cfg, "list", "--user", f"telegram:{ANN}", "--json")
    assert {s["key"] for s in json.loads(out)["sessions"]} == {PRIVATE, GROUP, OTHER_AGENT}
    code, out, _ = sessions(cfg, "list")
    assert code == 0 and GROUP in out and "members" in out and "times in UTC" in out
    code, out, _ = sessions(cfg, "list", "--user", "discord:5")
    assert (code, out) == (0, "Nothing is stored from discord:5.\n")


def test_show_prints_a_transcript_newest_last(cfg: Path) -> None:
    code, out, err = sessions(cfg, "show", PRIVATE)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 4
    assert lines[0].endswith(f"{ANN}: my zebracorn interview is tomorrow")
    assert lines[1].endswith("assistant: Good luck!") and lines[-1].endswith("Sorry to hear")
    code, out, _ = sessions(cfg, "show", PRIVATE, "--limit", "2", "--json")
    shown = json.loads(out)["messages"]
    assert [m["text"] for m in shown] == ["I slept badly", "Sorry to hear"]
    assert shown[0]["senderId"] == ANN and shown[1]["role"] == "assistant"


def test_a_missing_chat_or_a_bad_key_is_one_line_and_nothing_is_created(
    cfg: Path, tmp_path: Path
) -> None:
    code, out, err = sessions(cfg, "show", "agent:main:telegram:group:404")
    assert (code, out) == (
        1,
        "",
    ) and err == "kept: No chat agent:main:telegram:group:404 is stored.\n"
    code, out, err = sessions(cfg, "show", "not-a-key")
    assert code == 1 and err.startswith("kept: 'not-a-key' is not a session key")
    missing = tmp_path / "elsewhere.json"
    missing.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path}/typo/kept.sqlite"}}))
    for args in (["list"], ["show", PRIVATE], ["forget", PRIVATE, "--yes"]):
        code, out, err = sessions(missing, *args)
        assert code == 1 and out == "" and err.startswith("kept: no database at")
    assert not (tmp_path / "typo").exists()


@pytest.fixture
async def started_over(cfg: Path, tmp_path: Path) -> Path:
    """The seeded database after ann's private chat started over (`/new`)."""
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as backend:
        assert await backend.store.start_over(PRIVATE)
        # The model's view of the chat is empty now (the operator's is not).
        assert await backend.store.history(PRIVATE, before_turn_of=2**62, limit=10) == []
    return cfg


def test_show_and_search_still_see_what_came_before_a_new(started_over: Path) -> None:
    code, out, err = sessions(started_over, "show", PRIVATE)
    assert (code, err) == (0, "")
    assert len(out.splitlines()) == 4
    assert out.splitlines()[0].endswith("my zebracorn interview is tomorrow")
    result = CliRunner().invoke(
        main, ["search", "zebracorn", "--json", "--config", str(started_over)]
    )
    assert result.exit_code == 0, result.stderr
    assert PRIVATE in {r["sessionKey"] for r in json.loads(result.stdout)["results"]}
