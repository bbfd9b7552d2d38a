"""What every `kept` command shares: the --config option, the --agent
check and error reporting."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from core.secrets import mask_secrets

if TYPE_CHECKING:
    from core.config.model import KeptConfig

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


def require_agent(config: KeptConfig, agent_id: str | None) -> None:
    """Every command taking `--agent`: an id the config does not have is an
    error naming the agents it has (an unknown one would list nothing and
    look like an empty answer). Checked before any database is opened."""
    if agent_id is None:
        return
    known = [a.id for a in config.agents]
    if agent_id not in known:
        fail(f"--agent: no agent {agent_id!r}; the configured agents: {', '.join(known)}")
