from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.search.normalize import normalize
from core.search.snippet import ELLIPSIS, _find_hit, _fold, make_snippet

FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod. " * 8


def _core(snippet: str) -> str:
    return snippet.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS)


def test_short_text_is_returned_whole() -> None:
    assert make_snippet("Rendez-vous à l'École", ["ecole"]) == "Rendez-vous à l'École"
    assert make_snippet("x" * 300, ["y"]) == "x" * 300


@pytest.mark.parametrize(
    ("word", "query"),
    [
        ("École", "ecole"),  # Latin diacritics, as the tokenizer folds them
        ("E\u0301cole", "école"),  # decomposed accent
        ("İstanbul'da", "istanbul"),  # Turkish dotted capital I
        ("ISPARTA", "ısparta"),  # Turkish dotless i in the query
        ("می\u200cخواهم", "میخواهم"),  # Persian with ZWNJ, queried without
        ("كَتَبَ", "كتب"),  # Arabic harakat
        ("كـــتب", "كتب"),  # tatweel
        ("Straße", "strasse"),
        ("ＦＵＬＬ", "full"),  # fullwidth, NFKC
    ],
)
def test_hit_is_found_in_the_original_text(word: str, query: str) -> None:
    text = f"{FILLER}Here: {word} is the word. {FILLER}"
    snippet = make_snippet(text, [normalize(query)])
    assert word in snippet
    assert len(snippet) <= 300
    assert snippet.startswith(ELLIPSIS) and snippet.endswith(ELLIPSIS)


def test_chinese_term_inside_an_unspaced_run() -> None:
    text = (
        "我们明天下午三点开会讨论预算问题。" * 20
        + "关于会议的安排请大家准时参加。"
        + "其他内容" * 80
    )
    snippet = make_snippet(text, ["会议"], max_chars=60)
    assert "会议" in snippet and len(snippet) <= 60
    # Without spaces, the window starts after the sentence's full stop.
    assert snippet.startswith(ELLIPSIS + "关于会议")


def test_thai_and_japanese() -> None:
    thai = "สวัสดีครับ" * 40 + "ประชุมพรุ่งนี้ตอนบ่ายสามโมง" + "ขอบคุณ" * 40
    assert "ประชุม" in make_snippet(thai, ["ประชุม"], 80)
    japanese = "今日は晴れです。" * 40 + "東京都で会議があります。" + "ありがとう。" * 40
    assert "東京都" in make_snippet(japanese, ["東京都"], 80)


def test_earliest_of_several_terms_wins() -> None:
    text = FILLER + "beta comes first, then alpha. " + FILLER + "alpha again"
    snippet = make_snippet(text, ["alpha", "beta"], 100)
    assert "beta comes first" in snippet


def test_window_starts_at_a_word_a_little_before_the_hit() -> None:
    text = FILLER + "The quarterly budget meeting moved to Friday. " + FILLER
    snippet = make_snippet(text, ["budget"], 120)
    core = _core(snippet)
    start = text.index(core)
    assert text[start - 1].isspace()  # a whole word first
    assert 0 < core.index("budget") <= 120 // 5 + 1  # some context before the hit


def test_no_hit_gives_the_beginning() -> None:
    snippet = make_snippet(FILLER, ["zebra"], 100)
    assert snippet.endswith(ELLIPSIS) and not snippet.startswith(ELLIPSIS)
    assert FILLER.startswith(_core(snippet)) and len(snippet) <= 100


def test_hit_near_the_end_shows_the_tail() -> None:
    text = FILLER + "and finally the zebra"
    snippet = make_snippet(text, ["zebra"], 100)
    assert snippet.startswith(ELLIPSIS) and snippet.endswith("zebra")
    assert len(snippet) >= 90  # the spare room goes to context before the hit


def test_phrase_and_prefix_terms() -> None:
    text = FILLER + "good\n  morning everyone, the meetup starts now. " + FILLER
    assert "good\n  morning" in make_snippet(text, ["good morning"], 80)
    assert "meetup" in make_snippet(text, ["meet*"], 80)
    assert "everyone" in make_snippet(text, ["nothing like this", "everyone"], 80)


@pytest.mark.parametrize(
    "cluster",
    [
        "👩\u200d👩\u200d👧\u200d👦",  # ZWJ family
        "🇫🇷🇮🇷",  # flags: regional indicator pairs
        "e\u0301\u0301\u0301",  # stacked marks
        "👍🏽",  # skin tone modifier
        "\u1100\u1161\u11a8",  # Hangul syllable as conjoining jamo
    ],
)
def test_cuts_never_split_a_grapheme(cluster: str) -> None:
    text = cluster * 200
    # From 10 characters on, a window holds at least one whole cluster.
    for max_chars in range(10, 40):
        core = _core(make_snippet(text, ["zzz"], max_chars))
        assert len(make_snippet(text, ["zzz"], max_chars)) <= max_chars
        assert core and text.startswith(core)
        # The cut is at a cluster boundary: the next original char starts one.
        nxt = text[len(core)]
        assert nxt == cluster[0] or (cluster == "🇫🇷🇮🇷" and nxt == "🇮")
    # Cut at the start too: the hit sits deep inside the run.
    deep = text + "needle" + text
    core = _core(make_snippet(deep, ["needle"], 30))
    assert deep[deep.index(core) - 1] in (cluster[-1], "🇷")


@pytest.mark.parametrize("max_chars", [1, 2, 3, 5, 10, 300])
def test_tiny_limits(max_chars: int) -> None:
    snippet = make_snippet(FILLER, ["dolor"], max_chars)
    assert 0 < len(snippet) <= max_chars


_WORD = st.text(alphabet="abcéÉİıßöxyz会议ไทย\u200c\u0301 ", min_size=1, max_size=12)


@given(st.text(max_size=700), st.lists(st.text(max_size=6), max_size=4), st.integers(2, 400))
def test_never_longer_than_the_limit(text: str, terms: list[str], max_chars: int) -> None:
    snippet = make_snippet(text, [normalize(t) for t in terms], max_chars)
    assert len(snippet) <= max_chars
    if len(text) <= max_chars:
        assert snippet == text
    else:
        assert _core(snippet) in text


@given(st.lists(_WORD, min_size=30, max_size=80), st.data())
def test_a_word_of_the_text_is_shown(words: list[str], data: st.DataObject) -> None:
    text = " ".join(words)
    # A drawn "word" with a space inside is two words of the text (the
    # alphabet has spaces); a search never looks for a term holding one.
    single = [w for w in words if normalize(w).strip() and " " not in w.strip()]
    word = data.draw(st.sampled_from(single or ["a"]))
    term = normalize(word).strip()
    if not term or word.strip() not in text:
        return
    snippet = make_snippet(text, [term], 120)
    assert len(snippet) <= 120
    if len(text) > 120 and len(word) < 60:
        folded = unicodedata.normalize("NFD", normalize(_core(snippet)))
        wanted = unicodedata.normalize("NFD", term)
        strip = dict.fromkeys(range(0x300, 0x370))
        assert wanted.translate(strip) in folded.translate(strip)


def test_a_term_at_the_end_of_long_non_ascii_text_is_shown() -> None:
    # What this costs a call is measured by bench/text.py.
    mixed = "Salut ! réunion passée. می\u200cخواهم فردا بروم. 会议在明天下午三点。İstanbul'da. "
    text = (mixed * 20)[:1000] + " 预算"
    snippet = make_snippet(text, ["预算"])
    assert len(snippet) <= 300 and snippet.endswith("预算")


def test_surrogate_pairs_stay_whole() -> None:
    # Text that went through a UTF-16 boundary badly can hold pairs as two
    # code points; a cut between them would produce unencodable halves.
    text = "ab\ud83d\ude00cd" * 100
    for max_chars in range(10, 30):
        snippet = _core(make_snippet(text, ["cd"], max_chars))
        assert "cd" in snippet  # a cut was made, around the term
        assert not snippet.endswith(tuple(map(chr, range(0xD800, 0xDC00))))
        assert not snippet.startswith(tuple(map(chr, range(0xDC00, 0xE000))))


_TEXT = st.text(alphabet="abcÉéeİıiß s\u200c\u0301كَتب会议ไทย👩\u200d🇫", max_size=600)


@given(_TEXT, st.data())
def test_hit_maps_back_to_the_matching_original(text: str, data: st.DataObject) -> None:
    # Any slice of the text, folded, is found, and the original span reported
    # folds to something that contains it.
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 8)))
    needle = _fold(normalize(text[i:j])).strip()
    if not needle:
        return
    hit = _find_hit(text, [needle])
    assert hit is not None
    start, end = hit
    assert start <= i or _fold(text[:start]).find(needle) == -1
    assert needle in _fold(text[start:end])
