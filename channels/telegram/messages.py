"""Reading a Telegram message: which session it belongs to and whether it
is meant for the bot."""

from __future__ import annotations

from telegram import Message
from telegram.constants import ChatType, MessageEntityType

from channels.base import AddressedMessage
from channels.media import MediaKind
from core.messages import ChatKind, Target


def chat_kind(chat_type: str) -> ChatKind:
    if chat_type == ChatType.PRIVATE:
        return "private"
    if chat_type == ChatType.CHANNEL:
        return "channel"
    return "group"  # group and supergroup


def target_of(message: Message) -> Target:
    """The chat, plus the forum topic when the message is in one. (Outside
    forums, message_thread_id names a reply thread, which is no session.)"""
    thread = message.message_thread_id if message.is_topic_message else None
    return Target(
        platform="telegram",
        chat_id=str(message.chat.id),
        thread_id=str(thread) if thread is not None else None,
    )


def addressed_message_of(message: Message, kind: ChatKind, text: str) -> AddressedMessage:
    """What the pipeline's admission and turn need of a message with a sender."""
    user = message.from_user
    assert user is not None  # checked by the caller
    return AddressedMessage(
        target=target_of(message),
        chat_kind=kind,
        sender_id=str(user.id),
        text=text,
        username=user.username,
        platform_message_id=str(message.message_id),
    )


def media_kind(message: Message) -> MediaKind | None:
    """What a message carries that kept cannot read, or None (text, or a
    service message such as a member joining). An animation is also sent as
    a document, and a venue as a location: the more exact kind is asked first."""
    if message.photo:
        return "photo"
    if message.video is not None or message.video_note is not None:
        return "video"
    if message.animation is not None:
        return "animation"
    if message.voice is not None:
        return "voice"
    if message.audio is not None:
        return "audio"
    if message.sticker is not None:
        return "sticker"
    if message.document is not None:
        return "file"
    if message.location is not None or message.venue is not None:
        return "location"
    if message.contact is not None:
        return "contact"
    return None


def addressed_to(message: Message, bot_id: int | None, username: str) -> bool:
    """Mentioned by @username or by a text mention, or replied to."""
    entities = {**message.parse_entities(), **message.parse_caption_entities()}
    for entity, value in entities.items():
        named = entity.type == MessageEntityType.MENTION and value[1:].lower() == username.lower()
        linked = entity.type == MessageEntityType.TEXT_MENTION and entity.user is not None
        if named or (linked and entity.user is not None and entity.user.id == bot_id):
            return True
    replied = message.reply_to_message
    # In a forum topic every message "replies" to the topic's first (service)
    # message; only a reply to one of ours counts.
    return (
        replied is not None
        and replied.forum_topic_created is None
        and replied.from_user is not None
        and replied.from_user.id == bot_id
    )


def anonymous_admin(message: Message) -> bool:
    """A group admin posting as the group itself: Telegram hides who it is
    (the sender shows as a bot), but only admins can do that."""
    return message.sender_chat is not None and message.sender_chat.id == message.chat.id


def chat_id_param(chat_id: str) -> int | str:
    """Numeric chat ids go to the API as numbers; "@channelname" stays text."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id
