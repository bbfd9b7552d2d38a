"""Keep the bot's threads on one CPU (`storage.pinCpu`).

Every store call is a round trip between the event loop thread and
aiosqlite's worker thread: two thread wakeups. When the two threads sit on
different CPUs each wakeup is an inter-processor interrupt, which on a
virtual machine is expensive; on one CPU it is cheap. What pinning gives up
is parallelism while SQLite runs a query (it releases the GIL): the trade is
measured, not assumed (bench/search.py --no-pin runs without it).

Only the calling thread is pinned, and threads it starts afterwards (the
store's worker, executor threads) inherit that, so pin before the store is
opened. The CPU chosen is the one the thread runs on now, which spreads
several bot processes on one machine the way the scheduler already did.

Only SQLite is served that way: PostgreSQL's driver talks to its server over
a socket from the event loop, with no worker thread to share a CPU with, so
a process on PostgreSQL is not pinned (it would only give up parallelism).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from core.config.model import StorageConfig


def current_cpu() -> int | None:
    """The CPU the calling thread last ran on, from /proc (Linux), or None."""
    stat = Path(f"/proc/self/task/{threading.get_native_id()}/stat")
    try:
        text = stat.read_text()
    except OSError:
        return None
    # Field 39 ("processor"), counted after the parenthesised command name,
    # which may itself hold spaces.
    fields = text.rpartition(")")[2].split()
    try:
        return int(fields[36])
    except (IndexError, ValueError):
        return None


def pin_for_storage(storage: StorageConfig) -> int | None:
    """Pin as `storage.pinCpu` asks when the store is SQLite; the CPU, or None
    when nothing was pinned."""
    if not storage.pin_cpu or not storage.url.startswith("sqlite:"):
        return None
    return pin_to_one_cpu()


def pin_to_one_cpu() -> int | None:
    """Pin the calling thread (and threads it starts later) to one CPU.

    Returns the CPU, or None when the platform cannot pin or the thread may
    run on one CPU only anyway.
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) <= 1:
        return None
    cpu = current_cpu()
    if cpu not in allowed:
        cpu = min(allowed)
    # pid 0 is the calling thread on Linux, not the whole process.
    os.sched_setaffinity(0, {cpu})
    return cpu
