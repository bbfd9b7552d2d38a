"""The model's Markdown as Telegram text + entities (channels/telegram/format.py):
golden conversions in several scripts, offsets in UTF-16 code units, and
chunks that Telegram accepts (no entity across a cut, 4,096 units each)."""

from __future__ import annotations

import pytest

from channels.split import utf16_width
from channels.telegram.format import MAX_UTF16, TelegramChunk, telegram_chunks, to_telegram
from tests.fakes.telegram_server import entity_problem

Golden = list[tuple[str, ...] | tuple[str, int, int] | tuple[str, int, int, str]]

GOLDEN: list[tuple[str, str, str, Golden]] = [
    (
        "inline styles and a link",
        "**bold** *italic* ~~strike~~ `code` [link](https://example.com)",
        "bold italic strike code link",
        [
            ("bold", 0, 4),
            ("italic", 5, 6),
            ("strikethrough", 12, 6),
            ("code", 19, 4),
            ("text_link", 24, 4, "https://example.com"),
        ],
    ),
    (
        "headings as bold lines, lists, a block quote",
        "# Plan\n\n## Steps\n\n- one\n- two\n  - nested\n\n1. a\n2. b\n\n> quoted\n> more",
        "Plan\n\nSteps\n\n⦁ one\n⦁ two\n  ⦁ nested\n\n1. a\n2. b\n\nquoted\nmore",
        [("bold", 0, 4), ("bold", 6, 5), ("blockquote", 48, 11)],
    ),
    (
        "a fenced code block keeps its language",
        "Run:\n\n```python\nprint('hi')\n```",
        "Run:\n\nprint('hi')",
        [("pre", 6, 11, "python")],
    ),
    (
        "a table is a monospace block",
        "| name | qty |\n|---|---|\n| tea | 2 |\n| coffee | 10 |",
        # The trailing space of the last cell goes with the message's end.
        "name   | qty\n-------+----\ntea    | 2  \ncoffee | 10",
        [("pre", 0, 50)],
    ),
    (
        "emoji count two UTF-16 units, a skin tone four",
        "Great 🎉 **well done** 👍🏽 `x`",
        "Great 🎉 well done 👍🏽 x",
        [("bold", 9, 9), ("code", 24, 1)],
    ),
    (
        "Persian, right to left",
        "سلام **دنیا**! قرار *فردا* ساعت ۹ است.",
        "سلام دنیا! قرار فردا ساعت ۹ است.",
        [("bold", 5, 4), ("italic", 16, 4)],
    ),
    (
        "Thai, with combining vowels",
        "สวัสดี **ครับ** วันนี้ *อากาศ* ดี",
        "สวัสดี ครับ วันนี้ อากาศ ดี",
        [("bold", 7, 4), ("italic", 19, 5)],
    ),
    (
        "Chinese, no spaces around the markers",
        "你好，**世界**！明天*九点*见。`代码`",
        "你好，世界！明天九点见。代码",
        [("bold", 3, 2), ("italic", 8, 2), ("code", 12, 2)],
    ),
    (
        "Japanese after an emoji",
        "日本語の**太字**と😀*斜体*",
        "日本語の太字と😀斜体",
        [("bold", 4, 2), ("italic", 9, 2)],
    ),
    (
        "a link Telegram cannot open keeps its words, unlinked",
        "see [docs](./local) and [site](https://kept.example/a_b)",
        "see docs and site",
        [("text_link", 13, 4, "https://kept.example/a_b")],
    ),
    (
        "what would parse as HTML stays text (the converter drops HTML)",
        "Usage: /dismiss <id>\n\n<div>\nhello <b>x</b>\n</div>\n\n`a<b>` <https://kept.example/x>",
        "Usage: /dismiss <id>\n\n<div>\nhello <b>x</b>\n</div>\n\na<b> https://kept.example/x",
        [("code", 51, 4), ("text_link", 56, 22, "https://kept.example/x")],
    ),
    (
        "plain text is left alone",
        "Use snake_case, 2 * 3 and a_b_c.",
        "Use snake_case, 2 * 3 and a_b_c.",
        [],
    ),
]


def _entities(chunk: TelegramChunk) -> Golden:
    found: Golden = []
    for e in chunk.entities:
        extra = e.language or e.url
        found.append((e.type, e.offset, e.length, extra) if extra else (e.type, e.offset, e.length))
    return found


def _as_json(chunk: TelegramChunk) -> list[dict[str, object]]:
    return [e.to_dict() for e in chunk.entities]


@pytest.mark.parametrize(
    ("markdown", "text", "entities"),
    [case[1:] for case in GOLDEN],
    ids=[case[0] for case in GOLDEN],
)
def test_golden_conversions(markdown: str, text: str, entities: Golden) -> None:
    [chunk] = telegram_chunks(markdown)
    assert chunk.text == text
    assert _entities(chunk) == entities
    assert entity_problem(chunk.text, _as_json(chunk)) is None


def test_offsets_are_utf16_code_units() -> None:
    text, entities = to_telegram("😀😀 **bold**")
    [bold] = entities
    assert (bold.offset, bold.length) == (5, 4)  # two emoji = four units, then a space
    assert len(text[:3]) == 3


def test_nothing_left_by_the_converter_is_sent_as_written() -> None:
    assert telegram_chunks("   \n ") == []
    [rule] = telegram_chunks("---")
    assert rule.text.strip() and rule.entities == ()


def _words(chunks: list[TelegramChunk]) -> list[str]:
    return " ".join(c.text for c in chunks).split()


def test_no_entity_straddles_a_cut_and_every_chunk_is_accepted() -> None:
    paragraph = "Some **bold words that run on** and *an italic tail* here. " * 40
    markdown = "\n\n".join([paragraph] * 6)
    chunks = telegram_chunks(markdown)

    assert len(chunks) > 1
    for chunk in chunks:
        assert utf16_width(chunk.text) <= MAX_UTF16
        assert entity_problem(chunk.text, _as_json(chunk)) is None
    text, _ = to_telegram(markdown)
    assert _words(chunks) == text.split()


def test_a_code_block_cut_in_two_keeps_its_language_on_both_sides() -> None:
    code = "\n".join(f"    total += item_{i}  # running sum of the basket" for i in range(200))
    chunks = telegram_chunks(f"The script:\n\n```python\n{code}\n```\n\nThat is all.")

    pres = [e for c in chunks for e in c.entities if e.type == "pre"]
    assert len(chunks) >= 3 and len(pres) >= 3
    assert {e.language for e in pres} == {"python"}
    for chunk in chunks:
        assert entity_problem(chunk.text, _as_json(chunk)) is None
        assert utf16_width(chunk.text) <= MAX_UTF16
    # Cuts fall between lines: every chunk of code starts at a line's indentation.
    assert all(c.text.startswith("    total") for c in chunks[1:-1])


def test_emoji_heavy_text_near_the_limit_is_split_in_utf16_units() -> None:
    # 2,399 characters for Python, 4,499 units for Telegram: one message
    # counted in characters would be refused as too long.
    markdown = " ".join(["🎉" * 7] * 300)
    chunks = telegram_chunks(markdown)

    assert len(markdown) < MAX_UTF16 < utf16_width(markdown)
    assert len(chunks) == 2
    assert all(utf16_width(c.text) <= MAX_UTF16 for c in chunks)
    assert _words(chunks) == markdown.split()
