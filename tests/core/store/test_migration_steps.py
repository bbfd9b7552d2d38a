"""One list of schema steps for both backends, and the renumbering of
databases recorded in a backend's old numbering (SQLite's 15 steps,
PostgreSQL's 13)."""

from __future__ import annotations

import pytest

from core.store import migration_steps
from core.store.errors import MigrationError
from core.store.migration_steps import STEPS, LegacyStep, Step, renumber
from core.store.postgres import migrations as postgres
from core.store.sqlite import migrations as sqlite

SHARED = [(step.version, step.name) for step in STEPS]


def test_both_backends_follow_the_shared_steps() -> None:
    assert [(m.version, m.name) for m in sqlite.load_migrations()] == SHARED
    assert [(m.version, m.name) for m in postgres.load_migrations()] == SHARED
    assert SHARED[:3] == [(1, "transcript"), (2, "search"), (3, "commitments")]
    assert len(SHARED) == 22


@pytest.mark.parametrize(
    ("backend", "only_elsewhere"),
    [(sqlite, {"update_queue", "search_scope"}), (postgres, {"agent_ranges"})],
)
def test_a_step_of_the_other_backend_is_a_no_op(backend: object, only_elsewhere: set[str]) -> None:
    loaded = backend.load_migrations()  # type: ignore[attr-defined]
    empty = {m.name for m in loaded if not (m.sql or "").strip() and not getattr(m, "upgrade", 0)}
    assert empty == only_elsewhere


@pytest.mark.parametrize("old", [sqlite.OLD_NUMBERING, postgres.OLD_NUMBERING])
def test_the_old_numberings_end_where_the_shared_list_ends(old: tuple[LegacyStep, ...]) -> None:
    assert old[-1].reaches == len(STEPS)
    assert [s.reaches for s in old] == sorted({s.reaches for s in old})


def test_renumbering_sqlite_rows() -> None:
    old = [(v, s.name) for v, s in enumerate(sqlite.OLD_NUMBERING, start=1)]
    assert renumber(old[:1], sqlite.OLD_NUMBERING) == [(1, Step(1, "transcript"))]
    after_user_zones = renumber(old[:10], sqlite.OLD_NUMBERING)
    assert after_user_zones is not None
    assert [(old_v, s.version, s.name) for old_v, s in after_user_zones[8:]] == [
        (9, 9, "extraction_pauses"),
        (10, 10, "update_queue"),
        (10, 11, "search_scope"),
        (10, 12, "user_zones"),
    ]
    everything = renumber(old, sqlite.OLD_NUMBERING)
    assert everything is not None
    assert [(s.version, s.name) for _, s in everything] == SHARED


def test_renumbering_postgres_rows() -> None:
    old = [(v, s.name) for v, s in enumerate(postgres.OLD_NUMBERING, start=1)]
    # Its first two steps were numbered as the shared ones: nothing to do.
    assert renumber(old[:2], postgres.OLD_NUMBERING) is None
    followups = renumber(old[:3], postgres.OLD_NUMBERING)
    assert followups is not None
    # The old third step ("followups") is shared steps 3 to 7.
    pairs = [(o, s.version) for o, s in followups]
    assert pairs == [(1, 1), (2, 2), (3, 3), (3, 4), (3, 5), (3, 6), (3, 7)]
    everything = renumber(old, postgres.OLD_NUMBERING)
    assert everything is not None
    assert [(s.version, s.name) for _, s in everything] == SHARED


@pytest.mark.parametrize(
    "applied",
    [
        [],
        SHARED,
        SHARED[:5],
        [*SHARED, (18, "future")],
        [(1, "initial"), (2, "search"), (999, "future")],
        [(1, "initial"), (3, "commitments")],
    ],
)
def test_rows_not_in_the_old_numbering_are_left_alone(applied: list[tuple[int, str]]) -> None:
    assert renumber(applied, sqlite.OLD_NUMBERING) is None
    assert renumber(applied, postgres.OLD_NUMBERING) is None
    # Rows in an old numbering are renumbered.
    old = [(v, s.name) for v, s in enumerate(sqlite.OLD_NUMBERING, start=1)]
    assert renumber(old, sqlite.OLD_NUMBERING) is not None


def test_a_misnamed_step_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migration_steps, "STEPS", (*STEPS, Step(18, "missing")))
    with pytest.raises(MigrationError, match="shared steps"):
        sqlite.load_migrations()
