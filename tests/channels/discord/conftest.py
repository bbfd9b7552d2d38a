"""The Discord rig (the real discord.py client against the fake server) and
the interaction answers it captures, for every test here."""

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
