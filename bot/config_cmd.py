"""`kept config get KEY | set KEY VALUE | validate | show [--json]`.

The config in force is the file under the KEPT_ variables (env > file >
defaults; see core/config/env.py). Problems go to stderr one line each
(`config/kept.json: key.path: reason`, or `KEPT_X: reason` for a variable)
with exit code 1; stdout carries only the answer, so it can be piped.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from bot.context import EXAMPLE_CONFIG, config_option, resolve_config_path
from core.config.changes import restart_only
from core.config.env import config_variables
from core.config.file import (
    ConfigError,
    LoadedConfig,
    env_override,
    get_value,
    load_layers,
    masked_view,
    parse_raw_value,
    set_value,
)
from core.secrets import mask_secrets


def _dumps(value: Any) -> str:
    # Scalars on one line (easy to use in scripts), objects and lists indented.
    indent = 2 if isinstance(value, dict | list) and value else None
    return json.dumps(value, indent=indent, ensure_ascii=False)


def _report(exc: ConfigError, path: Path, *, after: str | None = None) -> NoReturn:
    for line in exc.problems:
        click.echo(mask_secrets(line), err=True)
    missing = not path.exists() and f"{path}: no such file" in exc.problems
    if missing and config_variables(os.environ):
        click.echo(
            "kept: `config set` edits only the file; change the KEPT_ variable instead, "
            f"or create the file from {EXAMPLE_CONFIG}",
            err=True,
        )
    elif missing:
        click.echo(
            f"kept: create it from {EXAMPLE_CONFIG} (or run `kept run` once), "
            "or set keys in KEPT_ variables (e.g. KEPT_CHANNELS__TELEGRAM__ENABLED=true)",
            err=True,
        )
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
    """Print the JSON value in force at KEY (e.g. agents.0.heartbeat.every):
    from a KEPT_ variable, else the file, else the default."""
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
    A running bot picks the change up by itself. Only the file changes: a
    KEPT_ variable that sets KEY stays on top, and is named.
    """
    path = resolve_config_path(config_path)
    try:
        set_value(path, key, value)
        overridden_by = env_override(key)
    except ConfigError as exc:
        _report(exc, path, after=f"kept: {path} not changed")
    # Echo the value as parsed, so `"3"` vs `3` mix-ups show at once.
    click.echo(f"{key} = {json.dumps(parse_raw_value(value), ensure_ascii=False)}")
    if overridden_by is not None:
        click.echo(
            f"kept: ${overridden_by} overrides {key}: the value in force stays the "
            f"variable's until it is unset",
            err=True,
        )


@config_group.command("validate")
@config_option
def validate_cmd(config_path: Path | None) -> None:
    """Check the config in force: `<source>: ok`, or one line per problem
    and exit code 1. The source is the file, the KEPT_ variables, or both."""
    path = resolve_config_path(config_path)
    try:
        loaded = load_layers(path)
    except ConfigError as exc:
        _report(exc, path)
    click.echo(f"{loaded.source}: ok")


@config_group.command("show")
@config_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object: values and origins.")
def show_cmd(config_path: Path | None, as_json: bool) -> None:
    """Print the config in force, defaults included, and where each value
    came from: `env KEPT_...`, `file` or `default`.

    Secrets are never printed: next to each `...Env` key (the variable's
    name) the output says whether that variable is set (`...Set` in --json).
    Keys a running bot reads only at start end with `(restart)`
    (`restartOnly` in --json): a change to them waits for the next start.
    """
    path = resolve_config_path(config_path)
    try:
        loaded = load_layers(path)
    except ConfigError as exc:
        _report(exc, path)
    values = masked_view(loaded.config)
    origins = loaded.origins()
    # A running bot's config is not known here: every key it reads only at
    # start is marked, since its value here may not be the one in force.
    restart = [key for key in origins if restart_only(key) is not None]
    if as_json:
        answer = {
            "source": _source_json(loaded),
            "values": values,
            "origins": origins,
            "restartOnly": restart,
        }
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False))
        return
    click.echo(f"# source: {loaded.source}")
    click.echo(f"# {RESTART_NOTE}")
    for key, origin in origins.items():
        line = _show_line(key, _at(values, key), origin, values)
        click.echo(f"{line} (restart)" if key in restart else line)


RESTART_NOTE = (
    "(restart): read at start; a running kept keeps the value it started with "
    "until it is restarted, whatever this shows"
)


def _source_json(loaded: LoadedConfig) -> dict[str, Any]:
    return {
        "file": None if loaded.document is None else str(loaded.path),
        "environment": sorted(loaded.env.variables.values()),
    }


def _at(values: Any, key: str) -> Any:
    node = values
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _show_line(key: str, value: Any, origin: str, values: dict[str, Any]) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    where = origin.replace("env:", "env ")
    if key.endswith("Env") and isinstance(value, str):
        # The masked view's sibling `...Set` says whether the variable holds a value.
        is_set = _at(values, key.removesuffix("Env") + "Set")
        where += f"; ${value} is {'set' if is_set else 'not set'}"
    return f"{key} = {shown}  # {where}"
