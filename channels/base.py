"""The base every platform adapter builds on.

An adapter turns platform events into `Inbound`s for core, and sends core's
`Outbound`s back. The base owns what every platform needs the same way: the
allow-list check and splitting long text into platform-sized chunks.
"""

from __future__ import annotations

import abc
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from core.clock import Clock
from core.commitments.service import CommitmentService
from core.config import KeptConfig
from core.logs import event
from core.messages import Inbound, Outbound, SendResult, Target
from core.reminders import ReminderService
from core.store import Store

log = logging.getLogger("kept.channels")


class InboundHandler(Protocol):
    """ConversationManager.handle: one turn; `on_stored` fires once the
    message is in the transcript."""

    def __call__(
        self, inbound: Inbound, *, on_stored: Callable[[], object] | None = None
    ) -> Awaitable[object]: ...


class ChannelStartError(Exception):
    """A channel cannot start (missing or rejected token, bad setting); the
    message names the config key or environment variable to fix."""


@dataclass(frozen=True)
class ChannelContext:
    """What an adapter gets from the runtime: core services, never the runtime.

    `handle` runs a conversation turn (ConversationManager.handle); `store` is
    for transcript edits and deletions; `commitments` and `reminders` back
    the platform's commands. Config is read through `config()` on every use,
    so a reloaded file applies without a restart.
    """

    handle: InboundHandler
    store: Store
    commitments: CommitmentService
    reminders: ReminderService
    config: Callable[[], KeptConfig]
    clock: Clock
    environ: Mapping[str, str]


class ChannelAdapter(abc.ABC):
    platform: ClassVar[str]
    max_message_length: ClassVar[int] = 4000

    def __init__(
        self, *, agent_id: str, allow_from: Iterable[str], handler: InboundHandler
    ) -> None:
        self.agent_id = agent_id
        self._allow = {a.strip().lower().lstrip("@") for a in allow_from if a.strip()}
        self._handler = handler

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def send_text(self, target: Target, text: str, reply_to: str | None) -> SendResult:
        """Send one chunk that already fits the platform's limit."""

    def is_allowed(self, user_id: str, username: str | None = None) -> bool:
        """An empty allow-list lets everyone in; otherwise the id or @username must be on it."""
        if not self._allow:
            return True
        if user_id.lower() in self._allow:
            return True
        return username is not None and username.lower().lstrip("@") in self._allow

    async def send(self, outbound: Outbound) -> SendResult:
        """Send a message, split into chunks. The result carries the first
        chunk's id; a failure stops the rest so the user never gets a torso."""
        first: SendResult | None = None
        reply_to = outbound.reply_to_platform_id
        for chunk in split_message(outbound.text, self.max_message_length):
            result = await self.send_text(outbound.target, chunk, reply_to)
            if not result.ok:
                event(
                    log,
                    logging.WARNING,
                    "send_failed",
                    platform=self.platform,
                    chat=outbound.target.chat_id,
                    thread=outbound.target.thread_id,
                    error=result.error,
                    retryable=result.retryable,
                )
                if first is None:
                    return result
                return SendResult(
                    message_id=first.message_id, error=result.error, retryable=False, unknown=True
                )
            first = first or result
            reply_to = None
        return first or SendResult(error="nothing to send")


class AdapterRouter:
    """The `Sender` core talks to: routes by the target's platform."""

    def __init__(self) -> None:
        self._adapters: dict[str, ChannelAdapter] = {}

    def add(self, adapter: ChannelAdapter) -> None:
        self._adapters[adapter.platform] = adapter

    def remove(self, platform: str) -> None:
        self._adapters.pop(platform, None)

    @property
    def platforms(self) -> set[str]:
        return set(self._adapters)

    async def send(self, outbound: Outbound) -> SendResult:
        adapter = self._adapters.get(outbound.target.platform)
        if adapter is None:
            return SendResult(error=f"no running adapter for {outbound.target.platform}")
        return await adapter.send(outbound)


_BREAKS = (
    re.compile(r"\n\s*\n"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?。！？])\s+"),  # sentence
    re.compile(r"\s+"),  # word
)


def split_message(text: str, limit: int) -> list[str]:
    """Split text into chunks of at most `limit` characters, preferring
    paragraph, then line, then sentence, then word boundaries."""
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    while len(text) > limit:
        cut = _best_cut(text, limit)
        head, text = text[:cut].rstrip(), text[cut:].lstrip()
        if head:
            chunks.append(head)
    if text:
        chunks.append(text)
    return chunks


def _best_cut(text: str, limit: int) -> int:
    window = text[: limit + 1]
    for pattern in _BREAKS:
        # The last boundary in the window; ignore ones so early that the chunk
        # would be a sliver.
        cuts = [m.start() for m in pattern.finditer(window) if m.start() >= limit // 4]
        if cuts:
            return cuts[-1]
    return limit
