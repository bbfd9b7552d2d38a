"""dispatch.py on its own: which messages kept hears (the checks that used
to be a chain of early returns), and that the first handler whose
`check_update` answers takes the update, once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from telegram import Chat, Message, MessageEntity, PhotoSize, Update, User

from channels.telegram.dispatch import dispatch, heard_of

BOT_ID = 99


@dataclass
class Identity:
    username: str = "kept_bot"
    bot_id: int | None = BOT_ID


ANA = User(1, "Ana", is_bot=False, username="ana")
OTHER_BOT = User(7, "Helper", is_bot=True, username="helper_bot")
PRIVATE = Chat(1, Chat.PRIVATE)
GROUP = Chat(-100, Chat.SUPERGROUP)
CHANNEL = Chat(-200, Chat.CHANNEL)
WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def message(chat: Chat, text: str | None, sender: User | None = ANA, **extra: Any) -> Message:
    return Message(1, WHEN, chat, from_user=sender, text=text, **extra)


def command(chat: Chat, text: str) -> Message:
    head = text.split()[0]
    entity = MessageEntity(MessageEntity.BOT_COMMAND, 0, len(head))
    return message(chat, text, entities=(entity,))


def test_a_private_text_is_heard_and_group_chatter_is_not() -> None:
    heard = heard_of(message(PRIVATE, "hello"), Identity())
    assert heard is not None and heard.kind == "private" and heard.addressed.text == "hello"
    assert heard.media is None and heard.command is None
    assert heard_of(message(GROUP, "hello all"), Identity()) is None


def test_a_mention_in_a_group_is_heard() -> None:
    text = "@kept_bot what's on?"
    mention = MessageEntity(MessageEntity.MENTION, 0, len("@kept_bot"))
    heard = heard_of(message(GROUP, text, entities=(mention,)), Identity())
    assert heard is not None and heard.kind == "group"


def test_what_kept_never_hears() -> None:
    identity = Identity()
    assert heard_of(message(PRIVATE, "hi", sender=None), identity) is None  # no sender
    assert heard_of(message(PRIVATE, "  "), identity) is None  # nothing said
    assert heard_of(message(PRIVATE, "hi", sender=OTHER_BOT), identity) is None
    assert heard_of(message(CHANNEL, "a post"), identity) is None
    assert heard_of(command(GROUP, "/help@other_bot"), identity) is None
    assert heard_of(command(GROUP, "/frobnicate"), identity) is None  # another bot's, probably
    # Each of those, from a person, with something said, in a chat kept is
    # in and as one of kept's commands, is heard.
    heard = heard_of(message(PRIVATE, "hi"), identity)
    assert heard is not None and heard.addressed.text == "hi"
    heard = heard_of(command(GROUP, "/help@kept_bot"), identity)
    assert heard is not None and heard.command is not None and heard.command.name == "help"


def test_commands_and_unreadable_media_are_heard_as_such() -> None:
    identity = Identity()
    heard = heard_of(command(GROUP, "/snooze@kept_bot 2h"), identity)
    assert heard is not None and heard.command is not None
    assert (heard.command.name, heard.command.args) == ("snooze", ["2h"])
    photo = (PhotoSize("f", "u", 10, 10),)
    heard = heard_of(message(PRIVATE, None, photo=photo), identity)
    assert heard is not None and heard.media == "photo"
    captioned = heard_of(message(PRIVATE, None, photo=photo, caption="look"), identity)
    assert captioned is not None and captioned.media is None and captioned.addressed.text == "look"


class Recording:
    def __init__(self, name: str, takes: bool, log: list[str]) -> None:
        self.name, self.takes, self.log = name, takes, log

    def check_update(self, update: Update) -> str | None:
        self.log.append(f"check {self.name}")
        return self.name if self.takes else None

    async def handle_update(self, update: Update, checked: str, mark_safe: Any) -> None:
        self.log.append(f"handle {checked}")


async def test_the_first_handler_that_takes_an_update_handles_it_alone() -> None:
    log: list[str] = []
    handlers = [Recording("a", False, log), Recording("b", True, log), Recording("c", True, log)]
    await dispatch(handlers, Update(1), lambda: None)
    assert log == ["check a", "check b", "handle b"]
    log.clear()
    await dispatch([Recording("a", False, log)], Update(2), lambda: None)
    assert log == ["check a"]  # nobody's update: nothing handled
