"""The SQLite database as files on disk: created private, and watched so a
file deleted or replaced under a running bot is noticed.

Privacy: the directory kept creates is 0700 and the database file 0600,
whatever the umask (an explicit chmod, since a mode given to mkdir or open
is only ever narrowed by it). The `-wal`, `-shm` (and any rollback journal)
files are created later by SQLite itself, which gives them the database
file's own permission bits (and fchmods them to those, past the umask);
`match_companions` re-applies that after every open in case one was left
more open by an older kept. The process umask is never changed: it is
process-wide, and other threads (aiosqlite's, the HTTP server's) create
files of their own meanwhile.

Identity: SQLite keeps writing to the file it opened, so a database
deleted (or replaced by another file) under it takes every later write into
an unlinked file that is gone at the restart. `FileWatch` compares the
path's device and inode with those of the file the connection opened.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.clock import Clock
from core.logs import event
from core.store.errors import DatabaseReplaced

log = logging.getLogger("kept.store")

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# What SQLite adds next to the database file.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")

# How often (on the store's clock) a write looks at the path again: one
# stat(2) a second at most, and on every storage error.
IDENTITY_CHECK_SECONDS = 1.0


def make_private_dirs(directory: Path) -> None:
    """Create `directory` and its missing parents 0700; existing ones are
    left as the operator made them."""
    missing = []
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        try:
            candidate.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile: theirs
        os.chmod(candidate, PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> bool:
    """Create an empty `path` 0600 (SQLite takes an empty file as a new
    database); False when it already exists, which is left alone."""
    make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def permission_bits(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def companions(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in COMPANION_SUFFIXES]


def match_companions(path: Path) -> None:
    """Narrow the `-wal`, `-shm` and journal files to the database file's
    permission bits when they are more open (never widen them)."""
    own = permission_bits(path)
    if own is None:
        return
    for companion in companions(path):
        bits = permission_bits(companion)
        if bits is not None and bits & ~own:
            try:
                os.chmod(companion, bits & own)
            except OSError:
                continue  # another user's file: doctor names the chmod to run


@dataclass(frozen=True, slots=True)
class FileIdentity:
    device: int
    inode: int


def identity_of(path: Path) -> FileIdentity | None:
    """The path's file now; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileIdentity(st.st_dev, st.st_ino)


class FileWatch:
    """Whether `path` is still the database file the connection opened.

    `check` looks again when IDENTITY_CHECK_SECONDS passed on the clock
    since the last look (or at once with `force`), and raises
    DatabaseReplaced for as long as the path names another file or none;
    the first time, it logs what happened and what to do. A file moved back
    is the same file again, and writes go on."""

    def __init__(
        self, path: Path, clock: Clock, *, interval: float = IDENTITY_CHECK_SECONDS
    ) -> None:
        self.path = path
        self._clock = clock
        self._interval = interval
        self._expected: FileIdentity | None = None
        self._checked_at: datetime | None = None
        self._problem: str | None = None

    def opened(self) -> None:
        """The connection has just opened the file at the path: remember it."""
        self._expected = identity_of(self.path)
        self._checked_at = self._clock.now()
        self._problem = None

    @property
    def problem(self) -> str | None:
        """What is wrong with the file, as of the last look."""
        return self._problem

    def check(self, *, force: bool = False) -> None:
        if self._expected is None:
            return
        now = self._clock.now()
        due = self._checked_at is None or (now - self._checked_at).total_seconds() >= self._interval
        if force or due:
            self._checked_at = now
            self._look()
        if self._problem is not None:
            raise DatabaseReplaced(self._problem)

    def _look(self) -> None:
        found = identity_of(self.path)
        if found == self._expected:
            if self._problem is not None:
                event(log, logging.WARNING, "database_file_back", path=self.path)
            self._problem = None
            return
        what = "deleted" if found is None else "replaced by another file"
        action = (
            f"move the file back to {self.path} (kept goes on by itself), or restore it "
            "from a backup and restart kept; unconfirmed updates arrive again"
        )
        still_open = deleted_but_open(self.path) if found is None else None
        if still_open is not None:
            action = (
                f"until kept stops, the deleted file is still at {still_open}: "
                f"`cp {still_open} {self.path}` and restart kept; or " + action
            )
        problem = (
            f"the database file {self.path} was {what} while kept had it open; "
            "no writes are taken and no update is confirmed until it is back or kept restarts"
        )
        if self._problem is None:
            event(
                log,
                logging.ERROR,
                "database_file_gone" if found is None else "database_file_replaced",
                path=self.path,
                action=action,
            )
        self._problem = problem


def deleted_but_open(path: Path) -> str | None:
    """Where this process still reaches a deleted `path` (Linux's
    /proc/PID/fd), or None."""
    gone = f"{path.absolute()} (deleted)"
    try:
        for entry in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(entry) == gone:
                    return f"/proc/{os.getpid()}/fd/{entry.name}"
    except OSError:
        return None
    return None
