"""ChannelAdapter.send: a message with buttons is split like any other, its
buttons (the platform's rendering of its actions) go on the last chunk, and
a partly sent one is never repeated."""

from __future__ import annotations

from collections.abc import Sequence

from channels.base import ChannelAdapter, Departure
from core.messages import Action, Inbound, Outbound, SendResult, Target, followup_actions

TARGET = Target("telegram", "42")
ACTIONS = followup_actions(["cm_000000000001"])
TEXT = "one " * 30 + "\n\n" + "two " * 30 + "\n\n" + "three " * 20


class Chunks(ChannelAdapter[tuple[Action, ...]]):
    """Records every chunk; its "buttons" are the actions themselves."""

    platform = "chunks"
    max_message_length = 160

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(handler=self._ignore)
        self.sent: list[tuple[str, str | None, tuple[Action, ...] | None]] = []
        self.fail_at = fail_at
        self.pings: list[bool] = []

    async def _ignore(self, inbound: Inbound, **_: object) -> None:
        return None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def render_actions(self, actions: Sequence[Action]) -> tuple[Action, ...]:
        return tuple(actions)

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: tuple[Action, ...] | None = None,
        *,
        ping: bool = False,
    ) -> SendResult:
        self.sent.append((text, reply_to, buttons))
        self.pings.append(ping)
        if len(self.sent) == self.fail_at:
            return SendResult(error="boom", retryable=True)
        return SendResult(message_id=str(len(self.sent)))


async def test_only_the_quoting_chunk_of_a_check_in_pings() -> None:
    chunks = Chunks()
    await chunks.send(Outbound(TARGET, TEXT, "9", ACTIONS, ping_replied=True))
    assert chunks.pings[0] is True and not any(chunks.pings[1:])
    plain = Chunks()
    await plain.send(Outbound(TARGET, TEXT, "9", ACTIONS))
    assert not any(plain.pings)


async def test_buttons_go_on_the_last_chunk_and_the_first_id_is_recorded() -> None:
    chunks = Chunks()
    result = await chunks.send(Outbound(TARGET, TEXT, "9", ACTIONS))
    assert result == SendResult(message_id="1")
    assert [(reply, buttons) for _, reply, buttons in chunks.sent] == [
        ("9", None),
        (None, None),
        (None, tuple(ACTIONS)),
    ]


async def test_a_message_without_actions_gets_no_buttons() -> None:
    chunks = Chunks()
    await chunks.send(Outbound(TARGET, TEXT, None))
    assert len(chunks.sent) == 3 and all(buttons is None for *_, buttons in chunks.sent)


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
    result = await Chunks().send(Outbound(TARGET, "  ", None, ACTIONS))
    assert not result.ok


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
    assert tagged.sent == [("1:a", "9", None), ("2:b", None, None), ("3:c", None, ACTIONS)]

    partly = Tagged(fail_at=2)
    result = await partly.send(Outbound(TARGET, "a|b|c", None))
    assert (result.message_id, result.unknown, result.retryable) == ("1", True, False)
    assert len(partly.sent) == 2
