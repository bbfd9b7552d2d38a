"""`kept backup PATH [--json]`: a consistent copy of the database, taken
while the bot runs and writes. SQLite: the online backup API, the copy
checked and written 0600. PostgreSQL: the pg_dump command to run, one line.
`kept restore PATH [--yes]`: the backup put in place of the database, the
replaced file kept beside it, only while no `kept run` has it open.

stdout carries the answer (one line, or one JSON document with --json);
problems go to stderr as one `kept: ...` line, with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import click

from bot.confirm import confirm_or_fail
from bot.context import config_option, fail, resolve_config_path
from bot.services import open_storage
from bot.store_access import load_or_fail, opened_backend
from core.privacy.backup import BackupFailed, BackupResult, RestoreRefused, RestoreResult
from core.store.errors import masked_url


def _postgres(url: str) -> bool:
    return url.startswith(("postgresql:", "postgres:"))


@click.command("backup")
@click.argument("target", metavar="PATH", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@config_option
def backup_command(target: Path, as_json: bool, config_path: Path | None) -> None:
    """Copy the database to PATH (a new file), consistently, while the bot runs."""
    config = load_or_fail(resolve_config_path(config_path))
    url = config.storage.url
    if _postgres(url):
        command = f"pg_dump --format=custom --file={shlex.quote(str(target))} {masked_url(url)}"
        if as_json:
            click.echo(json.dumps({"backend": "postgres", "command": command}, indent=2))
        else:
            click.echo(f"PostgreSQL is backed up with its own tool: {command}")
        return
    target = target.expanduser().absolute()
    if target.exists():
        fail(f"{target} already exists; name a new file")
    if not target.parent.is_dir():
        fail(f"no directory {target.parent} to write the backup in")

    async def main() -> BackupResult:
        async with opened_backend(config) as backend:
            if backend.backup is None:
                fail("this database has no backup of kept's own")
            try:
                return await backend.backup.backup(target)
            except BackupFailed as exc:
                fail(str(exc))

    done = asyncio.run(main())
    if as_json:
        document = {
            "backend": "sqlite",
            "path": str(done.path),
            "bytes": done.bytes,
            "messages": done.messages,
            "schemaVersion": done.schema_version,
            "seconds": round(done.seconds, 3),
        }
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(
        f"Backed up {done.messages} messages (schema {done.schema_version}) to {done.path}: "
        f"{done.bytes / 1e6:.1f} MB in {done.seconds:.1f} s, integrity checked."
    )


@click.command("restore")
@click.argument("source", metavar="PATH", type=click.Path(path_type=Path))
@click.option("--yes", is_flag=True, help="Restore without asking.")
@config_option
def restore_command(source: Path, yes: bool, config_path: Path | None) -> None:
    """Put the backup at PATH in place of the database (kept beside it), when
    no `kept run` has the database open."""
    config = load_or_fail(resolve_config_path(config_path))
    url = config.storage.url
    if _postgres(url):
        command = f"pg_restore --clean --dbname={masked_url(url)} {shlex.quote(str(source))}"
        click.echo(f"PostgreSQL is restored with its own tool, every worker stopped: {command}")
        return
    try:
        backend = open_storage(url, create=False)
    except Exception as exc:  # a missing database is restored into as well
        if not isinstance(exc, FileNotFoundError):
            fail(f"cannot use storage.url {masked_url(url)}: {exc}")
        backend = open_storage(url, create=True)
    if backend.backup is None:
        fail("this database has no restore of kept's own")
    confirm_or_fail(
        f"This replaces the database at {masked_url(url)} with {source} "
        "(the replaced one is kept beside it).",
        yes=yes,
        verb="restore",
    )
    try:
        done: RestoreResult = asyncio.run(backend.backup.restore(source.expanduser()))
    except RestoreRefused as exc:
        fail(str(exc))
    kept = f"; the replaced database is kept at {done.replaced}" if done.replaced else ""
    click.echo(
        f"Restored {done.messages} messages (schema {done.schema_version}) "
        f"into {done.restored}{kept}."
    )
