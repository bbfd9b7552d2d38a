"""core/commands/buttons.py: the follow-up buttons' payloads, both formats,
and the typed actions an Outbound carries."""

from __future__ import annotations

import pytest

from core.commands.buttons import (
    COMPACT_LIMIT,
    FULL_LIMIT,
    decode_compact,
    decode_full,
    encode_compact,
    encode_full,
    from_compact,
    from_full,
    to_compact,
    to_full,
)
from core.messages import (
    Action,
    ButtonAction,
    ItemAction,
    PageAction,
    ReminderSnooze,
    followup_actions,
)

IDS = tuple(f"cm_{n:012x}" for n in range(6))


def test_a_check_in_gets_dismiss_and_snooze_once_per_id() -> None:
    assert followup_actions([IDS[0], f" {IDS[0]}", IDS[1]]) == (
        Action("dismiss", IDS[:2]),
        Action("snooze", IDS[:2]),
    )
    assert followup_actions([]) == () and followup_actions([" "]) == ()


@pytest.mark.parametrize("verb", ["dismiss", "snooze"])
def test_both_formats_round_trip(verb: str) -> None:
    action = Action(verb, IDS[:2])  # type: ignore[arg-type]
    compact, full = to_compact(action), to_full(action)
    assert compact is not None and full is not None
    assert from_compact(compact) == action and from_full(full) == action
    assert full == f"kept:fu:{verb}:{IDS[0]},{IDS[1]}"  # what buttons already sent carry
    assert compact == f"{verb[0]}:{IDS[0][3:]},{IDS[1][3:]}"


def test_each_format_keeps_to_its_platforms_limit() -> None:
    compact = to_compact(Action("dismiss", IDS))
    assert compact is not None and len(compact.encode()) <= COMPACT_LIMIT
    assert from_compact(compact) == Action("dismiss", IDS[:4])  # as many as fit
    many = tuple(f"cm_{n:012x}" for n in range(10))
    assert to_full(Action("dismiss", many)) is None  # no buttons rather than some
    assert to_full(Action("dismiss", many[:5])) is not None
    assert len(to_full(Action("dismiss", many[:5])) or "") <= FULL_LIMIT


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
    ],
)
def test_anything_else_is_no_button_of_ours(data: str | None) -> None:
    assert from_compact(data) is None and from_full(data) is None


def test_ids_that_could_not_have_been_issued_are_dropped() -> None:
    forged = Action("dismiss", ("cm_ok1", "cm_BAD", "rm_abc", "cm_ok1"))
    assert to_full(forged) == "kept:fu:dismiss:cm_ok1"
    assert to_compact(Action("snooze", ("cm_x,y",))) is None


# --- list rows, list pages, a fired reminder's snooze ------------------------------

RM = "rm_0123456789ab"
LONGEST_USER = "9" * 20
NEW_ACTIONS = [
    ItemAction("dismiss", IDS[0], 0, "42"),
    ItemAction("snooze", IDS[1], 999, LONGEST_USER),
    ItemAction("cancel", RM, 12, "1087968824"),
    PageAction("commitments", 1, "42"),
    PageAction("reminders", 999, LONGEST_USER),
    ReminderSnooze(RM, 1, 10),
    ReminderSnooze(RM, 999_999_999, 60),
]


@pytest.mark.parametrize("action", NEW_ACTIONS)
def test_new_payloads_round_trip_within_each_platforms_limit(action: ButtonAction) -> None:
    compact, full = encode_compact(action), encode_full(action)
    assert compact is not None and full is not None
    assert len(compact.encode()) <= COMPACT_LIMIT and len(full) <= FULL_LIMIT
    assert decode_compact(compact) == action and decode_full(full) == action
    # One format per platform: a Telegram payload is no Discord one, and back.
    assert decode_full(compact) is None and decode_compact(full) is None


def test_version_1_formats_are_what_buttons_in_chats_carry() -> None:
    assert encode_compact(ItemAction("dismiss", IDS[0], 2, "42")) == f"id:{IDS[0][3:]}:2:42"
    assert encode_full(ItemAction("cancel", RM, 0, "7")) == f"kept:li:cancel:{RM}:0:7"
    assert encode_compact(PageAction("reminders", 1, "7")) == "pr:1:7"
    assert encode_full(PageAction("commitments", 3, "7")) == "kept:pg:commitments:3:7"
    assert encode_compact(ReminderSnooze(RM, 4, 60)) == f"z:{RM[3:]}:4:60"
    assert encode_full(ReminderSnooze(RM, 4, 10)) == f"kept:rs:{RM}:4:10"


def test_old_follow_up_buttons_still_parse_through_the_new_entry_points() -> None:
    action = Action("snooze", IDS[:2])
    assert decode_compact(to_compact(action)) == action
    assert decode_full(to_full(action)) == action
    assert encode_compact(action) == to_compact(action)
    assert encode_full(action) == to_full(action)


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
    ],
)
def test_actions_that_could_not_have_been_issued_get_no_button(action: ButtonAction) -> None:
    assert encode_compact(action) is None and encode_full(action) is None


@pytest.mark.parametrize(
    "data",
    [
        None,
        "",
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
        "\x00",
        "ü" * 64,
    ],
)
def test_any_other_shape_is_no_button_of_ours(data: str | None) -> None:
    assert decode_compact(data) is None and decode_full(data) is None
