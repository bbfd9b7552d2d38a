"""Soak: memory over many distinct chats, and CPU per turn as a history grows.

Drives the real ConversationManager on a temporary SQLite file with an
injected clock. The CPU per turn is measured through the real LLMClient
(openai SDK) talking over loopback to a canned OpenAI-compatible endpoint in
a child process, so it is kept's and the SDK's, not the endpoint's. The many
chats talk to an in-process model by default (a model client holds no
per-chat state, and loopback HTTP would make 100,000 chats take half an
hour); `--model http` sends them through the SDK too.

A warm-up of `--warmup` chats fills what is bounded (the session cache,
SQLite's page cache up to its cap); then `--chats` more distinct chats say
`--messages` messages each, while a few regulars keep talking so their
histories sit at the prompt's row limit. RSS is read at checkpoints (after
a gc.collect, so a pending cycle collection does not show as growth). Last,
CPU per turn is measured in fresh chats whose histories hold 10, 50 and 200
rows, with the size of the request body sent.

    .venv/bin/python bench/soak.py [--chats 100000] [--warmup 30000] [--model fake|http]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web
from rich.console import Console
from rich.table import Table

from core.clock import TestClock
from core.config.model import KeptConfig, LlmConfig
from core.conversation.manager import ConversationManager
from core.llm import Completion, LLMClient, Model
from core.messages import Inbound, Outbound, SendResult, Target
from core.store import NewMessage, Store
from core.store.backends import open_backend

HISTORY_LENGTHS = (10, 50, 200)
REGULARS = 20  # chats that talk all through the soak, histories at the row limit
BATCH = 50  # chats talking at once
CHECKPOINTS = 10
REPLY = "Noted: I will keep that in mind and ask you how it went."
SAY = "message {n} in chat {chat}: my interview is tomorrow at the café on rue Saint-Denis"


# --- the endpoint (child process) ----------------------------------------------------

_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-soak",
        "object": "chat.completion",
        "created": 0,
        "model": "soak",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": REPLY},
            }
        ],
    }
).encode()


def _serve(conn: Connection) -> None:
    async def chat(request: web.Request) -> web.Response:
        await request.read()  # the whole body, as a real server reads it
        return web.Response(body=_COMPLETION, content_type="application/json")

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        conn.send(sock.getsockname()[1])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
        await runner.cleanup()

    asyncio.run(main())


# --- kept's side -------------------------------------------------------------------------


class FakeModel:
    async def complete(self, role: str, messages: list[dict[str, Any]], **_: Any) -> Completion:
        return Completion(text=REPLY, tool_calls=[], finish_reason="stop", model="soak")


class CountingSender:
    def __init__(self) -> None:
        self.count = 0

    async def send(self, outbound: Outbound) -> SendResult:
        self.count += 1
        return SendResult(message_id=str(self.count))


class SwitchedModel:
    """The model of the current phase; remembers the last prompt (its size is
    read outside the timed turn)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.last: list[dict[str, Any]] = []

    async def complete(self, role: Any, messages: list[dict[str, Any]], **kw: Any) -> Completion:
        self.last = messages
        return await self.model.complete(role, messages, **kw)


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        resident = int(statm.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


class Soak:
    def __init__(self, manager: ConversationManager, clock: TestClock, store: Store) -> None:
        self.manager = manager
        self.clock = clock
        self.store = store
        self.sent = 0

    def inbound(self, chat: str, n: int) -> Inbound:
        self.sent += 1
        return Inbound(
            agent_id="main",
            target=Target("telegram", chat),
            chat_kind="private",
            sender_id=chat,
            text=SAY.format(n=n, chat=chat),
            ts=self.clock.now(),
            platform_message_id=str(self.sent),
        )

    async def chats(self, first: int, count: int, messages: int) -> None:
        """`count` distinct chats, BATCH at a time, `messages` each; a regular
        chat speaks with every batch."""
        for start in range(first, first + count, BATCH):
            batch = [f"c{i}" for i in range(start, min(start + BATCH, first + count))]
            batch.append(f"r{(start // BATCH) % REGULARS}")
            for n in range(messages):
                await asyncio.gather(*(self.manager.handle(self.inbound(c, n)) for c in batch))
                await self.clock.advance(1)

    async def seed(self, chat: str, rows: int) -> None:
        key = f"agent:main:telegram:private:{chat}"
        await self.store.ensure_session(
            key,
            agent_id="main",
            platform="telegram",
            chat_id=chat,
            chat_kind="private",
            thread_id=None,
            now=self.clock.now(),
        )
        for i in range(rows):
            role = "user" if i % 2 == 0 else "assistant"
            text = SAY.format(n=i, chat=chat) if role == "user" else REPLY
            await self.store.add_message(NewMessage(key, role, text, self.clock.now()))  # type: ignore[arg-type]


def gauge(manager: ConversationManager) -> dict[str, int]:
    # `_sessions` was a plain dict before the bounded cache: measurable on older code too.
    sessions = getattr(manager, "sessions", None)
    if sessions is None:
        sessions = manager._sessions
    return {"cached": len(sessions), "locks": len(manager._locks)}


async def run(args: argparse.Namespace, db: Path, base_url: str) -> dict[str, Any]:
    store = open_backend(f"sqlite:///{db}").store
    await store.open()
    clock = TestClock()
    config = KeptConfig()
    llm = LLMClient(LlmConfig(base_url=base_url), environ={}, clock=clock)
    prompts = SwitchedModel(llm if args.model == "http" else FakeModel())
    manager = ConversationManager(
        store=store, llm=prompts, sender=CountingSender(), config=lambda: config, clock=clock
    )
    soak = Soak(manager, clock, store)
    console = Console()
    table = Table(title=f"kept soak ({args.model} model, SQLite file, injected clock)")
    for column in ("phase", "chats done", "RSS MiB", "turns/s", "cached sessions", "locks"):
        table.add_column(column, justify="right")

    def checkpoint(phase: str, done: int, rate: float) -> float:
        gc.collect()
        rss = rss_mib()
        g = gauge(manager)
        row = (
            phase,
            f"{done:,}",
            f"{rss:.1f}",
            f"{rate:,.0f}",
            f"{g['cached']:,}",
            str(g["locks"]),
        )
        table.add_row(*row)
        console.print("  ".join(row), style="dim")
        return rss

    started = time.perf_counter()
    t0, warm = time.perf_counter(), args.warmup
    await soak.chats(0, warm, args.messages)
    baseline = checkpoint("warm-up", warm, warm * args.messages / (time.perf_counter() - t0))
    step = max(BATCH, args.chats // CHECKPOINTS // BATCH * BATCH)
    rss: list[float] = [baseline]
    done = 0
    while done < args.chats:
        count = min(step, args.chats - done)
        t0 = time.perf_counter()
        await soak.chats(warm + done, count, args.messages)
        done += count
        rate = (count * args.messages) / (time.perf_counter() - t0)
        rss.append(checkpoint("soak", done, rate))
    soak_seconds = time.perf_counter() - started

    prompts.model = llm
    cpu: dict[int, list[float]] = {length: [] for length in HISTORY_LENGTHS}
    body: dict[int, list[int]] = {length: [] for length in HISTORY_LENGTHS}
    for length in HISTORY_LENGTHS:
        for s in range(args.samples):
            await soak.seed(f"h{length}-{s}", length)
    for s in range(args.samples):
        for length in HISTORY_LENGTHS:
            inbound = soak.inbound(f"h{length}-{s}", length)
            c0 = time.process_time()
            await manager.handle(inbound)
            cpu[length].append((time.process_time() - c0) * 1000)
            body[length].append(len(json.dumps(prompts.last, ensure_ascii=False).encode()))
    await llm.aclose()
    await store.close()

    history = Table(title="CPU per turn by history length (median)")
    for column in ("history rows", "CPU ms/turn", "prompt KiB"):
        history.add_column(column, justify="right")
    per_length: dict[str, float] = {}
    for length in HISTORY_LENGTHS:
        ms = statistics.median(cpu[length])
        kib = statistics.median(body[length]) / 1024
        per_length[f"cpu_ms_at_{length}"] = round(ms, 3)
        per_length[f"prompt_kib_at_{length}"] = round(kib, 1)
        history.add_row(str(length), f"{ms:.2f}", f"{kib:.1f}")
    console.print(table)
    console.print(history)
    growth = (max(rss[1:]) - baseline) / baseline * 100 if len(rss) > 1 else 0.0
    return {
        "bench": "soak",
        "model": args.model,
        "chats": args.chats,
        "warmup_chats": warm,
        "messages_per_chat": args.messages,
        "rss_mib_after_warmup": round(baseline, 1),
        "rss_mib_end": round(rss[-1], 1),
        "rss_growth_pct": round(growth, 1),
        "target_rss_growth_pct": 10.0,
        **per_length,
        "soak_seconds": round(soak_seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=30_000)
    parser.add_argument("--messages", type=int, default=3, help="messages per distinct chat")
    parser.add_argument("--samples", type=int, default=30, help="turns per history length")
    parser.add_argument(
        "--model", choices=("fake", "http"), default="fake", help="the many chats' model"
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    endpoint = context.Process(target=_serve, args=(theirs,), daemon=True)
    endpoint.start()
    try:
        base_url = f"http://127.0.0.1:{ours.recv()}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(run(args, Path(tmp) / "soak.sqlite", base_url))
    finally:
        ours.send("stop")
        endpoint.join(timeout=5)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
