from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.search import normalize as module
from core.search.normalize import normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("İstanbul", "istanbul"),
        ("ISTANBUL", "istanbul"),
        ("ıstanbul", "istanbul"),
        ("I\u0307stanbul", "istanbul"),  # decomposed dotted capital I
        ("DİYARBAKIR", "diyarbakir"),
        ("می\u200cخواهم", "میخواهم"),  # ZWNJ
        ("👩\u200d💻", "👩💻"),  # ZWJ
        ("a\u200bb\ufeffc\u2060d\u00ade", "abcde"),
        ("كَتَبَ", "\u06a9تب"),  # harakat; Arabic kaf folds to keheh
        ("كـــتب", "\u06a9تب"),  # tatweel
        ("علي", "عل\u06cc"),  # Arabic yeh → Farsi yeh
        ("على", "عل\u06cc"),  # alef maksura → Farsi yeh
        ("أحمد إسلام آب ٱلله", "احمد اسلام اب الله"),  # hamza/madda/wasla on alef
        ("ا\u0653ب", "اب"),  # decomposed madda
        ("۱۴۰۳ ٣", "1403 3"),  # Persian and Arabic-Indic digits
        ("مُحَمَّدٌ", "محمد"),  # shadda, tanween
        ("هٰذا", "هذا"),  # superscript alef
        ("ｆｕｌｌ ﬁ ①", "full fi 1"),  # NFKC
        ("Straße", "strasse"),
        ("e\u0301cole", "école"),  # composed, so the tokenizer can fold it
        ("Hello\x00World\nAgain\x7f", "hello world again "),
        ("", ""),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_french_accents_are_kept_for_the_tokenizer() -> None:
    # remove_diacritics in the FTS tokenizer folds them; see the store tests.
    assert normalize("ÉCOLE") == "école"


def _reference(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(module._TABLE).casefold()
    return unicodedata.normalize("NFKC", text)


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_ascii_fast_path_matches_full_path(text: str) -> None:
    assert normalize(text) == _reference(text)


@given(st.text())
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once


def test_every_format_character_is_removed() -> None:
    removed = {code for code, repl in module._TABLE.items() if repl is None}
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        if category == "Cf":
            assert code in removed, f"U+{code:04X} is a format character but is kept"
        elif code in removed:
            # Harakat and tatweel are removed on purpose; anything else must be
            # a format character, or unassigned in this Python's Unicode data.
            arabic = code == 0x0640 or 0x064B <= code <= 0x065F or code == 0x0670
            assert arabic or category == "Cn", f"U+{code:04X} ({category}) removed"
