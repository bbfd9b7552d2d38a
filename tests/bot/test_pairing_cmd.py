"""`kept pairing list`, `approve`, `reject`, `revoke`, `block` and `unblock`,
the real entry point in a subprocess (a traceback would show), on a seeded
SQLite database."""

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
    assert listed == {"pending": [], "approved": [], "blocked": []}
    again = kept(config, "pairing", "revoke", "discord:99")
    assert again.returncode == 1 and "not an approved user" in again.stderr
    bad = kept(config, "pairing", "revoke", "99")
    assert bad.returncode == 1 and "PLATFORM:USER" in bad.stderr and "Traceback" not in bad.stderr


def one_line_failure(result: subprocess.CompletedProcess[str], starts: str) -> None:
    assert result.returncode == 1 and result.stdout == "", result.stdout
    assert result.stderr.startswith(f"kept: {starts}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


async def test_reject_drops_a_pending_code(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    rejected = kept(config, "pairing", "reject", code.lower(), "--json")
    assert rejected.returncode == 0, rejected.stderr
    document = json.loads(rejected.stdout)
    assert (document["code"], document["platform"], document["userId"]) == (code, "discord", "99")
    assert set(document) == {"code", "platform", "userId", "username", "requestedAt", "expiresAt"}
    assert json.loads(kept(config, "pairing", "list", "--json").stdout)["pending"] == []
    one_line_failure(
        kept(config, "pairing", "reject", code), f"no pending pairing request has the code {code}"
    )
    one_line_failure(kept(config, "pairing", "approve", code), "no pending pairing request")


async def test_reject_in_text_names_the_user_and_how_to_keep_them_out(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    rejected = kept(config, "pairing", "reject", code)
    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout.startswith(f"rejected {code} of discord:99 (@ben)")
    assert "kept pairing block discord:99" in rejected.stdout


async def test_block_drops_the_code_lists_the_user_and_unblock_lifts_it(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    blocked = kept(config, "pairing", "block", "discord:@BEN", "--json")
    assert blocked.returncode == 0, blocked.stderr
    document = json.loads(blocked.stdout)
    assert (document["platform"], document["userId"], document["username"]) == (
        "discord",
        "99",
        "ben",
    )
    assert document["droppedCodes"] == [code] and document["wasApproved"] is False
    assert "blockedAt" in document

    listed = json.loads(kept(config, "pairing", "list", "--json").stdout)
    assert listed["pending"] == [] and listed["approved"] == []
    assert [(b["platform"], b["userId"], b["username"]) for b in listed["blocked"]] == [
        ("discord", "99", "ben")
    ]
    text = kept(config, "pairing", "list").stdout
    assert "blocked (1):" in text and "discord:99 (@ben)  blocked" in text
    one_line_failure(kept(config, "pairing", "approve", code), "no pending pairing request")

    # By id, a user kept has never seen: blocked before they write.
    stranger = kept(config, "pairing", "block", "telegram:5")
    assert stranger.returncode == 0, stranger.stderr
    assert (
        stranger.stdout.strip() == "blocked telegram:5: the bot sends them nothing, not even a code"
    )
    one_line_failure(
        kept(config, "pairing", "block", "telegram:@nobody"), "no user is known as @nobody"
    )

    lifted = kept(config, "pairing", "unblock", "@ben", "--json")
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout)["userId"] == "99"
    one_line_failure(
        kept(config, "pairing", "unblock", "discord:99"), "discord:99 is not a blocked user"
    )
    listed = json.loads(kept(config, "pairing", "list", "--json").stdout)
    assert [b["userId"] for b in listed["blocked"]] == ["5"]


async def test_blocking_an_approved_user_revokes_them(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    assert kept(config, "pairing", "approve", code).returncode == 0
    blocked = kept(config, "pairing", "block", "discord:99")
    assert blocked.returncode == 0, blocked.stderr
    assert blocked.stdout.strip() == (
        "blocked discord:99 (@ben): the bot sends them nothing, not even a code; "
        "revoked their approval"
    )
    assert json.loads(kept(config, "pairing", "list", "--json").stdout)["approved"] == []


async def test_revoke_accepts_the_approved_users_username(tmp_path: Path) -> None:
    config, code = await seeded(tmp_path)
    assert kept(config, "pairing", "approve", code).returncode == 0
    one_line_failure(
        kept(config, "pairing", "revoke", "telegram:@ben"),
        "no approved user is known as @ben on telegram",
    )
    revoked = kept(config, "pairing", "revoke", "discord:@Ben", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout) == {"platform": "discord", "userId": "99", "revoked": True}
    one_line_failure(kept(config, "pairing", "revoke", "@ben"), "no approved user is known as @ben")


async def test_an_ambiguous_username_asks_for_the_id(tmp_path: Path) -> None:
    config, _ = await seeded(tmp_path)
    async with open_backend(f"sqlite:///{tmp_path}/kept.sqlite") as backend:
        await Pairing(backend.pairing, SystemClock()).code_for("telegram", "12", "ben")
    one_line_failure(
        kept(config, "pairing", "block", "@ben"),
        "@ben names several users (discord:99, telegram:12)",
    )


async def test_a_mistyped_storage_url_creates_nothing(tmp_path: Path) -> None:
    config = tmp_path / "kept.json"
    missing = tmp_path / "typo" / "kept.sqlite"
    config.write_text(json.dumps({"storage": {"url": f"sqlite:///{missing}"}}))
    for args in (
        ("list", "--json"),
        ("reject", "ABCDEFGH"),
        ("block", "telegram:5", "--json"),
        ("unblock", "telegram:5"),
        ("revoke", "telegram:@ana"),
    ):
        one_line_failure(kept(config, "pairing", *args), "no database at")
    assert not missing.parent.exists()


async def test_a_malformed_user_is_one_line(tmp_path: Path) -> None:
    config, _ = await seeded(tmp_path)
    for typed in ("99", "slack:1", "telegram:", "telegram:@", "@"):
        one_line_failure(kept(config, "pairing", "block", typed), f"{typed!r} is not PLATFORM:USER")
