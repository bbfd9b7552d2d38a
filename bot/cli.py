"""The `kept` command line (also `python -m bot`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from datetime import UTC, datetime
from importlib.resources import as_file, files
from pathlib import Path

import click

from bot.backup_cmd import backup_command, restore_command
from bot.commitments_cmd import commitments_group
from bot.config_cmd import config_group
from bot.context import EXAMPLE_CONFIG, config_option, fail, require_agent, resolve_config_path
from bot.cpu import pin_for_storage
from bot.doctor import run_doctor
from bot.eval_cmd import eval_group
from bot.pairing_cmd import pairing_group
from bot.preflight import startup_problem
from bot.reminders_cmd import reminders_group
from bot.runtime import CHANNEL_HELP, Runtime, StartupError, channel_context, serve
from bot.search_cmd import import_command, reindex_command, search_command
from bot.sessions_cmd import sessions_group
from bot.store_access import check_storage_writable, load_or_fail
from bot.updates_cmd import updates_group
from bot.usage_cmd import usage_command
from bot.users_cmd import users_group
from channels.console import ConsoleAdapter
from core.config.env import config_variables
from core.config.file import ensure_config_file
from core.config.model import ConfigError, KeptConfig
from core.logs import event, level_number, setup_logging

log = logging.getLogger("kept.cli")


DISTRIBUTION = "kept-bot"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=DISTRIBUTION, prog_name="kept", message="%(prog)s %(version)s")
def main() -> None:
    """kept: a chat bot that remembers what a conversation left open."""


main.add_command(config_group, "config")
main.add_command(search_command, "search")
main.add_command(import_command, "import")
main.add_command(reindex_command, "reindex")
main.add_command(commitments_group, "commitments")
main.add_command(reminders_group, "reminders")
main.add_command(users_group, "users")
main.add_command(sessions_group, "sessions")
main.add_command(backup_command, "backup")
main.add_command(restore_command, "restore")
main.add_command(pairing_group, "pairing")
main.add_command(eval_group, "eval")
main.add_command(updates_group, "updates")
main.add_command(usage_command, "usage")


def _load(config_path: Path | None, *, create: bool = False) -> tuple[Path, KeptConfig]:
    path = resolve_config_path(config_path)
    # KEPT_ variables setting keys: an environment-only deployment needs no file.
    from_env = bool(config_variables(os.environ))
    if create and not from_env:
        _create_config(path)
    return path, load_or_fail(path)


def _create_config(path: Path) -> None:
    """A first start copies the example config to `path` (nothing when it exists)."""
    beside = path.parent / EXAMPLE_CONFIG.name
    # The packaged copy, so that a start outside the repository finds it too.
    source = beside if beside.is_file() else files("bot") / EXAMPLE_CONFIG.name
    try:
        with as_file(source) as example:
            if ensure_config_file(path, example):
                click.echo(f"kept: created {path} from {example}; edit it to taste", err=True)
    except ConfigError as exc:
        fail("; ".join(exc.problems))
    except OSError as exc:
        reason = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else exc
        fail(f"cannot create the config file {path} ({reason}); use --config PATH")


def _refuse_to_start(config: KeptConfig, *, channels: bool) -> None:
    """One line saying what to set, before anything starts (see bot/preflight.py)."""
    problem = startup_problem(config, os.environ, channels=channels, no_channel=CHANNEL_HELP)
    if problem is not None:
        fail(problem)
    asyncio.run(check_storage_writable(config, datetime.now(UTC).isoformat()))


def _pin_cpu(config: KeptConfig) -> None:
    """Before the store opens, so that its worker thread shares the CPU."""
    cpu = pin_for_storage(config.storage)
    if cpu is not None:
        event(log, logging.INFO, "cpu.pinned", cpu=cpu, off_with="storage.pinCpu=false")


@main.command()
@config_option
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def run(config_path: Path | None, verbose: bool) -> None:
    """Start every enabled channel and the background services."""
    setup_logging(logging.DEBUG if verbose else logging.INFO)
    path, config = _load(config_path, create=True)
    level = logging.DEBUG if verbose else level_number(config.logging.level)
    setup_logging(level, config.logging.format)
    _refuse_to_start(config, channels=True)
    _pin_cpu(config)
    try:
        asyncio.run(serve(Runtime(path, config)))
    except StartupError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass


@main.command()
@config_option
@click.option("--agent", "agent_id", default=None, help="Agent id (default: the first agent).")
@click.option("--user", default=None, help="Local user name (default: your login name).")
def chat(config_path: Path | None, agent_id: str | None, user: str | None) -> None:
    """Talk to the bot in this terminal (stdin may be a pipe).

    /help lists the local commands. Ctrl-C stops an answer (your message
    stays); Ctrl-C again, Ctrl-D or /quit leaves. Line history is kept in
    $XDG_STATE_HOME/kept/chat-history (~/.local/state/kept/chat-history)."""
    setup_logging(logging.WARNING)
    path, config = _load(config_path, create=True)
    require_agent(config, agent_id)
    agent = agent_id or config.agents[0].id
    _refuse_to_start(config, channels=False)
    _pin_cpu(config)
    failed = False
    # Ctrl-C while starting or stopping: leaving is what was asked.
    with contextlib.suppress(KeyboardInterrupt):
        failed = asyncio.run(_chat(path, config, agent, user))
    if failed:
        # A script piping into `kept chat` must see that its answer is missing.
        fail("the last message was not answered; see the warning above")


async def _chat(path: Path, config: KeptConfig, agent_id: str, user: str | None) -> bool:
    """Run the REPL; True when its last message went unanswered."""
    runtime = Runtime(path, config)
    await runtime.start_core()
    try:
        console = ConsoleAdapter(
            agent_id=agent_id,
            context=channel_context(runtime),
            withdraw=runtime.manager.withdraw,
            clock=runtime.clock,
            user=user,
        )
        await runtime.start_adapters([console])
        await console.run()
    finally:
        await runtime.stop()
    return console.last_turn_failed


@main.command()
@config_option
@click.option("--deep", is_flag=True, help="Also ask the chat model for one tiny completion.")
@click.option("--json", "as_json", is_flag=True, help="The checks as one JSON object.")
def doctor(config_path: Path | None, deep: bool, as_json: bool) -> None:
    """Check config, database, tokens, platforms and the model endpoint
    (exit 1 when a check fails). Creates nothing."""
    setup_logging(logging.CRITICAL)
    code = asyncio.run(run_doctor(resolve_config_path(config_path), deep=deep, as_json=as_json))
    raise SystemExit(code)
