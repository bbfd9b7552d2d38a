"""What extraction costs: a session's exchanges share calls however busy the
bot is, and exchanges without a cue never reach the model (the pre-filter).
On the harness of test_extraction (real manager, store and LLMClient against
the fake OpenAI server, a test clock)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.commitments.batch import per_call
from core.commitments.exchange import Exchange
from core.commitments.extraction_queue import AgentExtractionQueue
from core.commitments.jobs import ExtractionJob
from core.commitments.model import Scope
from core.config.model import CommitmentsConfig
from tests.core.commitments.test_extraction import answer, make_harness
from tests.fakes.openai_server import reply

__all__ = ["make_harness"]  # the fixture, shared with the other module

NEUTRAL = "Noted."  # a reply without any cue of its own


def exchanges_sent(h: Any) -> list[list[str]]:
    """The user texts of each extraction call, in order."""
    return [
        [e["user"] for e in json.loads(r.last_user_text or "")["exchanges"]]
        for r in h.extraction_requests()
    ]


def neutral_replies(h: Any) -> None:
    def respond(body: Any) -> Any:
        if body.get("model") != "extract-model":
            return reply(NEUTRAL)
        return answer()

    h.fake.set_default(respond)


# --- a session's window ----------------------------------------------------------


async def test_a_session_speaking_again_moves_its_window(make_harness) -> None:
    h = await make_harness(batch_seconds=2.0)
    texts = ["my exam is tomorrow", "and the oral on friday", "wish me luck"]
    for text in texts:  # at t = 0, 1.5 and 3: never two seconds of quiet
        await h.say(text, settle=False)
        await h.manager.drain()
        await h.clock.advance(1.5)
    await h.clock.advance(0.5)  # t = 5: quiet for two seconds since the last
    await h.settle()
    assert exchanges_sent(h) == [texts]


async def test_a_session_that_never_pauses_is_extracted_after_the_longest_wait(
    make_harness,
) -> None:
    h = await make_harness(batch_seconds=2.0, longest_wait_seconds=6.0)
    for n in range(5):
        await h.say(f"exam {n} tomorrow", settle=False)
        await h.manager.drain()
        await h.clock.advance(1.5)  # t = 1.5, 3, 4.5, 6, 7.5
    # The oldest has waited six seconds at t = 6: the four waiting then went.
    await h.fake.wait_for_completions(5 + 1, within=5)  # five chat turns, one extraction
    assert exchanges_sent(h) == [[f"exam {n} tomorrow" for n in range(4)]]
    await h.clock.advance(2)
    await h.settle()
    assert exchanges_sent(h)[1:] == [["exam 4 tomorrow"]]


async def test_a_backed_up_queue_does_not_wait_for_quiet(make_harness) -> None:
    h = await make_harness(batch_seconds=60.0, max_batch=3)
    for n in range(3):
        await h.say(f"exam {n} tomorrow", settle=False)
    await h.settle()  # no clock advance: three waiting filled the queue
    assert exchanges_sent(h) == [[f"exam {n} tomorrow" for n in range(3)]]


# --- the pre-filter ------------------------------------------------------------


async def test_exchanges_without_a_cue_never_reach_the_model(make_harness) -> None:
    h = await make_harness(batch_seconds=2.0)
    neutral_replies(h)
    for text in ("thanks!", "my exam is tomorrow", "what is the capital of Peru?"):
        await h.say(text, settle=False)
    await h.say("lol", chat="7", settle=False)  # a whole session with nothing
    await h.manager.drain()
    await h.clock.advance(2)
    await h.settle()
    assert exchanges_sent(h) == [["my exam is tomorrow"]]
    assert h.worker._batches.skipped == 3


async def test_with_the_pre_filter_off_every_exchange_is_sent(make_harness) -> None:
    h = await make_harness(batch_seconds=2.0)
    neutral_replies(h)
    h.config[0] = h.config[0].model_copy(
        update={"commitments": CommitmentsConfig(enabled=True, prefilter=False)}
    )
    for text in ("thanks!", "my exam is tomorrow"):
        await h.say(text, settle=False)
    await h.manager.drain()
    await h.clock.advance(2)
    await h.settle()
    assert exchanges_sent(h) == [["thanks!", "my exam is tomorrow"]]


async def test_a_scope_with_a_pending_follow_up_sends_everything(make_harness) -> None:
    # "it went fine" has no cue, but it may close the pending follow-up.
    h = await make_harness(batch_seconds=0)
    h.extraction.append(answer({**_interview()}))
    await h.say("job interview tomorrow at 10")
    assert len(await h.stored()) == 1
    neutral_replies(h)
    await h.say("it went fine")
    assert exchanges_sent(h)[-1] == ["it went fine"]


def _interview() -> dict[str, Any]:
    from tests.core.commitments.test_extraction import interview

    return interview()


# --- the pieces ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("waiting", "sizes"),
    [(0, []), (1, [1]), (4, [4]), (5, [5]), (8, [8]), (9, [5, 4]), (17, [6, 6, 5])],
)
def test_a_backlog_goes_in_fewer_fuller_calls(waiting: int, sizes: list[int]) -> None:
    exchanges = [Exchange(n, f"u{n}", f"a{n}") for n in range(waiting)]
    calls = per_call(exchanges, 4, 8)
    assert [len(c) for c in calls] == sizes
    assert [e for c in calls for e in c] == exchanges  # all of them, in order


T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _job(n: int, chat: str) -> ExtractionJob:
    scope = Scope(
        "main", f"agent:main:telegram:private:{chat}", "telegram", chat, None, chat,
        chat_kind="private",
    )  # fmt: skip
    return ExtractionJob(n, scope, Exchange(n, f"m{n}", "ok"))


def test_a_queue_takes_whole_sessions_the_longest_waiting_first() -> None:
    queue = AgentExtractionQueue()
    order = ["a", "b", "a", "c", "b", "a"]
    for n, chat in enumerate(order):
        queue.add(_job(n, chat), T0 + timedelta(seconds=n))

    def take(at: float, *, limit: int = 10, sessions: int = 10, every: bool = False) -> list[int]:
        when = T0 + timedelta(seconds=at)
        quiet, longest = timedelta(seconds=2), timedelta(seconds=60)
        jobs = queue.take(
            when, quiet=quiet, longest=longest, limit=limit, sessions=sessions, every=every
        )
        return [j.id for j in jobs]

    # At t = 6.5, "b" (last spoke at 4) and "c" (at 3) have been quiet for two
    # seconds, "a" (at 5) not yet; "b" has waited longest (since 1).
    assert take(6.5) == [1, 4, 3]
    assert [j.id for j in queue.items] == [0, 2, 5]
    assert queue.next_ready(timedelta(seconds=2), timedelta(seconds=60)) == T0 + timedelta(
        seconds=7
    )
    # Backed up: everyone counts as ready; the limit cuts the last session taken.
    queue.add(_job(6, "d"), T0 + timedelta(seconds=7))
    queue.add(_job(7, "e"), T0 + timedelta(seconds=7))
    assert take(7, limit=2, every=True) == [0, 2]
    assert [j.id for j in queue.items] == [5, 6, 7]
    # At most `sessions` sessions a batch: "e" waits for the next one.
    assert take(7, sessions=2, every=True) == [5, 6]
    assert take(7, every=True) == [7]
    assert queue.items == [] and not queue.wake.is_set()
