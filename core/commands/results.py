"""What a command or a button press answers, as data.

Adapters (Telegram, Discord, the CLI) render these their own way: text,
rows, buttons, a table, `--json`. Nothing here is phrased for a platform;
`reason` is the one human phrase core has (e.g. "already sent"), shared by
every renderer that wants to say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal

from core.commitments.model import Commitment
from core.messages import FollowUpVerb
from core.reminders.model import Reminder

ItemKind = Literal["follow_up", "reminder"]


class Outcome(StrEnum):
    DONE = "done"
    # Unknown here, another chat's, or another member's: never told apart.
    NOT_FOUND = "not_found"
    # Exists and may be managed, but is past the state the command changes.
    ALREADY_CLOSED = "already_closed"
    INVALID_DURATION = "invalid_duration"
    # Refused for a reason core phrases (a snooze out of range, a race).
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Item:
    """One follow-up or reminder as a listing shows it."""

    id: str
    kind: ItemKind
    # A follow-up's kind (event_check_in, ...), a reminder's schedule (at, after, cron).
    subkind: str
    due: datetime
    text: str
    # The platform user id it belongs to (None: nobody's).
    owner: str | None
    status: str
    timezone: str
    repeats: str | None = None  # a recurring reminder's cron expression
    # The full stored row, for the operator's CLI table and --json.
    record: Commitment | Reminder | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of_commitment(cls, c: Commitment) -> Item:
        return cls(
            id=c.id,
            kind="follow_up",
            subkind=c.kind,
            due=c.due_earliest,
            text=c.suggested_text,
            owner=c.sender_id,
            status=c.status,
            timezone=c.due_timezone,
            record=c,
        )

    @classmethod
    def of_reminder(cls, r: Reminder) -> Item:
        return cls(
            id=r.id,
            kind="reminder",
            subkind=r.kind,
            due=r.next_fire_at,
            text=r.text,
            owner=r.created_by,
            status=r.status,
            timezone=r.timezone,
            repeats=r.cron,
            record=r,
        )


@dataclass(frozen=True, slots=True)
class Listing:
    items: list[Item]
    # A group or channel chat, where members see only their own.
    shared: bool = False
    # The asker administers the shared chat: the items are everyone's.
    everyones: bool = False
    # The chat has some, but none the asker may see.
    others_hidden: bool = False
    # Only open items (a chat's lists, the operator's by default); False
    # when the operator asked for finished ones too.
    only_open: bool = True


@dataclass(frozen=True, slots=True)
class Change:
    """The answer to dismissing, snoozing or cancelling one item."""

    outcome: Outcome
    id: str
    item: Item | None = None  # after the change (DONE), or as found (ALREADY_CLOSED)
    reason: str = ""  # why not, in core's words ("already sent", "not found")

    @property
    def done(self) -> bool:
        return self.outcome is Outcome.DONE


@dataclass(frozen=True, slots=True)
class FollowUpButtonResult:
    """The answer to a follow-up's button: every named follow-up it changed,
    and why the others did not change."""

    verb: FollowUpVerb
    outcome: Outcome  # DONE when at least one changed
    changed: list[Item] = field(default_factory=list)
    unchanged: list[Change] = field(default_factory=list)

    @property
    def until(self) -> datetime | None:
        """When a snoozed follow-up comes up again (the soonest)."""
        if self.verb != "snooze" or not self.changed:
            return None
        return min(item.due for item in self.changed)


# Items per page of a /commitments or /reminders list.
PER_PAGE = 10


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing, as a chat shows it with a row of buttons per item."""

    listing: Listing  # the whole listing: its flags say whose items these are
    number: int  # 0-based, within range
    count: int  # pages in all, at least 1

    @property
    def items(self) -> list[Item]:
        start = self.number * PER_PAGE
        return self.listing.items[start : start + PER_PAGE]

    @property
    def first(self) -> int:
        """The 1-based position of this page's first item in the whole list."""
        return self.number * PER_PAGE + 1

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 0 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number + 1 < self.count else None


def page_of(listing: Listing, number: int) -> Page:
    """Page `number` of `listing`; past the end (items went away since the
    list was shown), its last page."""
    count = max(1, -(-len(listing.items) // PER_PAGE))
    return Page(listing, min(max(number, 0), count - 1), count)


@dataclass(frozen=True, slots=True)
class ListAnswer:
    """A press on a list's button: what its row's button changed (None for
    Prev / Next) and the page to show now. `page` None: the list was made
    for someone else, and nothing was done."""

    page: Page | None
    change: Change | None = None
