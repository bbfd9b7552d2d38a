"""Who is answered, end to end on the fake Telegram and Discord servers with
the real client libraries: dmPolicy `pairing` (an unknown user gets a code
and nothing else until the operator approves it, once with the real
`kept pairing approve` in a subprocess), `allowlist`, `open` with its
warning at start, groups by `groups` / `groupPolicy`, and Discord's old
`allowGuilds` read as `groups` with a warning."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.pairing_notify import APPROVED_TEXT
from core.pairing import CODE_ALPHABET, CODE_LENGTH, Standing
from core.store.sqlite.driver import sqlite3
from tests.channels.telegram.test_storage_faults import until
from tests.fakes.discord_server import TOKEN as DISCORD_TOKEN
from tests.fakes.telegram_server import TOKEN as TELEGRAM_TOKEN
from tests.support.discord_harness import discord_harness
from tests.support.telegram_harness import TelegramHarness, telegram_harness

ROOT = Path(__file__).resolve().parents[2]
PRIVATE = "agent:main:telegram:private:42"
GROUP = -100500
CODE = re.compile(rf"code: ([{CODE_ALPHABET}]{{{CODE_LENGTH}}})")
PAIRING = {"dmPolicy": "pairing", "groupPolicy": "allowlist"}


def code_in(text: str) -> str:
    found = CODE.search(text)
    assert found is not None, text
    return found.group(1)


async def kept(
    tmp_path: Path,
    *args: str,
    telegram: dict[str, object] | None = None,
    discord: dict[str, object] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """The real CLI in a subprocess (the worktree's code), on the harness's
    database; with `telegram` / `discord`, that channel's settings (to tell
    an approved user)."""
    config = tmp_path / "cli.json"
    document: dict[str, object] = {"storage": {"url": f"sqlite:///{tmp_path}/kept.sqlite"}}
    channels = {k: v for k, v in (("telegram", telegram), ("discord", discord)) if v}
    if channels:
        document["channels"] = channels
    config.write_text(json.dumps(document))
    env = {**os.environ, "KEPT_CONFIG": "", "PYTHONPATH": str(ROOT), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, PAIRING) as harness:
        yield harness


# --- Telegram -----------------------------------------------------------------


async def test_an_unknown_user_gets_a_code_and_is_answered_once_approved_by_the_cli(
    tg: TelegramHarness, tmp_path: Path
) -> None:
    # The CLI reads the system clock: codes are made at the same time.
    await tg.clock.advance((datetime.now(UTC) - tg.clock.now()).total_seconds())
    await tg.start()
    first = await tg.fake.push_message("hello, who are you?", chat_id=42, username="ana")
    await tg.fake.wait_for(lambda: tg.fake.sent)
    code = code_in(tg.fake.texts()[0])
    assert f"kept pairing approve {code}" in tg.fake.texts()[0]
    # Told once: a command (or anything else) while the code is pending is
    # not answered again.
    again = await tg.fake.push_message("/help", chat_id=42, username="ana")
    await tg.fake.wait_for(lambda: again["update_id"] in tg.fake.confirmed)
    assert len(tg.fake.sent) == 1
    await tg.fake.wait_for(lambda: first["update_id"] in tg.fake.confirmed)
    # Nothing stored, nothing asked of the model.
    assert tg.model.requests == []
    assert await tg.transcript(PRIVATE) == []

    status, out, err = await kept(tmp_path, "pairing", "list", "--json")
    assert status == 0, err
    [pending] = json.loads(out)["pending"]
    assert (pending["code"], pending["platform"], pending["userId"]) == (code, "telegram", "42")
    assert pending["username"] == "ana"

    status, out, err = await kept(tmp_path, "pairing", "approve", code.lower())
    assert status == 0, err
    assert "telegram:42" in out

    await tg.fake.push_message("hello again", chat_id=42, username="ana")
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)
    assert tg.fake.texts()[1] == "echo: hello again"
    assert [t for role, _, t in await tg.transcript(PRIVATE) if role == "user"] == ["hello again"]

    status, out, err = await kept(tmp_path, "pairing", "list", "--json")
    listed = json.loads(out)
    assert listed["pending"] == []
    assert [(u["platform"], u["userId"]) for u in listed["approved"]] == [("telegram", "42")]


async def offered_code(tg: TelegramHarness) -> str:
    """Ana (chat 42) writes and gets her code, on the system clock the CLI reads."""
    await tg.clock.advance((datetime.now(UTC) - tg.clock.now()).total_seconds())
    await tg.start()
    await tg.fake.push_message("hello", chat_id=42, username="ana")
    await tg.fake.wait_for(lambda: tg.fake.sent)
    return code_in(tg.fake.texts()[0])


async def test_the_approved_telegram_user_is_told_once_in_their_chat(
    tg: TelegramHarness, tmp_path: Path
) -> None:
    code = await offered_code(tg)
    telegram = {"enabled": True, "baseUrl": tg.fake.root}
    env = {"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN}

    status, out, err = await kept(tmp_path, "pairing", "approve", code, telegram=telegram, env=env)

    assert status == 0, err
    assert out.strip().endswith("told them so")
    assert tg.fake.texts() == [tg.fake.texts()[0], APPROVED_TEXT]
    assert [m.chat_id for m in tg.fake.sent] == [42, 42]


async def test_an_approved_user_who_cannot_be_told_is_still_approved(
    tg: TelegramHarness, tmp_path: Path
) -> None:
    code = await offered_code(tg)
    telegram = {"enabled": True, "baseUrl": tg.fake.root}
    env = {"TELEGRAM_BOT_TOKEN": "1:not-the-token"}

    status, out, err = await kept(
        tmp_path, "pairing", "approve", code, "--json", telegram=telegram, env=env
    )

    assert status == 0, err
    approved = json.loads(out)
    assert approved["userId"] == "42" and approved["told"] is False
    assert "refused" in approved["notTold"] and "not-the-token" not in out + err
    assert len(tg.fake.sent) == 1  # the code only
    status, out, _ = await kept(tmp_path, "pairing", "list", "--json")
    assert [u["userId"] for u in json.loads(out)["approved"]] == ["42"]


async def test_a_used_or_unknown_code_is_one_line_and_a_failure(tmp_path: Path) -> None:
    async with telegram_harness(tmp_path, PAIRING):
        status, out, err = await kept(tmp_path, "pairing", "approve", "ABCDEFGH")
    assert status == 1 and out == ""
    assert err.startswith("kept: no pending pairing request has the code ABCDEFGH")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


async def test_allowlist_answers_only_allow_from_and_offers_no_code(tmp_path: Path) -> None:
    settings = {"dmPolicy": "allowlist", "allowFrom": ["77"]}
    async with telegram_harness(tmp_path, settings) as tg:
        await tg.start()
        stranger = await tg.fake.push_message("let me in", chat_id=42)
        await tg.fake.push_message("hi", chat_id=77, username=None)
        await tg.fake.wait_for(lambda: tg.fake.sent)
        await tg.fake.wait_for(lambda: stranger["update_id"] in tg.fake.confirmed)
        assert [(s.chat_id, s.text) for s in tg.fake.sent] == [(77, "echo: hi")]
        assert await tg.services.pairing.pending() == []


async def test_open_answers_anyone_and_says_so_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.telegram")
    async with telegram_harness(tmp_path, {"dmPolicy": "open"}) as tg:
        await tg.start()
        [warning] = [r for r in caplog.records if "telegram_dms_open" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert "channels.telegram.dmPolicy" in warning.getMessage()
        await tg.fake.push_message("anyone home?", chat_id=42)
        await tg.fake.wait_for(lambda: tg.fake.sent)
        assert tg.fake.texts() == ["echo: anyone home?"]


async def test_pairing_says_nothing_at_start(
    tg: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.telegram")
    await tg.start()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # The start itself was logged there, so the logger was listened to.
    assert [r.getMessage().split()[0] for r in caplog.records] == ["telegram_started"]


async def test_a_listed_group_serves_every_member_and_an_unlisted_one_is_silent(
    tmp_path: Path,
) -> None:
    async with telegram_harness(tmp_path, {**PAIRING, "groups": [GROUP]}) as tg:
        await tg.start()
        other = dict(chat_id=-100600, chat_type="supergroup", user_id=8)
        ignored = await tg.fake.push_message("@kept_bot hello?", **other)
        await tg.fake.push_message("/help", **other)
        await tg.fake.wait_for(lambda: ignored["update_id"] in tg.fake.confirmed)
        # Members nobody paired or listed: served in a listed group.
        listed = dict(chat_id=GROUP, chat_type="supergroup")
        await tg.fake.push_message("@kept_bot what is 2+2?", user_id=7, **listed)
        await tg.fake.wait_for(lambda: tg.fake.sent)
        await tg.fake.push_message("/help", user_id=9, **listed)
        await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)

        assert {s.chat_id for s in tg.fake.sent} == {GROUP}
        assert tg.fake.texts()[0] == "echo: @kept_bot what is 2+2?"
        assert "/commitments" in tg.fake.texts()[1]
        assert await tg.transcript("agent:main:telegram:group:-100600") == []
        assert await tg.services.pairing.pending() == []  # no codes in groups


async def test_an_unpaired_users_edit_is_not_stored(tg: TelegramHarness) -> None:
    await tg.start()
    update = await tg.fake.push_message("hello", chat_id=42)
    await tg.fake.wait_for(lambda: tg.fake.sent)
    edited = dict(update["message"], text="hello, edited", edit_date=1)
    pushed = await tg.fake.push({"edited_message": edited})
    await tg.fake.wait_for(lambda: pushed["update_id"] in tg.fake.confirmed)
    assert await tg.transcript(PRIVATE) == []
    # Unpaired indeed: the message got a code, and the edit was handled (confirmed).
    [offered] = tg.fake.texts()
    assert code_in(offered) and [p.user_id for p in await tg.services.pairing.pending()] == ["42"]
    assert pushed["update_id"] in tg.fake.confirmed


# --- Discord ------------------------------------------------------------------


async def test_discord_unknown_dm_gets_a_code_and_is_answered_once_approved(
    tmp_path: Path,
) -> None:
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake = harness.fake
        await harness.start()
        await fake.say("hello there")
        await fake.wait_for(lambda: fake.texts())
        dm = fake.dm(fake.ana)
        [offered] = fake.texts(dm)
        code = code_in(offered)
        assert harness.model.requests == []
        assert await harness.transcript(harness.dm_key()) == []

        approved = await harness.services.pairing.approve(code)
        assert approved is not None and approved.user_id == str(fake.ana["id"])
        await fake.say("hello again")
        await fake.wait_for(lambda: len(fake.texts(dm)) >= 2)
        assert fake.texts(dm)[1] == "echo: hello again"
        assert await harness.transcript(harness.dm_key()) == [
            ("user", "hello again"),
            ("assistant", "echo: hello again"),
        ]


async def test_the_approved_discord_user_is_told_in_their_dm(tmp_path: Path) -> None:
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake, clock = harness.fake, harness.clock
        # The CLI reads the system clock: codes are made at the same time.
        await clock.advance((datetime.now(UTC) - clock.now()).total_seconds())
        await harness.start()
        await fake.say("hello there")
        await fake.wait_for(lambda: fake.texts())
        dm = fake.dm(fake.ana)
        code = code_in(fake.texts(dm)[0])
        discord = {"enabled": True, "apiBaseUrl": fake.root}

        status, out, err = await kept(
            tmp_path,
            "pairing",
            "approve",
            code,
            discord=discord,
            env={"DISCORD_TOKEN": DISCORD_TOKEN},
        )

        assert status == 0, err
        assert out.strip().endswith("told them so")
        await fake.wait_for(lambda: len(fake.texts(dm)) >= 2)
        assert fake.texts(dm)[1] == APPROVED_TEXT


async def test_discord_unknown_users_slash_command_in_a_dm_gets_their_code(
    tmp_path: Path,
) -> None:
    # A slash command is often the first thing a new user tries: it answers
    # (only to them) with the same code a message gets, not a bare refusal.
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake = harness.fake
        await harness.start()
        command = {
            "id": "1",
            "name": "reminders",
            "type": 1,
            "options": [{"name": "list", "type": 1, "options": []}],
        }
        await fake.interact(command, channel=fake.dm(fake.ana))
        await fake.wait_for(lambda: fake.callbacks)
        [(_, body)] = fake.callbacks
        assert body["data"]["flags"] & 64  # ephemeral
        code = code_in(body["data"]["content"])

        await fake.say("hello there")
        await fake.wait_for(lambda: fake.texts(fake.dm(fake.ana)))
        [offered] = fake.texts(fake.dm(fake.ana))
        assert code_in(offered) == code  # one pending code per user
        assert harness.model.requests == []


async def test_discord_groups_and_the_allow_guilds_alias_with_its_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake = harness.fake
        settings = harness.config.channels.discord
        settings.allow_guilds = [str(fake.guild_id)]  # the old name of `groups`
        adapter = await harness.start()
        [warning] = [r for r in caplog.records if "config_key_renamed" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert "channels.discord.allowGuilds" in warning.getMessage()
        assert "channels.discord.groups" in warning.getMessage()

        # Ben is on no list: a listed server serves every member.
        await fake.say("how do I cook rice?", channel=fake.general, author=fake.ben, mention=True)
        await fake.wait_for(lambda: fake.texts(fake.general))
        assert fake.texts(fake.general) == ["echo: how do I cook rice?"]

        settings.allow_guilds = []
        settings.groups = ["123456789012345678"]  # another server
        await fake.say("and pasta?", channel=fake.general, author=fake.ben, mention=True)
        await fake.wait_for(lambda: "discord_not_allowed" in caplog.text)
        settings.groups = [str(fake.guild_id)]
        await fake.say("and noodles?", channel=fake.general, author=fake.ben, mention=True)
        await fake.wait_for(lambda: len(fake.texts(fake.general)) >= 2)
        assert fake.texts(fake.general)[1:] == ["echo: and noodles?"]
        await harness.stop(adapter)


async def test_discord_open_dms_are_warned_about_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kept.discord")
    async with discord_harness(tmp_path, dmPolicy="open", groupPolicy="allowlist") as harness:
        await harness.start()
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert [w for w in warnings if "discord_dms_open" in w]
        assert not [w for w in warnings if "groups_open" in w]
        await harness.fake.say("anyone?")
        await harness.fake.wait_for(lambda: harness.fake.texts())
        assert harness.fake.texts() == ["echo: anyone?"]


async def test_a_pairing_store_that_cannot_be_read_holds_the_message(
    tg: TelegramHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never dropped: the update stays unconfirmed until the store answers,
    then the user gets their code once."""
    store = tg.services.pairing.store
    real = store.standing
    failures: list[str] = []

    async def standing(platform: str, user_id: str) -> Standing:
        if len(failures) < 3:
            failures.append(user_id)
            raise sqlite3.OperationalError("disk I/O error")
        return await real(platform, user_id)

    monkeypatch.setattr(store, "standing", standing)
    await tg.start()
    update = await tg.fake.push_message("hello?", chat_id=42)
    await until(tg, lambda: len(failures) >= 2)
    assert update["update_id"] not in tg.fake.confirmed and tg.fake.sent == []

    await until(tg, lambda: update["update_id"] in tg.fake.confirmed)
    assert len(tg.fake.sent) == 1 and code_in(tg.fake.texts()[0])
    assert tg.model.requests == []
