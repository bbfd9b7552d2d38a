"""Burst: a real `kept run` answering many private chats at once, through the fakes.

The fake Bot API and the fake model (tests/fakes/) run in this process on
127.0.0.1; `kept run` is a child process (`python -m bot run`), so its CPU
is read apart from theirs (/proc/<pid>/stat). The model answers at once.

Scenarios:

- `burst`: `--chats` private chats send `--messages` messages each, all queued
  at once. Messages per second (first update to last reply), p50/p99 answer
  latency (update queued to reply taken), CPU of `kept run` per 1,000
  messages, and the Bot API calls by method.
- `flood`: the fake answers like Telegram's flood control (429 beyond
  `--flood-limit` messages in any second, then refuses everything for the
  retry_after it named, 1 -> 2 -> 3 s); `--chats` chats send one message
  each: delivered, lost, duplicated.
- `kill`: `--chats` chats send `--messages` each; `kept run` is SIGKILLed
  once half the replies went out, then started again: unanswered and
  duplicated messages once it is quiet.

- `userflood`: one user sends `--flood` messages at once while `--chats`
  other chats send `--messages` each: the other chats' p50/p99 answer
  latency, and what the flooder got (answers within their rate, notices).
  `--flood 0` is the same load without the flooder.

`--limits on` runs with the example config's limits, `--limits off` with
none (the CPU per message of the one against the other).

`--code DIR` runs the `kept run` of another checkout (a before/after
comparison); the fakes are always this checkout's.

    .venv/bin/python bench/burst.py [--scenario burst|flood|kill] [--chats 300]
        [--messages 3] [--flood-limit 2] [--limits on|off] [--flood 300] [--code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import print_metrics  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import TOKEN, FakeTelegram  # noqa: E402

FIRST_CHAT = 10_000
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def said(log: Path) -> str:
    """The end of what kept logged (for a failure's message)."""
    return log.read_text()[-3000:] if log.exists() else ""


# `--limits on`: the example config's limits; `off`: none at all.
LIMITS_ON = {
    "perUser": {"messagesPerMinute": 20, "tokensPerDay": 200000, "activeReminders": 50},
    "perChat": {"messagesPerMinute": 60, "tokensPerDay": None},
    "tokensPerDay": None,
}
LIMITS_OFF = {
    "perUser": {"messagesPerMinute": None, "tokensPerDay": None, "activeReminders": None},
    "perChat": {"messagesPerMinute": None, "tokensPerDay": None},
    "tokensPerDay": None,
}


def write_config(
    tmp: Path, telegram: FakeTelegram, model: FakeOpenAI, limits: str | None = None
) -> Path:
    doc: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp}/kept.sqlite"},
        "channels": {
            "telegram": {
                "enabled": True,
                "baseUrl": telegram.root,
                "dmPolicy": "open",
                "groupPolicy": "open",
            }
        },
        "llm": {"baseUrl": model.base_url, "maxRetries": 0},
        "commitments": {"enabled": False},
        "shutdown": {"graceSeconds": 1},
    }
    if limits is not None:  # an older checkout's config has no such key
        doc["limits"] = LIMITS_ON if limits == "on" else LIMITS_OFF
    path = tmp / "kept.json"
    path.write_text(json.dumps(doc))
    return path


async def start(code: Path, cfg: Path, log: Path) -> asyncio.subprocess.Process:
    env = {**os.environ, "TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-bench"}
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", "--config", str(cfg),
            cwd=code, env=env, stdout=out, stderr=out,
        )  # fmt: skip


async def until(check: Any, within: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}; kept said:\n{said(log)}")
        await asyncio.sleep(0.02)


async def polling(telegram: FakeTelegram, process: asyncio.subprocess.Process, log: Path) -> None:
    seen = len(telegram.calls_to("getUpdates"))
    await until(
        lambda: len(telegram.calls_to("getUpdates")) > seen or process.returncode is not None,
        60,
        "kept run to poll",
        log,
    )
    if process.returncode is not None:
        raise SystemExit(f"bench: kept run exited with {process.returncode}:\n{said(log)}")


async def quiet(telegram: FakeTelegram, for_s: float, within: float) -> None:
    """Until no Bot API message call arrived for `for_s` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        sends = telegram.calls_to("sendMessage")
        last = sends[-1].at if sends else 0.0
        if time.monotonic() - last >= for_s:
            return
        await asyncio.sleep(0.1)


async def push_all(telegram: FakeTelegram, chats: int, messages: int) -> dict[str, float]:
    """Queue every message at once; when each was queued, by its text."""
    queued: dict[str, float] = {}
    for k in range(messages):
        for c in range(chats):
            chat = FIRST_CHAT + c
            text = f"m{chat}-{k}"
            queued[text] = time.monotonic()
            await telegram.push_message(text, chat_id=chat)
    return queued


def answer_latencies(telegram: FakeTelegram, queued: dict[str, float]) -> list[float]:
    """Seconds from each queued message to its echoed answer, sorted."""
    return sorted(
        s.at - queued[s.text.removeprefix("echo: ")]
        for s in telegram.sent
        if s.text.removeprefix("echo: ") in queued
    )


def per_chat(telegram: FakeTelegram) -> Counter[int]:
    return Counter(s.chat_id for s in telegram.sent)


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


async def burst(args: argparse.Namespace, tmp: Path, log: Path) -> dict[str, Any]:
    async with FakeTelegram() as telegram, FakeOpenAI() as model:
        process = await start(args.code, write_config(tmp, telegram, model, args.limits), log)
        try:
            await polling(telegram, process, log)
            calls_before = len(telegram.calls)
            cpu_before = cpu_seconds(process.pid)
            total = args.chats * args.messages
            started = time.monotonic()
            queued = await push_all(telegram, args.chats, args.messages)
            await until(lambda: len(telegram.sent) >= total, args.timeout, "every reply", log)
            seconds = time.monotonic() - started
            cpu = cpu_seconds(process.pid) - cpu_before
            methods = Counter(c.method for c in telegram.calls[calls_before:])
        finally:
            await stop(process)
    latencies = answer_latencies(telegram, queued)
    return {
        "bench": "burst",
        "limits": args.limits,
        "chats": args.chats,
        "messages": total,
        "replies": len(telegram.sent),
        "seconds": round(seconds, 2),
        "messages_per_s": round(total / seconds, 1),
        "p50_s": round(statistics.median(latencies), 2),
        "p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 2),
        "cpu_s_per_1000": round(cpu / total * 1000, 2),
        "calls": dict(sorted(methods.items(), key=lambda kv: -kv[1])),
        "load": round(os.getloadavg()[0], 2),
    }


async def flood(args: argparse.Namespace, tmp: Path, log: Path) -> dict[str, Any]:
    async with FakeTelegram() as telegram, FakeOpenAI() as model:
        process = await start(args.code, write_config(tmp, telegram, model), log)
        try:
            await polling(telegram, process, log)
            control = telegram.flood_control(args.flood_limit)
            started = time.monotonic()
            await push_all(telegram, args.chats, 1)
            await until(
                lambda: (
                    len(per_chat(telegram)) >= args.chats
                    or time.monotonic()
                    - max([started] + [c.at for c in telegram.calls_to("sendMessage")])
                    > 10
                ),
                args.timeout,
                "the flood to end",
                log,
            )
            await quiet(telegram, 3, 30)  # a late second copy would show now
            seconds = time.monotonic() - started
        finally:
            await stop(process)
    replies = per_chat(telegram)
    return {
        "bench": "burst-flood",
        "flood_limit_per_s": args.flood_limit,
        "chats": args.chats,
        "delivered": len(replies),
        "lost": args.chats - len(replies),
        "duplicated": sum(n - 1 for n in replies.values() if n > 1),
        "refused_429": control.refused,
        "floods": control.floods,
        "seconds": round(seconds, 1),
    }


async def kill(args: argparse.Namespace, tmp: Path, log: Path) -> dict[str, Any]:
    total = args.chats * args.messages
    async with FakeTelegram() as telegram, FakeOpenAI() as model:
        cfg = write_config(tmp, telegram, model)
        first = await start(args.code, cfg, log)
        try:
            await polling(telegram, first, log)
            await push_all(telegram, args.chats, args.messages)
            await until(lambda: len(telegram.sent) >= total // 2, args.timeout, "half", log)
            first.send_signal(signal.SIGKILL)
            await first.wait()
        finally:
            if first.returncode is None:
                first.kill()
        before = len(telegram.sent)
        second = await start(args.code, cfg, log)
        try:
            await polling(telegram, second, log)
            await until(lambda: len(telegram.sent) >= total, 30, "recovery", log)
        except SystemExit:
            pass  # what is missing is the figure
        finally:
            await quiet(telegram, 3, 30)
            await stop(second)
    replies = per_chat(telegram)
    chats = [FIRST_CHAT + c for c in range(args.chats)]
    return {
        "bench": "burst-kill",
        "chats": args.chats,
        "messages": total,
        "sent_before_kill": before,
        "sent_after_restart": len(telegram.sent) - before,
        "unanswered": sum(max(0, args.messages - replies[c]) for c in chats),
        "duplicated": sum(max(0, replies[c] - args.messages) for c in chats),
    }


async def userflood(args: argparse.Namespace, tmp: Path, log: Path) -> dict[str, Any]:
    """One user floods (`--flood` messages at once) while `--chats` other
    chats send `--messages` each: the others' answer latency, the flooder's
    answers and notices (`--flood 0`: the same without the flooder)."""
    flooder = FIRST_CHAT - 1
    async with FakeTelegram() as telegram, FakeOpenAI() as model:
        process = await start(args.code, write_config(tmp, telegram, model, args.limits), log)
        try:
            await polling(telegram, process, log)
            started = time.monotonic()
            queued: dict[str, float] = {}
            for k in range(max(args.flood, args.messages)):
                if k < args.flood:
                    await telegram.push_message(f"f{k}", chat_id=flooder)
                if k < args.messages:
                    for c in range(args.chats):
                        text = f"m{FIRST_CHAT + c}-{k}"
                        queued[text] = time.monotonic()
                        await telegram.push_message(text, chat_id=FIRST_CHAT + c)
            total = args.chats * args.messages

            def others() -> int:
                return sum(1 for s in telegram.sent if s.text.removeprefix("echo: ") in queued)

            await until(lambda: others() >= total, args.timeout, "the other chats' replies", log)
            seconds = time.monotonic() - started
            # The flooder's own answers go at its chat's pace (about one a
            # second): wait for a quiet spell longer than that.
            await quiet(telegram, 3.0, 120)
        finally:
            await stop(process)
    latencies = answer_latencies(telegram, queued)
    to_flooder = [s.text for s in telegram.sent if s.chat_id == flooder]
    return {
        "bench": "userflood",
        "limits": args.limits,
        "flood": args.flood,
        "other_chats": args.chats,
        "other_messages": total,
        "seconds": round(seconds, 2),
        "others_p50_s": round(statistics.median(latencies), 3),
        "others_p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3),
        "flooder_answered": sum(1 for t in to_flooder if t.startswith("echo: ")),
        "flooder_notices": sum(1 for t in to_flooder if "faster than I answer" in t),
        "load": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario", choices=("burst", "flood", "kill", "userflood"), default="burst"
    )
    parser.add_argument(
        "--limits",
        choices=("on", "off"),
        help="the example config's limits, or none (default: the checkout's defaults)",
    )
    parser.add_argument("--flood", type=int, default=300, help="userflood: the flooder's messages")
    parser.add_argument("--chats", type=int)
    parser.add_argument("--messages", type=int)
    parser.add_argument("--flood-limit", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose kept runs")
    args = parser.parse_args()
    defaults = {"burst": (300, 3), "flood": (100, 1), "kill": (50, 2), "userflood": (50, 2)}[
        args.scenario
    ]
    args.chats = args.chats or defaults[0]
    args.messages = args.messages or defaults[1]
    if not (args.code / "bot" / "__main__.py").exists():
        raise SystemExit(f"bench: --code {args.code} is not a kept checkout (no bot/__main__.py)")
    scenario = {"burst": burst, "flood": flood, "kill": kill, "userflood": userflood}[args.scenario]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        result = asyncio.run(scenario(args, tmp, tmp / "kept.log"))
    print_metrics(f"kept run, {args.scenario} through the fakes ({args.code.name})", result)


if __name__ == "__main__":
    main()
