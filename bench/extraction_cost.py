"""What extraction costs under a burst: model calls and prompt tokens per exchange.

A burst of chat turns (by default 900 messages from 100 sessions, nine each,
arriving at 100 a second) goes through the real ConversationManager and the
real ExtractionWorker (its default batch window, queue and concurrency) on a
file database. The messages and replies are the labelled extraction set's
(tests/data/extraction), cycled. The extraction model is a fake that takes
`--model-ms` per call, so a queue builds up as it would behind a real one,
and answers with no follow-up. Reported per run: model calls, exchanges per
call, estimated prompt tokens (a quarter of the prompt's characters), with
the pre-filter off and on.

    .venv/bin/python bench/extraction_cost.py [--messages 900] [--sessions 100] [--rate 100]
                                              [--model-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from core.clock import SystemClock
from core.commitments.extraction import ExtractionWorker
from core.config.model import CommitmentsConfig, KeptConfig
from core.conversation.manager import ConversationManager
from core.evaluation.cases import load_cases
from core.llm import Completion
from core.messages import Inbound, Outbound, SendResult, Target
from core.store.backends import open_backend

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "extraction"
NOTHING = '{"candidates": [], "resolved": []}'


def _completion(text: str) -> Completion:
    return Completion(text=text, tool_calls=[], finish_reason="stop", model="fake")


class SlowExtraction:
    """Chat: the set's reply to the message, at once. Extraction: nothing,
    after `delay` seconds; counts calls, exchanges and prompt characters."""

    def __init__(self, replies: dict[str, str], delay: float) -> None:
        self._replies = replies
        self._delay = delay
        self.calls = 0
        self.exchanges = 0
        self.prompt_chars = 0

    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        if role != "extraction":
            text = str(messages[-1]["content"])
            return _completion(self._replies.get(text, "I see."))
        self.calls += 1
        self.exchanges += len(json.loads(messages[-1]["content"])["exchanges"])
        self.prompt_chars += sum(len(str(m["content"])) for m in messages)
        await asyncio.sleep(self._delay)
        return _completion(NOTHING)


class NullSender:
    async def send(self, outbound: Outbound) -> SendResult:
        return SendResult(message_id="1")


async def burst(
    db: Path, pairs: list[tuple[str, str]], *, prefilter: bool, args: argparse.Namespace
) -> dict[str, Any]:
    backend = open_backend(f"sqlite:///{db}")
    await backend.open()
    model = SlowExtraction(dict(pairs), args.model_ms / 1000)
    config = KeptConfig(commitments=CommitmentsConfig(enabled=True, prefilter=prefilter))
    clock = SystemClock()
    worker = ExtractionWorker(
        store=backend.commitments,
        jobs=backend.extraction_jobs,
        pauses=backend.extraction_pauses,
        llm=model,
        config=lambda: config,
        clock=clock,
        worker="bench",
    )
    manager = ConversationManager(
        store=backend.store,
        llm=model,
        sender=NullSender(),
        config=lambda: config,
        clock=clock,
        reply_hooks=[worker.on_reply],
    )
    worker.start()
    per_session = args.messages // args.sessions
    gap = args.sessions / args.rate  # each session speaks once per gap

    async def session(n: int) -> None:
        await asyncio.sleep(gap * n / args.sessions)  # spread the sessions over one gap
        for k in range(per_session):
            user, _ = pairs[(n * per_session + k) % len(pairs)]
            inbound = Inbound(
                agent_id="main",
                target=Target("telegram", str(n)),
                chat_kind="private",
                sender_id=str(n),
                text=user,
                ts=clock.now(),
                platform_message_id=f"{n}-{k}",
            )
            await manager.handle(inbound)
            await asyncio.sleep(gap)

    started = time.perf_counter()
    await asyncio.gather(*(session(n) for n in range(args.sessions)))
    await manager.drain()
    high_water = worker.high_water
    await worker.wait_idle()
    elapsed = time.perf_counter() - started
    await worker.stop()
    await backend.store.close()
    sent = args.sessions * per_session
    return {
        "exchanges": sent,
        "calls": model.calls,
        "calls_per_100_exchanges": round(model.calls / sent * 100, 1),
        "exchanges_per_call": round(model.exchanges / model.calls, 2) if model.calls else None,
        "est_prompt_tokens_per_exchange": round(model.prompt_chars / 4 / sent, 1),
        "queue_high_water": high_water,
        "seconds": round(elapsed, 1),
    }


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    cases = load_cases(SET)
    # Each case's last exchange: the new message and the reply it got.
    pairs = [(c.exchanges[-1].user, c.exchanges[-1].assistant) for c in cases]
    off = await burst(tmp / "off.sqlite", pairs, prefilter=False, args=args)
    on = await burst(tmp / "on.sqlite", pairs, prefilter=True, args=args)
    result: dict[str, Any] = {
        "bench": "extraction_cost",
        "messages": off["exchanges"],
        "sessions": args.sessions,
        "rate_per_s": args.rate,
        "model_ms": args.model_ms,
        "set_cases": len(cases),
    }
    for name, side in (("prefilter_off", off), ("prefilter_on", on)):
        for key, value in side.items():
            result[f"{name}.{key}"] = value
    result["calls_saved_by_prefilter_pct"] = round((1 - on["calls"] / off["calls"]) * 100, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=900)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second")
    parser.add_argument("--model-ms", type=float, default=100.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    print_metrics("kept extraction cost under a burst (slow fake model, file database)", result)


if __name__ == "__main__":
    main()
