"""Reloads say what they changed: a reload that widens access warns exactly
as a start with that setting does (one code path), a changed restart-only
key says it waits for the next start, and `kept config show` marks those keys."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.runtime import Runtime
from channels.access import Access, announce_access
from core.clock import TestClock
from core.config.changes import announce_search_visibility, restart_only, restart_only_changes
from core.config.file import load_config

ENV = {"OPENAI_API_KEY": "sk-test"}


class StubAdapter:
    """A running channel as the runtime sees it: its platform, its access as
    the config says now, and the adapter base's announce_access."""

    platform = "telegram"

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def access(self) -> Access:
        return Access.of(self._runtime.config.channels.telegram)

    async def stop(self) -> None:
        return None

    def announce_access(self, before: Access | None = None) -> None:
        announce_access(logging.getLogger("kept.telegram"), self.platform, self.access(), before)


def write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc))


def base_doc(tmp_path: Path) -> dict[str, Any]:
    return {
        "storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"},
        "channels": {"telegram": {"dmPolicy": "allowlist", "allowFrom": ["1"]}},
    }


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def reload(runtime: Runtime, clock: TestClock) -> None:
    for _ in range(3):
        await clock.advance(5)


async def test_a_reload_that_widens_access_warns_as_a_start_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kept.json"
    narrow = base_doc(tmp_path)
    write(path, narrow)
    clock = TestClock()
    runtime = Runtime(path, load_config(path, ENV), clock=clock, environ=ENV)
    await runtime.start_core()
    runtime.adapters.append(StubAdapter(runtime))  # type: ignore[arg-type]
    try:
        wide = json.loads(json.dumps(narrow))
        wide["channels"]["telegram"].update(
            dmPolicy="open", groupPolicy="open", allowFrom=["1", "2"], groups=["-100"]
        )
        wide["sessions"] = {"search": {"visibility": "agent"}}
        caplog.clear()
        with caplog.at_level(logging.INFO):
            write(path, wide)
            await reload(runtime, clock)
        assert runtime.config.channels.telegram.dm_policy == "open"
        on_reload = warnings(caplog)
        # A re-save of the same widened file warns about nothing again.
        caplog.clear()
        wide["commitments"] = {"maxPerDay": 4}
        with caplog.at_level(logging.INFO):
            write(path, wide)
            await reload(runtime, clock)
        assert runtime.config.commitments.max_per_day == 4
        assert warnings(caplog) == []
    finally:
        await runtime.stop()

    # A start with the widened config: the very same warnings.
    caplog.clear()
    started = load_config(path, ENV)
    with caplog.at_level(logging.INFO):
        announce_access(
            logging.getLogger("kept.telegram"), "telegram", Access.of(started.channels.telegram)
        )
        announce_search_visibility(logging.getLogger("kept.runtime"), started)
    at_start = warnings(caplog)
    assert [m for m in on_reload if not m.startswith("telegram_access_widened")] == at_start
    assert any(m.startswith("telegram_dms_open") for m in at_start)
    assert any(m.startswith("telegram_groups_open") for m in at_start)
    assert any(m.startswith("search_visibility_wide") for m in at_start)
    widened = [m for m in on_reload if m.startswith("telegram_access_widened")]
    assert len(widened) == 2
    assert "key=channels.telegram.allowFrom added=2" in widened[0]
    assert "key=channels.telegram.groups added=-100" in widened[1]


async def test_a_changed_restart_only_key_says_it_waits_for_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kept.json"
    doc = base_doc(tmp_path)
    write(path, doc)
    clock = TestClock()
    runtime = Runtime(path, load_config(path, ENV), clock=clock, environ=ENV)
    await runtime.start_core()
    try:
        doc["storage"]["url"] = f"sqlite:///{tmp_path}/other.sqlite"
        doc["http"] = {"listen": "127.0.0.1:9"}
        doc["channels"]["telegram"]["tokenEnv"] = "OTHER_TOKEN"
        doc["channels"]["telegram"]["webhook"] = {"url": "https://hook.example/tg"}
        doc["commitments"] = {"maxPerDay": 5}
        caplog.clear()
        with caplog.at_level(logging.INFO):
            write(path, doc)
            await reload(runtime, clock)
        assert runtime.config.commitments.max_per_day == 5
    finally:
        await runtime.stop()
    restart = [m for m in warnings(caplog) if m.startswith("config_restart_needed")]
    keys = [m.split("key=")[1].split()[0] for m in restart]
    assert keys == [
        "channels.telegram.tokenEnv",
        "channels.telegram.webhook",
        "http.listen",
        "storage.url",
    ]
    assert all("restart kept to apply it" in m for m in restart)


def test_restart_only_keys_follow_the_readme() -> None:
    for key in (
        "storage.url",
        "channels.discord.enabled",
        "channels.telegram.tokenEnv",
        "channels.telegram.webhook.url",
        "http.listen",
        "logging.format",
    ):
        assert restart_only(key) is not None, key
    for key in ("llm.baseUrl", "channels.telegram.dmPolicy", "sessions.search.visibility"):
        assert restart_only(key) is None, key
    a = load_config(Path("/nonexistent"), {"KEPT_HTTP__LISTEN": "127.0.0.1:1"})
    b = load_config(Path("/nonexistent"), {"KEPT_HTTP__LISTEN": "127.0.0.1:2"})
    assert restart_only_changes(a, b) == ["http.listen"]


def test_config_show_marks_restart_only_keys(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    write(path, base_doc(tmp_path))
    result = CliRunner().invoke(main, ["config", "show", "--config", str(path)], env=ENV)
    assert result.exit_code == 0, result.output
    rows = {r.split(" = ")[0]: r for r in result.stdout.splitlines() if " = " in r}
    assert rows["storage.url"].endswith(" (restart)")
    assert rows["http.listen"].endswith(" (restart)")
    assert not rows["commitments.maxPerDay"].endswith(" (restart)")
    assert "(restart): read at start" in result.stdout
    shown = CliRunner().invoke(main, ["config", "show", "--json", "--config", str(path)], env=ENV)
    restart = json.loads(shown.stdout)["restartOnly"]
    assert "storage.url" in restart and "commitments.maxPerDay" not in restart
