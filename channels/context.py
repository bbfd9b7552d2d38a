"""What the runtime hands a channel: core's services (never the runtime),
and the protocols of what a channel calls (its turns, edits and deletions;
the shared HTTP listener)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from core.clock import Clock
from core.commitments.service import CommitmentService
from core.config.model import KeptConfig
from core.conversation.start_over import StartOver
from core.limits.spend import SpendStores
from core.locks import SessionGuard
from core.messages import Inbound
from core.pairing import Pairing
from core.privacy.store import PrivacyStores
from core.reminders import ReminderService
from core.store import MessageRecord, Store
from core.store.app_state import AppStateStore
from core.store.parked import ParkedUpdates
from core.store.updates import UpdateQueue
from core.users import FollowUpPreferences, UserZones

# Entered around each model call of a turn (ConversationManager.handle's `during_model`).
DuringModel = Callable[[], AbstractAsyncContextManager[object]]


class InboundHandler(Protocol):
    """ConversationManager.handle: one turn; `on_stored` fires once the
    message is in the transcript, `during_model` is entered around the
    turn's model call."""

    def __call__(
        self,
        inbound: Inbound,
        *,
        on_stored: Callable[[], object] | None = None,
        during_model: DuringModel | None = None,
    ) -> Awaitable[object]: ...


class Conversation(Protocol):
    """What a channel hands its messages, edits and deletions to
    (core.conversation.manager.ConversationManager); each raises MessageNotStored
    when the change could not be stored."""

    def handle(
        self,
        inbound: Inbound,
        *,
        on_stored: Callable[[], object] | None = None,
        during_model: DuringModel | None = None,
    ) -> Awaitable[object]: ...

    async def edit(
        self, *, platform: str, chat_id: str, platform_message_id: str, text: str
    ) -> MessageRecord | None: ...

    async def delete(self, *, platform: str, chat_id: str, platform_message_id: str) -> bool: ...


class WebRoutes(Protocol):
    """The process's HTTP listener (bot/http.py, `http.listen`), which a
    platform that receives HTTP (Telegram's webhook) shares when its own
    address is the same one. Handlers are aiohttp request handlers."""

    def serves(self, host: str, port: int) -> bool: ...

    def mount(self, path: str, handler: Callable[[Any], Awaitable[Any]]) -> None: ...

    def unmount(self, path: str) -> None: ...


@dataclass(frozen=True)
class ChannelContext:
    """What an adapter gets from the runtime: core services, never the runtime.

    `conversation` takes the channel's turns, edits and deletions
    (ConversationManager), never the store directly; `store` is read only
    (the Discord catch-up's newest stored ids); `commitments` and `reminders`
    back the platform's commands. Config is read through `config()` on every
    use, so a reloaded file applies without a restart.
    """

    conversation: Conversation
    store: Store
    commitments: CommitmentService
    reminders: ReminderService
    config: Callable[[], KeptConfig]
    clock: Clock
    environ: Mapping[str, str]
    # Several workers on one database: who may do what only one may (poll
    # Telegram). None: this process is the only one.
    leadership: SessionGuard | None = None
    # Several workers: the queue through which the one polling worker hands
    # updates to every worker, and this worker's name on its claims.
    updates: UpdateQueue | None = None
    worker: str = ""
    # What the bot keeps about itself (the synced command tree's hash). None:
    # nothing is kept, e.g. Discord's commands are synced at every start.
    app_state: AppStateStore | None = None
    # Each user's own time zone (`/timezone`); None: everyone reads times in
    # the agent's zone (tests that build a context without one).
    users: UserZones | None = None
    # Pairing codes and approved users (dmPolicy: pairing); None: nobody can
    # pair, so an unknown user in a DM is refused like under `allowlist`.
    pairing: Pairing | None = None
    # The shared HTTP listener; None: `http.listen` is not set.
    web: WebRoutes | None = None
    # Where an update that keeps failing while others are stored is parked
    # (and replayed from); None: such an update is held.
    parked: ParkedUpdates | None = None
    # Starts a chat's conversation over (`/new`); None: the command says it
    # is not available (tests that build a context without one).
    start_over: StartOver | None = None
    # What /forget, /mydata and /export act through; None: those commands
    # say they are not available here.
    privacy: PrivacyStores | None = None
    # Who switched follow-ups off (`/followups`); None: the command says it
    # is not available (tests that build a context without one).
    followup_prefs: FollowUpPreferences | None = None
    # What /usage reads (a user's own day of model calls); None: the command
    # says it is not available (tests that build a context without one).
    spend: SpendStores | None = None
