"""ChannelAdapter.send: a message with buttons is split like any other, its
buttons (the platform's rendering of its actions) go on the last chunk, and
a partly sent one is never repeated."""

from __future__ import annotations

from channels.departure import Departure
from core.messages import Action, Outbound, SendResult, Target, followup_actions
from tests.support.adapters import RecordingAdapter

TARGET = Target("telegram", "42")
ACTIONS = followup_actions(["cm_000000000001"])
TEXT = "one " * 30 + "\n\n" + "two " * 30 + "\n\n" + "three " * 20


class Chunks(RecordingAdapter):
    platform = "chunks"
    max_message_length = 160


async def test_only_the_quoting_chunk_of_a_check_in_pings() -> None:
    chunks = Chunks()
    await chunks.send(Outbound(TARGET, TEXT, "9", ACTIONS, ping_replied=True))
    pings = [chunk.ping for chunk in chunks.sent]
    assert pings[0] is True and not any(pings[1:])
    plain = Chunks()
    await plain.send(Outbound(TARGET, TEXT, "9", ACTIONS))
    assert plain.sent and not any(chunk.ping for chunk in plain.sent)


async def test_buttons_go_on_the_last_chunk_and_the_first_id_is_recorded() -> None:
    chunks = Chunks()
    result = await chunks.send(Outbound(TARGET, TEXT, "9", ACTIONS))
    assert result == SendResult(message_id="1")
    assert [(chunk.reply_to, chunk.buttons) for chunk in chunks.sent] == [
        ("9", None),
        (None, None),
        (None, tuple(ACTIONS)),
    ]


async def test_a_message_without_actions_gets_no_buttons() -> None:
    chunks = Chunks()
    await chunks.send(Outbound(TARGET, TEXT, None))
    assert len(chunks.sent) == 3 and all(chunk.buttons is None for chunk in chunks.sent)


async def test_a_failed_first_chunk_is_the_platforms_answer() -> None:
    chunks = Chunks(fail_at=1)
    result = await chunks.send(Outbound(TARGET, TEXT, None, ACTIONS))
    assert result.error == "boom" and result.retryable and len(chunks.sent) == 1


async def test_a_partly_sent_message_has_an_unknown_outcome_never_retried() -> None:
    chunks = Chunks(fail_at=2)
    result = await chunks.send(Outbound(TARGET, TEXT, None, ACTIONS))
    assert (result.message_id, result.unknown, result.retryable) == ("1", True, False)
    assert len(chunks.sent) == 2  # the rest is not sent


async def test_nothing_to_send() -> None:
    chunks = Chunks()
    result = await chunks.send(Outbound(TARGET, "  ", None, ACTIONS))
    assert result.error == "nothing to send" and not result.retryable
    assert chunks.sent == []
    # The same adapter sends a message that has something in it.
    assert (await chunks.send(Outbound(TARGET, "hi", None, ACTIONS))).ok
    assert [chunk.text for chunk in chunks.sent] == ["hi"]


class Tagged(Chunks):
    """A platform with its own chunk type: (number, text) pairs."""

    def prepare(self, text: str) -> list[tuple[int, str]]:  # type: ignore[override]
        return list(enumerate(text.split("|"), start=1))

    async def send_chunk(  # type: ignore[override]
        self,
        target: Target,
        chunk: tuple[int, str],
        reply_to: str | None,
        buttons: tuple[Action, ...] | None,
        *,
        ping: bool = False,
        departure: Departure | None = None,
    ) -> SendResult:
        return await self.send_text(target, f"{chunk[0]}:{chunk[1]}", reply_to, buttons, ping=ping)


async def test_a_platform_sends_its_own_chunks_through_the_one_pipeline() -> None:
    tagged = Tagged()
    result = await tagged.send(Outbound(TARGET, "a|b|c", "9", ACTIONS))
    assert result == SendResult(message_id="1")
    assert [(c.text, c.reply_to, c.buttons) for c in tagged.sent] == [
        ("1:a", "9", None),
        ("2:b", None, None),
        ("3:c", None, ACTIONS),
    ]

    partly = Tagged(fail_at=2)
    result = await partly.send(Outbound(TARGET, "a|b|c", None))
    assert (result.message_id, result.unknown, result.retryable) == ("1", True, False)
    assert len(partly.sent) == 2
