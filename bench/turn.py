"""Turn overhead: handle() entry to the reply handed to the sender.

A fake model answers instantly, so what is measured is kept's own path:
session upsert, user message + FTS row, history read, reply + FTS row, send,
platform id recorded. 2,000 turns across 100 sessions on a file database.

    .venv/bin/python bench/turn.py [--turns 2000] [--sessions 100] [--limits on|off]

`--limits on|off` meters every call in the database (its usage recorded),
with the example config's rate and token cap, or with none: the cost of
the limits themselves is the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.report import print_metrics
from core.clock import SystemClock
from core.config.model import KeptConfig
from core.conversation.manager import ConversationManager
from core.limits import Admissions, Meter
from core.llm import Completion
from core.messages import Inbound, Outbound, SendResult, Target
from core.store.backends import open_backend


class InstantModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion(
            text="Noted: " + messages[-1]["content"], tool_calls=[], finish_reason="stop", model="x"
        )


class StampingSender:
    def __init__(self) -> None:
        self.stamp = 0.0
        self.count = 0

    async def send(self, outbound: Outbound) -> SendResult:
        self.stamp = time.perf_counter()
        self.count += 1
        return SendResult(message_id=str(self.count))


# `--limits on`: the example config's rates and per-user token cap.
LIMITS_ON = {"perUser": {"messagesPerMinute": 20, "tokensPerDay": 200_000}}
LIMITS_OFF = {
    "perUser": {"messagesPerMinute": None, "tokensPerDay": None},
    "perChat": {"messagesPerMinute": None},
}


async def run(turns: int, sessions: int, db: Path, limits: str | None) -> dict[str, Any]:
    backend = open_backend(f"sqlite:///{db}")
    store = backend.store
    await store.open()
    sender = StampingSender()
    config = KeptConfig()
    if limits is not None:
        config = KeptConfig.model_validate({"limits": LIMITS_ON if limits == "on" else LIMITS_OFF})
    clock = SystemClock()
    model = InstantModel()
    metering: dict[str, Any] = {}
    if limits is not None:  # every call counted in the database, both ways
        metering["meter"] = Meter(
            model, config=lambda: config, clock=clock, budgets=backend.budgets
        )
        metering["admissions"] = Admissions(lambda: config)
    manager = ConversationManager(
        store=store, llm=model, sender=sender, config=lambda: config, clock=clock, **metering
    )
    cpu_started = time.process_time()
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(turns):
        inbound = Inbound(
            agent_id="main",
            target=Target("telegram", str(i % sessions)),
            chat_kind="private",
            sender_id=str(i % sessions),
            text=f"message {i}: my interview is tomorrow at the café on rue Saint-Denis",
            ts=clock.now(),
            platform_message_id=str(i),
        )
        t0 = time.perf_counter()
        await manager.handle(inbound)
        latencies.append((sender.stamp - t0) * 1000)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await store.close()
    latencies.sort()
    writes = turns * 2  # user message and reply, each with its FTS row, one transaction each
    return {
        "bench": "turn",
        "limits": limits,
        "turns": turns,
        "sessions": sessions,
        "median_ms": round(statistics.median(latencies), 3),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 3),
        "max_ms": round(latencies[-1], 3),
        "turns_per_s": round(turns / elapsed, 1),
        "cpu_ms_per_turn": round(cpu / turns * 1000, 3),
        "store_writes_per_s": round(writes / elapsed, 1),
        "target_median_ms": 5.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument(
        "--limits",
        choices=("on", "off"),
        help="meter every call in the database, with the example's limits or none "
        "(default: neither, the bare path)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite"
        result = asyncio.run(run(args.turns, args.sessions, db, args.limits))
    print_metrics("kept turn overhead (fake model, file database)", result)


if __name__ == "__main__":
    main()
