"""A channel adapter for unit tests: no platform behind it, so starting and
stopping do nothing and every send is accepted (as message "1"). Tests
subclass it for the one behaviour they watch."""

from __future__ import annotations

from channels.base import ChannelAdapter
from core.messages import Inbound, SendResult, Target


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
