"""The Dockerfile's build steps, run where Docker is not: its COPY lines
into a temporary source tree, then its `python -m venv` + `pip install` of
that tree into a clean venv, then `kept` from that venv, outside the repo.

What differs from a real `docker build`, because tests never leave
loopback: the wheel is built with the dev venv's setuptools (no build
isolation, which would download the build backend) and installed without
its dependencies, which the clean venv sees through a .pth file pointing
at the dev venv. Not run at all: pulling the base image, `useradd`/`chown`,
USER, and the HEALTHCHECK inside a container (tests/bot/test_deploy.py
reads those)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def dockerfile_steps() -> list[tuple[str, str]]:
    text = re.sub(r"\s*\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            steps.append((word.upper(), rest.strip()))
    return steps


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_dockerfile_build_steps_install_a_working_kept_into_a_clean_venv(
    tmp_path: Path,
) -> None:
    steps = dockerfile_steps()
    src = tmp_path / "src"
    opt = tmp_path / "opt" / "kept"

    # COPY, as the Dockerfile lists it (WORKDIR /src).
    src.mkdir()
    for kind, arg in steps:
        if kind == "COPY":
            *sources, dest = shlex.split(arg)
            for source in sources:
                origin = ROOT / source
                target = src / dest / origin.name if dest.endswith("/") else src / dest
                if origin.is_dir():
                    shutil.copytree(
                        origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                    )
                else:
                    shutil.copy2(origin, target)

    # The RUN that builds the venv, with its paths moved under tmp_path.
    (install,) = [arg for kind, arg in steps if kind == "RUN" and "pip install" in arg]
    assert install == "python -m venv /opt/kept && /opt/kept/bin/pip install /src"
    run([sys.executable, "-m", "venv", str(opt)], cwd=tmp_path)
    wheels = tmp_path / "wheels"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(wheels), str(src)],
        cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = wheels.glob("kept_bot-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packages = {name.split("/")[0] for name in archive.namelist()}
    assert {"bot", "channels", "core"} <= packages
    assert not {"tests", "bench", "docs"} & packages
    run(
        [str(opt / "bin" / "pip"), "install", "--no-index", "--no-deps", "-q", str(wheel)],
        cwd=tmp_path,
    )

    # The dependencies, from the dev venv (see the module docstring).
    purelib = Path(run([str(opt / "bin" / "python"), "-c",
                        "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=tmp_path).strip())  # fmt: skip
    (purelib / "kept-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    # `kept` from the venv, run from elsewhere: the installed code, not the repo's.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{opt / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run(
        [str(opt / "bin" / "python"), "-c", "import bot, core, channels; print(core.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert Path(where.strip()).is_relative_to(opt)
    usage = run(["kept", "--help"], cwd=elsewhere, env=env)
    assert "run" in usage and "Traceback" not in usage
    assert "--config" in run(["kept", "run", "--help"], cwd=elsewhere, env=env)
