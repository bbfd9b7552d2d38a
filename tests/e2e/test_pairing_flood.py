"""Pairing against strangers, end to end on the fake Telegram and Discord
servers with the real client libraries: many strangers writing many times
get one notice each (again only after an hour on the clock), which is all
the send budget they cost, so an approved user's answer is not queued
behind them; a newcomer gets a code however many are pending; a code
rejected with the real `kept pairing reject` and a user blocked with
`kept pairing block` (subprocesses); Discord's `allowFrom` matches an
all-digit entry against ids only."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from channels.discord.scope import NOT_ALLOWED
from core.pairing import PairingOffer
from tests.e2e.test_pairing import PAIRING, code_in, kept
from tests.support.discord_harness import discord_harness
from tests.support.telegram_harness import TelegramHarness, telegram_harness

ANA = 42
HOUR = 3600


@pytest.fixture
async def tg(tmp_path: Path) -> AsyncIterator[TelegramHarness]:
    async with telegram_harness(tmp_path, PAIRING) as harness:
        yield harness


async def approve(tg: TelegramHarness, user_id: int) -> None:
    request = await tg.services.pairing.code_for("telegram", str(user_id))
    assert request is not None and await tg.services.pairing.approve(request.code) is not None


async def all_confirmed(tg: TelegramHarness, updates: list[dict[str, Any]]) -> None:
    await tg.fake.wait_for(
        lambda: all(u["update_id"] in tg.fake.confirmed for u in updates), within=30
    )


def sends_to(tg: TelegramHarness) -> Counter[int]:
    return Counter(s.chat_id for s in tg.fake.sent)


async def test_strangers_flooding_get_one_notice_each_and_an_approved_user_is_answered(
    tg: TelegramHarness,
) -> None:
    await approve(tg, ANA)
    await tg.start()
    early, late = [1001, 1002, 1003], [1004, 1005, 1006]
    pushed = []
    for n in range(50):
        for stranger in early:
            pushed.append(await tg.fake.push_message(f"let me in {n}", chat_id=stranger))
    hello = await tg.fake.push_message("hello", chat_id=ANA)
    for n in range(50):
        for stranger in late:
            pushed.append(await tg.fake.push_message(f"let me in {n}", chat_id=stranger))

    await all_confirmed(tg, [*pushed, hello])
    await tg.fake.wait_for(lambda: "echo: hello" in tg.fake.texts())

    # 300 messages from strangers cost six sends: one notice each.
    assert sends_to(tg) == Counter({ANA: 1, **{s: 1 for s in early + late}})
    codes = {s.chat_id: code_in(s.text) for s in tg.fake.sent if s.chat_id != ANA}
    assert len(set(codes.values())) == 6
    # The answer is not queued behind the flood: only notices, at most one
    # per stranger, can be sent before it.
    assert tg.fake.texts().index("echo: hello") <= len(early + late)
    # Strangers cost no "typing…" and never reach the model.
    actions = {int(c.params["chat_id"]) for c in tg.fake.calls_to("sendChatAction")}
    assert actions <= {ANA}
    assert len(tg.model.requests) == 1
    assert len(await tg.services.pairing.pending()) == 6

    # Still writing an hour later: told once more (a new code: the old one
    # expired), and still only once.
    await tg.clock.advance(HOUR)
    later = [
        await tg.fake.push_message(f"hello? {n}", chat_id=stranger)
        for n in range(5)
        for stranger in early
    ]
    await all_confirmed(tg, later)
    assert sends_to(tg) == Counter({ANA: 1, **{s: 2 for s in early}, **{s: 1 for s in late}})
    renewed = {s.chat_id: code_in(s.text) for s in tg.fake.sent[-3:]}
    assert set(renewed) == set(early)
    assert all(renewed[s] != codes[s] for s in early)


async def test_a_newcomer_gets_a_code_however_many_are_pending(tg: TelegramHarness) -> None:
    pairing = tg.services.pairing
    for n in range(pairing.max_pending):
        await pairing.offer("telegram", str(5000 + n))
    oldest = (await pairing.pending())[0]
    await tg.clock.advance(1)
    await tg.start()

    update = await tg.fake.push_message("hi, I'm new", chat_id=ANA)
    await all_confirmed(tg, [update])

    [notice] = tg.fake.texts(ANA)
    pending = await pairing.pending()
    assert len(pending) == pairing.max_pending
    assert pending[-1].code == code_in(notice) and pending[-1].user_id == str(ANA)
    assert oldest.user_id not in {r.user_id for r in pending}


async def offered_code(tg: TelegramHarness) -> str:
    """Ana writes and gets her code, on the system clock the CLI reads."""
    await tg.clock.advance((datetime.now(UTC) - tg.clock.now()).total_seconds())
    await tg.start()
    await tg.fake.push_message("hello", chat_id=ANA, username="ana")
    await tg.fake.wait_for(lambda: tg.fake.sent)
    return code_in(tg.fake.texts()[0])


async def test_a_rejected_code_is_dropped_silently_and_a_blocked_user_gets_nothing(
    tg: TelegramHarness, tmp_path: Path
) -> None:
    code = await offered_code(tg)

    status, out, err = await kept(tmp_path, "pairing", "reject", code)
    assert status == 0, err
    assert len(tg.fake.sent) == 1  # the user is not told
    # Writing again after a rejection: a new code.
    await tg.fake.push_message("hello?", chat_id=ANA, username="ana")
    await tg.fake.wait_for(lambda: len(tg.fake.sent) >= 2)
    second = code_in(tg.fake.texts()[1])
    assert second != code

    status, out, err = await kept(tmp_path, "pairing", "block", "telegram:@ana", "--json")
    assert status == 0, err
    assert json.loads(out)["droppedCodes"] == [second]
    ignored = [
        await tg.fake.push_message(text, chat_id=ANA, username="ana")
        for text in ("let me in", "/help", "/start")
    ]
    await all_confirmed(tg, ignored)
    assert len(tg.fake.sent) == 2  # nothing, not even a code
    assert await tg.services.pairing.pending() == []
    assert tg.model.requests == []
    status, out, err = await kept(tmp_path, "pairing", "approve", second)
    assert status == 1 and "no pending pairing request" in err
    # Blocked whatever dmPolicy says: open answers anyone else, not them.
    tg.config.channels.telegram.dm_policy = "open"
    blocked = await tg.fake.push_message("and now?", chat_id=ANA, username="ana")
    other = await tg.fake.push_message("hi", chat_id=77, username="bob")
    await all_confirmed(tg, [blocked, other])
    await tg.fake.wait_for(lambda: tg.fake.texts(77))
    assert tg.fake.texts(ANA) == tg.fake.texts(ANA)[:2] and len(tg.fake.texts(ANA)) == 2
    tg.config.channels.telegram.dm_policy = "pairing"

    status, out, err = await kept(tmp_path, "pairing", "unblock", "telegram:42")
    assert status == 0, err
    await tg.fake.push_message("sorry", chat_id=ANA, username="ana")
    await tg.fake.wait_for(lambda: len(tg.fake.texts(ANA)) >= 3)
    assert code_in(tg.fake.texts(ANA)[2]) not in (code, second)


# --- Discord ------------------------------------------------------------------


async def test_discord_a_stranger_writing_at_once_is_told_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake = harness.fake
        pairing = harness.services.pairing
        real = pairing.offer
        offers: list[PairingOffer | None] = []

        async def offer(platform: str, user_id: str, username: str | None = None) -> Any:
            offers.append(await real(platform, user_id, username))
            return offers[-1]

        monkeypatch.setattr(pairing, "offer", offer)
        await harness.start()
        for n in range(8):
            await fake.say(f"hello {n}")
        await fake.wait_for(lambda: len(offers) == 8)
        await fake.wait_for(lambda: fake.texts(fake.dm(fake.ana)))
        await asyncio.sleep(0.2)  # a second notice, if any, would be on its way
        [notice] = fake.texts(fake.dm(fake.ana))
        assert [o.notify for o in offers if o is not None].count(True) == 1
        assert code_in(notice)


async def test_discord_blocked_users_slash_command_gets_the_plain_refusal(
    tmp_path: Path,
) -> None:
    async with discord_harness(tmp_path, **PAIRING) as harness:
        fake = harness.fake
        await harness.services.pairing.block("discord", str(fake.ana["id"]))
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
        assert body["data"]["content"] == NOT_ALLOWED
        assert await harness.services.pairing.pending() == []


async def test_discord_allow_from_an_id_is_not_matched_by_a_username_of_digits(
    tmp_path: Path,
) -> None:
    async with discord_harness(tmp_path, dmPolicy="allowlist", groupPolicy="allowlist") as harness:
        fake = harness.fake
        harness.config.channels.discord.allow_from = [str(fake.ana["id"]), "@ben"]
        impostor = fake.user(str(fake.ana["id"]))  # a username that is Ana's id
        await harness.start()
        await fake.say("I am ana, honest", author=impostor)
        await fake.say("hi, it's ana")
        await fake.say("hi, it's ben", author=fake.ben)
        await fake.wait_for(lambda: fake.texts(fake.dm(fake.ben)))
        await fake.wait_for(lambda: fake.texts(fake.dm(fake.ana)))
        await asyncio.sleep(0.2)
        assert fake.texts(fake.dm(impostor)) == []
        assert fake.texts(fake.dm(fake.ana)) == ["echo: hi, it's ana"]
        assert fake.texts(fake.dm(fake.ben)) == ["echo: hi, it's ben"]
