"""`kept doctor` on a database other users can read: the `file privacy`
check fails naming the files and the chmod to run; after running it, the
check passes."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from bot.doctor import run_doctor
from bot.doctor_files import check_file_privacy
from tests.support.store_helpers import open_store


async def database_at(tmp_path: Path) -> tuple[Path, Path]:
    """A config and the database the bot's first start left (no channel,
    no model: those checks fail without a network call)."""
    db = tmp_path / "data" / "kept.sqlite"
    url = f"sqlite:///{db}"
    store = open_store(url)
    await store.open()
    await store.close()
    config = tmp_path / "kept.json"
    config.write_text(json.dumps({"storage": {"url": url}}))
    return config, db


def privacy_line(out: str) -> str:
    [found] = [row for row in out.splitlines() if row[6:21].rstrip() == "file privacy"]
    return found


async def test_a_database_readable_by_others_fails_with_the_chmod_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, db = await database_at(tmp_path)
    await run_doctor(config, environ={})
    assert privacy_line(capsys.readouterr().out).startswith("ok")  # as kept made them
    os.chmod(db.parent, 0o755)  # as an older kept left them under a 022 umask
    os.chmod(db, 0o644)

    code = await run_doctor(config, environ={})
    row = privacy_line(capsys.readouterr().out)
    assert code == 1 and row.startswith("FAIL"), row
    assert f"{db.parent} (0755)" in row and f"{db} (0644)" in row
    command = re.search(r"run `(.+)`$", row)
    assert command is not None, row
    assert command.group(1) == f"chmod 700 {db.parent} && chmod 600 {db}"

    done = await asyncio.create_subprocess_exec("sh", "-c", command.group(1))
    assert await done.wait() == 0
    await run_doctor(config, environ={})
    row = privacy_line(capsys.readouterr().out)
    assert row.startswith("ok") and "owner only" in row, row


async def test_the_json_report_carries_the_failing_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, db = await database_at(tmp_path)
    os.chmod(db, 0o640)
    await run_doctor(config, environ={}, as_json=True)
    report = json.loads(capsys.readouterr().out)
    [check] = [c for c in report["checks"] if c["name"] == "file privacy"]
    assert check["ok"] is False and f"chmod 600 {db}" in check["detail"]
    assert report["ok"] is False


def test_the_wal_and_shm_are_named_too(tmp_path: Path) -> None:
    db = tmp_path / "kept.sqlite"
    wal, shm = tmp_path / "kept.sqlite-wal", tmp_path / "kept.sqlite-shm"
    for path, mode in ((db, 0o600), (wal, 0o644), (shm, 0o604)):
        path.write_bytes(b"")
        os.chmod(path, mode)
    os.chmod(tmp_path, 0o700)
    [check] = check_file_privacy(db)
    assert not check.ok
    assert check.detail.endswith(f"run `chmod 600 {wal} {shm}`")
    assert str(db) + " (" not in check.detail


def test_no_check_without_a_database_file(tmp_path: Path) -> None:
    assert check_file_privacy(None) == []  # PostgreSQL, or :memory:
    assert check_file_privacy(tmp_path / "missing.sqlite") == []  # the database check says so
    # Once the file is there, it is checked.
    db = tmp_path / "kept.sqlite"
    db.write_bytes(b"")
    os.chmod(db, 0o600)
    os.chmod(tmp_path, 0o700)
    [check] = check_file_privacy(db)
    assert check.ok and check.name == "file privacy", check
