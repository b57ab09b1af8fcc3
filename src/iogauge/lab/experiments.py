"""Reproductions of [Oe]'s experiments on the lab's disk models.

``paper-sec3`` -- [Oe] §3 ("relation between the load on a storage device and the
performance it yields"): for the file-share and the backup workload, each on partition A
(the volume's first 500 GB), B (its last 500 GB) and both at once (A+B), measure %util
against IOPS as the offered load rises, and report

* the maximum IOPS of each case (%util = 100 %) and the paper's ratios: B vs A (outer vs
  inner tracks, "about 90 % / 89 %"), A+B vs A (wider seeks, "about 70 % / 69 %"), and
  file share vs backup on A (239 vs 65 IOPS, "about 3.7 x");
* the *proportional-limit busy rate* (比例限界 busy 率, the knee): the %util up to which IOPS
  grows linearly with %util ("about 90 %" for the file share on A or B, 95 % on A+B;
  80-85 % for the backup);
* busy per IOPS in the linear range (the paper's svctm, 5.68 ms at 80 IOPS vs 5.72 ms at
  160 IOPS for the file share on A+B: 0.78 % drift).

Each case is a rate sweep: the workload (10 threads, as in the paper's benchmark) capped at
fractions of its maximum by [Oe]'s own limiter (count per second, block the rest of the
second: §4 step (4)), one run per rate, %util and IOPS over the run after a warm-up,
sampled every 20 s as the paper's iostat. A few bisection runs then place the knee.

The knee is read as the paper defines it ("iops が線形増加する上限 %util 値"): on a straight
line fitted to the points between ``fit_lo`` and ``fit_hi`` %util (least squares, util = a +
b * IOPS), it is the %util of the last run within 2 % of the line before the first run more
than ``tol`` (5 %) below it. Bisection runs then narrow the gap between the knee's cap and
the next one: where the curve falls off a cliff (the paper's backup: "80-85 %, then 2-3 IOPS
more and %util is at 100 %") to one IOPS. Where IOPS first fall 5 % short of the line is
reported beside it: in the model every curve is linear and then flat, and where that
plateau lies only a few percent below the line (the file share on A+B: the hidden
write-back is a smaller share of its members' work, whose host commands seek between both
areas) the 5 % point sits high up the wall while the curve's edge is where the knee is.

[Oe]'s device is modelled as a RAID-5 controller that reads a partial-stripe write's
old data and old parity one after the other (``rmw_reads``, :mod:`iogauge.lab.raid`) over
member disks that write back in idle spells: with it every knee falls in the paper's band
and the maximum IOPS come near the paper's (results.md's notes give the figures).

Both modes run the same sweep: ``sim`` with :mod:`iogauge.lab.simulator` in virtual time,
``device`` with fio on the emulated block device (``iogauge.lab.device.create_device``) in
real time, reading the loop device's /proc/diskstats like iostat. fio has no per-second
burst limiter, so device mode spaces capped I/O evenly (fio's default); its knee is
therefore not the same experiment and is reported as measured.

The default device's member disks do not queue commands (NCQ off); the variant profile
``raid5-6x400g-ncq`` has them reorder up to 32 commands by positioning time
(:mod:`iogauge.lab.hdd`). With it every case gets more IOPS and every knee moves down
(results.md lists both sets of knees), so the profile keeps NCQ off.

``paper-eval1`` .. ``paper-eval3`` -- [Oe] §5's evaluations with the guarantee policy --
are in :mod:`iogauge.lab.paper_eval`; :func:`run_experiment` runs every experiment by name
and :func:`write_outputs` writes any of their results.
"""

from __future__ import annotations

import html
import importlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from iogauge import __version__
from iogauge.collector.derive import counter_deltas, derive_metrics
from iogauge.collector.diskstats import read_diskstats
from iogauge.errors import IogaugeError
from iogauge.lab.knee import EDGE_TOL, KneeFit, find_knee
from iogauge.lab.paper_report import (
    APPROXIMATIONS,
    APPROXIMATIONS_SCOPE,
    KNEE_BAND_PCT,
    PAPER_AB_OVER_A,
    PAPER_B_OVER_A,
    PAPER_KNEE_PCT,
    PAPER_MAX_A,
    PAPER_SVCTM_MS,
    REPORT_CSS,
    Comparison,
    ExperimentError,
    holds_text,
    nice_ceiling,
)
from iogauge.lab.profiles import ModelProfile, build_model, load_profile
from iogauge.lab.simulator import SweepPoint, run_point
from iogauge.lab.workloads import PAPER_SEC3_WORKLOADS, Arrival, Workload, fio_job, oe_paper

if TYPE_CHECKING:
    from iogauge.lab.paper_eval import PaperEvalConfig
    from iogauge.lab.paper_eval_device import DeviceEvalConfig

Mode = Literal["sim", "device"]
EXPERIMENTS = ("paper-sec3", "paper-eval1", "paper-eval2", "paper-eval3")


# ---- what [Oe] reports (§3, Fig. 3-5; §4 for the svctm drift) ------------------------

#: How far below the best capped run the uncapped run (100 %util) may stay and still count
#: as the maximum (§3: "%util が 100% で最高性能値に達している"): the runs scatter by ~1 %.
MAX_AT_FULL_TOL = 0.01


@dataclass(frozen=True)
class Sec3Config:
    """How ``paper-sec3`` is run.

    Attributes:
        profile: disk model profile ([Oe]'s device by default).
        workloads, placements: the cases.
        threads: closed-loop threads per case (the paper's benchmark: 10).
        interval_s: sampling interval (the paper's iostat: 20 s).
        point_s: length of each sweep run, warm-up included.
        warmup_s: leading part of each run left out.
        max_s: length of the uncapped run that gives the maximum IOPS.
        fractions: caps of the sweep, as fractions of the maximum.
        refine: bisection runs on the cap above the knee (five take a gap of a tenth of
            the maximum down to one IOPS).
        tol: shortfall from the line that ends the linear range (0.05 = 5 %).
        fit_lo, fit_hi: %util range of the points the line is fitted to.
        arrival: the cap's limiter (``per_second``: [Oe]'s).
        seed: random seed (the same for every run: common random numbers).
        capacity_bytes: device size (None: the profile's; device mode: the device's).
        jobs: parallel processes for the cases (sim mode).
    """

    profile: str = "raid5-6x400g"
    workloads: tuple[str, ...] = ("file-share", "backup")
    placements: tuple[str, ...] = ("A", "B", "A+B")
    threads: int = 10
    interval_s: float = 20.0
    point_s: float = 300.0
    warmup_s: float = 60.0
    max_s: float = 300.0
    fractions: tuple[float, ...] = (0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)
    refine: int = 5
    tol: float = 0.05
    fit_lo: float = 15.0
    fit_hi: float = 70.0
    arrival: Arrival = "per_second"
    seed: int = 4
    capacity_bytes: int | None = None
    jobs: int = 0


#: A faster, coarser run (tests, a first look): shorter runs, fewer refinements.
QUICK = Sec3Config(point_s=160.0, warmup_s=40.0, max_s=160.0, refine=4)


@dataclass
class CaseResult:
    """One workload on one placement.

    Attributes:
        workload, placement: the case.
        max_iops: IOPS uncapped (%util 100 %).
        max_util_pct: %util of the uncapped run.
        points: the sweep, in the order run.
        fit: the line and the knee.
        wall_s: time the case took to run.
    """

    workload: str
    placement: str
    max_iops: float
    max_util_pct: float
    points: list[SweepPoint]
    fit: KneeFit
    wall_s: float = 0.0

    def iops_at_util(self, util_pct: float) -> float:
        """IOPS on the fitted line at ``util_pct``."""
        return (util_pct - self.fit.intercept_pct) / self.fit.slope_pct_per_iops

    def busy_per_iops_ms_at(self, iops: float) -> float | None:
        """util/IOPS (ms) interpolated from the sweep at ``iops`` (None: out of range)."""
        pts = sorted((p.iops, p.util_pct / p.iops * 10.0) for p in self.points if p.iops > 0)
        xs = [p[0] for p in pts]
        if not pts or iops < xs[0] or iops > xs[-1]:
            return None
        return float(np.interp(iops, xs, [p[1] for p in pts]))


@dataclass
class Sec3Result:
    """``paper-sec3``'s outcome.

    Attributes:
        config: how it was run.
        mode: ``sim`` or ``device``.
        profile: the model profile's name and description.
        cases: (workload, placement) -> CaseResult.
        comparisons: the results table.
        started_utc: when the run began.
        wall_s: how long it took.
        device: the emulated device's path (device mode).
    """

    config: Sec3Config
    mode: Mode
    profile: str
    profile_description: str
    cases: dict[tuple[str, str], CaseResult]
    comparisons: list[Comparison] = field(default_factory=list)
    started_utc: str = ""
    wall_s: float = 0.0
    device: str | None = None

    @property
    def name(self) -> str:
        return "paper-sec3"

    def case(self, workload: str, placement: str) -> CaseResult:
        return self.cases[(workload, placement)]

    def markdown(self) -> str:
        return results_markdown(self)

    def html(self) -> str:
        return report_html(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": "paper-sec3", "mode": self.mode, "profile": self.profile,
            "config": asdict(self.config), "started_utc": self.started_utc,
            "wall_s": self.wall_s, "device": self.device,
            "cases": [{
                "workload": c.workload, "placement": c.placement, "max_iops": c.max_iops,
                "max_util_pct": c.max_util_pct, "knee_util_pct": c.fit.knee_util_pct,
                "knee_iops": c.fit.knee_iops, "busy_per_iops_ms": c.fit.busy_per_iops_ms,
                "beyond_util_pct": c.fit.beyond_util_pct,
                "tol_util_pct": c.fit.tol_util_pct, "tol_iops": c.fit.tol_iops,
                "intercept_pct": c.fit.intercept_pct,
                "points": [{"rate_iops": p.rate_iops, "iops": p.iops,
                            "util_pct": p.util_pct, "await_ms": p.await_ms}
                           for p in c.points]} for c in self.cases.values()],
            "comparisons": [asdict(x) for x in self.comparisons],
        }


# ---- running a case -----------------------------------------------------------------------

#: measure(workloads, duration_s) -> SweepPoint: one run in either mode.
Measure = Callable[[list[Workload], float], SweepPoint]


def _knee(name: str, placement: str, points: list[SweepPoint], cfg: Sec3Config) -> KneeFit:
    """The knee of the measured points; a sweep whose %util does not grow with IOPS (a
    device disturbed by other load on the machine) is an experiment error, not a crash."""
    try:
        return find_knee([(p.iops, p.util_pct) for p in points], tol=cfg.tol,
                         fit_lo=cfg.fit_lo, fit_hi=cfg.fit_hi)
    except ValueError as exc:
        measured = ", ".join(f"{p.iops:.0f} IO/s at {p.util_pct:.0f} %" for p in points)
        raise ExperimentError(f"{name}@{placement}: {exc} (measured: {measured}); a device "
                              "shared with other load gives no clean sweep") from exc


def _sweep(measure: Measure, name: str, placement: str, cfg: Sec3Config) -> CaseResult:
    t0 = time.monotonic()
    uncapped = oe_paper(name, placement, threads=cfg.threads)
    top = measure(uncapped, cfg.max_s)
    max_iops = top.iops
    if max_iops <= 0:
        raise ExperimentError(f"{name}@{placement}: no I/O completed in the uncapped run")

    def at(rate: float) -> SweepPoint:
        wls = oe_paper(name, placement, threads=cfg.threads, rate_iops=max(1.0, rate),
                      arrival=cfg.arrival)
        return measure(wls, cfg.point_s)

    points: list[SweepPoint] = []
    saturated = 0
    for f in cfg.fractions:
        p = at(round(f * max_iops))
        points.append(p)
        saturated = saturated + 1 if p.util_pct >= 99.5 else 0
        if saturated >= 2:
            break
    fit = _knee(name, placement, points, cfg)
    for _ in range(cfg.refine):
        # Bisect on the cap between the knee (the line's last point) and the next cap run:
        # where the curve falls off a cliff the knee lies in between.
        if fit.knee_util_pct is None:
            break
        knee = fit.knee_util_pct
        caps = [p.rate_iops for p in points if p.rate_iops is not None]
        on = [p.rate_iops for p in points if p.rate_iops is not None and p.util_pct <= knee]
        if not on:
            break
        lo = max(on)
        above = [c for c in caps if c > lo]
        if not above:
            break
        hi = min(above)
        if hi - lo < 2.0:
            break
        points.append(at(round((lo + hi) / 2.0)))
        fit = _knee(name, placement, points, cfg)
    return CaseResult(workload=name, placement=placement, max_iops=max_iops,
                      max_util_pct=top.util_pct, points=points, fit=fit,
                      wall_s=time.monotonic() - t0)


def _sim_measure(profile: ModelProfile, cfg: Sec3Config) -> Measure:
    def measure(wls: list[Workload], duration_s: float) -> SweepPoint:
        model = build_model(profile, capacity_bytes=cfg.capacity_bytes)
        return run_point(model, wls, duration_s, interval_s=cfg.interval_s, seed=cfg.seed,
                         warmup_s=cfg.warmup_s)
    return measure


def _sim_case(args: tuple[ModelProfile, str, str, Sec3Config]) -> CaseResult:
    profile, name, placement, cfg = args
    return _sweep(_sim_measure(profile, cfg), name, placement, cfg)


# ---- device mode ----------------------------------------------------------------------------

def _loop_name(dev_path: str) -> str:
    return Path(os.path.realpath(dev_path)).name


def _read_counters(name: str) -> npt.NDArray[np.int64]:
    snap = read_diskstats()
    idx = snap.index()
    if name not in idx:
        raise ExperimentError(f"{name} is not in /proc/diskstats")
    return np.array(snap.values[idx[name]], dtype=np.int64)


def _device_measure(dev_path: str, device_bytes: int, cfg: Sec3Config) -> Measure:
    fio = shutil.which("fio")
    if fio is None:
        raise ExperimentError("device mode needs fio (apt-get install fio)")
    name = _loop_name(dev_path)

    def measure(wls: list[Workload], duration_s: float) -> SweepPoint:
        with tempfile.TemporaryDirectory(prefix="iogauge-sec3-") as tmp:
            job = Path(tmp) / "job.fio"
            job.write_text(fio_job(wls, dev_path, runtime_s=duration_s,
                                   device_bytes=device_bytes))
            proc = subprocess.Popen([fio, "--output-format=json", str(job)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            t_start = time.monotonic()
            time.sleep(min(cfg.warmup_s, duration_s / 2))
            c0, t0 = _read_counters(name), time.monotonic()
            samples: list[tuple[float, float]] = []
            prev, tp = c0, t0
            while proc.poll() is None and time.monotonic() - t_start < duration_s - 0.5:
                time.sleep(max(0.0, min(cfg.interval_s,
                                        duration_s - 0.5 - (time.monotonic() - t_start))))
                cur, tc = _read_counters(name), time.monotonic()
                m = _derive(prev, cur, tc - tp)
                samples.append((m["iops"], m["util_pct"]))
                prev, tp = cur, tc
            c1, t1 = _read_counters(name), time.monotonic()
            _out, err = proc.communicate(timeout=duration_s + 60)
            if proc.returncode != 0:
                raise ExperimentError(f"fio failed ({proc.returncode}): "
                                      f"{err.decode(errors='replace').strip()[-500:]}")
        m = _derive(c0, c1, t1 - t0)
        rates = [w.rate_iops for w in wls]
        rate = None if any(r is None for r in rates) else float(sum(r or 0 for r in rates))
        return SweepPoint(rate_iops=rate, iops=m["iops"], util_pct=m["util_pct"],
                          await_ms=m["await_ms"], samples=samples)
    return measure


def _derive(prev: npt.NDArray[np.int64], cur: npt.NDArray[np.int64], dt: float) -> dict[str, float]:
    ones = np.ones((1, prev.shape[0]), dtype=np.bool_)
    d = counter_deltas(prev[None, :], cur[None, :], ones, ones)
    m = derive_metrics(d.delta, np.array([dt]))
    return {k: float(v[0]) for k, v in m.items()}


def _device_cases(profile: ModelProfile, cfg: Sec3Config,
                  progress: Callable[[str], None]) -> tuple[list[CaseResult], str]:
    try:
        # Looked up through sys.modules (not `from iogauge.lab import device`, which a loaded
        # package attribute would satisfy): its absence is reported, not fatal.
        lab_device = importlib.import_module("iogauge.lab.device")
    except ImportError as exc:
        raise ExperimentError(f"the emulated device is unavailable: {exc}") from exc
    create = getattr(lab_device, "create_device", None)
    if create is None:
        raise ExperimentError("the emulated device is unavailable: "
                              "iogauge.lab.device.create_device is missing")
    size = cfg.capacity_bytes or build_model(profile).capacity_bytes
    cases: list[CaseResult] = []
    try:
        with create(model=profile.path, size=size) as dev_path:
            if not dev_path:
                raise ExperimentError("the emulated device came up without a loop device")
            measure = _device_measure(dev_path, size, cfg)
            for name in cfg.workloads:
                for placement in cfg.placements:
                    progress(f"{name}@{placement} on {dev_path} ...")
                    cases.append(_sweep(measure, name, placement, cfg))
            return cases, dev_path
    except IogaugeError:
        raise
    except OSError as exc:
        raise ExperimentError(f"the emulated device is unavailable: {exc}") from exc


# ---- the experiment -------------------------------------------------------------------------

def paper_sec3(mode: Mode = "sim", cfg: Sec3Config = Sec3Config(), *,
               progress: Callable[[str], None] | None = None) -> Sec3Result:
    """Run [Oe] §3 on the configured model (see the module docstring)."""
    say = progress or (lambda _m: None)
    bad = [w for w in cfg.workloads if w not in PAPER_SEC3_WORKLOADS]
    bad += [p for p in cfg.placements if p not in ("A", "B", "A+B")]
    if bad or not cfg.workloads or not cfg.placements:
        raise ExperimentError(f"paper-sec3 runs the workloads {', '.join(PAPER_SEC3_WORKLOADS)} "
                              f"on placements A, B, A+B; not {', '.join(bad) or 'none'}")
    profile = load_profile(cfg.profile)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    device: str | None = None
    if mode == "sim":
        args = [(profile, n, p, cfg) for n in cfg.workloads for p in cfg.placements]
        jobs = cfg.jobs or min(len(args), os.cpu_count() or 1)
        results: list[CaseResult] = []
        if jobs <= 1:
            for a in args:
                say(f"{a[1]}@{a[2]} ...")
                results.append(_sim_case(a))
        else:
            # spawn, not fork: forking a process whose polars/duckdb thread pools hold locks
            # deadlocks the children (seen in the test suite).
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                for r in pool.map(_sim_case, args):
                    say(f"{r.workload}@{r.placement}: max {r.max_iops:.0f} IOPS, knee "
                        f"{_fmt_pct(r.fit.knee_util_pct)} ({r.wall_s:.0f} s)")
                    results.append(r)
    elif mode == "device":
        results, device = _device_cases(profile, cfg, say)
    else:
        raise ExperimentError(f"unknown mode {mode!r} (sim or device)")
    res = Sec3Result(config=cfg, mode=mode, profile=profile.name,
                     profile_description=profile.description,
                     cases={(r.workload, r.placement): r for r in results},
                     started_utc=started, device=device)
    res.comparisons = compare_sec3(res)
    res.wall_s = time.monotonic() - t0
    return res


def _knee_text(fit: KneeFit) -> str:
    """The knee and the run above it (the knee lies between the two)."""
    k = _fmt_pct(fit.knee_util_pct)
    if fit.knee_util_pct is None or fit.beyond_util_pct is None:
        return k
    return f"{k} (next run: {fit.beyond_util_pct:.0f} %)"


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f} %"


def compare_sec3(res: Sec3Result) -> list[Comparison]:
    """Our numbers beside the paper's, with whether each qualitative finding holds."""
    rows: list[Comparison] = []
    has = res.cases.__contains__
    for name in ("file-share", "backup"):
        if has((name, "A")):
            rows.append(Comparison(
                f"{name}: max IOPS on A", f"{res.case(name, 'A').max_iops:.0f}",
                f"{PAPER_MAX_A[name]:.0f}", None,
                "absolute numbers depend on the model; the ratios below are the findings"))
    if has(("file-share", "A")) and has(("backup", "A")):
        ratio = res.case("file-share", "A").max_iops / res.case("backup", "A").max_iops
        paper = PAPER_MAX_A["file-share"] / PAPER_MAX_A["backup"]
        rows.append(Comparison("file-share / backup max IOPS on A", f"{ratio:.2f} x",
                               f"{paper:.2f} x (239 / 65)", ratio > 1.5,
                               "the file share gets clearly more IOPS (ratio > 1.5)"))
    for name in ("file-share", "backup"):
        if has((name, "A")) and has((name, "B")):
            r = res.case(name, "B").max_iops / res.case(name, "A").max_iops
            rows.append(Comparison(
                f"{name}: B / A max IOPS (inner vs outer)", f"{r * 100:.0f} %",
                f"{PAPER_B_OVER_A[name] * 100:.0f} %", 0.80 <= r <= 0.97,
                "B is 3-20 % slower than A (the paper: ~10 %)"))
        if has((name, "A")) and has((name, "A+B")):
            r = res.case(name, "A+B").max_iops / res.case(name, "A").max_iops
            rows.append(Comparison(
                f"{name}: A+B / A max IOPS (both areas at once)", f"{r * 100:.0f} %",
                f"{PAPER_AB_OVER_A[name] * 100:.0f} %", 0.55 <= r <= 0.80,
                "A+B is 20-45 % slower than A (the paper: ~30 %)"))
        if has((name, "B")) and has((name, "A+B")):
            ab, b = res.case(name, "A+B").max_iops, res.case(name, "B").max_iops
            rows.append(Comparison(
                f"{name}: A+B below B", f"{ab:.0f} < {b:.0f}" if ab < b else f"{ab:.0f} >= {b:.0f}",
                "A > B > A+B", ab < b, "mixing both areas costs more than the inner tracks"))
    for (name, placement), c in res.cases.items():
        k = c.fit.knee_util_pct
        lo, hi = KNEE_BAND_PCT
        ours = _knee_text(c.fit)
        rows.append(Comparison(
            f"{name}@{placement}: linear up to (knee)", ours,
            f"{PAPER_KNEE_PCT[(name, placement)]:.0f} %",
            # in whole percent, as the paper gives its knees and band and as shown here
            None if res.mode == "device" else (k is not None and lo <= round(k) <= hi),
            f"a knee in the paper's {lo:.0f}-{hi:.0f} % band (whole percent)"
            if res.mode == "sim" else
            "reported only: fio spaces capped I/O evenly, not in [Oe]'s per-second "
            "bursts"))
    for name in ("file-share", "backup"):
        # §3: "%util が 100% で最高性能値に達している" -- the maximum is reached at 100 %util
        best = {p: (c.max_iops, max(pt.iops for pt in c.points))
                for (n, p), c in res.cases.items() if n == name and c.points}
        if best:
            rows.append(Comparison(
                f"{name}: the most IOPS at 100 %util",
                ", ".join(f"{p} {top:.0f} vs {capped:.0f}" for p, (top, capped) in best.items()),
                "the maximum at 100 %",
                all(top >= capped * (1.0 - MAX_AT_FULL_TOL) for top, capped in best.values()),
                f"the uncapped run gets at least the best capped run's IOPS (within "
                f"{MAX_AT_FULL_TOL * 100:g} %)"))
    if has(("file-share", "A+B")):
        c = res.case("file-share", "A+B")
        (x1, p1), (x2, p2) = PAPER_SVCTM_MS
        s1, s2 = c.busy_per_iops_ms_at(x1), c.busy_per_iops_ms_at(x2)
        at = f"{x2:.0f} IOPS"
        knee = c.fit.knee_iops
        if s2 is None and knee is not None and x1 < knee < x2:
            # The model's array tops out below the paper's second point: compare at the
            # knee, the highest rate on the line, rather than leave the finding out.
            s2 = c.busy_per_iops_ms_at(knee)
            at = f"{knee:.0f} IOPS (the knee; {x2:.0f} is past this array's maximum)"
        if s1 is not None and s2 is not None:
            drift = (s2 / s1 - 1.0) * 100.0
            rows.append(Comparison(
                f"file-share@A+B: util/IOPS at {x1:.0f} -> {at}",
                f"{s1:.2f} -> {s2:.2f} ms ({drift:+.2f} %)",
                f"{p1:.2f} -> {p2:.2f} ms (+0.78 %)", abs(drift) <= 5.0,
                "busy per IOPS is nearly constant below the knee (within 5 %)"))
    return rows


# ---- output ---------------------------------------------------------------------------------


def results_markdown(res: Sec3Result) -> str:
    """``results.md``: the table of our numbers beside the paper's, and every case."""
    cfg = res.config
    out = [f"# paper-sec3: [Oe] §3 reproduced ({res.mode})", "",
           (f"Model `{res.profile}` ({res.profile_description}); {cfg.threads} threads per "
           f"case, capped by [Oe]'s per-second limiter ({cfg.arrival}); runs of "
           f"{cfg.point_s:g} s ({cfg.warmup_s:g} s warm-up), sampled every "
           f"{cfg.interval_s:g} s; seed {cfg.seed}. Knee (the paper's proportional-limit busy "
           f"rate): the last run within {EDGE_TOL * 100:g} % of the line fitted between "
           f"{cfg.fit_lo:g} and {cfg.fit_hi:g} %util, before IOPS fall {cfg.tol * 100:g} % "
           f"below it."), "",
           "## Our numbers beside the paper's", "",
           "| finding | ours | paper | holds | criterion |", "|---|---:|---:|:---:|---|"]
    for r in res.comparisons:
        out.append(f"| {r.finding} | {r.ours} | {r.paper} | {holds_text(r.holds)} | "
                   f"{r.criterion} |")
    out += ["", "## Cases", "",
            ("| workload | placement | max IOPS | util/IOPS (ms) | knee %util | knee IOPS | "
             f"next run | {cfg.tol * 100:g} % below line | points | run time |"),
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in res.cases.values():
        ki = "-" if c.fit.knee_iops is None else f"{c.fit.knee_iops:.0f}"
        nxt = "-" if c.fit.beyond_util_pct is None else f"{c.fit.beyond_util_pct:.1f} %"
        at5 = "-" if c.fit.tol_util_pct is None else f"{c.fit.tol_util_pct:.1f} %"
        out.append(f"| {c.workload} | {c.placement} | {c.max_iops:.1f} | "
                   f"{c.fit.busy_per_iops_ms:.2f} | {_fmt_pct(c.fit.knee_util_pct)} | {ki} | "
                   f"{nxt} | {at5} | {len(c.points)} | {c.wall_s:.0f} s |")
    out += ["", "## Sweep points", ""]
    for c in res.cases.values():
        out += [f"### {c.workload}@{c.placement}", "",
                "| cap (IOPS) | IOPS | %util | await (ms) | below line |",
                "|---:|---:|---:|---:|---:|"]
        for p in sorted(c.points, key=lambda p: p.util_pct):
            cap = "-" if p.rate_iops is None else f"{p.rate_iops:.0f}"
            out.append(f"| {cap} | {p.iops:.1f} | {p.util_pct:.1f} | {p.await_ms:.1f} | "
                       f"{c.fit.shortfall(p.iops, p.util_pct) * 100:+.1f} % |")
        out.append("")
    out += ["## What is approximated", "",
            APPROXIMATIONS_SCOPE, ""]
    out += [f"* {a}" for a in APPROXIMATIONS]
    out += ["", f"_iogauge {__version__}, started {res.started_utc}, took {res.wall_s:.0f} s._",
            ""]
    return "\n".join(out)


def _svg_case(c: CaseResult, *, width: int = 400, height: int = 280) -> str:
    """%util (x) against IOPS (y): sweep points, their per-interval samples, the fitted
    line, the knee and the maximum."""
    ml, mr, mt, mb = 48, 12, 12, 36
    pw, ph = width - ml - mr, height - mt - mb
    ymax_data = max([c.max_iops] + [p.iops for p in c.points]
                    + [s[0] for p in c.points for s in p.samples])
    ymax = nice_ceiling(ymax_data * 1.08)

    def sx(u: float) -> float:
        return ml + max(0.0, min(100.0, u)) / 100.0 * pw

    def sy(v: float) -> float:
        return mt + ph - max(0.0, min(ymax, v)) / ymax * ph

    parts = [(f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" xmlns="http://www.w3.org/2000/svg">')]
    for i in range(6):
        u = i * 20.0
        parts.append(f'<line x1="{sx(u):.1f}" y1="{mt}" x2="{sx(u):.1f}" y2="{mt + ph}" '
                     'stroke="#e5e9ed"/>')
        parts.append(f'<text x="{sx(u):.1f}" y="{height - 20}" font-size="10" '
                     f'text-anchor="middle">{u:.0f}</text>')
        v = ymax * i / 5
        parts.append(f'<line x1="{ml}" y1="{sy(v):.1f}" x2="{ml + pw}" y2="{sy(v):.1f}" '
                     'stroke="#e5e9ed"/>')
        parts.append(f'<text x="{ml - 4}" y="{sy(v) + 3:.1f}" font-size="10" '
                     f'text-anchor="end">{v:.0f}</text>')
    parts.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 4}" font-size="11" '
                 'text-anchor="middle">%util</text>')
    parts.append(f'<text x="12" y="{mt + ph / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 12 {mt + ph / 2:.1f})">IOPS</text>')
    # The fitted line, from util = intercept to 100 %.
    f = c.fit
    u0 = max(0.0, f.intercept_pct)
    parts.append(f'<line x1="{sx(u0):.1f}" y1="{sy(c.iops_at_util(u0)):.1f}" '
                 f'x2="{sx(100):.1f}" y2="{sy(c.iops_at_util(100.0)):.1f}" stroke="#1f77b4" '
                 'stroke-dasharray="5 4"/>')
    parts.append(f'<line x1="{ml}" y1="{sy(c.max_iops):.1f}" x2="{ml + pw}" '
                 f'y2="{sy(c.max_iops):.1f}" stroke="#d62728" stroke-dasharray="2 3"/>')
    if f.knee_util_pct is not None:
        parts.append(f'<line x1="{sx(f.knee_util_pct):.1f}" y1="{mt}" '
                     f'x2="{sx(f.knee_util_pct):.1f}" y2="{mt + ph}" stroke="#9467bd" '
                     'stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{sx(f.knee_util_pct) - 3:.1f}" y="{mt + 12}" font-size="10" '
                     f'text-anchor="end" fill="#9467bd">knee {f.knee_util_pct:.0f} %</text>')
    for p in c.points:
        for iops, util in p.samples:
            parts.append(f'<circle cx="{sx(util):.1f}" cy="{sy(iops):.1f}" r="1.6" '
                         'fill="#b8c2cc"/>')
    for p in sorted(c.points, key=lambda p: p.util_pct):
        parts.append(f'<circle cx="{sx(p.util_pct):.1f}" cy="{sy(p.iops):.1f}" r="3.5" '
                     f'fill="#1d232a"><title>cap {p.rate_iops}: {p.iops:.1f} IOPS, '
                     f'{p.util_pct:.1f} %util</title></circle>')
    parts.append(f'<text x="{ml + 4}" y="{sy(c.max_iops) - 4:.1f}" font-size="10" '
                 f'fill="#d62728">max {c.max_iops:.0f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def report_html(res: Sec3Result) -> str:
    """``report.html``: self-contained (inline SVG, no script, no network)."""
    e = html.escape
    cfg = res.config
    rows = "".join(
        f"<tr><td>{e(r.finding)}</td><td>{e(r.ours)}</td><td>{e(r.paper)}</td>"
        f"<td class=\"{'yes' if r.holds else ('no' if r.holds is False else '')}\">"
        f"{holds_text(r.holds)}</td><td>{e(r.criterion)}</td></tr>" for r in res.comparisons)
    sections = []
    for name in cfg.workloads:
        figs = []
        for placement in cfg.placements:
            c = res.cases.get((name, placement))
            if c is None:
                continue
            figs.append(
                f"<figure>{_svg_case(c)}<figcaption>{e(name)} on {e(placement)}: max "
                f"{c.max_iops:.0f} IOPS, {c.fit.busy_per_iops_ms:.2f} ms of busy per I/O, "
                f"linear up to {_fmt_pct(c.fit.knee_util_pct)} (paper: "
                f"{PAPER_KNEE_PCT[(name, placement)]:.0f} %). Black: one run per cap; grey: "
                f"its {cfg.interval_s:g}-s samples; blue: the fitted line; red: the "
                f"maximum.</figcaption></figure>")
        sections.append(f"<h2>{e(name)}</h2><div class=\"charts\">{''.join(figs)}</div>")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>paper-sec3 ({e(res.mode)})</title><style>{REPORT_CSS}</style></head><body>"
        f"<h1>[Oe] §3 reproduced: %util against IOPS</h1>"
        f"<div class=\"meta\">{e(res.mode)} mode, model <b>{e(res.profile)}</b> "
        f"({e(res.profile_description)}); {cfg.threads} threads per case; [Oe]'s "
        f"per-second limiter; {cfg.point_s:g}-s runs sampled every {cfg.interval_s:g} s; "
        f"iogauge {e(__version__)}, {e(res.started_utc)}.</div>"
        "<h2>Our numbers beside the paper's</h2><table><tr><th>finding</th><th>ours</th>"
        f"<th>paper</th><th>holds</th><th>criterion</th></tr>{rows}</table>"
        f"{''.join(sections)}<h2>What is approximated</h2>"
        f"<p>{_code_html(APPROXIMATIONS_SCOPE)}</p><ul>"
        f"{''.join(f'<li>{_code_html(a)}</li>' for a in APPROXIMATIONS)}</ul></body></html>\n")


def _code_html(text: str) -> str:
    """``text`` escaped for HTML, its `code` spans (the notes' only Markdown) as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


class ExperimentResult(Protocol):
    """What every experiment's result offers the writers and the CLI.

    Attributes:
        name: the experiment (``paper-sec3``, ``paper-eval1``, ...).
        mode: ``sim`` or ``device``.
        comparisons: the results table.
        wall_s: how long it took.
    """

    comparisons: list[Comparison]
    wall_s: float

    @property
    def name(self) -> str: ...

    @property
    def mode(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def markdown(self) -> str: ...

    def html(self) -> str: ...


def write_outputs(res: ExperimentResult, out_dir: str | Path) -> list[Path]:
    """Write ``results.md``, ``report.html`` and ``results.json`` into ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = [d / "results.md", d / "report.html", d / "results.json"]
    paths[0].write_text(res.markdown(), encoding="utf-8")
    paths[1].write_text(res.html(), encoding="utf-8")
    paths[2].write_text(json.dumps(res.to_dict(), indent=2) + "\n", encoding="utf-8")
    return paths


def run_experiment(name: str, mode: Mode = "sim",
                   cfg: Sec3Config | PaperEvalConfig | DeviceEvalConfig | None = None, *,
                   progress: Callable[[str], None] | None = None) -> ExperimentResult:
    """Run the experiment ``name`` (one of :data:`EXPERIMENTS`) with its own configuration
    (``Sec3Config`` for paper-sec3; ``PaperEvalConfig`` in sim mode and
    ``DeviceEvalConfig`` in device mode for paper-eval1..3; None: the defaults)."""
    if name == "paper-sec3":
        if cfg is not None and not isinstance(cfg, Sec3Config):
            raise ExperimentError("paper-sec3 takes a Sec3Config")
        return paper_sec3(mode, cfg or Sec3Config(), progress=progress)
    if name not in EXPERIMENTS:
        raise ExperimentError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    # Imported here: the evaluations load the simulator's policy machinery (and the
    # device mode the cgroup harness), which paper-sec3 does without.
    from iogauge.lab import paper_eval as pe  # noqa: PLC0415
    from iogauge.lab import paper_eval_device as ped  # noqa: PLC0415

    number = pe.EVAL_EXPERIMENTS[name]
    if mode == "device":
        if cfg is not None and not isinstance(cfg, ped.DeviceEvalConfig):
            raise ExperimentError(f"{name} --device takes a DeviceEvalConfig")
        return ped.device_paper_eval(number, cfg or ped.DeviceEvalConfig(), progress=progress)
    if mode != "sim":
        raise ExperimentError(f"unknown mode {mode!r} (sim or device)")
    if cfg is not None and not isinstance(cfg, pe.PaperEvalConfig):
        raise ExperimentError(f"{name} takes a PaperEvalConfig")
    return pe.paper_eval(number, cfg or pe.PaperEvalConfig(), progress=progress)


__all__ = [
    "APPROXIMATIONS", "APPROXIMATIONS_SCOPE", "EDGE_TOL", "EXPERIMENTS", "KNEE_BAND_PCT",
    "MAX_AT_FULL_TOL", "PAPER_AB_OVER_A", "PAPER_B_OVER_A", "PAPER_KNEE_PCT", "PAPER_MAX_A",
    "PAPER_SVCTM_MS",
    "QUICK", "REPORT_CSS", "CaseResult", "Comparison", "ExperimentError", "ExperimentResult",
    "KneeFit", "Measure", "Mode", "Sec3Config", "Sec3Result", "compare_sec3", "find_knee",
    "holds_text", "nice_ceiling", "paper_sec3", "report_html", "results_markdown",
    "run_experiment", "write_outputs",
]
