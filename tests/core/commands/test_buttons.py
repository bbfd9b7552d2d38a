"""core/commands/buttons.py: the follow-up buttons' payloads, both formats,
and the typed actions an Outbound carries."""

from __future__ import annotations

import pytest

from core.commands.buttons import (
    COMPACT_LIMIT,
    FULL_LIMIT,
    from_compact,
    from_full,
    to_compact,
    to_full,
)
from core.messages import Action, followup_actions

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
