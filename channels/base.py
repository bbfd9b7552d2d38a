"""The base every platform adapter builds on.

An adapter turns platform events into `Inbound`s for core, and sends core's
`Outbound`s back. The base owns what every platform does the same way, as
one pipeline with small per-platform hooks (after aiogram's middlewares and
nanobot's BaseChannel._handle_message):

1. `admit`: who is answered where (`access()`, read from the live config on
   every check; see `admission`): a direct message by `dmPolicy` (an
   unknown user under `pairing` gets a one-time code and nothing else: the
   message is not stored and never reaches the model), a group only when
   listed in `groups` or with `groupPolicy: open`;
2. `inbound`: the `Inbound`, with the agent read from the live config;
3. `run_turn`: the conversation manager's turn, "typing…" while its
   model call runs (the manager says when: `during_model`;
   `keep_typing` is the platform's indicator), never while a message waits
   for its turn, and error capture: a failed turn is logged, never raised;
   MessageNotStored is raised for the platform to hold the message
   (Telegram's intake, Discord's catch-up).

What decides whether a message is addressed to the bot at all (mentions,
replies, commands) stays with the platform, before `admit`.

Sending is the base's too: `send` has the platform cut the text into its
own chunks (`prepare`: Telegram's text with entities, Discord's Markdown
with code fences closed and reopened, plain text elsewhere), sends them in
order (`send_chunk`), quoting the replied-to message on the first, and puts
a message's actions, as the platform's buttons (`render_actions`), on the
last chunk, the one read after the whole text. A message's `on_leaving`
(core's record that a reply is on its way) is called once, through a
`Departure` (channels/departure.py), just before its first request leaves the process: after any
waiting for the platform's pace, which the platform's `send_chunk` does
itself (Telegram hands the Departure to its rate limiter).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, cast

from typing_extensions import TypeVar

from channels.access import Access, Admission, announce_access, pairing_notice
from channels.context import InboundHandler
from channels.departure import Departure, SendFenced
from channels.media import REFUSED_NOTICE
from channels.split import split_plain
from core.clock import Clock, SystemClock
from core.errors import KeptError, MessageNotStored
from core.logs import event
from core.messages import ButtonAction, ChatKind, Inbound, Outbound, SendResult, Target
from core.metrics import recorder
from core.pairing import Pairing
from core.store.errors import root_cause

log = logging.getLogger("kept.channels")
# Usernames remembered per adapter for `@name` entries at delivery time.
_USERNAMES_KEPT = 10_000


class ChannelStartError(KeptError):
    """A channel cannot start (missing or rejected token, bad setting); the
    message names the config key or environment variable to fix."""


@dataclass(frozen=True, slots=True)
class AddressedMessage:
    """A message the platform's rules found addressed to the bot, before the
    allow-list: what `admit` and `inbound` need."""

    target: Target
    chat_kind: ChatKind
    sender_id: str
    text: str
    username: str | None = None
    platform_message_id: str | None = None
    # The server (Discord guild) the message was posted in; None for DMs and
    # platforms without one.
    server_id: str | None = None


# What a platform attaches to a message as buttons (Telegram's inline
# keyboard, Discord's view).
Buttons = TypeVar("Buttons")
# One message's worth of a reply as the platform sends it (plain text unless
# the platform says otherwise, e.g. Telegram's text with its entities).
Chunk = TypeVar("Chunk", default=str)


class ChannelAdapter(abc.ABC, Generic[Buttons, Chunk]):
    platform: ClassVar[str]
    max_message_length: ClassVar[int] = 4000

    def __init__(
        self,
        *,
        handler: InboundHandler,
        agent_id: str = "",
        allow_from: Iterable[str] = (),
        clock: Clock | None = None,
        pairing: Pairing | None = None,
    ) -> None:
        """`agent_id` and `allow_from` are fixed values for a channel started
        with them (the console); a platform whose settings live in the config
        file overrides `agent_setting` and `access` to read them on every
        use, so an edited file applies to the next message without a restart.
        `pairing` keeps the codes and approved users of dmPolicy `pairing`."""
        self._handler = handler
        self._fixed_agent = agent_id
        self._fixed_allow = tuple(allow_from)
        self._clock: Clock = clock or SystemClock()
        self._pairing = pairing
        # The username each user last wrote with, for `@name` entries of
        # allowFrom when a delivery is checked (see `delivery_refusal`).
        self._usernames: OrderedDict[str, str] = OrderedDict()
        # The platform's own logger: its lines read like the rest of its events.
        self._log = logging.getLogger(f"kept.{self.platform}")

    def agent_setting(self) -> str:
        """Hook: the agent this channel's messages go to."""
        return self._fixed_agent

    def allow_list(self) -> Iterable[str]:
        """Hook of a channel without `access` settings (the console): the
        user ids and usernames allowed to talk to it (empty: everyone)."""
        return self._fixed_allow

    def access(self) -> Access:
        """Hook: who the channel answers. The default, for a channel without
        settings of its own (the local console): everyone, or only
        `allow_list()` when it names anyone."""
        allow = tuple(self.allow_list())
        return Access(dm_policy="allowlist" if allow else "open", allow_from=allow)

    @property
    def agent_id(self) -> str:
        """The agent this channel's messages go to, as the settings say now."""
        return self.agent_setting()

    async def chat_admin(self, target: Target, user_id: str) -> bool:
        """Hook: whether `user_id` administers the shared chat `target` (what
        lets a member see everyone's follow-ups and reminders there); False
        where the platform has no such thing or cannot be asked."""
        return False

    @property
    def accepts_sends(self) -> bool:
        """Hook: whether the platform can be sent to now. False (an adapter
        still connecting in the background) keeps its platform out of
        AdapterRouter.platforms, so the heartbeat and recovery wait for it."""
        return True

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def send_text(
        self,
        target: Target,
        text: str,
        reply_to: str | None,
        buttons: Buttons | None = None,
        *,
        ping: bool = False,
    ) -> SendResult:
        """Send one plain-text chunk that already fits the platform's limit,
        with `buttons` (from `render_actions`) when it is a message's last
        chunk; `ping` notifies the author of `reply_to` where the platform
        lets a quote go without it."""

    def prepare(self, text: str) -> Sequence[Chunk]:
        """Hook: a message's text as the platform's chunks, each within its
        limit, in order (none for blank text). The default: plain text cut at
        paragraph, line, sentence, then word boundaries."""
        return cast("list[Chunk]", split_plain(text, self.max_message_length))

    async def send_chunk(
        self,
        target: Target,
        chunk: Chunk,
        reply_to: str | None,
        buttons: Buttons | None,
        *,
        ping: bool = False,
        departure: Departure | None = None,
    ) -> SendResult:
        """Hook: send one chunk from `prepare` (the default: `send_text`).
        A platform that waits for its pace inside the send calls
        `departure.leave()` after the waiting, just before the request;
        the default calls it first."""
        if departure is not None:
            try:
                await departure.leave()
            except SendFenced as exc:
                return SendResult(error=f"not sent: {exc}")
        return await self.send_text(target, cast("str", chunk), reply_to, buttons, ping=ping)

    def render_actions(self, actions: Sequence[ButtonAction]) -> Buttons | None:
        """Hook: the platform's buttons for a message's actions (None: none
        to show; the default, for a platform without buttons)."""
        return None

    async def admission(
        self,
        chat_kind: ChatKind,
        sender_id: str,
        username: str | None = None,
        group_id: str | None = None,
    ) -> Admission:
        """Whether the sender is answered here, by the settings now (`access()`).

        A direct message follows dmPolicy: `open` answers anyone, `allowlist`
        only `allowFrom`, `pairing` also the users the operator approved and
        offers a code to anyone else; a user the operator blocked (`kept
        pairing block`) is answered under none of them. A group (`group_id`:
        the Telegram chat, the Discord server) is answered only when listed
        in `groups` or with groupPolicy `open`, and then for every member. A
        pairing store that cannot be read raises MessageNotStored: the
        platform holds the message and offers it again, as when the
        transcript cannot be written."""
        if username:
            self._remember_username(sender_id, username)
        access = self.access()
        if chat_kind != "private":
            listed = group_id is not None and group_id in access.groups
            return "yes" if access.group_policy == "open" or listed else "no"
        answered = access.dm_policy == "open" or access.lists(sender_id, username)
        if not answered and access.dm_policy != "pairing":
            return "no"
        if self._pairing is None:
            return "yes" if answered else "no"
        try:
            standing = await self._pairing.standing(self.platform, sender_id)
        except Exception as exc:
            raise MessageNotStored("the pairing store cannot be read") from exc
        if standing == "blocked":
            return "no"
        return "yes" if answered or standing == "approved" else "pair"

    async def delivery_refusal(
        self, target: Target, chat_kind: ChatKind, member: str | None
    ) -> str | None:
        """Why something kept sends on its own (a check-in, a reminder) may
        not go to `target` now, or None: the same decision as `admission`
        for the chat's member (private chat) or its group, by the settings
        and approvals of this moment. The member's username, for `@name`
        entries, is the one they last wrote with or the one kept stored when
        approving them; one it does not know cannot match an `@name` entry,
        so such a delivery waits (follow-ups) until they write again."""
        if chat_kind != "private":
            group = await self.group_of(target)
            if await self.admission(chat_kind, member or "", None, group) == "yes":
                return None
            return (
                f"group {group or target.chat_id} is not served "
                "(not in groups, groupPolicy allowlist)"
            )
        user = member or target.chat_id
        verdict = await self.admission("private", user, None)
        if verdict != "yes" and (name := await self._username_of(user)) is not None:
            verdict = await self.admission("private", user, name)
        if verdict == "yes":
            return None
        if verdict == "pair":
            return f"user {user} is not approved (pairing revoked or never approved)"
        return f"user {user} is not allowed (blocked, or not in allowFrom under dmPolicy)"

    async def group_of(self, target: Target) -> str | None:
        """Hook: the id a group chat is listed by in `groups` (the chat
        itself; Discord: its server)."""
        return target.chat_id

    def _remember_username(self, user_id: str, username: str) -> None:
        self._usernames[user_id] = username
        self._usernames.move_to_end(user_id)
        while len(self._usernames) > _USERNAMES_KEPT:
            self._usernames.popitem(last=False)

    async def _username_of(self, user_id: str) -> str | None:
        if (name := self._usernames.get(user_id)) is not None:
            return name
        if self._pairing is None:
            return None
        for user in await self._pairing.paired():
            if user.platform == self.platform and user.user_id == user_id:
                return user.username
        return None

    async def admit(self, addressed: AddressedMessage, *, offer_code: bool = True) -> bool:
        """Step 1: whether the message is answered (`admission`). A refusal
        is logged, never answered; an unknown user in a DM under `pairing`
        gets their code instead (`offer_code=False`: a message read back from
        history, whose sender was offered it when it was new)."""
        group = addressed.server_id or addressed.target.chat_id
        verdict = await self.admission(
            addressed.chat_kind, addressed.sender_id, addressed.username, group
        )
        if verdict == "yes":
            return True
        if verdict == "pair":
            if offer_code:
                await self.offer_code(addressed)
            return False
        event(
            self._log,
            logging.INFO,
            f"{self.platform}_not_allowed",
            agent=self.agent_id,
            user=addressed.sender_id,
            chat=addressed.target.chat_id,
            server=addressed.server_id,
            kind=addressed.chat_kind,
        )
        return False

    async def offer_code(self, addressed: AddressedMessage) -> None:
        """Send an unknown user the notice with their pairing code: the only
        answer they get, once per code and again at most once an hour
        (`Pairing.notice_every`) while they keep writing, whichever worker
        reads their message. Any other message of theirs costs one read and
        nothing else: it never reaches the send budget the served users'
        answers use. Nothing is stored in the transcript."""
        assert self._pairing is not None  # admission said "pair"
        try:
            offer = await self._pairing.offer(
                self.platform, addressed.sender_id, addressed.username
            )
        except Exception as exc:
            raise MessageNotStored("the pairing request cannot be stored") from exc
        if offer is None or not offer.notify:
            return
        self._log_offered(addressed.sender_id, addressed.username)
        await self.send(
            Outbound(target=addressed.target, text=pairing_notice(offer.request, self._clock))
        )

    async def pairing_text(self, sender_id: str, username: str | None) -> str | None:
        """The notice with an unknown user's pairing code (the pending one
        again, while it lasts), for an answer the platform gives anyway (a
        slash command in a DM): it does not count as the notice a message
        gets. None for a blocked user. Raises MessageNotStored when the
        request cannot be stored."""
        assert self._pairing is not None  # admission said "pair"
        try:
            request = await self._pairing.code_for(self.platform, sender_id, username)
        except Exception as exc:
            raise MessageNotStored("the pairing request cannot be stored") from exc
        if request is None:
            return None
        self._log_offered(sender_id, username)
        return pairing_notice(request, self._clock)

    def _log_offered(self, sender_id: str, username: str | None) -> None:
        event(
            self._log,
            logging.INFO,
            "pairing_code_offered",
            platform=self.platform,
            user=sender_id,
            username=username,
            action="if you know this user, ask them for the code; then run "
            "`kept pairing approve CODE` (`kept pairing block PLATFORM:USER` if you do not)",
        )

    def announce_access(self, before: Access | None = None) -> None:
        """At start: a warning for each access setting an operator should
        know about; after a reload (`before`: the access until then), the
        same warnings for what it widened (channels/access.py)."""
        announce_access(self._log, self.platform, self.access(), before)

    def inbound(self, addressed: AddressedMessage) -> Inbound:
        """Step 2: the turn for core, for the agent the config names now."""
        return Inbound(
            agent_id=self.agent_id,
            target=addressed.target,
            chat_kind=addressed.chat_kind,
            sender_id=addressed.sender_id,
            text=addressed.text,
            ts=self._clock.now(),
            platform_message_id=addressed.platform_message_id,
        )

    async def keep_typing(self, target: Target) -> None:
        """Hook: show "typing…" in `target` until cancelled (cosmetic: a
        platform error ends it quietly). The default shows nothing."""
        return None

    @contextlib.asynccontextmanager
    async def typing_during(self, target: Target) -> AsyncIterator[None]:
        """ "typing…" in `target` for as long as the block runs: entered by
        the manager around a turn's model call only, so a message waiting
        for its chat's turn, or a reply waiting for the pace, shows none."""
        task = asyncio.create_task(self.keep_typing(target))
        # A failed indicator only ends it; its error is dropped.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            yield
        finally:
            task.cancel()

    async def run_turn(
        self, inbound: Inbound, *, on_stored: Callable[[], object] | None = None
    ) -> None:
        """Steps 3-5: the manager, typing during its model call, error
        capture. A turn that fails after its message was stored is logged
        (the manager answered model failures itself); MessageNotStored is
        raised, so the platform holds the message and offers it again, unless
        the store refused the message for good (`refused`): then it returns,
        and the message is confirmed."""
        try:
            await self._handler(
                inbound,
                on_stored=on_stored or (lambda: None),
                during_model=lambda: self.typing_during(inbound.target),
            )
        except MessageNotStored as exc:
            if not exc.deterministic:
                raise
            await self.refused(inbound, exc)
        except Exception as exc:
            event(
                self._log,
                logging.ERROR,
                f"{self.platform}_turn_failed",
                agent=inbound.agent_id,
                session=inbound.session_key,
                message=inbound.platform_message_id,
                error=repr(exc),
                action="see the error; recent unanswered messages are answered at the next start",
            )

    async def refused(self, inbound: Inbound, exc: MessageNotStored) -> None:
        """The store can never take this message (a value it refuses, not an
        outage): it is not held or retried, so the platform confirms it; its
        sender gets one short line instead of an answer, and the log names
        the driver's error."""
        cause = exc.__cause__ or exc
        event(
            self._log,
            logging.ERROR,
            f"{self.platform}_message_refused",
            agent=inbound.agent_id,
            session=inbound.session_key,
            message=inbound.platform_message_id,
            cause=root_cause(cause),
            action=exc.action,
        )
        recorder().message_refused(self.platform)
        quote = inbound.platform_message_id if inbound.chat_kind != "private" else None
        await self.send(
            Outbound(target=inbound.target, text=REFUSED_NOTICE, reply_to_platform_id=quote)
        )

    async def send(self, outbound: Outbound) -> SendResult:
        """Send a message, as the platform's chunks, its buttons on the last one.

        The result carries the first chunk's id, the one recorded. A failed
        first chunk is the platform's answer (retryable or not); a failure
        after it leaves the message partly sent, so its outcome is unknown
        and it is never repeated, and the rest is not sent: the user never
        gets a torso followed by a second copy. `outbound.on_leaving` is
        called once, just before the first request leaves (see Departure)."""
        departure = Departure(outbound.on_leaving)
        chunks = self.prepare(outbound.text)
        buttons = self.render_actions(outbound.actions) if outbound.actions else None
        first: SendResult | None = None
        reply_to = outbound.reply_to_platform_id
        for n, chunk in enumerate(chunks, start=1):
            last = n == len(chunks)
            result = await self.send_chunk(
                outbound.target,
                chunk,
                reply_to,
                buttons if last else None,
                ping=outbound.ping_replied and reply_to is not None,
                departure=departure,
            )
            if not result.ok:
                event(
                    log,
                    logging.WARNING,
                    "send_failed",
                    platform=self.platform,
                    chat=outbound.target.chat_id,
                    thread=outbound.target.thread_id,
                    chunk=n,
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
