"""Text normalisation shared by indexing and querying.

Whatever is written to the full-text index and whatever is searched for must
pass through the same function, or a word typed one way never finds the same
word stored another way. The FTS tokenizer (unicode61, remove_diacritics 2)
already folds Latin diacritics and ASCII case; this module handles what it
does not: compatibility forms, Turkish dotted/dotless i, invisible format
characters and Arabic-script vowel marks.
"""

from __future__ import annotations

import unicodedata

# Format characters (Unicode category Cf) are invisible but split or glue
# words: a Persian word typed with a zero-width non-joiner must match the same
# word typed without one. Listed as ranges (Unicode 15) instead of scanning
# the whole code space at import time; a test checks this against unicodedata.
_FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x0600, 0x0605),  # Arabic number signs
    (0x061C, 0x061C),  # Arabic letter mark
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200F),  # ZWSP, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x206F),  # bidi isolates, deprecated format chars
    (0xFEFF, 0xFEFF),  # BOM / zero-width no-break space
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),  # tag characters
)

# Arabic harakat and tatweel. unicode61 treats these combining marks as
# separators, so "كَتَبَ" would otherwise index as three one-letter tokens.
_ARABIC_MARK_RANGES: tuple[tuple[int, int], ...] = (
    (0x0640, 0x0640),  # tatweel (kashida)
    (0x064B, 0x065F),  # fathatan … wavy hamza below
    (0x0670, 0x0670),  # superscript alef
)

# Letters that Arabic and Persian keyboards write differently for one word:
# Arabic yeh/alef maksura vs Farsi yeh, Arabic kaf vs keheh, and alef with
# hamza or madda, which many people leave off. Arabic-Indic and Persian digits
# become ASCII, so "۱۴۰۳" finds "1403". One character each, so positions in
# the folded text still map back to the original (see core.search.snippet).
_ARABIC_FOLDS: dict[int, str] = {
    0x064A: "\u06cc",  # ي → ی
    0x0649: "\u06cc",  # ى → ی
    0x0643: "\u06a9",  # ك → ک
    0x0622: "\u0627",  # آ → ا
    0x0623: "\u0627",  # أ → ا
    0x0625: "\u0627",  # إ → ا
    0x0671: "\u0627",  # ٱ → ا
    **{0x0660 + d: str(d) for d in range(10)},  # Arabic-Indic digits
    **{0x06F0 + d: str(d) for d in range(10)},  # Persian digits
}

# Control characters become spaces rather than vanishing: a NUL or newline
# between two words still separates them, and a NUL inside an FTS5 query
# string is a syntax error.
_CONTROL_RANGES: tuple[tuple[int, int], ...] = ((0x0000, 0x001F), (0x007F, 0x009F))


def _build_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for ranges, replacement in (
        (_FORMAT_RANGES, None),
        (_ARABIC_MARK_RANGES, None),
        (_CONTROL_RANGES, " "),
    ):
        for first, last in ranges:
            for code in range(first, last + 1):
                table[code] = replacement
    # casefold() turns İ into "i" + combining dot above, and leaves ı alone;
    # Turkish users type either letter for the same word, so both become "i".
    table[0x0130] = "i"
    table[0x0131] = "i"
    table.update(_ARABIC_FOLDS)
    return table


_TABLE = _build_table()
_ASCII_TABLE = {code: repl for code, repl in _TABLE.items() if code < 0x80}


def normalize(text: str) -> str:
    """Fold `text` into the form stored in and searched against the index."""
    if text.isascii():
        # NFKC and casefold are identities on ASCII apart from lowercasing.
        return text.translate(_ASCII_TABLE).lower()
    text = unicodedata.normalize("NFKC", text).translate(_TABLE).casefold()
    # casefold can leave decomposed sequences (e.g. "ǰ" → "j" + U+030C);
    # recompose so the tokenizer sees one letter it knows how to fold.
    return unicodedata.normalize("NFKC", text)
