"""`Access.lists`: how an `allowFrom` entry names a user. An entry of digits
is an id, never a username (a Discord username may be all digits); `@name`
is a username, never an id; any other word either."""

from __future__ import annotations

from channels.access import Access


def test_an_all_digit_entry_matches_only_the_id() -> None:
    access = Access(dm_policy="allowlist", allow_from=("123456789012345678",))
    assert access.lists("123456789012345678")
    assert access.lists("123456789012345678", "someone")
    # Someone else whose username is that id is not let in.
    assert not access.lists("999", "123456789012345678")
    assert not access.lists("999", "@123456789012345678")


def test_an_at_entry_matches_only_the_username() -> None:
    access = Access(dm_policy="allowlist", allow_from=(" @Alice ", "@42"))
    assert access.lists("7", "alice") and access.lists("7", "@ALICE")
    assert not access.lists("alice")
    # `@42` names the user called 42, not the user with id 42.
    assert not access.lists("42") and access.lists("8", "42")


def test_a_bare_word_matches_the_username_and_blank_entries_nobody() -> None:
    access = Access(dm_policy="allowlist", allow_from=("bob", " ", "@"))
    assert access.lists("9", "Bob")
    assert not access.lists("9", "bobby") and not access.lists("9") and not access.lists("9", "")
