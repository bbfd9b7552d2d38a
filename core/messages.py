"""The vocabulary that core and the channels both speak.

A `Target` says where a message goes back to; the session key names the
conversation an agent has with that target. Channels build `Inbound`s, core
answers with `Outbound`s through a `Sender`, and a `SendResult` says whether
the platform accepted the message.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

# A UTF-16 surrogate on its own (Python lets a str hold one; UTF-8 cannot
# encode it) and NUL (PostgreSQL's text refuses it).
_UNSTORABLE = re.compile("[\ud800-\udfff]|\x00")


def storable(text: str) -> str:
    """`text` as every store can keep it: each lone UTF-16 surrogate becomes
    U+FFFD (a pair spelled as two surrogates becomes its character) and NUL
    is removed; anything else is left exactly as it was. The
    one place text from outside (a platform, an import, the model) is made
    fit for the transcript, the search index and the model alike."""
    if _UNSTORABLE.search(text) is None:
        return text  # the common case costs one scan
    # Through UTF-16: a high and a low surrogate side by side (text decoded
    # with surrogatepass) join into the character they spell; a lone one
    # becomes U+FFFD.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined.replace("\x00", "")


ChatKind = Literal["private", "group", "channel"]
CHAT_KINDS: tuple[ChatKind, ...] = ("private", "group", "channel")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a message goes back to: one chat, optionally one thread in it."""

    platform: str
    chat_id: str
    thread_id: str | None = None


def session_key(agent_id: str, target: Target, chat_kind: ChatKind) -> str:
    """`agent:<agentId>:<platform>:<chatKind>:<chatId>[:thread:<threadId>]`."""
    key = f"agent:{agent_id}:{target.platform}:{chat_kind}:{target.chat_id}"
    if target.thread_id is not None:
        key += f":thread:{target.thread_id}"
    return key


@dataclass(frozen=True, slots=True)
class SessionKeyParts:
    agent_id: str
    chat_kind: ChatKind
    target: Target


def parse_session_key(key: str) -> SessionKeyParts:
    """Inverse of `session_key`; raises ValueError for anything else."""
    parts = key.split(":")
    if len(parts) not in (5, 7) or parts[0] != "agent" or not all(parts):
        raise ValueError(f"not a session key: {key!r}")
    if len(parts) == 7 and parts[5] != "thread":
        raise ValueError(f"not a session key: {key!r}")
    kind = parts[3]
    if kind not in CHAT_KINDS:
        raise ValueError(f"unknown chat kind {kind!r} in session key {key!r}")
    thread = parts[6] if len(parts) == 7 else None
    return SessionKeyParts(
        agent_id=parts[1],
        chat_kind=kind,  # type: ignore[arg-type]
        target=Target(platform=parts[2], chat_id=parts[4], thread_id=thread),
    )


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message a user sent, as a channel adapter saw it."""

    agent_id: str
    target: Target
    chat_kind: ChatKind
    sender_id: str
    text: str
    ts: datetime
    platform_message_id: str | None = None

    def __post_init__(self) -> None:
        # Built here, made storable here: the transcript, the index and the
        # model all see this one text.
        object.__setattr__(self, "text", storable(self.text))

    @property
    def session_key(self) -> str:
        return session_key(self.agent_id, self.target, self.chat_kind)


FollowUpVerb = Literal["dismiss", "snooze"]
FOLLOWUP_VERBS: tuple[FollowUpVerb, ...] = ("dismiss", "snooze")


@dataclass(frozen=True, slots=True)
class Action:
    """A button under a message: what pressing it asks core to do to the
    follow-ups it names. Adapters render it (a Telegram inline button, a
    Discord component) and parse a press back with core/commands/buttons.py."""

    verb: FollowUpVerb
    commitment_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ZoneChoice:
    """A button under a reply of the chat model's set_timezone tool: set
    (`accept`) or leave `user_id`'s zone as it is. Only that user's press
    counts; nothing changes until they press."""

    user_id: str
    timezone: str
    accept: bool = True


def zone_choices(user_id: str, timezone: str) -> tuple[ZoneChoice, ...]:
    """The "Yes, use <zone>" and "No" buttons of a proposed zone."""
    return (ZoneChoice(user_id, timezone, True), ZoneChoice(user_id, timezone, False))


def followup_actions(commitment_ids: Iterable[str]) -> tuple[Action, ...]:
    """The "Dismiss" and "Snooze 1 day" buttons of a check-in about these
    follow-ups; none when it names none."""
    ids = tuple(dict.fromkeys(i.strip() for i in commitment_ids if i.strip()))
    if not ids:
        return ()
    return tuple(Action(verb, ids) for verb in FOLLOWUP_VERBS)


ListName = Literal["commitments", "reminders"]
LIST_NAMES: tuple[ListName, ...] = ("commitments", "reminders")
# A row's button in a list: follow-ups Dismiss / Snooze, reminders Cancel.
ItemVerb = Literal["dismiss", "snooze", "cancel"]
ITEM_VERBS: tuple[ItemVerb, ...] = ("dismiss", "snooze", "cancel")
# What a fired reminder's Snooze buttons offer, in minutes.
REMINDER_SNOOZE_MINUTES: tuple[int, ...] = (10, 60)


@dataclass(frozen=True, slots=True)
class ItemAction:
    """A button on one row of a /commitments or /reminders list: act on that
    item, then show `page` of the list again, in place. Only `viewer` (the
    user the list was made for) may use the list's buttons."""

    verb: ItemVerb
    item_id: str
    page: int
    viewer: str


@dataclass(frozen=True, slots=True)
class PageAction:
    """Prev / Next under a list: show `page` of `listing` in place."""

    listing: ListName
    page: int
    viewer: str


@dataclass(frozen=True, slots=True)
class ReminderSnooze:
    """ "Snooze 10 min" under a fired reminder. `firing` is the reminder's
    attempt count when it was sent: it names that one firing, so a press
    after a later firing (or a second press) changes nothing."""

    reminder_id: str
    firing: int
    minutes: int


@dataclass(frozen=True, slots=True)
class ForgetChoice:
    """ "Erase" / "Cancel" under a /forget prompt: erase (`erase`) or keep
    what kept holds from `user_id`. `issued` (Unix seconds) is when the prompt
    was made: a press after the lapse (core/commands/rights.py) erases
    nothing, and only `user_id`'s press counts."""

    user_id: str
    issued: int
    erase: bool = True


ButtonAction = Action | ItemAction | PageAction | ReminderSnooze | ZoneChoice | ForgetChoice


def reminder_snooze_actions(reminder_id: str, firing: int) -> tuple[ReminderSnooze, ...]:
    """The Snooze buttons of a fired reminder's message."""
    return tuple(ReminderSnooze(reminder_id, firing, m) for m in REMINDER_SNOOZE_MINUTES)


@dataclass(frozen=True, slots=True)
class Outbound:
    """One message core wants delivered."""

    target: Target
    text: str
    reply_to_platform_id: str | None = None
    # Buttons, rendered under the message's last chunk; never a destination.
    actions: tuple[ButtonAction, ...] = ()
    # Notify the author of the quoted message (a check-in about them). A
    # reply to someone who just wrote to the bot quotes without a ping.
    ping_replied: bool = False
    # Called once just before the message's first request leaves the process
    # (after any waiting for the platform's pace); False or an error: it is
    # not sent. How a stored reply is marked `sending`.
    on_leaving: Callable[[], Awaitable[bool]] | None = field(
        default=None, compare=False, repr=False
    )


@dataclass(frozen=True, slots=True)
class SendResult:
    """What the platform said about a send.

    `retryable` is True only when the platform certainly did not accept the
    message (connection refused, 429, 5xx before acceptance): retrying then
    cannot produce a second copy. `unknown` marks a send whose fate is not
    known (timeout after the request went out): it must never be retried.
    """

    message_id: str | None = None
    error: str | None = None
    retryable: bool = False
    unknown: bool = False
    # Seconds the platform asked us to wait before retrying (429 retry_after).
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Sender(Protocol):
    async def send(self, outbound: Outbound) -> SendResult: ...
