"""`kept commitments` through click's CliRunner, on a real database file."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result

from bot.commitments_cmd import commitments_group
from core.commitments.model import NewCommitment, Scope
from tests.support.store_helpers import (
    commitment_store_for,
    heartbeat_store_for,
    mark_sent,
    open_store,
)

HOUR = timedelta(hours=1)
# Stored windows are in the future of the real clock the CLI runs on.
SOON = datetime.now(UTC).replace(microsecond=0) + 24 * HOUR
TELEGRAM = Scope(
    "main", "agent:main:telegram:private:42", "telegram", "42", None, "u42", chat_kind="private"
)
DISCORD = Scope(
    "helper",
    "agent:helper:discord:channel:7:thread:8",
    "discord",
    "7",
    "8",
    "u9",
    chat_kind="channel",
)

JSON_KEYS = [
    "id",
    "agentId",
    "sessionKey",
    "platform",
    "chatId",
    "threadId",
    "senderId",
    "kind",
    "status",
    "dueEarliest",
    "dueLatest",
    "suggestedText",
    "reason",
    "confidence",
    "createdAt",
    "sentAt",
]


def new(scope: Scope, key: str, offset: int = 0) -> NewCommitment:
    return NewCommitment(
        scope=scope,
        kind="event_check_in",
        sensitivity="routine",
        source="inferred_user_context",
        reason=f"reason {key}",
        suggested_text=f"How did {key} go?",
        dedupe_key=key,
        confidence=0.9,
        due_earliest=SOON + offset * HOUR,
        due_latest=SOON + (offset + 12) * HOUR,
        due_timezone="Europe/Paris",
        source_message_id=None,
        created_at=SOON - 24 * HOUR,
    )


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "kept.json"
    # Both agents the seeded follow-ups belong to (--agent names a configured one).
    agents = [{"id": "main"}, {"id": "helper"}]
    url = f"sqlite:///{tmp_path}/kept.sqlite"
    path.write_text(json.dumps({"storage": {"url": url}, "agents": agents}))
    return path


def seed(tmp_path: Path) -> dict[str, str]:
    """Three commitments; the `sent` one is final. Returns key -> id."""

    async def go() -> dict[str, str]:
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        await store.open()
        try:
            cs = commitment_store_for(store)
            ids = {}
            for scope, key, offset in ((TELEGRAM, "interview", 0), (DISCORD, "exam", 2)):
                applied = await cs.apply_extraction(scope, [new(scope, key, offset)], [], now=SOON)
                ids[key] = applied.created[0].id
            applied = await cs.apply_extraction(TELEGRAM, [new(TELEGRAM, "trip", 1)], [], now=SOON)
            ids["trip"] = applied.created[0].id
            await mark_sent(heartbeat_store_for(store), ids["trip"], now=SOON, message_id="m1")
            return ids
        finally:
            await store.close()

    return asyncio.run(go())


def kept(cfg: Path, *args: str) -> Result:
    return CliRunner().invoke(commitments_group, [*args, "--config", str(cfg)])


def listed(cfg: Path, *args: str) -> list[dict[str, object]]:
    result = kept(cfg, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["commitments"]


def test_list_is_the_default_and_shows_active_ones(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    default = kept(cfg)
    explicit = kept(cfg, "list")
    assert default.exit_code == 0 and default.stdout == explicit.stdout
    assert ids["interview"] in default.stdout and ids["exam"] in default.stdout
    assert ids["trip"] not in default.stdout
    assert "main / telegram / 42" in default.stdout and "helper / discord / 7 #8" in default.stdout
    assert "How did interview go?" in default.stdout


def test_list_filters(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    assert [c["id"] for c in listed(cfg)] == [ids["interview"], ids["exam"]]
    assert {c["id"] for c in listed(cfg, "--all")} == set(ids.values())
    assert [c["id"] for c in listed(cfg, "--agent", "helper")] == [ids["exam"]]
    assert [c["id"] for c in listed(cfg, "--status", "sent")] == [ids["trip"]]
    assert [c["id"] for c in listed(cfg, "--all", "--agent", "main")] == [
        ids["interview"],
        ids["trip"],
    ]
    detailed = kept(cfg, "--all")
    assert "tries" in detailed.stdout and "sent" in detailed.stdout


def test_unknown_status_names_the_valid_ones(cfg: Path, tmp_path: Path) -> None:
    result = kept(cfg, "--status", "done")
    assert result.exit_code == 1 and result.stdout == ""
    assert "unknown status 'done'" in result.stderr
    assert "pending, snoozed, sent, dismissed, resolved, expired, failed" in result.stderr


def test_json_shape_is_exactly_the_documented_one(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = kept(cfg, "--json", "--all")
    document = json.loads(result.stdout)
    assert list(document) == ["commitments"]
    by_id = {c["id"]: c for c in document["commitments"]}
    for item in by_id.values():
        assert list(item) == JSON_KEYS
    exam = by_id[ids["exam"]]
    assert exam == {
        "id": ids["exam"],
        "agentId": "helper",
        "sessionKey": "agent:helper:discord:channel:7:thread:8",
        "platform": "discord",
        "chatId": "7",
        "threadId": "8",
        "senderId": "u9",
        "kind": "event_check_in",
        "status": "pending",
        "dueEarliest": (SOON + 2 * HOUR).isoformat().replace("+00:00", "Z"),
        "dueLatest": (SOON + 14 * HOUR).isoformat().replace("+00:00", "Z"),
        "suggestedText": "How did exam go?",
        "reason": "reason exam",
        "confidence": 0.9,
        "createdAt": (SOON - 24 * HOUR).isoformat().replace("+00:00", "Z"),
        "sentAt": None,
    }
    assert by_id[ids["trip"]]["sentAt"] == SOON.isoformat().replace("+00:00", "Z")
    assert json.loads(kept(cfg, "--json", "--status", "expired").stdout) == {"commitments": []}


def test_dismiss_reports_unknown_and_already_dismissed(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = kept(cfg, "dismiss", ids["interview"])
    assert result.exit_code == 0
    assert result.stdout == f"Dismissed {ids['interview']}: I won't follow up on it.\n"
    result = kept(cfg, "dismiss", ids["interview"], "cm_000000000000", ids["exam"])
    assert result.exit_code == 1
    assert result.stdout == f"Dismissed {ids['exam']}: I won't follow up on it.\n"
    assert result.stderr.splitlines() == [
        f"kept: {ids['interview']}: nothing changed (already dismissed).",
        "kept: cm_000000000000: not found.",
    ]
    again = kept(cfg, "dismiss", ids["exam"], "cm_nope", "--json")
    assert again.exit_code == 1
    assert json.loads(again.stdout) == {
        "dismissed": [],
        "failed": [
            {"id": ids["exam"], "reason": "already dismissed"},
            {"id": "cm_nope", "reason": "not found"},
        ],
    }
    assert listed(cfg) == []


def test_a_delivered_check_ins_follow_up_is_dismissed_and_snoozed_by_id(
    cfg: Path, tmp_path: Path
) -> None:
    """The console's check-in says "/dismiss cm_… to drop it"; the operator's
    CLI does what the check-in's buttons do on it, too."""
    ids = seed(tmp_path)
    snoozed = kept(cfg, "snooze", ids["trip"], "--for", "2h", "--json")
    assert snoozed.exit_code == 0, snoozed.output
    document = json.loads(snoozed.stdout)["commitment"]
    assert document["status"] == "snoozed"
    assert document["sentAt"] == SOON.isoformat().replace("+00:00", "Z")  # the delivery counts
    dismissed = kept(cfg, "dismiss", ids["trip"])
    assert dismissed.exit_code == 0
    assert dismissed.stdout == f"Dismissed {ids['trip']}: I won't follow up on it.\n"
    seed_sent = seed(tmp_path / "other")  # a sent one, never snoozed
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path}/other/kept.sqlite"}}))
    direct = kept(other, "dismiss", seed_sent["trip"], "--json")
    assert direct.exit_code == 0 and json.loads(direct.stdout)["dismissed"] == [seed_sent["trip"]]


def test_config_may_come_before_the_subcommand(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    args = ["--config", str(cfg), "dismiss", ids["exam"]]
    result = CliRunner().invoke(commitments_group, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Dismissed {ids['exam']}: I won't follow up on it.\n"


def test_snooze_for_and_until(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = kept(cfg, "snooze", ids["interview"], "--for", "2d", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    snoozed = document["commitment"]
    assert snoozed["status"] == "snoozed" and snoozed["dueEarliest"] == document["snoozedUntil"]
    until = datetime.fromisoformat(document["snoozedUntil"])
    assert abs(until - (datetime.now(UTC) + 48 * HOUR)) < timedelta(minutes=1)
    # the window keeps its 12 h width
    assert datetime.fromisoformat(snoozed["dueLatest"]) - until == 12 * HOUR
    # without an offset, --until is read in the commitment's time zone
    local = (datetime.now(UTC) + 10 * 24 * HOUR).replace(
        tzinfo=None, hour=9, minute=0, second=0, microsecond=0
    )
    result = kept(cfg, "snooze", ids["interview"], "--until", local.isoformat(), "--json")
    assert result.exit_code == 0, result.output
    expected = local.replace(tzinfo=ZoneInfo("Europe/Paris")).astimezone(UTC)
    assert json.loads(result.stdout)["snoozedUntil"] == expected.isoformat().replace("+00:00", "Z")
    assert [c["status"] for c in listed(cfg, "--status", "snoozed")] == ["snoozed"]
    text = kept(cfg, "snooze", ids["exam"], "--for", "3d")
    assert text.exit_code == 0 and text.stdout.startswith(f"Snoozed {ids['exam']} until ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--for", "soon"], "--for: not a duration"),
        (["--until", "tomorrow"], "--until: not an ISO 8601 time"),
        ([], "exactly one of --for"),
        (["--for", "2h", "--until", "2030-01-01T00:00Z"], "exactly one of --for"),
        (["--until", "2001-01-01T00:00Z"], "must be in the future"),
        # A bare number once read as seconds: due at once.
        (["--for", "2"], "--for: '2' has no unit: say 2h, 30m or 3d"),
        # Due in a day: an hour from now would be sooner than it was.
        (["--for", "1h"], "it is due later than that, from "),
        (["--until", (SOON - HOUR).isoformat()], "it is due later than that, from "),
    ],
)
def test_snooze_errors_are_one_line(
    cfg: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    ids = seed(tmp_path)
    result = kept(cfg, "snooze", ids["interview"], *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_snooze_of_unknown_or_final_commitments_fails(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    unknown = kept(cfg, "snooze", "cm_nope", "--for", "1h")
    assert unknown.exit_code == 1 and unknown.stderr == "kept: cm_nope: not found.\n"
    assert kept(cfg, "dismiss", ids["exam"]).exit_code == 0
    final = kept(cfg, "snooze", ids["exam"], "--for", "3d")
    assert final.exit_code == 1 and "already dismissed" in final.stderr


def test_bad_config_is_reported_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "kept.json"
    path.write_text('{"storage": {"url": "mysql://x"}}')
    result = CliRunner().invoke(commitments_group, ["--config", str(path)])
    assert result.exit_code == 1 and "storage.url" in result.stderr
    assert "Traceback" not in result.stderr


def test_scope_fields_come_back_as_stored(cfg: Path, tmp_path: Path) -> None:
    seed(tmp_path)
    [exam] = listed(cfg, "--agent", "helper")
    assert replace(DISCORD).thread_id == exam["threadId"]


def test_a_group_listing_says_whose_each_follow_up_is(cfg: Path, tmp_path: Path) -> None:
    group = Scope(
        "main",
        "agent:main:telegram:group:-1007",
        "telegram",
        "-1007",
        None,
        "1001",
        chat_kind="group",
    )

    async def go() -> None:
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        await store.open()
        try:
            cs = commitment_store_for(store)
            await cs.apply_extraction(group, [new(group, "sleep")], [], now=SOON)
            other = replace(group, sender_id="2002")
            await cs.apply_extraction(other, [new(other, "dentist", 1)], [], now=SOON)
        finally:
            await store.close()

    asyncio.run(go())
    result = kept(cfg)
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "suggested text" in line)
    assert header.split()[:6] == ["id", "status", "kind", "due", "scope", "member"]
    lines = result.stdout.splitlines()
    sleep = next(line for line in lines if "How did sleep" in line)
    dentist = next(line for line in lines if "How did dentist" in line)
    assert "1001" in sleep.split() and "2002" not in sleep.split()
    assert "2002" in dentist.split() and "1001" not in dentist.split()
    # --json keeps its documented shape: the member is senderId.
    assert {c["senderId"] for c in listed(cfg)} == {"1001", "2002"}
    assert all(list(c) == JSON_KEYS for c in listed(cfg))
