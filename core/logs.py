"""Structured logs: one line per event.

Two formats (`logging.format` in the config): `text`, `event key=value ...`
with values quoted when they hold spaces, so a line stays greppable; and
`json`, one object per line with the event's fields, for a log shipper.
Callers pass agent, session key and ids as fields and never pass a secret;
as a last guard every event, its fields and every formatted line (library
records and tracebacks included) go through core/secrets.py's mask.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from core.secrets import mask_secrets

LogFormat = Literal["text", "json"]

# The LogRecord attributes an event's name and fields travel in, so that the
# JSON formatter need not parse the text line back.
_EVENT = "kept_event"
_FIELDS = "kept_fields"


def _fmt(value: Any) -> str:
    text = str(value)
    if text == "" or any(c.isspace() or c in '"=' for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def event(logger: logging.Logger, level: int, name: str, /, **fields: Any) -> None:
    """Log `name k=v ...`; fields that are None are left out."""
    if not logger.isEnabledFor(level):
        return
    kept = {
        k: mask_secrets(v) if isinstance(v, str) else v for k, v in fields.items() if v is not None
    }
    parts = [name] + [f"{k}={_fmt(v)}" for k, v in kept.items()]
    line = mask_secrets(" ".join(parts))  # a path or an error's repr may hold one too
    logger.log(level, line, extra={_EVENT: name, _FIELDS: kept})


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # paths, enums, exceptions' reprs: as the text format shows them


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, then `event` and the
    event's fields, or `message` for a record that is not an event (library
    logs). A field named like one of those keys is kept as `field_<name>`."""

    def format(self, record: logging.LogRecord) -> str:
        head: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        name = getattr(record, _EVENT, None)
        if name is None:
            line = {**head, "message": record.getMessage()}
        else:
            line = {**head, "event": name}
            for key, value in getattr(record, _FIELDS, {}).items():
                line[f"field_{key}" if key in line else key] = _json_value(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return mask_secrets(json.dumps(line, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """`time LEVEL logger message`, secrets masked (library records and
    tracebacks are not events, and may quote a URL with its token)."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


def log_handler(fmt: LogFormat = "text", stream: TextIO | None = None) -> logging.Handler:
    """A handler writing `fmt` lines to `stream` (default stderr)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            TextFormatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S%z")
        )
    return handler


def setup_logging(level: int = logging.INFO, fmt: LogFormat = "text") -> None:
    root = logging.getLogger()
    root.handlers[:] = [log_handler(fmt)]
    root.setLevel(level)
    # Library chatter (HTTP request lines) would drown the events that matter.
    for noisy in ("httpx", "httpx2", "openai", "aiosqlite", "discord", "telegram"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def level_number(name: str) -> int:
    """`debug` / `info` / `warning` / `error` (logging.level) as logging's number."""
    return logging.getLevelNamesMapping()[name.upper()]
