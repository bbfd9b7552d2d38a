"""Log lines an operator can ship: text as before, or one JSON object per line."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

from core.logs import JsonFormatter, LogFormat, event, level_number, log_handler


def captured(fmt: LogFormat) -> tuple[logging.Logger, io.StringIO]:
    """A logger of its own writing through kept's handler into a buffer."""
    buffer = io.StringIO()
    log = logging.getLogger(f"kept.test.{fmt}")
    log.handlers[:] = [log_handler(fmt, buffer)]
    log.propagate = False
    log.setLevel(logging.DEBUG)
    return log, buffer


def test_json_lines_parse_and_carry_the_events_fields() -> None:
    log, buffer = captured("json")
    event(
        log,
        logging.WARNING,
        "send_failed",
        agent="main",
        attempt=2,
        ok=False,
        delay=1.5,
        path=Path("/data/x"),
        note='says "why"\nand how',
        skipped=None,
    )
    [line] = buffer.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "send_failed" and record["level"] == "WARNING"
    assert record["logger"] == "kept.test.json" and record["time"].endswith("+00:00")
    assert record["agent"] == "main" and record["attempt"] == 2 and record["ok"] is False
    assert record["delay"] == 1.5 and record["path"] == "/data/x"
    assert record["note"] == 'says "why"\nand how'
    assert "skipped" not in record  # None fields are left out, as in text


def test_a_field_named_like_a_record_key_is_kept_apart() -> None:
    log, buffer = captured("json")
    event(log, logging.INFO, "odd", level="high", event="inner", message="hi")
    record = json.loads(buffer.getvalue())
    assert record["level"] == "INFO" and record["field_level"] == "high"
    assert record["event"] == "odd" and record["field_event"] == "inner"
    assert record["message"] == "hi"


def test_records_that_are_not_events_are_json_too() -> None:
    log, buffer = captured("json")
    log.warning("plain %s", "text")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert first["message"] == "plain text" and "event" not in first
    assert second["message"] == "failed" and "ValueError: boom" in second["exception"]


def test_text_format_is_the_event_line() -> None:
    log, buffer = captured("text")
    event(log, logging.INFO, "started", platform="telegram", note="two words")
    line = buffer.getvalue().rstrip("\n")
    assert line.endswith(' INFO kept.test.text started platform=telegram note="two words"')


def test_level_names_map_to_logging_levels() -> None:
    names = ("debug", "info", "warning", "error")
    assert [level_number(n) for n in names] == [10, 20, 30, 40]


def test_the_formatter_is_usable_alone() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "hello", None, None)
    assert json.loads(JsonFormatter().format(record))["message"] == "hello"
