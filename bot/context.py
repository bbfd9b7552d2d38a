"""What every `kept` command shares: the --config option and error reporting."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from core.secrets import mask_secrets

DEFAULT_CONFIG = Path("config/kept.json")
EXAMPLE_CONFIG = Path("config/kept.example.json")

F = TypeVar("F", bound=Callable[..., Any])


def default_config_path() -> Path:
    env = os.environ.get("KEPT_CONFIG")
    return Path(env) if env else DEFAULT_CONFIG


def config_option(func: F) -> F:
    """`--config PATH` on a command (default config/kept.json or $KEPT_CONFIG)."""
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Config file (default: $KEPT_CONFIG or config/kept.json).",
    )(func)


def resolve_config_path(config_path: Path | None) -> Path:
    return config_path if config_path is not None else default_config_path()


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, non-zero exit."""
    click.echo(f"kept: {mask_secrets(message)}", err=True)
    sys.exit(code)
