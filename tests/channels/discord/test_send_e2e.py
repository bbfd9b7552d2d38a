"""Sending through the real discord.py client against the fake Discord:
long Markdown cut into well-formed messages, quoting without a ping, what
Discord refuses, and a send whose outcome an edge timeout hid. The failure
mapping itself is unit-tested on dpytest in test_send.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.messages import Target
from tests.fakes.discord_server import Script
from tests.support.discord_harness import DiscordHarness, discord_harness
from tests.support.scripted_model import text


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
