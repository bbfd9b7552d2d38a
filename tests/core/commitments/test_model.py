"""A stored commitment's scope names its chat kind without a column for it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.command_stores import GROUP, PRIVATE, commitment


@pytest.mark.parametrize(
    ("key", "chat_id", "sender", "kind"),
    [
        (GROUP, "9", "alice", "group"),
        (PRIVATE, "5", "5", "private"),
        ("agent:main:discord:channel:7:thread:8", "7", "u9", "channel"),
        # Keys kept never writes: the sender's own chat is a private one.
        ("legacy", "5", "5", "private"),
        ("legacy", "9", "alice", "group"),
    ],
)
def test_the_scope_reads_the_chat_kind_from_the_session_key(
    key: str, chat_id: str, sender: str, kind: str
) -> None:
    c = commitment(1, sender, key=key, chat_id=chat_id)
    assert c.scope.chat_kind == kind
    assert (c.scope.session_key, c.scope.chat_id, c.scope.sender_id) == (key, chat_id, sender)


def test_chat_kind_takes_no_part_in_a_scopes_equality() -> None:
    scope = commitment(1, "alice").scope
    other = replace(scope, chat_kind="private")
    assert other == scope and hash(other) == hash(scope)
    assert {scope: 1}[other] == 1
    assert replace(scope, sender_id="bob") != scope
