"""The labelled set is package data: found through importlib.resources in
the installed `core.evaluation`, never through the source tree's tests/, so
`kept eval` works from a wheel."""

from __future__ import annotations

import json
import zipfile
from importlib.resources import files
from pathlib import Path

from click.testing import CliRunner

from bot.cli import main
from core.evaluation.cases import LANGUAGES, labelled_set, load_cases

TESTS = Path(__file__).resolve().parents[2]


def test_the_set_is_found_in_the_package() -> None:
    found = labelled_set()
    package = files("core.evaluation")
    assert str(found) == str(package.joinpath("data", "extraction"))
    assert not Path(str(found)).resolve().is_relative_to(TESTS)
    cases = load_cases(found)
    assert len(cases) == 360
    assert {c.lang for c in cases} == set(LANGUAGES)


def test_the_set_loads_from_a_zip_as_well(tmp_path: Path) -> None:
    # A Traversable that is not a directory on disk (a zipped install).
    archive = tmp_path / "set.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for file in labelled_set().iterdir():
            zipped.writestr(f"extraction/{file.name}", file.read_bytes())
    zipped_set = zipfile.Path(archive, "extraction/")
    assert [c.id for c in load_cases(zipped_set)] == [c.id for c in load_cases(labelled_set())]


def test_kept_eval_cases_reads_the_bundled_set_by_default() -> None:
    result = CliRunner().invoke(main, ["eval", "cases", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["cases"] == 360
    assert doc["casesPath"] == str(labelled_set())
    assert sorted(doc["languages"]) == sorted(LANGUAGES)
