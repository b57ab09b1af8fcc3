"""Size and speed of the HTML report for one day of 1 s samples on 20 devices (1.728 M rows).

Target (issue 5): the report stays under 10 MB and opens in a few seconds. The figure is
printed beside baselines measured in the same run:

* ``naive JSON``: every sample of the charted series embedded as ``json.dumps`` of columnar
  lists (full float precision, ISO-8601 time stamps) — what a report that does not
  downsample would carry;
* ``compact, every point``: the report's own compact encoding (4 significant digits, time
  offsets) of every sample, without the per-pixel reduction — how much of the saving is the
  encoding and how much the min/max envelope.

Also timed: rendering (``render_report``) and, when Debian's Chromium is installed
(``scripts/ensure-system-tools.sh``), opening the file in headless Chromium until every
chart is drawn (wall time from navigation to the page's ``data-ready`` flag, and the page's
own chart-drawing time).

The data is synthetic with realistic shapes, generated vectorised: a diurnal load curve, a
nightly batch window on some devices, multiplicative log-normal noise, single-second spikes
(peaks the downsampling must keep), HDD-like devices whose %util grows linearly with IOPS
([Oe]) and SSD-like ones, and latency that climbs with utilisation as in an M/M/1 queue
([Goodus]'s drop-off). The AnalysisResult is built by hand from the same data (verdicts,
capacity fits, findings on the spikes) so the benchmark measures the report, not the
analysis; ``--analyze`` runs ``analysis.engine.analyze`` instead.

Usage::

    .venv/bin/python benchmarks/report_size.py                    # 20 devices x 1 day
    .venv/bin/python benchmarks/report_size.py --devices 5 --hours 6
    .venv/bin/python benchmarks/report_size.py --check            # exit 1 if a target is missed
    .venv/bin/python benchmarks/report_size.py --keep report.html # keep the file
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from iogauge.analysis.types import (
    AnalysisResult,
    Attributes,
    Capability,
    CapacityEstimate,
    DeviceReport,
    Evidence,
    Finding,
    WindowRef,
)
from iogauge.model.sampleframe import SampleFrame
from iogauge.reporting.html_report import SERIES, render_report, write_report

TARGET_MB = 10.0
#: "opens in a few seconds": every chart drawn within this many seconds of navigation.
TARGET_OPEN_S = 5.0
START = datetime(2026, 11, 22, tzinfo=UTC)
#: HDD: 7,200 rpm single disk, ~180 random IOPS at 100 % busy (5.5 ms service time).
HDD_MAX_IOPS = 180.0
#: SSD: a SATA SSD doing ~20,000 small random IOPS; %util saturates long before that.
SSD_MAX_IOPS = 20000.0


def synthetic_day(devices: int, seconds: int, seed: int = 1) -> tuple[pl.DataFrame, list[dict]]:
    """SampleFrame columns for ``devices`` x ``seconds`` 1 s samples, plus facts per device
    (kind, max IOPS, spike times) for the hand-made analysis."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, seconds + 1, dtype=np.float64)
    ts = pl.datetime_range(START + timedelta(seconds=1), START + timedelta(seconds=seconds),
                           "1s", time_zone="UTC", eager=True)
    frames: list[pl.DataFrame] = []
    facts: list[dict] = []
    for d in range(devices):
        hdd = d % 2 == 0
        cap = HDD_MAX_IOPS if hdd else SSD_MAX_IOPS
        phase = rng.uniform(0, 0.2)
        diurnal = 0.45 + 0.35 * np.sin(2 * np.pi * (t / 86400.0 - 0.3 + phase))
        if d % 3 == 0:  # nightly batch 01:00-03:00 ([MS-Azure-JP]'s backup window)
            diurnal = np.where((t >= 3600) & (t < 10800), diurnal * 1.8, diurnal)
        noise = rng.lognormal(0.0, 0.25, seconds)
        load = np.clip(diurnal * noise, 0.01, 0.97)
        spikes = rng.choice(seconds, size=30, replace=False)
        load[spikes] = np.minimum(load[spikes] * rng.uniform(1.5, 3.0, 30), 1.2)
        iops = load * cap * 0.9
        read_frac = np.clip(0.7 + 0.1 * np.sin(t / 5000.0) + rng.normal(0, 0.03, seconds),
                            0.05, 0.95)
        r_iops, w_iops = iops * read_frac, iops * (1 - read_frac)
        r_sz = rng.lognormal(np.log(16.0), 0.5, seconds)
        w_sz = rng.lognormal(np.log(32.0), 0.5, seconds)
        if hdd:
            svctm = 1000.0 / cap
            util = np.minimum(100.0, iops * svctm / 10.0)
        else:
            svctm = 0.08
            util = np.minimum(100.0, iops / cap * 400.0)  # parallel: busy long before full
        rho = np.minimum(iops / cap, 0.985)
        r_await = svctm / (1 - rho) * rng.lognormal(0, 0.15, seconds)
        w_await = r_await * (0.6 if hdd else 0.4) * rng.lognormal(0, 0.15, seconds)
        await_ms = (r_await * r_iops + w_await * w_iops) / iops
        frames.append(pl.DataFrame({
            "ts": ts, "r_iops": r_iops, "w_iops": w_iops, "iops": iops,
            "r_kBps": r_iops * r_sz, "w_kBps": w_iops * w_sz, "r_areq_kB": r_sz,
            "w_areq_kB": w_sz, "r_await_ms": r_await, "w_await_ms": w_await,
            "await_ms": await_ms, "aqu_sz": iops * await_ms / 1000.0, "util_pct": util,
        }).with_columns(source=pl.lit("iostat"), host=pl.lit("bench"),
                        device=pl.lit(f"sd{chr(97 + d % 26)}{d // 26 or ''}"),
                        device_kind=pl.lit("disk"), interval_s=pl.lit(1.0)))
        facts.append({"hdd": hdd, "cap": cap, "spikes": np.sort(spikes),
                      "iops": iops, "await": await_ms, "util": util})
    return pl.concat(frames, how="vertical_relaxed"), facts


def hand_result(df: pl.DataFrame, facts: list[dict]) -> AnalysisResult:
    """An AnalysisResult a real analysis of this data would give (verdicts, fits, findings)."""
    reports: list[DeviceReport] = []
    findings: list[Finding] = []
    names = df["device"].unique(maintain_order=True).to_list()
    for name, f in zip(names, facts, strict=True):
        iops, lat, util = f["iops"], f["await"], f["util"]
        peak_i = int(np.argmax(lat))
        w0 = START + timedelta(seconds=peak_i - 59)
        w1 = START + timedelta(seconds=peak_i + 1)
        cap = None
        if f["hdd"]:
            k = 100.0 / f["cap"]
            cap = CapacityEstimate("util-linear", "rotational single disk", busy_per_iops=k,
                                   knee_util_pct=85.0, knee_iops=0.85 * f["cap"],
                                   max_iops=f["cap"], current_iops=float(iops.max()),
                                   headroom_iops=max(0.0, f["cap"] - float(iops.max())),
                                   headroom_pct=max(0.0, 100 - 100 * float(iops.max()) / f["cap"]),
                                   confidence=0.9, r2=0.97, points=len(iops))
        capab = Capability("hdd-7200" if f["hdd"] else "ssd-sata",
                           "7,200 rpm HDD" if f["hdd"] else "SATA SSD", "rotational=1"
                           if f["hdd"] else "rotational=0", parallel=not f["hdd"],
                           expected_iops=f["cap"], latency_ms_typical=5.5 if f["hdd"] else 0.2,
                           used_pct=100.0 * float(iops.max()) / f["cap"])
        sev = "critical" if f["hdd"] else "warning"
        findings.append(Finding(
            "queueing", sev, name, w0, w1, f"{name}: await {lat[peak_i]:.1f} ms at "
            f"{util[peak_i]:.0f} % busy", [Evidence("await_ms", float(lat[peak_i]), "ms", 50.0,
                                                    ">=", "worst 1-min window"),
                                           Evidence("util_pct", float(util[peak_i]), "%", 80.0,
                                                    ">=")],
            "Requests wait in the queue far longer than they take to serve.",
            "Spread the load or move it to a faster device.", "[Goodus] §3.4"))
        attrs = Attributes(intervals=len(iops), span_s=float(len(iops)),
                           iops_mean=float(iops.mean()), iops_peak=float(iops.max()),
                           await_ms=float(lat.mean()), util_mean_pct=float(util.mean()),
                           util_peak_pct=float(util.max()), read_pct=70.0)
        reports.append(DeviceReport(
            name, "bench", "disk", None, "iostat",
            "bottleneck" if f["hdd"] else "near limit", findings[-1].title, attrs, capab, cap,
            [WindowRef(w0, w1, "await_ms", float(lat[peak_i]), "ms")],
            {"critical": int(f["hdd"]), "warning": int(not f["hdd"]), "info": 0}))
    end = START + timedelta(seconds=len(facts[0]["iops"]))
    return AnalysisResult(reports, findings, 60.0, 1.0, START, end)


def naive_sizes(df: pl.DataFrame, sample_devices: int) -> tuple[int, int, int]:
    """Bytes of (plain ``json.dumps`` of every point, the compact encoding of every point)
    and the number of devices the plain size was measured on (scaled to all devices: every
    device has the same number of rows; json.dumps of 1.2 M floats per device is slow)."""
    from iogauge.reporting.html_report import _dump, _num_array, _time_array

    plain = compact = 0
    cols = [c for c in SERIES if c in df.columns and df[c].null_count() < df.height]
    parts = list(df.partition_by("device", as_dict=True).values())
    for i, g in enumerate(parts):
        if i < sample_devices:
            doc = {"ts": [t.isoformat() for t in g["ts"].to_list()],
                   **{c: g[c].to_list() for c in cols}}
            plain += len(json.dumps(doc))
        secs = (g["ts"].dt.epoch("us") - g["ts"].dt.epoch("us").min()) / 1e6
        compact += len(_dump({"t": _time_array(secs), **{c: _num_array(g[c]) for c in cols}}))
    n = min(sample_devices, len(parts))
    return round(plain * len(parts) / max(n, 1)), compact, n


def open_in_chromium(path: Path) -> dict[str, float] | None:
    """Timings of opening the report in headless Chromium, or None without Chromium:
    ``parsed_s`` (navigation start to the HTML parsed: DOM interactive),
    ``first_screen_s`` / ``all_charts_s`` (navigation start to the page's data-ready /
    data-complete flags), ``load_s`` (our wall clock from navigation to all charts),
    ``draw_ms`` (time the page spent drawing), ``drawn`` and ``total`` charts, ``errors``."""
    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from tests.helpers.chromium import Chromium, find_chromium

    exe = find_chromium()
    if exe is None:
        return None
    with Chromium(exe) as browser:
        t0 = time.perf_counter()
        session = browser.open(path.resolve().as_uri(), timeout=120)
        browser.wait_for(session, "document.body.dataset.complete === '1'", timeout=300)
        wall = time.perf_counter() - t0
        d = browser.evaluate(session, "Object.assign({}, document.body.dataset)")
        parsed = browser.evaluate(session, "performance.getEntriesByType('navigation')[0]"
                                  ".domInteractive")
    return {"parsed_s": float(parsed) / 1000, "first_screen_s": int(d["readyMs"]) / 1000,
            "all_charts_s": int(d["completeMs"]) / 1000,
            "load_s": wall, "draw_ms": int(d["renderMs"]), "drawn": int(d["chartsRendered"]),
            "total": int(d["chartsTotal"]), "errors": int(d.get("jsErrors", 0))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--width", type=int, default=1200, help="pixel columns per chart")
    ap.add_argument("--analyze", action="store_true", help="run analysis.engine.analyze "
                    "instead of the hand-made result")
    ap.add_argument("--no-browser", action="store_true", help="skip the Chromium timing")
    ap.add_argument("--baseline-devices", type=int, default=2, help="devices the plain "
                    "json.dumps baseline is measured on (scaled to all; default 2)")
    ap.add_argument("--keep", type=Path, help="write the report here and keep it")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if the report is "
                    f">= {TARGET_MB:g} MB or takes > {TARGET_OPEN_S:g} s to open")
    args = ap.parse_args()
    seconds = round(args.hours * 3600)
    t0 = time.perf_counter()
    df, facts = synthetic_day(args.devices, seconds)
    frame = SampleFrame(df)
    print(f"data: {args.devices} devices x {seconds:,} s = {frame.df.height:,} rows "
          f"(generated in {time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    if args.analyze:
        from iogauge.analysis.engine import analyze

        result = analyze(frame)
        what = "analysis.engine.analyze"
    else:
        result = hand_result(df, facts)
        what = "hand-made result"
    print(f"analysis ({what}): {len(result.devices)} devices, {len(result.findings)} "
          f"findings in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    page = render_report(frame, result, title="benchmark: 1 day x 20 devices",
                         width_px=args.width)
    render_s = time.perf_counter() - t0
    size = len(page.encode("utf-8"))
    t0 = time.perf_counter()
    plain, compact, sampled = naive_sizes(frame.df, args.baseline_devices)
    base_s = time.perf_counter() - t0
    mb = 1024 * 1024
    print(f"render_report: {render_s:.2f} s")
    print(f"{'embedding':<40} {'MB':>9} {'x report':>9}")
    print(f"{'report (min/max per pixel, compact)':<40} {size / mb:>9.2f} {1.0:>9.1f}")
    print(f"{'baseline: compact, every point':<40} {compact / mb:>9.2f} {compact / size:>9.1f}")
    print(f"{'baseline: plain json.dumps, every point':<40} {plain / mb:>9.2f} "
          f"{plain / size:>9.1f}")
    print(f"(baselines: the data alone, computed in {base_s:.1f} s; json.dumps measured on "
          f"{sampled} device(s) and scaled to {len(result.devices)}; the report's figure is the "
          "whole file with its tables, CSS and JS)")
    ok = size / mb < TARGET_MB
    out_dir = None if args.keep else tempfile.TemporaryDirectory(prefix="iogauge-bench-")
    path = args.keep or Path(out_dir.name) / "report.html"  # type: ignore[union-attr]
    write_report(path, page)
    opened = None if args.no_browser else open_in_chromium(path)
    if opened is None:
        print("headless Chromium: not run" + ("" if args.no_browser else
                                             " (not installed: scripts/ensure-system-tools.sh)"))
    else:
        print(f"headless Chromium: HTML parsed {opened['parsed_s']:.2f} s, first screen drawn "
              f"{opened['first_screen_s']:.2f} s after navigation, all {opened['total']:.0f} "
              f"charts {opened['all_charts_s']:.2f} s "
              f"(time spent drawing {opened['draw_ms']:.0f} ms; {opened['drawn']:.0f} charts "
              f"with data; JS errors {opened['errors']:.0f})")
        ok = ok and opened["all_charts_s"] <= TARGET_OPEN_S and opened["errors"] == 0
    print(f"target: < {TARGET_MB:g} MB and open in <= {TARGET_OPEN_S:g} s: "
          f"{'met' if ok else 'MISSED'}")
    if args.keep:
        print(f"report kept in {path}")
    if out_dir is not None:
        out_dir.cleanup()
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
