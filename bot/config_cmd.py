"""`kept config get KEY | set KEY VALUE | validate | show`.

Problems go to stderr one line each (`config/kept.json: key.path: reason`)
with exit code 1; stdout carries only the answer, so it can be piped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from bot.context import EXAMPLE_CONFIG, config_option, resolve_config_path
from core.config_file import (
    ConfigError,
    get_value,
    load_config,
    masked_view,
    parse_raw_value,
    set_value,
)


def _dumps(value: Any) -> str:
    # Scalars on one line (easy to use in scripts), objects and lists indented.
    indent = 2 if isinstance(value, dict | list) and value else None
    return json.dumps(value, indent=indent, ensure_ascii=False)


def _report(exc: ConfigError, path: Path, *, after: str | None = None) -> NoReturn:
    for line in exc.problems:
        click.echo(line, err=True)
    if not path.exists():
        click.echo(f"kept: create it from {EXAMPLE_CONFIG} (or run `kept run` once)", err=True)
    elif after:
        click.echo(after, err=True)
    sys.exit(1)


@click.group("config")
def config_group() -> None:
    """Read, change and check the config file (keys are camelCase, e.g. commitments.maxPerDay)."""


@config_group.command("get")
@click.argument("key")
@config_option
def get_cmd(key: str, config_path: Path | None) -> None:
    """Print the JSON value at KEY (e.g. agents.0.heartbeat.every); defaults included."""
    path = resolve_config_path(config_path)
    try:
        value = get_value(path, key)
    except ConfigError as exc:
        _report(exc, path)
    click.echo(_dumps(value))


# ignore_unknown_options: a negative VALUE such as -1 is a value, not an option.
@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@config_option
def set_cmd(key: str, value: str, config_path: Path | None) -> None:
    """Set KEY to VALUE, validating the whole file before writing it.

    VALUE is read as JSON when it parses (true, 3, null, ["a"]) and as a
    plain string otherwise; quote a string that looks like JSON: '"3"'.
    A running bot picks the change up by itself.
    """
    path = resolve_config_path(config_path)
    try:
        set_value(path, key, value)
    except ConfigError as exc:
        _report(exc, path, after=f"kept: {path} not changed")
    # Echo the value as parsed, so `"3"` vs `3` mix-ups show at once.
    click.echo(f"{key} = {json.dumps(parse_raw_value(value), ensure_ascii=False)}")


@config_group.command("validate")
@config_option
def validate_cmd(config_path: Path | None) -> None:
    """Check the file: `<path>: ok`, or one line per problem and exit code 1."""
    path = resolve_config_path(config_path)
    try:
        load_config(path)
    except ConfigError as exc:
        _report(exc, path)
    click.echo(f"{path}: ok")


@config_group.command("show")
@config_option
def show_cmd(config_path: Path | None) -> None:
    """Print the config in force, defaults included.

    Secrets are never printed: next to each `...Env` key (the variable's
    name) a `...Set` key says whether that variable is set.
    """
    path = resolve_config_path(config_path)
    try:
        config = load_config(path)
    except ConfigError as exc:
        _report(exc, path)
    click.echo(json.dumps(masked_view(config), indent=2, ensure_ascii=False))
