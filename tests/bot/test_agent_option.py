"""`--agent` on every command that takes it: an id the config does not have
is one line naming the configured agents, exit 1, and no database created
(it once answered "no commitments" / "no results" with exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main

COMMANDS = [
    ["commitments", "--agent", "nope"],
    ["commitments", "list", "--agent", "nope"],
    ["search", "interview", "--agent", "nope"],
    ["chat", "--agent", "nope"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_unknown_agent_is_an_error_naming_the_agents(tmp_path: Path, args: list[str]) -> None:
    database = tmp_path / "data" / "kept.sqlite"
    cfg = tmp_path / "kept.json"
    cfg.write_text(
        json.dumps(
            {"storage": {"url": f"sqlite:///{database}"}, "agents": [{"id": "main"}, {"id": "ops"}]}
        )
    )
    result = CliRunner().invoke(main, [*args, "--config", str(cfg)], input="")
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == "kept: --agent: no agent 'nope'; the configured agents: main, ops\n"
    assert not database.exists() and not database.parent.exists()
