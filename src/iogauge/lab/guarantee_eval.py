"""[Oe]'s three evaluations (§5, Tables 3-6) on the lab's emulated disk, in real cgroups.

For each evaluation (Table 3: **1** file share A vs backup B, **2** file share vs file share,
**3** backup vs backup) and each controller -- iogauge's ``paper`` and ``adaptive`` policies
(:class:`iogauge.guarantee.controller.Controller`, in-process, reading this machine's
``/proc/diskstats`` and the cgroups' ``blkio.throttle.io_serviced_recursive``), a ``static``
limit and ``no-control`` -- one run replays the evaluation's schedule (Tables 4-6: A's target,
B's load, minutes), time-compressed, with fio in two cgroup v1 blkio groups on an emulated
block device (:func:`iogauge.lab.device.create_device`), and measures every ``interval_s``:

* **A's floor met**: the share of intervals in which A completed at least 95 % of its floor.
  A's load is capped at its floor, as the paper's benchmark capped A's threads at A's target
  (§5: "表 4, 表 5, 又は表 6 の値に従って上限性能を負荷 thread に通知"), so A always
  demands exactly its floor and every interval counts. Completions are whole and A's reads
  and writes are paced separately, so a steady A can have one I/O per direction land on
  either side of an interval boundary: an interval meets the floor with
  ``ceil(0.95 x floor x dt) - k`` I/Os or more, k = the directions A uses (2; measured: an
  unthrottled A at 4 + 4 IOPS on a 65 %-busy device completed 6, 10, 8, 6, 10 ... a second).
* **Convergence time** after each phase change: from the change to the start of the first
  interval after which A meets its floor in every interval of the phase, an isolated
  one-interval dip (two met intervals before it and two after it, or as many as the phase
  has left) excepted. None: A was still missing at the end (two intervals in a row).
* **B vs the oracle**: B's completions over the run divided by what an oracle would have let
  B do. For each phase the oracle leaves B what the device can do beyond A's floor:
  ``oracle_B = min(B's demand, C - a)`` with ``C = IOPS x 100 / %util`` measured for that
  phase's own mix (A at its floor, B at its demand) in an *unthrottled calibration run* --
  the device's capacity at 100 % busy for that mix, by [Oe]'s own proportional
  arithmetic (§4: ``b = (X - a·busy_per_iops) / busy_per_iops`` with X = 100 %,
  ``busy_per_iops = %util / IOPS``). No controller can give B more without taking it from A
  (or finding capacity the calibration did not), so it is an upper bound: a controller
  keeping the device at X % busy gets about ``(X·C/100 - a) / (C - a)`` of it.
* **B vs the kernel's oracle** (``B/grid``): the same with the oracle restricted to limits
  the kernel enforces as written. blk-throttle gives a backlogged group ``10·floor(L/10)``
  IOPS per direction for a limit L >= 10
  (:attr:`iogauge.guarantee.policy.Targets.limit_grid_iops`), and B's reads and writes keep
  its mix m, so the best static limit binds one direction at the largest enforceable rate
  under its share of the oracle and leaves the other above B's need:
  ``max(R/m, W/(1-m))`` with ``R``, ``W`` the largest enforceable rates under ``oracle·m``
  and ``oracle·(1-m)``. At HDD rates a 50:50 backup B with an oracle of 35 IOPS gets 20
  (10 + 10: 20 + 20 would be 40), whatever the controller.
* **B vs the static oracle** (``B/stat``, the issue's "what an oracle static limit leaves
  it"): the static limit is *found by trying*, not computed. Per phase mix, B runs under one
  static limit at a time (:func:`static_limit_candidates`: one per rate the kernel enforces,
  placed on its grid as the controllers place theirs) for ``oracle_search_s`` after a
  warm-up, and the largest limit with A at its floor in at least 95 % of the intervals wins
  (:func:`search_static_oracle`: bisection from the candidate nearest the bound above, so
  ~4 tries a mix); what B did under it is the oracle. A mix whose bound is B's whole demand
  is tried first without a limit. The bound is what the device can do at 100 % busy; a
  static limit that keeps A at its floor leaves less, because with B paced by the throttle
  the device serves A's and B's requests interleaved (seeks between the two partitions)
  instead of in B's runs as in the unthrottled calibration.
* **Limit changes per minute**: intervals in which B's read or write limit (read back from
  ``blkio.throttle.*_iops_device``) differs from the previous interval's.

**Scaling.** The paper's targets are absolute IOPS of its RAID-5 (file share 239, backup 65
IOPS at most on partition A; 70 % / 69 % of that with both partitions busy, §3). Each target
is rescaled by the ratio of this device's capacity for the same workload on both partitions
(measured first, closed loop) to the paper's -- so A's floor and B's load take the same share
of the device as in the paper -- and rounded to whole IOPS. A runs [Oe]'s workload on
partition A (the device's first quarter), B on partition B (its last quarter), as the paper
placed them on the first and second 500 GB (§5, Fig. 9).

**Controllers.** ``paper`` / ``adaptive``: the controller with that policy, 1 s decisions,
floors changed with :meth:`Controller.set_floors` at each phase change. ``static``: B is
limited once, at the start, to ``static_x x C1 - a1`` IOPS (C1, a1: phase 1's calibrated
capacity and A's floor; split by B's read share and placed on the kernel's limit grid like
the controller's limits), never changed -- a limit hand-tuned for the first phase.
``no-control``: nothing is limited.

**Load.** fio, direct I/O (cgroup v1 throttles direct I/O only), libaio with ``depth`` I/Os
in flight per group (the paper's 10 threads with one I/O each), A's and B's caps as
``rate_iops=reads,writes`` (A's floor split by its workload's read share, in whole IOPS that
add up to the floor). A's phases are separate fio jobs in one process, started by
``startdelay`` at their phase's start, so a phase change costs no fio start-up. The file
share's I/O size mix (:data:`iogauge.lab.workloads.FILE_SERVER_MIX`) is replaced by its
dominant size, 4 KiB (60 % of its I/Os): fio paces ``rate_iops`` in bytes -- it converts the
cap with the *smallest* size of a ``bssplit`` (``rate_iops x min_bs`` bytes/s) and charges
each I/O its own size, so a capped 512 B-64 KiB mix issues ~1/20 of the I/Os asked for
(measured: ``rate_iops=20,5`` gave 0.67 + 0.33 IOPS; fio 3.33), and a byte cap instead would
make the count per second swing by ~35 % with the sizes drawn (Poisson pacing, which fio
counts in I/Os, swings by sqrt(n)). On the emulated 7,200 rpm disk the difference in cost is
the transfer time, 0.03 ms (4 KiB) vs 0.08 ms (the mix's mean 11 KiB) at ~150 MB/s, next to
~12 ms of seek and rotation: under 1 %.

Everything created is removed on every exit path (exceptions and Ctrl-C included): the
controller restores its limits, fio's process groups are killed, the cgroups
(``/sys/fs/cgroup/blkio/iogauge-eval-<pid>-<n>-{a,b}``) are emptied and removed, the emulated
device is destroyed.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iogauge.errors import IogaugeError
from iogauge.guarantee.actuators import IO_KEYS, resolve_device
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.guarantee.controller import KERNEL_LIMIT_GRID_IOPS
from iogauge.guarantee.policy import GroupLimit
from iogauge.lab.cgroup_rig import (
    BLKIO_ROOT,
    CGROUP_PREFIX,
    ControllerThread,
    EvalError,
    FioJob,
    cgroup_pair,
    controller_capacity_model,
    fio_text,
    first_io,
    leftover_cgroups,
    loadavg,
    paced,
    preflight,
    read_stat,
    remove_cgroup,
    start_fio,
)
from iogauge.lab.guarantee_schedule import (
    A_MET_GOAL,
    B_ORACLE_GOAL,
    CONTROLLERS,
    CONVERGENCE_GOAL_S,
    PAPER_AB_CAPACITY_IOPS,
    PAPER_EVALUATIONS,
    ControllerName,
    Evaluation,
    Phase,
    PhaseMetrics,
    RunMetrics,
    Samples,
    ScaledPhase,
    _static_limit,
    floor_met,
    grid_oracle_b_iops,
    largest_good,
    oracle_b_iops,
    phase_of,
    run_metrics,
    scale_schedule,
    settle_index,
    split_rate,
    static_limit_candidates,
)
from iogauge.lab.workloads import PAPER_SEC3_WORKLOADS, Workload, oe_paper

if TYPE_CHECKING:
    from iogauge.guarantee.config import CapacityModel

# ---- configuration ------------------------------------------------------------------------

@dataclass(frozen=True)
class EvalConfig:
    """How the evaluations are run.

    Attributes:
        model: the emulated device's model (``hdd``: the lab's 7,200 rpm spindle).
        size: device size (None: the model's).
        evaluations: which of 1, 2, 3.
        controllers: which controllers, run in this order per evaluation.
        seconds_per_minute: real seconds per paper minute (4: the 25-minute schedules take
            100 s).
        interval_s: sampling and decision interval (the paper: 20 s iostat; here 1 s).
        depth: I/Os in flight per group (the paper's 10 threads).
        capacity_s: length of each capacity run (closed loop, A+B placement).
        calibration_s: length of each phase's unthrottled calibration.
        warmup_s: leading part of capacity and calibration runs left out.
        static_x: the static limit's target busy share of the phase-1 capacity.
        met_frac: A meets its floor at this share of it (0.95).
        oracle_search_s: length of each try of the static-oracle search after its warm-up
            (:func:`search_static_oracle`); 0: no search (B is compared with the
            calibrated bound only).
        backing_dir: where the emulated device's sparse backing file goes.
        capacity_model: the controllers' capacity model; None: the one ``auto`` picks on
            the real device the model stands for (``latency`` for the ``ssd``,
            :func:`~iogauge.lab.cgroup_rig.controller_capacity_model`).
    """

    model: str = "hdd"
    size: str | None = None
    evaluations: tuple[int, ...] = (1, 2, 3)
    controllers: tuple[ControllerName, ...] = CONTROLLERS
    seconds_per_minute: float = 4.0
    interval_s: float = 1.0
    depth: int = 10
    capacity_s: float = 12.0
    calibration_s: float = 12.0
    warmup_s: float = 3.0
    static_x: float = 0.90
    met_frac: float = A_MET_GOAL
    oracle_search_s: float = 20.0
    backing_dir: str = "/var/tmp"  # noqa: S108 (the lab makes a fresh mkdtemp dir in it)
    capacity_model: CapacityModel | None = None

    def __post_init__(self) -> None:
        if self.capacity_model is None:
            object.__setattr__(self, "capacity_model", controller_capacity_model(self.model))
        bad = [e for e in self.evaluations if e not in PAPER_EVALUATIONS]
        if bad or not self.evaluations:
            raise ValueError(f"evaluations must be among 1, 2, 3; got {self.evaluations}")
        badc = [c for c in self.controllers if c not in CONTROLLERS]
        if badc or not self.controllers:
            raise ValueError(f"controllers must be among {', '.join(CONTROLLERS)}; got "
                             f"{self.controllers}")
        if not self.seconds_per_minute > 0 or not self.interval_s >= 0.1:
            raise ValueError("seconds_per_minute must be > 0 and interval_s >= 0.1")
        if self.warmup_s >= min(self.capacity_s, self.calibration_s):
            raise ValueError("warmup_s must be shorter than the capacity and calibration runs")
        if not self.oracle_search_s >= 0:
            raise ValueError("oracle_search_s must be >= 0 (0: no static-oracle search)")


#: A smoke check: 1.6 s per paper minute (phases of 8, 16 and 16 s: 40 s per run), short
#: calibrations.
QUICK = EvalConfig(seconds_per_minute=1.6, capacity_s=8.0, calibration_s=7.0, warmup_s=2.0,
                   oracle_search_s=0.0)


# ---- capacity ------------------------------------------------------------------------------

@dataclass
class Capacity:
    """A closed-loop capacity run.

    Attributes:
        workload: [Oe] workload name.
        iops, util_pct: over the steady window.
        capacity_iops: ``iops·100/util``.
    """

    workload: str
    iops: float
    util_pct: float
    capacity_iops: float


def measure_capacity(dev: str, device_bytes: int, workload: str, cfg: EvalConfig,
                     workdir: Path) -> Capacity:
    """[Oe]'s ``workload`` on both partitions (A+B), closed loop, unthrottled."""
    name = Path(os.path.realpath(dev)).name
    wls = [paced(w) for w in oe_paper(workload, "A+B", threads=cfg.depth)]
    depth = max(1, cfg.depth // len(wls))
    jobs = [FioJob(f"cap-{w.name}", w, 0.0, cfg.capacity_s) for w in wls]
    with start_fio(fio_text(jobs, dev, device_bytes, depth), workdir, f"cap-{workload}") as fp:
        time.sleep(cfg.warmup_s)
        r0, w0, t0 = read_stat(name)
        m0 = time.monotonic()
        time.sleep(cfg.capacity_s - cfg.warmup_s - 0.5)
        r1, w1, t1 = read_stat(name)
        m1 = time.monotonic()
        fp.check()
    dt = m1 - m0
    iops = (r1 + w1 - r0 - w0) / dt
    util = min(100.0, (t1 - t0) / (dt * 10.0))
    return Capacity(workload, iops, util, iops * 100.0 / util if util > 0 else math.nan)


# ---- one run ------------------------------------------------------------------------------

@dataclass
class RunResult:
    """One evaluation x controller run.

    Attributes:
        evaluation, controller: what ran.
        phases: the scaled schedule.
        static_limit: the static controller's (riops, wiops), else None.
        samples: per-interval measurements.
        metrics: the table's numbers (None for calibration runs).
        controller_lines: what the controller printed (decisions, warnings, restores).
        wall_s: how long the run took.
        loadavg: the machine's 1-minute load average at the start and the end of the run
            (/proc/loadavg): the emulated disk's timing needs CPU, so a busy machine shows.
    """

    evaluation: int
    controller: str
    phases: list[ScaledPhase]
    static_limit: tuple[int, int] | None
    samples: Samples
    metrics: RunMetrics | None = None
    controller_lines: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    loadavg: tuple[float, float] = (math.nan, math.nan)


@dataclass(frozen=True)
class _Reading:
    """Counters at one instant: A's and B's I/Os, the device's (reads, writes, io_ticks
    ms), the monotonic time."""

    a_ios: int
    b_ios: int
    stat: tuple[int, int, int]
    t: float

    def append(self, s: Samples, prev: _Reading, t0: float, lim: GroupLimit) -> None:
        """The interval from ``prev`` to this reading as one sample (B's limit ``lim``)."""
        dt = self.t - prev.t
        s.t_end_s.append(self.t - t0)
        s.dt_s.append(dt)
        s.a_ios.append(float(self.a_ios - prev.a_ios))
        s.b_ios.append(float(self.b_ios - prev.b_ios))
        s.dev_iops.append((self.stat[0] + self.stat[1] - prev.stat[0] - prev.stat[1]) / dt)
        s.util_pct.append(min(100.0, (self.stat[2] - prev.stat[2]) / (dt * 10.0)))
        s.b_riops.append(math.nan if lim.riops is None else float(lim.riops))
        s.b_wiops.append(math.nan if lim.wiops is None else float(lim.wiops))


def phase_jobs(name: str, workload: Workload, phases: Sequence[ScaledPhase],
               caps: Callable[[ScaledPhase], tuple[int, int]], tail_s: float) -> list[FioJob]:
    """One fio job per phase, capped at ``caps(phase)`` (reads, writes per second), the
    last one running ``tail_s`` past the schedule's end: the sampling's last
    interval ends when its sleep wakes, on a loaded machine up to 0.5 s late (an interval
    of 1.15 s on the ``ssd`` at load 17), and with fio already stopped A's I/Os of that
    interval counted against ``floor x dt`` -- a "miss" of the clock, not of the
    controller (the run is stopped, and fio killed, at the schedule's end).

    B's demand is the same in every phase of [Oe]'s tables; a job per phase keeps it
    general.
    """
    out: list[FioJob] = []
    for k, p in enumerate(phases):
        extra = tail_s if k == len(phases) - 1 else 0.0
        out.append(FioJob(f"{name}-phase{k + 1}", workload, p.start_s, p.duration_s + extra,
                          *caps(p)))
    return out


def run_once(dev: str, device_bytes: int, ev: Evaluation, phases: Sequence[ScaledPhase],
             controller: str, cfg: EvalConfig, workdir: Path, tag: str, *,
             static_limit: tuple[int, int] | None = None,
             say: Callable[[str], None] = lambda _m: None) -> RunResult:
    """Replay ``phases`` with fio in fresh cgroups under ``controller``; sample every
    ``interval_s``. Calibration runs are ``no-control`` runs of a short schedule."""
    devnum = resolve_device(dev).devnum
    name = Path(os.path.realpath(dev)).name
    hier = CgroupV1(BLKIO_ROOT)
    a_wl = paced(PAPER_SEC3_WORKLOADS[ev.a_workload]("A", threads=1))
    b_wl = paced(PAPER_SEC3_WORKLOADS[ev.b_workload]("B", threads=1, group="B"))
    total_s = phases[-1].end_s
    tail_s = 2 * cfg.interval_s
    a_jobs = phase_jobs("a", a_wl, phases, lambda p: (p.a_riops, p.a_wiops), tail_s)
    b_jobs = phase_jobs("b", b_wl, phases, lambda p: (p.b_riops, p.b_wiops), tail_s)
    res = RunResult(ev.number, controller, list(phases), static_limit, Samples())
    load0 = loadavg()
    lines = res.controller_lines
    t_wall = time.monotonic()
    with contextlib.ExitStack() as stack:
        a_cg, b_cg = stack.enter_context(cgroup_pair(tag))
        if controller == "static" and static_limit is not None:
            hier.write_limit(b_cg, devnum, "riops", static_limit[0])
            hier.write_limit(b_cg, devnum, "wiops", static_limit[1])
            say(f"static limit on B: riops {static_limit[0]} wiops {static_limit[1]}")
        ctl: ControllerThread | None = None
        if controller in ("paper", "adaptive"):
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="iogauge-eval-state-")))
            ctl = ControllerThread(controller, dev, a_cg, b_cg, phases[0].a_floor_iops,
                                    cfg.interval_s, state_dir, lines.append,
                                    capacity_model=cfg.capacity_model or "auto")
        fio_a = stack.enter_context(start_fio(
            fio_text(a_jobs, dev, device_bytes, cfg.depth), workdir, f"{tag}-a", a_cg))
        # The phases are fio's clock, not ours: its jobs start by startdelay from fio's own
        # start, which lagged or led Popen by up to ~0.5 s on a busy machine (A's I/O of a
        # new phase showing in the last interval of the old one). A issues its first I/O at
        # once (linear pacing), so its first completion marks fio's t=0 to within one
        # service time.
        t0 = first_io(hier, a_cg, devnum, fio_a)
        fio_b = stack.enter_context(start_fio(
            fio_text(b_jobs, dev, device_bytes, cfg.depth), workdir, f"{tag}-b", b_cg))
        if ctl is not None:
            ctl.start()
            stack.callback(ctl.stop)  # restores the limits before fio and cgroups go
        prev = _Reading(sum(hier.read_counts(a_cg, devnum)),
                        sum(hier.read_counts(b_cg, devnum)), read_stat(name), t0)
        next_phase = 1
        k = 0
        while True:
            k += 1
            deadline = t0 + k * cfg.interval_s
            if deadline - t0 > total_s + 1e-9:
                break
            # Phase changes fall on interval boundaries (phases are whole intervals long
            # when seconds_per_minute x minutes is a multiple of interval_s).
            while next_phase < len(phases) and phases[next_phase].start_s <= deadline - t0 \
                    - cfg.interval_s + 1e-9:
                if ctl is not None:
                    ctl.set_floor(phases[next_phase].a_floor_iops)
                next_phase += 1
            time.sleep(max(0.0, deadline - time.monotonic()))
            cur = _Reading(sum(hier.read_counts(a_cg, devnum)),
                           sum(hier.read_counts(b_cg, devnum)), read_stat(name),
                           time.monotonic())
            cur.append(res.samples, prev, t0, hier.read_limit(b_cg, devnum))
            prev = cur
            fio_a.check()
            fio_b.check()
            if ctl is not None:
                ctl.check()
        if controller == "static" and static_limit is not None:
            for key in IO_KEYS:
                with contextlib.suppress(IogaugeError, OSError):
                    hier.write_limit(b_cg, devnum, key, None)
    res.wall_s = time.monotonic() - t_wall
    res.loadavg = (load0, loadavg())
    return res


# ---- calibration and the whole benchmark ---------------------------------------------------

@dataclass
class PhaseCalibration:
    """A phase's unthrottled calibration (its mix: A at its floor, B at its demand).

    Attributes:
        a_floor_iops, b_demand_iops: the phase's targets.
        util_pct, iops: device over the steady window.
        a_iops, b_iops: what A and B got, unthrottled.
        capacity_iops: ``iops·100/util``.
        oracle_b_iops: ``min(B's demand, capacity - A's floor)``.
        grid_oracle_b_iops: the same on the kernel's limit grid, for B's read share (the
            oracle itself when it is B's whole demand: no limit is needed then).
        static_oracle_b_iops: what the best static limit, found by trying them
            (:func:`search_static_oracle`), left B; NaN when not searched.
        static_oracle_limit: that limit (reads, writes per second; None: no limit needed).
        static_oracle_tries: the limits tried, as (reads, writes or None, A's met share,
            B's IOPS).
    """

    a_floor_iops: int
    b_demand_iops: int
    util_pct: float
    iops: float
    a_iops: float
    b_iops: float
    capacity_iops: float
    oracle_b_iops: float
    grid_oracle_b_iops: float = math.nan
    static_oracle_b_iops: float = math.nan
    static_oracle_limit: tuple[int, int] | None = None
    static_oracle_tries: list[tuple[int | None, int | None, float, float]] = field(
        default_factory=list)


def calibrate_phases(dev: str, device_bytes: int, ev: Evaluation,
                     phases: Sequence[ScaledPhase], cfg: EvalConfig, workdir: Path,
                     say: Callable[[str], None]) -> list[PhaseCalibration]:
    """One unthrottled run holding each distinct phase for ``calibration_s``; per phase of
    the schedule, its calibration (phases with the same targets share one)."""
    distinct: list[ScaledPhase] = []
    for p in phases:
        if all((q.a_floor_iops, q.b_demand_iops) != (p.a_floor_iops, p.b_demand_iops)
               for q in distinct):
            distinct.append(p)
    sched = [replace(p, start_s=i * cfg.calibration_s, duration_s=cfg.calibration_s)
             for i, p in enumerate(distinct)]
    say(f"eval {ev.number}: calibrating {len(sched)} phase mix(es) unthrottled, "
        f"{cfg.calibration_s:g} s each")
    run = run_once(dev, device_bytes, ev, sched, "no-control", cfg, workdir,
                   f"e{ev.number}-cal")
    x = run.samples.arrays()
    ph = phase_of(x["t_end_s"], x["dt_s"], sched)
    cals: dict[tuple[int, int], PhaseCalibration] = {}
    for k, p in enumerate(sched):
        sel = (ph == k) & (x["t_end_s"] - x["dt_s"] >= p.start_s + cfg.warmup_s - 1e-6)
        span = float(x["dt_s"][sel].sum())
        if span <= 0:
            raise EvalError(f"eval {ev.number}: no steady calibration interval for phase "
                            f"{k + 1}")
        util = float((x["util_pct"][sel] * x["dt_s"][sel]).sum() / span)
        iops = float((x["dev_iops"][sel] * x["dt_s"][sel]).sum() / span)
        cap, orc = oracle_b_iops(util, iops, p.a_floor_iops, p.b_demand_iops)
        b_share = p.b_riops / (p.b_riops + p.b_wiops)
        cals[(p.a_floor_iops, p.b_demand_iops)] = PhaseCalibration(
            p.a_floor_iops, p.b_demand_iops, util, iops,
            float(x["a_ios"][sel].sum() / span), float(x["b_ios"][sel].sum() / span), cap, orc,
            # An oracle that is B's whole demand needs no limit at all: nothing to enforce.
            orc if orc >= p.b_demand_iops else
            grid_oracle_b_iops(orc, b_share, KERNEL_LIMIT_GRID_IOPS))
    return [cals[(p.a_floor_iops, p.b_demand_iops)] for p in phases]


def search_static_oracle(dev: str, device_bytes: int, ev: Evaluation, phase: ScaledPhase,
                         cal: PhaseCalibration, cfg: EvalConfig, workdir: Path,
                         say: Callable[[str], None] = lambda _m: None) -> None:
    """Find, by trying them, the static limit on B that leaves B the most while A meets its
    floor in at least ``A_MET_GOAL`` of the intervals; store it (and what it left B) in
    ``cal``.

    Each try holds the phase's mix (A at its floor, B at its demand under one static limit)
    for ``warmup_s + oracle_search_s``; the intervals after the warm-up count. Limits are
    bisected over :func:`static_limit_candidates`, starting from the one nearest the
    calibrated bound (``cal.oracle_b_iops``; no limit at all when that is B's whole demand);
    A's share of met intervals is taken to fall as B's limit rises. A bound of B's whole
    demand is not taken on trust: with both groups at full load the device may still be
    saturated and A short (evaluation 3's phase 2 without a limit: A short for 39 s), so it
    is tried like any other.
    """
    m = phase.b_riops / phase.b_demand_iops
    cands = static_limit_candidates(phase.b_demand_iops, m)
    dur = cfg.warmup_s + cfg.oracle_search_s
    sched = [replace(phase, start_s=0.0, duration_s=dur)]
    slack = max(1, int(phase.a_riops > 0) + int(phase.a_wiops > 0))
    b_under: dict[int, float] = {}  # candidate tried -> B's IOPS under it

    def attempt(i: int) -> bool:
        lim = cands[i][0]
        run = run_once(dev, device_bytes, ev, sched, "static" if lim else "no-control", cfg,
                       workdir, f"e{ev.number}-orc{i}", static_limit=lim)
        x = run.samples.arrays()
        sel = x["t_end_s"] - x["dt_s"] >= cfg.warmup_s - 1e-6
        span = float(x["dt_s"][sel].sum())
        met = floor_met(x["a_ios"][sel], x["dt_s"][sel], phase.a_floor_iops,
                        cfg.met_frac, slack)
        share = float(met.mean()) if met.size else 0.0
        b = float(x["b_ios"][sel].sum() / span) if span > 0 else math.nan
        ok = share >= A_MET_GOAL
        b_under[i] = b
        cal.static_oracle_tries.append((lim[0] if lim else None, lim[1] if lim else None,
                                        share, b))
        say(f"    static B <= {'none' if lim is None else f'r {lim[0]} w {lim[1]}'}: A met "
            f"{share:.0%}, B {b:.1f} IOPS -> {'ok' if ok else 'A short'}")
        return ok

    lo = largest_good(len(cands), attempt, start=max(
        (k for k, c in enumerate(cands) if c[1] <= cal.oracle_b_iops + 1e-9), default=0))
    if lo < 0:  # not even the lowest limit kept A at its floor: B's oracle is that minimum
        lo = 0
        if 0 not in b_under:
            attempt(0)
    cal.static_oracle_limit = cands[lo][0]
    cal.static_oracle_b_iops = b_under[lo]


@dataclass
class EvalResult:
    """Everything one benchmark run measured.

    Attributes:
        config: the configuration.
        device: the emulated device (path, model, size, lab_id: its entry under
            /run/iogauge/lab, gone once destroyed).
        capacities: capacity runs per workload.
        schedules: per evaluation, the scaled phases.
        calibrations: per evaluation, per phase, its calibration.
        runs: every evaluation x controller run.
        wall_s: total time.
    """

    config: EvalConfig
    device: dict[str, Any]
    capacities: dict[str, Capacity]
    schedules: dict[int, list[ScaledPhase]]
    calibrations: dict[int, list[PhaseCalibration]]
    runs: list[RunResult]
    wall_s: float = 0.0

    def run(self, evaluation: int, controller: str) -> RunResult | None:
        for r in self.runs:
            if r.evaluation == evaluation and r.controller == controller:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config), "device": self.device,
            "capacities": {k: asdict(v) for k, v in self.capacities.items()},
            "paper_ab_capacity_iops": PAPER_AB_CAPACITY_IOPS,
            "schedules": {str(k): [asdict(p) for p in v] for k, v in self.schedules.items()},
            "calibrations": {str(k): [asdict(c) for c in v]
                             for k, v in self.calibrations.items()},
            "runs": [{"evaluation": r.evaluation, "controller": r.controller,
                      "static_limit": r.static_limit, "wall_s": r.wall_s,
                      "loadavg": r.loadavg,
                      "metrics": None if r.metrics is None else asdict(r.metrics),
                      "samples": asdict(r.samples), "controller_lines": r.controller_lines}
                     for r in self.runs],
            "wall_s": self.wall_s,
        }


def run_evaluations(cfg: EvalConfig, *, say: Callable[[str], None] = lambda _m: None,
                    on_run: Callable[[RunResult], None] | None = None) -> EvalResult:
    """Create the device, measure capacities, calibrate, run every evaluation x controller;
    destroy the device and remove every cgroup whatever happens."""
    preflight()
    from iogauge.lab.device import create_device  # noqa: PLC0415
    from iogauge.lab.device import find as lab_find  # noqa: PLC0415

    t_start = time.monotonic()
    read_share = {n: f("A").read_share for n, f in PAPER_SEC3_WORKLOADS.items()}
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="iogauge-eval-")))
        say(f"creating the emulated device (model {cfg.model})")
        dev = stack.enter_context(create_device(cfg.model, cfg.size,
                                                backing_dir=cfg.backing_dir))
        name = Path(dev).name
        device_bytes = int((Path("/sys/block") / name / "size").read_text()) * 512
        info: dict[str, Any] = {"path": dev, "model": cfg.model, "size_bytes": device_bytes,
                                "lab_id": lab_find(dev).id}
        say(f"{dev}: {device_bytes / 1e12:.3g} TB emulated {cfg.model}")
        wanted = sorted({w for e in cfg.evaluations for w in
                         (PAPER_EVALUATIONS[e].a_workload, PAPER_EVALUATIONS[e].b_workload)})
        caps: dict[str, Capacity] = {}
        for w in wanted:
            caps[w] = measure_capacity(dev, device_bytes, w, cfg, workdir)
            say(f"capacity of {w} on both partitions: {caps[w].iops:.1f} IOPS at "
                f"{caps[w].util_pct:.1f} % -> {caps[w].capacity_iops:.1f} IOPS at 100 % "
                f"(paper: {PAPER_AB_CAPACITY_IOPS[w]:.1f})")
        res = EvalResult(cfg, info, caps, {}, {}, [])
        cap_iops = {w: c.capacity_iops for w, c in caps.items()}
        for e in cfg.evaluations:
            ev = PAPER_EVALUATIONS[e]
            phases = scale_schedule(ev, cap_iops, cfg.seconds_per_minute, read_share)
            res.schedules[e] = phases
            say(f"{ev.title}: " + ", ".join(
                f"A {p.a_floor_iops} / B {p.b_demand_iops} IOPS for {p.duration_s:g} s"
                for p in phases))
            cals = calibrate_phases(dev, device_bytes, ev, phases, cfg, workdir, say)
            res.calibrations[e] = cals
            for k, c in enumerate(cals):
                say(f"  phase {k + 1}: unthrottled A {c.a_iops:.1f} B {c.b_iops:.1f} IOPS, "
                    f"%util {c.util_pct:.1f}, capacity {c.capacity_iops:.1f}, oracle B "
                    f"{c.oracle_b_iops:.1f} (on the kernel's grid {c.grid_oracle_b_iops:.1f})")
            if cfg.oracle_search_s > 0:
                done: set[int] = set()
                for k, (p, c) in enumerate(zip(phases, cals, strict=True)):
                    if id(c) in done:
                        continue
                    done.add(id(c))
                    say(f"  phase {k + 1}: searching the best static limit on B")
                    search_static_oracle(dev, device_bytes, ev, p, c, cfg, workdir, say)
                    say(f"  phase {k + 1}: static oracle B {c.static_oracle_b_iops:.1f} IOPS "
                        f"(limit {c.static_oracle_limit or 'none'}; bound "
                        f"{c.oracle_b_iops:.1f})")
            oracle = [c.oracle_b_iops for c in cals]
            grid = [c.grid_oracle_b_iops for c in cals]
            static_orc = [c.static_oracle_b_iops for c in cals]
            static = _static_limit(phases, cals[0].capacity_iops, read_share[ev.b_workload],
                                   cfg.static_x)
            for ctl in cfg.controllers:
                say(f"{ev.title}: {ctl} ...")
                run = run_once(dev, device_bytes, ev, phases, ctl, cfg, workdir,
                               f"e{e}-{ctl}", static_limit=static if ctl == "static" else None,
                               say=say)
                run.metrics = run_metrics(run.samples, phases, oracle,
                                          interval_s=cfg.interval_s, frac=cfg.met_frac,
                                          grid_oracle=grid, static_oracle=static_orc)
                res.runs.append(run)
                if on_run is not None:
                    on_run(run)
        res.wall_s = time.monotonic() - t_start
        return res


# ---- presenting ---------------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def _conv(x: float | None) -> str:
    return "never" if x is None else f"{x:.0f} s"


def results_table(res: EvalResult) -> str:
    """One table per evaluation, controllers as rows, the baseline's ratios alongside."""
    out: list[str] = []
    for e in res.config.evaluations:
        ev = PAPER_EVALUATIONS[e]
        phases = res.schedules.get(e)
        if not phases:
            continue
        cals = res.calibrations.get(e, [])
        out.append(f"{ev.title} -- phases (A floor / B demand IOPS, s): " + ", ".join(
            f"{p.a_floor_iops}/{p.b_demand_iops} {p.duration_s:g}" for p in phases))
        if cals:
            out.append("  oracle B per phase: " + ", ".join(
                f"{c.oracle_b_iops:.1f} (C {c.capacity_iops:.1f}, grid "
                f"{c.grid_oracle_b_iops:.0f}, static {c.static_oracle_b_iops:.1f})"
                for c in cals))
        base = res.run(e, "no-control")
        bm = base.metrics if base is not None else None
        hdr = (f"  {'controller':<11} {'A met':>6} {'after':>6} "
               + " ".join(f"{'conv ' + str(i + 1):>7}" for i in range(len(phases)))
               + f" {'B IOPS':>7} {'B/orc':>6} {'B/grid':>6} {'B/stat':>6} {'B/base':>6}"
               f" {'chg/min':>7}")
        out.append(hdr)
        for c in res.config.controllers:
            r = res.run(e, c)
            if r is None or r.metrics is None:
                continue
            m = r.metrics
            ratio = (m.b_iops / bm.b_iops if bm is not None and bm.b_iops > 0 else math.nan)
            out.append(f"  {c:<11} {_pct(m.a_met_share):>6} {_pct(m.a_met_after_share):>6} "
                       + " ".join(f"{_conv(s):>7}" for s in m.settle_s)
                       + f" {m.b_iops:>7.1f} {_pct(m.b_vs_oracle):>6} "
                       f"{_pct(m.b_vs_grid_oracle):>6} {_pct(m.b_vs_static_oracle):>6} "
                       f"{_pct(ratio):>6} {m.limit_changes_per_min:>7.1f}")
        out.append("")
    return "\n".join(out)


def results_markdown(res: EvalResult) -> str:
    """The same as :func:`results_table`, as Markdown tables (for docs)."""
    out: list[str] = []
    for e in res.config.evaluations:
        ev = PAPER_EVALUATIONS[e]
        phases = res.schedules.get(e)
        if not phases:
            continue
        cals = res.calibrations.get(e, [])
        out.append(f"**{ev.title}** — phases (A floor / B demand IOPS, seconds): " + ", ".join(
            f"{p.a_floor_iops} / {p.b_demand_iops}, {p.duration_s:g} s" for p in phases)
            + "; oracle B per phase: " + ", ".join(
                f"{c.oracle_b_iops:.1f} (kernel grid {c.grid_oracle_b_iops:.0f}, best static "
                f"limit tried {c.static_oracle_b_iops:.1f})" for c in cals))
        out.append("")
        out.append("| controller | A met | A met after conv. | "
                   + " | ".join(f"conv. {i + 1}" for i in range(len(phases)))
                   + " | B IOPS | B / oracle | B / kernel-grid oracle | B / static oracle | "
                   "B / no-control | limit changes/min |")
        out.append("|---" * (9 + len(phases)) + "|")
        base = res.run(e, "no-control")
        bm = base.metrics if base is not None else None
        for c in res.config.controllers:
            r = res.run(e, c)
            if r is None or r.metrics is None:
                continue
            m = r.metrics
            ratio = (m.b_iops / bm.b_iops if bm is not None and bm.b_iops > 0 else math.nan)
            out.append(f"| {c} | {_pct(m.a_met_share)} | {_pct(m.a_met_after_share)} | "
                       + " | ".join(_conv(s) for s in m.settle_s)
                       + f" | {m.b_iops:.1f} | {_pct(m.b_vs_oracle)} | "
                       f"{_pct(m.b_vs_grid_oracle)} | {_pct(m.b_vs_static_oracle)} | "
                       f"{_pct(ratio)} | {m.limit_changes_per_min:.1f} |")
        out.append("")
    return "\n".join(out)


__all__ = [
    "A_MET_GOAL", "BLKIO_ROOT", "B_ORACLE_GOAL", "CGROUP_PREFIX", "CONTROLLERS",
    "CONVERGENCE_GOAL_S", "PAPER_AB_CAPACITY_IOPS", "PAPER_EVALUATIONS", "QUICK", "Capacity",
    "EvalConfig", "EvalError", "EvalResult", "Evaluation", "FioJob", "Phase",
    "PhaseCalibration", "PhaseMetrics", "RunMetrics", "RunResult", "Samples", "ScaledPhase",
    "calibrate_phases", "cgroup_pair", "fio_text", "floor_met", "grid_oracle_b_iops",
    "largest_good", "leftover_cgroups",
    "measure_capacity", "oracle_b_iops", "paced", "phase_jobs", "phase_of", "preflight",
    "remove_cgroup",
    "results_markdown", "results_table", "run_evaluations", "run_metrics", "run_once",
    "scale_schedule", "search_static_oracle", "settle_index", "split_rate",
    "static_limit_candidates",
]
