"""The data-rights commands for every surface: /forget (asked first, then
an Erase / Cancel press), /mydata and /export.

What is erased is what the operator's `kept users forget PLATFORM:USER`
erases: everything kept holds from the user on this platform, under every
agent (core/privacy/store.py; the pairing approval stays, so they can go on
talking). The prompt's buttons carry the user and the moment it was asked
(core/commands/buttons.py): only that user's press counts, and a press
after FORGET_LAPSE erases nothing. Erasing runs in one transaction of the
store, so a second press (or two at once) finds nothing left and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from core.clock import Clock
from core.commands.results import Page
from core.commands.timezone import ZoneAnswer
from core.config.model import RetentionConfig
from core.messages import ForgetChoice
from core.privacy.export import document_text
from core.privacy.store import ChatSummary, ErasedUser, ErasureCounts, PrivacyStores

# How long a /forget prompt's Erase button works.
FORGET_LAPSE = timedelta(minutes=5)
# The commands about the asker's own data: a surface that cannot tell who
# asks (a Telegram admin posting as the group) refuses them. `/usage` too:
# the group's stand-in account's day would be nobody's.
RIGHTS_COMMANDS = frozenset({"forget", "mydata", "export", "usage"})


class ForgetOutcome(StrEnum):
    ERASED = "erased"
    # Erase pressed again, or by two at once: the first one erased it all.
    NOTHING_LEFT = "nothing_left"
    CANCELLED = "cancelled"
    LAPSED = "lapsed"
    # Someone else's prompt: nothing happens to anyone's data.
    NOT_YOURS = "not_yours"


@dataclass(frozen=True, slots=True)
class ForgetAsked:
    """/forget's first answer: what erasing would remove, and the Erase /
    Cancel buttons (none when nothing is held)."""

    counts: ErasureCounts
    actions: tuple[ForgetChoice, ...]
    issued: datetime


@dataclass(frozen=True, slots=True)
class ForgetAnswer:
    """A press on Erase or Cancel (or `kept chat`'s yes line)."""

    outcome: ForgetOutcome
    counts: ErasureCounts = field(default_factory=ErasureCounts)


@dataclass(frozen=True, slots=True)
class DataShown:
    """/mydata: what kept holds about the asker, and this chat's open
    follow-ups and reminders as list pages with their buttons."""

    held: ErasureCounts  # what /forget would erase, in every chat
    chats: tuple[ChatSummary, ...]  # the chats holding something of theirs
    zone: ZoneAnswer | None  # None: this surface has no per-user zones
    followups: Page
    reminders: Page
    viewer: str
    # The user's follow-up preference ("on" / "off"), from /followups; None:
    # not known here, and not shown.
    followup_preference: str | None = None
    # How long kept keeps what it holds (storage.retention); None: not
    # known here, and not shown.
    retention: RetentionConfig | None = None


@dataclass(frozen=True, slots=True)
class ExportMade:
    """/export: the document `kept users export` writes, as a file to send."""

    filename: str
    data: bytes
    chats: int


class RightsCommands:
    def __init__(self, stores: PrivacyStores, clock: Clock, *, platform: str, user_id: str) -> None:
        self._stores = stores
        self._clock = clock
        self._platform = platform
        self._user_id = user_id

    @property
    def user(self) -> ErasedUser:
        # Every agent's chats on this platform, as `kept users forget` erases.
        return ErasedUser(self._platform, self._user_id)

    async def ask_forget(self) -> ForgetAsked:
        counts = await self._stores.erasure.count(self.user)
        now = self._clock.now()
        issued = int(now.timestamp())
        actions: tuple[ForgetChoice, ...] = ()
        if counts.total:
            actions = (
                ForgetChoice(self._user_id, issued, True),
                ForgetChoice(self._user_id, issued, False),
            )
        return ForgetAsked(counts, actions, now)

    async def answer_forget(self, choice: ForgetChoice) -> ForgetAnswer:
        """Erase, or not, as pressed by the asker: only the user the prompt
        was made for, within FORGET_LAPSE of it."""
        if choice.user_id != self._user_id:
            return ForgetAnswer(ForgetOutcome.NOT_YOURS)
        if not choice.erase:
            return ForgetAnswer(ForgetOutcome.CANCELLED)
        age = self._clock.now().timestamp() - choice.issued
        # A prompt from the future was never issued by this clock.
        if age > FORGET_LAPSE.total_seconds() or age < -60:
            return ForgetAnswer(ForgetOutcome.LAPSED)
        erased = await self._stores.erasure.erase(self.user)
        if not erased.total:
            return ForgetAnswer(ForgetOutcome.NOTHING_LEFT, erased)
        return ForgetAnswer(ForgetOutcome.ERASED, erased)

    async def held(self) -> tuple[ErasureCounts, tuple[ChatSummary, ...]]:
        counts = await self._stores.erasure.count(self.user)
        chats = await self._stores.chats.chats((self._platform, self._user_id))
        return counts, tuple(chats)

    async def export(self) -> ExportMade:
        exported = await self._stores.exports.export(self.user)
        text = document_text(exported, at=self._clock.now())
        filename = f"kept-export-{self._platform}-{_safe(self._user_id)}.json"
        return ExportMade(filename, (text + "\n").encode(), len(exported.chats))


def _safe(user_id: str) -> str:
    """A user id as part of a file name (the console's is a login name)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in user_id)[:40]
