"""The real `kept` entry point in a subprocess: `kept run` and `kept chat`
refuse to start with one line saying what to set; user errors are one line
and a non-zero exit, never a traceback; the commands that only read create
no database and no directory; `kept --version`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from core.store.sqlite import SqliteStore
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.migrations import load_migrations

# Each test starts `kept` as a subprocess: most of a second of imports.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config" / "kept.example.json"
# Past the key and token checks, so that the storage check is what refuses.
TELEGRAM_ON = {"telegram": {"enabled": True}}
KEYS = {"OPENAI_API_KEY": "k", "TELEGRAM_BOT_TOKEN": "123:t"}
SECRETS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TELEGRAM_BOT_TOKEN", "DISCORD_TOKEN")


def kept(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith("KEPT")}
    # PYTHONPATH: this checkout's code, also when run from another directory.
    base.update({"PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(cwd / ".state")})
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_config(tmp_path: Path, **doc: object) -> Path:
    doc.setdefault("storage", {"url": f"sqlite:///{tmp_path}/kept.sqlite"})
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(doc))
    return path


def one_line_failure(done: subprocess.CompletedProcess[str]) -> str:
    """The process failed with exactly one `kept: ...` line and no traceback."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("kept: ")
    return lines[0]


def test_version_comes_from_the_installed_distribution() -> None:
    done = kept("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"kept {version('kept-bot')}\n"


# --- refusing to start --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "chat"])
def test_no_key_and_no_endpoint_refuses_to_start(tmp_path: Path, command: str) -> None:
    config = write_config(tmp_path)
    line = one_line_failure(kept(command, "--config", str(config)))
    assert "OPENAI_API_KEY" in line and "llm.baseUrl" in line and "OPENAI_BASE_URL" in line
    assert not (tmp_path / "kept.sqlite").exists()  # refused before anything opened


def test_a_local_endpoint_needs_no_key(tmp_path: Path) -> None:
    # Nothing is asked of the endpoint: stdin is empty, so chat ends at once.
    config = write_config(tmp_path, llm={"baseUrl": "http://127.0.0.1:9/v1"})
    done = kept("chat", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "kept.sqlite").exists()  # started: past the checks, storage opened
    done = kept(
        "chat",
        "--config",
        str(write_config(tmp_path)),
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
        stdin="/help\n",  # answered without the endpoint
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Talk to kept") and "/commitments" in done.stdout


@pytest.mark.parametrize(
    ("platform", "variable"), [("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_TOKEN")]
)
def test_an_enabled_channel_without_its_token_refuses_to_start(
    tmp_path: Path, platform: str, variable: str
) -> None:
    config = write_config(tmp_path, channels={platform: {"enabled": True}})
    done = kept("run", "--config", str(config), env={"OPENAI_API_KEY": "k", variable: "  "})
    line = one_line_failure(done)
    assert f"channels.{platform} is enabled but ${variable} is empty" in line


def test_run_with_no_channel_enabled_refuses_before_creating_anything(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    line = one_line_failure(kept("run", "--config", str(config), env={"OPENAI_API_KEY": "k"}))
    assert line.startswith("kept: no channel is enabled") and "kept chat" in line
    assert not (tmp_path / "kept.sqlite").exists()


@pytest.mark.parametrize("command", ["run", "chat"])
def test_storage_that_cannot_be_created_refuses_to_start(tmp_path: Path, command: str) -> None:
    (tmp_path / "a-file").write_text("")
    url = f"sqlite:///{tmp_path}/a-file/data/kept.sqlite"  # a directory under a file
    config = write_config(tmp_path, storage={"url": url}, channels=TELEGRAM_ON)
    line = one_line_failure(kept(command, "--config", str(config), env=KEYS))
    assert line.startswith(f"kept: cannot open the database {url}: ")
    assert "Not a directory" in line


def test_a_database_path_that_is_a_directory_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    config = write_config(
        tmp_path, storage={"url": f"sqlite:///{tmp_path}/db"}, channels=TELEGRAM_ON
    )
    line = one_line_failure(kept("run", "--config", str(config), env=KEYS))
    assert "cannot open the database" in line and "unable to open database file" in line


def test_a_database_that_is_not_one_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "kept.sqlite").write_text("this is not a database, it is a note")
    config = write_config(tmp_path)
    line = one_line_failure(kept("chat", "--config", str(config), env={"OPENAI_API_KEY": "k"}))
    assert "cannot open the database" in line and "not a database" in line


# --- no traceback for a user error ---------------------------------------------------------------


def test_run_outside_the_repository_creates_the_config_from_the_packaged_example(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere" / "kept.json"
    done = kept("run", "--config", str(elsewhere), cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    created, refused = done.stderr.splitlines()
    assert created.startswith(f"kept: created {elsewhere} from ")
    assert refused.startswith("kept: no model API key")
    assert elsewhere.read_bytes() == EXAMPLE.read_bytes()


def test_a_config_file_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    line = one_line_failure(kept("run", "--config", str(tmp_path / "a-file" / "kept.json")))
    assert "cannot create the config file" in line and "--config" in line


def test_an_empty_chat_model_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, llm={"models": {"chat": ""}})
    done = kept("chat", "--config", str(config), env={"OPENAI_API_KEY": "k"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "llm.models.chat: String should have at least 1 character" in done.stderr


# --- the commands that only read create nothing --------------------------------------------------


@pytest.mark.parametrize("args", [["commitments"], ["search", "budget"], ["reminders"], ["doctor"]])
def test_a_read_only_command_reports_a_missing_database_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo" / "data"
    config = write_config(tmp_path, storage={"url": f"sqlite:///{missing}/kept.sqlite"})
    done = kept(*args, "--config", str(config), env={"OPENAI_API_KEY": "k"})
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    assert f"no database at {missing}/kept.sqlite" in done.stderr + done.stdout
    assert not (tmp_path / "typo").exists()


def test_doctor_json_from_the_command_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, llm={"baseUrl": "http://127.0.0.1:9/v1", "maxRetries": 0})
    done = kept("doctor", "--json", "--config", str(config))
    assert done.returncode == 1  # no database yet, and nothing listens on port 9
    report = json.loads(done.stdout)
    assert report["ok"] is False
    failing = {c["name"] for c in report["checks"] if not c["ok"]}
    assert failing == {"database", "model"}
    assert not (tmp_path / "kept.sqlite").exists()


def test_commands_other_than_run_never_upgrade_an_older_database(tmp_path: Path) -> None:
    # An older worker may still run on it: one line saying what upgrades it.
    path = tmp_path / "kept.sqlite"
    latest = len(load_migrations())
    older = SqliteStore(path, migrations=load_migrations()[: latest - 1])
    asyncio.run(_open_and_close(older))
    config = write_config(tmp_path, llm={"baseUrl": "http://127.0.0.1:9/v1", "maxRetries": 0})

    line = one_line_failure(kept("commitments", "--config", str(config)))
    assert f"schema version {latest - 1}" in line and "start `kept run`" in line
    doctor = json.loads(kept("doctor", "--json", "--config", str(config)).stdout)
    [database] = [c for c in doctor["checks"] if c["name"] == "database"]
    assert database["ok"] and "the next `kept run` upgrades it" in database["detail"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (latest - 1,)


async def _open_and_close(store: SqliteStore) -> None:
    await store.open()
    await store.close()
