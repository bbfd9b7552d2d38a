"""`kept doctor` says which Discord gateway intents the bot asks for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.doctor import run_doctor
from tests.fakes.openai_server import FakeOpenAI


def write_config(tmp_path: Path, fake: FakeOpenAI, discord: dict[str, object]) -> Path:
    doc = {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        "llm": {"baseUrl": fake.base_url, "maxRetries": 0},
        "channels": {"discord": discord},
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


def intents_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if "discord intents" in line]
    return line


async def test_doctor_names_the_intents_without_message_content_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI() as fake:
        path = write_config(tmp_path, fake, {"enabled": True})
        code = await run_doctor(path, environ={"OPENAI_API_KEY": "k", "DISCORD_TOKEN": "t"})
    line = intents_line(capsys.readouterr().out)
    assert code == 0
    assert line.startswith("ok")
    assert "guilds, guild_messages, dm_messages;" in line
    assert "message_content" not in line and "no privileged intent" in line
    assert "messageContentIntent" in line


async def test_doctor_names_message_content_when_configured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI() as fake:
        path = write_config(tmp_path, fake, {"enabled": True, "messageContentIntent": True})
        await run_doctor(path, environ={"OPENAI_API_KEY": "k", "DISCORD_TOKEN": "t"})
    line = intents_line(capsys.readouterr().out)
    assert "guilds, guild_messages, dm_messages, message_content;" in line
    assert "developer portal" in line
