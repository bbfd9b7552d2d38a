"""`kept updates list` and `kept updates retry` through click's CliRunner on
a real database file: one line (or --json), and never a database created."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from bot.cli import main
from core.store.backends import open_backend
from core.store.parked import ParkedUpdate

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def config(tmp_path: Path, db: Path) -> Path:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"storage": {"url": f"sqlite:///{db}"}}))
    return path


def kept(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["updates", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


async def park(db: Path, *update_ids: int) -> None:
    async with open_backend(f"sqlite:///{db}") as backend:
        for uid in update_ids:
            await backend.parked.park(
                ParkedUpdate("telegram:1", uid, "chat:42", "{}", "OperationalError: x", 5, T0)
            )


def test_retry_refuses_a_missing_database_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "data" / "kept.sqlite"
    cfg = config(tmp_path, db)
    for args in (("retry",), ("retry", "--json"), ("list",)):
        code, out, err = kept(cfg, *args)
        assert code == 1 and out == ""
        assert err.startswith("kept: no database at ") and err.count("\n") == 1
    assert not db.parent.exists()


def test_list_and_retry(tmp_path: Path) -> None:
    db = tmp_path / "kept.sqlite"
    cfg = config(tmp_path, db)
    asyncio.run(park(db))  # creates the database, nothing parked
    assert kept(cfg, "retry") == (0, "no parked updates\n", "")
    assert kept(cfg, "list") == (0, "no parked updates\n", "")
    asyncio.run(park(db, 7, 8))
    code, out, _ = kept(cfg, "list")
    assert code == 0 and out.splitlines() == [
        "telegram:1 update 7 (chat:42), 5 tries, parked 2026-03-01T12:00:00Z: OperationalError: x",
        "telegram:1 update 8 (chat:42), 5 tries, parked 2026-03-01T12:00:00Z: OperationalError: x",
    ]
    code, out, err = kept(cfg, "retry")
    assert (code, err) == (0, "")
    assert out.startswith("2 parked updates marked for retry: a running `kept run` replays them")
    assert out.count("\n") == 1
    assert kept(cfg, "retry", "--json") == (0, '{"retryRequested": 2}\n', "")
    code, out, _ = kept(cfg, "list", "--json")
    listed = json.loads(out)["parked"]
    assert [p["updateId"] for p in listed] == [7, 8] and listed[0]["retryRequestedAt"]
