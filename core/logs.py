"""Structured logs: one line per event, `event key=value ...`.

Values are quoted when they hold spaces, so a line stays greppable and
machine-parseable. Callers pass agent, session key and ids as fields; secrets
are never passed here in the first place.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def _fmt(value: Any) -> str:
    text = str(value)
    if text == "" or any(c.isspace() or c in '"=' for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def event(logger: logging.Logger, level: int, name: str, /, **fields: Any) -> None:
    """Log `name k=v ...`; fields that are None are left out."""
    if not logger.isEnabledFor(level):
        return
    parts = [name] + [f"{k}={_fmt(v)}" for k, v in fields.items() if v is not None]
    logger.log(level, " ".join(parts))


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S%z")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Library chatter (HTTP request lines) would drown the events that matter.
    for noisy in ("httpx", "httpx2", "openai", "aiosqlite", "discord", "telegram"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
