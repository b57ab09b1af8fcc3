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


def test_streamed_import_stores_exactly_what_importing_file_after_file_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The RHEL 6 log twice under two names: the same host, devices and times, so the second
    # file repeats every key of the first. The store must end as after two imports, one file
    # each: the copy's rows replace the first file's (not both kept, as one append of every
    # row would), and batch k+1 of a file must not replace what batch k of it stored.
    copy = tmp_path / "rhel6-copy.txt"
    shutil.copy(RHEL6, copy)
    one = tmp_path / "one.duckdb"
    _seed(one)
    with Store.open(one) as st:
        for path in (RHEL6, copy):
            st.append(import_file(path).frame, replace=True)
        expected = st.read().df
    db = tmp_path / "streamed.duckdb"
    _seed(db)
    yielded = small_iostat_pieces(monkeypatch)
    added = _added(monkeypatch)
    res = CliRunner().invoke(
        app, ["import", str(RHEL6), str(copy), "--db", str(db)], terminal_width=250)
    assert res.exit_code == 0, res.output
    assert len(yielded) > 20 and added == yielded  # every piece went in as its own batch
    with Store.open(db, read_only=True) as st:
        got = st.read().df
    assert got.equals(expected)  # same rows, same order
    assert got.height == 82 + 3_498  # the SYSSTAT117 log's 82 rows stay beside one copy
    assert got.filter(pl.col("r_await_ms") >= 1000.0).is_empty()  # the seeded rows replaced
    # the summary: 11 devices x 318 reports per file, and what the store holds of them
    assert res.stdout.count("3,498") == 3
    assert f"3,498 rows stored in {db}" in res.stdout.replace("\n", "")
    assert (f"{copy}: 3,498 row(s) replaced those of an earlier file of this import"
            in " ".join(res.stderr.split()))


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
    # No side file left; the live directory keeps the import's lock (issue 40).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "s.duckdb", "s.duckdb.live"]
    assert [p.name for p in (tmp_path / "s.duckdb.live").iterdir()] == ["import.lock"]


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
    55,968 rows, stay under DuckDB's 122,880-row row group (they failed before the fix);
    each copy is moved to another day, since a later file's rows replace an earlier one's
    with the same key."""
    files = []
    text = RHEL6.read_text()
    for k in range(16):
        files.append(tmp_path / f"rhel6-{k:02d}.txt")
        files[-1].write_text(text.replace("06/13/2018", f"06/{k + 1:02d}/2018"))
    db = tmp_path / "s.duckdb"
    if existing:
        _seed(db)  # its 1,000 RHEL 6 rows are replaced, the SYSSTAT117 log's 82 stay
    res = CliRunner().invoke(app, ["import", *map(str, files), "--db", str(db)],
                             terminal_width=250)
    assert res.exit_code == 0, res.output
    assert f"55,968 rows stored in {db}" in res.stdout.replace("\n", "")
    with Store.open(db, read_only=True) as st:
        got = st.read().df
    assert got.height == 16 * 3_498 + (82 if existing else 0)
    assert got.group_by("host", "device", "ts").len()["len"].max() == 1


def test_wait_events_of_a_report_and_its_copy_are_stored_once(tmp_path: Path) -> None:
    awr = FIX / "awr" / "awr_112_config5-1-1_hdd_cache1024m.txt"
    copy = tmp_path / "copy.txt"
    shutil.copy(awr, copy)
    db, once = tmp_path / "two.duckdb", tmp_path / "one.duckdb"
    for target, files in ((once, [awr]), (db, [awr, copy])):
        res = CliRunner().invoke(app, ["import", *map(str, files), "--db", str(target)],
                                 terminal_width=250)
        assert res.exit_code == 0, res.output
    with Store.open(once, read_only=True) as st:
        rows, waits = st.count(), len(st.read_waits())
    assert rows > 0 and waits > 0
    with Store.open(db, read_only=True) as st:
        assert (st.count(), len(st.read_waits())) == (rows, waits)
    said = " ".join(res.stderr.split())
    assert f"{copy}: {rows:,} row(s) replaced those of an earlier file" in said
    assert f"{copy}: {waits:,} wait event row(s) replaced those of an earlier file" in said
