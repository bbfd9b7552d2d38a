"""Sending to Telegram at most once: what each Bot API failure means for a retry.

The one question for every failure is "could Telegram have accepted it?"

- 429 with retry_after, a 5xx answer, a connection that was never opened:
  certainly not accepted, so retrying cannot make a second copy (retryable).
- A timeout or broken connection after the request went out: maybe accepted
  (unknown). Never retried, here or by the caller.
- Blocked by the user, chat not found, not enough rights, bad request:
  permanent; neither retryable nor unknown, so the heartbeat marks the
  commitment failed at once.

A 429 never reaches `send_once` while there is time: the pace
(channels/telegram/pace.py) holds every send through the flood wait and
sends the refused one again, up to its deadline; what comes back after that
is handed back as retryable with its `retry_after`. `send_once` itself only
tries a refused connection again, a couple of times.

A send whose Departure declined to leave (channels/base.py: the reply is
already being sent, or its `sending` mark could not be stored) was never
made: neither retryable nor unknown.

A message goes out with its formatting as entities (channels/telegram/format.py).
Should Telegram refuse them (400 "can't parse entities" or another entity
error), nothing was sent, so `send_formatted` sends the same text once more
without them: the user gets exactly one readable message.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta

import httpx
from telegram import (
    Bot,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    MessageEntity,
    ReplyParameters,
)
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from channels.departure import Departure, SendFenced
from channels.telegram.format import Entity, TelegramChunk
from channels.telegram.messages import chat_id_param
from core.clock import Clock
from core.logs import event
from core.messages import FollowUpVerb, SendResult, Target
from core.metrics import recorder

log = logging.getLogger("kept.telegram")

# Connections refused before anything was sent: retried this often, with
# CONNECT_BACKOFF * 2**n seconds in between.
CONNECT_RETRIES = 2
CONNECT_BACKOFF = 1.0

# httpx failures that happen before a byte of the request left this process.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

LABELS: dict[FollowUpVerb, str] = {"dismiss": "Dismiss", "snooze": "Snooze 1 day"}


def retry_after_seconds(exc: RetryAfter) -> float:
    # PTB 22.2+ warns on every read of `retry_after` unless PTB_TIMEDELTA is
    # set, and then returns a timedelta instead of an int: accept both.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def classify(exc: Exception, *, secret: str = "") -> SendResult:
    """The SendResult for a failed Bot API call (see the module docstring)."""
    text = scrub(str(exc) or type(exc).__name__, secret)
    if isinstance(exc, SendFenced):
        return SendResult(error=f"not sent: {text}")
    if isinstance(exc, RetryAfter):
        wait = retry_after_seconds(exc)
        return SendResult(error=f"flood control: {text}", retryable=True, retry_after=wait)
    if isinstance(exc, ChatMigrated):
        return SendResult(error=f"the group moved to chat {exc.new_chat_id}")
    if isinstance(exc, BadRequest):
        return SendResult(error=f"bad request: {text}")  # PTB drops Telegram's prefix
    if isinstance(exc, Forbidden | InvalidToken):
        return SendResult(error=text)
    if isinstance(exc, TimedOut | NetworkError):
        cause = exc.__cause__
        if isinstance(cause, _NOT_SENT):
            return SendResult(error=f"not sent: {text}", retryable=True)
        if cause is None or isinstance(cause, TelegramError):
            # An HTTP answer (5xx, 502 from a proxy): the server said no.
            return SendResult(error=f"server error: {text}", retryable=True)
        return SendResult(error=f"outcome unknown: {text}", unknown=True)
    if isinstance(exc, TelegramError):
        return SendResult(error=text)
    # Anything else escaped from the HTTP layer mid-request: it may have gone out.
    return SendResult(error=f"outcome unknown: {type(exc).__name__}: {text}", unknown=True)


async def send_once(
    call: Callable[[], Awaitable[Message | bool]],
    clock: Clock,
    *,
    secret: str = "",
    what: str = "send",
    chat: str | None = None,
) -> SendResult:
    """Run one Bot API send; retry only what Telegram certainly did not take
    (a 429 was retried by the pace already)."""
    refused = 0
    while True:
        try:
            sent = await call()
        except Exception as exc:
            result = classify(exc, secret=secret)
        else:
            message_id = str(sent.message_id) if isinstance(sent, Message) else None
            return SendResult(message_id=message_id)
        wait: float | None = None
        if result.retryable and result.retry_after is None and refused < CONNECT_RETRIES:
            wait = CONNECT_BACKOFF * 2**refused
            refused += 1
        if wait is None:
            return result
        recorder().send_retry("telegram")
        event(
            log,
            logging.INFO,
            "telegram_retry",
            what=what,
            chat=chat,
            wait_s=wait,
            error=result.error,
        )
        await clock.sleep(wait)


async def send_formatted(
    send: Callable[[str, list[MessageEntity] | None], Awaitable[Message]],
    chunk: TelegramChunk,
    clock: Clock,
    *,
    secret: str = "",
    chat: str | None = None,
) -> SendResult:
    """Send one chunk with its entities (`send(text, entities)` makes the
    call); if Telegram refuses the entities, the same text once as plain text."""
    entities = [_ptb_entity(e) for e in chunk.entities] or None
    result = await send_once(
        lambda: send(chunk.text, entities), clock, secret=secret, what="sendMessage", chat=chat
    )
    if entities is None or not entities_refused(result):
        return result
    event(
        log,
        logging.WARNING,
        "telegram_entities_refused",
        chat=chat,
        error=result.error,
        action="none needed: sent as plain text; if this repeats, report the reply's Markdown",
    )
    return await send_once(
        lambda: send(chunk.text, None), clock, secret=secret, what="sendMessage", chat=chat
    )


async def send_message(
    bot: Bot,
    target: Target,
    chunk: TelegramChunk,
    reply_to: str | None,
    buttons: InlineKeyboardMarkup | None,
    departure: Departure | None,
    clock: Clock,
    *,
    secret: str,
) -> SendResult:
    """One message into `target` (its forum topic too), quoting `reply_to`
    when it is still there; `departure` goes to the pace (pace.py), which
    calls it once the message may leave, just before the request."""
    placed = _placement(target, reply_to)
    if isinstance(placed, SendResult):
        return placed
    thread, reply = placed

    async def call(text: str, entities: list[MessageEntity] | None) -> Message:
        # Entities, never parse_mode: nothing in the text needs escaping.
        return await bot.send_message(
            chat_id=chat_id_param(target.chat_id),
            text=text,
            entities=entities,
            message_thread_id=thread,
            reply_parameters=reply,
            reply_markup=buttons,
            rate_limit_args=departure,
        )

    return await send_formatted(call, chunk, clock, secret=secret, chat=target.chat_id)


def _placement(
    target: Target, reply_to: str | None
) -> tuple[int | None, ReplyParameters | None] | SendResult:
    """The forum topic and the quote of a send into `target`, as Telegram
    takes them (a quote whose message is gone is dropped, not an error);
    a failed SendResult for ids that are not Telegram's."""
    try:
        thread = int(target.thread_id) if target.thread_id is not None else None
        reply_id = int(reply_to) if reply_to is not None else None
    except ValueError:
        return SendResult(error=f"not a Telegram thread or message id in {target}")
    if reply_id is None:
        return thread, None
    return thread, ReplyParameters(message_id=reply_id, allow_sending_without_reply=True)


async def send_document(
    bot: Bot,
    target: Target,
    filename: str,
    data: bytes,
    caption: str,
    reply_to: str | None,
    clock: Clock,
    *,
    secret: str,
) -> SendResult:
    """One file into `target` (sendDocument, a multipart upload), with a
    short caption, quoting `reply_to` when it is still there."""
    placed = _placement(target, reply_to)
    if isinstance(placed, SendResult):
        return placed
    thread, reply = placed

    async def call() -> Message:
        return await bot.send_document(
            chat_id=chat_id_param(target.chat_id),
            document=InputFile(data, filename=filename),
            caption=caption,
            message_thread_id=thread,
            reply_parameters=reply,
        )

    return await send_once(call, clock, secret=secret, what="sendDocument", chat=target.chat_id)


def entities_refused(result: SendResult) -> bool:
    """Whether Telegram refused a message for its entities (a 400 naming
    them: "can't parse entities", "entity beginning at ...")."""
    error = (result.error or "").lower()
    return error.startswith("bad request:") and "entit" in error


def _ptb_entity(entity: Entity) -> MessageEntity:
    return MessageEntity(
        type=entity.type,
        offset=entity.offset,
        length=entity.length,
        url=entity.url,
        language=entity.language,
        custom_emoji_id=entity.custom_emoji_id,
    )


def scrub(text: str, secret: str) -> str:
    """Error texts can carry the request URL, and the URL carries the token."""
    return text.replace(secret, "<token>") if secret else text
