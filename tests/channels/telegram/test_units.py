"""The Telegram adapter's pure parts: failure classification, callback data,
and how a message maps to a session."""

from __future__ import annotations

import httpx
import pytest
from telegram import Bot, Message
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

from channels.telegram.commands import command_of
from channels.telegram.lists import keyboard
from channels.telegram.messages import addressed_to, chat_kind, target_of
from channels.telegram.send import classify
from core.commands.buttons import pack, unpack
from core.messages import Action, Target, followup_actions
from tests.fakes.telegram_server import BOT_ID, FakeTelegram


def caused(exc: Exception, cause: BaseException) -> Exception:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "retryable", "unknown"),
    [
        (RetryAfter(7), True, False),
        (caused(NetworkError("httpx.ConnectError: refused"), httpx.ConnectError("x")), True, False),
        (caused(TimedOut(), httpx.ConnectTimeout("x")), True, False),
        (caused(TimedOut("Pool timeout"), httpx.PoolTimeout("x")), True, False),
        (NetworkError("Bad Gateway"), True, False),  # an HTTP answer: not accepted
        (caused(TimedOut(), httpx.ReadTimeout("x")), False, True),
        (caused(TimedOut(), httpx.WriteTimeout("x")), False, True),
        (caused(NetworkError("x"), httpx.RemoteProtocolError("x")), False, True),
        (caused(NetworkError("x"), httpx.ReadError("x")), False, True),
        (Forbidden("Forbidden: bot was blocked by the user"), False, False),
        (BadRequest("Chat not found"), False, False),
        (RuntimeError("boom"), False, True),
    ],
)
def test_classify(exc: Exception, retryable: bool, unknown: bool) -> None:
    result = classify(exc)
    assert (result.retryable, result.unknown, result.ok) == (retryable, unknown, False)


def test_retry_after_is_reported_in_seconds() -> None:
    assert classify(RetryAfter(7)).retry_after == 7.0


def test_errors_never_carry_the_token() -> None:
    token = "123:secret"
    result = classify(NetworkError(f"failed POST https://x/bot{token}/sendMessage"), secret=token)
    assert token not in (result.error or "")
    # The rest of the error is kept: the token alone is masked.
    assert result.error == "server error: failed POST https://x/bot<token>/sendMessage"


def test_callback_data_fits_64_bytes_and_round_trips() -> None:
    ids = [f"cm_{n:012x}" for n in range(6)]
    markup = keyboard(followup_actions(ids))
    assert markup is not None
    datas = [b.callback_data for b in markup.inline_keyboard[0]]
    assert all(isinstance(d, str) and len(d.encode()) <= 64 for d in datas)
    # As many as fit; /dismiss reaches the rest.
    assert unpack(datas[0]) == Action("dismiss", tuple(ids[:4]))
    assert unpack(datas[1]) == Action("snooze", tuple(ids[:4]))
    assert pack(Action("dismiss", tuple(ids[:1]))) == "d:" + ids[0].removeprefix("cm_")


@pytest.mark.parametrize("data", [None, "", "x:abc", "d:", "dismiss"])
def test_foreign_callback_data_is_refused(data: str | None) -> None:
    assert unpack(data) is None
    assert keyboard(followup_actions([data or ""])) is None
    # Data of kept's own is taken, and a follow-up of kept's gets its buttons.
    assert unpack("d:000000000001") == Action("dismiss", ("cm_000000000001",))
    assert keyboard(followup_actions(["cm_000000000001"])) is not None


def read(payload: dict[str, object]) -> Message:
    message = Message.de_json(payload, Bot("1:x"))
    assert message is not None
    return message


def test_chat_kinds_and_targets() -> None:
    fake = FakeTelegram()
    assert [chat_kind(t) for t in ("private", "group", "supergroup", "channel")] == [
        "private",
        "group",
        "group",
        "channel",
    ]
    topic = read(fake.message("hi", chat_id=-1005, chat_type="supergroup", thread_id=9))
    assert target_of(topic) == Target("telegram", "-1005", "9")
    # message_thread_id outside a forum topic (a reply thread) is no session
    plain = fake.message("hi", chat_id=-1006, chat_type="supergroup")
    plain["message_thread_id"] = 4
    assert target_of(read(plain)) == Target("telegram", "-1006", None)


def test_addressing_in_groups() -> None:
    fake = FakeTelegram()
    group = {"chat_id": -100, "chat_type": "group", "user_id": 3}
    assert addressed_to(read(fake.message("hi @Kept_Bot!", **group)), BOT_ID, "kept_bot")
    assert not addressed_to(read(fake.message("hi @kept_bot2", **group)), BOT_ID, "kept_bot")
    text_mention = fake.message("hi Kept", **group)
    text_mention["entities"] = [
        {"type": "text_mention", "offset": 3, "length": 4, "user": {
            "id": BOT_ID, "is_bot": True, "first_name": "Kept"}}
    ]  # fmt: skip
    assert addressed_to(read(text_mention), BOT_ID, "kept_bot")
    topic = fake.message("hi", chat_id=-101, chat_type="supergroup", user_id=3, thread_id=5)
    topic["reply_to_message"]["from"] = {"id": BOT_ID, "is_bot": True, "first_name": "Kept"}
    assert not addressed_to(read(topic), BOT_ID, "kept_bot")  # the topic's start, not a reply


def test_commands_are_parsed_with_their_addressee() -> None:
    fake = FakeTelegram()
    command = command_of(read(fake.message("/snooze@Kept_Bot cm_1 2h")), "kept_bot")
    assert command and not isinstance(command, bool)
    assert (command.name, command.args, command.addressed) == ("snooze", ["cm_1", "2h"], True)
    assert command_of(read(fake.message("/help@other_bot")), "kept_bot") is False
    assert command_of(read(fake.message("hello /help")), "kept_bot") is None
