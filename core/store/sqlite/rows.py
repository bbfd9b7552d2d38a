"""Times as the SQLite backend stores them (integer milliseconds, UTC)."""

from __future__ import annotations

from core.store.dialect import from_ms, to_ms

__all__ = ["from_ms", "to_ms"]
