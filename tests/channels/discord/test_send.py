"""Sending robustly: what each failure of a Discord send means for a retry."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import discord
import pytest
from discord.ext.test.backend import FakeRequest

from channels.discord.errors import send_failure
from core.delivery.send import deliver_once
from core.messages import Outbound, SendResult, Target
from tests.fakes.discord_server import Script
from tests.support.discord_dpytest import Rig, make_thread, sent_messages
from tests.support.discord_harness import DiscordHarness, discord_harness
from tests.support.scripted_model import text


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
    assert not result.ok and not result.retryable


# --- formatting and quoting, the real discord.py against the fake Discord ------------


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[DiscordHarness]:
    async with discord_harness(tmp_path) as h:
        yield h


CODE = "\n".join(f"    total += price_{i}  # running sum, item {i}" for i in range(120))
LONG_MARKDOWN = (
    "**The plan**\n\nRun this:\n\n```python\n"
    + CODE
    + "\n```\n\n"
    + "\n\n".join(f"Step {i}: check the *result* again." for i in range(30))
)


def _fences_balanced(content: str) -> bool:
    return len(re.findall(r"^```", content, re.MULTILINE)) % 2 == 0


async def test_a_long_markdown_reply_arrives_as_well_formed_messages(
    harness: DiscordHarness,
) -> None:
    harness.model.steps.append(text(LONG_MARKDOWN))
    fake = harness.fake
    await harness.start()
    await fake.say("what is the plan?")
    await fake.wait_for(lambda: "Step 29" in " ".join(fake.texts()))

    texts = fake.texts()
    # The fake refuses content over 2,000 characters: every send was taken.
    assert len(fake.calls_to("send")) == len(texts) >= 3
    assert all(len(t) <= 2000 and _fences_balanced(t) for t in texts)
    assert texts[0].startswith("**The plan**\n\nRun this:\n\n```python\n")
    assert texts[1].startswith("```python\n    total += price_")
    code = [ln for t in texts for ln in t.splitlines() if "total +=" in ln]
    assert code == CODE.splitlines()


async def test_a_server_reply_quotes_the_message_without_a_ping_and_a_dm_is_not_quoted(
    harness: DiscordHarness,
) -> None:
    fake = harness.fake
    await harness.start()
    asked = await fake.say("what time is it?", channel=fake.general, mention=True)
    await fake.wait_for(lambda: fake.sent)
    await fake.say("and here?")
    await fake.wait_for(lambda: len(fake.sent) >= 2)

    server, direct = fake.sent
    assert server.channel_id == fake.general and server.reference == int(asked["id"])
    assert server.allowed_mentions == {"parse": [], "replied_user": False}
    assert direct.channel_id == fake.dm(fake.ana) and direct.reference is None


async def test_the_fake_refuses_what_discord_refuses(harness: DiscordHarness) -> None:
    fake = harness.fake
    adapter = await harness.start()
    dm = Target("discord", str(fake.dm(fake.ana)))

    too_long = await adapter.send_text(dm, "x" * 2001, None)
    fits = await adapter.send_text(dm, "x" * 2000, None)

    assert not too_long.ok and "2000 or fewer" in (too_long.error or "")
    assert fits.ok and fake.texts() == ["x" * 2000]


@pytest.mark.parametrize("status", [504, 524])
async def test_a_message_discord_posted_before_its_edge_timed_out_is_posted_once(
    harness: DiscordHarness, status: int
) -> None:
    # discord.py sends a request again after a 504 or 524; for a message that
    # Discord may have posted, that would post it twice.
    fake = harness.fake
    adapter = await harness.start()
    fake.script("send", Script(status=status, apply=True))
    dm = Target("discord", str(fake.dm(fake.ana)))

    result = await adapter.send_text(dm, "How did the exam go?", None)

    assert result.unknown and not result.retryable
    assert len(fake.calls_to("send")) == 1
    assert fake.texts() == ["How did the exam go?"]
