"""The start-up line: version, config source, storage backend (never the
URL's password), enabled channels and each one's DM policy; and the
running bot reloading its file under the environment."""

from __future__ import annotations

import importlib.metadata
import json
import logging
from pathlib import Path

import pytest

from bot.runtime import Runtime, serve, startup_fields
from core.clock import TestClock
from core.config.file import load_config
from core.config.model import KeptConfig, validate_document


def runtime_for(path: Path, environ: dict[str, str]) -> Runtime:
    return Runtime(path, load_config(path, environ), environ=environ)


def test_the_start_up_fields_name_file_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"channels": {"telegram": {"enabled": True}}}))
    env = {"KEPT_STORAGE__URL": "postgresql://kept:hunter2-secret@db.internal/kept"}
    fields = startup_fields(runtime_for(path, env))
    assert fields["version"] == importlib.metadata.version("kept-bot")
    assert fields["config"] == f"{path} + environment (KEPT_STORAGE__URL)"
    assert fields["storage"] == "postgresql"
    assert fields["channels"] == "telegram"
    assert "hunter2" not in repr(fields) and "db.internal" not in repr(fields)


def test_the_start_up_fields_of_an_environment_only_deployment(tmp_path: Path) -> None:
    env = {"KEPT_CHANNELS__DISCORD__ENABLED": "true", "KEPT_CHANNELS__TELEGRAM__ENABLED": "1"}
    fields = startup_fields(runtime_for(tmp_path / "absent.json", env))
    assert fields["config"] == (
        "environment (KEPT_CHANNELS__DISCORD__ENABLED, KEPT_CHANNELS__TELEGRAM__ENABLED)"
    )
    assert fields["storage"] == "sqlite" and fields["channels"] == "telegram,discord"


def _policy(config: KeptConfig, platform: str) -> str:
    # channels.<platform>.dmPolicy is being added beside this change; until
    # it exists, an empty allowFrom means anyone may write (today's rule).
    channel = getattr(config.channels, platform)
    fallback = "allowlist" if channel.allow_from else "open"
    return str(getattr(channel, "dm_policy", fallback))


def test_the_start_up_fields_state_each_channels_dm_policy(tmp_path: Path) -> None:
    doc = {
        "channels": {
            "telegram": {"enabled": True, "allowFrom": [42]},
            "discord": {"enabled": True},
        }
    }
    config = validate_document(doc, "test")
    fields = startup_fields(Runtime(tmp_path / "kept.json", config, environ={}))
    assert fields["dm_policy"] == (
        f"telegram:{_policy(config, 'telegram')},discord:{_policy(config, 'discord')}"
    )
    none = startup_fields(Runtime(tmp_path / "kept.json", KeptConfig(), environ={}))
    assert none["channels"] == "none" and none["dm_policy"] == "none"


async def test_serve_logs_the_start_up_line_before_anything_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    env = {"KEPT_STORAGE__URL": "sqlite:///" + str(tmp_path / "kept.sqlite")}
    runtime = runtime_for(tmp_path / "absent.json", env)

    async def storage_down() -> None:
        raise OSError("storage down")

    monkeypatch.setattr(runtime, "start_core", storage_down)
    with pytest.raises(OSError, match="storage down"):
        await serve(runtime)
    first = caplog.records[0]
    assert first.name == "kept.runtime" and first.getMessage().startswith("starting version=")
    assert getattr(first, "kept_fields") == startup_fields(runtime)  # noqa: B009


async def test_the_running_bot_reloads_the_file_under_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}))
    env = {"KEPT_COMMITMENTS__MAXPERDAY": "7", "OPENAI_API_KEY": "sk-test"}
    clock = TestClock()
    runtime = Runtime(path, load_config(path, env), clock=clock, environ=env)
    await runtime.start_core()
    try:
        doc = json.loads(path.read_text())
        doc["commitments"] = {"enabled": True, "maxPerDay": 9}
        path.write_text(json.dumps(doc))
        for _ in range(3):
            await clock.advance(5)
        assert runtime.config.commitments.enabled is True  # the file's change applied
        assert runtime.config.commitments.max_per_day == 7  # the variable still on top
    finally:
        await runtime.stop()
