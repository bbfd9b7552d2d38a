"""Config loading, error reporting, in-place edits and live reload."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.clock import TestClock
from core.config.file import (
    ConfigWatcher,
    load_config,
    parse_config_text,
    secret_from_env,
    set_value,
)
from core.config.model import ConfigError, KeptConfig

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "kept.example.json"

Doc = dict[str, Any]


def example_doc() -> Doc:
    return json.loads(EXAMPLE.read_text())


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _write_compact(path: Path, doc: Doc) -> None:
    path.write_text(json.dumps(doc))


def _remove(path: Path) -> None:
    path.unlink()


def problems_for(doc: Any, source: str = "config/kept.json") -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config_text(json.dumps(doc), source)
    return info.value.problems


# --- loading ---


def test_example_file_is_valid_and_has_documented_defaults() -> None:
    config = load_config(EXAMPLE)
    assert config.storage.url == "sqlite:///data/kept.sqlite"
    assert not config.channels.discord.enabled and not config.channels.telegram.enabled
    # Safe, honest defaults: follow-ups on; strangers get a pairing code;
    # groups only when listed.
    assert config.commitments.enabled
    for channel in (config.channels.discord, config.channels.telegram):
        assert channel.dm_policy == "pairing" and channel.group_policy == "allowlist"
        assert channel.groups == [] and channel.allow_from == []
    assert config.agents[0].heartbeat.active_hours is not None
    assert config.llm.model_for("extraction") == "gpt-4.1-mini"


def test_the_code_defaults_are_as_safe_as_the_example() -> None:
    # An environment-only deployment has no example file to read.
    config = KeptConfig()
    assert config.commitments.enabled
    for channel in (config.channels.discord, config.channels.telegram):
        assert channel.dm_policy == "pairing" and channel.group_policy == "allowlist"


def test_quiet_hours_are_one_default_the_example_shows_and_null_turns_off(
    tmp_path: Path,
) -> None:
    """An environment-only deployment once had no quiet hours while the
    example file set 08:00-22:00: check-ins at 3 a.m."""
    example_hours = load_config(EXAMPLE).agents[0].heartbeat.active_hours
    assert example_hours is not None
    no_file = load_config(tmp_path / "absent.json", {"KEPT_AGENTS": '[{"id": "main"}]'})
    for config in (KeptConfig(), no_file, parse_config_text('{"agents": [{}]}', "k.json")):
        hours = config.agents[0].heartbeat.active_hours
        assert hours is not None and (hours.start, hours.end) == ("08:00", "22:00")
        assert hours == example_hours
    always = '{"agents": [{"heartbeat": {"activeHours": null}}]}'
    assert parse_config_text(always, "k.json").agents[0].heartbeat.active_hours is None


def test_policies_are_checked_by_name() -> None:
    problems = problems_for(_edit(lambda d: d["channels"]["telegram"].update(dmPolicy="anyone")))
    assert len(problems) == 1 and "channels.telegram.dmPolicy" in problems[0]
    assert "pairing" in problems[0] and "allowlist" in problems[0] and "open" in problems[0]
    listed = parse_config_text(
        json.dumps(_edit(lambda d: d["channels"]["discord"].update(groups=[123]))), "kept.json"
    )
    assert listed.channels.discord.groups == ["123"]  # ids pasted as numbers


def test_example_file_is_formatted_as_config_set_writes() -> None:
    # `config set` rewrites with a 2-space indent; the example already has that
    # shape, so a first edit produces a one-line diff.
    text = EXAMPLE.read_text()
    assert text == json.dumps(json.loads(text), indent=2) + "\n"


def _edit(change: Callable[[Doc], None]) -> Doc:
    doc = example_doc()
    change(doc)
    return doc


def _hb(doc: Doc) -> Doc:
    return doc["agents"][0]["heartbeat"]


HB = "agents.0.heartbeat"
HOURS = f"{HB}.activeHours"
TG = "channels.telegram"

# (key set in the example, value, the start of the one problem line after the path)
INVALID: list[tuple[str, Any, str]] = [
    ("commitments.maxPerDay", "three", "commitments.maxPerDay: Input should be a valid integer"),
    ("commitments.maxPerDay", 1000, "commitments.maxPerDay: Input should be less than or equal"),
    (f"{HB}.every", "soon", f"{HB}.every: not a duration: 'soon'"),
    ("agents.0.timezone", "Mars/Olympus", "agents.0.timezone: unknown time zone 'Mars/Olympus'"),
    (f"{HOURS}.start", "25:00", f"{HOURS}.start: expected HH:MM between 00:00 and 24:00"),
    (f"{HOURS}.start", "24:00", f"{HOURS}.start: 24:00 is only allowed as the end"),
    (f"{HOURS}.end", "08:00", f"{HOURS}.end: equals start"),
    (f"{HOURS}.timezone", "Nowhere", f"{HOURS}.timezone: unknown time zone"),
    (f"{HB}.target", "all", f"{HB}.target: Input should be 'origin' or 'none' (got \"all\")"),
    ("sessions.search.visibility", "public", "sessions.search.visibility: Input should be 'self'"),
    (f"{TG}.tokn", "x", f"{TG}.tokn: unknown key (did you mean 'tokenEnv'?)"),
    ("commitments.max_per_day", 2, "commitments.max_per_day: unknown key (did you mean 'maxPe"),
    ("extra", 1, "extra: unknown key"),
    (HB, 5, f"{HB}: expected a JSON object, got a number"),
    ("agents", [], "agents: List should have at least 1 item"),
    (f"{TG}.agent", "bob", f"{TG}.agent: no agent with id 'bob' (agents: main)"),
    ("agents.1", {"id": "main"}, "agents.1.id: duplicate agent id 'main'"),
    ("storage.url", "mysql://x", "storage.url: only sqlite"),
    ("llm.baseUrl", "localhost:11434/v1", "llm.baseUrl: expected an http:// or https:// URL"),
]


def _set_in(doc: Any, key: str, value: Any) -> Doc:
    *parents, last = key.split(".")
    for part in parents:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    if isinstance(doc, list):
        doc.insert(int(last), value)
    else:
        doc[last] = value
    return doc


@pytest.mark.parametrize(("key", "value", "expected"), INVALID, ids=[c[2][:40] for c in INVALID])
def test_each_invalid_value_names_its_key_path(key: str, value: Any, expected: str) -> None:
    problems = problems_for(_edit(lambda d: _set_in(d, key, value)))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"config/kept.json: {expected}"), problems


def test_a_secret_pasted_as_env_name_is_rejected_without_echoing_it() -> None:
    token = "123456:AAF-fake-secret-token"
    problems = problems_for(_edit(lambda d: d["channels"]["telegram"].update(tokenEnv=token)))
    assert problems[0].startswith("config/kept.json: channels.telegram.tokenEnv: must be the NAME")
    assert token not in "\n".join(problems)


def test_every_error_is_reported_together() -> None:
    def break_three(d: Doc) -> None:
        d["commitments"]["maxPerDay"] = -1
        _hb(d)["every"] = "soon"
        d["channels"]["discord"]["enabld"] = True

    with pytest.raises(ConfigError) as error:
        parse_config_text(json.dumps(_edit(break_three)), "k.json")
    lines = str(error.value).splitlines()
    assert lines == error.value.problems
    assert sorted(line.split(":")[1].strip() for line in lines) == [
        "agents.0.heartbeat.every",
        "channels.discord.enabld",
        "commitments.maxPerDay",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{\n  "commitments": {"enabled": true,}\n}', "k.json: invalid JSON at line 2, column 35"),
        ('{"llm": {"timeoutSeconds": NaN}}', "k.json: invalid JSON: NaN is not valid JSON"),
        ('{"commitments": {"enabled": true, "enabled": false}}', "duplicate key 'enabled'"),
        ("  \n", "k.json: the file is empty"),
        ("[]", "k.json: the top level must be a JSON object, got a list"),
    ],
)
def test_malformed_json_is_one_clear_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text(text, "k.json")
    assert len(info.value.problems) == 1
    assert expected in info.value.problems[0]


def test_missing_file_and_byte_order_mark(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json: no such file"):
        load_config(tmp_path / "nope.json")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    assert load_config(bom) == load_config(EXAMPLE)


def test_empty_object_means_all_defaults() -> None:
    assert parse_config_text("{}", "k.json") == KeptConfig()


def test_secret_from_env() -> None:
    env = {"TOKEN": " abc\n", "BLANK": "  "}
    assert secret_from_env("TOKEN", env) == "abc"
    assert secret_from_env("BLANK", env) is None
    assert secret_from_env("MISSING", env) is None


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "kept.json"
    path.parent.mkdir()
    path.write_bytes(EXAMPLE.read_bytes())
    return path


# --- live reload ---


class Recorder:
    def __init__(self) -> None:
        self.seen: list[KeptConfig] = []

    def __call__(self, config: KeptConfig) -> None:
        self.seen.append(config)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_watcher_applies_a_changed_valid_file(cfg: Path, clock: TestClock) -> None:
    seen = Recorder()
    watcher = ConfigWatcher(cfg, load_config(cfg), on_change=seen, clock=clock)
    assert await watcher.check_once() is False  # same content as loaded
    set_value(cfg, "commitments.maxPerDay", "7")
    assert await watcher.check_once() is True
    assert [c.commitments.max_per_day for c in seen.seen] == [7]
    assert watcher.current.commitments.max_per_day == 7
    assert await watcher.check_once() is False


async def test_watcher_awaits_async_callbacks_and_survives_their_errors(
    cfg: Path, clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    async def on_change(config: KeptConfig) -> None:
        calls.append(config.commitments.max_per_day)
        raise RuntimeError("consumer bug")

    watcher = ConfigWatcher(cfg, load_config(cfg), on_change=on_change, clock=clock)
    set_value(cfg, "commitments.maxPerDay", "8")
    assert await watcher.check_once() is True
    set_value(cfg, "commitments.maxPerDay", "9")
    assert await watcher.check_once() is True
    assert calls == [8, 9]
    assert watcher.current.commitments.max_per_day == 9
    assert "applying the reloaded config failed" in caplog.text


async def test_watcher_keeps_the_old_config_for_a_bad_file_and_warns_once(
    cfg: Path, clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.config")
    seen = Recorder()
    old = load_config(cfg)
    watcher = ConfigWatcher(cfg, old, on_change=seen, clock=clock)
    bad = _edit(lambda d: d["commitments"].update(maxPerDay="lots"))
    write(cfg, bad)
    assert await watcher.check_once() is False
    write(cfg, bad)  # saved again, same content
    os.utime(cfg, ns=(5_000_000_000, 5_000_000_000))
    assert await watcher.check_once() is False
    assert await watcher.check_once() is False
    assert watcher.current is old and seen.seen == []
    [warning] = _warnings(caplog)
    assert str(cfg) in warning
    assert "commitments.maxPerDay: Input should be a valid integer" in warning
    assert "previous config stays in force" in warning
    assert "\n" not in warning

    write(cfg, _edit(lambda d: _hb(d).update(every="soon")))  # a different mistake
    assert await watcher.check_once() is False
    assert len(_warnings(caplog)) == 2

    write(cfg, _edit(lambda d: d["commitments"].update(maxPerDay=4)))
    assert await watcher.check_once() is True
    assert seen.seen[-1].commitments.max_per_day == 4


async def test_watcher_ignores_resaves_and_survives_a_missing_file(
    cfg: Path, clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Recorder()
    watcher = ConfigWatcher(cfg, load_config(cfg), on_change=seen, clock=clock)
    doc = example_doc()
    _write_compact(cfg, doc)  # reformatted, same config
    assert await watcher.check_once() is False
    _remove(cfg)
    assert await watcher.check_once() is False
    assert await watcher.check_once() is False
    assert len(_warnings(caplog)) == 1 and "cannot read" in _warnings(caplog)[0]
    write(cfg, doc)
    assert await watcher.check_once() is False
    assert seen.seen == []


async def test_watcher_run_polls_on_the_clock(cfg: Path, clock: TestClock) -> None:
    seen = Recorder()
    watcher = ConfigWatcher(cfg, load_config(cfg), on_change=seen, clock=clock, interval=2)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.sleep(0)
        assert clock.sleepers == 1
        set_value(cfg, "commitments.enabled", "false")
        await clock.advance(1)
        assert seen.seen == []
        await clock.advance(1)
        assert [c.commitments.enabled for c in seen.seen] == [False]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_removed_agent_is_not_found_and_answers_with_defaults() -> None:
    config = KeptConfig.model_validate({"agents": [{"id": "main", "timezone": "Europe/Paris"}]})
    assert config.find_agent("main") is config.agents[0]
    assert config.find_agent("gone") is None
    assert config.agent_or_default("main").timezone == "Europe/Paris"
    fallback = config.agent_or_default("gone")
    assert (fallback.id, fallback.timezone) == ("gone", "UTC")


def test_retention_is_a_duration_of_a_day_or_more_or_null() -> None:
    config = load_config(EXAMPLE)
    assert config.storage.retention.messages is None  # kept forever unless asked
    assert config.storage.retention.closed == "90d"
    assert KeptConfig().storage.retention == config.storage.retention
    set_to = parse_config_text(
        '{"storage": {"retention": {"messages": "365d", "closed": null}}}', "k.json"
    ).storage.retention
    assert set_to.messages_seconds == 365 * 86_400 and set_to.closed_seconds is None
    for bad, reason in (("a year", "not a duration"), ("1h", "shorter than a day")):
        problems = problems_for({"storage": {"retention": {"messages": bad}}})
        assert len(problems) == 1, problems
        assert problems[0].startswith("config/kept.json: storage.retention.messages: ")
        assert reason in problems[0]
    problems = problems_for({"storage": {"retention": {"closed": 90}}})
    assert len(problems) == 1 and "storage.retention.closed" in problems[0]
