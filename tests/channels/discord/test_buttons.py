"""The Dismiss / Snooze 1 day buttons under a heartbeat follow-up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import discord
from discord.ext.test import backend

from channels.discord.views import buttons_view
from core.commands.buttons import pack
from core.commitments.model import Commitment
from core.messages import Action, Outbound, Target, followup_actions
from tests.support.discord_dpytest import (
    Responses,
    Rig,
    button_ids,
    click,
    record_payloads,
    sent_messages,
)
from tests.support.store_helpers import mark_sent

EPHEMERAL = 64


def target(channel: Any) -> Target:
    return Target("discord", str(channel.id))


async def follow_up(rig: Rig, channel: Any, *commitments: Commitment) -> discord.Message:
    """What the heartbeat does: send the check-in, then mark it sent."""
    ids = [c.id for c in commitments]
    result = await rig.adapter.send(
        Outbound(target(channel), "How did the interview go?", actions=followup_actions(ids))
    )
    assert result.ok and result.message_id is not None
    for c in commitments:
        await mark_sent(
            rig.services.backend.heartbeat, c.id, now=rig.clock.now(), message_id=result.message_id
        )
    [message] = sent_messages()
    return message


def components(ids: list[str]) -> list[dict[str, Any]]:
    view = buttons_view(followup_actions(ids))
    assert view is not None
    return view.to_components()


async def press(
    rig: Rig,
    message: discord.Message,
    action: str,
    ids: list[str],
    user: Any,
    permissions: discord.Permissions | None = None,
) -> None:
    await click(
        rig.bot,
        message=message,
        components=components(ids),
        custom_id=pack(Action(action, tuple(ids))),  # type: ignore[arg-type]
        user=user,
        permissions=permissions,
    )


def edited(answers: Responses) -> str:
    kind, data = answers.calls[-1]
    assert kind == 7, f"expected the message to be updated, got {answers.calls[-1]}"
    assert data["components"] == [], "the buttons are gone once used"
    return str(data["content"])


def refused(answers: Responses) -> str:
    kind, data = answers.calls[-1]
    assert kind == 4 and data["flags"] & EPHEMERAL
    return str(data["content"])


async def test_a_follow_up_carries_both_buttons_on_its_last_chunk(rig: Rig) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    payloads = record_payloads(rig.bot)

    await rig.adapter.send(Outbound(target(channel), "Hi!", actions=followup_actions([c.id])))
    long_text = ("Para one. " * 150).strip() + "\n\n" + ("Para two. " * 150).strip()
    await rig.adapter.send(Outbound(target(channel), long_text, actions=followup_actions([c.id])))
    await rig.adapter.send(Outbound(target(channel), "A plain reply."))

    token = c.id.removeprefix("cm_")
    ids = [f"d:{token}", f"s:{token}"]
    assert [button_ids(p) for p in payloads] == [ids, [], ids, []]
    labels = [b["label"] for b in payloads[0]["components"][0]["components"]]
    assert labels == ["Dismiss", "Snooze 1 day"]
    # The buttons are dynamic items: nothing per message is kept in memory.
    assert not rig.bot._connection._view_store._synced_message_views
    sent_messages()


async def test_dismiss_on_a_sent_follow_up(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    message = await follow_up(rig, channel, c)

    await press(rig, message, "dismiss", [c.id], alice)

    content = edited(answers)
    assert content.startswith("How did the interview go?")
    assert content.endswith(f"-# Dismissed by {alice.display_name}.")
    closed = await rig.services.backend.commitments.get(c.id)
    assert closed is not None and closed.status == "dismissed"
    assert closed.sent_at is not None, "the delivery still counts toward the daily cap"
    assert closed.dismissed_at == rig.clock.now()
    assert rig.model.requests == [], "a click is never a conversation turn"


async def test_dismiss_on_an_active_commitment(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    message = backend.make_message("How did the interview go?", rig.bot.user, channel)

    await press(rig, message, "dismiss", [c.id], alice)

    assert "Dismissed by" in edited(answers)
    assert await rig.status(c.id) == "dismissed"


async def test_snooze_on_a_sent_follow_up_reopens_it_for_tomorrow(
    rig: Rig, answers: Responses
) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    message = await follow_up(rig, channel, c)
    delivered = await rig.services.backend.commitments.get(c.id)
    assert delivered is not None

    await press(rig, message, "snooze", [c.id], alice)

    # 09:00 UTC tomorrow, in the agent's time zone.
    assert edited(answers).endswith(
        f"-# Snoozed by {alice.display_name} until Tue 01 Dec 10:00 (Europe/Paris)."
    )
    tomorrow = rig.clock.now() + timedelta(days=1)
    found = await rig.services.backend.commitments.get(c.id)
    assert found is not None and found.status == "snoozed"
    assert (found.due_earliest, found.due_latest) == (tomorrow, tomorrow + timedelta(hours=24))
    assert found.sent_at == delivered.sent_at
    # No reminder any more: the heartbeat brings the topic up again itself.
    key = f"agent:main:discord:channel:{channel.id}"
    assert await rig.services.reminders.list_for_session("main", key) == []

    # A second click (a race with the edit) does not snooze it again.
    await rig.clock.advance(60)
    await press(rig, message, "snooze", [c.id], alice)
    assert "Snoozed by" in refused(answers)
    again = await rig.services.backend.commitments.get(c.id)
    assert again is not None and again.due_earliest == tomorrow


async def test_buttons_on_a_resolved_or_expired_follow_up_say_so(
    rig: Rig, answers: Responses
) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    resolved = await rig.seed(channel, alice, "Resolved?")
    expired = await rig.seed(channel, alice, "Expired?")
    store, now = rig.services.backend.commitments, rig.clock.now()
    await store.apply_extraction(resolved.scope, [], [resolved.id], now=now)
    await store.expire(before=now + timedelta(days=2), now=now)

    for c, status in ((resolved, "resolved"), (expired, "expired")):
        for action in ("dismiss", "snooze"):
            message = backend.make_message("How did the interview go?", rig.bot.user, channel)
            await press(rig, message, action, [c.id], alice)
            assert refused(answers) == f"`{c.id}`: nothing changed (already {status})."
        assert await rig.status(c.id) == status


async def test_snooze_on_an_active_commitment(rig: Rig, answers: Responses) -> None:
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    message = backend.make_message("How did the interview go?", rig.bot.user, channel)

    await press(rig, message, "snooze", [c.id], alice)

    assert "Snoozed by" in edited(answers)
    found = await rig.services.backend.commitments.get(c.id)
    assert found is not None and found.status == "snoozed"
    assert found.due_earliest == rig.clock.now() + timedelta(days=1)


async def test_another_member_is_refused(rig: Rig, answers: Responses) -> None:
    channel, alice, bob = rig.channel(0), rig.member(0), rig.member(1)
    c = await rig.seed(channel, alice)
    message = await follow_up(rig, channel, c)

    # Not "someone else's": that would confirm it exists.
    await press(rig, message, "dismiss", [c.id], bob)
    assert refused(answers) == "Not found in this chat."
    await press(rig, message, "snooze", [c.id], bob)
    assert refused(answers) == "Not found in this chat."
    assert await rig.status(c.id) == "sent"

    await press(
        rig, message, "dismiss", [c.id], bob, permissions=discord.Permissions(manage_messages=True)
    )
    assert f"Dismissed by {bob.display_name}" in edited(answers)


async def test_an_id_from_another_chat_is_not_found(rig: Rig, answers: Responses) -> None:
    here, elsewhere, alice = rig.channel(0), rig.channel(1), rig.member(0)
    other = await rig.seed(elsewhere, alice)
    message = backend.make_message("How did the interview go?", rig.bot.user, here)

    await press(rig, message, "dismiss", [other.id], alice)
    assert refused(answers) == "Not found in this chat."
    await mark_sent(rig.services.backend.heartbeat, other.id, now=rig.clock.now(), message_id="1")
    await press(rig, message, "snooze", [other.id], alice)
    assert refused(answers) == "Not found in this chat."
    assert await rig.status(other.id) == "sent"


async def test_buttons_work_for_a_message_this_process_never_sent(
    rig: Rig, answers: Responses
) -> None:
    # After a restart the bot has no memory of the message: the click is
    # routed by the registered dynamic item alone, from its custom_id.
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    await mark_sent(rig.services.backend.heartbeat, c.id, now=rig.clock.now(), message_id="1")
    message = backend.make_message("How did the interview go?", rig.bot.user, channel)
    assert not rig.bot._connection._view_store._views

    await press(rig, message, "dismiss", [c.id], alice)

    assert "Dismissed by" in edited(answers)
    assert await rig.status(c.id) == "dismissed"


async def test_a_button_in_the_format_older_versions_sent_still_works(
    rig: Rig, answers: Responses
) -> None:
    # Messages sent before the one compact format carry `kept:fu:…` custom_ids.
    channel, alice = rig.channel(0), rig.member(0)
    c = await rig.seed(channel, alice)
    message = backend.make_message("How did the interview go?", rig.bot.user, channel)
    old = f"kept:fu:snooze:{c.id}"
    button = {"type": 2, "style": 1, "label": "Snooze 1 day", "custom_id": old}

    await click(
        rig.bot,
        message=message,
        components=[{"type": 1, "components": [button]}],
        custom_id=old,
        user=alice,
    )

    assert "Snoozed by" in edited(answers)
    assert await rig.status(c.id) == "snoozed"
