"""channels/chunked.py: a message with buttons is split like any other, its
buttons go on the last chunk, and a partly sent one is never repeated."""

from __future__ import annotations

from collections.abc import Sequence

from channels.chunked import send_with_actions
from core.messages import Action, Outbound, SendResult, Target, followup_actions

TARGET = Target("telegram", "42")
ACTIONS = followup_actions(["cm_000000000001"])
TEXT = "one " * 30 + "\n\n" + "two " * 30 + "\n\n" + "three " * 20


class Chunks:
    def __init__(self, fail_at: int | None = None) -> None:
        self.sent: list[tuple[str, str | None, Sequence[Action]]] = []
        self.fail_at = fail_at

    async def __call__(
        self, target: Target, text: str, reply_to: str | None, actions: Sequence[Action]
    ) -> SendResult:
        self.sent.append((text, reply_to, actions))
        if len(self.sent) == self.fail_at:
            return SendResult(error="boom", retryable=True)
        return SendResult(message_id=str(len(self.sent)))


async def test_buttons_go_on_the_last_chunk_and_the_first_id_is_recorded() -> None:
    chunks = Chunks()
    result = await send_with_actions(
        Outbound(TARGET, TEXT, "9", ACTIONS), 160, chunks, platform="telegram"
    )
    assert result == SendResult(message_id="1")
    assert [(reply, actions) for _, reply, actions in chunks.sent] == [
        ("9", ()),
        (None, ()),
        (None, ACTIONS),
    ]


async def test_a_failed_first_chunk_is_the_platforms_answer() -> None:
    chunks = Chunks(fail_at=1)
    result = await send_with_actions(
        Outbound(TARGET, TEXT, None, ACTIONS), 160, chunks, platform="x"
    )
    assert result.error == "boom" and result.retryable and len(chunks.sent) == 1


async def test_a_partly_sent_message_has_an_unknown_outcome_never_retried() -> None:
    chunks = Chunks(fail_at=2)
    result = await send_with_actions(
        Outbound(TARGET, TEXT, None, ACTIONS), 160, chunks, platform="x"
    )
    assert (result.message_id, result.unknown, result.retryable) == ("1", True, False)
    assert len(chunks.sent) == 2  # the rest is not sent


async def test_nothing_to_send() -> None:
    result = await send_with_actions(
        Outbound(TARGET, "  ", None, ACTIONS), 160, Chunks(), platform="x"
    )
    assert not result.ok
