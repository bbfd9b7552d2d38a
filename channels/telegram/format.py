"""The model's Markdown as Telegram shows it: plain text plus entities.

telegramify-markdown turns Markdown into text and a `MessageEntity` list
(bold, italic, strikethrough, inline code, `pre` with its language, links,
block quotes; lists as bullet lines, tables as a monospace `pre` block). No
parse_mode, so no escaping to get wrong: the text is sent as it is and the
entities say where the formatting goes, in UTF-16 code units as Telegram
counts them.

A long reply is cut into chunks of at most 4,096 UTF-16 units at paragraph,
line, then word boundaries (channels/split.py); an entity across a cut is
clipped into one entity per chunk, so none straddles a message and a `pre`
block keeps its language on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import pyromark
from telegramify_markdown import MessageEntity, RenderConfig, convert
from telegramify_markdown.converter import STANDARD_OPTIONS

from channels.split import split_ranges, utf16_width

MAX_UTF16 = 4096
# Escaping one HTML line can turn the next into inline HTML: a few passes
# reach text with none left.
MAX_HTML_ROUNDS = 8
# Links Telegram opens; any other text_link would have the message refused.
LINK_SCHEMES = frozenset({"http", "https", "tg"})
# The library's entity: type, offset and length in UTF-16 units, url, language.
Entity = MessageEntity


@dataclass(frozen=True, slots=True)
class TelegramChunk:
    """One message: its text and the entities that format it (offsets in
    UTF-16 code units of this text)."""

    text: str
    entities: tuple[Entity, ...] = ()


def _render_config() -> RenderConfig:
    # Our own config: the library's global one is shared, mutable state.
    config = RenderConfig.isolated()
    symbols = config.markdown_symbol
    # Headings read as bold lines, without the library's emoji in front.
    for level in range(1, 7):
        setattr(symbols, f"heading_level_{level}", "")
    return config


_CONFIG = _render_config()


def to_telegram(markdown: str) -> tuple[str, list[MessageEntity]]:
    """The Markdown as Telegram text and entities. Text the converter leaves
    nothing of (a lone rule, an image) is sent as written, unformatted."""
    text, entities = convert(_literal_html(markdown), config=_CONFIG)
    if not text.strip():
        return markdown.strip(), []
    return text, [e for e in _heading_bold_only(entities) if _sendable(e)]


def telegram_chunks(markdown: str, limit: int = MAX_UTF16) -> list[TelegramChunk]:
    """The Markdown as messages of at most `limit` UTF-16 units each; none
    when there is nothing to send."""
    text, entities = to_telegram(markdown)
    return [
        TelegramChunk(text[start:end], _clip(text, entities, start, end))
        for start, end in split_ranges(text, limit, utf16_width)
    ]


def _clip(
    text: str, entities: list[MessageEntity], start: int, end: int
) -> tuple[MessageEntity, ...]:
    """The entities within text[start:end], cut to it, offsets counted from
    its start."""
    first = utf16_width(text[:start])
    last = first + utf16_width(text[start:end])
    clipped: list[MessageEntity] = []
    for entity in entities:
        lo = max(entity.offset, first)
        hi = min(entity.offset + entity.length, last)
        if hi > lo:
            clipped.append(entity.copy_with(offset=lo - first, length=hi - lo))
    return tuple(clipped)


def _literal_html(markdown: str) -> str:
    """The Markdown with what would parse as HTML escaped: the converter
    drops HTML, and a model's "<your name>" or "<div>" is meant as text."""
    for _ in range(MAX_HTML_ROUNDS):
        data = markdown.encode("utf-8")
        cuts: set[int] = set()
        for payload, where in pyromark.events_with_range(markdown, options=STANDARD_OPTIONS):
            if isinstance(payload, dict) and ("InlineHtml" in payload or "Html" in payload):
                at = data.find(b"<", where["start"], where["end"])
                if at >= 0:
                    cuts.add(at)
        if not cuts:
            break
        for at in sorted(cuts, reverse=True):
            data = data[:at] + b"\\" + data[at:]
        markdown = data.decode("utf-8")
    return markdown


def _sendable(entity: Entity) -> bool:
    # Telegram refuses a whole message over a link it cannot open (a relative
    # path, a made-up scheme); such a link keeps its words, unlinked.
    if entity.type != "text_link":
        return True
    return urlsplit(entity.url or "").scheme.lower() in LINK_SCHEMES


def _heading_bold_only(entities: list[MessageEntity]) -> list[MessageEntity]:
    # The library underlines top-level headings on top of bold; Markdown has
    # no underline of its own, so an underline exactly over a bold span is a
    # heading's, and a heading is a bold line.
    bold = {(e.offset, e.length) for e in entities if e.type == "bold"}
    return [e for e in entities if not (e.type == "underline" and (e.offset, e.length) in bold)]
