"""The dpytest rig (the Discord adapter on a dpytest bot) and the interaction
answers it captures, for the unit tests here; the tests against the fake
Discord server build their own harness."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.discord_dpytest import Responses, Rig, build_rig, capture_responses


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await build_rig(tmp_path)
    yield rig
    await rig.close()


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> Responses:
    return capture_responses(monkeypatch)
