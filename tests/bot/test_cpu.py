"""bot/cpu.py: the bot's threads share one CPU (storage.pinCpu).

Each case runs in a fresh thread, because pinning applies to the calling
thread and the threads it starts; the test process itself stays unpinned.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from bot.cli import _pin_cpu
from bot.cpu import current_cpu, pin_for_storage, pin_to_one_cpu
from core.config.model import KeptConfig


def in_thread(work: Callable[[], Any]) -> Any:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    thread.join()
    return result[0]


def test_current_cpu_is_one_the_thread_may_run_on() -> None:
    assert current_cpu() in os.sched_getaffinity(0)


def test_pinning_holds_for_the_thread_and_threads_it_starts() -> None:
    allowed = os.sched_getaffinity(0)

    def pin() -> tuple[int | None, set[int], set[int]]:
        cpu = pin_to_one_cpu()
        child = in_thread(lambda: os.sched_getaffinity(0))
        return cpu, os.sched_getaffinity(0), child

    cpu, mine, child = in_thread(pin)
    if len(allowed) == 1:
        assert cpu is None and mine == allowed
    else:
        assert cpu in allowed
        assert mine == child == {cpu}
    assert os.sched_getaffinity(0) == allowed  # the test's own thread is untouched


def test_pin_cpu_false_leaves_affinity_alone() -> None:
    allowed = os.sched_getaffinity(0)
    config = KeptConfig.model_validate({"storage": {"pinCpu": False}})

    def run() -> set[int]:
        _pin_cpu(config)
        return os.sched_getaffinity(0)

    assert in_thread(run) == allowed
    pinned = in_thread(lambda: (_pin_cpu(KeptConfig()), os.sched_getaffinity(0))[1])
    assert len(pinned) == 1 or len(allowed) == 1


def test_a_postgres_store_leaves_affinity_alone_where_sqlite_pins() -> None:
    allowed = os.sched_getaffinity(0)
    postgres = KeptConfig.model_validate({"storage": {"url": "postgresql://kept@db/kept"}})
    sqlite = KeptConfig.model_validate({"storage": {"url": "sqlite:///data/kept.sqlite"}})

    def run(config: KeptConfig) -> tuple[int | None, set[int]]:
        return pin_for_storage(config.storage), os.sched_getaffinity(0)

    assert in_thread(lambda: run(postgres)) == (None, allowed)
    cpu, pinned = in_thread(lambda: run(sqlite))
    # The positive control: the same call pins when the store is SQLite.
    if len(allowed) > 1:
        assert cpu in allowed and pinned == {cpu}
    else:
        assert cpu is None and pinned == allowed
