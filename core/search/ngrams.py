"""Character bigrams for scripts written without spaces between words.

unicode61 splits text on spaces and punctuation, so a Chinese, Japanese or
Thai sentence would index as one giant token that no word query can match.
Runs of those scripts are therefore taken out of the word column and written
to a second column as overlapping character bigrams, space-separated so the
tokenizer sees each bigram as one token:

    "我爱北京天安门"  →  "我爱 爱北 北京 京天 天安 安门 门"

The run's last character is also emitted on its own (the trailing "门"):

- a one-character query becomes the prefix query `"门" *`, which matches every
  bigram starting with that character *and* the trailing unigram, so a
  character at the end of a run (or a one-character run) is found too;
- it separates consecutive runs, so a phrase of bigrams never matches across
  a space or punctuation mark that split the original text.

A two-character query is then one exact token, and a longer one a phrase of
consecutive bigrams (`"东京 京都"`), answered from the index without scanning.
Trigrams could not match two-character words, the commonest length in Chinese.

Both functions expect text that already went through `normalize()`.
"""

from __future__ import annotations

import re
import unicodedata

# Scripts without spaces between words. Large ideograph/syllable blocks are
# taken whole (unassigned code points in them never occur in real text); the
# small mixed blocks keep only letters, marks and digits, so punctuation such
# as "。" or "・" still separates runs like a space does.
_WHOLE_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x323AF),  # CJK Extensions B–H, compatibility supplement
    (0xAC00, 0xD7A3),  # Hangul syllables (particles attach to words without a space)
)
_MIXED_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x3000, 0x303F),  # CJK symbols: 々 〆 〇 and the kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana (ー is a letter, ・ is not)
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xA9E0, 0xA9FF),  # Myanmar extended B
    (0xAA60, 0xAA7F),  # Myanmar extended A
    (0xD7B0, 0xD7FF),  # Hangul Jamo extended B
)


def _char_class() -> str:
    parts = [f"{chr(a)}-{chr(b)}" for a, b in _WHOLE_BLOCKS]
    for first, last in _MIXED_BLOCKS:
        for code in range(first, last + 1):
            char = chr(code)
            # Digits of these scripts are kept (Thai numerals are written in runs).
            if unicodedata.category(char)[0] in "LMN":
                parts.append(re.escape(char))
    return "".join(parts)


_CLASS = _char_class()
RUN = re.compile(f"[{_CLASS}]+")
_IS_RUN_CHAR = re.compile(f"[{_CLASS}]")


def is_gram_char(char: str) -> bool:
    return _IS_RUN_CHAR.match(char) is not None


def run_tokens(run: str) -> list[str]:
    """The grams-column tokens of one run: its bigrams, then its last char."""
    tokens = [run[i : i + 2] for i in range(len(run) - 1)]
    tokens.append(run[-1])
    return tokens


def split_columns(normalized: str) -> tuple[str, str]:
    """Normalised text → (word column, gram column).

    The word column is the text with every unspaced-script run replaced by a
    space; the gram column holds the runs' tokens (see `run_tokens`).
    """
    if normalized.isascii():
        # The common case for English chat, and no regex scan at all.
        return normalized, ""
    runs = RUN.findall(normalized)
    if not runs:
        return normalized, ""
    grams = " ".join(" ".join(run_tokens(run)) for run in runs)
    return RUN.sub(" ", normalized), grams
