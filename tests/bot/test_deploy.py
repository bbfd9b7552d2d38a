"""The packaging for a server, read as a service manager would: the systemd
unit (deploy/kept.service) and the Dockerfile's directives. Their build
steps run in tests/e2e/test_packaging.py."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from core.config.model import ShutdownConfig

ROOT = Path(__file__).resolve().parents[2]


def unit_sections(text: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section -> key -> every value it was given
    (a key may repeat); comments and blank lines skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"a key before any section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def timespan_seconds(value: str) -> float:
    """A systemd time span such as "30", "30s", "1min 30s", "2m"."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def test_the_systemd_unit_restarts_on_failure_and_outwaits_the_grace_period() -> None:
    unit = unit_sections((ROOT / "deploy" / "kept.service").read_text())
    service = unit["Service"]
    assert service["Restart"] == ["on-failure"]
    assert service["ExecStart"][0].endswith("/kept run")
    assert service["EnvironmentFile"] == ["/etc/kept/kept.env"]
    assert service["KillSignal"] == ["SIGTERM"]
    assert service["User"] == ["kept"]
    grace = ShutdownConfig().grace_seconds
    # Longer than the grace period, with room for the stores to close.
    assert timespan_seconds(service["TimeoutStopSec"][0]) >= grace + 10
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    # Start limits are [Unit] keys (systemd ignores them under [Service]).
    assert "StartLimitBurst" in unit["Unit"]


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_runs_kept_as_a_non_root_user_with_a_data_volume() -> None:
    steps = dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [arg for kind, arg in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("VOLUME", '["/data"]') in steps
    cmd = [arg for kind, arg in steps if kind == "CMD"]
    assert json.loads(cmd[-1]) == ["kept", "run"]
    env = " ".join(arg for kind, arg in steps if kind == "ENV")
    assert "KEPT_STORAGE__URL=sqlite:////data/kept.sqlite" in env
    listen = re.search(r"KEPT_HTTP__LISTEN=\S+:(\d+)", env)
    assert listen is not None
    # The health check asks /healthz on the port the listener is given.
    (check,) = [arg for kind, arg in steps if kind == "HEALTHCHECK"]
    assert f"127.0.0.1:{listen.group(1)}/healthz" in check
    command = json.loads(check.partition("CMD ")[2])
    assert command[:2] == ["python", "-c"]
    compile(command[2], "<healthcheck>", "exec")  # valid Python, one line


def test_every_path_the_dockerfile_copies_exists_and_is_not_docker_ignored() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for kind, arg in dockerfile():
        if kind != "COPY":
            continue
        *sources, _ = shlex.split(arg)
        for source in sources:
            assert (ROOT / source).exists(), source
            assert source not in ignored, source
