"""`kept backup PATH`: SQLite copied and checked, one line; a target that
exists or a directory that does not is one line and writes nothing;
PostgreSQL gets the pg_dump command, its password never printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.support.user_data import seeded_config


def config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"storage": {"url": url}, "agents": [{"id": "main"}]}))
    return path


@pytest.fixture
async def cfg(tmp_path: Path) -> Path:
    return await seeded_config(tmp_path)


def backup(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["backup", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def test_a_sqlite_backup_is_made_checked_and_told(cfg: Path, tmp_path: Path) -> None:
    code, out, err = backup(cfg, str(tmp_path / "one.sqlite"))
    assert (code, err) == (0, "")
    assert re.fullmatch(
        rf"Backed up 12 messages \(schema \d+\) to {re.escape(str(tmp_path))}/one\.sqlite: "
        r"[\d.]+ MB in [\d.]+ s, integrity checked\.\n",
        out,
    )
    code, out, _ = backup(cfg, str(tmp_path / "two.sqlite"), "--json")
    document = json.loads(out)
    assert code == 0 and document["messages"] == 12 and document["bytes"] > 0


def test_a_target_that_exists_or_has_no_directory_is_one_line(cfg: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken.sqlite"
    taken.write_bytes(b"keep me")
    code, out, err = backup(cfg, str(taken))
    assert (code, out) == (1, "") and err == f"kept: {taken} already exists; name a new file\n"
    assert taken.read_bytes() == b"keep me"
    code, out, err = backup(cfg, str(tmp_path / "nowhere" / "copy.sqlite"))
    assert code == 1 and err.startswith("kept: no directory") and len(err.splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


def test_postgresql_is_told_the_pg_dump_command_without_its_password(tmp_path: Path) -> None:
    cfg = config(tmp_path, "postgresql://kept:s3cret@db.internal/kept")
    code, out, err = backup(cfg, "/backups/kept.dump")
    assert (code, err) == (0, "")
    assert out.startswith("PostgreSQL is backed up with its own tool: pg_dump --format=custom")
    assert "--file=/backups/kept.dump" in out and "s3cret" not in out
    assert len(out.splitlines()) == 1


def restore(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["restore", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def test_restore_asks_then_puts_the_backup_back(cfg: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.sqlite"
    assert backup(cfg, str(copy))[0] == 0
    code, out, err = restore(cfg, str(copy))
    assert code == 1 and out == "" and err.endswith(" Nothing changed: add --yes.\n")
    assert err.startswith("kept: This replaces the database at")
    code, out, err = restore(cfg, str(copy), "--yes")
    assert (code, err) == (0, "")
    assert re.fullmatch(
        rf"Restored 12 messages \(schema \d+\) into {re.escape(str(tmp_path))}/kept\.sqlite; "
        rf"the replaced database is kept at {re.escape(str(tmp_path))}/kept\.sqlite\.replaced-"
        r"\d{8}T\d{6}Z\.\n",
        out,
    )
    code, out, err = restore(cfg, str(tmp_path / "missing.sqlite"), "--yes")
    assert (code, out) == (1, "") and err.startswith("kept: no backup at")


def test_postgresql_is_told_the_pg_restore_command(tmp_path: Path) -> None:
    cfg = config(tmp_path, "postgresql://kept:s3cret@db.internal/kept")
    code, out, _ = restore(cfg, "/backups/kept.dump")
    assert code == 0 and out.startswith("PostgreSQL is restored with its own tool")
    assert "pg_restore" in out and "s3cret" not in out
