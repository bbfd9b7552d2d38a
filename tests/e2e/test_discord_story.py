"""The whole story on Discord: a mention about an interview, the hidden
extraction pass, the heartbeat the next evening, and the follow-up arriving
in that channel (with its buttons) and nowhere else.

Real services from bot/services.py on a temp SQLite store; the model is an
in-process fake answering per role; the heartbeat's sender is an
AdapterRouter holding the Discord adapter on a dpytest bot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import discord.ext.test as dpytest
import pytest

from core.clock import TestClock
from core.commitments.store import Filter
from tests.support.discord_dpytest import (
    Responses,
    Rig,
    build_rig,
    button_ids,
    capture_responses,
    click,
    record_payloads,
    sent_messages,
)
from tests.support.role_model import RoleModel

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    clock = TestClock()
    rig = await build_rig(tmp_path, model=RoleModel(clock.now), clock=clock)
    yield rig
    await rig.close()


async def test_interview_mention_to_follow_up_in_that_channel_only(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: Responses = capture_responses(monkeypatch)
    payloads = record_payloads(rig.bot)
    here, elsewhere = rig.channel(0), rig.channel(1)
    alice, bob = rig.member(0), rig.member(1)
    assert rig.bot.user is not None
    me = f"<@{rig.bot.user.id}>"

    # Day 1: Alice tells the bot about her interview; Bob chats elsewhere
    # and in a DM about something else.
    await dpytest.message(f"{me} I have a job interview tomorrow morning", here, alice)
    await dpytest.message(f"{me} what's a good pasta recipe?", elsewhere, bob)
    dm = await bob.create_dm()
    await dpytest.message("any weekend plans?", dm, bob._user)
    await rig.settle()
    assert [m.channel.id for m in sent_messages()] == [here.id, elsewhere.id, dm.id]

    [stored] = await rig.services.backend.commitments.list(Filter())
    assert stored.session_key == f"agent:main:discord:channel:{here.id}"
    assert (stored.chat_id, stored.thread_id, stored.sender_id) == (
        str(here.id),
        None,
        str(alice.id),
    )
    tomorrow_evening = datetime(2026, 12, 1, 18, 0, tzinfo=PARIS)
    assert stored.due_earliest == tomorrow_evening

    # Before the window nothing is sent.
    rig.clock.set(tomorrow_evening - timedelta(hours=2))
    await rig.services.scheduler.tick()
    assert sent_messages() == []

    # The next evening the heartbeat delivers one check-in, in that channel.
    rig.clock.set(tomorrow_evening + timedelta(minutes=5))
    payloads.clear()
    await rig.services.scheduler.tick()
    [follow_up] = sent_messages()
    assert follow_up.channel.id == here.id
    assert follow_up.content == "How did the interview go?"
    token = stored.id.removeprefix("cm_")
    assert button_ids(payloads[0]) == [f"d:{token}", f"s:{token}"]
    assert payloads[0]["allowed_mentions"]["parse"] == []

    sent = await rig.services.backend.commitments.get(stored.id)
    assert sent is not None and sent.status == "sent"
    assert sent.sent_message_id == str(follow_up.id)
    rows = await rig.store.history(stored.session_key, before_turn_of=10**12, limit=50)
    assert [(r.kind, r.text) for r in rows][-1] == ("checkin", "How did the interview go?")
    for key in (
        f"agent:main:discord:channel:{elsewhere.id}",
        f"agent:main:discord:private:{dm.id}",
    ):
        other = await rig.store.history(key, before_turn_of=10**12, limit=50)
        assert "checkin" not in {r.kind for r in other}

    # Only one check-in: later ticks send nothing more.
    rig.clock.set(tomorrow_evening + timedelta(hours=3))
    await rig.services.scheduler.tick()
    assert sent_messages() == []
    assert rig.model.roles.count("heartbeat") == 1

    # Alice dismisses it from the button; the message says so.
    await click(
        rig.bot,
        message=follow_up,
        components=payloads[0]["components"],
        custom_id=f"d:{token}",
        user=alice,
    )
    kind, data = answers.calls[-1]
    assert kind == 7 and "Dismissed by" in data["content"]
