"""`kept doctor` shows the limits in force (rates, token caps, output caps,
reminder limits) and, from the database, today's bot-wide spend against
`limits.tokensPerDay`, on both backends. Informational: never a failure."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.doctor import run_doctor
from core.store.backends import open_backend
from tests.bot.test_doctor import Fakes, fakes, good_env, line, write_config  # noqa: F401
from tests.support.usage_rows import record_call

LIMITS = {
    "limits": {
        "perUser": {"messagesPerMinute": 5, "tokensPerDay": 20_000, "activeReminders": 7},
        "perChat": {"messagesPerMinute": None, "tokensPerDay": 50_000},
        "tokensPerDay": 100_000,
    },
    "reminders": {"minInterval": "15m"},
    "llm": {"maxOutputTokens": {"chat": 800, "extraction": 400, "heartbeat": 200}},
}


async def test_the_limits_in_force_each_on_one_line(
    tmp_path: Path,
    fakes: Fakes,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = await write_config(tmp_path, fakes, **LIMITS)
    assert await run_doctor(path, environ=good_env()) == 0
    out = capsys.readouterr().out
    assert line(out, "rate limits").endswith(
        "per user 5 messages/min; per group no limit (limits.*.messagesPerMinute)"
    )
    assert "per user 20,000 tokens/day; per group 50,000 tokens/day; whole bot 100,000 " in (
        line(out, "token caps")
    )
    assert "chat 800, extraction 400, heartbeat 200 tokens a call" in line(out, "output caps")
    assert "7 active per user" in line(out, "reminder limits")
    assert "at most every 15m (reminders.minInterval)" in line(out, "reminder limits")


async def test_the_defaults_read_as_such(
    tmp_path: Path,
    fakes: Fakes,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = await write_config(tmp_path, fakes)
    assert await run_doctor(path, environ=good_env()) == 0
    out = capsys.readouterr().out
    assert "per user 20 messages/min; per group 60 messages/min" in line(out, "rate limits")
    assert "per user no limit; per group no limit; whole bot no limit" in line(out, "token caps")
    assert "chat 1,024, extraction 512, heartbeat 256" in line(out, "output caps")
    assert "no cap (limits.tokensPerDay)" in line(out, "spend today")


async def test_todays_bot_wide_spend_against_its_cap(
    tmp_path: Path,
    fakes: Fakes,  # noqa: F811
    storage_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with open_backend(storage_url):
        pass  # what the bot's first start leaves
    overrides = {"storage": {"url": storage_url}, **LIMITS}
    path = await write_config(tmp_path, fakes, create_db=False, **overrides)
    day = datetime.now(UTC).date().isoformat()
    assert await run_doctor(path, environ=good_env()) == 0
    assert f"0 of 100,000 tokens bot-wide on {day} (UTC, 0.0 %)" in line(
        capsys.readouterr().out, "spend today"
    )
    async with open_backend(storage_url) as backend:
        now = datetime.now(UTC)
        await record_call(backend, "telegram", "1", 30_000, 10_000, now)
        await record_call(backend, "discord", "2", 5_000, 5_000, now)
    assert await run_doctor(path, environ=good_env(), as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    [spend] = [c for c in report["checks"] if c["name"] == "spend today"]
    assert spend["ok"] and f"50,000 of 100,000 tokens bot-wide on {day}" in spend["detail"]
    async with open_backend(storage_url) as backend:
        await record_call(backend, "telegram", "1", 60_000, 0, datetime.now(UTC))
    assert await run_doctor(path, environ=good_env()) == 0  # a spent cap is no fault
    assert "110,000 of 100,000 tokens" in (shown := line(capsys.readouterr().out, "spend today"))
    assert "spent, no model call until the next UTC midnight" in shown
