"""Every error kept raises on purpose derives from KeptError, keeping the
standard base a caller may already catch."""

from __future__ import annotations

import pytest

from bot.runtime import StartupError
from core.commitments.candidates import UnusableAnswer
from core.commitments.service import SnoozeError
from core.config.model import ConfigError
from core.errors import KeptError, MessageNotStored
from core.llm import LLMError
from core.reminders.schedule import ScheduleError
from core.search.service import NotVisible
from core.store.base import DuplicateMessage, UnknownSession
from core.store.errors import MigrationError
from core.tools import ToolError


@pytest.mark.parametrize(
    ("error", "also"),
    [
        (ConfigError, Exception),
        (LLMError, Exception),
        (MigrationError, RuntimeError),
        (DuplicateMessage, Exception),
        (UnknownSession, LookupError),
        (MessageNotStored, Exception),
        (SnoozeError, ValueError),
        (ScheduleError, ValueError),
        (UnusableAnswer, ValueError),
        (NotVisible, Exception),
        (ToolError, Exception),
        (StartupError, Exception),
    ],
)
def test_every_kept_error_derives_from_kept_error(error: type, also: type) -> None:
    assert issubclass(error, KeptError) and issubclass(error, also)
