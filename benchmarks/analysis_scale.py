"""Analysis at scale: one day of 1 s samples for 100 devices (8.64 M rows), target <= 20 s
and <= 4 GB.

Builds a SampleFrame as the live collector would record it (the sysstat 12.x columns of
kernel 5.5+: reads, writes, discards, flushes, merges, sizes, awaits, aqu-sz, %util, plus
host CPU) for 100 devices over 24 h at 1 s — half single-spindle disks (``sdN``, rotational)
whose %util follows [Oe]'s linear busy-per-IOPS law up to a knee, half NVMe namespaces
(``nvmeNn1``) whose latency rises with load — with a daily load curve, noise, and an
hour-long peak on some devices so the rules have something to find. Then it runs
``iogauge.analysis.engine.analyze`` on it and prints the wall time, rows/s, the peak
resident memory of the process (frame included) and what the analysis found.

Baseline, measured in the same run: the time to compute per-device means and maxima of
every column with one polars ``group_by`` (the least any analysis must do: read every value
once). The ratio says how much the full analysis costs over a plain scan.

Usage::

    .venv/bin/python benchmarks/analysis_scale.py                  # 100 devices x 24 h
    .venv/bin/python benchmarks/analysis_scale.py --devices 10 --hours 2   # quick look
    .venv/bin/python benchmarks/analysis_scale.py --check          # exit 1 if over target
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

TARGET_S = 20.0
TARGET_GB = 4.0


def _rss_gb() -> float:
    """Peak resident memory since the last :func:`_reset_peak` (VmHWM), in GB."""
    try:
        with Path("/proc/self/status").open(encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (``echo 5 > /proc/self/clear_refs``, Linux 4.0+),
    so the figure is the analysis's own peak, frame included, not the generator's."""
    try:
        with Path("/proc/self/clear_refs").open("w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def build_frame(devices: int, seconds: int, seed: int = 1) -> tuple[SampleFrame,
                                                                       dict[str, DeviceInfo]]:
    """The synthetic day (see the module docstring); rows ordered by time, then device."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 11, 21, tzinfo=UTC)
    ts_s = np.arange(1, seconds + 1, dtype=np.int64)
    day = 0.55 + 0.45 * np.sin((ts_s / 86400.0) * 2 * np.pi - np.pi / 2)  # quiet at night
    n = seconds * devices
    cols: dict[str, np.ndarray] = {}
    names: list[str] = []
    infos: dict[str, DeviceInfo] = {}
    for d in range(devices):
        hdd = d % 2 == 0
        name = f"sd{chr(97 + d // 2 % 26)}{d // 52 or ''}" if hdd else f"nvme{d // 2}n1"
        names.append(name)
        infos[name] = DeviceInfo(name=name, kind="disk", rotational=hdd,
                                 model="ST4000NM0035" if hdd else "Samsung SSD 970 EVO Plus")
        peak = np.zeros(seconds)
        if d % 5 == 0:  # an hour-long peak in the afternoon
            lo = int(seconds * 0.6)
            peak[lo:lo + min(3600, seconds - lo)] = 1.0
        base = (60.0 if hdd else 4000.0) * (1 + d % 7 / 10)
        iops = base * day * (1 + 1.8 * peak) * rng.lognormal(0.0, 0.25, seconds)
        if hdd:
            iops = np.minimum(iops, 170.0)
        r_share = 0.7
        r = iops * r_share
        w = iops - r
        r_sz = 8.0 + 56.0 * (d % 3 == 0)
        w_sz = 16.0
        if hdd:
            util = np.minimum(100.0, iops * 0.55 * (1 + np.maximum(0, iops - 150) / 40))
            svc = 5.5
            rho = np.minimum(util / 100.0, 0.97)
            aw = svc / (1 - rho) * rng.lognormal(0.0, 0.1, seconds)
        else:
            util = np.minimum(100.0, iops / 60.0)
            rho = np.minimum(iops / (base * 2.2), 0.95)
            aw = 0.08 / (1 - rho) * rng.lognormal(0.0, 0.1, seconds)
        vals = {
            "r_iops": r, "w_iops": w, "d_iops": np.zeros(seconds), "f_iops": w * 0.05,
            "iops": iops, "r_kBps": r * r_sz, "w_kBps": w * w_sz, "d_kBps": np.zeros(seconds),
            "kBps": r * r_sz + w * w_sz, "r_merged_ps": r * 0.1, "w_merged_ps": w * 0.3,
            "d_merged_ps": np.zeros(seconds), "r_rqm_pct": np.full(seconds, 100 / 11),
            "w_rqm_pct": np.full(seconds, 30 / 1.3), "d_rqm_pct": np.zeros(seconds),
            "r_await_ms": aw * 0.9, "w_await_ms": aw * 1.2, "d_await_ms": np.zeros(seconds),
            "f_await_ms": np.full(seconds, 0.5), "await_ms": aw, "aqu_sz": iops * aw / 1000,
            "util_pct": util, "r_areq_kB": np.full(seconds, r_sz),
            "w_areq_kB": np.full(seconds, w_sz), "d_areq_kB": np.zeros(seconds),
            "areq_kB": (r * r_sz + w * w_sz) / np.maximum(iops, 1e-9),
            "inflight": np.round(iops * aw / 1000),
        }
        # interleave: time-major, as a recorder writes it (device d is every devices-th row)
        for k, v in vals.items():
            if k not in cols:
                cols[k] = np.empty(n)
            cols[k][d::devices] = v
        del vals
    data: dict[str, object] = dict(cols)
    cols.clear()
    cpu_user = np.repeat(30 + 20 * day, devices)
    data.update(cpu_user_pct=cpu_user, cpu_iowait_pct=np.repeat(3 + 4 * day, devices),
                cpu_system_pct=np.repeat(np.full(seconds, 8.0), devices),
                cpu_idle_pct=np.repeat(59 - 24 * day, devices),
                cpu_nice_pct=np.zeros(seconds * devices),
                cpu_steal_pct=np.zeros(seconds * devices))
    df = pl.DataFrame(data).with_columns(
        source=pl.lit("linux-diskstats"), host=pl.lit("bench"),
        device=pl.Series(names * seconds, dtype=pl.String),
        device_kind=pl.lit("disk"), parent=pl.lit(None, dtype=pl.String),
        ts=pl.Series(np.repeat(ts_s, devices) * 1_000_000, dtype=pl.Int64).cast(
            pl.Datetime("us")).dt.replace_time_zone("UTC") + (t0 - datetime(1970, 1, 1,
                                                                             tzinfo=UTC)),
        interval_s=pl.lit(1.0), since_boot=pl.lit(value=False), reset=pl.lit(value=False))
    assert df.height == n
    return SampleFrame(df), infos


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--check", action="store_true", help="exit 1 if over the targets")
    args = ap.parse_args()
    seconds = round(args.hours * 3600)
    t = time.perf_counter()
    frame, infos = build_frame(args.devices, seconds)
    rows = len(frame)
    print(f"frame: {rows:,} rows x {frame.df.width} columns, "
          f"{frame.df.estimated_size() / 1e9:.2f} GB, built in {time.perf_counter() - t:.1f} s"
          f" (peak RSS so far {_rss_gb():.2f} GB)")

    t = time.perf_counter()
    measures = [c for c in frame.df.columns if frame.df.schema[c] == pl.Float64()]
    base = frame.df.group_by("device").agg(
        [pl.col(c).mean().alias(c + "_mean") for c in measures]
        + [pl.col(c).max().alias(c + "_max") for c in measures])
    baseline_s = time.perf_counter() - t
    assert base.height == args.devices

    gc.collect()
    measured_peak = _reset_peak()
    t = time.perf_counter()
    res = analyze(frame, None, infos, AnalysisOptions())
    wall = time.perf_counter() - t
    peak_gb = _rss_gb()
    verdicts: dict[str, int] = {}
    for d in res.devices:
        verdicts[d.verdict] = verdicts.get(d.verdict, 0) + 1
    sev: dict[str, int] = {}
    for f in res.findings:
        sev[f.severity] = sev.get(f.severity, 0) + 1
    print(f"baseline (one group_by: mean and max of {len(measures)} columns per device): "
          f"{baseline_s:.2f} s")
    print(f"analysis: {wall:.2f} s for {rows:,} rows = {rows / wall:,.0f} rows/s "
          f"({wall / baseline_s:.1f}x the baseline scan)")
    print(f"peak RSS {'during the analysis' if measured_peak else 'of the process'} "
          f"(the frame included): {peak_gb:.2f} GB")
    print(f"verdicts: {verdicts}; findings: {sev}")
    ok = wall <= TARGET_S and peak_gb <= TARGET_GB
    full = args.devices >= 100 and seconds >= 86400
    print(f"{'meets' if ok else 'MISSES'} the target ({TARGET_S:g} s, {TARGET_GB:g} GB)"
          + ("" if full else " - scaled-down run"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
