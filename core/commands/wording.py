"""What every surface says for each result: one wording per result kind.

Telegram, Discord, `kept chat` and the operator's CLI differ only in how an
id, a time and a command are shown (Discord puts ids in code spans and times
as relative timestamps; Discord's commands live in groups; the CLI shows UTC
times) and in where the items are (a chat's, or every chat's for the CLI),
which a surface passes as its Style. The sentences are written once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.clock import iso_utc
from core.commands.results import Change, FollowUpButtonResult, Listing, Outcome, Page
from core.commands.rights import FORGET_LAPSE, DataShown, ForgetAnswer, ForgetOutcome
from core.commands.timezone import ZoneAnswer, ZoneOutcome
from core.config.model import RetentionConfig
from core.limits.notices import wait_words
from core.limits.spend import UsageShown
from core.messages import ListName
from core.privacy.store import ErasureCounts
from core.reminders.limits import ReminderRefused, RepeatsTooOften, TooManyReminders
from core.users.store import FollowUpState, Switched


def _plain(text: str) -> str:
    return text


def _slash(name: str) -> str:
    return f"/{name}"


@dataclass(frozen=True, slots=True)
class Style:
    """How one surface shows the parts of a sentence."""

    when: Callable[[datetime], str]
    code: Callable[[str], str] = _plain
    # How to refer to a registered command (core/commands/registry.py names).
    command: Callable[[str], str] = _slash
    # Where the items are, after "not found" and in a list's heading: a
    # chat's commands reach that chat's, the operator's CLI every chat's.
    place: str = " in this chat"


def _utc(moment: datetime) -> str:
    return iso_utc(moment) or ""


# A chat's sentences that show no time.
CHAT = Style(when=str)
# The operator's CLI (`kept commitments`, `kept reminders`): every agent's
# and chat's items, times in UTC as its --json shows them.
OPERATOR = Style(when=_utc, place="")


NOT_FOUND = "Not found in this chat."
NO_LONGER_WORKS = "This button no longer works."
ZONES_UNAVAILABLE = "Time zones are not available here."
FAILED = "Sorry, something went wrong. Please try again."


def unknown_command(name: str) -> str:
    return f"Unknown command /{name}. /help lists what I understand."


def usage(text: str) -> str:
    return f"Usage: {text}"


def change(answer: Change, style: Style) -> str:
    """A dismiss, snooze or cancel, typed or pressed on a list's row."""
    shown = style.code(answer.id)
    item = answer.item
    if answer.outcome is Outcome.DONE and item is not None:
        if item.kind == "follow_up" and item.status == "dismissed":
            return f"Dismissed {shown}: I won't follow up on it."
        if item.kind == "reminder" and item.status == "cancelled":
            return f"Cancelled {shown}."
        return f"Snoozed {shown} until {style.when(item.due)}."
    if answer.outcome is Outcome.NOT_FOUND:
        return f"{shown}: not found{style.place}."
    if answer.outcome is Outcome.INVALID_DURATION:
        return f"{answer.reason}."
    return f"{shown}: nothing changed ({answer.reason})."


def changes(answers: list[Change], style: Style) -> str:
    return "\n".join(change(a, style) for a in answers)


def pressed(answer: FollowUpButtonResult, who: str, style: Style) -> str:
    """A check-in's Dismiss / Snooze, said under the message."""
    if answer.changed:
        if answer.until is None:
            return f"Dismissed by {who}."
        return f"Snoozed by {who} until {style.when(answer.until)}."
    if answer.outcome is Outcome.NOT_FOUND or not answer.unchanged:
        return NOT_FOUND
    return "; ".join(dict.fromkeys(change(c, style) for c in answer.unchanged))


def snoozed_by(answer: Change, who: str, style: Style) -> str:
    """A fired reminder's Snooze, said under the message (DONE), or why not."""
    if answer.outcome is Outcome.DONE and answer.item is not None:
        return f"Snoozed by {who} until {style.when(answer.item.due)}."
    return change(answer, style)


_SPAN_UNITS = (
    (86400, "day", "days"),
    (3600, "hour", "hours"),
    (60, "minute", "minutes"),
    (1, "second", "seconds"),
)


def _span(length: timedelta) -> str:
    """A length in words: "5 minutes", "1 hour 30 minutes"."""
    left = max(0, round(length.total_seconds()))
    parts = []
    for size, one, many in _SPAN_UNITS:
        number, left = divmod(left, size)
        if number:
            parts.append(_count(number, one, many))
    return " ".join(parts) or "0 seconds"


def reminder_refused(refusal: ReminderRefused) -> str:
    """Why a reminder was not set: the tool's answer, which the model relays."""
    if isinstance(refusal, TooManyReminders):
        # Above the limit when it was lowered after they were set.
        over = refusal.active - refusal.limit + 1
        return (
            f"You have {_count(refusal.active, 'reminder', 'reminders')} waiting, and one "
            f"person may have at most {refusal.limit}: cancel "
            f"{'one' if over == 1 else over} before setting another."
        )
    if isinstance(refusal, RepeatsTooOften):
        return (
            f"A repeating reminder may fire at most once every {_span(refusal.minimum)}, "
            f"and this one would fire {_span(refusal.gap)} apart: choose a longer interval."
        )
    return "This reminder cannot be set."


def someone_elses_list(name: ListName, style: Style) -> str:
    return f"This list is someone else's: send {style.command(name)} for yours."


def list_heading(shown: Page | Listing, name: ListName, style: Style = CHAT) -> str:
    """The line above a list's items, or the whole answer when it has none;
    a page says which (`kept chat` shows a whole listing at once)."""
    listing = shown.listing if isinstance(shown, Page) else shown
    place = style.place
    of = ""
    if isinstance(shown, Page) and shown.count > 1:
        of = f" (page {shown.number + 1} of {shown.count})"
    if name == "reminders":
        if not listing.items:
            if listing.others_hidden:
                return f"You have no reminders{place}."
            return f"No reminders{place}."
        return f"Reminders{place}{of}:"
    followups = "open follow-ups" if listing.only_open else "follow-ups"
    if not listing.items:
        if listing.shared and not listing.everyones:
            return f"You have no {followups}{place}."
        return f"No {followups}{place}."
    if not listing.shared:
        return f"{followups.capitalize()}{place}{of}:"
    if listing.everyones:
        return f"{followups.capitalize()}{place}, everyone's (you are an admin){of}:"
    return f"Your {followups}{place}{of}:"


def list_footer(name: ListName, style: Style) -> str:
    """Under a list: how to act on an item by typing."""
    if name == "reminders":
        return f"Cancel one with {style.command('cancel')} ID."
    return (
        f"Drop one with {style.command('dismiss')} ID, "
        f"postpone it with {style.command('snooze')} ID 2h."
    )


def zone(answer: ZoneAnswer, who: str | None = None) -> str:
    """A /timezone answer, or a zone button's: about the asker, or (`who`,
    e.g. "telegram:42") about the user the operator's CLI names."""
    local = f"{answer.local_now:%a %d %b %H:%M}"
    yours, you = ("Your", "You") if who is None else (f"{who}'s", who)
    own = "your own" if who is None else "their own"
    has, had = ("have", "had") if who is None else ("has", "had")
    if answer.outcome is ZoneOutcome.INVALID:
        reason = f"{answer.reason[:1].upper()}{answer.reason[1:]}"
        return f"{reason}{'' if reason.endswith('?') else '.'} Nothing changed."
    if answer.outcome is ZoneOutcome.NOT_YOURS:
        return "Only the person this was offered to can choose."
    if answer.outcome is ZoneOutcome.SET:
        return f"{yours} time zone is now {answer.timezone} (it is {local} there)."
    if answer.outcome is ZoneOutcome.DECLINED:
        return f"OK, I left your time zone as it is ({answer.timezone})."
    if answer.outcome is ZoneOutcome.CLEARED:
        return f"{yours} time zone is cleared; I use {answer.timezone} (the default) again."
    if answer.outcome is ZoneOutcome.NOT_SET:
        return f"{you} {had} no time zone of {own}; I use {answer.timezone} (the default)."
    # Shown. The asker is told how to change it; the operator knows.
    if answer.own:
        shown = f"{yours} time zone is {answer.timezone} (it is {local} there)."
        hint = " Change it with /timezone Area/City, or /timezone clear."
    else:
        shown = f"{you} {has} no time zone of {own}; I use {answer.timezone} ({local})."
        hint = " Set yours with /timezone Area/City, e.g. /timezone Europe/Paris."
    return shown if who is not None else shown + hint


_ERASED_PARTS = (
    ("chats", "private chat", "private chats"),
    ("messages", "message", "messages"),
    ("follow_ups", "follow-up", "follow-ups"),
    ("reminders", "reminder", "reminders"),
    ("queued", "exchange waiting for extraction", "exchanges waiting for extraction"),
    ("updates", "platform update", "platform updates"),
    ("settings", "setting", "settings"),
    ("usage", "usage record", "usage records"),
)


def _erased_parts(counts: ErasureCounts, *, skip: tuple[str, ...] = ()) -> list[str]:
    parts = []
    for field, one, many in _ERASED_PARTS:
        number = getattr(counts, field)
        if number and field not in skip:
            parts.append(f"{number} {one if number == 1 else many}")
    return parts


def erasure(counts: ErasureCounts, *, done: bool, who: str | None = None) -> str:
    """What erasing a user removes (`done=False`: would remove) in every
    chat: about the asker, or (`who`, e.g. "telegram:42") about the user
    the operator's CLI names."""
    whom = "you" if who is None else who
    parts = _erased_parts(counts)
    if not parts:
        return f"I hold nothing from {whom}."
    listed = ", ".join(parts)
    if done:
        return f"Erased what I held from {whom}: {listed}."
    return f"This erases what I hold from {whom}, in every chat: {listed}."


def session_erasure(counts: ErasureCounts, key: str, *, done: bool) -> str:
    """What erasing one chat's session removes (`done=False`: would remove)."""
    if not counts.chats:
        return f"No chat {key} is stored."
    listed = ", ".join(_erased_parts(counts, skip=("chats",))) or "nothing but the chat itself"
    if done:
        return f"Erased the chat {key}: {listed}."
    return f"This erases the chat {key}, everyone's part of it: {listed}."


# `/new`: the chat's conversation started over (core/conversation/start_over.py).
STARTED_OVER = (
    "Started over: I no longer see the earlier messages of this chat. "
    "They stay stored and searchable; /forget erases yours."
)
NEW_ADMINS_ONLY = (
    "Only an admin of this chat can start it over: its conversation is everyone's here."
)
NEW_UNAVAILABLE = "Starting over is not available here."


# --- the data-rights commands: /forget, /mydata, /export -------------------------

RIGHTS_UNAVAILABLE = "Your data cannot be shown or erased here; the operator can (kept users)."
_LAPSE = f"{int(FORGET_LAPSE.total_seconds() // 60)} minutes"


ANONYMOUS_RIGHTS = (
    "You are posting as the group, so I cannot tell whose data this is: "
    "send it as yourself, or in a private chat with me."
)


def private_only(name: str, style: Style = CHAT) -> str:
    """/mydata or /export asked in a group: nothing of theirs is shown there."""
    return f"{style.command(name)} works in a private chat with me: send it there."


def forget_prompt(counts: ErasureCounts, *, typed: bool = False) -> str:
    """/forget's question, with the counts; `typed`: answered by a line
    (`kept chat`), not a button."""
    asked = erasure(counts, done=False)
    if not counts.total:
        return asked
    if typed:
        return f"{asked} Type yes within {_LAPSE} to erase it; anything else cancels."
    return f"{asked} Press Erase within {_LAPSE} to go on, or Cancel."


def forget_answer(answer: ForgetAnswer, style: Style = CHAT) -> str:
    """What an Erase or Cancel press (or the yes line) did."""
    match answer.outcome:
        case ForgetOutcome.ERASED:
            return f"{erasure(answer.counts, done=True)} You can go on talking to me."
        case ForgetOutcome.NOTHING_LEFT:
            return "Nothing is left to erase: it is already done."
        case ForgetOutcome.CANCELLED:
            return "Cancelled: nothing was erased."
        case ForgetOutcome.LAPSED:
            return (
                f"This question lapsed after {_LAPSE}: nothing was erased. "
                f"Send {style.command('forget')} again to erase."
            )
        case ForgetOutcome.NOT_YOURS:
            return "Only the person who asked can answer this; nothing was erased."


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def my_data(shown: DataShown, style: Style = CHAT) -> str:
    """/mydata's summary, above this chat's follow-ups and reminders."""
    held = shown.held
    chats = _count(len(shown.chats), "chat", "chats")
    lines = [
        "What I hold about you:",
        f"- {_count(held.messages, 'message', 'messages')} (yours and my replies) in {chats}",
        f"- {_count(held.follow_ups, 'follow-up', 'follow-ups')} and "
        f"{_count(held.reminders, 'reminder', 'reminders')} in every chat"
        + (" (this chat's open ones are listed below)" if listed(shown) else ""),
    ]
    if held.queued:
        waiting = _count(held.queued, "exchange", "exchanges")
        lines.append(f"- {waiting} waiting to be read for follow-ups")
    zone = shown.zone
    if zone is not None:
        mine = "your own" if zone.own else "none of your own, so the default"
        lines.append(f"- time zone: {zone.timezone} ({mine})")
    if shown.followup_preference is not None:
        lines.append(f"- follow-ups: {shown.followup_preference}")
    if shown.retention is not None:
        lines.append(f"- {retention(shown.retention)}")
    lines.append(
        f"{style.command('export')} sends it all as a file; {style.command('forget')} erases it."
    )
    return "\n".join(lines)


def retention(policy: RetentionConfig) -> str:
    """How long kept keeps things, as /mydata says it."""
    messages = (
        f"messages are erased after {policy.messages}"
        if policy.messages
        else "messages are kept until you erase them"
    )
    closed = (
        f"ended follow-ups and reminders after {policy.closed}"
        if policy.closed
        else "ended follow-ups and reminders until you erase them"
    )
    return f"{messages}; {closed}"


def listed(shown: DataShown) -> bool:
    """Whether /mydata lists this chat's follow-ups or reminders under its summary."""
    return bool(shown.followups.listing.items or shown.reminders.listing.items)


def export_sent(chats: int) -> str:
    return (
        f"Everything I hold from you, from {_count(chats, 'chat', 'chats')}, as one JSON document."
    )


def export_too_large(size: int, limit: int) -> str:
    """An export bigger than the platform lets a bot send."""
    return (
        f"Your export is {_size(size)}, more than the {_size(limit)} I can send "
        "here; ask the operator for it (kept users export)."
    )


def _size(size: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return _count(size, "byte", "bytes")


def export_saved(path: str, chats: int) -> str:
    return f"Exported what I hold from you ({_count(chats, 'chat', 'chats')}) to {path}."


def export_exists(path: str) -> str:
    return f"{path} already exists: move it away and send /export again."


def export_not_written(path: str, reason: str) -> str:
    return f"Could not write {path}: {reason}."


# `/followups` (core/users/followup_prefs.py).
FOLLOWUPS_UNAVAILABLE = "Follow-up settings are not available here."


def followups_state(state: FollowUpState, *, shared: bool) -> str:
    """`/followups`: whether follow-ups reach the asker here, and why not."""
    if state.chat is False:
        own = " (yours are off too)" if state.own is False else ""
        return (
            "Follow-ups are off in this chat: an admin switched them off for everyone"
            f"{own}. I don't read anyone's messages here for them or check in."
        )
    if state.own is False:
        return (
            "Your follow-ups are off: I don't read your messages for them or check in "
            "with you. Reminders you ask for still come. /followups on switches them back on."
        )
    where = " (an admin's /followups off switches the whole chat)" if shared else ""
    return (
        "Your follow-ups are on: I may check in later about things you mention. "
        f"/followups off stops that{where}."
    )


def followups_switched(
    switched: Switched,
    *,
    whole_chat: bool,
    state: FollowUpState | None = None,
    shared: bool = False,
) -> str:
    """`/followups on|off`: what changed, and for whom."""
    dropped = ""
    if switched.dismissed:
        many = "follow-up" if switched.dismissed == 1 else "follow-ups"
        dropped = f" I dismissed {switched.dismissed} pending {many}."
    if whole_chat:
        if not switched.enabled:
            return (
                "Follow-ups are now off for everyone in this chat (you are an admin): I won't "
                f"read anyone's messages here for them or check in.{dropped} "
                "Reminders still come."
            )
        return "Follow-ups are now on for everyone in this chat (you are an admin)."
    if not switched.enabled:
        just = " (just yours: an admin can switch off the whole chat)" if shared else ""
        return (
            f"Your follow-ups are now off{just}, in every chat with me: I won't read your "
            f"messages for them or check in with you.{dropped} Reminders still come."
        )
    if state is not None and state.chat is False:
        return (
            "Your follow-ups are now on, but an admin switched them off for this chat, "
            "so none come here."
        )
    return "Your follow-ups are now on: I may check in about things you mention from now on."


def followups_of(
    who: str, agent_id: str, state: FollowUpState, switched: Switched | None = None
) -> str:
    """`kept users followups`: one line per agent about the user it names
    (e.g. "telegram:42"), as the operator sees it (times in UTC)."""
    if switched is not None:
        now = "now on" if switched.enabled else "now off"
        if not switched.changed:
            now = f"already {'on' if switched.enabled else 'off'}"
        parts = []
        if switched.dismissed:
            many = "follow-up" if switched.dismissed == 1 else "follow-ups"
            parts.append(f"{switched.dismissed} pending {many} dismissed")
        if switched.unqueued:
            many = "exchange" if switched.unqueued == 1 else "exchanges"
            parts.append(f"{switched.unqueued} queued {many} dropped")
        dropped = f"; {', '.join(parts)}" if parts else ""
        return f"{who}: follow-ups {now} under agent {agent_id}{dropped}."
    if state.own is None:
        return f"{who}: follow-ups on under agent {agent_id} (never switched)."
    since = _utc(state.own_updated_at) if state.own_updated_at else "?"
    return (
        f"{who}: follow-ups {'on' if state.own else 'off'} under agent {agent_id} (since {since})."
    )


def followups_brief(state: FollowUpState) -> str:
    """The user's own follow-up switch, as /mydata lists it."""
    if state.own is False:
        return "off (/followups on switches them back on)"
    return "on (/followups off stops them)"


# `/usage` (core/limits/spend.py).
USAGE_UNAVAILABLE = "Your model use cannot be shown here; the operator can (kept usage)."


def usage_today(shown: UsageShown) -> str:
    """`/usage`: the asker's own UTC day of model calls and their allowance."""
    line = shown.line
    lines = [
        f"Your use of the model today (the UTC day {shown.day}): "
        f"{_count(line.calls, 'call', 'calls')}, {line.tokens_in:,} tokens in, "
        f"{line.tokens_out:,} tokens out."
    ]
    if line.estimated_calls:
        some = _count(line.estimated_calls, "call", "calls")
        lines.append(f"({some} estimated from their length: the model did not say.)")
    resets = f"00:00 UTC, in {wait_words(shown.resets_at - shown.now)}"
    left = shown.left
    if shown.cap is None or left is None:
        lines.append("No daily allowance is set for you.")
    elif left:
        lines.append(
            f"Your daily allowance: {shown.cap:,} tokens, {left:,} left. It resets at {resets}."
        )
    else:
        lines.append(
            f"Your daily allowance of {shown.cap:,} tokens is used up: it resets at {resets}."
        )
    if shown.shared:
        lines.append("This is your own use, in every chat with me; nobody else's is shown.")
    return "\n".join(lines)
