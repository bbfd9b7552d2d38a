"""A follow-up check-in in a Discord server channel, end to end: the real
discord.py client against the fake Discord, the real heartbeat. The check-in
replies (message reference) to the message of the member it is about, in that
channel only, with its buttons."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from core.commitments.model import NewCommitment, Scope
from core.config.model import KeptConfig
from tests.support.discord_harness import discord_harness
from tests.support.scripted_model import text


async def test_a_server_check_in_replies_to_the_members_message(tmp_path: Path) -> None:
    async with discord_harness(tmp_path) as harness:
        fake = harness.fake
        harness.config = KeptConfig.model_validate(
            {**harness.config.model_dump(by_alias=True), "commitments": {"enabled": True}}
        )
        await harness.start()
        said = await fake.say("I have a job interview tomorrow", channel=fake.general, mention=True)
        await fake.wait_for(lambda: fake.texts())
        key = f"agent:main:discord:channel:{fake.general}"
        rows = await harness.store.history(key, before_turn_of=2**62, limit=10)
        [stored] = [r for r in rows if r.role == "user"]

        now = harness.clock.now()
        member = Scope(
            "main", key, "discord", str(fake.general), None, str(fake.ana["id"]),
            chat_kind="channel",
        )  # fmt: skip
        new = NewCommitment(
            scope=member,
            kind="event_check_in",
            sensitivity="routine",
            source="inferred_user_context",
            reason="user has a job interview",
            suggested_text="How did the interview go?",
            dedupe_key="interview",
            confidence=0.9,
            due_earliest=now,
            due_latest=now + timedelta(hours=36),
            due_timezone="UTC",
            source_message_id=stored.id,
            created_at=now,
        )
        store = harness.services.backend.commitments
        [created] = (await store.apply_extraction(member, [new], [], now=now)).created
        harness.model.steps.append(text("How did the interview go?"))
        await harness.services.scheduler.tick()
        await fake.wait_for(lambda: len(fake.sent) >= 2)

        checkin = fake.sent[-1]
        assert checkin.content == "How did the interview go?"
        assert checkin.channel_id == fake.general
        assert checkin.reference == int(said["id"])  # whom it addresses
        # ... and pings them: they may not be watching the channel (a reply
        # to someone who just wrote quotes without a ping).
        assert checkin.allowed_mentions == {"parse": [], "replied_user": True}
        assert checkin.components  # Dismiss / Snooze
        found = await store.get(created.id)
        assert found is not None and found.status == "sent"
