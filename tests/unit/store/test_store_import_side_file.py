"""An import into an existing store works on a copy and swaps it in (issue 40).

Readers (another process: ``iogauge export --db``) open the store at any moment of an import
and read it as it was; a second import is refused with the first one's PID; a live writer
starting meanwhile leaves the DuckDB file alone; a store another program writes during the
import is kept as that program left it; a WAL a killed writer left is carried over.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.unit.store.test_store_bulk_append import _frame

from iogauge.errors import StoreError
from iogauge.model.device import DeviceInfo
from iogauge.store import Store
from iogauge.store.importing import StoreImport
from iogauge.store.live import LiveStore

ROOT = Path(__file__).resolve().parents[3]
RHEL6 = ROOT / "tests" / "fixtures" / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt"


def _iogauge(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("iogauge")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "iogauge"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "COLUMNS": "300"})


def _seed(path: Path, rows_s: int = 10) -> None:
    with Store.open(path) as st:
        st.append(_frame(0, rows_s, host="before"))


def test_a_reader_during_an_import_reads_the_store_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _seed(db)
    out = tmp_path / "x.parquet"
    with StoreImport(db) as imp:
        imp.add(_frame(0, 50))
        t0 = time.monotonic()
        res = _iogauge("export", "--db", str(db), "--parquet", str(out))
        waited_s = time.monotonic() - t0
        assert res.returncode == 0, res.stderr
        assert "exported 20 rows" in res.stderr  # the store as it was
        imp.commit()
    # Before, the reader retried for 10 s and was refused; now it never waits.
    assert waited_s < 9.0
    res = _iogauge("export", "--db", str(db), "--parquet", str(out))
    assert "exported 120 rows" in res.stderr, res.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".import")]


def test_a_second_import_into_the_store_is_refused_with_the_first_ones_pid(
        tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _seed(db)
    with StoreImport(db) as imp:
        imp.add(_frame(0, 5))
        res = _iogauge("import", str(RHEL6), "--db", str(db))
        imp.commit()
    assert res.returncode != 0
    text = " ".join(res.stderr.split())
    assert f"another process (PID {os.getpid()}) is already writing an import" in text
    with Store.open(db, read_only=True) as st:
        assert st.count() == 20 + 10  # the first import's rows; none of the refused one's


def test_a_live_writer_starting_during_an_import_leaves_the_file_alone(tmp_path: Path) -> None:
    """It checks the file read-only (no views refreshed), appends segments, and the
    import's swap keeps both: the segments are beside the file, not in it."""
    db = tmp_path / "s.duckdb"
    _seed(db)
    with StoreImport(db) as imp:
        imp.add(_frame(100, 5))
        with LiveStore.open(db) as live:
            live.append(_frame(200, 3, host="live"))
            live.append_devices("live", [DeviceInfo(name="sda", kind="disk")])
        assert imp.commit() == 10
    with Store.open(db, read_only=True) as st:
        assert st.count() == 20 + 10 + 6
        assert st.read(host="live").df.height == 6
        assert st.read_devices(host="live")["name"].to_list() == ["sda"]


def test_a_store_another_program_writes_during_the_import_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _seed(db)
    with StoreImport(db) as imp:
        imp.add(_frame(0, 5))
        with Store.open(db) as other:  # not an iogauge import: it takes no lock
            other.append(_frame(0, 4, host="other"))
        with pytest.raises(StoreError, match="another program wrote this store during the "
                           "import; nothing was imported"):
            imp.commit()
    with Store.open(db, read_only=True) as st:
        assert st.count() == 20 + 8
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".import")]


def test_the_rows_a_killed_writer_left_in_the_wal_are_carried_over(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _seed(db)
    code = ("import os, sys\nfrom iogauge.store import Store\n"
            "from tests.unit.store.test_store_bulk_append import _frame\n"
            "st = Store.open(sys.argv[1])\nst.append(_frame(0, 7, host='wal'))\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, cwd=ROOT, timeout=60)
    assert db.with_name(db.name + ".wal").exists()
    with StoreImport(db) as imp:
        imp.add(_frame(0, 5))
        imp.commit()
    with Store.open(db, read_only=True) as st:
        assert st.read(host="wal").df.height == 14
        assert st.count() == 20 + 14 + 10


def test_the_store_keeps_its_file_mode(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _seed(db)
    db.chmod(0o640)
    with StoreImport(db) as imp:
        imp.add(_frame(0, 5))
        imp.commit()
    assert db.stat().st_mode & 0o777 == 0o640


def test_a_store_written_before_takes_an_import_then_a_live_writer(tmp_path: Path) -> None:
    """Migration: a store of an iogauge before issue 40 (no live directory) gets the import
    (which leaves only its lock there), and the first live writer still says, once, that
    its rows go to segments."""
    db = tmp_path / "old.duckdb"
    _seed(db)
    with StoreImport(db) as imp:
        imp.add(_frame(0, 5))
        imp.commit()
    with LiveStore.open(db) as live:
        assert live.note is not None and "segments" in live.note
        live.append(_frame(300, 2, host="live"))
    with LiveStore.open(db) as live:
        assert live.note is None
    with Store.open(db, read_only=True) as st:
        assert st.count() == 20 + 10 + 4


def test_a_store_reached_through_a_symlink_stays_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "data" / "s.duckdb"
    real.parent.mkdir()
    _seed(real)
    link = tmp_path / "s.duckdb"
    link.symlink_to(real)
    with StoreImport(link) as imp:
        imp.add(_frame(0, 5))
        imp.commit()
    assert link.is_symlink()
    with Store.open(real, read_only=True) as st:
        assert st.count() == 20 + 10
