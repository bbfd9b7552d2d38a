"""The packaging keeps transcripts private: the systemd unit's state
directory is 0700 and its umask 0077; the Docker image's /data is 0700 and
its entrypoint (run here as Docker would, with sh) sets the umask before it
execs the command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.bot.test_deploy import ROOT, dockerfile, unit_sections


def test_the_systemd_unit_makes_every_file_private() -> None:
    service = unit_sections((ROOT / "deploy" / "kept.service").read_text())["Service"]
    assert service["UMask"] == ["0077"]
    assert service["StateDirectoryMode"] == ["0700"]


def entrypoint() -> list[str]:
    (found,) = [arg for kind, arg in dockerfile() if kind == "ENTRYPOINT"]
    return list(json.loads(found))


def test_the_docker_data_volume_is_created_0700() -> None:
    (made,) = [arg for kind, arg in dockerfile() if kind == "RUN" and "mkdir -p /data" in arg]
    assert "chmod 0700 /data" in made


def test_the_docker_entrypoint_sets_the_umask_and_execs_the_command(tmp_path: Path) -> None:
    script = (
        "import os, sys;"
        "from pathlib import Path;"
        "print(oct(os.umask(0o077)), os.getpid(), sys.argv[1:]);"
        f"Path({str(tmp_path / 'written')!r}).write_text('a conversation')"
    )
    old = os.umask(0o022)  # the usual umask, which the container would inherit
    try:
        with subprocess.Popen(
            [*entrypoint(), sys.executable, "-c", script, "two words", "x"],
            stdout=subprocess.PIPE,
            text=True,
        ) as process:
            out, _ = process.communicate(timeout=30)
    finally:
        os.umask(old)
    assert process.returncode == 0
    umask, pid, args = out.split(" ", 2)
    assert umask == "0o77"
    assert int(pid) == process.pid  # exec'd: the command is PID 1 and gets SIGTERM
    assert args.strip() == "['two words', 'x']"  # arguments passed through intact
    assert stat.S_IMODE((tmp_path / "written").stat().st_mode) == 0o600


def test_the_docker_command_is_still_kept_run() -> None:
    (cmd,) = [arg for kind, arg in dockerfile() if kind == "CMD"]
    assert json.loads(cmd) == ["kept", "run"]
    assert entrypoint()[-1] == "kept"  # $0 of the sh -c line, so "$@" is the whole CMD
