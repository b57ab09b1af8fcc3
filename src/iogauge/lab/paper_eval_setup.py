"""[Oe] §5's evaluations for the simulator: the schedules, the controller variants, the
configuration and the schedule scaled to a model (data; :mod:`iogauge.lab.paper_eval` runs
them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from iogauge.guarantee.policy import PolicyName
from iogauge.lab.paper_report import PAPER_AB_OVER_A, PAPER_MAX_A, ExperimentError
from iogauge.lab.workloads import PAPER_SEC3_WORKLOADS, Arrival, Workload

Actuator = Literal["user", "kernel"]

#: Experiment names -> evaluation number.
EVAL_EXPERIMENTS = {"paper-eval1": 1, "paper-eval2": 2, "paper-eval3": 3}
#: §5 / Fig. 9: group A on the volume's last 500 GB (§3's partition B), group B on its
#: first 500 GB (§3's partition A); see the module docstring.
A_PARTITION = "B"
B_PARTITION = "A"
#: §3: maximum IOPS on partition A (239 / 65) x the share left on A+B (70 % / 69 %).
PAPER_AB_CAPACITY_IOPS = {w: PAPER_MAX_A[w] * PAPER_AB_OVER_A[w] for w in PAPER_MAX_A}
#: %util at or above which a sample counts as "100 %" for the reports (iostat's 100.00).
FULL_UTIL_PCT = 99.995


class PaperEvalError(ExperimentError):
    """A paper evaluation cannot run (bad configuration, no device harness)."""


# ---- the paper's evaluations ----------------------------------------------------------------

@dataclass(frozen=True)
class Phase:
    """One row of Tables 4-6.

    Attributes:
        a_floor_iops: A's target (A の目標 iops): the policy's floor and A's load cap.
        b_demand_iops: B's load (B の iops): the cap of B's load threads.
        minutes: duration (継続時間 (分)).
    """

    a_floor_iops: float
    b_demand_iops: float
    minutes: float


@dataclass(frozen=True)
class PaperEvaluation:
    """One of [Oe]'s evaluations and what the paper reports about it.

    Attributes:
        number: 1, 2 or 3.
        a_workload, b_workload: Table 3 (``file-share`` or ``backup``).
        phases: Tables 4-6.
        paper_updates: target updates the paper needed (§5: 2, 1, 1).
        paper_update_times_s: when they happened, where the text says (eval 1: Fig. 11).
        paper_first_x_pct: X after the first update (eval 1: 63 %; eval 2: 87 %; eval 3:
            "the same course as eval 2", 87 % per [Oe] §5).
        paper_x_note: the paper's words on X, for the table.
    """

    number: int
    a_workload: str
    b_workload: str
    phases: tuple[Phase, ...]
    paper_updates: int
    paper_update_times_s: tuple[float, ...]
    paper_first_x_pct: float
    paper_x_note: str

    @property
    def title(self) -> str:
        return f"evaluation {self.number}: {self.a_workload} A vs {self.b_workload} B"


#: [Oe] §5: Table 3 (workloads), Tables 4-6 (schedules), Figs. 10-15 (outcomes).
PAPER_EVALUATIONS: dict[int, PaperEvaluation] = {
    1: PaperEvaluation(1, "file-share", "backup",
                       (Phase(5, 50, 5), Phase(50, 50, 10), Phase(5, 50, 10)),
                       2, (500.0, 700.0), 63.0,
                       "95 → 63 % at the first update (≈500 s), lowered again at ≈700 s "
                       "(value not given); not reset after A's target fell back to 5"),
    2: PaperEvaluation(2, "file-share", "file-share",
                       (Phase(10, 200, 5), Phase(100, 200, 10), Phase(50, 200, 10)),
                       1, (), 87.0, "95 → 87 %, then A held 100 IOPS"),
    3: PaperEvaluation(3, "backup", "backup",
                       (Phase(5, 30, 5), Phase(30, 30, 10), Phase(5, 30, 10)),
                       1, (), 87.0, "one update, \"the same course as evaluation 2\" "
                       "(87 %, [Oe] §5)"),
}


@dataclass(frozen=True)
class Variant:
    """One row of the table: a policy, how B is limited, and its saturation threshold.

    Attributes:
        name: short id (``paper/user``).
        policy: ``paper`` or ``adaptive``.
        actuator: ``user`` ([Oe]'s per-second cap on B's total issue rate) or ``kernel``
            (per-direction io.max-style limits).
        full_util_pct: the paper policy's "100 %" threshold (None: the policy's default).
        label: what the row is, for the reports.
    """

    name: str
    policy: PolicyName
    actuator: Actuator
    full_util_pct: float | None
    label: str


VARIANTS: tuple[Variant, ...] = (
    Variant("paper/user", "paper", "user", None,
            "paper policy, [Oe]'s limiter (the reproduction)"),
    Variant("paper/kernel", "paper", "kernel", None,
            "paper policy, kernel per-direction limits (iogauge live)"),
    Variant("adaptive/kernel", "adaptive", "kernel", None,
            "adaptive policy, kernel per-direction limits (iogauge's default)"),
    Variant("paper/user/util99", "paper", "user", 99.0,
            "sensitivity: paper/user with %util ≥ 99 counted as 100 %"),
)
VARIANT_NAMES = tuple(v.name for v in VARIANTS)


def variant(name: str) -> Variant:
    for v in VARIANTS:
        if v.name == name:
            return v
    raise PaperEvalError(f"unknown variant {name!r}; known: {', '.join(VARIANT_NAMES)}")


# ---- configuration ------------------------------------------------------------------------

@dataclass(frozen=True)
class PaperEvalConfig:
    """How a paper evaluation is run (sim mode).

    Attributes:
        profile: disk model profile ([Oe]'s RAID-5 by default).
        variants: rows to run (:data:`VARIANT_NAMES`).
        threads: load threads per group (§5: 10).
        interval_s: sampling and decision interval (§5: iostat every 20 s).
        seconds_per_minute: virtual seconds per paper minute (60: the paper's schedule;
            smaller compresses it). Every phase must last a whole number of intervals.
        scale: rescale the paper's targets to the model (module docstring).
        capacity_s: length of each closed-loop capacity run.
        svctm_s: length of each svctm run; ``warmup_s`` of it is left out.
        warmup_s: leading part of the capacity and svctm runs left out.
        svctm_loads: the two loads of the svctm drift, as fractions of the mix's capacity.
        met_frac: A meets its floor at this share of it.
        arrival: the load threads' limiter (``per_second``: [Oe]'s).
        seed: random seed (every run uses it: common random numbers across variants).
        capacity_bytes: device size (None: the profile's).
        jobs: parallel processes (0: one per CPU).
    """

    profile: str = "raid5-6x400g"
    variants: tuple[str, ...] = VARIANT_NAMES
    threads: int = 10
    interval_s: float = 20.0
    seconds_per_minute: float = 60.0
    scale: bool = True
    capacity_s: float = 300.0
    svctm_s: float = 300.0
    warmup_s: float = 60.0
    svctm_loads: tuple[float, float] = (0.4, 0.8)
    met_frac: float = 0.95
    arrival: Arrival = "per_second"
    seed: int = 4
    capacity_bytes: int | None = None
    jobs: int = 0

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.variants or any(v not in VARIANT_NAMES for v in self.variants):
            problems.append(f"variants must be among {', '.join(VARIANT_NAMES)}")
        if self.threads < 1 or self.interval_s <= 0 or self.seconds_per_minute <= 0:
            problems.append("threads, interval_s and seconds_per_minute must be > 0")
        for ev in PAPER_EVALUATIONS.values():
            for ph in ev.phases:
                n = ph.minutes * self.seconds_per_minute / self.interval_s
                if abs(n - round(n)) > 1e-9 or round(n) < 1:
                    problems.append(f"a {ph.minutes:g}-minute phase is {n:g} intervals of "
                                    f"{self.interval_s:g} s: choose seconds_per_minute so "
                                    "that every phase is a whole number of intervals")
                    break
        if not self.warmup_s < min(self.capacity_s, self.svctm_s):
            problems.append("warmup_s must be shorter than capacity_s and svctm_s")
        lo, hi = self.svctm_loads
        if not 0 < lo < hi < 1:
            problems.append("svctm_loads must be two fractions 0 < lo < hi < 1")
        if not 0 < self.met_frac <= 1:
            problems.append("met_frac must be in (0, 1]")
        if problems:
            raise PaperEvalError("paper-eval configuration: " + "; ".join(dict.fromkeys(
                problems)))


#: A faster, coarser run: the schedule compressed 2.5x (phases of 2, 4 and 4 minutes,
#: still 6-12 samples of 20 s each), shorter calibration runs.
#: The defaults.
DEFAULT_CONFIG = PaperEvalConfig()

QUICK = PaperEvalConfig(seconds_per_minute=24.0, capacity_s=160.0, svctm_s=160.0,
                        warmup_s=40.0)


# ---- the schedule on this model --------------------------------------------------------------

@dataclass(frozen=True)
class ScaledPhase:
    """A phase on the model: whole IOPS, virtual seconds.

    Attributes:
        a_floor_iops: A's floor and load cap.
        b_demand_iops: B's load cap.
        start_s, duration_s: when the phase starts and how long it lasts.
    """

    a_floor_iops: int
    b_demand_iops: int
    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def scale_phases(ev: PaperEvaluation, factor: Mapping[str, float],
                 seconds_per_minute: float) -> list[ScaledPhase]:
    """The evaluation's phases with A's targets x ``factor[a_workload]`` and B's x
    ``factor[b_workload]``, rounded to whole IOPS (at least 1).

    >>> [(p.a_floor_iops, p.b_demand_iops, p.start_s)
    ...  for p in scale_phases(PAPER_EVALUATIONS[3], {"backup": 1.9}, 60.0)]
    [(10, 57, 0.0), (57, 57, 300.0), (10, 57, 900.0)]
    """
    out: list[ScaledPhase] = []
    t = 0.0
    for ph in ev.phases:
        a = max(1, round(ph.a_floor_iops * factor[ev.a_workload]))
        b = max(1, round(ph.b_demand_iops * factor[ev.b_workload]))
        dur = ph.minutes * seconds_per_minute
        out.append(ScaledPhase(a, b, t, dur))
        t += dur
    return out


def eval_workloads(ev: PaperEvaluation, phases: Sequence[ScaledPhase], cfg: PaperEvalConfig,
                   ) -> list[Workload]:
    """A's and B's load threads: the Table 3 workloads on their regions, capped per phase."""
    def make(workload: str, partition: str, group: str, rates: list[int]) -> Workload:
        w = PAPER_SEC3_WORKLOADS[workload](partition, threads=cfg.threads,
                                        rate_iops=float(rates[0]), arrival=cfg.arrival,
                                        group=group)
        where = "last" if partition == "B" else "first"
        sched = tuple((p.start_s, float(r)) for p, r in zip(phases[1:], rates[1:],
                                                            strict=True))
        return replace(w, name=f"{group}: {workload} on the {where} 500 GB",
                       rate_schedule=sched)

    return [make(ev.a_workload, A_PARTITION, "A", [p.a_floor_iops for p in phases]),
            make(ev.b_workload, B_PARTITION, "B", [p.b_demand_iops for p in phases])]


def phase_index(phases: Sequence[ScaledPhase], t_s: float) -> int:
    """The phase holding virtual time ``t_s`` (len(phases) at or after the end)."""
    k = 0
    while k < len(phases) and t_s >= phases[k].end_s - 1e-9:
        k += 1
    return k




__all__ = ["A_PARTITION", "B_PARTITION", "DEFAULT_CONFIG", "EVAL_EXPERIMENTS", "FULL_UTIL_PCT",
           "PAPER_AB_CAPACITY_IOPS", "PAPER_EVALUATIONS", "QUICK", "VARIANTS", "VARIANT_NAMES",
           "Actuator", "PaperEvalConfig", "PaperEvalError", "PaperEvaluation", "Phase",
           "ScaledPhase", "Variant", "eval_workloads", "phase_index", "scale_phases",
           "variant"]
