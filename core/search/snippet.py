"""A short window of a message's original text around the first search hit.

The index matches normalised text, but people must see what was written:
"École", not "ecole". So the hit is located in a folded copy of the text that
keeps, for every folded character, the position of the original character it
came from, and the window is cut from the original.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Sequence
from itertools import accumulate

from core.search.ngrams import is_gram_char
from core.search.normalize import normalize

ELLIPSIS = "…"

# Combining marks that decomposed Latin, Greek and Cyrillic letters carry. The
# FTS tokenizer (remove_diacritics 2) folds these away, and so does the
# PostgreSQL backend's (core/store/postgres/lexemes.py), so "ecole" matches
# "École"; marks of other scripts (Thai vowels, kana voicing) stay, because
# there they change the word.
DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


class _FoldCache(dict[str, str]):
    """Folded form of single characters, computed on first sight."""

    def __missing__(self, char: str) -> str:
        # normalize() on one character is what it does to the whole text,
        # except composition with neighbours; decomposing both the text and
        # the terms (NFD) makes that difference vanish.
        folded = DIACRITICS.sub("", unicodedata.normalize("NFD", normalize(char)))
        if len(self) < 100_000:  # a chat's alphabet is small; bound it anyway
            self[char] = folded
        return folded


_FOLD = _FoldCache()


def _fold(text: str) -> str:
    return "".join(map(_FOLD.__getitem__, text))


# Texts are folded a chunk at a time and the search stops at the first chunk
# with a hit: folding costs ~100 ns a character, and assistant replies run to
# thousands of characters.
_CHUNK = 256


def _find_hit(text: str, terms: Sequence[str]) -> tuple[int, int] | None:
    """Original (start, end) of the earliest occurrence of any term."""
    needles = {_fold(normalize(t.rstrip("*"))).strip() for t in terms}
    needles.discard("")
    if not needles:
        return None
    # A phrase may be split differently in the text ("good,  morning"); its
    # words are the fallback, so a snippet still shows one of them.
    words = {w for n in needles for w in n.split()} - needles
    if text.isascii():
        # normalize() keeps ASCII length and positions: no map needed.
        folded = normalize(text)
        best = _earliest(folded, needles, 0) or _earliest(folded, words, 0)
        return None if best is None else (best[0], best[0] + best[1])
    overlap = max(map(len, needles)) - 1
    pieces: list[str] = []
    folded = ""
    best = None
    for chunk_start in range(0, len(text), _CHUNK):
        chunk = list(map(_FOLD.__getitem__, text[chunk_start : chunk_start + _CHUNK]))
        pieces += chunk
        searched = max(len(folded) - overlap, 0)
        folded += "".join(chunk)
        best = _earliest(folded, needles, searched)
        if best is not None:
            break
    best = best or _earliest(folded, words, 0)
    if best is None:
        return None
    pos, length = best
    if len(folded) == len(pieces) and "" not in pieces:
        return pos, pos + length  # every character folded to exactly one
    # starts[i]: offset in `folded` where original character i begins.
    starts = list(accumulate(map(len, pieces), initial=0))
    # The original character that produced folded[pos]: characters that fold
    # to nothing (ZWNJ, accents) share its start, and the last of them wins.
    start = bisect_right(starts, pos) - 1
    end = bisect_left(starts, pos + length)  # round a half-matched "ß" up
    return start, max(end, start + 1)


def _earliest(folded: str, needles: set[str], since: int) -> tuple[int, int] | None:
    """(position, length) of the first needle in `folded[since:]`, longest on ties."""
    best: tuple[int, int] | None = None
    for needle in needles:
        pos = folded.find(needle, since)
        if pos >= 0 and (best is None or (pos, -len(needle)) < (best[0], -best[1])):
            best = (pos, len(needle))
    return best


# Characters that never begin a user-perceived character: they belong to the
# one before, so a cut must not fall just before them.
_CONTINUES = re.compile(
    "[\u200c\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
    "\U000e0100-\U000e01ef\u1160-\u11ff\udc00-\udfff]"
)
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")


def _inside_cluster(text: str, i: int) -> bool:
    """Whether a cut at `i` (between text[i-1] and text[i]) splits a grapheme."""
    if i <= 0 or i >= len(text):
        return False
    char = text[i]
    if unicodedata.category(char)[0] == "M" or _CONTINUES.match(char) or text[i - 1] == "\u200d":
        return True
    if _REGIONAL.match(char):
        # Flags are pairs of regional indicators: count how many precede.
        run = i
        while run > 0 and _REGIONAL.match(text[run - 1]):
            run -= 1
        return (i - run) % 2 == 1
    return False


# Where a word may start: after whitespace, or after full-width and Arabic
# punctuation, since Chinese and Japanese have no spaces at all. ASCII
# punctuation without a space after it is inside a word ("e.g.", "10:30").
_BREAK = re.compile(r"[\s。、，！？；：،؛؟]+")


def make_snippet(text: str, terms: Sequence[str], max_chars: int = 300) -> str:
    """At most `max_chars` characters of `text` around the first hit of `terms`.

    `text` is the original (already redacted) message; `terms` are normalised
    query terms. A cut end is marked with "…", which counts toward the limit.
    Without a hit the snippet is the beginning of the text.
    """
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return ELLIPSIS[:max_chars]
    hit_start, hit_end = _find_hit(text, terms) or (0, 0)
    n = len(text)
    start = 0
    lead = max(max_chars // 5, 1)  # context shown before the hit
    if hit_start > lead:
        start = _word_start(text, hit_start - lead, hit_start)
    if start > 0 and n - start < max_chars:
        # The rest of the text fits: spend the spare room on context before.
        start = _word_start(text, n - (max_chars - 1), hit_start)
        end = n
    else:
        room = max_chars - 1 - (1 if start > 0 else 0)
        end = _word_end(text, start + room, max(hit_end, start + room * 3 // 4))
    return _cut(text, start, end, max_chars)


def _word_start(text: str, lo: int, hit: int) -> int:
    """The first word start in [lo, hit], or lo if the span has no break."""
    lo = max(lo, 0)
    found = _BREAK.search(text, lo, hit)
    return found.end() if found else lo


def _word_end(text: str, end: int, floor: int) -> int:
    """The last break in [floor, end], so the cut does not halve a word."""
    for i in range(end, max(floor, 0) - 1, -1):
        if i < len(text) and text[i].isspace():
            return i
    return end


def _cut(text: str, start: int, end: int, max_chars: int) -> str:
    n = len(text)
    raw_start, raw_end = start, end
    while _inside_cluster(text, start) and start < end:
        start += 1
    while _inside_cluster(text, end) and end > start:
        end -= 1
    if start >= end:
        # Only a pathological cluster (hundreds of marks on one letter) gets
        # here: cutting through it beats returning nothing.
        start, end = raw_start, raw_end
    if start > 0:
        while start < end and text[start].isspace():
            start += 1
    if end < n:
        while end > start and text[end - 1].isspace():
            end -= 1
    snippet = (ELLIPSIS if start > 0 else "") + text[start:end] + (ELLIPSIS if end < n else "")
    return snippet if len(snippet) <= max_chars else snippet[:max_chars]


def match_spans(
    text: str, terms: Sequence[str], prefixes: Collection[str] = ()
) -> list[tuple[int, int]]:
    """Original (start, end) of every occurrence of `terms` in `text` (a
    snippet), in order and without overlaps: what a highlighter marks.

    Matching is the index's (normalised, diacritics folded, so "ecole" marks
    "École"). A word matches as a whole word, or from a word's start to its
    end when it is one of `prefixes` (a `word*` query); a run of an unspaced
    script (CJK, Thai) matches anywhere, as its bigrams do in the index."""
    pieces = [_FOLD[char] for char in text]
    folded = "".join(pieces)
    needles = {_fold(normalize(t.rstrip("*"))).strip() for t in terms} - {""}
    open_ended = {_fold(normalize(p.rstrip("*"))).strip() for p in prefixes}
    found: list[tuple[int, int]] = []
    for needle in needles:
        spaced = not any(map(is_gram_char, needle))
        pos = folded.find(needle)
        while pos >= 0:
            end = pos + len(needle)
            if not spaced:
                found.append((pos, end))
            elif pos == 0 or not _in_word(folded[pos - 1]):
                if needle in open_ended:
                    while end < len(folded) and _in_word(folded[end]):
                        end += 1
                    found.append((pos, end))
                elif end == len(folded) or not _in_word(folded[end]):
                    found.append((pos, end))
            pos = folded.find(needle, pos + 1)
    # starts[i]: offset in `folded` where original character i begins.
    starts = list(accumulate(map(len, pieces), initial=0))
    spans: list[tuple[int, int]] = []
    for pos, end in sorted(found, key=lambda span: (span[0], -span[1])):
        start = bisect_right(starts, pos) - 1
        stop = bisect_left(starts, end)
        while stop < len(text) and not pieces[stop]:  # its accents are part of it
            stop += 1
        if spans and start < spans[-1][1]:
            continue  # inside an earlier, longer match
        spans.append((start, max(stop, start + 1)))
    return spans


def _in_word(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char)[0] == "M"
