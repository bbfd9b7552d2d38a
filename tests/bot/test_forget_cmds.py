"""`kept users forget PLATFORM:USER` and `kept sessions forget KEY`:
counted first, asked (or --yes), erased, told with the counts; a script
without --yes erases nothing. Through click's CliRunner on a real database file, and once
as a subprocess (`python -m bot`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot import confirm
from bot.cli import main
from core.privacy.store import ErasedUser, ErasureCounts
from core.store.backends import open_backend
from tests.support.user_data import ANN, BEN, GROUP, PRIVATE, seeded_config, texts

ROOT = Path(__file__).resolve().parents[2]
ANN_USER = f"telegram:{ANN}"
# Ann under both agents: 2 private chats, 8 messages, 3 follow-ups, 2
# reminders, 1 queued exchange, her zone and her pending code (none: approved).
ALL = ErasureCounts(chats=2, messages=8, follow_ups=3, reminders=2, queued=1, settings=1)
PLAN = (
    f"This erases what I hold from {ANN_USER}, in every chat: 2 private chats, 8 messages, "
    "3 follow-ups, 2 reminders, 1 exchange waiting for extraction, 1 setting."
)


@pytest.fixture
async def cfg(tmp_path: Path) -> Path:
    return await seeded_config(tmp_path)


def forget(
    cfg: Path, *args: str, answer: str | None = None, group: str = "users"
) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [group, "forget", *args, "--config", str(cfg)], input=answer)
    return result.exit_code, result.stdout, result.stderr


def left(cfg: Path) -> tuple[ErasureCounts, list[str]]:
    """What is still held from Ann, and every message text stored."""
    url = json.loads(cfg.read_text())["storage"]["url"]

    async def read() -> tuple[ErasureCounts, list[str]]:
        async with open_backend(url) as backend:
            return await backend.erasure.count(ErasedUser("telegram", ANN)), await texts(backend)

    return asyncio.run(read())


def test_yes_erases_every_agents_data_and_says_what(cfg: Path) -> None:
    code, out, err = forget(cfg, ANN_USER, "--yes")
    assert (code, err) == (0, "")
    assert out == (
        f"Erased what I held from {ANN_USER}: 2 private chats, 8 messages, 3 follow-ups, "
        "2 reminders, 1 exchange waiting for extraction, 1 setting.\n"
    )
    counts, messages = left(cfg)
    assert counts.total == 0
    assert (
        "ben says zebracorn too" in messages
        and "my zebracorn interview is tomorrow" not in messages
    )
    code, out, _ = forget(cfg, ANN_USER, "--yes")
    assert (code, out) == (0, f"I hold nothing from {ANN_USER}.\n")


def test_a_script_without_yes_erases_nothing(cfg: Path) -> None:
    code, out, err = forget(cfg, ANN_USER)
    assert code == 1 and out == ""
    assert err == f"kept: {PLAN} Nothing erased: add --yes.\n"
    assert left(cfg)[0] == ALL


def test_a_person_is_asked_and_no_keeps_everything(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confirm, "interactive", lambda: True)
    code, out, err = forget(cfg, ANN_USER, answer="n\n")
    assert code == 1 and out == "" and err.startswith(PLAN)
    assert err.rstrip().endswith("kept: nothing erased")
    assert left(cfg)[0] == ALL
    code, out, err = forget(cfg, ANN_USER, "--json", answer="y\n")
    assert code == 0 and err.startswith(PLAN)
    document = json.loads(out)
    assert document["erased"] is True and document["userId"] == ANN
    assert document["counts"]["messages"] == 8 and document["counts"]["privateChats"] == 2
    assert left(cfg)[0].total == 0


def test_someone_else_stays_and_a_bad_user_is_one_line(cfg: Path) -> None:
    code, out, _ = forget(cfg, f"telegram:{BEN}", "--yes", "--json")
    assert code == 0 and json.loads(out)["counts"]["privateChats"] == 1
    assert left(cfg)[0] == ALL  # Ann's untouched
    env = {**os.environ, "KEPT_CONFIG": "", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "bot", "users", "forget", "slack:1", "--config", str(cfg)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("kept: 'slack:1' is not PLATFORM:USER")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_whole_chat_is_erased_and_the_others_stay(cfg: Path) -> None:
    code, out, err = forget(cfg, GROUP, group="sessions")
    assert code == 1 and out == ""
    assert err == (
        f"kept: This erases the chat {GROUP}, everyone's part of it: 4 messages, "
        "2 follow-ups, 2 reminders. Nothing erased: add --yes.\n"
    )
    code, out, err = forget(cfg, GROUP, "--yes", group="sessions")
    assert (code, err) == (0, "")
    assert out == f"Erased the chat {GROUP}: 4 messages, 2 follow-ups, 2 reminders.\n"
    counts, messages = left(cfg)
    assert "ben says zebracorn too" not in messages and "zebracorn in the group" not in messages
    assert "my zebracorn interview is tomorrow" in messages and counts.chats == 2
    code, out, err = forget(cfg, GROUP, "--yes", "--json", group="sessions")
    assert code == 1 and out == "" and err == f"kept: No chat {GROUP} is stored.\n"


def test_a_session_key_that_is_not_one_is_one_line(cfg: Path) -> None:
    code, out, err = forget(cfg, "telegram:111", "--yes", group="sessions")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("kept: 'telegram:111' is not a session key")
    code, out, _ = forget(cfg, PRIVATE, "--yes", "--json", group="sessions")
    assert code == 0 and json.loads(out)["counts"]["messages"] == 4


def test_export_prints_or_writes_one_document(cfg: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["users", "export", ANN_USER, "--config", str(cfg)])
    assert result.exit_code == 0 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["kind"] == "kept-user-export" and len(doc["chats"]) == 3
    out = tmp_path / "ann.json"
    result = CliRunner().invoke(
        main, ["users", "export", ANN_USER, "--out", str(out), "--config", str(cfg)]
    )
    assert result.exit_code == 0
    assert result.stdout == f"Exported what I hold from {ANN_USER} (3 chats) to {out}.\n"
    assert json.loads(out.read_text()) | {"exportedAt": None} == doc | {"exportedAt": None}
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    result = CliRunner().invoke(
        main, ["users", "export", ANN_USER, "--out", str(out), "--config", str(cfg)]
    )
    assert (
        result.exit_code == 1 and result.stderr == f"kept: {out} already exists; name a new file\n"
    )
