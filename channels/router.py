"""The one `Sender` core talks to, which also answers core's questions that
only a platform can (is this user a group admin, is this chat still served):
each goes to the adapter of the target's platform."""

from __future__ import annotations

from typing import Any

from channels.base import ChannelAdapter
from core.messages import ChatKind, Outbound, SendResult, Target


class AdapterRouter:
    """The `Sender` core talks to: routes by the target's platform."""

    def __init__(self) -> None:
        self._adapters: dict[str, ChannelAdapter[Any, Any]] = {}

    def add(self, adapter: ChannelAdapter[Any, Any]) -> None:
        self._adapters[adapter.platform] = adapter

    def remove(self, platform: str) -> None:
        self._adapters.pop(platform, None)

    @property
    def platforms(self) -> set[str]:
        """The platforms that can be sent to now."""
        return {name for name, adapter in self._adapters.items() if adapter.accepts_sends}

    async def is_admin(self, target: Target, user_id: str) -> bool:
        """core.tools.ChatAdmins: asked of the target's platform; False with
        no adapter for it."""
        adapter = self._adapters.get(target.platform)
        return adapter is not None and await adapter.chat_admin(target, user_id)

    async def send(self, outbound: Outbound) -> SendResult:
        adapter = self._adapters.get(outbound.target.platform)
        if adapter is None:
            return SendResult(error=f"no running adapter for {outbound.target.platform}")
        return await adapter.send(outbound)

    async def refusal(self, target: Target, chat_kind: ChatKind, member: str | None) -> str | None:
        """core's AccessCheck: the target platform's adapter decides. With
        no adapter for it here nothing can be sent anyway: the delivery
        waits for one, and that adapter decides then."""
        adapter = self._adapters.get(target.platform)
        if adapter is None:
            return None
        return await adapter.delivery_refusal(target, chat_kind, member)
