"""`kept doctor`'s file privacy check: the SQLite database, its `-wal` and
`-shm` files and its directory hold every conversation, so nobody but
kept's own user should be able to read them. New ones are created that way
(core/store/sqlite/files.py); one made by an older kept, or by hand, gets
the chmod to run."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

from bot.doctor_platforms import Check

NAME = "file privacy"
# Any permission for the group or others.
OTHERS = 0o077


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def check_file_privacy(database: Path | None) -> list[Check]:
    """Nothing for PostgreSQL or a database not there yet (the database
    check reports that); else one check, failing when the directory or a
    database file is open to the group or others."""
    if database is None or _mode(database) is None:
        return []
    directory = database.parent
    files = [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm"))]
    open_dir = directory if (_mode(directory) or 0) & OTHERS else None
    open_files = [f for f in files if (_mode(f) or 0) & OTHERS]
    if open_dir is None and not open_files:
        return [Check(True, NAME, f"{database} and its directory are readable by their owner only")]
    shown = [f"{p} ({_mode(p):04o})" for p in ([open_dir] if open_dir else []) + open_files]
    commands = []
    if open_dir is not None:
        commands.append(f"chmod 700 {shlex.quote(str(directory))}")
    if open_files:
        commands.append("chmod 600 " + " ".join(shlex.quote(str(f)) for f in open_files))
    return [
        Check(
            False,
            NAME,
            f"{', '.join(shown)} open to other users, and they hold every conversation: "
            f"run `{' && '.join(commands)}`",
        )
    ]
