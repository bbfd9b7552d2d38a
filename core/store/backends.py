"""`open_backend(url)`: every store for a `storage.url`, from one backend.

The one module that knows the backends; only the composition root
(bot/services.py) calls it, so importing a port never imports a backend.
The stores it returns still have to be opened (`await backend.open()` or
`async with backend:`); they share the transcript store's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Self

from core.clock import Clock
from core.commitments.jobs import ExtractionJobStore
from core.commitments.pause import PauseStore
from core.commitments.store import CommitmentStore
from core.heartbeat.store import HeartbeatStore
from core.limits.store import BudgetStore, UsageStore
from core.locks import SessionGuard
from core.pairing.store import PairingStore
from core.privacy.backup import DatabaseBackup
from core.privacy.store import ErasureStore, RetentionStore, StoredChats, UserExportStore
from core.reminders.store import ReminderStore
from core.store.app_state import AppStateStore
from core.store.base import Store
from core.store.errors import DatabaseMissing, masked_url
from core.store.parked import ParkedUpdates
from core.store.sql.app_state import SqlAppStateStore
from core.store.sql.commitments import SqlCommitmentStore
from core.store.sql.database import Database
from core.store.sql.erasure import SqlErasureStore
from core.store.sql.extraction_jobs import SqlExtractionJobStore, SqlPauseStore
from core.store.sql.followup_prefs import SqlFollowUpPreferenceStore
from core.store.sql.heartbeat import SqlHeartbeatStore
from core.store.sql.limits import SqlBudgetStore, SqlUsageStore
from core.store.sql.pairing import SqlPairingStore
from core.store.sql.parked import SqlParkedUpdates
from core.store.sql.reminders import SqlReminderStore
from core.store.sql.retention import SqlRetentionStore
from core.store.sql.stored_chats import SqlStoredChats
from core.store.sql.user_export import SqlUserExportStore
from core.store.sql.users import SqlUserZoneStore
from core.store.sqlite import (
    SqliteConnection,
    SqliteStore,
    SqliteWakeChannel,
)
from core.store.sqlite.backup import SqliteBackup
from core.store.sqlite.driver import sqlite3
from core.store.sqlite.erasure import SqliteErasurePurge
from core.store.sqlite.files import make_private_dirs
from core.store.updates import UpdateQueue
from core.users.store import FollowUpPreferenceStore, UserZoneStore
from core.wake import WakeChannel

_SQLITE_PREFIX = "sqlite:///"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_EXPECTED = "expected sqlite:///relative/path, sqlite:////absolute/path or sqlite:///:memory:"
_EXPECTED_ANY = f"{_EXPECTED}, or postgresql://user@host/database"


def database_errors() -> tuple[type[Exception], ...]:
    """What either backend's driver raises, for a command that reports a
    failed database call in one line (PostgreSQL's driver is imported only
    when asked: a SQLite deployment never loads it)."""
    import psycopg

    return (sqlite3.Error, psycopg.Error)


@dataclass(frozen=True, slots=True)
class Backend:
    """Every store of one database. Opening or closing the transcript store
    opens or closes its connection, which they all run on."""

    store: Store
    # That connection, as SQL written once runs on it (core/store/sql/database.py).
    database: Database
    commitments: CommitmentStore
    heartbeat: HeartbeatStore
    reminders: ReminderStore
    extraction_jobs: ExtractionJobStore
    extraction_pauses: PauseStore
    # Small values the bot keeps about itself (the synced command tree's hash).
    app_state: AppStateStore
    user_zones: UserZoneStore
    # Pairing codes and the users the operator approved (dmPolicy: pairing).
    pairing: PairingStore
    # Updates parked after failing while other chats' were stored.
    parked: ParkedUpdates
    # Everything kept holds from one user, counted and erased (core/privacy).
    erasure: ErasureStore
    # Each stored chat with its counts, for the operator (kept sessions list).
    chats: StoredChats
    # Everything held from or about one user, as one document (core/privacy/export.py).
    exports: UserExportStore
    # Whether kept follows up with a user (theirs) or in a group (its admin's).
    followup_prefs: FollowUpPreferenceStore
    # What outlived storage.retention, erased in batches (core/privacy/retention.py).
    retention: RetentionStore
    # Token budgets and what each model call used (core/limits/); rates are
    # decided where a message is stored (Store.admit_message).
    budgets: BudgetStore
    usage: UsageStore
    # A consistent copy while the bot runs; None where the database's own
    # tool does it (PostgreSQL: pg_dump).
    backup: DatabaseBackup | None = None
    # Keeps a chat's turns on one worker at a time across processes; None
    # when the backend serves one process only (SQLite).
    session_guard: SessionGuard | None = None
    # Carries wakes from other processes (workers, the CLI); None when
    # nothing else can write (an in-memory database).
    wake_channel: WakeChannel | None = None
    # Platform updates one worker receives and every worker processes (a
    # polled Telegram bot); None when one process does it all (SQLite).
    update_queue: UpdateQueue | None = None

    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        if self.session_guard is not None:
            await self.session_guard.close()
        if self.update_queue is not None:
            await self.update_queue.close()
        await self.store.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def sqlite_backend(store: SqliteStore) -> Backend:
    """Every SQLite store on `store`'s connection; a database file also gets
    the channel that hears the CLI's commits (an in-memory one has no other
    process)."""
    db = store.connection
    return Backend(
        store=store,
        database=db,
        commitments=SqlCommitmentStore(db),
        heartbeat=SqlHeartbeatStore(db),
        reminders=SqlReminderStore(db),
        extraction_jobs=SqlExtractionJobStore(db),
        extraction_pauses=SqlPauseStore(db),
        app_state=SqlAppStateStore(db),
        user_zones=SqlUserZoneStore(db),
        pairing=SqlPairingStore(db),
        parked=SqlParkedUpdates(db),
        erasure=SqlErasureStore(db, SqliteErasurePurge(db)),
        chats=SqlStoredChats(db),
        exports=SqlUserExportStore(db),
        followup_prefs=SqlFollowUpPreferenceStore(db),
        budgets=SqlBudgetStore(db),
        usage=SqlUsageStore(db),
        retention=SqlRetentionStore(db, SqliteErasurePurge(db)),
        backup=SqliteBackup(db.path),
        wake_channel=None if db.path == ":memory:" else SqliteWakeChannel(db),
    )


def postgres_backend(url: str, *, migrate: bool = True) -> Backend:
    """Every PostgreSQL store on one connection pool for `url`, the session
    guard that keeps a chat's turns on one worker at a time, and the queue
    that hands polled updates to every worker."""
    # Imported here: a SQLite bot never loads psycopg.
    from core.store.postgres import (
        PostgresConnection,
        PostgresSessionGuard,
        PostgresStore,
        PostgresUpdateQueue,
        PostgresWakeChannel,
    )
    from core.store.postgres.due_claims import pick_due_per_chat
    from core.store.postgres.erasure import PostgresErasurePurge

    connection = PostgresConnection(url, migrate=migrate)
    return Backend(
        store=PostgresStore(connection),
        database=connection,
        commitments=SqlCommitmentStore(connection),
        heartbeat=SqlHeartbeatStore(connection, pick_due=pick_due_per_chat),
        reminders=SqlReminderStore(connection),
        extraction_jobs=SqlExtractionJobStore(connection),
        extraction_pauses=SqlPauseStore(connection),
        app_state=SqlAppStateStore(connection),
        user_zones=SqlUserZoneStore(connection),
        pairing=SqlPairingStore(connection),
        parked=SqlParkedUpdates(connection),
        erasure=SqlErasureStore(connection, PostgresErasurePurge(connection)),
        chats=SqlStoredChats(connection),
        exports=SqlUserExportStore(connection),
        followup_prefs=SqlFollowUpPreferenceStore(connection),
        budgets=SqlBudgetStore(connection),
        usage=SqlUsageStore(connection),
        retention=SqlRetentionStore(connection, PostgresErasurePurge(connection)),
        session_guard=PostgresSessionGuard(url),
        wake_channel=PostgresWakeChannel(connection),
        update_queue=PostgresUpdateQueue(connection),
    )


def _check_postgres_url(url: str) -> None:
    """One clear line for a URL psycopg could not use."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # psycopg quotes the URL back in some reasons; the password stays out.
        shown = masked_url(url)
        reason = reason.replace(url, shown)
        raise ValueError(
            f"malformed storage URL {shown!r}: {reason}; expected postgresql://user@host/database"
        ) from None


def open_backend(
    url: str, *, base_dir: Path | None = None, create: bool = True, clock: Clock | None = None
) -> Backend:
    """Build the backend for `url` (not yet opened).

    `sqlite:///data/kept.sqlite` is relative to `base_dir` (default: the
    current directory), `sqlite:////var/lib/kept.sqlite` is absolute. Parent
    directories are created so a fresh checkout runs without setup; with
    `create=False` (every command but run, chat and import) nothing is
    created: a missing SQLite file raises DatabaseMissing, and opening never
    migrates (an older worker may still run on the database): a schema
    older than the code raises DatabaseOutdated.
    `postgresql://user@host/database` (or `postgres://`) is a PostgreSQL
    server, shared by several workers.
    A SQLite directory kept creates is 0700 and the file 0600; `clock` paces
    the check that the file is still the one opened (default: system time).
    """
    scheme = url.split(":", 1)[0] if ":" in url else url
    if scheme in _POSTGRES_SCHEMES:
        if not url.startswith(f"{scheme}://"):
            raise ValueError(f"malformed storage URL {masked_url(url)!r}: {_EXPECTED_ANY}")
        _check_postgres_url(url)
        return postgres_backend(url, migrate=create)
    if not url.startswith(_SQLITE_PREFIX):
        if scheme == "sqlite":
            raise ValueError(f"malformed storage URL {url!r}: {_EXPECTED}")
        raise ValueError(f"unsupported storage URL {url!r}: {_EXPECTED_ANY}")
    rest = url[len(_SQLITE_PREFIX) :]
    if rest == ":memory:":
        return sqlite_backend(SqliteStore(SqliteConnection(":memory:")))
    if rest.strip("/") == "":
        raise ValueError(f"storage URL {url!r} has no file path: {_EXPECTED}")
    if "?" in rest or "#" in rest:
        # Query parameters would be silently treated as part of the file name.
        raise ValueError(f"storage URL {url!r} must not contain '?' or '#': {_EXPECTED}")
    path = Path(rest)
    if not path.is_absolute():
        path = (base_dir if base_dir is not None else Path.cwd()) / path
    if not create:
        if not path.is_file():
            raise DatabaseMissing(f"no database at {path} (storage.url is {url!r})")
    else:
        make_private_dirs(path.parent)
    return sqlite_backend(SqliteStore(SqliteConnection(path, migrate=create, clock=clock)))
