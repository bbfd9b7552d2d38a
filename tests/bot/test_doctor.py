"""`kept doctor` checks for real: the platforms' tokens against the fake Bot
API and the fake Discord server, the model endpoint against the fake OpenAI
server, the database (which it never creates), the disk and who may talk to
the bot; `--json`; exit 1 when a check fails."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import bot.doctor as doctor_module
from bot.doctor import run_doctor
from tests.fakes.discord_server import TOKEN as DISCORD_TOKEN
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, error
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.fakes.telegram_server import TOKEN as TELEGRAM_TOKEN
from tests.support.store_helpers import open_store

API_KEY = "sk-doctor-secret-123"


@dataclass
class Fakes:
    openai: FakeOpenAI
    telegram: FakeTelegram
    discord: FakeDiscord


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    async with FakeOpenAI() as openai, FakeTelegram() as telegram, FakeDiscord() as discord:
        yield Fakes(openai, telegram, discord)


async def create_database(url: str) -> None:
    """What the bot's first start leaves: an empty database at `url`."""
    store = open_store(url)
    await store.open()
    await store.close()


async def write_config(
    tmp_path: Path, fakes: Fakes, *, create_db: bool = True, **overrides: Any
) -> Path:
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    doc: dict[str, Any] = {
        "storage": {"url": url},
        "llm": {"baseUrl": fakes.openai.base_url, "maxRetries": 0},
        "channels": {
            "telegram": {"enabled": True, "baseUrl": fakes.telegram.root},
            "discord": {"enabled": True, "apiBaseUrl": fakes.discord.root},
        },
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = merge(doc[key], value)
        else:
            doc[key] = value
    if create_db:
        await create_database(doc["storage"]["url"])
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        both_dicts = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if both_dicts else value
    return out


def good_env(**extra: str) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": API_KEY,
        "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
        "DISCORD_TOKEN": DISCORD_TOKEN,
        **extra,
    }


def line(out: str, name: str) -> str:
    # `ok    <name, 15 wide> <detail>`
    [found] = [row for row in out.splitlines() if row[6:21].rstrip() == name]
    return found


# --- everything fine ------------------------------------------------------------------------


async def test_every_check_passes_against_working_platforms(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env())
    out = capsys.readouterr().out
    assert code == 0, out
    assert all(row.startswith("ok") for row in out.splitlines()), out
    assert f"getMe: @{BOT_USERNAME}" in line(out, "telegram")
    assert "/users/@me: kept" in line(out, "discord")
    assert "schema version" in line(out, "database")
    assert "a test write succeeded" in line(out, "database write")
    assert "GiB free" in line(out, "disk space")
    assert "gpt-4.1-mini listed" in line(out, "model")
    # The real requests reached the fakes, with the configured tokens.
    assert [c.method for c in fakes.telegram.calls] == ["getMe"]
    assert [c.route for c in fakes.discord.calls] == ["me"]
    assert not fakes.openai.completions  # a completion only with --deep
    for secret in (API_KEY, TELEGRAM_TOKEN, DISCORD_TOKEN):
        assert secret not in out


async def test_json_is_one_object_with_every_check(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env(), as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["ok"] is True
    names = [c["name"] for c in report["checks"]]
    for name in (
        "config",
        "database",
        "database write",
        "disk space",
        "telegram",
        "discord",
        "discord intents",
        "telegram access",
        "discord access",
        "model",
    ):
        assert name in names
    for check in report["checks"]:
        assert set(check) == {"ok", "name", "detail"}
        assert check["ok"] is True and isinstance(check["detail"], str)


# --- platform tokens ------------------------------------------------------------------------


async def test_a_wrong_telegram_token_fails(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env(TELEGRAM_BOT_TOKEN="123:wrong-token"))
    out = capsys.readouterr().out
    assert code == 1
    row = line(out, "telegram")
    assert row.startswith("FAIL")
    assert "rejected (401)" in row and "$TELEGRAM_BOT_TOKEN" in row
    assert "wrong-token" not in out
    assert line(out, "discord").startswith("ok")


async def test_a_wrong_discord_token_fails(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env(DISCORD_TOKEN="not-the-token"))
    out = capsys.readouterr().out
    assert code == 1
    row = line(out, "discord")
    assert row.startswith("FAIL") and "rejected (401)" in row and "$DISCORD_TOKEN" in row
    assert "not-the-token" not in out


async def test_an_unreachable_bot_api_fails_without_printing_the_token(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fakes.telegram.root
    await fakes.telegram.close()  # nothing listens there any more
    path = await write_config(tmp_path, fakes, channels={"telegram": {"baseUrl": root}})
    code = await run_doctor(path, environ=good_env())
    out = capsys.readouterr().out
    assert code == 1
    assert line(out, "telegram").startswith(f"FAIL  telegram        cannot reach {root}")
    assert TELEGRAM_TOKEN not in out


async def test_an_enabled_channel_without_its_token_fails(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes, channels={"telegram": {"tokenEnv": "MY_TG_TOKEN"}})
    code = await run_doctor(path, environ=good_env())
    out = capsys.readouterr().out
    assert code == 1
    assert line(out, "telegram").startswith("FAIL") and "$MY_TG_TOKEN is empty" in out
    assert not fakes.telegram.calls


async def test_disabled_channels_are_not_called(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(
        tmp_path,
        fakes,
        channels={"telegram": {"enabled": False}, "discord": {"enabled": False}},
    )
    code = await run_doctor(path, environ={"OPENAI_API_KEY": API_KEY})
    out = capsys.readouterr().out
    assert code == 0, out
    assert "disabled" in line(out, "telegram") and "disabled" in line(out, "discord")
    assert not fakes.telegram.calls and not fakes.discord.calls


# --- intents and posture ----------------------------------------------------------------------


async def test_doctor_names_the_intents_without_message_content_by_default(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "discord intents")
    assert code == 0
    assert row.startswith("ok")
    assert "guilds, guild_messages, dm_messages;" in row
    assert "message_content" not in row and "no privileged intent" in row
    assert "messageContentIntent" in row


async def test_doctor_names_message_content_when_configured(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes, channels={"discord": {"messageContentIntent": True}})
    await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "discord intents")
    assert "guilds, guild_messages, dm_messages, message_content;" in row
    assert "developer portal" in row


async def test_access_says_who_may_talk_to_the_bot(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(
        tmp_path,
        fakes,
        channels={
            "telegram": {"dmPolicy": "allowlist", "allowFrom": [7, 8]},
            "discord": {"dmPolicy": "open", "groups": ["5"]},
        },
    )
    await run_doctor(path, environ=good_env())
    out = capsys.readouterr().out
    assert "2 users in allowFrom" in line(out, "telegram access")
    discord = line(out, "discord access")
    assert "anyone" in discord and "groups: 1 listed" in discord


# --- the model endpoint -----------------------------------------------------------------------


async def test_a_chat_model_the_endpoint_does_not_list_fails(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes, llm={"models": {"chat": "gpt-nonexistent"}})
    code = await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "model")
    assert code == 1
    assert row.startswith("FAIL")
    assert "'gpt-nonexistent' not among its 1 models (e.g. gpt-4.1-mini)" in row
    assert "llm.models.chat" in row


async def test_a_base_url_without_v1_fails_with_the_path_to_try(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fakes.openai.base_url.removesuffix("/v1")
    path = await write_config(tmp_path, fakes, llm={"baseUrl": root})
    code = await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "model")
    assert code == 1 and row.startswith("FAIL")
    hint = "answered 404 (no such path): llm.baseUrl is the API root, usually ending in /v1"
    assert f"{root} {hint}; try {root}/v1" in row
    assert "reachable" not in row and "does not know this model" not in row


async def test_deep_asks_the_chat_model_for_one_completion(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env(), deep=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert line(out, "model answer").startswith("ok")
    [call] = fakes.openai.completions
    assert call.model == "gpt-4.1-mini"
    assert call.bearer == API_KEY


async def test_deep_fails_when_the_model_does_not_answer(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.openai.set_default(lambda body: error(500))
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env(), deep=True)
    assert code == 1
    assert line(capsys.readouterr().out, "model answer").startswith("FAIL")


async def test_an_endpoint_in_trouble_fails(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.openai.models_responder = error(503)
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env())
    out = capsys.readouterr().out
    assert code == 1
    assert line(out, "model").startswith("FAIL") and "server" in line(out, "model")
    assert API_KEY not in out


async def test_no_key_and_no_endpoint_fails_without_a_call(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = await write_config(tmp_path, fakes, llm={"baseUrl": None})
    code = await run_doctor(path, environ=good_env(OPENAI_API_KEY=""))
    row = line(capsys.readouterr().out, "model")
    assert code == 1
    assert row.startswith("FAIL") and "OPENAI_API_KEY" in row and "llm.baseUrl" in row


# --- the database and the disk ----------------------------------------------------------------


async def test_a_missing_database_is_reported_and_not_created(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo" / "deeper"
    path = await write_config(
        tmp_path, fakes, create_db=False, storage={"url": f"sqlite:///{missing}/kept.sqlite"}
    )
    code = await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "database")
    assert code == 1
    assert row.startswith("FAIL") and f"no database at {missing}/kept.sqlite" in row
    assert not (tmp_path / "typo").exists()


async def test_too_little_disk_space_fails(
    tmp_path: Path,
    fakes: Fakes,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(doctor_module, "MIN_FREE_BYTES", 2**62)
    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env())
    row = line(capsys.readouterr().out, "disk space")
    assert code == 1
    assert row.startswith("FAIL") and "free some space" in row


async def test_an_invalid_config_is_the_one_failing_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kept.json"
    path.write_text('{"storage": {"url": 5}}')
    assert await run_doctor(path, environ={}) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL  config") and "storage.url" in out
    assert len(out.splitlines()) == 1


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"dm_policy": "pairing"}, "dmPolicy pairing: an unknown user gets a code"),
        ({"dm_policy": "open"}, "dmPolicy open: DMs from anyone"),
        ({"dm_policy": "allowlist", "allow_from": ["7"]}, "dmPolicy allowlist: DMs from the 1"),
        ({"groups": ["-100", "-200"]}, "groups: 2 listed"),
        ({"groups": [], "group_policy": "open"}, "groups: any (groupPolicy open)"),
    ],
)
def test_access_reads_the_dm_and_group_policies_when_the_config_has_them(
    settings: dict[str, Any], expected: str
) -> None:
    # The policy keys arrive with pairing; the line reads them where they exist.
    channel = SimpleNamespace(**{"enabled": True, "allow_from": [], **settings})
    config = SimpleNamespace(
        channels=SimpleNamespace(telegram=channel, discord=SimpleNamespace(enabled=False))
    )
    [check] = doctor_module._posture(config)  # type: ignore[arg-type]
    assert check.ok and check.name == "telegram access"
    assert expected in check.detail


# --- retention --------------------------------------------------------------------------


async def test_doctor_shows_the_retention_policy_and_the_oldest_message_age(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime, timedelta

    from core.store.base import NewMessage

    path = await write_config(tmp_path, fakes)
    code = await run_doctor(path, environ=good_env())
    assert code == 0
    assert line(capsys.readouterr().out, "retention").endswith(
        "messages kept forever; ended follow-ups and reminders 90d; no message stored"
    )

    key = "agent:main:telegram:private:42"
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    try:
        await store.ensure_session(
            key, agent_id="main", platform="telegram", chat_id="42", chat_kind="private",
            thread_id=None, now=datetime.now(UTC),
        )  # fmt: skip
        then = datetime.now(UTC) - timedelta(days=400, hours=1)
        await store.add_message(NewMessage(key, "user", "long ago", then, sender_id="42"))
    finally:
        await store.close()
    path = await write_config(
        tmp_path, fakes, create_db=False,
        storage={"retention": {"messages": "365d", "closed": "30d"}},
    )  # fmt: skip
    code = await run_doctor(path, environ=good_env())
    assert code == 0
    assert line(capsys.readouterr().out, "retention").endswith(
        "messages 365d; ended follow-ups and reminders 30d; the oldest message is 400 d old "
        "(past the retention: `kept run` erases it at its next pass)"
    )
