"""`kept users timezone` through click's CliRunner, on a real database file,
and once as a subprocess (`python -m bot`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.support.store_helpers import open_store

ROOT = Path(__file__).resolve().parents[2]


def write_config(path: Path, url: str) -> Path:
    path.write_text(
        json.dumps(
            {"storage": {"url": url}, "agents": [{"id": "main", "timezone": "Europe/Berlin"}]}
        )
    )
    return path


@pytest.fixture
async def cfg(tmp_path: Path) -> Path:
    """A config whose database exists, as the bot's first start leaves it."""
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    store = open_store(url)
    await store.open()
    await store.close()
    return write_config(tmp_path / "kept.json", url)


def kept(cfg: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["users", "timezone", *args, "--config", str(cfg)])
    return result.exit_code, result.stdout, result.stderr


def test_set_show_and_clear_a_users_zone(cfg: Path) -> None:
    # The CLI's clock is the wall clock: the local time is checked by shape.
    local = r"\w+ \d\d \w+ \d\d:\d\d"
    code, out, err = kept(cfg, "telegram:42")
    assert (code, err) == (0, "")
    assert re.fullmatch(
        rf"telegram:42 has no time zone of their own; I use Europe/Berlin \({local}\)\.\n", out
    )
    code, out, err = kept(cfg, "telegram:42", "asia/tokyo")
    assert (code, err) == (0, "")
    assert re.fullmatch(
        rf"telegram:42's time zone is now Asia/Tokyo \(it is {local} there\)\.\n", out
    )
    code, out, _ = kept(cfg, "telegram:42", "--json")
    assert code == 0
    assert json.loads(out) == {
        "platform": "telegram",
        "userId": "42",
        "timezone": "Asia/Tokyo",
        "effectiveTimezone": "Asia/Tokyo",
        "changed": False,
    }
    # Another platform's user 42 is another person.
    assert kept(cfg, "discord:42")[1].startswith("discord:42 has no time zone of their own")
    code, out, _ = kept(cfg, "telegram:42", "--clear", "--json")
    assert json.loads(out)["timezone"] is None and json.loads(out)["changed"] is True
    assert kept(cfg, "telegram:42")[1].startswith("telegram:42 has no time zone of their own")


@pytest.mark.parametrize(
    "args", [["telegram:42"], ["telegram:42", "--json"], ["telegram:42", "Europe/Paris"]]
)
def test_a_mistyped_storage_url_is_no_database_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    """Showing or setting a zone never creates the database (nor its
    directory) where a mistyped storage.url points."""
    typo = tmp_path / "typo" / "data" / "kept.sqlite"
    cfg = write_config(tmp_path / "kept.json", f"sqlite:///{typo}")
    code, out, err = kept(cfg, *args)
    assert (code, out) == (1, "")
    assert err.startswith(f"kept: no database at {typo}") and err.count("\n") == 1
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["telegram:42", "Mars/Olympus"], "kept: Unknown time zone 'Mars/Olympus'"),
        (["telegram:42", "Paris"], "did you mean Europe/Paris"),
        (["42", "Europe/Paris"], "kept: '42' is not PLATFORM:USER"),
        (["slack:42", "Europe/Paris"], "is not PLATFORM:USER"),
        (["telegram:42", "Europe/Paris", "--clear"], "kept: give a ZONE or --clear, not both"),
    ],
)
def test_a_bad_zone_or_user_is_one_line_and_a_non_zero_exit(
    cfg: Path, args: list[str], message: str
) -> None:
    code, out, err = kept(cfg, *args)
    assert code != 0 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_command_runs_as_a_process(cfg: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot",
            "users",
            "timezone",
            "telegram:7",
            "Europe/Paris",
            "--config",
            str(cfg),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("telegram:7's time zone is now Europe/Paris (it is ")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot",
            "users",
            "timezone",
            "telegram:7",
            "Nowhere",
            "--config",
            str(cfg),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and bad.stdout == ""
    assert (
        bad.stderr.startswith("kept: Unknown time zone 'Nowhere'") and bad.stderr.count("\n") == 1
    )
