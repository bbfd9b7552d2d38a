"""What it costs to take an erased message's words out of the FTS5 index.

FTS5 keeps a deleted row's terms in its segments until they merge. Two ways
to remove them at once, each timed here at N rows (12 words a row, 300
live single-row writes after the bulk, as a running bot leaves it):

- `optimize`: merge every segment into one inside the erasing transaction
  (what kept does on the SQLite this Python links);
- `secure-delete`: FTS5's option (SQLite >= 3.42) that removes a deleted
  row's entries from the segments as it deletes; measured only where such a
  SQLite is importable (`pip install pysqlite3-binary`, which bundles one).

For each: the erasing transaction's time, whether a tail of the erased word
is still in an index block or in the file, and the time of 1,000 ordinary
single-row writes afterwards (the price the option puts on every write).

    .venv/bin/python bench/fts_purge.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from core.store.sqlite.driver import sqlite3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import print_metrics

SECRET = "qwxzyplonk"
INSERT = "INSERT INTO f(rowid, words, grams, session) VALUES (?, ?, '', ?)"
TAIL = SECRET[4:].encode()


def _driver_with_secure_delete() -> ModuleType | None:
    try:
        import pysqlite3.dbapi2 as newer  # type: ignore[import-not-found]
    except ImportError:
        return None
    version = tuple(int(p) for p in newer.sqlite_version.split("."))
    return newer if version >= (3, 42) else None


def _run(driver: Any, path: Path, rows: int, mode: str) -> dict[str, Any]:
    rng = random.Random(1)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(20_000)
    ]
    db = driver.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA secure_delete = ON")
    db.execute(
        "CREATE VIRTUAL TABLE f USING fts5(words, grams, session, "
        "tokenize = \"unicode61 remove_diacritics 2 categories 'L* N* Co M*'\")"
    )
    if mode == "secure-delete":
        db.execute("INSERT INTO f(f, rank) VALUES ('secure-delete', 1)")
    db.execute("BEGIN")
    for i in range(rows):
        text = " ".join(rng.choices(words, k=12))
        db.execute(INSERT, (i + 1, text, f"s{i % 500}"))
        if i == rows // 2:
            db.execute(INSERT, (rows + 10, f"my {SECRET} secret", "s1"))
        if i % 20_000 == 0:
            db.execute("COMMIT")
            db.execute("BEGIN")
    db.execute("COMMIT")
    for i in range(300):
        text = " ".join(rng.choices(words, k=12))
        db.execute(INSERT, (rows + 100 + i, text, "s2"))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    holding = "SELECT count(*) FROM f_data WHERE instr(block, CAST(? AS BLOB)) > 0"
    started = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.execute("DELETE FROM f WHERE rowid = ?", (rows + 10,))
    if mode == "optimize":
        db.execute("INSERT INTO f(f) VALUES ('optimize')")
    db.execute("COMMIT")
    erase_s = time.perf_counter() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    left_in_index = db.execute(holding, (TAIL,)).fetchone()[0]
    started = time.perf_counter()
    for i in range(1000):
        text = " ".join(rng.choices(words, k=12))
        db.execute(INSERT, (rows + 1000 + i, text, "s3"))
    writes_s = time.perf_counter() - started
    db.close()
    return {
        "sqlite": driver.sqlite_version,
        "erase_ms": round(erase_s * 1000, 1),
        "left_in_index_blocks": left_in_index,
        "left_in_file": TAIL in path.read_bytes(),
        "writes_1000_ms": round(writes_s * 1000, 1),
        "db_mb": round(path.stat().st_size / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    result: dict[str, Any] = {"bench": "fts_purge", "rows": args.rows}
    newer = _driver_with_secure_delete()
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        driver = newer or sqlite3
        result["optimize"] = _run(driver, here / "optimize.sqlite", args.rows, "optimize")
        if newer is None:
            result["secure_delete"] = "not measured: no SQLite >= 3.42 (pysqlite3-binary)"
        else:
            secure = _run(newer, here / "secure.sqlite", args.rows, "secure-delete")
            result["secure_delete"] = secure
    print_metrics(f"FTS5: removing an erased row's words at {args.rows:,} rows", result)


if __name__ == "__main__":
    main()
