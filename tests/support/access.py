"""Channel settings for tests that are not about who is answered: every DM
and every group, as "empty allowFrom" meant before dmPolicy and groups."""

from __future__ import annotations

from typing import Any

OPEN_ACCESS: dict[str, Any] = {"dmPolicy": "open", "groupPolicy": "open"}
