"""[Oe] §5's evaluations as data, and the pure metrics of a run (no I/O).

The schedules (Tables 3-6), their scaling to a device, A's floor met per interval, the
convergence rule, the oracle bounds and the per-run metrics -- every definition is in
:mod:`iogauge.lab.guarantee_eval`'s docstring, which runs them on the emulated device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from iogauge.guarantee.controller import KERNEL_LIMIT_GRID_IOPS

ControllerName = Literal["paper", "adaptive", "static", "no-control"]
CONTROLLERS: tuple[ControllerName, ...] = ("paper", "adaptive", "static", "no-control")

#: [Oe] §5: convergence goal of the issue (seconds after a floor step).
CONVERGENCE_GOAL_S = 15.0
#: The issue's goals: A's floor met after convergence, B's share of the oracle.
A_MET_GOAL = 0.95
B_ORACLE_GOAL = 0.90

#: [Oe] §3: maximum IOPS on partition A (file share 239, backup 65) times the share left
#: with both partitions busy (70 %, 69 %): each workload's capacity in the paper's A+B
#: placement, what the paper's targets are relative to.
PAPER_AB_CAPACITY_IOPS = {"file-share": 239.0 * 0.70, "backup": 65.0 * 0.69}


# ---- the paper's schedules ----------------------------------------------------------------

@dataclass(frozen=True)
class Phase:
    """One row of Tables 4-6.

    Attributes:
        a_floor_iops: A's target ("A の目標 iops"): its floor, and its load's cap.
        b_demand_iops: B's load ("B の iops"): the cap of B's load.
        minutes: duration in the paper ("継続時間 (分)").
    """

    a_floor_iops: float
    b_demand_iops: float
    minutes: float


@dataclass(frozen=True)
class Evaluation:
    """One of [Oe]'s evaluations (Table 3 workloads, Tables 4-6 schedule)."""

    number: int
    a_workload: str
    b_workload: str
    phases: tuple[Phase, ...]

    @property
    def title(self) -> str:
        return f"eval {self.number}: {self.a_workload} A vs {self.b_workload} B"


#: [Oe] Table 3 (workloads) and Tables 4, 5, 6 (schedules).
PAPER_EVALUATIONS: dict[int, Evaluation] = {
    1: Evaluation(1, "file-share", "backup",
                  (Phase(5, 50, 5), Phase(50, 50, 10), Phase(5, 50, 10))),
    2: Evaluation(2, "file-share", "file-share",
                  (Phase(10, 200, 5), Phase(100, 200, 10), Phase(50, 200, 10))),
    3: Evaluation(3, "backup", "backup",
                  (Phase(5, 30, 5), Phase(30, 30, 10), Phase(5, 30, 10))),
}


@dataclass(frozen=True)
class ScaledPhase:
    """A phase on this device: whole IOPS and seconds.

    Attributes:
        a_floor_iops: A's floor (= A's demand).
        a_riops, a_wiops: A's fio caps per direction (sum = the floor).
        b_demand_iops: B's demand.
        b_riops, b_wiops: B's fio caps per direction (sum = the demand).
        start_s, duration_s: when the phase starts in the run, and how long it lasts.
    """

    a_floor_iops: int
    a_riops: int
    a_wiops: int
    b_demand_iops: int
    b_riops: int
    b_wiops: int
    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def split_rate(total: int, read_share: float) -> tuple[int, int]:
    """Whole reads and writes per second adding up to ``total``, reads ≈ ``read_share``.

    >>> split_rate(54, 0.8), split_rate(3, 0.8), split_rate(45, 0.5)
    ((43, 11), (2, 1), (22, 23))
    """
    if total < 1:
        raise ValueError(f"a rate must be at least 1 IOPS, got {total}")
    r = round(total * read_share)
    if 0 < read_share < 1:
        r = min(max(r, 1), total - 1) if total >= 2 else r
    return r, total - r


def scale_schedule(ev: Evaluation, capacity_iops: dict[str, float], seconds_per_minute: float,
                   read_share: dict[str, float]) -> list[ScaledPhase]:
    """The evaluation's phases on this device (see the module docstring, *Scaling*).

    Args:
        capacity_iops: this device's capacity for each workload in the A+B placement.
        seconds_per_minute: real seconds per paper minute (the time compression).
        read_share: each workload's read share (A's and B's caps are split by it).
    """
    out: list[ScaledPhase] = []
    t = 0.0
    ka = capacity_iops[ev.a_workload] / PAPER_AB_CAPACITY_IOPS[ev.a_workload]
    kb = capacity_iops[ev.b_workload] / PAPER_AB_CAPACITY_IOPS[ev.b_workload]
    for ph in ev.phases:
        a = max(1, round(ph.a_floor_iops * ka))
        b = max(1, round(ph.b_demand_iops * kb))
        dur = ph.minutes * seconds_per_minute
        ar, aw = split_rate(a, read_share[ev.a_workload])
        br, bw = split_rate(b, read_share[ev.b_workload])
        out.append(ScaledPhase(a, ar, aw, b, br, bw, t, dur))
        t += dur
    return out


# ---- metrics (pure) -----------------------------------------------------------------------

F64 = npt.NDArray[np.float64]
B1 = npt.NDArray[np.bool_]


def floor_met(a_ios: npt.ArrayLike, dt_s: npt.ArrayLike, floor_iops: float,
              frac: float = A_MET_GOAL, slack_ios: int = 1) -> B1:
    """Per interval: A completed at least ``ceil(frac·floor·dt) - slack_ios`` I/Os (module
    docstring: the slack is one I/O per direction A uses).

    >>> floor_met([2, 1, 52, 51], [1.0, 1.0, 1.0, 1.0], 3).tolist()[:2]
    [True, False]
    """
    ios = np.asarray(a_ios, dtype=np.float64)
    need = np.ceil(frac * floor_iops * np.asarray(dt_s, dtype=np.float64) - 1e-9) - slack_ios
    return np.asarray(ios >= need, dtype=np.bool_)


def settle_index(met: Sequence[bool] | B1) -> int | None:
    """First interval from which A meets its floor in every later interval of the phase, a
    *dip* excepted: one missed interval with two met intervals before it and two after it --
    or as many as the phase still has: the phase's end cuts the run of met intervals after
    a miss in its last two intervals short, and that says nothing about convergence (at a
    floor two thirds of the emulated HDD, A missed 3 isolated intervals of 54 after
    convergence in five quick eval-3 runs, so "never settled" hung on the last two seconds
    of a phase). None when the phase ends missing (its last two intervals, or its last
    without two met before it); 0 for an empty phase.

    >>> settle_index([False, False, True, True, False, True, True, True])
    2
    >>> settle_index([True, False, True, False, True]), settle_index([True, True, False])
    (4, 0)
    >>> settle_index([True, True, False, False]), settle_index([False, True, False])
    (None, None)
    """
    m = [bool(x) for x in met]
    n = len(m)
    if n == 0:
        return 0
    start = n
    j = n - 1
    while j >= 0:
        if m[j]:
            start = j
        elif not (j >= 2 and m[j - 2] and m[j - 1] and all(m[j + 1:j + 3])):
            break
        j -= 1
    return None if start == n else start


def oracle_b_iops(util_pct: float, iops: float, a_floor_iops: float,
                  b_demand_iops: float) -> tuple[float, float]:
    """(capacity at 100 % busy, oracle B) for one phase from its unthrottled calibration.

    ``C = iops·100/util`` ([Oe]'s busy_per_iops = util/IOPS, so 100 % busy is 100/bpi
    IOPS for the mix), ``oracle = min(B's demand, max(0, C - a))``.

    >>> [round(v, 1) for v in oracle_b_iops(97.0, 77.6, 27, 75)]
    [80.0, 53.0]
    """
    if util_pct <= 0 or iops <= 0:
        return math.nan, math.nan
    cap = iops * 100.0 / min(util_pct, 100.0)
    return cap, min(b_demand_iops, max(0.0, cap - a_floor_iops))


def grid_oracle_b_iops(oracle_iops: float, read_share: float, grid: int = 10) -> float:
    """The most B gets, at most ``oracle_iops``, from a static limit the kernel enforces as
    written (module docstring, *B vs the kernel's oracle*).

    >>> grid_oracle_b_iops(35.0, 0.5), grid_oracle_b_iops(50.0, 0.8), grid_oracle_b_iops(8, 0.5)
    (20.0, 50.0, 8.0)
    """
    if not oracle_iops > 0:
        return 0.0 if oracle_iops == 0 else math.nan

    def enforced(x: float) -> float:
        return x if x < grid else float(grid * math.floor(x / grid + 1e-9))

    m = min(max(read_share, 0.0), 1.0)
    if m in (0.0, 1.0):
        return enforced(oracle_iops)
    return max(enforced(oracle_iops * m) / m, enforced(oracle_iops * (1 - m)) / (1 - m))


@dataclass
class PhaseMetrics:
    """How one phase of a run went.

    Attributes:
        a_floor_iops, b_demand_iops: the phase's targets.
        intervals: intervals in the phase.
        a_met_share: share of them in which A met its floor.
        settle_s: convergence time (None: never settled).
        a_iops, b_iops: mean completions per second of A and B over the phase.
        oracle_b_iops: the oracle's B for the phase.
        util_pct: mean %util.
        grid_oracle_b_iops: the kernel's oracle (limits on blk-throttle's grid).
        static_oracle_b_iops: what the best static limit found by trying left B.
    """

    a_floor_iops: float
    b_demand_iops: float
    intervals: int
    a_met_share: float
    settle_s: float | None
    a_iops: float
    b_iops: float
    oracle_b_iops: float
    util_pct: float
    grid_oracle_b_iops: float = math.nan
    static_oracle_b_iops: float = math.nan


@dataclass
class RunMetrics:
    """How one run went (the table's row).

    Attributes:
        a_met_share: share of all intervals in which A met its floor.
        a_met_after_share: the same over the intervals from each phase's settle point on
            (phases that never settled contribute none; see ``unsettled``).
        settle_s: convergence time per phase (index 0: from the start).
        unsettled: phases (0-based) that never settled.
        b_iops: B's mean IOPS over the run.
        oracle_b_iops: the oracle's mean B over the run (phase-duration weighted).
        b_vs_oracle: ``b_iops / oracle_b_iops``.
        limit_changes_per_min: intervals with a changed B limit per minute of run.
        phases: per-phase details.
        b_vs_grid_oracle: B against the kernel's oracle (NaN when none was given).
        b_vs_static_oracle: B against what the best static limit, found by trying, left B
            (NaN when not searched).
    """

    a_met_share: float
    a_met_after_share: float
    settle_s: list[float | None]
    unsettled: list[int]
    b_iops: float
    oracle_b_iops: float
    b_vs_oracle: float
    limit_changes_per_min: float
    phases: list[PhaseMetrics]
    b_vs_grid_oracle: float = math.nan
    b_vs_static_oracle: float = math.nan


@dataclass
class Samples:
    """Per-interval measurements of one run (arrays of equal length).

    Attributes:
        t_end_s: end of the interval, seconds since the run's start.
        dt_s: interval length.
        a_ios, b_ios: A's and B's completions (reads + writes) in the interval.
        util_pct, dev_iops: device %util and completions per second.
        b_riops, b_wiops: B's limits read back at the interval's end (nan = none).
    """

    t_end_s: list[float] = field(default_factory=list)
    dt_s: list[float] = field(default_factory=list)
    a_ios: list[float] = field(default_factory=list)
    b_ios: list[float] = field(default_factory=list)
    util_pct: list[float] = field(default_factory=list)
    dev_iops: list[float] = field(default_factory=list)
    b_riops: list[float] = field(default_factory=list)
    b_wiops: list[float] = field(default_factory=list)

    def arrays(self) -> dict[str, F64]:
        return {k: np.asarray(v, dtype=np.float64) for k, v in asdict(self).items()}


def phase_of(t_end_s: F64, dt_s: F64, phases: Sequence[ScaledPhase]) -> npt.NDArray[np.int64]:
    """Index of the phase holding each interval's midpoint (-1: after the last)."""
    mid = t_end_s - dt_s / 2
    starts = np.array([p.start_s for p in phases])
    idx = np.searchsorted(starts, mid, side="right") - 1
    end = phases[-1].end_s if phases else 0.0
    return np.where(mid >= end, -1, idx).astype(np.int64)


def run_metrics(s: Samples, phases: Sequence[ScaledPhase], oracle: Sequence[float], *,
                interval_s: float = 1.0, frac: float = A_MET_GOAL,
                grid_oracle: Sequence[float] | None = None,
                static_oracle: Sequence[float] | None = None) -> RunMetrics:
    """The table's numbers for one run (see the module docstring for each)."""
    x = s.arrays()
    ph = phase_of(x["t_end_s"], x["dt_s"], phases)
    out: list[PhaseMetrics] = []
    met_all: list[bool] = []
    met_after: list[bool] = []
    settles: list[float | None] = []
    unsettled: list[int] = []
    b_done = b_oracle = b_grid = b_static = 0.0
    for k, p in enumerate(phases):
        sel = ph == k
        dt = x["dt_s"][sel]
        slack = max(1, int(p.a_riops > 0) + int(p.a_wiops > 0))
        met = floor_met(x["a_ios"][sel], dt, p.a_floor_iops, frac, slack)
        k0 = settle_index(met)
        met_all += met.tolist()
        if k0 is None:
            unsettled.append(k)
            settles.append(None)
        else:
            met_after += met[k0:].tolist()
            settles.append(float(k0) * interval_s)
        span = float(dt.sum())
        a_iops = float(x["a_ios"][sel].sum() / span) if span > 0 else math.nan
        b_iops = float(x["b_ios"][sel].sum() / span) if span > 0 else math.nan
        util = float((x["util_pct"][sel] * dt).sum() / span) if span > 0 else math.nan
        g_k = math.nan if grid_oracle is None else float(grid_oracle[k])
        s_k = math.nan if static_oracle is None else float(static_oracle[k])
        out.append(PhaseMetrics(p.a_floor_iops, p.b_demand_iops, int(sel.sum()),
                                float(met.mean()) if met.size else math.nan,
                                settles[-1], a_iops, b_iops, float(oracle[k]), util, g_k, s_k))
        b_done += float(x["b_ios"][sel].sum())
        b_oracle += float(oracle[k]) * span
        b_grid += g_k * span
        b_static += s_k * span
    total_s = float(x["dt_s"][ph >= 0].sum())
    lim = np.stack([x["b_riops"], x["b_wiops"]], axis=1)
    prev = np.vstack([np.full((1, 2), np.nan), lim[:-1]]) if len(lim) else lim
    same = (lim == prev) | (np.isnan(lim) & np.isnan(prev))
    changes = int((~same.all(axis=1)).sum()) if len(lim) else 0
    return RunMetrics(
        a_met_share=float(np.mean(met_all)) if met_all else math.nan,
        a_met_after_share=float(np.mean(met_after)) if met_after else math.nan,
        settle_s=settles, unsettled=unsettled,
        b_iops=b_done / total_s if total_s > 0 else math.nan,
        oracle_b_iops=b_oracle / total_s if total_s > 0 else math.nan,
        b_vs_oracle=b_done / b_oracle if b_oracle > 0 else math.nan,
        limit_changes_per_min=changes / (total_s / 60.0) if total_s > 0 else math.nan,
        phases=out, b_vs_grid_oracle=b_done / b_grid if b_grid > 0 else math.nan,
        b_vs_static_oracle=b_done / b_static if b_static > 0 else math.nan)




# ---- static limits ------------------------------------------------------------------------

def _static_limit(phases: Sequence[ScaledPhase], cap1_iops: float, b_read_share: float,
                  x: float) -> tuple[int, int]:
    """B's fixed limit: ``x·C1 - a1`` IOPS split by B's read share, placed on the kernel's
    grid as the controller places its own (:func:`iogauge.guarantee.policy.grid_targets`),
    at least 1 per direction."""
    b = max(2.0, x * cap1_iops - phases[0].a_floor_iops)
    return _grid_limit(b, b_read_share)


def _grid_limit(b_iops: float, b_read_share: float,
                grid: int = KERNEL_LIMIT_GRID_IOPS) -> tuple[int, int]:
    """A static limit of ``b_iops`` on B split by its read share and placed on the kernel's
    grid as the controllers place theirs (:func:`iogauge.guarantee.policy.grid_targets`),
    at least 1 per direction."""
    from iogauge.guarantee.policy import Targets, grid_targets  # noqa: PLC0415

    t = Targets({"A": 1.0}, ("B",), limit_grid_iops=grid)
    r, w = grid_targets(t, b_iops * b_read_share, b_iops * (1 - b_read_share))
    return max(1, math.floor(r + 1e-9)), max(1, math.floor(w + 1e-9))


def static_limit_candidates(b_demand_iops: int, read_share: float,
                            grid: int = KERNEL_LIMIT_GRID_IOPS,
                            ) -> list[tuple[tuple[int, int] | None, float]]:
    """Every static limit worth trying on B, as (limit, the IOPS B keeps under it), fewer
    first: one limit per distinct enforced rate, each placed on the kernel's grid as the
    controllers place theirs, then ``None`` (no limit: B's whole demand).

    B keeps its mix m under a limit (its reads and writes are paced together), so it gets
    ``min(demand, R/m, W/(1-m))`` with R, W the rates the kernel enforces.

    >>> [(lim, round(b, 1)) for lim, b in static_limit_candidates(45, 0.5)][:4]
    [((1, 1), 2.0), ((2, 2), 4.0), ((3, 3), 6.0), ((4, 4), 8.0)]
    >>> [(lim, round(b, 1)) for lim, b in static_limit_candidates(45, 0.5)][-3:]
    [((10, 10), 20.0), ((20, 20), 40.0), (None, 45.0)]
    """
    from iogauge.guarantee.policy import Targets  # noqa: PLC0415

    on_grid = Targets({"A": 1.0}, ("B",), limit_grid_iops=grid).on_grid
    out: list[tuple[tuple[int, int] | None, float]] = []
    seen: set[float] = set()
    for total in range(2, b_demand_iops):
        lim = _grid_limit(total, read_share, grid)
        keeps = min(float(b_demand_iops),
                    on_grid(lim[0]) / read_share if read_share > 0 else math.inf,
                    on_grid(lim[1]) / (1 - read_share) if read_share < 1 else math.inf)
        key = round(keeps, 6)
        if key in seen or keeps >= b_demand_iops:
            continue
        seen.add(key)
        out.append((lim, keeps))
    out.sort(key=lambda c: c[1])
    out.append((None, float(b_demand_iops)))
    return out


def largest_good(n: int, good: Callable[[int], bool], *, start: int = 0) -> int:
    """The largest i in 0..n-1 with ``good(i)``, for a ``good`` that holds up to some index
    and fails above it (-1: none), trying ``start`` first and then bisecting.

    >>> tried = []
    >>> largest_good(13, lambda i: tried.append(i) or i <= 9, start=8), tried
    (9, [8, 10, 9])
    >>> largest_good(4, lambda i: False, start=3), largest_good(4, lambda i: True, start=1)
    (-1, 3)
    """
    lo, hi = -1, n  # largest known good, smallest known bad
    i = min(max(start, 0), n - 1)
    while hi - lo > 1:
        if good(i):
            lo = i
        else:
            hi = i
        i = (lo + hi) // 2  # strictly between lo and hi while they are 2 or more apart
    return lo


__all__ = [
    "A_MET_GOAL",
    "B_ORACLE_GOAL",
    "CONTROLLERS",
    "CONVERGENCE_GOAL_S",
    "PAPER_AB_CAPACITY_IOPS",
    "PAPER_EVALUATIONS",
    "ControllerName",
    "Evaluation",
    "Phase",
    "PhaseMetrics",
    "RunMetrics",
    "Samples",
    "ScaledPhase",
    "floor_met",
    "grid_oracle_b_iops",
    "largest_good",
    "oracle_b_iops",
    "phase_of",
    "run_metrics",
    "scale_schedule",
    "settle_index",
    "split_rate",
    "static_limit_candidates",
]
