"""[Oe] §5's evaluations (``paper-eval1`` .. ``paper-eval3``) in the simulator.

Each evaluation replays one of the paper's schedules (Table 3: **1** file share A vs backup
B, **2** file share vs file share, **3** backup vs backup; Tables 4-6: A's target, B's load,
minutes) on a disk model in virtual time (deterministic for a seed), with a guarantee policy
of :mod:`iogauge.guarantee.policy` deciding B's limit every sampling interval through the
simulator's controller hook (:func:`iogauge.lab.simulator.policy_controller`), and reports
beside the paper's numbers: the target-busy-rate (X) updates and X, the share of intervals in
which A got at least 95 % of its floor, B's throughput, and the svctm drift.

**The setup, as §5 describes it.** iostat every 20 s (``interval_s``); A = 10 threads sending
I/O to "the latter 500 GB region" (後半の500GB領域), B = 10 threads to "the former" (前半);
"the same environment as §3" (Table 1), whose two 500 GB regions are the 2 TB volume's first
(§3's partition A) and last (§3's partition B) 500 GB -- so group A runs on §3's partition B
and group B on §3's partition A. A's load threads are capped at A's target of the phase
("上限性能を負荷 thread に通知"), so A demands exactly its floor; B's at its Table value, and at
the smaller of that and the controller's ``b`` (§5: "より小さい値を上限性能として"). Both
caps use the paper's own limiter: count the I/Os of each wall-clock second, block the rest
of the second once the cap is reached (§4 (4); workloads ``arrival="per_second"``). The
policy starts from X = 95 % (§5) and is told A's new target at each phase change
(:meth:`~iogauge.guarantee.policy.Policy.set_floors`, from the decision taken at the
boundary on).

**Variants** (rows of the table; see :data:`VARIANTS`):

* ``paper/user`` -- the ``paper`` policy (§4 exactly, iogauge's implementation) with the
  paper's actuator: B's limit ``b`` as a user-level cap on B's total issue rate
  (:attr:`iogauge.lab.simulator.IopsLimit.iops`). This is the reproduction.
* ``paper/kernel`` -- the same policy with iogauge's actuator: per-direction kernel limits
  (cgroup ``io.max`` riops/wiops, a token bucket per direction in the simulator), as
  ``iogauge guarantee`` applies them live.
* ``adaptive/kernel`` -- iogauge's default policy with the kernel actuator.
* ``paper/user/util99`` -- a sensitivity row: ``paper/user`` with %util >= 99 % counted as
  "100 %" (:attr:`~iogauge.guarantee.policy.PaperParams.full_util_pct`, the knob for a
  saturated device that reads 99.x % because of a few milliseconds of idle time in a 20 s
  sample). It shows what the paper's update arithmetic (NewX) does on this model once it
  triggers; it is not the paper's criterion.

The policies see the device as a single-queue device (``Targets.device_parallel=False``):
the paper's RAID box is one SCSI LUN to the host, reported as rotational, and §3 measured
its %util to be linear in IOPS up to the knee -- what a live ``iogauge guarantee`` decides for
such a device.

**Scaling.** The paper's targets are absolute IOPS of its RAID-5; this model does the file
share and the backup at other speeds (e.g. the backup about twice as fast, §3's Table).
With ``scale`` (the default) every target is multiplied by the ratio of the model's
capacity for that workload on both partitions (closed loop, 10 threads, §3's A+B
placement) to the paper's (§3: 239 x 70 % for the file share, 65 x 69 % for the backup),
then rounded to whole IOPS (>= 1), so that A's floor and B's load take the share of the
device they took in the paper. Without it the Tables' numbers are used as written.

**Metrics.** Per 20-s interval: A's and B's completed IOPS, device %util, the policy's X
and state, B's limit. *A met its floor* in an interval when A completed >= 95 % of the
phase's floor per second; reported over all intervals and over the second half of each
phase (after the transient the paper accepts: §4 "決められた性能保証値を一時的に守れなくなる
ことは容認する"). *X updates*: decisions in state ``update`` (the paper's NewX, §4), with
the time and the X before and after; for the adaptive policy, the times X was lowered.
*svctm drift*: %util/IOPS (ms) of the evaluation's own mix (A's workload on its region and
B's on its, in phase 2's A:B ratio, uncontrolled, the paper's limiter) at two loads a factor
of two apart -- the paper's 80 -> 160 IOPS (§4: 5.68 -> 5.72 ms, +0.78 %, "the error of the
guarantee when the load doubles") -- here 40 % and 80 % of the mix's closed-loop capacity,
both below the lowest knee the paper reports (80 %).

**Device mode** (:func:`iogauge.lab.paper_eval_device.device_paper_eval`) runs the
evaluation on the emulated block device in real cgroups through the harness of
:mod:`iogauge.lab.guarantee_eval` (its own scaling, time compression and metrics;
``benchmarks/guarantee_eval.py`` is its command line) and writes its table and plots in the
same three files.
"""

from __future__ import annotations

import html
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from iogauge import __version__
from iogauge.guarantee.policy import (
    AdaptiveParams,
    Decision,
    PaperParams,
    Policy,
    Targets,
    make_policy,
)
from iogauge.lab.paper_eval_setup import (
    A_PARTITION,
    B_PARTITION,
    DEFAULT_CONFIG,
    EVAL_EXPERIMENTS,
    FULL_UTIL_PCT,
    PAPER_AB_CAPACITY_IOPS,
    PAPER_EVALUATIONS,
    QUICK,
    VARIANT_NAMES,
    VARIANTS,
    Actuator,
    PaperEvalConfig,
    PaperEvalError,
    PaperEvaluation,
    Phase,
    ScaledPhase,
    Variant,
    eval_workloads,
    phase_index,
    scale_phases,
    variant,
)
from iogauge.lab.paper_report import (
    PAPER_SVCTM_MS,
    REPORT_CSS,
    Comparison,
    holds_text,
    nice_ceiling,
)
from iogauge.lab.profiles import ModelProfile, build_model, load_profile
from iogauge.lab.simulator import (
    Controller,
    IntervalObservation,
    IopsLimit,
    policy_controller,
    run_point,
    simulate,
    simulate_max_iops,
)

# ---- one run ------------------------------------------------------------------------------

def eval_controller(policy: Policy, phases: Sequence[ScaledPhase], actuator: Actuator,
                    decisions: list[Decision]) -> Controller:
    """The simulator's controller: tells the policy A's floor of the phase that starts at
    each decision (:meth:`Policy.set_floors`), steps it (``policy_controller``), and hands
    B's limit to the simulator per direction (``kernel``) or as a total issue cap
    (``user``: riops + wiops, the paper's ``b`` -- the policy splits ``b`` by B's mix)."""
    inner = policy_controller(policy, decisions)
    floor = [phases[0].a_floor_iops]

    def control(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        k = phase_index(phases, obs.t_end_s)
        if k < len(phases) and phases[k].a_floor_iops != floor[0]:
            floor[0] = phases[k].a_floor_iops
            policy.set_floors({"A": float(floor[0])})
        change = inner(obs)
        if actuator == "kernel" or not change:
            return change
        out: dict[str, IopsLimit] = {}
        for g, lim in change.items():
            total = (None if lim.riops is None or lim.wiops is None
                     else lim.riops + lim.wiops)
            out[g] = IopsLimit(iops=total)
        return out

    return control


@dataclass
class XChange:
    """A change of the target busy rate X (or a reset).

    Attributes:
        t_s: virtual time of the decision.
        x_before_pct, x_after_pct: X before and after.
        state: the decision's state (``update``, ``reset``, ``protect``, ...).
        reason: the policy's sentence.
    """

    t_s: float
    x_before_pct: float | None
    x_after_pct: float | None
    state: str
    reason: str


@dataclass
class PhaseStats:
    """One phase of a run.

    Attributes:
        a_floor_iops, b_demand_iops: the phase's targets.
        intervals: samples in the phase.
        a_met_share: share of them in which A got >= met_frac of its floor.
        a_met_late_share: the same over the phase's second half.
        a_iops, b_iops: mean completed IOPS.
        util_pct: mean %util.
        full_intervals: samples at %util = 100 (iostat's 100.00).
    """

    a_floor_iops: int
    b_demand_iops: int
    intervals: int
    a_met_share: float
    a_met_late_share: float
    a_iops: float
    b_iops: float
    util_pct: float
    full_intervals: int


@dataclass
class VariantRun:
    """One variant on one evaluation: per-interval series and their summary.

    Attributes:
        variant: :attr:`Variant.name`.
        t_end_s: end of each interval (virtual s).
        a_iops, b_iops, util_pct: per interval.
        x_pct: the policy's X after the decision at the end of the interval (None: none).
        state: the decision's state.
        b_limit_iops: B's limit in force during the interval (riops + wiops, or the user
            cap; None: unlimited).
        x_changes: every change of X (paper: updates and resets; adaptive: each step).
        phases: per-phase statistics.
        a_met_share, a_met_late_share: over all phases (all intervals / second halves).
        full_intervals: samples at %util = 100.
        max_util_pct: highest %util of a sample.
        wall_s: CPU time of the run.
    """

    variant: str
    t_end_s: list[float]
    a_iops: list[float]
    b_iops: list[float]
    util_pct: list[float]
    x_pct: list[float | None]
    state: list[str]
    b_limit_iops: list[float | None]
    x_changes: list[XChange]
    phases: list[PhaseStats]
    a_met_share: float
    a_met_late_share: float
    full_intervals: int
    max_util_pct: float
    wall_s: float = 0.0

    @property
    def updates(self) -> list[XChange]:
        """The paper's NewX updates (state ``update``)."""
        return [c for c in self.x_changes if c.state == "update"]

    @property
    def resets(self) -> list[XChange]:
        return [c for c in self.x_changes if c.state == "reset"]

    @property
    def lowered(self) -> list[XChange]:
        """Every decision that lowered X."""
        return [c for c in self.x_changes if c.x_before_pct is not None
                and c.x_after_pct is not None and c.x_after_pct < c.x_before_pct - 1e-9]

    @property
    def b_iops_mean(self) -> float:
        return sum(self.b_iops) / len(self.b_iops) if self.b_iops else math.nan


def _policy(v: Variant, floor: int) -> Policy:
    targets = Targets(protected={"A": float(floor)}, throttled=("B",), device_parallel=False)
    paper = None if v.full_util_pct is None else PaperParams(full_util_pct=v.full_util_pct)
    return make_policy(v.policy, targets, paper=paper)


def run_variant(profile: ModelProfile, ev: PaperEvaluation, phases: Sequence[ScaledPhase],
                v: Variant, cfg: PaperEvalConfig) -> VariantRun:
    """Simulate the schedule once with ``v``'s policy and actuator."""
    t0 = time.process_time()
    model = build_model(profile, capacity_bytes=cfg.capacity_bytes)
    policy = _policy(v, phases[0].a_floor_iops)
    decisions: list[Decision] = []
    wls = eval_workloads(ev, phases, cfg)
    res = simulate(model, wls, phases[-1].end_s, interval_s=cfg.interval_s, seed=cfg.seed,
                   controller=eval_controller(policy, phases, v.actuator, decisions))
    g = res.groups
    ga = g.filter(pl.col("group") == "A")
    gb = g.filter(pl.col("group") == "B")
    t_end = [float(x) for x in ga["t_end_s"].to_list()]
    a_iops = [float(x) for x in ga["iops"].to_list()]
    b_iops = [float(x) for x in gb["iops"].to_list()]
    util = [float(x) for x in res.frame.df["util_pct"].to_list()]
    limits: list[float | None] = []
    for r, w, tot in zip(gb["limit_riops"].to_list(), gb["limit_wiops"].to_list(),
                         gb["limit_iops"].to_list(), strict=True):
        limits.append(tot if tot is not None else (
            None if r is None or w is None else float(r + w)))
    # Both policies start from their own initial X (the adaptive one reports none while it
    # warms up): the first X it reports is not a change.
    x_prev: float = (PaperParams().x_initial_pct if v.policy == "paper"
                     else AdaptiveParams().x_top_pct(parallel=False))
    changes: list[XChange] = []
    for t, d in zip(t_end, decisions, strict=True):
        moved = d.x_pct is not None and abs(d.x_pct - x_prev) > 1e-9
        if d.state in ("update", "reset") or (moved and v.policy != "paper"):
            changes.append(XChange(t, x_prev, d.x_pct, d.state, d.reason))
        if d.x_pct is not None:
            x_prev = d.x_pct
    stats: list[PhaseStats] = []
    met_all: list[bool] = []
    met_late: list[bool] = []
    for k, p in enumerate(phases):
        idx = [i for i, t in enumerate(t_end) if phase_index(phases, t - 1e-6) == k]
        met = [a_iops[i] >= cfg.met_frac * p.a_floor_iops - 1e-9 for i in idx]
        late = met[len(met) // 2:]
        met_all += met
        met_late += late
        n = len(idx) or 1
        stats.append(PhaseStats(
            p.a_floor_iops, p.b_demand_iops, len(idx), sum(met) / n,
            sum(late) / (len(late) or 1), sum(a_iops[i] for i in idx) / n,
            sum(b_iops[i] for i in idx) / n, sum(util[i] for i in idx) / n,
            sum(util[i] >= FULL_UTIL_PCT for i in idx)))
    return VariantRun(
        variant=v.name, t_end_s=t_end, a_iops=a_iops, b_iops=b_iops, util_pct=util,
        x_pct=[d.x_pct for d in decisions], state=[d.state for d in decisions],
        b_limit_iops=limits, x_changes=changes, phases=stats,
        a_met_share=sum(met_all) / (len(met_all) or 1),
        a_met_late_share=sum(met_late) / (len(met_late) or 1),
        full_intervals=sum(u >= FULL_UTIL_PCT for u in util),
        max_util_pct=max(util) if util else math.nan,
        wall_s=time.process_time() - t0)


# ---- calibration: capacities and the svctm drift ---------------------------------------------

@dataclass
class SvctmDrift:
    """%util / IOPS of the evaluation's mix at two loads (module docstring).

    Attributes:
        mix_capacity_iops: the mix's closed-loop IOPS (both groups uncapped).
        loads_iops: the two offered loads.
        iops, util_pct: what each run measured after its warm-up.
        svctm_ms: %util x 10 / IOPS of each run.
        drift_pct: (second / first - 1) x 100.
    """

    mix_capacity_iops: float
    loads_iops: tuple[float, float]
    iops: tuple[float, float]
    util_pct: tuple[float, float]
    svctm_ms: tuple[float, float]
    drift_pct: float


def measure_svctm(profile: ModelProfile, ev: PaperEvaluation,
                  phases: Sequence[ScaledPhase], cfg: PaperEvalConfig) -> SvctmDrift:
    """The svctm drift of the evaluation's mix (phase 2's A:B ratio)."""
    wls = eval_workloads(ev, phases, cfg)
    cap = simulate_max_iops(build_model(profile, capacity_bytes=cfg.capacity_bytes), wls,
                            duration_s=cfg.capacity_s, seed=cfg.seed,
                            warmup_frac=cfg.warmup_s / cfg.capacity_s)
    ref = phases[1] if len(phases) > 1 else phases[0]
    a_share = ref.a_floor_iops / (ref.a_floor_iops + ref.b_demand_iops)
    loads = (cfg.svctm_loads[0] * cap, cfg.svctm_loads[1] * cap)
    got: list[tuple[float, float]] = []
    for load in loads:
        capped = [wls[0].with_rate(max(1.0, round(load * a_share)), cfg.arrival),
                  wls[1].with_rate(max(1.0, round(load * (1 - a_share))), cfg.arrival)]
        pt = run_point(build_model(profile, capacity_bytes=cfg.capacity_bytes), capped,
                       cfg.svctm_s, interval_s=cfg.interval_s, seed=cfg.seed,
                       warmup_s=cfg.warmup_s)
        got.append((pt.iops, pt.util_pct))
    s = tuple(u * 10.0 / i if i > 0 else math.nan for i, u in got)
    return SvctmDrift(cap, loads, (got[0][0], got[1][0]), (got[0][1], got[1][1]),
                      (s[0], s[1]), (s[1] / s[0] - 1.0) * 100.0)


# ---- the result ---------------------------------------------------------------------------------

@dataclass
class PaperEvalResult:
    """One evaluation's outcome (sim mode).

    Attributes:
        config: how it was run.
        evaluation: the paper's evaluation.
        profile, profile_description: the model.
        capacities: the model's closed-loop IOPS per workload on both partitions.
        factors: the scale factor per workload (1.0 without ``scale``).
        phases: the schedule on the model.
        svctm: the svctm drift.
        runs: one per variant, in ``config.variants`` order.
        comparisons: the results table.
        started_utc, wall_s: when it began and how long it took.
    """

    config: PaperEvalConfig
    evaluation: PaperEvaluation
    profile: str
    profile_description: str
    capacities: dict[str, float]
    factors: dict[str, float]
    phases: list[ScaledPhase]
    svctm: SvctmDrift
    runs: list[VariantRun]
    comparisons: list[Comparison] = field(default_factory=list)
    started_utc: str = ""
    wall_s: float = 0.0
    mode: str = "sim"

    @property
    def name(self) -> str:
        return f"paper-eval{self.evaluation.number}"

    def run(self, variant_name: str) -> VariantRun:
        for r in self.runs:
            if r.variant == variant_name:
                return r
        raise KeyError(variant_name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.name, "mode": self.mode, "profile": self.profile,
            "config": asdict(self.config), "evaluation": asdict(self.evaluation),
            "started_utc": self.started_utc, "wall_s": self.wall_s,
            "capacities_iops": self.capacities,
            "paper_ab_capacity_iops": PAPER_AB_CAPACITY_IOPS, "scale_factors": self.factors,
            "phases": [asdict(p) for p in self.phases], "svctm": asdict(self.svctm),
            "runs": [{**asdict(r), "updates": len(r.updates), "resets": len(r.resets),
                      "b_iops_mean": r.b_iops_mean} for r in self.runs],
            "comparisons": [asdict(c) for c in self.comparisons],
        }

    def markdown(self) -> str:
        return results_markdown(self)

    def html(self) -> str:
        return report_html(self)


def paper_eval(number: int, cfg: PaperEvalConfig = DEFAULT_CONFIG, *,
               progress: Callable[[str], None] | None = None) -> PaperEvalResult:
    """Run evaluation ``number`` (1-3) in the simulator (module docstring)."""
    say = progress or (lambda _m: None)
    if number not in PAPER_EVALUATIONS:
        raise PaperEvalError(f"[Oe] has evaluations 1, 2 and 3, not {number}")
    ev = PAPER_EVALUATIONS[number]
    profile = load_profile(cfg.profile)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    caps: dict[str, float] = {}
    factors: dict[str, float] = {}
    for w in dict.fromkeys((ev.a_workload, ev.b_workload)):
        if cfg.scale:
            caps[w] = simulate_max_iops(build_model(profile, capacity_bytes=cfg.capacity_bytes),
                                        w, duration_s=cfg.capacity_s, seed=cfg.seed,
                                        warmup_frac=cfg.warmup_s / cfg.capacity_s,
                                        placement="A+B", threads=cfg.threads)
            factors[w] = caps[w] / PAPER_AB_CAPACITY_IOPS[w]
            say(f"{w} on both partitions: {caps[w]:.1f} IOPS (paper "
                f"{PAPER_AB_CAPACITY_IOPS[w]:.1f}): targets x {factors[w]:.2f}")
        else:
            factors[w] = 1.0
    phases = scale_phases(ev, factors, cfg.seconds_per_minute)
    say(f"{ev.title}: " + ", ".join(f"A {p.a_floor_iops} / B {p.b_demand_iops} IOPS for "
                                    f"{p.duration_s:g} s" for p in phases))
    variants = [variant(n) for n in cfg.variants]
    jobs = cfg.jobs or min(len(variants) + 1, os.cpu_count() or 1)
    runs: list[VariantRun]
    if jobs <= 1:
        svctm = measure_svctm(profile, ev, phases, cfg)
        runs = []
        for v in variants:
            say(f"{v.name} ...")
            runs.append(run_variant(profile, ev, phases, v, cfg))
    else:
        # spawn, not fork (see experiments.paper_sec3: forked polars pools deadlock).
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            fut_s = pool.submit(measure_svctm, profile, ev, phases, cfg)
            futs = [pool.submit(run_variant, profile, ev, phases, v, cfg) for v in variants]
            runs = []
            for v, f in zip(variants, futs, strict=True):
                runs.append(f.result())
                say(f"{v.name}: {len(runs[-1].updates)} update(s); A met its floor in "
                    f"{runs[-1].a_met_late_share:.0%} of each phase's second half")
            svctm = fut_s.result()
    res = PaperEvalResult(config=cfg, evaluation=ev, profile=profile.name,
                          profile_description=profile.description, capacities=caps,
                          factors=factors, phases=phases, svctm=svctm, runs=runs,
                          started_utc=started)
    res.comparisons = compare_eval(res)
    res.wall_s = time.monotonic() - t0
    return res


# ---- our numbers beside the paper's ------------------------------------------------------------

def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f} %"


def _x1(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def _changes_text(cs: Sequence[XChange]) -> str:
    return ", ".join(f"{_x(c.x_before_pct)} → {_x(c.x_after_pct)} at {c.t_s:.0f} s"
                     for c in cs)


def compare_eval(res: PaperEvalResult) -> list[Comparison]:
    """The results table (``Comparison`` rows, as paper-sec3's)."""
    ev = res.evaluation
    rows: list[Comparison] = []
    paper_times = (" (at ≈" + " and ≈".join(f"{t:.0f} s" for t in ev.paper_update_times_s)
                   + ")") if ev.paper_update_times_s else ""
    for r in res.runs:
        v = variant(r.variant)
        sat = (f"{r.full_intervals} sample(s) at %util = 100, highest "
               f"{r.max_util_pct:.2f} %")
        if v.policy == "paper":
            n = len(r.updates)
            rows.append(Comparison(
                f"{v.name}: target X updates", f"{n} ({sat})",
                f"{ev.paper_updates}{paper_times}", n == ev.paper_updates,
                "as many NewX updates as the paper (each needs %util = 100 in 3 of the "
                "last 10 samples)"))
            first = r.updates[0] if r.updates else None
            rows.append(Comparison(
                f"{v.name}: X after the first update",
                "no update: X stayed 95 %" if first is None else _changes_text([first]),
                f"{ev.paper_first_x_pct:.0f} % ({ev.paper_x_note})", None,
                "reported: NewX = X - (c - d)·C·y depends on the device's curve above its "
                "knee"))
            if ev.number == 1:
                rows.append(Comparison(
                    f"{v.name}: X reset after A's target fell back (phase 3)",
                    ("reset " + ", ".join(f"at {c.t_s:.0f} s" for c in r.resets))
                    if r.resets else "no reset",
                    "no (%util ≈ 50 % stays above the 20 % reset; busy_per_iops 0.8 → 1.3,"
                    " the reset the paper proposes)", None,
                    "reported: iogauge's paper policy also resets X when busy_per_iops "
                    "jumps x1.5 (the paper's missing piece)"))
        else:
            lowest = min((x for x in r.x_pct if x is not None), default=None)
            rows.append(Comparison(
                f"{v.name}: X lowered",
                f"{len(r.lowered)} time(s); X {_x(lowest)} at the lowest, "
                f"{_x(r.x_pct[-1] if r.x_pct else None)} at the end ({sat})",
                f"{ev.paper_updates} NewX update(s) (paper policy)", None,
                "reported: the adaptive policy moves X by small steps on A-misses and "
                "congestion, not by NewX"))
        rows.append(Comparison(
            f"{v.name}: A got ≥ {res.config.met_frac:.0%} of its floor",
            f"{r.a_met_late_share:.0%} of the samples in each phase's second half "
            f"({r.a_met_share:.0%} of all)",
            "held at its target after the update(s); temporary misses accepted (§4, "
            "Figs. 10, 12, 14)", r.a_met_late_share >= 0.9,
            "A meets its floor in ≥ 90 % of each phase's second half"))
        rows.append(Comparison(
            f"{v.name}: B's IOPS by phase",
            " / ".join(f"{p.b_iops:.0f}" for p in r.phases) + " of "
            + " / ".join(f"{p.b_demand_iops}" for p in r.phases) + " demanded",
            "- (Figs. 10, 12, 14 only)", None, "reported"))
    s = res.svctm
    (x1, p1), (x2, p2) = PAPER_SVCTM_MS
    rows.append(Comparison(
        "svctm (%util/IOPS) drift of the mix as its load doubles",
        f"{s.svctm_ms[0]:.2f} → {s.svctm_ms[1]:.2f} ms at {s.iops[0]:.0f} → "
        f"{s.iops[1]:.0f} IOPS ({s.drift_pct:+.2f} %)",
        f"{p1:.2f} → {p2:.2f} ms at {x1:.0f} → {x2:.0f} IOPS (+0.78 %, file share on "
        "A+B)", abs(s.drift_pct) <= 5.0,
        "busy per IOPS nearly constant below the knee (within 5 %): the method's error"))
    return rows


# ---- output ---------------------------------------------------------------------------------

def results_markdown(res: PaperEvalResult) -> str:
    """``results.md``: our numbers beside the paper's, the schedule, every run by phase."""
    cfg, ev = res.config, res.evaluation
    scale = ("targets rescaled to the model (" + ", ".join(
        f"{w}: {res.capacities[w]:.1f} IOPS on A+B vs the paper's "
        f"{PAPER_AB_CAPACITY_IOPS[w]:.1f}, x {f:.2f}" for w, f in res.factors.items())
        + ")") if cfg.scale else "targets as the paper gives them (not rescaled)"
    out = [f"# {res.name}: [Oe] §5, {ev.title} ({res.mode})", "",
           (f"Model `{res.profile}` ({res.profile_description}); A = {cfg.threads} threads "
            f"of {ev.a_workload} on the volume's last 500 GB, B = {cfg.threads} threads of "
            f"{ev.b_workload} on its first 500 GB, both capped by [Oe]'s per-second "
            f"limiter; samples and decisions every {cfg.interval_s:g} s; X from 95 %; "
            f"{cfg.seconds_per_minute:g} s per paper minute; {scale}; seed {cfg.seed}."),
           "", "## Our numbers beside the paper's", "",
           "| finding | ours | paper | holds | criterion |", "|---|---|---|:---:|---|"]
    for c in res.comparisons:
        out.append(f"| {c.finding} | {c.ours} | {c.paper} | {holds_text(c.holds)} | "
                   f"{c.criterion} |")
    out += ["", "## Schedule on the model", "",
            "| phase | A floor (IOPS) | B demand (IOPS) | from (s) | to (s) | paper |",
            "|---:|---:|---:|---:|---:|---|"]
    for k, (sp, pp) in enumerate(zip(res.phases, ev.phases, strict=True)):
        out.append(f"| {k + 1} | {sp.a_floor_iops} | {sp.b_demand_iops} | {sp.start_s:g} | "
                   f"{sp.end_s:g} | {pp.a_floor_iops:g} / {pp.b_demand_iops:g} IOPS, "
                   f"{pp.minutes:g} min |")
    out += ["", "## Runs by phase", "",
            ("| variant | phase | A floor | A IOPS | A met (all / 2nd half) | B IOPS | "
             "%util | samples at 100 % |"), "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res.runs:
        for k, st in enumerate(r.phases):
            out.append(f"| {r.variant} | {k + 1} | {st.a_floor_iops} | {st.a_iops:.1f} | "
                       f"{st.a_met_share:.0%} / {st.a_met_late_share:.0%} | {st.b_iops:.1f} "
                       f"| {st.util_pct:.1f} | {st.full_intervals} |")
    out += ["", "## Changes of X", ""]
    for r in res.runs:
        out.append(f"* **{r.variant}** ({variant(r.variant).label}): "
                   + ("; ".join(f"{c.t_s:.0f} s {c.state}: {_x1(c.x_before_pct)} → "
                                f"{_x1(c.x_after_pct)}" for c in r.x_changes)
                      or "none (X stayed at its initial value)"))
    s = res.svctm
    out += ["", "## svctm drift", "",
            (f"The mix (A:B as in phase 2) does {s.mix_capacity_iops:.1f} IOPS closed loop. "
             f"At {s.loads_iops[0]:.0f} and {s.loads_iops[1]:.0f} IOPS offered "
             f"({cfg.svctm_loads[0]:.0%} and {cfg.svctm_loads[1]:.0%} of that): "
             f"{s.iops[0]:.1f} IOPS at {s.util_pct[0]:.1f} % and {s.iops[1]:.1f} IOPS at "
             f"{s.util_pct[1]:.1f} %, svctm {s.svctm_ms[0]:.2f} → {s.svctm_ms[1]:.2f} ms "
             f"({s.drift_pct:+.2f} %)."),
            "", "## What is approximated", "",
            ("* The workloads are paper-sec3's (the Iometer File Server pattern for Fig. 1; "
             "Table 2's backup). A on the last 500 GB and B on the first is §5's "
             "\"latter\"/\"former\" 500 GB region of §3's volume."),
            ("* Targets are rescaled by the model's capacity per workload (module docstring "
             "of `iogauge.lab.paper_eval`): the paper's absolute IOPS would load this model "
             "differently from the paper's device."),
            ("* `paper/user` limits B as the paper's benchmark did (a per-second cap on B's "
             "total issue rate); the `kernel` rows limit reads and writes apart, as cgroup "
             "io.max does. A is never limited."),
            ("* A sample counts as %util = 100 when it reads 100.00 (iostat's two decimals); "
             "the policy's own threshold is its `full_util_pct` (100, or 99 in the "
             "sensitivity row)."),
            "", f"_iogauge {__version__}, started {res.started_utc}, took {res.wall_s:.0f} s._",
            ""]
    return "\n".join(out)


def _svg_series(r: VariantRun, phases: Sequence[ScaledPhase], *, width: int = 620,
                height: int = 230) -> tuple[str, str]:
    """Two charts over time: A's and B's IOPS with A's floor and B's limit; %util and X
    with the samples at 100 % marked (the paper's Figs. 10-15)."""
    ml, mr, mt, mb = 48, 12, 12, 34
    pw, ph = width - ml - mr, height - mt - mb
    t_max = phases[-1].end_s if phases else 1.0

    def sx(t: float) -> float:
        return ml + t / t_max * pw

    def frame(ymax: float, ylabel: str) -> tuple[list[str], Callable[[float], float]]:
        def sy(v: float) -> float:
            return mt + ph - max(0.0, min(ymax, v)) / ymax * ph
        parts = [(f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
                  'role="img" xmlns="http://www.w3.org/2000/svg">')]
        for i in range(6):
            v = ymax * i / 5
            parts.append(f'<line x1="{ml}" y1="{sy(v):.1f}" x2="{ml + pw}" y2="{sy(v):.1f}" '
                         'stroke="#e5e9ed"/>')
            parts.append(f'<text x="{ml - 4}" y="{sy(v) + 3:.1f}" font-size="10" '
                         f'text-anchor="end">{v:.0f}</text>')
        for p in phases:
            parts.append(f'<line x1="{sx(p.start_s):.1f}" y1="{mt}" x2="{sx(p.start_s):.1f}" '
                         f'y2="{mt + ph}" stroke="#c9d1d9" stroke-dasharray="3 3"/>')
        for i in range(6):
            t = t_max * i / 5
            parts.append(f'<text x="{sx(t):.1f}" y="{height - 18}" font-size="10" '
                         f'text-anchor="middle">{t:.0f}</text>')
        parts.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 3}" font-size="11" '
                     'text-anchor="middle">time (s)</text>')
        parts.append(f'<text x="12" y="{mt + ph / 2:.1f}" font-size="11" '
                     f'text-anchor="middle" transform="rotate(-90 12 {mt + ph / 2:.1f})">'
                     f'{ylabel}</text>')
        return parts, sy

    def steps(ts: Sequence[float], ys: Sequence[float | None],
              sy: Callable[[float], float]) -> str:
        """Step line: each value holds over its interval (t - interval, t]."""
        pts: list[str] = []
        prev_t = 0.0
        for t, y in zip(ts, ys, strict=True):
            if y is not None:
                pts.append(f"{sx(prev_t):.1f},{sy(y):.1f} {sx(t):.1f},{sy(y):.1f}")
            prev_t = t
        return " ".join(pts)

    ymax = nice_ceiling(max([*r.a_iops, *r.b_iops, *(p.a_floor_iops for p in phases),
                             *(p.b_demand_iops for p in phases), 1.0]) * 1.08)
    parts, sy = frame(ymax, "IOPS")
    floor_pts = " ".join(f"{sx(p.start_s):.1f},{sy(p.a_floor_iops):.1f} "
                         f"{sx(p.end_s):.1f},{sy(p.a_floor_iops):.1f}" for p in phases)
    parts.append(f'<polyline points="{floor_pts}" fill="none" stroke="#1b7f3b" '
                 'stroke-dasharray="5 3"/>')
    lim = [None if x is None else min(x, ymax) for x in r.b_limit_iops]
    parts.append(f'<polyline points="{steps(r.t_end_s, lim, sy)}" fill="none" '
                 'stroke="#d62728" stroke-dasharray="2 2"/>')
    parts.append(f'<polyline points="{steps(r.t_end_s, r.a_iops, sy)}" fill="none" '
                 'stroke="#1f77b4" stroke-width="1.6"/>')
    parts.append(f'<polyline points="{steps(r.t_end_s, r.b_iops, sy)}" fill="none" '
                 'stroke="#ff7f0e" stroke-width="1.6"/>')
    parts.append("</svg>")
    iops_svg = "".join(parts)
    parts, sy = frame(100.0, "%")
    parts.append(f'<polyline points="{steps(r.t_end_s, r.util_pct, sy)}" fill="none" '
                 'stroke="#5b6670" stroke-width="1.4"/>')
    parts.append(f'<polyline points="{steps(r.t_end_s, r.x_pct, sy)}" fill="none" '
                 'stroke="#9467bd" stroke-width="1.8"/>')
    prev = 0.0
    for t, u in zip(r.t_end_s, r.util_pct, strict=True):
        if u >= FULL_UTIL_PCT:
            parts.append(f'<circle cx="{sx((prev + t) / 2):.1f}" cy="{sy(100.0):.1f}" r="3" '
                         f'fill="#b3261e"><title>%util = 100 at {t:.0f} s</title></circle>')
        prev = t
    for c in r.x_changes:
        parts.append(f'<circle cx="{sx(c.t_s):.1f}" cy="{sy(c.x_after_pct or 0.0):.1f}" '
                     f'r="3.5" fill="#9467bd"><title>{html.escape(c.state)} at {c.t_s:.0f} s: '
                     f'{_x(c.x_before_pct)} → {_x(c.x_after_pct)}</title></circle>')
    parts.append("</svg>")
    return iops_svg, "".join(parts)


def report_html(res: PaperEvalResult) -> str:
    """``report.html``: self-contained (inline SVG, no script, no network)."""
    e = html.escape
    cfg, ev = res.config, res.evaluation
    rows = "".join(
        f"<tr><td>{e(c.finding)}</td><td>{e(c.ours)}</td><td>{e(c.paper)}</td>"
        f"<td class=\"{'yes' if c.holds else ('no' if c.holds is False else '')}\">"
        f"{holds_text(c.holds)}</td><td>{e(c.criterion)}</td></tr>" for c in res.comparisons)
    sections = []
    for r in res.runs:
        v = variant(r.variant)
        a_svg, u_svg = _svg_series(r, res.phases)
        how = "total issue cap" if v.actuator == "user" else "riops + wiops"
        sections.append(
            f"<h2>{e(v.name)}: {e(v.label)}</h2><div class=\"charts\">"
            f"<figure>{a_svg}<figcaption>Blue: A's IOPS; orange: B's; green dashes: A's "
            f"floor; red dots: B's limit ({how}). "
            f"One point per {cfg.interval_s:g}-s sample.</figcaption></figure>"
            f"<figure>{u_svg}<figcaption>Grey: %util; purple: the policy's X (dots: its "
            f"changes); red dots: samples at %util = 100 ({r.full_intervals} in all). "
            f"Updates: {len(r.updates)}.</figcaption></figure></div>")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{e(res.name)} ({e(res.mode)})</title><style>{REPORT_CSS}</style></head><body>"
        f"<h1>[Oe] §5 reproduced: {e(ev.title)}</h1>"
        f"<div class=\"meta\">{e(res.mode)} mode, model <b>{e(res.profile)}</b> "
        f"({e(res.profile_description)}); {cfg.threads} + {cfg.threads} threads; samples "
        f"every {cfg.interval_s:g} s; schedule "
        + e(", ".join(f"A {p.a_floor_iops} / B {p.b_demand_iops} IOPS for {p.duration_s:g} s"
                      for p in res.phases))
        + f"; iogauge {e(__version__)}, {e(res.started_utc)}.</div>"
        "<h2>Our numbers beside the paper's</h2><table><tr><th>finding</th><th>ours</th>"
        f"<th>paper</th><th>holds</th><th>criterion</th></tr>{rows}</table>"
        f"{''.join(sections)}</body></html>\n")



__all__ = [
    "A_PARTITION", "B_PARTITION", "DEFAULT_CONFIG", "EVAL_EXPERIMENTS", "FULL_UTIL_PCT",
    "PAPER_AB_CAPACITY_IOPS", "PAPER_EVALUATIONS", "QUICK", "VARIANTS", "VARIANT_NAMES",
    "Actuator", "PaperEvalConfig", "PaperEvalError", "PaperEvalResult", "PaperEvaluation", "Phase",
    "PhaseStats", "ScaledPhase", "SvctmDrift", "Variant", "VariantRun", "XChange", "compare_eval",
    "eval_controller", "eval_workloads", "measure_svctm", "paper_eval", "phase_index",
    "report_html", "results_markdown", "run_variant", "scale_phases", "variant",
]
