from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.clock import TestClock
from core.messages import Outbound, SendResult
from core.store import Store
from tests.support.store_helpers import open_store

pytest_plugins = ["tests.support.postgres"]


class RecordingSender:
    """A Sender that records what core asked to send."""

    def __init__(self) -> None:
        self.sent: list[Outbound] = []
        self._ids = 0

    async def send(self, outbound: Outbound) -> SendResult:
        self.sent.append(outbound)
        self._ids += 1
        return SendResult(message_id=f"m{self._ids}")

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [o.text for o in self.sent if chat_id is None or o.target.chat_id == chat_id]


@pytest.fixture
def clock() -> TestClock:
    return TestClock()


@pytest.fixture
def sender() -> RecordingSender:
    return RecordingSender()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = open_store(f"sqlite:///{tmp_path}/kept.sqlite")
    await store.open()
    yield store
    await store.close()
