"""Reading a store while `iogauge record` writes it (issue 40).

`record` runs on the real /proc/diskstats at 1 s, then at 0.1 s, into one store, while a loop
runs `analyze --db`, `report --db`, `export --db` and a plain DuckDB `SELECT count(*)` in
another process. Every read must succeed, see rows no older than the flush interval (plus
one sample interval and scheduling slack) and never see fewer rows than the read before it.
About a minute (IOGAUGE_E2E_SCALE=3: three).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iogauge.model.sampleframe import SampleFrame

pytestmark = pytest.mark.slow

#: A loaded 2-core machine: process start-up and scheduling on top of flush + interval.
SLACK_S = 2.0
#: CI runs about a minute; IOGAUGE_E2E_SCALE=3 runs the same checks for over three.
SCALE = float(os.environ.get("IOGAUGE_E2E_SCALE", "1"))
_RAW = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
n, newest = con.execute("SELECT count(*), epoch(max(ts)) FROM samples_live").fetchone()
print(n, newest)
"""


def _iogauge() -> list[str]:
    exe = Path(sys.executable).with_name("iogauge")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "iogauge"]


if not Path("/proc/diskstats").exists():  # pragma: no cover - containers without it
    pytest.skip("no /proc/diskstats on this machine", allow_module_level=True)


@dataclass
class Read:
    kind: str
    started: float  # wall clock when the reader was launched
    rows: int | None
    newest: float | None  # epoch seconds of the newest row the reader saw


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 0, f"{cmd[1:3]} failed while recording:\n{proc.stderr}"
    return proc


def _read(kind: str, db: Path, tmp: Path) -> Read:
    t0 = time.time()
    if kind == "analyze":
        doc = json.loads(_run([*_iogauge(), "analyze", "--db", str(db), "--json"]).stdout)
        rows = sum(int(d["attributes"]["intervals"]) for d in doc["devices"])
        return Read(kind, t0, None, datetime.fromisoformat(doc["end"]).timestamp()
                    if rows else None)
    if kind == "report":
        out = tmp / "r.html"
        _run([*_iogauge(), "report", "--db", str(db), "-o", str(out)])
        assert out.stat().st_size > 10_000
        return Read(kind, t0, None, None)
    if kind == "export":
        out = tmp / "x.parquet"
        proc = _run([*_iogauge(), "export", "--db", str(db), "--parquet", str(out)])
        frame = SampleFrame.read_parquet(out)  # the SampleFrame schema, validated
        m = re.search(r"exported (\d+) rows", proc.stderr)
        assert m is not None and int(m[1]) == len(frame), proc.stderr
        newest = frame.df["ts"].max()
        return Read(kind, t0, len(frame),
                    newest.timestamp() if isinstance(newest, datetime) else None)
    n, newest = _run([sys.executable, "-c", _RAW, str(db)]).stdout.split()
    return Read(kind, t0, int(n), None if newest == "None" else float(newest))


def _record(db: Path, interval_s: float, flush_s: float, duration_s: float
            ) -> subprocess.Popen[str]:
    return subprocess.Popen([*_iogauge(), "record", "--db", str(db), "--all", "--interval",
                             str(interval_s), "--flush", str(flush_s), "--duration",
                             str(duration_s)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_readers_see_fresh_growing_data_while_record_writes(tmp_path: Path) -> None:
    db = tmp_path / "live.duckdb"
    kinds = ["raw", "analyze", "export", "report"]
    reads: list[Read] = []
    last_rows: dict[str, int] = {}
    ages: list[float] = []
    for interval_s, flush_s, duration_s in ((1.0, 2.0, 40.0 * SCALE), (0.1, 1.0, 25.0 * SCALE)):
        launched = time.time()
        rec = _record(db, interval_s, flush_s, duration_s)
        begun: float | None = None  # this writer's first flush seen (start-up varies with load)
        bound = flush_s + interval_s + SLACK_S
        while rec.poll() is None:
            if not db.exists():
                time.sleep(0.2)
                continue
            # analyze and report refuse a store without samples: first wait for the first flush
            kind = kinds[len(reads) % len(kinds)] if last_rows.get("raw") else "raw"
            r = _read(kind, db, tmp_path)
            if begun is None and (r.newest or 0) >= launched:
                begun = r.started
            reads.append(r)
            if r.rows is not None:
                assert r.rows >= last_rows.get(r.kind, 0), (r, last_rows)
                last_rows[r.kind] = r.rows
            # Fresh: what was flushed when the reader started is in what it saw.
            if (begun is not None and r.started - begun > bound and rec.poll() is None
                    and r.kind != "report"):
                ages.append(r.started - (r.newest or 0))
                assert r.newest is not None and r.newest >= r.started - bound, (
                    f"{r.kind} saw data {r.started - (r.newest or 0):.1f} s old "
                    f"(bound {bound} s)")
        _out, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
    per_kind = ", ".join(f"{k} {sum(r.kind == k for r in reads)}" for k in kinds)
    print(f"{len(reads)} reads ({per_kind}), oldest newest row at a read's start "
          f"{max(ages):.2f} s, rows {last_rows}")
    assert {r.kind for r in reads} == set(kinds)
    assert len(reads) >= 20
    final = _read("raw", db, tmp_path)
    assert final.rows is not None and final.rows >= max(last_rows.values())
    assert datetime.now(UTC).timestamp() - (final.newest or 0) < 60
