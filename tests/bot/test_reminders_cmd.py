"""`kept reminders` through click's CliRunner, on a real database file."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.reminders_cmd import reminders_group
from core.messages import Target
from core.reminders.model import NewReminder
from tests.support.store_helpers import make_reminder_store, open_store

LEASE = timedelta(minutes=5)

# Stored times are in the future of the real clock the CLI runs on.
SOON = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)

JSON_KEYS = [
    "id",
    "agentId",
    "sessionKey",
    "platform",
    "chatId",
    "threadId",
    "createdBy",
    "text",
    "kind",
    "cron",
    "timezone",
    "status",
    "nextFireAt",
    "lastFiredAt",
    "attempts",
    "lastError",
    "createdAt",
]


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}))
    return path


def seed(tmp_path: Path) -> dict[str, str]:
    """Three reminders; the `done` one is finished. Returns text -> id."""

    async def go() -> dict[str, str]:
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        await store.open()
        try:
            rs = make_reminder_store(store)
            ids: dict[str, str] = {}
            rows = [
                ("stretch", "agent:main:telegram:private:42", Target("telegram", "42"), None, 0),
                ("standup", "agent:main:discord:channel:7:thread:8", Target("discord", "7", "8"),
                 "0 9 * * 1-5", 2),
                ("done one", "agent:main:telegram:private:42", Target("telegram", "42"), None, 1),
            ]  # fmt: skip
            for text, key, target, cron, hours in rows:
                r = await rs.add(
                    NewReminder(
                        agent_id="main", session_key=key, target=target, created_by="u1",
                        text=text, kind="cron" if cron else "at", cron=cron,
                        timezone="Europe/Paris", next_fire_at=SOON + timedelta(hours=hours),
                        created_at=SOON - timedelta(days=1),
                    )
                )  # fmt: skip
                ids[text] = r.id
            fired_at = SOON + timedelta(hours=1)
            await rs.claim(ids["done one"], fired_at, worker="w", lease_until=fired_at + LEASE)
            await rs.mark_fired(ids["done one"], now=SOON + timedelta(hours=1), next_fire_at=None)
            return ids
        finally:
            await store.close()

    return asyncio.run(go())


def run(cfg: Path, *args: str) -> Result:
    return CliRunner().invoke(reminders_group, [*args, "--config", str(cfg)])


def test_list_shows_active_reminders_in_a_table(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = run(cfg)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "2 reminders" in out
    assert ids["stretch"] in out and ids["standup"] in out and ids["done one"] not in out
    assert "cron 0 9 * * 1-5" in out and "main / discord / 7 #8" in out
    assert "Europe/Paris" in out


def test_all_includes_finished_ones(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = run(cfg, "--all")
    assert result.exit_code == 0, result.output
    assert ids["done one"] in result.output and "done" in result.output


def test_json_is_one_document_with_every_field(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = run(cfg, "--json", "--all")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["id"] for r in doc["reminders"]] == [ids["stretch"], ids["done one"], ids["standup"]]
    first = doc["reminders"][0]
    assert list(first) == JSON_KEYS
    assert first["nextFireAt"].endswith("Z") and first["status"] == "active"
    assert doc["reminders"][2]["threadId"] == "8" and doc["reminders"][2]["cron"] == "0 9 * * 1-5"


def test_empty_list(cfg: Path, tmp_path: Path) -> None:
    async def create() -> None:  # the bot's first start creates the database
        store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
        await store.open()
        await store.close()

    asyncio.run(create())
    result = run(cfg)
    assert result.exit_code == 0
    assert result.output == "No reminders. Use --all to include finished ones.\n"
    assert json.loads(run(cfg, "--json").stdout) == {"reminders": []}


def test_cancel(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = CliRunner().invoke(reminders_group, ["cancel", ids["stretch"], "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert result.output == f"Cancelled {ids['stretch']}.\n"
    # The group's --config also reaches the subcommand.
    again = CliRunner().invoke(reminders_group, ["--config", str(cfg), "cancel", ids["stretch"]])
    assert again.exit_code == 1
    assert again.stderr.strip() == f"kept: {ids['stretch']}: nothing changed (already cancelled)."
    listed = json.loads(run(cfg, "--json").stdout)
    assert [r["id"] for r in listed["reminders"]] == [ids["standup"]]


def test_cancel_json(cfg: Path, tmp_path: Path) -> None:
    ids = seed(tmp_path)
    result = CliRunner().invoke(
        reminders_group, ["cancel", ids["standup"], "--json", "--config", str(cfg)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["cancelled"]["status"] == "cancelled"


def test_cancel_unknown_id_exits_1_with_one_clear_line(cfg: Path, tmp_path: Path) -> None:
    seed(tmp_path)
    result = CliRunner().invoke(reminders_group, ["cancel", "rm_nope", "--config", str(cfg)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == ["kept: rm_nope: not found."]


def test_an_invalid_config_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "kept.json"
    bad.write_text('{"storage": {"url": 5}}')
    result = CliRunner().invoke(reminders_group, ["--config", str(bad)])
    assert result.exit_code != 0 and result.stderr.startswith("kept: ")
