"""How the benchmarks report: a two-column table, then one JSON line."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def print_metrics(title: str, result: dict[str, Any]) -> None:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.items():
        if key != "bench":
            table.add_row(key, str(value))
    Console().print(table)
    print(json.dumps(result))
