"""`kept pairing list` and `kept pairing approve CODE`, the real entry point
in a subprocess (a traceback would show), on a seeded SQLite database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.clock import SystemClock
from core.pairing import Pairing
from core.store.backends import open_backend

ROOT = Path(__file__).resolve().parents[2]


def kept(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KEPT_CONFIG": "", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args, "--config", str(config)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )  # fmt: skip


async def seeded(tmp_path: Path) -> tuple[Path, str]:
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    async with open_backend(url) as backend:
        request = await Pairing(backend.pairing, SystemClock()).code_for("discord", "99", "ben")
    assert request is not None
    config = tmp_path / "kept.json"
    config.write_text(json.dumps({"storage": {"url": url}}))
    return config, request.code


async def test_list_shows_pending_codes_then_approved_users(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    listed = kept(config, "pairing", "list")
    assert listed.returncode == 0, listed.stderr
    assert "pending (1):" in listed.stdout and code in listed.stdout
    assert "discord:99 (@ben)" in listed.stdout and "approved (0):" in listed.stdout

    approved = kept(config, "pairing", "approve", f"{code[:4]}-{code[4:]}", "--json")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["userId"] == "99"

    listed = kept(config, "pairing", "list")
    assert "pending (0):" in listed.stdout and code not in listed.stdout
    assert "approved (1):" in listed.stdout and "discord:99 (@ben)" in listed.stdout


async def test_approving_twice_is_one_clear_line(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    assert kept(config, "pairing", "approve", code).returncode == 0
    again = kept(config, "pairing", "approve", code)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith(f"kept: no pending pairing request has the code {code}")
    assert "Traceback" not in again.stderr and len(again.stderr.splitlines()) == 1
    blank = kept(config, "pairing", "approve", "--")
    assert blank.returncode != 0 and "Traceback" not in blank.stderr


async def test_revoke_forgets_an_approved_user(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    assert kept(config, "pairing", "approve", code).returncode == 0
    revoked = kept(config, "pairing", "revoke", "discord:99")
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip() == "revoked discord:99"
    listed = json.loads(kept(config, "pairing", "list", "--json").stdout)
    assert listed == {"pending": [], "approved": []}
    again = kept(config, "pairing", "revoke", "discord:99")
    assert again.returncode == 1 and "not an approved user" in again.stderr
    bad = kept(config, "pairing", "revoke", "99")
    assert bad.returncode == 1 and "PLATFORM:USER" in bad.stderr and "Traceback" not in bad.stderr
