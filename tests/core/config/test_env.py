"""KEPT_ variables laid over the config file: precedence, origins, errors
that name the variable, an optional file, and live reload keeping the
environment on top."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from core.clock import TestClock
from core.config.env import known_variables, variable_for_key
from core.config.file import (
    ConfigWatcher,
    env_override,
    get_value,
    load_config,
    load_layers,
    set_value,
)
from core.config.model import ConfigError, KeptConfig

Doc = dict[str, Any]


def write(path: Path, doc: Doc) -> Path:
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return write(tmp_path / "kept.json", {})


def problems(path: Path, environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ)
    return info.value.problems


# --- precedence: env > file > default ---


def test_a_scalar_comes_from_env_over_file_over_default(cfg: Path) -> None:
    assert load_config(cfg, {}).commitments.max_per_day == 3  # default
    write(cfg, {"commitments": {"maxPerDay": 5}})
    assert load_config(cfg, {}).commitments.max_per_day == 5  # file
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7"}
    assert load_config(cfg, env).commitments.max_per_day == 7  # env


def test_a_nested_key_comes_from_env_over_file_over_default(cfg: Path) -> None:
    assert load_config(cfg, {}).llm.models.chat == "gpt-4.1-mini"
    write(cfg, {"llm": {"models": {"chat": "from-file", "extraction": "x-file"}}})
    config = load_config(cfg, {"KEPT_LLM__MODELS__CHAT": "from-env"})
    assert config.llm.models.chat == "from-env"
    assert config.llm.models.extraction == "x-file"  # a sibling the env leaves alone
    env = {"KEPT_CHANNELS__TELEGRAM__ENABLED": "true", "KEPT_LLM__APIKEYENV": "MY_KEY"}
    config = load_config(cfg, env)
    assert config.channels.telegram.enabled is True and config.llm.api_key_env == "MY_KEY"


def test_a_json_list_comes_from_env_over_file_over_default(cfg: Path) -> None:
    assert [a.id for a in load_config(cfg, {}).agents] == ["main"]
    write(cfg, {"agents": [{"id": "main"}, {"id": "file"}]})
    assert [a.id for a in load_config(cfg, {}).agents] == ["main", "file"]
    env = {"KEPT_AGENTS": '[{"id": "main", "timezone": "Europe/Paris"}]'}
    agents = load_config(cfg, env).agents
    assert [(a.id, a.timezone) for a in agents] == [("main", "Europe/Paris")]  # replaced whole
    env = {"KEPT_CHANNELS__TELEGRAM__ALLOWFROM": "[12, 34]"}
    assert load_config(cfg, env).channels.telegram.allow_from == ["12", "34"]


def test_an_object_in_json_merges_under_more_specific_variables(cfg: Path) -> None:
    env = {
        "KEPT_CHANNELS": '{"telegram": {"enabled": true, "allowFrom": [1]}}',
        "KEPT_CHANNELS__TELEGRAM__ALLOWFROM": "[2]",
    }
    telegram = load_config(cfg, env).channels.telegram
    assert telegram.enabled is True and telegram.allow_from == ["2"]


def test_logging_keys_come_from_the_environment_too(cfg: Path) -> None:
    env = {"KEPT_LOGGING__LEVEL": "DEBUG", "KEPT_LOGGING__FORMAT": "json"}
    logging_config = load_config(cfg, env).logging
    assert (logging_config.level, logging_config.format) == ("debug", "json")


def test_every_key_of_the_model_has_a_variable() -> None:
    names = known_variables()
    for expected in (
        "KEPT_STORAGE__URL",
        "KEPT_LLM__APIKEYENV",
        "KEPT_AGENTS",
        "KEPT_CHANNELS__TELEGRAM__WEBHOOK__URL",
        "KEPT_SESSIONS__SEARCH__REDACTPATTERNS",
        "KEPT_LOGGING__FORMAT",
    ):
        assert expected in names
    assert variable_for_key(("agents", 0, "id")) == "KEPT_AGENTS__ID"  # no such variable
    assert "KEPT_AGENTS__ID" not in names  # a list is set whole, as JSON


# --- where each value came from ---


def test_origins_name_env_file_or_default(cfg: Path) -> None:
    write(cfg, {"commitments": {"maxPerDay": 5}, "agents": [{"id": "main"}]})
    env = {"KEPT_LLM__MODELS__CHAT": "m", "KEPT_CHANNELS__TELEGRAM__ALLOWFROM": "[1]"}
    loaded = load_layers(cfg, env)
    origins = loaded.origins()
    assert origins["llm.models.chat"] == "env:KEPT_LLM__MODELS__CHAT"
    assert origins["channels.telegram.allowFrom"] == "env:KEPT_CHANNELS__TELEGRAM__ALLOWFROM"
    assert origins["commitments.maxPerDay"] == "file"
    assert origins["agents.0.id"] == "file"
    assert origins["agents.0.timezone"] == "default"  # the file's agent leaves it out
    assert origins["commitments.enabled"] == "default"
    assert loaded.source == f"{cfg} + environment (KEPT_CHANNELS__TELEGRAM__ALLOWFROM, " + (
        "KEPT_LLM__MODELS__CHAT)"
    )
    assert load_layers(cfg, {}).source == str(cfg)


def test_a_list_set_as_json_is_the_origin_of_everything_in_it(cfg: Path) -> None:
    origins = load_layers(cfg, {"KEPT_AGENTS": '[{"id": "main"}]'}).origins()
    assert origins["agents.0.id"] == "env:KEPT_AGENTS"
    assert origins["agents.0.heartbeat.every"] == "env:KEPT_AGENTS"


# --- bad variables: one line naming the variable ---


def test_a_bad_value_names_the_variable_and_the_reason(cfg: Path) -> None:
    assert problems(cfg, {"KEPT_COMMITMENTS__MAXPERDAY": "700"}) == [
        'KEPT_COMMITMENTS__MAXPERDAY: Input should be less than or equal to 100 (got "700")'
    ]
    assert problems(cfg, {"KEPT_CHANNELS__TELEGRAM__ENABLED": "maybe"}) == [
        "KEPT_CHANNELS__TELEGRAM__ENABLED: Input should be a valid boolean, unable to "
        'interpret input (got "maybe")'
    ]


def test_a_problem_inside_a_json_value_names_the_variable_and_the_key(cfg: Path) -> None:
    env = {"KEPT_AGENTS": '[{"id": "main", "timezone": "Mars/Base"}]'}
    [line] = problems(cfg, env)
    assert line.startswith("KEPT_AGENTS: agents.0.timezone: unknown time zone 'Mars/Base'")


def test_a_bad_storage_url_never_echoes_its_password(cfg: Path) -> None:
    [line] = problems(cfg, {"KEPT_STORAGE__URL": "mysql://kept:hunter2-secret@db/kept"})
    assert line.startswith("KEPT_STORAGE__URL: only sqlite:///")
    assert "hunter2" not in line


def test_invalid_json_names_the_variable(cfg: Path) -> None:
    [line] = problems(cfg, {"KEPT_AGENTS": '[{"id": '})
    assert line.startswith("KEPT_AGENTS: not valid JSON (Expecting value: line 1 column 9")


def test_an_unknown_kept_variable_is_an_error_with_a_suggestion(cfg: Path) -> None:
    # An error, not a warning: a bot that ignores a misspelt
    # KEPT_CHANNELS__TELEGRAM__ENABLD would start without its channel.
    env = {
        "KEPT_STORAGE_URL": "sqlite:///x.db",
        "KEPT_CHANNELS__TELEGRAM__ENABLD": "true",
        "KEPT_LLM__API_KEY_ENV": "MY_KEY",
        "KEPT_WHATEVER": "1",
    }
    assert problems(cfg, env) == [
        "KEPT_STORAGE_URL: not a kept setting (did you mean KEPT_STORAGE__URL?)",
        "KEPT_CHANNELS__TELEGRAM__ENABLD: not a kept setting "
        "(did you mean KEPT_CHANNELS__TELEGRAM__ENABLED?)",
        "KEPT_LLM__API_KEY_ENV: not a kept setting (did you mean KEPT_LLM__APIKEYENV?)",
        "KEPT_WHATEVER: not a kept setting; variables are KEPT_ + the key path "
        "upper-cased, levels joined by __ (e.g. KEPT_STORAGE__URL)",
    ]


def test_kept_variables_that_are_not_keys_are_left_alone(cfg: Path) -> None:
    env = {"KEPT_CONFIG": str(cfg), "KEPT_TEST_POSTGRES_URL": "postgresql://x@y/z"}
    loaded = load_layers(cfg, env)
    assert loaded.env.variables == {} and loaded.source == str(cfg)


def test_other_variables_are_not_read(cfg: Path) -> None:
    assert load_config(cfg, {"STORAGE__URL": "nonsense", "OPENAI_API_KEY": "x"}) == KeptConfig()


# --- the file is optional when the environment sets keys ---


def test_no_file_is_fine_when_the_environment_sets_keys(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    loaded = load_layers(missing, {"KEPT_STORAGE__URL": "postgresql://kept:pw@db/kept"})
    assert loaded.document is None and loaded.config.storage.url.startswith("postgresql://")
    assert loaded.source == "environment (KEPT_STORAGE__URL)"
    assert loaded.origins()["storage.pinCpu"] == "default"
    assert not missing.exists()


def test_no_file_and_no_variables_is_still_a_missing_file(tmp_path: Path) -> None:
    assert problems(tmp_path / "none.json", {}) == [f"{tmp_path / 'none.json'}: no such file"]


def test_a_cross_key_problem_without_a_file_is_reported_against_the_environment(
    tmp_path: Path,
) -> None:
    lines = problems(tmp_path / "none.json", {"KEPT_AGENTS": '[{"id": "bot"}]'})
    assert "environment: channels.telegram.agent: no agent with id 'main' (agents: bot)" in lines


# --- get / set with the environment on top ---


def test_get_answers_the_value_in_force(cfg: Path) -> None:
    write(cfg, {"llm": {"timeoutSeconds": 30}})
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7"}
    assert get_value(cfg, "commitments.maxPerDay", env) == 7
    assert get_value(cfg, "llm.timeoutSeconds", env) == 30  # the file's spelling, not 30.0
    assert get_value(tmp_missing(cfg), "commitments.maxPerDay", env) == 7


def tmp_missing(cfg: Path) -> Path:
    return cfg.parent / "missing.json"


def test_set_edits_only_the_file_and_names_an_overriding_variable(cfg: Path) -> None:
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7", "KEPT_AGENTS": '[{"id": "main"}]'}
    config = set_value(cfg, "commitments.maxPerDay", "9", env)
    assert json.loads(cfg.read_text()) == {"commitments": {"maxPerDay": 9}}
    assert config.commitments.max_per_day == 7  # the variable stays on top
    assert env_override("commitments.maxPerDay", env) == "KEPT_COMMITMENTS__MAXPERDAY"
    assert env_override("agents.0.timezone", env) == "KEPT_AGENTS"
    assert env_override("commitments.enabled", env) is None


# --- live reload keeps the environment on top ---


class Recorder:
    def __init__(self) -> None:
        self.seen: list[KeptConfig] = []

    def __call__(self, config: KeptConfig) -> None:
        self.seen.append(config)


async def test_a_reloaded_file_stays_under_the_environment(cfg: Path, clock: TestClock) -> None:
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7"}
    seen = Recorder()
    watcher = ConfigWatcher(cfg, load_config(cfg, env), seen, clock, environ=env)
    write(cfg, {"commitments": {"enabled": False, "maxPerDay": 9}})
    assert await watcher.check_once() is True
    [applied] = seen.seen
    assert applied.commitments.enabled is False  # the file's change applies
    assert applied.commitments.max_per_day == 7  # the variable still wins


async def test_a_file_change_the_environment_overrides_changes_nothing(
    cfg: Path, clock: TestClock
) -> None:
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7"}
    seen = Recorder()
    watcher = ConfigWatcher(cfg, load_config(cfg, env), seen, clock, environ=env)
    write(cfg, {"commitments": {"maxPerDay": 9}})
    assert await watcher.check_once() is False and seen.seen == []
    # A change the environment does not override, read by the same watcher, applies.
    write(cfg, {"commitments": {"maxPerDay": 9, "enabled": False}})
    assert await watcher.check_once() is True
    [applied] = seen.seen
    assert (applied.commitments.enabled, applied.commitments.max_per_day) == (False, 7)


async def test_the_watcher_is_quiet_without_a_file_in_an_env_only_deployment(
    tmp_path: Path, clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.config")
    path = tmp_path / "kept.json"
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7"}
    seen = Recorder()
    watcher = ConfigWatcher(path, load_config(path, env), seen, clock, environ=env)
    assert await watcher.check_once() is False
    assert caplog.records == []
    write(path, {"commitments": {"enabled": False}})  # a file appears later: applied
    assert await watcher.check_once() is True
    applied = seen.seen[0].commitments
    assert not applied.enabled and applied.max_per_day == 7


# --- DATABASE_URL, as hosts hand it out ---

HOSTED = "postgres://kept:pw-secret@db.example:5432/kept"


def test_database_url_is_storage_url_when_nothing_else_sets_it(cfg: Path) -> None:
    loaded = load_layers(cfg, {"DATABASE_URL": HOSTED})
    assert loaded.config.storage.url == HOSTED
    assert loaded.origins()["storage.url"] == "env:DATABASE_URL"
    assert loaded.origins()["storage.pinCpu"] == "default"
    # Not an override of the file: `kept config set` names none.
    assert env_override("storage.url", {"DATABASE_URL": HOSTED}) is None


def test_the_file_and_kept_storage_url_win_over_database_url(cfg: Path) -> None:
    write(cfg, {"storage": {"url": "sqlite:///data/mine.sqlite"}})
    loaded = load_layers(cfg, {"DATABASE_URL": HOSTED})
    assert loaded.config.storage.url == "sqlite:///data/mine.sqlite"
    assert loaded.origins()["storage.url"] == "file"
    env = {"DATABASE_URL": HOSTED, "KEPT_STORAGE__URL": "postgresql://other@db/kept"}
    loaded = load_layers(cfg, env)
    assert loaded.config.storage.url == "postgresql://other@db/kept"
    assert loaded.origins()["storage.url"] == "env:KEPT_STORAGE__URL"


def test_database_url_alone_configures_a_bot_without_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    loaded = load_layers(missing, {"DATABASE_URL": HOSTED})
    assert loaded.document is None and loaded.config.storage.url == HOSTED
    assert loaded.source == "environment (DATABASE_URL)"
    assert not missing.exists()


def test_a_bad_database_url_names_the_variable_never_the_password(cfg: Path) -> None:
    [line] = problems(cfg, {"DATABASE_URL": "mysql://kept:pw-secret@db/kept"})
    assert line.startswith("DATABASE_URL: storage.url: only sqlite:///")
    assert "pw-secret" not in line
