"""`iogauge import` end to end on fixtures: store (idempotent), JSON, Parquet, errors."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from tests.helpers.importing import small_iostat_pieces
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.errors import InputFormatError
from iogauge.importers.registry import import_file
from iogauge.model.sampleframe import SCHEMA, SampleFrame
from iogauge.store import Store

FIX = Path(__file__).resolve().parents[1] / "fixtures"
IOSTAT = FIX / "iostat" / "jc-ubuntu-20.10-sysstat12-iostat-x.txt"
AWR = next((FIX / "awr").glob("*.txt"))


def test_import_into_store_twice_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    args = ["import", str(IOSTAT), str(AWR), "--db", str(db)]
    first = CliRunner().invoke(app, args, terminal_width=200)
    assert first.exit_code == 0, first.output
    with Store.open(db, read_only=True) as s:
        rows, waits = s.count(), len(s.read_waits())
    assert rows > 0
    assert waits > 0
    second = CliRunner().invoke(app, args, terminal_width=200)
    assert second.exit_code == 0, second.output
    with Store.open(db, read_only=True) as s:
        assert s.count() == rows
        assert len(s.read_waits()) == waits
    assert "iostat" in first.stdout
    assert "awr" in first.stdout


def test_import_json_and_parquet_agree_on_compressed_input(tmp_path: Path) -> None:
    gz = tmp_path / "log.gz"
    gz.write_bytes(gzip.compress(IOSTAT.read_bytes()))
    res = CliRunner().invoke(app, ["import", str(gz), "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert rows
    assert all(set(r) <= set(SCHEMA) for r in rows)
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(app, ["import", str(gz), "--parquet", str(out)])
    assert res.exit_code == 0, res.output
    frame = SampleFrame.read_parquet(out)
    assert len(frame) == len(rows)
    sda = next(r for r in rows if r["device"] == "sda")
    # jc-ubuntu-20.10 sample, sda line: r/s 2.67, r_await 0.36 (as sysstat printed).
    assert sda["r_iops"] == 2.67
    assert sda["r_await_ms"] == 0.36


def test_one_bad_file_stores_nothing_and_names_every_failure(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("nothing to see\n")
    db = tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["import", str(IOSTAT), str(junk), "--db", str(db)])
    assert res.exit_code == 2
    assert "format not recognised" in res.output
    assert "nothing was written" in res.output
    assert not db.exists()


def test_glob_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["import", str(tmp_path / "*.log")])
    assert res.exit_code == 2
    assert "no file matches" in res.output


def test_lenient_reports_skipped_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    text = IOSTAT.read_text().splitlines()
    # Damage one device line in the middle of the report.
    idx = next(i for i, line in enumerate(text) if line.startswith("loop3"))
    text[idx] = "loop3  x.xx  oops"
    bad.write_text("\n".join(text) + "\n")
    strict = CliRunner().invoke(app, ["import", str(bad), "--json"])
    assert strict.exit_code == 2
    assert f"{bad}:{idx + 1}:" in strict.output.replace("\n", "")
    lenient = CliRunner().invoke(app, ["import", str(bad), "--json", "--lenient"])
    assert lenient.exit_code == 0, lenient.output
    assert "skipped 1 unreadable line" in lenient.output


def test_forced_format_and_unknown_zone(tmp_path: Path) -> None:
    copy = tmp_path / "x.data"
    shutil.copy(IOSTAT, copy)
    res = CliRunner().invoke(app, ["import", str(copy), "--format", "iostat", "--json"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["import", str(copy), "--tz", "Mars/Olympus", "--json"])
    assert res.exit_code == 2
    assert "unknown time zone" in res.output


# ---- streaming: --parquet and --db read iostat logs piece by piece -------------------------

RHEL6 = FIX / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt"
SYSSTAT117 = FIX / "iostat" / "iostat-tool-sysstat11.7.3-iostat-x-t.txt"


def test_streamed_parquet_has_exactly_the_rows_of_the_in_memory_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gz = tmp_path / "sysstat117.txt.gz"
    gz.write_bytes(gzip.compress(SYSSTAT117.read_bytes()))
    whole = pl.concat([import_file(RHEL6).frame.df, import_file(gz).frame.df])
    yielded = small_iostat_pieces(monkeypatch)
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(app, ["import", str(RHEL6), str(gz), "--parquet", str(out)])
    assert res.exit_code == 0, res.output
    assert len(yielded) > 10  # many SampleFrames streamed, none held for the end
    streamed = SampleFrame.read_parquet(out).df
    assert streamed.equals(whole)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["o.parquet", gz.name])
    # the summary counts what went by: 11 devices x 318 reports in the RHEL 6 log
    assert "3,498" in res.stdout


def test_streamed_store_import_has_exactly_the_rows_of_the_in_memory_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = import_file(RHEL6).frame.df
    yielded = small_iostat_pieces(monkeypatch)
    db = tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["import", str(RHEL6), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert len(yielded) > 10
    with Store.open(db, read_only=True) as s:
        stored = s.read().df
    key = ["device", "ts"]
    assert stored.sort(key).equals(whole.sort(key))


def test_streamed_parquet_writes_nothing_when_a_line_deep_in_the_log_is_bad(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = RHEL6.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("sdb ")][250]
    lines[at] = "sdb   1.00\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    yielded = small_iostat_pieces(monkeypatch)
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(app, ["import", str(bad), "--parquet", str(out)])
    assert res.exit_code == 2
    assert yielded  # frames before the bad line had been streamed out ...
    assert f"{bad}:{at + 1}:" in res.output.replace("\n", "")
    assert "nothing was written" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]  # ... to a file deleted


@pytest.mark.parametrize("out", ["--db", "--parquet", "--json"])
def test_an_importer_bug_names_the_file_and_stores_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str) -> None:
    """An importer that raises something other than an IogaugeError (a bug; a polars
    panic is a BaseException) fails its file by name, like a bad line, not with a traceback;
    the other files are still read and nothing is written."""
    from iogauge.importers import iostat, registry

    class Panic(BaseException):  # as pyo3's PanicException: not an Exception
        pass

    real = registry.load
    target = "iter_parse"  # (every importer is read through it: registry.open_file)

    def broken(*_a: object, **_k: object) -> object:
        raise Panic("assertion failed: i < self.len()")

    def load(name: str) -> object:
        module = real(name)
        if name != "iostat":
            return module
        fake = type(iostat)("fake_iostat")
        fake.__dict__.update({k: v for k, v in iostat.__dict__.items()
                              if k not in ("parse", "iter_parse")})
        setattr(fake, target, broken)
        return fake

    monkeypatch.setattr(registry, "load", load)
    dest = tmp_path / ("o.parquet" if out == "--parquet" else "s.duckdb")
    args = ["import", str(IOSTAT), str(AWR), *([out] if out == "--json" else [out, str(dest)])]
    res = CliRunner().invoke(app, args, terminal_width=300)
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, Panic)
    text = " ".join(res.output.split())
    assert f"{IOSTAT}: the iostat importer failed unexpectedly (Panic: assertion failed" in text
    assert "1 of 2 file(s) failed; nothing was written" in text
    assert not dest.exists()
    with pytest.raises(InputFormatError, match="failed unexpectedly"):
        import_file(IOSTAT)


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_compressed_log_corrupt_past_its_head_is_a_read_error(tmp_path: Path,
                                                               kind: str) -> None:
    """Damage deep in a compressed log: a read error naming the file ("cannot read" while
    the pieces are read, "cannot decompress" if the sniffed head meets it), not an importer
    bug; zstd's ZstdError is one of them (it escaped raw before)."""
    import zstandard

    text = IOSTAT.read_bytes() * 60  # ~500 KB: the damage lies past the 64 KiB head
    packed = (gzip.compress(text) if kind == "gzip"
              else zstandard.ZstdCompressor().compress(text))
    bad = tmp_path / ("log.gz" if kind == "gzip" else "log.zst")
    bad.write_bytes(packed[:len(packed) * 3 // 4] + b"\x00garbage" * 64)
    for args in (["--json"], ["--parquet", str(tmp_path / "o.parquet")]):
        res = CliRunner().invoke(app, ["import", str(bad), *args], terminal_width=300)
        assert res.exit_code == 2, res.output
        text_out = " ".join(res.output.split())
        assert (f"{bad}: cannot read ({kind}):" in text_out
                or f"{bad}: cannot decompress ({kind}):" in text_out), text_out
        assert "unexpectedly" not in text_out
    with pytest.raises(InputFormatError, match=rf"cannot decompress \({kind}\)"):
        import_file(bad)
