"""`iogauge import --db` streams: SampleFrames go into the store batch by batch, in one
transaction, with exactly the rows (and replace rule) of one append of everything, and a bad
line deep in a log leaves the store exactly as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from tests.helpers.importing import small_iostat_pieces
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.importers.registry import import_file
from iogauge.model.sampleframe import SampleFrame
from iogauge.store import Store, duckdb_store

FIX = Path(__file__).resolve().parents[2] / "fixtures"
RHEL6 = FIX / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt"
SYSSTAT117 = FIX / "iostat" / "iostat-tool-sysstat11.7.3-iostat-x-t.txt"


def _added(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every batch the store took (BulkAppend.add), in order."""
    added: list[int] = []
    real = duckdb_store.BulkAppend.add

    def add(self: duckdb_store.BulkAppend, frame: SampleFrame) -> int:
        n = real(self, frame)
        added.append(n)
        return n

    monkeypatch.setattr(duckdb_store.BulkAppend, "add", add)
    return added


def _seed(db: Path) -> pl.DataFrame:
    """A store holding the SYSSTAT117 log and the first 1,000 rows of the RHEL 6 log with
    r_await_ms + 1000 (a re-import replaces these); returns its rows."""
    rhel6 = import_file(RHEL6).frame.df.head(1_000)
    with Store.open(db) as st:
        st.append(import_file(SYSSTAT117).frame)
        st.append(SampleFrame(rhel6.with_columns(pl.col("r_await_ms") + 1000.0)))
        return st.read().df


def test_streamed_import_stores_exactly_what_one_append_of_every_row_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The RHEL 6 log twice under two names: the same host, devices and times, so the second
    # file repeats every key of the first (one append keeps both copies; batch k+1 must not
    # replace what batch k stored).
    copy = tmp_path / "rhel6-copy.txt"
    shutil.copy(RHEL6, copy)
    one = tmp_path / "one.duckdb"
    _seed(one)
    whole = SampleFrame.concat([import_file(RHEL6).frame, import_file(copy).frame])
    with Store.open(one) as st:
        st.append(whole, replace=True)
        expected = st.read().df
    db = tmp_path / "streamed.duckdb"
    _seed(db)
    yielded = small_iostat_pieces(monkeypatch)
    added = _added(monkeypatch)
    res = CliRunner().invoke(app, ["import", str(RHEL6), str(copy), "--db", str(db)],
                             terminal_width=250)
    assert res.exit_code == 0, res.output
    assert len(yielded) > 20 and added == yielded  # every piece went in as its own batch
    with Store.open(db, read_only=True) as st:
        got = st.read().df
    assert got.equals(expected)  # same rows, same order
    assert got.height == 82 + 2 * 3_498  # the SYSSTAT117 log's 82 rows stay beside both copies
    assert got.filter(pl.col("r_await_ms") >= 1000.0).is_empty()  # the seeded rows replaced
    # the summary: 11 devices x 318 reports per file, and the total
    assert res.stdout.count("3,498") == 2
    assert f"6,996 rows stored in {db}" in res.stdout.replace("\n", "")


def test_a_bad_line_in_a_later_batch_leaves_the_store_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = RHEL6.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("sdb ")][250]
    lines[at] = "sdb   1.00\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    db = tmp_path / "s.duckdb"
    before = _seed(db)
    small_iostat_pieces(monkeypatch)
    added = _added(monkeypatch)
    res = CliRunner().invoke(app, ["import", str(bad), "--db", str(db)])
    assert res.exit_code == 2
    assert f"{bad}:{at + 1}:" in res.output.replace("\n", "")
    assert "nothing was written" in res.output
    assert sum(added) > 2_000  # most of the file had gone into the transaction ...
    with Store.open(db, read_only=True) as st:
        assert st.read().df.equals(before)  # ... which was rolled back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "s.duckdb"]


def test_a_bad_line_in_a_later_batch_creates_no_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = RHEL6.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("sda ")][300]
    lines[at] = "sda   x\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    small_iostat_pieces(monkeypatch)
    added = _added(monkeypatch)
    db = tmp_path / "new" / "s.duckdb"
    res = CliRunner().invoke(app, ["import", str(RHEL6), str(bad), "--db", str(db)])
    assert res.exit_code == 2
    assert sum(added) > 3_498  # the good file and most of the bad one had gone in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


@pytest.mark.parametrize("existing", [False, True], ids=["new store", "existing store"])
def test_an_import_of_less_than_a_row_group_commits(tmp_path: Path, existing: bool) -> None:
    """The commit moves the last, partial row group into the table and cannot spill it: under
    the 32 MiB bulk limit an import of 35-120 thousand rows (a 5-15 MB iostat log) failed at
    the COMMIT ("could not allocate block of size 256.0 KiB"). 16 copies of the RHEL 6 log,
    55,968 rows, stay under DuckDB's 122,880-row row group (they failed before the fix)."""
    files = []
    for k in range(16):
        files.append(tmp_path / f"rhel6-{k:02d}.txt")
        shutil.copy(RHEL6, files[-1])
    db = tmp_path / "s.duckdb"
    if existing:
        _seed(db)  # its 1,000 RHEL 6 rows are replaced, the SYSSTAT117 log's 82 stay
    res = CliRunner().invoke(app, ["import", *map(str, files), "--db", str(db)],
                             terminal_width=250)
    assert res.exit_code == 0, res.output
    assert f"55,968 rows stored in {db}" in res.stdout.replace("\n", "")
    with Store.open(db, read_only=True) as st:
        got = st.read().df
    # the copies repeat each other's keys: within one import every copy is kept
    assert got.height == 16 * 3_498 + (82 if existing else 0)
    assert got.group_by("host", "device", "ts").len()["len"].max() == 16
