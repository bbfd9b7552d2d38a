"""Arbitrary Unicode through the store and its search index, on each backend
(`storage_url`): lone surrogates, NUL, combining-mark storms, a 1 MB text.
Each text is stored and found again by a word in it, or refused with an
error of the deterministic class (core/store/errors.py), never one that
would hold the update for a retry. A transcript row is built through
NewMessage, so it is made storable (core.messages.storable) first; an edit
given straight to the store is not, and shows the refusal is deterministic."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.messages import storable
from core.store import NewMessage, SearchScope, Store
from core.store.errors import refused_value, store_error_class
from tests.core.store.test_contract import KEY, REDACTOR, T0, add_session
from tests.support.store_helpers import open_any_store

NASTY = ["\ud800", "\udfff", "\udbff\udc00", "\x00", "\u0301", "\u200d", "\ufeff", "\U0001f600"]
piece = st.one_of(
    st.characters(codec=None, categories=None),  # every code point, surrogates included
    st.sampled_from(NASTY),
    st.text(max_size=4),
)
small = st.lists(piece, max_size=30).map("".join)
storm = st.builds(lambda base, n: base + "\u0301\u0308\u20dd" * n, small, st.integers(1, 3000))
large = st.builds(lambda chunk, n: chunk * n, small.filter(bool), st.integers(100, 2000))
texts = st.one_of(small, storm, large)
MEGABYTE = ("ab\ud800 c\x00d e\u0301\u0301 " * 80_000)[:1_000_000]
_words = itertools.count()


def marker() -> str:
    """A word found in no other message: letters only, so every tokenizer sees one word."""
    n = next(_words)
    return "zq" + "".join("abcdefghij"[int(d)] for d in str(n)) + "xv"


def outcome(loop: asyncio.AbstractEventLoop, work: object) -> BaseException | None:
    try:
        loop.run_until_complete(work)  # type: ignore[arg-type]
    except Exception as exc:
        return exc
    return None


def test_any_text_is_stored_and_found_or_refused_for_good(storage_url: str) -> None:
    # Hypothesis cannot drive an async test, so this one owns its event loop.
    loop = asyncio.new_event_loop()
    store: Store = open_any_store(storage_url)
    pid = itertools.count(1)
    try:
        loop.run_until_complete(store.open())
        loop.run_until_complete(add_session(store, KEY))

        async def found(word: str) -> list[int]:
            hits = await store.search(
                word, scope=SearchScope(session_key=KEY), limit=5, redactor=REDACTOR
            )
            return [h.message_id for h in hits]

        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(before=texts, after=texts)
        @example(before=MEGABYTE, after="")
        @example(before="\x00" * 1000, after="\ud800" * 1000)
        @example(before="a" + "\u0301" * 50_000, after="\udc00\ud800")
        def check(before: str, after: str) -> None:
            word = marker()
            text = f"{before} {word} {after}"
            platform_id = str(next(pid))
            message = NewMessage(KEY, "user", text, T0, platform_message_id=platform_id)
            assert message.text == storable(text)
            stored: list[int] = []

            async def add() -> None:
                stored.append((await store.add_message(message)).id)

            failure = outcome(loop, add())
            if failure is not None:
                assert store_error_class(failure) == "deterministic", repr(failure)[:300]
                return
            record = loop.run_until_complete(store.get_message(stored[0]))
            assert record is not None and record.text == storable(text)
            assert stored[0] in loop.run_until_complete(found(word))

            # The raw text, never made storable, straight to the store.
            edited = marker()
            raw = f"{after} {edited} {before}"
            failure = outcome(
                loop,
                store.edit_message(
                    platform="telegram", chat_id="100", platform_message_id=platform_id, text=raw
                ),
            )
            if failure is not None:
                assert refused_value(failure), repr(failure)[:300]
                assert stored[0] in loop.run_until_complete(found(word))  # unchanged
            else:
                assert stored[0] in loop.run_until_complete(found(edited))

        check()
    finally:
        loop.run_until_complete(store.close())
        loop.close()
