"""The store while recording: the DuckDB-only layout (before) against live segments (after).

Writes the same day of 1 s samples for 20 devices (synthetic: every metric a gamma-distributed
value with 2 decimals, so they compress about as badly as real counters) twice, as
``iogauge record`` commits it, one batch per 5 s flush:

* **before**: :meth:`Store.append` into the DuckDB file (what ``record`` did until issue 40);
* **after**: :meth:`LiveStore.append`, one Parquet segment per flush, merged as it goes.

Then prints, per layout: CPU per flush (process time), disk bytes for the day, and the wall
time of ``iogauge analyze --db <store> --json`` (median of ``--runs``). It also measures the
rejected design, a writer that opens the DuckDB file only to commit: how long each commit
holds the file (readers are refused meanwhile) and how long a reader holding it for a read
of the day would block that writer.

Usage::

    .venv/bin/python benchmarks/store_live.py                  # a day: ~10 min
    .venv/bin/python benchmarks/store_live.py --hours 2        # quicker, smaller figures
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from iogauge.model.sampleframe import SAMPLE_COLUMNS, SampleFrame
from iogauge.store import Store
from iogauge.store.live import LiveStore
from iogauge.store.segments import all_segments, live_dir, live_segments

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def hour_frame(hour: int, devices: int, rng: np.random.Generator) -> pl.DataFrame:
    """One hour of 1 s samples of ``devices`` devices, in time order."""
    n = 3600 * devices
    secs = np.repeat(np.arange(3600) + hour * 3600, devices)
    cols: dict[str, pl.Series] = {}
    for c in SAMPLE_COLUMNS:
        if c.name == "ts":
            cols[c.name] = pl.Series([T0 + timedelta(seconds=int(s)) for s in secs],
                                     dtype=c.dtype)
        elif c.name == "device":
            cols[c.name] = pl.Series([f"sd{i:02d}" for i in range(devices)] * 3600)
        elif c.name in ("source", "host", "device_kind"):
            value = {"source": "linux-diskstats", "host": "bench", "device_kind": "disk"}
            cols[c.name] = pl.Series([value[c.name]] * n, dtype=c.dtype)
        elif c.name == "interval_s":
            cols[c.name] = pl.Series(np.ones(n), dtype=c.dtype)
        elif c.dtype == pl.Boolean:
            cols[c.name] = pl.Series(np.zeros(n, dtype=bool))
        elif c.dtype == pl.Float64:
            cols[c.name] = pl.Series(rng.gamma(2.0, 50.0, n).round(2))
        else:
            cols[c.name] = pl.Series([None] * n, dtype=c.dtype)
    return pl.DataFrame(cols)


def flushes(hours: int, devices: int, flush_s: int) -> Iterator[SampleFrame]:
    rng = np.random.default_rng(40)
    rows = flush_s * devices
    for h in range(hours):
        df = hour_frame(h, devices, rng)
        for i in range(0, len(df), rows):
            yield SampleFrame(df.slice(i, rows))


def write_before(path: Path, args: argparse.Namespace) -> list[float]:
    cpu: list[float] = []
    with Store.open(path, threads=1) as st:
        for f in flushes(args.hours, args.devices, args.flush_s):
            t = time.process_time()
            st.append(f)
            cpu.append(time.process_time() - t)
    return cpu


def write_after(path: Path, args: argparse.Namespace) -> list[float]:
    cpu: list[float] = []
    with LiveStore.open(path) as st:
        for f in flushes(args.hours, args.devices, args.flush_s):
            t = time.process_time()
            st.append(f)
            cpu.append(time.process_time() - t)
    return cpu


def disk_bytes(path: Path) -> int:
    """The store's bytes once the writer has deleted the segments merges superseded (they
    stay GRACE_S = 60 s; the benchmark writes a day in minutes)."""
    files = [path, path.with_name(path.name + ".wal")]
    d = live_dir(path)
    if d.is_dir():
        superseded = set()
        for table in ("samples", "devices", "guarantee_decisions"):
            live = {s.path for s in live_segments(d, table)}
            superseded |= {s.path for s in all_segments(d, table)
                           if s.last > 0 and s.path not in live}
        files += [f for f in d.iterdir() if f not in superseded]
    return sum(f.stat().st_size for f in files if f.is_file())


def analyze_s(paths: list[Path], runs: int) -> list[list[float]]:
    """Wall seconds of ``iogauge analyze --db <path> --json``, the stores taking turns (a
    shared machine's load then falls on both alike)."""
    exe = Path(sys.executable).with_name("iogauge")
    times: list[list[float]] = [[] for _ in paths]
    for _ in range(runs):
        for i, path in enumerate(paths):
            t = time.perf_counter()
            subprocess.run([str(exe), "analyze", "--db", str(path), "--json"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[i].append(time.perf_counter() - t)
    return times


def open_to_commit(path: Path, args: argparse.Namespace) -> tuple[list[float], float]:
    """The rejected design on the before-store: open, append one flush, close (x20); and a
    reader's read of everything (what a writer would wait for)."""
    rng = np.random.default_rng(41)
    extra = SampleFrame(hour_frame(args.hours, args.devices, rng).slice(
        0, args.flush_s * args.devices))
    hold = []
    for _ in range(20):
        t = time.perf_counter()
        with Store.open(path, threads=1) as st:
            st.append(extra)
        hold.append(time.perf_counter() - t)
    t = time.perf_counter()
    with Store.open(path, read_only=True) as st:
        st.read()
    return hold, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=int, default=24, help="hours of samples (default 24)")
    ap.add_argument("--devices", type=int, default=20, help="devices (default 20)")
    ap.add_argument("--flush-s", type=int, default=5, help="seconds per flush (default 5)")
    ap.add_argument("--runs", type=int, default=5,
                    help="analyze runs per layout, interleaved (default 5)")
    ap.add_argument("--dir", type=Path, help="where the stores go (default: a temp dir "
                    "under /var/tmp, a real disk on most systems)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="iogauge-live-", dir=args.dir or "/var/tmp") as d:
        tmp = Path(d)
        before, after = tmp / "before.duckdb", tmp / "after.duckdb"
        t = time.perf_counter()
        cpu_b = write_before(before, args)
        wall_b = time.perf_counter() - t
        t = time.perf_counter()
        cpu_a = write_after(after, args)
        wall_a = time.perf_counter() - t
        rows = args.hours * 3600 * args.devices
        print(f"{args.hours} h x {args.devices} devices of 1 s samples = {rows:,} rows in "
              f"{len(cpu_b):,} flushes of {args.flush_s} s\n")
        reads = analyze_s([before, after], args.runs)
        print(f"{'layout':<28} {'CPU ms/flush':>12} {'p99 ms':>8} {'write wall s':>12} "
              f"{'disk MB':>9} {'analyze s min':>13} {'median':>7}")
        for name, cpu, wall, path, rd in (
                ("before: DuckDB append", cpu_b, wall_b, before, reads[0]),
                ("after: Parquet segments", cpu_a, wall_a, after, reads[1])):
            p99 = sorted(cpu)[int(len(cpu) * 0.99)] * 1e3
            print(f"{name:<28} {statistics.mean(cpu) * 1e3:>12.2f} {p99:>8.1f} {wall:>12.1f} "
                  f"{disk_bytes(path) / 1e6:>9.1f} {min(rd):>13.2f} "
                  f"{statistics.median(rd):>7.2f}")
        segs = live_segments(live_dir(after), "samples")
        print(f"\nafter: {len(segs)} live sample segment files at the end "
              f"(levels {[s.level for s in segs]})")
        hold, read_s = open_to_commit(before, args)
        print(f"rejected design (open the DuckDB file only to commit), on the before store: "
              f"held {statistics.median(hold) * 1e3:.0f} ms median, {max(hold) * 1e3:.0f} ms "
              f"max per commit (readers refused meanwhile); a reader reading the day holds "
              f"it {read_s:.1f} s (the writer waits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
