"""Channel adapters for unit tests, with no platform behind them: starting
and stopping do nothing. `QuietAdapter` accepts every send (as message "1");
`RecordingAdapter` records every chunk and its stop, in order, and can be
told to fail a send. Tests subclass them for the one behaviour they watch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from channels.base import ChannelAdapter
from core.messages import Action, Inbound, SendResult, Target


async def ignore(inbound: Inbound, **_: object) -> None:
    """A handler for adapters whose test never takes a turn."""
    return None


class QuietAdapter(ChannelAdapter):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: None = None,
        *,
        ping: bool = False,
    ) -> SendResult:
        return SendResult(message_id="1")


@dataclass(frozen=True)
class SentChunk:
    target: Target
    text: str
    reply_to: str | None
    buttons: tuple[Action, ...] | None
    ping: bool


class RecordingAdapter(ChannelAdapter[tuple[Action, ...]]):
    """Records every chunk asked of it in `sent`, and in `events` the sends
    ("sent <text>") and its stop ("stopped") in the order they happened. Its
    "buttons" are the actions themselves. `fail_at` makes the send with that
    number (counting from 1) fail as retryable; the failed one is recorded."""

    platform = "recording"

    def __init__(self, *, fail_at: int | None = None, **settings: Any) -> None:
        settings.setdefault("handler", ignore)
        super().__init__(**settings)
        self.fail_at = fail_at
        self.sent: list[SentChunk] = []
        self.events: list[str] = []

    @property
    def texts(self) -> list[str]:
        return [chunk.text for chunk in self.sent]

    async def start(self) -> None: ...

    async def stop(self) -> None:
        self.events.append("stopped")

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
        self.sent.append(SentChunk(target, text, reply_to, buttons, ping))
        self.events.append(f"sent {text}")
        if len(self.sent) == self.fail_at:
            return SendResult(error="boom", retryable=True)
        return SendResult(message_id=str(len(self.sent)))
