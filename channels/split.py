"""Splitting a long reply into messages the platform accepts.

A cut goes at the last paragraph break that fits, else the last line break,
sentence end or space, and only as a last resort inside a word (never
between a letter and its combining marks). `split_ranges` measures with any
width (Telegram counts UTF-16 code units, Discord characters) and returns
index ranges, so a caller can carry its own annotations (Telegram's
entities) across the cut. `split_markdown` adds what Markdown needs: a code
fence cut in two is closed at the end of one message and reopened, with its
language, at the start of the next.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

Width = Callable[[str], int]

_BREAKS = (
    re.compile(r"\n[ \t\r\f\v]*\n"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?。！？])[ \t]+"),  # sentence
    re.compile(r"[ \t]+"),  # word
)
_BLANK_LINE = re.compile(r"[ \t\r\f\v]*\n")
# A fence line (CommonMark: up to three spaces, then ``` or ~~~ and an info string).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
# Characters a cut must not go before: they belong to the character before them.
_JOINERS = frozenset("\u200d\ufe0e\ufe0f")


def utf16_width(text: str) -> int:
    """Telegram's length: UTF-16 code units (a character beyond the BMP, such
    as most emoji, counts twice)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_ranges(text: str, limit: int, width: Width = len) -> list[tuple[int, int]]:
    """(start, end) index ranges of `text`, each non-blank, without leading
    blank lines or trailing whitespace, at most `limit` wide; together they
    hold every word of the text."""
    cum = _cumulative(text, width)
    start, end = _content_bounds(text)
    ranges: list[tuple[int, int]] = []
    while start < end:
        head_end, rest = _next_cut(text, cum, start, end, limit)
        head_end = _rstrip(text, start, head_end)
        if head_end > start:
            ranges.append((start, head_end))
        start = _skip_blank_lines(text, rest)
    return ranges


def split_plain(text: str, limit: int, width: Width = len) -> list[str]:
    """The chunks of plain text (see split_ranges)."""
    return [text[a:b] for a, b in split_ranges(text, limit, width)]


@dataclass(frozen=True, slots=True)
class _Fence:
    opener: str  # the opening line as written, e.g. "```python"
    marker: str  # the fence characters that close it, e.g. "```"
    body_start: int  # index just after the opening line's newline
    body_end: int  # index where the closing line starts (len(text) if unclosed)
    close_end: int  # index just after the closing line
    open_start: int  # index where the opening line starts


def split_markdown(text: str, limit: int) -> list[str]:
    """Markdown chunks of at most `limit` characters: a fenced code block cut
    in two is closed at the end of one chunk and reopened with its info
    string (the language) at the start of the next."""
    text = text.strip()
    fences = _fences(text)
    if not fences:
        return split_plain(text, limit)
    cum = _cumulative(text, len)
    # Room for the longest closing line a chunk may need ("\n" + marker).
    reserve = 1 + max(len(f.marker) for f in fences)
    chunks: list[str] = []
    start, end = 0, len(text)
    while start < end:
        reopened = _inside(fences, start)
        prefix = f"{reopened.opener}\n" if reopened is not None else ""
        budget = max(limit - len(prefix) - reserve, 1)
        if reopened is None and cum[end] - cum[start] <= limit:
            budget = limit  # the rest fits as it is: nothing to close
        head_end, rest = _next_cut(text, cum, start, end, budget)
        open_at_cut = _inside(fences, head_end) if head_end < end else None
        if (
            open_at_cut is not None
            and open_at_cut is not reopened
            and open_at_cut.open_start > start
            and not text[open_at_cut.body_start : head_end].strip()
        ):
            # The cut would leave an empty code block: move the fence's opening
            # line to the next chunk instead.
            head_end = rest = open_at_cut.open_start
            open_at_cut = None
        head_end = _rstrip(text, start, head_end)
        body = text[start:head_end]
        if body.strip():
            suffix = f"\n{open_at_cut.marker}" if open_at_cut is not None else ""
            chunks.append(f"{prefix}{body}{suffix}")
        start = _skip_blank_lines(text, rest)
        if open_at_cut is not None:
            # Inside a code block only the line break goes: blank lines and
            # indentation are the code's. Nothing left of the block but its
            # closing line: that line was this chunk's own closing.
            start = _skip_newline(text, rest)
            if not text[start : open_at_cut.body_end].strip():
                start = _skip_blank_lines(text, open_at_cut.close_end)
    return chunks


# --- cutting ------------------------------------------------------------------------


def _cumulative(text: str, width: Width) -> list[int]:
    """cum[i] is the width of text[:i]."""
    if width is len:
        return list(range(len(text) + 1))
    return list(itertools.accumulate((width(ch) for ch in text), initial=0))


def _content_bounds(text: str) -> tuple[int, int]:
    end = len(text.rstrip())
    return _skip_blank_lines(text, 0) if end else 0, end


def _next_cut(text: str, cum: list[int], start: int, end: int, limit: int) -> tuple[int, int]:
    """Where the chunk starting at `start` ends, and where the next begins."""
    if cum[end] - cum[start] <= limit:
        return end, end
    # The furthest index whose prefix fits; at least one character per chunk.
    fits = max(bisect.bisect_right(cum, cum[start] + limit) - 1, start + 1)
    earliest = start + max((fits - start) // 4, 1)
    for pattern in _BREAKS:
        last = None
        for match in pattern.finditer(text, earliest, fits + 1):
            if match.start() <= fits:
                last = match
        if last is not None:
            return last.start(), last.end()
    cut = fits
    while cut > start + 1 and _belongs_to_previous(text[cut]):
        cut -= 1
    return cut, cut


def _belongs_to_previous(ch: str) -> bool:
    return ch in _JOINERS or unicodedata.category(ch).startswith("M")


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _skip_blank_lines(text: str, pos: int) -> int:
    while match := _BLANK_LINE.match(text, pos):
        pos = match.end()
    return pos


def _skip_newline(text: str, pos: int) -> int:
    return pos + 1 if text.startswith("\n", pos) else pos


# --- code fences ------------------------------------------------------------------


def _fences(text: str) -> list[_Fence]:
    fences: list[_Fence] = []
    opened: re.Match[str] | None = None
    for match in _FENCE.finditer(text):
        marker, info = match.group(1), match.group(2)
        if opened is None:
            if marker[0] == "`" and "`" in info:
                continue  # not a fence: an info string may not hold a backtick
            opened = match
        elif marker[0] == opened.group(1)[0] and len(marker) >= len(opened.group(1)):
            if info.strip():
                continue  # a closing fence has no info string
            fences.append(_fence(text, opened, match.start(), match.end()))
            opened = None
    if opened is not None:
        fences.append(_fence(text, opened, len(text), len(text)))
    return fences


def _fence(text: str, opener: re.Match[str], body_end: int, close_end: int) -> _Fence:
    return _Fence(
        opener=opener.group(0).strip(),
        marker=opener.group(1),
        body_start=min(opener.end() + 1, len(text)),
        body_end=max(body_end, min(opener.end() + 1, len(text))),
        close_end=close_end,
        open_start=opener.start(),
    )


def _inside(fences: list[_Fence], pos: int) -> _Fence | None:
    """The fence whose body `pos` lies in (after its opening line, up to
    the start of its closing line)."""
    for fence in fences:
        if fence.body_start <= pos <= fence.body_end and pos < fence.close_end:
            return fence
    return None
