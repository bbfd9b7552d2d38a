"""`kept config` with KEPT_ variables: where each value came from, an
overriding variable named on `set`, and an environment-only deployment
(no file at all) run as a real process, as on a git-push host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.config_cmd import config_group

ROOT = Path(__file__).resolve().parents[2]


def kept_config(*args: str) -> Result:
    return CliRunner().invoke(config_group, list(args))


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"commitments": {"maxPerDay": 5}}) + "\n")
    return path


def test_show_says_where_each_value_came_from(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPT_LLM__APIKEYENV", "MY_KEY")
    monkeypatch.setenv("MY_KEY", "sk-FAKE-secret-0001")
    monkeypatch.setenv("KEPT_AGENTS", '[{"id": "main", "timezone": "Europe/Paris"}]')
    result = kept_config("show", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"# source: {cfg} + environment (KEPT_AGENTS, KEPT_LLM__APIKEYENV)"
    assert 'llm.apiKeyEnv = "MY_KEY"  # env KEPT_LLM__APIKEYENV; $MY_KEY is set' in lines
    assert 'agents.0.timezone = "Europe/Paris"  # env KEPT_AGENTS' in lines
    assert "commitments.maxPerDay = 5  # file" in lines
    assert "commitments.enabled = true  # default" in lines
    assert 'logging.format = "text"  # default (restart)' in lines
    assert "sk-FAKE-secret-0001" not in result.output


def test_show_json_carries_values_origins_and_source(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEPT_STORAGE__URL", "postgresql://kept:hunter2-secret@db/kept")
    result = kept_config("show", "--json", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["source"] == {"file": str(cfg), "environment": ["KEPT_STORAGE__URL"]}
    assert answer["values"]["storage"]["url"] == "postgresql://kept:***@db/kept"
    assert answer["origins"]["storage.url"] == "env:KEPT_STORAGE__URL"
    assert answer["origins"]["commitments.maxPerDay"] == "file"
    assert answer["origins"]["llm.timeoutSeconds"] == "default"
    assert "hunter2" not in result.output


def test_set_writes_the_file_and_names_the_variable_that_overrides_it(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEPT_COMMITMENTS__MAXPERDAY", "7")
    result = kept_config("set", "commitments.maxPerDay", "9", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    assert result.stdout == "commitments.maxPerDay = 9\n"
    assert result.stderr == (
        "kept: $KEPT_COMMITMENTS__MAXPERDAY overrides commitments.maxPerDay: the value in "
        "force stays the variable's until it is unset\n"
    )
    assert json.loads(cfg.read_text())["commitments"]["maxPerDay"] == 9
    assert kept_config("get", "commitments.maxPerDay", "--config", str(cfg)).stdout == "7\n"
    plain = kept_config("set", "commitments.enabled", "true", "--config", str(cfg))
    assert plain.exit_code == 0 and plain.stderr == ""


def test_a_bad_variable_is_one_line_and_exit_1(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPT_COMMITMENTS__MAXPERDAY", "lots")
    result = kept_config("validate", "--config", str(cfg))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "KEPT_COMMITMENTS__MAXPERDAY: Input should be a valid integer, "
        'unable to parse string as an integer (got "lots")\n'
    )


# --- as a process, with no file and only KEPT_ variables ---


def kept_process(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`kept ARGS` from `cwd` (no config file there) with only `env` as KEPT_
    variables; PYTHONPATH makes it import this checkout's code."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("KEPT_")}
    clean.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


ENV_ONLY = {
    "KEPT_STORAGE__URL": "sqlite:///state/kept.sqlite",
    "KEPT_STORAGE__PINCPU": "false",
    "KEPT_CHANNELS__TELEGRAM__ALLOWFROM": "[12345]",
    "KEPT_AGENTS": '[{"id": "main", "timezone": "Europe/Paris"}]',
    "KEPT_LLM__BASEURL": "http://127.0.0.1:9/v1",
}


def test_config_show_and_validate_work_with_only_the_environment(tmp_path: Path) -> None:
    shown = kept_process(tmp_path, ENV_ONLY, "config", "show")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "# source: environment (" + ", ".join(sorted(ENV_ONLY)) + ")"
    assert 'storage.url = "sqlite:///state/kept.sqlite"  # env KEPT_STORAGE__URL (restart)' in lines
    assert 'channels.telegram.allowFrom = ["12345"]  # env KEPT_CHANNELS__TELEGRAM__ALLOWFROM' in (
        lines
    )
    assert "commitments.maxPerDay = 3  # default" in lines
    valid = kept_process(tmp_path, ENV_ONLY, "config", "validate")
    assert valid.returncode == 0 and valid.stderr == ""
    assert valid.stdout == "environment (" + ", ".join(sorted(ENV_ONLY)) + "): ok\n"
    assert list(tmp_path.iterdir()) == []  # no config file, no database created


def test_a_misspelt_variable_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    done = kept_process(tmp_path, {"KEPT_STORAGE_URL": "sqlite:///x.db"}, "config", "validate")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "KEPT_STORAGE_URL: not a kept setting (did you mean KEPT_STORAGE__URL?)\n"


class _RejectsEveryToken(BaseHTTPRequestHandler):
    """A Bot API that answers 401 to everything: a start that fails at once."""

    def do_POST(self) -> None:
        body = json.dumps({"ok": False, "error_code": 401, "description": "Unauthorized"})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_the_procfile_runs_from_the_environment_alone_and_logs_json(tmp_path: Path) -> None:
    # The Procfile's command, as a git-push host runs it, configured by the
    # environment alone. Telegram is enabled but rejects the token, so the
    # run ends right after its start-up line (an unreachable API would be
    # retried: the run would stay up).
    [worker] = (ROOT / "Procfile").read_text().splitlines()
    program, *args = worker.removeprefix("worker:").split()
    assert program == "kept"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RejectsEveryToken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **ENV_ONLY,
        "KEPT_LOGGING__FORMAT": "json",
        "KEPT_CHANNELS__TELEGRAM__ENABLED": "true",
        "KEPT_CHANNELS__TELEGRAM__BASEURL": f"http://127.0.0.1:{server.server_address[1]}",
        "OPENAI_API_KEY": "sk-test",
        "TELEGRAM_BOT_TOKEN": "123:not-a-real-token",
    }
    try:
        done = kept_process(tmp_path, env, *args)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert "Telegram rejected the token in $TELEGRAM_BOT_TOKEN" in lines[-1]
    assert "not-a-real-token" not in done.stderr
    records = [json.loads(line) for line in lines[:-1]]  # every log line is JSON
    [start] = [r for r in records if r.get("event") == "starting"]
    variables = sorted(k for k in env if k.startswith("KEPT_"))
    assert start["config"] == "environment (" + ", ".join(variables) + ")"
    assert start["storage"] == "sqlite" and start["channels"] == "telegram"
    assert start["level"] == "INFO" and start["logger"] == "kept.runtime"
    assert not (tmp_path / "config").exists()  # the example is not copied in


def test_logging_level_from_the_environment_quiets_kept_run(tmp_path: Path) -> None:
    env = {**ENV_ONLY, "KEPT_LOGGING__LEVEL": "WARNING", "OPENAI_API_KEY": "sk-test"}
    done = kept_process(tmp_path, env, "run")
    assert done.returncode == 1
    assert "starting" not in done.stderr and " INFO " not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("kept: no channel is enabled")


def test_kept_run_with_a_bad_variable_is_one_line_naming_it(tmp_path: Path) -> None:
    env = {**ENV_ONLY, "KEPT_CHANNELS__TELEGRAM__ENABLED": "yes please"}
    done = kept_process(tmp_path, env, "run")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "KEPT_CHANNELS__TELEGRAM__ENABLED: Input should be a valid boolean, "
        'unable to interpret input (got "yes please")\n'
    )


def test_set_without_a_file_in_an_env_only_deployment_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEPT_COMMITMENTS__ENABLED", "true")
    missing = tmp_path / "kept.json"
    result = kept_config("set", "commitments.maxPerDay", "2", "--config", str(missing))
    assert result.exit_code == 1 and not missing.exists()
    assert result.stderr.splitlines() == [
        f"{missing}: no such file",
        "kept: `config set` edits only the file; change the KEPT_ variable instead, "
        "or create the file from config/kept.example.json",
    ]


def test_show_says_storage_url_came_from_database_url(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://kept:pw-secret@db.example:5432/kept")
    result = kept_config("show", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"# source: {cfg} + environment (DATABASE_URL)"
    shown = 'storage.url = "postgres://kept:***@db.example:5432/kept"  # env DATABASE_URL (restart)'
    assert shown in lines
    assert "pw-secret" not in result.output
