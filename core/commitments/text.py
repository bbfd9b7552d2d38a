"""Text as the rules compare it: lower case, no accents, one spacing."""

from __future__ import annotations

import re
import unicodedata

_STRIP_PUNCT = re.compile(r"[\u2019'`´\-_]+")
_SPACES = re.compile(r"\s+")


def fold(text: str) -> str:
    """Lower case, accents removed, hyphens and apostrophes as spaces.

    "Rappelle-moi", "RECUÉRDAME" and "Erinnere   mich" become "rappelle moi",
    "recuerdame", "erinnere mich". Turkish dotless ı has no decomposition and
    is matched as [ıi] in the patterns.
    """
    if not text.isascii():  # ASCII has no accents to remove: skip the slow part
        text = _strip_marks(text)
    return _SPACES.sub(" ", _STRIP_PUNCT.sub(" ", text.casefold())).strip()


def _strippable(base: str) -> bool:
    """Marks on Latin, Greek, Cyrillic and Arabic letters are accents or
    vowel signs a writer may leave out; Thai vowels and tone marks, and the
    voicing marks of Japanese kana, are part of the word and stay."""
    code = ord(base)
    return code < 0x0250 or 0x0370 <= code < 0x0530 or 0x0600 <= code < 0x0700


def _strip_marks(text: str) -> str:
    kept: list[str] = []
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch) and kept and _strippable(kept[-1]):
            continue
        kept.append(ch)
    return unicodedata.normalize("NFC", "".join(kept))
