"""Sending robustly, on dpytest: what each failure of a Discord send means
for a retry. Sends over HTTP to the fake Discord are in test_send_e2e.py."""

from __future__ import annotations

from typing import Any

import aiohttp
import discord
import pytest
from discord.ext.test.backend import FakeRequest

from channels.discord.errors import send_failure
from core.delivery.send import deliver_once
from core.messages import Outbound, SendResult, Target
from tests.support.discord_dpytest import Rig, make_thread, sent_messages


def http_error(cls: type[discord.HTTPException], status: int, code: int = 0) -> Exception:
    return cls(FakeRequest(status, "reason"), {"code": code, "message": f"status {status}"})


CASES: list[tuple[str, Exception, dict[str, Any]]] = [
    # Discord refused for good: the heartbeat marks the commitment failed.
    ("dm closed", http_error(discord.Forbidden, 403, 50007), {"retryable": False}),
    ("channel gone", http_error(discord.NotFound, 404, 10003), {"retryable": False}),
    ("bad request", http_error(discord.HTTPException, 400, 50035), {"retryable": False}),
    # Certainly not accepted: safe to retry.
    ("503", http_error(discord.DiscordServerError, 503), {"retryable": True}),
    ("500 after retries", http_error(discord.DiscordServerError, 500), {"retryable": True}),
    ("connect timeout", aiohttp.ConnectionTimeoutError(), {"retryable": True}),
    ("429 given up", discord.RateLimited(12.5), {"retryable": True, "retry_after": 12.5}),
    # May have been posted: never retried.
    ("504", http_error(discord.DiscordServerError, 504), {"unknown": True}),
    ("timeout", TimeoutError(), {"unknown": True}),
    ("disconnected", aiohttp.ServerDisconnectedError(), {"unknown": True}),
]


@pytest.mark.parametrize(("name", "exc", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_send_text_maps_failures(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, name: str, exc: Exception, expected: dict[str, Any]
) -> None:
    async def failing_send(self: Any, *args: Any, **kwargs: Any) -> None:
        raise exc

    monkeypatch.setattr(discord.abc.Messageable, "send", failing_send)

    result = await rig.adapter.send_text(Target("discord", str(rig.channel(0).id)), "hi", None)

    assert not result.ok and result.message_id is None
    assert result.retryable == expected.get("retryable", False)
    assert result.unknown == expected.get("unknown", False)
    assert result.retry_after == expected.get("retry_after")
    assert not (result.retryable and result.unknown)


def test_forbidden_names_the_discord_code() -> None:
    result = send_failure(http_error(discord.Forbidden, 403, 50007))
    assert result.error is not None and "50007" in result.error


async def test_a_refused_follow_up_is_tried_once(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    async def forbidden(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        raise http_error(discord.Forbidden, 403, 50007)

    monkeypatch.setattr(discord.abc.Messageable, "send", forbidden)
    outbound = Outbound(Target("discord", str(rig.channel(0).id)), "How did it go?")

    delivery = await deliver_once(rig.adapter, outbound, rig.clock)

    assert (delivery.outcome, delivery.attempts, calls) == ("failed", 1, 1)


async def test_send_goes_to_the_thread_when_there_is_one(rig: Rig) -> None:
    channel = rig.channel(0)
    thread = make_thread(rig.bot, channel, rig.member(0))

    result = await rig.adapter.send_text(
        Target("discord", str(channel.id), str(thread.id)), "in the thread", None
    )

    assert result == SendResult(message_id=result.message_id)
    [message] = sent_messages()
    assert message.channel.id == thread.id and str(message.id) == result.message_id


async def test_a_malformed_target_is_an_error_not_a_crash(rig: Rig) -> None:
    result = await rig.adapter.send_text(Target("discord", "not-a-number"), "hi", None)
    assert result.error and not result.retryable and not result.unknown
    assert sent_messages() == []
    # The same adapter sends to a well-formed target.
    sent = await rig.adapter.send_text(Target("discord", str(rig.channel(0).id)), "hi", None)
    assert sent.ok
    assert [m.content for m in sent_messages()] == ["hi"]
