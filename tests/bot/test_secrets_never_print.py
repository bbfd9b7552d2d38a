"""Secrets never print: `kept config show` (text and --json), `kept doctor`
(text and --json) and a command's error line, with real secret values in
storage.url, llm.baseUrl, the webhook URL and the token variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.doctor import run_doctor
from tests.fakes.openai_server import FakeOpenAI

DB_PASSWORD = "pg-Pass-4711"
SSL_PASSWORD = "pg-Ssl-0815"
API_KEY = "sk-live-9f8e7d6c5b4a"
QUERY_KEY = "qk-7c6b5a4d3e2f"
# Not shaped like a Telegram token: only the configured value can find it.
BOT_TOKEN = "tg-not-shaped-6161abc"
SECRETS = (DB_PASSWORD, SSL_PASSWORD, API_KEY, QUERY_KEY, BOT_TOKEN)

ENV = {"OPENAI_API_KEY": API_KEY, "TELEGRAM_BOT_TOKEN": BOT_TOKEN, "KEPT_CONFIG": ""}


def write_config(tmp_path: Path, storage_url: str, llm_url: str) -> Path:
    doc: dict[str, Any] = {
        "storage": {"url": storage_url},
        "llm": {"baseUrl": llm_url, "maxRetries": 0},
        "channels": {
            "telegram": {
                "webhook": {"url": f"https://hook.example/{BOT_TOKEN}/hook"},
            }
        },
    }
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(
        tmp_path,
        f"postgresql://kept:{DB_PASSWORD}@db.example/kept?sslpassword={SSL_PASSWORD}",
        f"https://llm.example/v1?api_key={QUERY_KEY}",
    )


def test_config_show_text_masks_every_secret(config_path: Path) -> None:
    result = CliRunner().invoke(main, ["config", "show", "--config", str(config_path)], env=ENV)
    assert result.exit_code == 0, result.output
    assert_no_secret(result.output)
    lines = {row.split(" = ")[0]: row for row in result.stdout.splitlines()}
    assert '"postgresql://kept:***@db.example/kept?sslpassword=***"' in lines["storage.url"]
    assert '"https://llm.example/v1?api_key=***"' in lines["llm.baseUrl"]
    assert '"https://hook.example/***/hook"' in lines["channels.telegram.webhook.url"]


def test_config_show_json_masks_every_secret(config_path: Path) -> None:
    args = ["config", "show", "--json", "--config", str(config_path)]
    result = CliRunner().invoke(main, args, env=ENV)
    assert result.exit_code == 0, result.output
    assert_no_secret(result.output)
    values = json.loads(result.stdout)["values"]
    assert values["storage"]["url"] == "postgresql://kept:***@db.example/kept?sslpassword=***"
    assert values["llm"]["baseUrl"] == "https://llm.example/v1?api_key=***"
    assert values["channels"]["telegram"]["webhook"]["url"] == "https://hook.example/***/hook"
    assert values["channels"]["telegram"]["tokenSet"] is True


@pytest.mark.parametrize("as_json", [False, True])
async def test_doctor_masks_every_secret(
    tmp_path: Path, postgres_url: str, as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    # The test server trusts local connections: a password in the URL is
    # taken and ignored, so the database line is printed with it.
    joiner = "&" if "?" in postgres_url else "?"
    storage = f"{postgres_url}{joiner}password={DB_PASSWORD}"
    async with FakeOpenAI() as llm:
        path = write_config(tmp_path, storage, f"{llm.base_url}?api_key={QUERY_KEY}")
        await run_doctor(path, environ=ENV, as_json=as_json)
    out = capsys.readouterr().out
    assert_no_secret(out)
    if as_json:
        checks = {c["name"]: c["detail"] for c in json.loads(out)["checks"]}
    else:
        checks = {row[6:21].rstrip(): row[22:] for row in out.splitlines()}
    assert "password=***" in checks["database"]
    assert f"{llm.base_url}?api_key=***" in checks["model"]


def test_an_error_line_masks_every_secret(tmp_path: Path) -> None:
    # Nothing listens on port 1: the command fails with one line naming the URL.
    path = write_config(
        tmp_path,
        f"postgresql://kept:{DB_PASSWORD}@127.0.0.1:1/kept?sslpassword={SSL_PASSWORD}",
        "https://llm.example/v1",
    )
    result = CliRunner().invoke(main, ["reminders", "--config", str(path)], env=ENV)
    assert result.exit_code == 1
    assert_no_secret(result.output)
    assert "postgresql://kept:***@127.0.0.1:1/kept?sslpassword=***" in result.stderr
