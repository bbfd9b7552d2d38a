"""Splitting a long reply (channels/split.py): paragraph, then line, then
word; widths in characters or UTF-16 units; Markdown code fences closed at a
cut and reopened with their language."""

from __future__ import annotations

import re

from channels.split import split_markdown, split_plain, split_ranges, utf16_width


def test_paragraph_before_line_before_word() -> None:
    text = "aaaa bbbb\ncccc dddd\n\neeee ffff gggg"
    assert split_plain(text, 22) == ["aaaa bbbb\ncccc dddd", "eeee ffff gggg"]
    assert split_plain("aaaa bbbb\ncccc dddd eeee", 15) == ["aaaa bbbb", "cccc dddd eeee"]
    assert split_plain("aaaa bbbb cccc dddd", 12) == ["aaaa bbbb", "cccc dddd"]


def test_widths_in_utf16_units() -> None:
    text = "😀" * 6 + " " + "😀" * 6  # 13 characters, 26 UTF-16 units
    assert split_plain(text, 20) == [text]
    assert split_plain(text, 20, utf16_width) == ["😀" * 6, "😀" * 6]
    assert split_ranges(text, 20, utf16_width) == [(0, 6), (7, 13)]


def test_a_cut_inside_a_word_never_separates_a_combining_mark() -> None:
    thai = "ที่นี่" * 20  # base letters with combining vowels and tone marks
    for chunk in split_plain(thai, 7):
        assert not re.match(r"[\u0e31\u0e34-\u0e3a\u0e47-\u0e4e]", chunk)
    assert "".join(split_plain(thai, 7)) == thai


def _fences_balanced(chunk: str) -> bool:
    return len(re.findall(r"^```", chunk, re.MULTILINE)) % 2 == 0


def test_a_code_block_cut_in_two_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(120))
    markdown = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it twice."
    chunks = split_markdown(markdown, 2000)

    assert len(chunks) >= 3
    assert all(len(c) <= 2000 for c in chunks)
    assert all(_fences_balanced(c) for c in chunks)
    assert chunks[0].startswith("Here is the script:\n\n```python\n")
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n    value_")  # the indentation is the code's
        assert chunk.endswith("\n```")
    assert chunks[-1].endswith("```\n\nRun it twice.") or chunks[-1] == "Run it twice."
    # Nothing lost, nothing doubled: the code lines in order.
    lines = [ln for c in chunks for ln in c.splitlines() if ln.startswith("    value_")]
    assert lines == code.splitlines()


def test_a_cut_right_after_an_opening_fence_moves_the_fence_along() -> None:
    markdown = "x" * 40 + "\n\n```sh\n" + "echo one\n" * 10 + "```"
    chunks = split_markdown(markdown, 60)
    assert chunks[0] == "x" * 40  # not "xxx\n\n```sh\n```", an empty block
    assert all(len(c) <= 60 and _fences_balanced(c) for c in chunks)
    assert all(c.startswith("```sh\n") for c in chunks[1:])


def test_markdown_without_fences_splits_like_plain_text() -> None:
    text = "**Bold** start. " + "word " * 600
    assert split_markdown(text, 2000) == split_plain(text, 2000)


def test_tilde_fences_and_long_backtick_fences_are_reopened_too() -> None:
    body = "\n".join(f"line {i} of the block" for i in range(40))
    for opener, closer in (("~~~text", "~~~"), ("````md", "````")):
        chunks = split_markdown(f"{opener}\n{body}\n{closer}", 300)
        assert len(chunks) > 1
        assert all(c.startswith(opener + "\n") and c.endswith("\n" + closer) for c in chunks)
        assert all(len(c) <= 300 for c in chunks)
