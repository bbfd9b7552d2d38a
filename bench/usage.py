"""The accounting's cost per model call: the meter around an instant model.

Three ways, per backend: `metrics` (no store: the tokens counted in the
metrics only), `record` (each call's usage stored and added to its user's
and the bot's day: what every call pays), `capped` (also a hold taken
before the call, as with `limits.perUser.tokensPerDay` set). The cost per
call is the wall time of `--calls` calls in a row, over the model's own.

    .venv/bin/python bench/usage.py [--calls 2000] [--backends sqlite,postgres] [--url ...]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics
from bench.scale import fresh_postgres
from core.clock import SystemClock
from core.config.model import KeptConfig
from core.limits import Meter, Payer
from core.llm import Completion, Usage
from core.store.backends import open_backend

PROMPT = [
    {"role": "system", "content": "You are a helpful assistant. " * 20},
    {"role": "user", "content": "What is on my list for tomorrow? " * 5},
]


class InstantModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion("Noted.", [], "stop", "m", usage=Usage(180, 12))


async def _per_call(meter: Meter, calls: int, users: int) -> float:
    payers = [Payer("main", "telegram", f"u{n}", f"u{n}") for n in range(users)]
    for payer in payers[:10]:  # warm the connection and the statement cache
        await meter.complete(payer, "chat", PROMPT)
    started = time.perf_counter()
    for n in range(calls):
        await meter.complete(payers[n % users], "chat", PROMPT)
    return (time.perf_counter() - started) / calls * 1e6


async def _run(url: str, args: argparse.Namespace) -> dict[str, float]:
    backend = open_backend(url)
    await backend.open()
    try:
        clock, model = SystemClock(), InstantModel()
        plain = KeptConfig()
        capped = KeptConfig.model_validate({"limits": {"perUser": {"tokensPerDay": 10**12}}})
        ways = {
            "metrics": Meter(model, config=lambda: plain, clock=clock),
            "record": Meter(model, config=lambda: plain, clock=clock, budgets=backend.budgets),
            "capped": Meter(model, config=lambda: capped, clock=clock, budgets=backend.budgets),
        }
        found = {}
        for name, meter in ways.items():
            found[f"{name}_us_per_call"] = round(await _per_call(meter, args.calls, args.users), 1)
        found["record_cost_us"] = round(
            found["record_us_per_call"] - found["metrics_us_per_call"], 1
        )
        found["capped_cost_us"] = round(
            found["capped_us_per_call"] - found["metrics_us_per_call"], 1
        )
        return found
    finally:
        await backend.close()


async def main_async(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {"bench": "usage", "calls": args.calls, "users": args.users}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for backend in args.backends.split(","):
            if backend == "sqlite":
                result["sqlite"] = await _run(f"sqlite:///{tmp}/usage.sqlite", args)
            else:
                url, server = fresh_postgres(args.url, tmp, 1)
                try:
                    result["postgres"] = await _run(url, args)
                finally:
                    if server is not None:
                        server.cleanup()
    print_metrics("The accounting's cost per model call (an instant model)", result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--url", help="a PostgreSQL server to create the bench database on")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
