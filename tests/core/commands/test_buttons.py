"""core/commands/buttons.py: one payload class per action, one compact format
for both platforms, and the formats buttons already sent still carry."""

from __future__ import annotations

import re
from zoneinfo import available_timezones

import pytest

from core.commands.buttons import (
    LIMIT,
    PAYLOADS,
    FollowUpPayload,
    ListItemPayload,
    ListPagePayload,
    ReminderSnoozePayload,
    ZoneChoicePayload,
    pack,
    unpack,
)
from core.messages import (
    REMINDER_SNOOZE_MINUTES,
    Action,
    ButtonAction,
    ForgetChoice,
    ItemAction,
    PageAction,
    ReminderSnooze,
    ZoneChoice,
    followup_actions,
)

IDS = tuple(f"cm_{n:012x}" for n in range(6))
RM = "rm_0123456789ab"
LONGEST_USER = "9" * 20  # a Telegram or Discord user id has at most 20 digits
LONGEST_ZONE = max(available_timezones(), key=len)
DISCORD_LIMIT = 100  # characters: Discord's custom_id


def test_a_check_in_gets_dismiss_and_snooze_once_per_id() -> None:
    assert followup_actions([IDS[0], f" {IDS[0]}", IDS[1]]) == (
        Action("dismiss", IDS[:2]),
        Action("snooze", IDS[:2]),
    )
    assert followup_actions([]) == () and followup_actions([" "]) == ()


# The longest payload each action can need: the most ids, the last page,
# the longest user id, firing count and zone name.
LONGEST: list[ButtonAction] = [
    Action("dismiss", IDS),
    Action("snooze", IDS),
    ItemAction("dismiss", IDS[0], 999, LONGEST_USER),
    ItemAction("snooze", IDS[0], 999, LONGEST_USER),
    ItemAction("cancel", RM, 999, LONGEST_USER),
    PageAction("commitments", 999, LONGEST_USER),
    PageAction("reminders", 999, LONGEST_USER),
    *(ReminderSnooze(RM, 999_999_999, m) for m in REMINDER_SNOOZE_MINUTES),
    ZoneChoice(LONGEST_USER, LONGEST_ZONE, True),
    ZoneChoice(LONGEST_USER, LONGEST_ZONE, False),
    ForgetChoice(LONGEST_USER, 999_999_999_999, True),
    ForgetChoice(LONGEST_USER, 999_999_999_999, False),
]


@pytest.mark.parametrize("action", LONGEST, ids=lambda a: type(a).__name__)
def test_the_longest_payload_of_each_action_fits_telegrams_64_bytes(action: ButtonAction) -> None:
    data = pack(action)
    assert data is not None
    assert len(data.encode()) <= LIMIT and len(data) <= DISCORD_LIMIT


def test_every_action_has_one_payload_class() -> None:
    assert {p.action for p in PAYLOADS} == {
        Action,
        ItemAction,
        PageAction,
        ReminderSnooze,
        ZoneChoice,
        ForgetChoice,
    }


ROUND_TRIPS: list[ButtonAction] = [
    Action("dismiss", IDS[:2]),
    Action("snooze", IDS[:1]),
    ItemAction("dismiss", IDS[0], 0, "42"),
    ItemAction("snooze", IDS[1], 999, LONGEST_USER),
    ItemAction("cancel", RM, 12, "1087968824"),
    PageAction("commitments", 1, "42"),
    PageAction("reminders", 999, LONGEST_USER),
    ReminderSnooze(RM, 1, 10),
    ReminderSnooze(RM, 999_999_999, 60),
    ZoneChoice("42", "Europe/Paris", True),
    ZoneChoice("1234567890123", LONGEST_ZONE, False),
    ZoneChoice("42", "Etc/GMT+5", True),
    ForgetChoice("42", 1_796_000_000, True),
    ForgetChoice("1234567890123", 1_796_000_000, False),
]


@pytest.mark.parametrize("action", ROUND_TRIPS)
def test_payloads_round_trip(action: ButtonAction) -> None:
    data = pack(action)
    assert data is not None and unpack(data) == action


def test_the_format_is_what_telegrams_buttons_in_chats_carry() -> None:
    assert pack(Action("dismiss", IDS[:2])) == f"d:{IDS[0][3:]},{IDS[1][3:]}"
    assert pack(Action("snooze", IDS[:1])) == f"s:{IDS[0][3:]}"
    assert pack(ItemAction("dismiss", IDS[0], 2, "42")) == f"id:{IDS[0][3:]}:2:42"
    assert pack(ItemAction("cancel", RM, 0, "7")) == f"ic:{RM[3:]}:0:7"
    assert pack(PageAction("reminders", 1, "7")) == "pr:1:7"
    assert pack(ReminderSnooze(RM, 4, 60)) == f"z:{RM[3:]}:4:60"
    assert pack(ZoneChoice("42", "Asia/Tokyo", False)) == "t:n:42:Asia/Tokyo"
    assert pack(ForgetChoice("42", 1_796_000_000, True)) == "f:y:42:1796000000"
    # Only a user id and a time that could have been issued is carried.
    assert pack(ForgetChoice("ann", 1_796_000_000, True)) is None
    assert unpack("f:y:42:01796000000") is None


# Discord's buttons sent before the one format: they still work.
OLD_DISCORD: list[tuple[str, ButtonAction]] = [
    (f"kept:fu:dismiss:{IDS[0]},{IDS[1]}", Action("dismiss", IDS[:2])),
    (f"kept:fu:snooze:{IDS[0]}", Action("snooze", IDS[:1])),
    (f"kept:li:dismiss:{IDS[0]}:0:7", ItemAction("dismiss", IDS[0], 0, "7")),
    (f"kept:li:snooze:{IDS[0]}:3:7", ItemAction("snooze", IDS[0], 3, "7")),
    (f"kept:li:cancel:{RM}:0:7", ItemAction("cancel", RM, 0, "7")),
    ("kept:pg:commitments:3:7", PageAction("commitments", 3, "7")),
    ("kept:pg:reminders:0:7", PageAction("reminders", 0, "7")),
    (f"kept:rs:{RM}:4:10", ReminderSnooze(RM, 4, 10)),
    ("kept:tz:yes:7:Asia/Tokyo", ZoneChoice("7", "Asia/Tokyo", True)),
    ("kept:tz:no:7:UTC", ZoneChoice("7", "UTC", False)),
]


@pytest.mark.parametrize(("data", "action"), OLD_DISCORD)
def test_old_discord_payloads_still_parse(data: str, action: ButtonAction) -> None:
    assert unpack(data) == action
    # ... and match the template discord.py routes them by, as the new one does.
    payload = next(p for p in PAYLOADS if isinstance(action, p.action))
    assert re.fullmatch(payload.template(), data)
    assert re.fullmatch(payload.template(), pack(action) or "")
    assert pack(action) != data  # never packed again


def test_templates_never_overlap() -> None:
    """discord.py tries every registered template: a payload matches one."""
    for action in ROUND_TRIPS + [a for _, a in OLD_DISCORD]:
        data = pack(action) or ""
        matching = [p for p in PAYLOADS if re.fullmatch(p.template(), data)]
        assert matching == [next(p for p in PAYLOADS if isinstance(action, p.action))]


def test_as_many_follow_ups_as_fit() -> None:
    data = FollowUpPayload.pack(Action("dismiss", IDS))
    assert data is not None and len(data.encode()) <= LIMIT
    assert unpack(data) == Action("dismiss", IDS[:4])


def test_ids_that_could_not_have_been_issued_are_dropped() -> None:
    forged = Action("dismiss", ("cm_ok1", "cm_BAD", "rm_abc", "cm_ok1"))
    assert pack(forged) == "d:ok1"
    assert pack(Action("snooze", ("cm_x,y",))) is None


@pytest.mark.parametrize(
    "action",
    [
        ItemAction("cancel", IDS[0], 0, "42"),  # cancel names a reminder, not a follow-up
        ItemAction("dismiss", RM, 0, "42"),  # and dismiss a follow-up
        ItemAction("dismiss", "cm_BAD", 0, "42"),
        ItemAction("dismiss", IDS[0], -1, "42"),
        ItemAction("dismiss", IDS[0], 1000, "42"),
        ItemAction("dismiss", IDS[0], 0, "ana"),
        ItemAction("dismiss", IDS[0], 0, "042"),
        ItemAction("dismiss", IDS[0], 0, "9" * 21),
        PageAction("commitments", 0, ""),
        ReminderSnooze(RM, 0, 10),
        ReminderSnooze(RM, 1, 30),  # not a snooze kept offers
        ReminderSnooze("rm_x:1", 1, 10),
        ReminderSnooze(IDS[0], 1, 10),
        ZoneChoice("42", "Europe/Paris x"),
        ZoneChoice("9" * 40, LONGEST_ZONE),  # over 64 bytes
    ],
)
def test_actions_that_could_not_have_been_issued_get_no_button(action: ButtonAction) -> None:
    assert pack(action) is None
    # One of the same kind that kept does issue gets its button.
    issued = next(a for a in ROUND_TRIPS if type(a) is type(action))
    assert unpack(pack(issued)) == issued


@pytest.mark.parametrize(
    "data",
    [
        None,
        "",
        "x:abc",
        "d:",
        "dismiss",
        "d:ab,",
        "d:AB",
        "kept:fu:delete:cm_1",
        "kept:fu:dismiss:",
        "i",
        "id:",
        "id:abc",
        "id:abc:0",
        "ix:abc:0:42",
        "id:abc:01:42",
        "id:abc:0:042",
        "id:ABC:0:42",
        "id:abc:0:42:extra",
        "p:0:42",
        "pc:1000:42",
        "pc:0:",
        "z:abc:1",
        "z:abc:0:10",
        "z:abc:1:30",
        "z:abc:1:10 ",
        "kept:li:dismiss:rm_abc:0:42",
        "kept:li:cancel:cm_abc:0:42",
        "kept:li:dismiss:cm_abc:0",
        "kept:pg:followups:0:42",
        "kept:pg:commitments:-1:42",
        "kept:rs:cm_abc:1:10",
        "kept:rs:rm_abc:1:15",
        "KEPT:rs:rm_abc:1:10",
        "kept:rs:rm_abc:1:10\n",
        "d:abc\n",
        "kept:fu:dismiss:cm_abc\n",
        "t:y:42",
        "t:x:42:UTC",
        "t:y:4 2:UTC",
        "t:y:42:Europe/Paris;drop",
        "t:y:42:UTC\n",
        "kept:tz:maybe:42:UTC",
        "\x00",
        "ü" * 64,
    ],
)
def test_any_other_shape_is_no_button_of_ours(data: str | None) -> None:
    assert unpack(data) is None
    for payload in (
        FollowUpPayload,
        ListItemPayload,
        ListPagePayload,
        ReminderSnoozePayload,
        ZoneChoicePayload,
    ):
        assert payload.unpack(data) is None
        # The same class reads a payload of its own.
        ours = next(a for a in ROUND_TRIPS if isinstance(a, payload.action))
        assert payload.unpack(payload.pack(ours)) == ours
