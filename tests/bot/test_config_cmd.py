"""`kept config get | set | validate | show`: the functions behind them, then the
commands themselves driven through click's CliRunner."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bot.config_cmd import config_group
from core.config.file import (
    ensure_config_file,
    get_value,
    load_config,
    masked_view,
    parse_raw_value,
    set_value,
)
from core.config.model import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "kept.example.json"


def example_doc() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "kept.json"
    path.write_bytes(EXAMPLE.read_bytes())
    return path


def kept_config(*args: str) -> Result:
    return CliRunner().invoke(config_group, list(args))


def assert_clean_failure(result: Result) -> None:
    """Exit code 1, problems on stderr only, no traceback."""
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.strip()
    assert "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_get_prints_json_values(cfg: Path) -> None:
    assert kept_config("get", "commitments.maxPerDay", "--config", str(cfg)).stdout == "3\n"
    assert kept_config("get", "agents.0.id", "--config", str(cfg)).stdout == '"main"\n'
    assert kept_config("get", "llm.models.extraction", "--config", str(cfg)).stdout == "null\n"
    result = kept_config("get", "sessions", "--config", str(cfg))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"search": {"visibility": "self", "redactPatterns": []}}


def test_get_unknown_key_fails_cleanly(cfg: Path) -> None:
    result = kept_config("get", "commitments.maxPerDy", "--config", str(cfg))
    assert_clean_failure(result)
    assert result.stderr == (
        f"{cfg}: commitments.maxPerDy: unknown key (did you mean 'maxPerDay'?)\n"
    )


def test_set_then_get_round_trips(cfg: Path) -> None:
    result = kept_config("set", "commitments.enabled", "true", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    assert result.stdout == "commitments.enabled = true\n"
    assert kept_config("get", "commitments.enabled", "--config", str(cfg)).stdout == "true\n"

    result = kept_config("set", "llm.models.chat", "gpt-4o", "--config", str(cfg))
    assert result.stdout == 'llm.models.chat = "gpt-4o"\n'
    assert kept_config("get", "llm.models.chat", "--config", str(cfg)).stdout == '"gpt-4o"\n'
    assert list(json.loads(cfg.read_text())) == list(json.loads(EXAMPLE.read_text()))


def test_set_refuses_an_invalid_value_and_leaves_the_file_alone(cfg: Path) -> None:
    os.utime(cfg, ns=(1_000_000_000, 1_000_000_000))
    before = cfg.read_bytes()
    result = kept_config("set", "agents.0.heartbeat.target", "everyone", "--config", str(cfg))
    assert_clean_failure(result)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{cfg}: agents.0.heartbeat.target: Input should be")
    assert lines[-1] == f"kept: {cfg} not changed"
    assert cfg.read_bytes() == before
    assert cfg.stat().st_mtime_ns == 1_000_000_000


def test_validate_ok_and_invalid(cfg: Path) -> None:
    result = kept_config("validate", "--config", str(cfg))
    assert result.exit_code == 0
    assert result.stdout == f"{cfg}: ok\n"

    doc = json.loads(cfg.read_text())
    doc["commitments"]["maxPerDay"] = "three"
    doc["sessions"]["search"]["visibility"] = "public"
    cfg.write_text(json.dumps(doc))
    result = kept_config("validate", "--config", str(cfg))
    assert_clean_failure(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"{cfg}: ") for line in lines)
    assert "commitments.maxPerDay" in lines[0] and "sessions.search.visibility" in lines[1]


def test_validate_reports_bad_json_position(cfg: Path) -> None:
    cfg.write_text('{\n  "storage": {"url": "sqlite:///x.db",}\n}\n')
    result = kept_config("validate", "--config", str(cfg))
    assert_clean_failure(result)
    assert result.stderr.startswith(f"{cfg}: invalid JSON at line 2, column ")


def test_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    result = kept_config("validate", "--config", str(tmp_path / "none.json"))
    assert_clean_failure(result)
    assert "no such file" in result.stderr and "kept.example.json" in result.stderr


def test_config_path_defaults_to_kept_config_env(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEPT_CONFIG", str(cfg))
    assert kept_config("validate").stdout == f"{cfg}: ok\n"


def test_show_never_prints_secret_values(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-FAKE-openai-secret-0001",
        "TELEGRAM_BOT_TOKEN": "123456:FAKE-telegram-secret-0002",
        "DISCORD_TOKEN": "FAKE.discord.secret-0003",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    kept_config("set", "channels.telegram.enabled", "true", "--config", str(cfg))
    text = kept_config("show", "--config", str(cfg))
    result = kept_config("show", "--json", "--config", str(cfg))
    assert result.exit_code == 0 and text.exit_code == 0, result.output + text.output
    for value in secrets.values():
        assert value not in result.output and value not in text.output
    assert 'llm.apiKeyEnv = "OPENAI_API_KEY"  # file; $OPENAI_API_KEY is set' in text.stdout
    view = json.loads(result.stdout)["values"]
    assert view["llm"]["apiKeyEnv"] == "OPENAI_API_KEY" and view["llm"]["apiKeySet"] is True
    assert view["channels"]["telegram"]["tokenSet"] is True
    assert view["channels"]["telegram"]["enabled"] is True
    assert view["agents"][0]["maxToolRounds"] == 4  # defaults are shown too


def test_show_reports_that_an_unset_secret_is_unset(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    view = json.loads(kept_config("show", "--json", "--config", str(cfg)).stdout)["values"]
    assert view["channels"]["discord"]["tokenSet"] is False
    monkeypatch.setenv("DISCORD_TOKEN", "FAKE.discord.secret")
    view = json.loads(kept_config("show", "--json", "--config", str(cfg)).stdout)["values"]
    assert view["channels"]["discord"]["tokenSet"] is True  # the same view sees a set one


# --- the functions behind get / set / show ---


def test_get_reads_file_values_and_defaults(cfg: Path) -> None:
    assert get_value(cfg, "commitments.maxPerDay") == 3
    assert get_value(cfg, "llm.timeoutSeconds") == 60  # as written, not 60.0
    assert get_value(cfg, "agents.0.id") == "main"
    assert get_value(cfg, "agents.0.maxToolRounds") == 4  # default only
    assert get_value(cfg, "llm.maxRetries") == 2
    assert get_value(cfg, "sessions") == {"search": {"visibility": "self", "redactPatterns": []}}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("commitments.maxPerDy", "commitments.maxPerDy: unknown key (did you mean 'maxPerDay'?)"),
        ("agents.3.id", "agents.3: unknown key (agents has 1 entries)"),
        ("agents.0.id.more", "agents.0.id.more: unknown key"),
        ("commitments..enabled", "is not a key path"),
    ],
)
def test_get_unknown_key_names_it(cfg: Path, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        get_value(cfg, key)
    [problem] = info.value.problems
    assert problem.startswith(f"{cfg}: ") and expected in problem


def test_set_round_trips_and_keeps_key_order(cfg: Path) -> None:
    before = list(json.loads(cfg.read_text())["commitments"])
    config = set_value(cfg, "commitments.enabled", "true")
    assert config.commitments.enabled is True
    assert get_value(cfg, "commitments.enabled") is True
    set_value(cfg, "agents.0.heartbeat.activeHours.timezone", "Europe/Paris")
    text = cfg.read_text()
    doc = json.loads(text)
    assert list(doc) == list(example_doc())
    assert list(doc["commitments"]) == before
    assert list(doc["agents"][0]["heartbeat"]["activeHours"]) == ["start", "end", "timezone"]
    assert text == json.dumps(doc, indent=2) + "\n"
    hours = load_config(cfg).agents[0].heartbeat.active_hours
    assert hours is not None and hours.timezone == "Europe/Paris"


RAW = {"true": True, "3": 3, "null": None, '{"a": 1}': {"a": 1}, '["1"]': ["1"], '"3"': "3"}
RAW |= {"gpt-4o": "gpt-4o", "Europe/Paris": "Europe/Paris", "NaN": "NaN", "": ""}


@pytest.mark.parametrize(("raw", "value"), RAW.items())
def test_raw_values_parse_as_json_else_string(raw: str, value: Any) -> None:
    assert parse_raw_value(raw) == value


def test_set_stores_json_values_and_plain_strings(cfg: Path) -> None:
    set_value(cfg, "llm.models.chat", "gpt-4o")
    set_value(cfg, "llm.models.extraction", "null")
    set_value(cfg, "channels.telegram.allowFrom", '["42", "43"]')
    set_value(cfg, "llm.timeoutSeconds", "12.5")
    doc = json.loads(cfg.read_text())
    assert doc["llm"]["models"] == {"chat": "gpt-4o", "extraction": None, "heartbeat": None}
    assert doc["channels"]["telegram"]["allowFrom"] == ["42", "43"]
    assert doc["llm"]["timeoutSeconds"] == 12.5


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("commitments.maxPerDay", "lots", "commitments.maxPerDay: Input should be a valid integer"),
        ("commitments.maxPerDay", "101", "commitments.maxPerDay: Input should be less than"),
        ("agents.0.heartbeat.every", "soon", "agents.0.heartbeat.every: not a duration"),
        ("channels.telegram.tokn", "X", "channels.telegram.tokn: unknown key"),
        ("channels.telegram.agent", "bob", "channels.telegram.agent: no agent with id 'bob'"),
        ("agents.0.id.x", "1", "agents.0.id.x: cannot set, agents.0.id is not an object"),
        ("agents.5.id", "x", "agents.5: cannot set, agents is a list of 1"),
    ],
)
def test_set_refuses_invalid_values_without_touching_the_file(
    cfg: Path, key: str, raw: str, expected: str
) -> None:
    os.utime(cfg, ns=(1_000_000_000, 1_000_000_000))  # an mtime a write would change
    before = cfg.read_bytes()
    with pytest.raises(ConfigError) as info:
        set_value(cfg, key, raw)
    assert f"{cfg}: {expected}" in str(info.value)
    assert cfg.read_bytes() == before
    assert cfg.stat().st_mtime_ns == 1_000_000_000
    assert os.listdir(cfg.parent) == ["kept.json"]


def test_set_creates_missing_objects_and_appends_list_entries(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text("{}")
    set_value(path, "commitments.maxPerDay", "5")
    set_value(path, "agents.0.id", "main")
    set_value(path, "agents.1.id", "helper")
    set_value(path, "agents.0.heartbeat.activeHours", '{"start": "22:00", "end": "07:00"}')
    doc = json.loads(path.read_text())
    assert doc["commitments"] == {"maxPerDay": 5}
    assert [a["id"] for a in doc["agents"]] == ["main", "helper"]
    assert load_config(path).agents[0].heartbeat.active_hours is not None


def test_set_is_atomic_and_keeps_mode_and_symlinks(tmp_path: Path, cfg: Path) -> None:
    os.chmod(cfg, 0o600)
    link = tmp_path / "link.json"
    link.symlink_to(cfg)
    set_value(link, "commitments.enabled", "true")
    assert link.is_symlink()
    assert json.loads(cfg.read_text())["commitments"]["enabled"] is True
    assert cfg.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(cfg.parent)) == ["kept.json", "link.json"]  # no temp file left


def test_ensure_config_file_copies_the_example_once(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "kept.json"
    assert ensure_config_file(path, EXAMPLE) is True
    assert path.read_bytes() == EXAMPLE.read_bytes()
    path.write_text("{}\n")
    assert ensure_config_file(path, EXAMPLE) is False
    assert path.read_text() == "{}\n"
    with pytest.raises(ConfigError, match="cannot read the example"):
        ensure_config_file(tmp_path / "other.json", tmp_path / "no-example.json")


def test_masked_view_says_whether_secrets_are_set_but_never_shows_them() -> None:
    secret = "sk-fake-secret-for-kept-tests"
    config = load_config(EXAMPLE).model_copy(deep=True)
    config.llm.base_url = "https://user:hunter2@llm.example/v1"
    view = masked_view(config, {"OPENAI_API_KEY": secret, "DISCORD_TOKEN": " "})
    assert view["llm"]["apiKeyEnv"] == "OPENAI_API_KEY" and view["llm"]["apiKeySet"] is True
    assert view["channels"]["discord"]["tokenSet"] is False
    assert view["channels"]["telegram"]["tokenSet"] is False
    assert view["llm"]["baseUrl"] == "https://user:***@llm.example/v1"
    dumped = json.dumps(view)
    assert secret not in dumped and "hunter2" not in dumped
