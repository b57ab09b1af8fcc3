"""Guarantee policies: observations + the policy's own state -> per-group IOPS limits.

Pure: no I/O, no clock, no randomness. The same object is driven by the live controller
(:mod:`iogauge.guarantee.controller`, real time, real cgroups) and by the lab simulator
(virtual time): each calls :meth:`Policy.step` once per interval with an :class:`Observation`
and applies the :class:`Decision` it returns. Everything the policy remembers lives inside
the policy object, so two runs fed the same observations make the same decisions.

Vocabulary (seed 004, DESIGN.md §5.5):

* **A** — the *protected* groups, each with a floor in IOPS (the paper's ``a``). A is never
  throttled: a decision only ever carries limits for throttled groups.
* **B** — the *throttled* groups. Their combined budget is shared among them; every limit
  is at least ``Targets.b_min_iops`` per direction.
* **busy_per_iops** — ``%util / (r/s + w/s)`` in % per IOPS (seed 004 §4): the share of the
  device one I/O per second costs.
* **X** — the target total busy rate in %, kept below the *proportional-limit busy rate* (the
  knee past which %util stops growing linearly with IOPS; 80-95 % in the seed's workloads).

Driving a policy (what the lab simulator does)::

    policy = make_policy("adaptive", Targets(protected={"A": 100.0}, throttled=("B",)))
    limits = {}
    for each interval of interval_s seconds:
        # device totals and per-group completions of the interval just ended, under `limits`
        obs = Observation(interval_s=1.0, util_pct=87.0, r_iops=150.0, w_iops=40.0,
                          groups={"A": GroupObservation(r_iops=98.0, w_iops=0.0,
                                                        demand_iops=120.0),
                                  "B": GroupObservation(r_iops=52.0, w_iops=40.0)},
                          await_ms=9.5, aqu_sz=1.8)
        decision = policy.step(obs)
        limits = decision.limits          # {"B": GroupLimit(riops=55, wiops=41)}
        # apply: None = unlimited; ints are I/Os per second, >= 1
    policy.set_floors({"A": 50.0})        # A's target changes mid-run (seed 004 Tables 4-6)

A group missing from ``obs.groups`` is taken as idle this interval (0 IOPS, no demand
known). ``Decision.limits`` always names every throttled group; ``GroupLimit(None, None)``
means "no limit". Limits are whole IOPS because the kernel takes integers (cgroup v2
``io.max riops=``/``wiops=``, v1 ``blkio.throttle.*_iops_device``) — the simulator applies the
same integers, so virtual and real runs agree.

Two policies:

* :class:`PaperPolicy` (``"paper"``) — seed 004 §4 exactly, constants in :class:`PaperParams`.
* :class:`AdaptivePolicy` (``"adaptive"``, the default) — closes the loop on A's delivered
  IOPS, estimates capacity from %util (single-spindle devices) or from the latency knee
  (SSD/NVMe/RAID, where %util saturates long before the device does), damps with EWMA,
  hysteresis and bounded steps, sets separate read and write limits, never creates load
  to learn, and on a single spindle stretches B past the target busy rate while A keeps its
  floor (work conservation). Constants in :class:`AdaptiveParams`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

PolicyName = Literal["adaptive", "paper"]
POLICY_NAMES: tuple[PolicyName, ...] = ("adaptive", "paper")

#: The kernel stores IOPS limits as ``unsigned int`` and treats UINT_MAX as "no limit"
#: (block/blk-throttle.c); a larger number written to v1 wraps (5e9 reads back 705032704).
MAX_LIMIT_IOPS = 2**32 - 2


# ---- observations and decisions ------------------------------------------------------------
@dataclass(frozen=True)
class GroupObservation:
    """What one cgroup did on the device during the interval.

    Attributes:
        r_iops, w_iops: completed (dispatched) reads and writes per second of the group on the
            device (cgroup v2 ``io.stat`` rios/wios, v1 ``blkio.throttle.io_serviced``
            Read/Write; or the simulator's completions).
        demand_iops: I/Os per second the group *wanted* to do, when known (the simulator
            knows its offered load; a live system does not). None = unknown.
        stall_pct: share of the interval in which some task of the group was stalled on I/O
            (cgroup v2 ``io.pressure`` "some" total, PSI), in %. None = not available (v1).
    """

    r_iops: float
    w_iops: float
    demand_iops: float | None = None
    stall_pct: float | None = None

    @property
    def iops(self) -> float:
        """Reads + writes per second."""
        return self.r_iops + self.w_iops


@dataclass(frozen=True)
class Observation:
    """One interval of the device and its groups, as the policy sees it.

    Attributes:
        interval_s: length of the interval in seconds (> 0).
        util_pct: device %util over the interval (iostat -x; 0-100). None where unknown.
        r_iops, w_iops: device completions per second (iostat r/s, w/s) — every user of the
            device, not only the configured groups.
        groups: per-group observations, keyed by the names used in :class:`Targets`.
        await_ms: device average latency (iostat await), None where unknown.
        aqu_sz: device average queue size (iostat aqu-sz), None where unknown.
        r_await_ms, w_await_ms: per-direction device latency, None where unknown.
    """

    interval_s: float
    util_pct: float | None
    r_iops: float
    w_iops: float
    groups: Mapping[str, GroupObservation] = field(default_factory=dict)
    await_ms: float | None = None
    aqu_sz: float | None = None
    r_await_ms: float | None = None
    w_await_ms: float | None = None

    @property
    def iops(self) -> float:
        """Device reads + writes per second."""
        return self.r_iops + self.w_iops

    def group(self, name: str) -> GroupObservation:
        """The group's observation; an absent group is idle (0 IOPS, nothing known)."""
        return self.groups.get(name, _IDLE)


_IDLE = GroupObservation(0.0, 0.0)


@dataclass(frozen=True)
class GroupLimit:
    """Limits for one throttled group: whole I/Os per second, None = unlimited.

    Attributes:
        riops: read I/Os per second (cgroup v2 ``riops``, v1 ``read_iops_device``).
        wiops: write I/Os per second (``wiops``, ``write_iops_device``).
    """

    riops: int | None
    wiops: int | None

    @property
    def iops(self) -> int | None:
        """riops + wiops, None if either direction is unlimited."""
        if self.riops is None or self.wiops is None:
            return None
        return self.riops + self.wiops


UNLIMITED = GroupLimit(None, None)


@dataclass(frozen=True)
class Decision:
    """What a policy decided after one observation.

    Attributes:
        limits: every throttled group -> its limits (``GroupLimit(None, None)`` = unlimited).
            Never contains a protected group.
        x_pct: the target total busy rate X in % (paper: the current X; adaptive: the
            effective target), None before the policy has an estimate.
        state: short state name (see each policy's docstring).
        reason: one sentence with the numbers behind the decision.
        busy_per_iops: % of the device per IOPS used for the decision (None if unknown).
        capacity_iops: estimated IOPS at 100 % busy for the current mix (None if unknown).
        a_miss: a protected group with demand got less than its floor this interval.
        warnings: things the operator must know (an infeasible floor, with its numbers);
            repeated only when they change.
    """

    limits: Mapping[str, GroupLimit]
    x_pct: float | None
    state: str
    reason: str
    busy_per_iops: float | None = None
    capacity_iops: float | None = None
    a_miss: bool = False
    warnings: tuple[str, ...] = ()


class Policy(Protocol):
    """A guarantee policy: ``step`` once per interval, in order; state lives in the object."""

    name: str
    targets: Targets

    def step(self, obs: Observation) -> Decision:
        """Decide the throttled groups' limits from the interval just observed."""
        ...

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """Change the protected groups' floors from the next step on (seed 004's evaluations
        raise and lower A's target mid-run: Tables 4-6)."""
        ...


# ---- configuration ---------------------------------------------------------------------
@dataclass(frozen=True)
class Targets:
    """Who is protected, who is throttled, and what the device is.

    Attributes:
        protected: group name -> floor in IOPS (reads + writes) guaranteed to it (seed 004's
            ``a``; several protected groups add up).
        throttled: names of the groups whose I/O is limited to make room (B).
        b_min_iops: every throttled group keeps at least this many reads *and* this many
            writes per second, whatever the policy computes (>= 1: a limit of 0 would mean
            "no limit" to cgroup v1).
        device_parallel: True for devices that serve many requests at once (SSD, NVMe,
            RAID, most dm/md): their %util reaches 100 long before their capacity, so the
            adaptive policy estimates capacity from the latency knee instead.
        capacity_hint_iops: the device's capacity if the operator knows it (IOPS at 100 %
            busy for the expected mix); used as the starting estimate and for the up-front
            feasibility check. None: learned from observations.
        limit_grid_iops: the throttle enforces a limit of at least this many IOPS only in
            whole multiples of it, so limits are written as ``grid·floor(limit/grid)`` -- what
            the group will actually get, which keeps the policy's own view of B's room true.
            The kernel's blk-throttle (cgroup v1 ``*_iops_device`` and v2 ``io.max``)
            dispatches a backlogged group's I/Os per 100 ms slice and trims each slice with
            an integer division (block/blk-throttle.c ``throtl_trim_slice``: ``io_trim =
            iops·throtl_slice/HZ``, ``throtl_slice = HZ/10``), so a limit L >= 10 delivers
            ``10·floor(L/10)``: measured on kernel 6.18 (loop device, 2 x 8 s per limit),
            11 -> 9.5-10.1, 19 -> 9.7-9.9, 21 -> 18.9-21.2, 27 -> 17.7-19.1, 34 -> 27.6-29.1,
            40 -> 38.6-40.0 reads and writes/s. 1: no grid (a throttle that enforces any
            whole rate, e.g. the lab simulator's).
    """

    protected: Mapping[str, float]
    throttled: tuple[str, ...]
    b_min_iops: int = 1
    device_parallel: bool = False
    capacity_hint_iops: float | None = None
    limit_grid_iops: int = 1

    def __post_init__(self) -> None:
        if not self.protected:
            raise ValueError("at least one protected group (with a floor in IOPS) is needed")
        if not self.throttled:
            raise ValueError("at least one throttled group is needed")
        both = set(self.protected) & set(self.throttled)
        if both:
            raise ValueError(f"a group cannot be both protected and throttled: "
                             f"{', '.join(sorted(both))} (A is never throttled)")
        if len(set(self.throttled)) != len(self.throttled):
            raise ValueError("a throttled group is listed twice")
        for name, floor in self.protected.items():
            if not (math.isfinite(floor) and floor > 0):
                raise ValueError(f"floor of {name} must be a positive number of IOPS, "
                                 f"got {floor}")
        if self.b_min_iops < 1:
            raise ValueError(f"b_min_iops must be >= 1 (0 means 'no limit' to the kernel), "
                             f"got {self.b_min_iops}")
        if self.capacity_hint_iops is not None and not self.capacity_hint_iops > 0:
            raise ValueError(f"capacity_hint_iops must be > 0, got {self.capacity_hint_iops}")
        if self.limit_grid_iops < 1:
            raise ValueError(f"limit_grid_iops must be >= 1, got {self.limit_grid_iops}")

    def on_grid(self, limit: int) -> int:
        """``limit`` as the throttle enforces it: ``grid·floor(limit/grid)`` from one grid
        step up, unchanged below (see ``limit_grid_iops``)."""
        g = self.limit_grid_iops
        return limit if g <= 1 or limit < g else limit - limit % g

    @property
    def floor_iops(self) -> float:
        """Sum of the protected groups' floors (the paper's ``a``)."""
        return float(sum(self.protected.values()))


@dataclass(frozen=True)
class PaperParams:
    """Constants of seed 004 §4 (defaults are the paper's own values).

    Attributes:
        x_initial_pct: initial target busy rate X (§4 footnote: "実験は 95% で行った").
        full_util_pct: %util counted as "reached 100 %" (§4). Compared after rounding to
            iostat's two decimals, so 99.995 counts, 99.99 does not. Sampling jitter can make
            a saturated device read 99.x; lower this to count those.
        window: how many recent samples are looked at (§4: "過去10回の計測").
        full_count: saturated samples among them that trigger an update (§4: "3回以上").
        cut_frac: while saturated, B is cut this fraction of the total IOPS at 100 % busy
            below its computed limit (§4: "合計iopsの20%を…差し引く").
        y: the NewX gain in ``NewX = X - (c - d)·C·y`` (§4: "5章の評価ではy=0.5").
        reset_low_pct: reset X to its initial value when %util falls below this (§4:
            "20%を下回る場合に初期値に戻す").
        reset_low_relative: the threshold is ``reset_low_pct`` % *of the current X* (the
            issue's reading: "busy < 20 % of target") instead of an absolute %util.
        bpi_jump_ratio: also reset X when busy_per_iops changes by this factor or more from
            the previous sample (the condition the paper names but did not implement, §4/§5:
            0.8 → 1.3 in eval 1); None disables.
        x_min_pct: NewX is never set below this (the paper gives no bound).
        rw_min_share: not the paper's (it limited B's total in user space): the kernel limits
            reads and writes separately, so ``b`` is split by B's read/write mix with each
            direction keeping at least this share — else a B that did no writes would be held
            at ``b_min_iops`` writes and could never show that it wants more.
    """

    x_initial_pct: float = 95.0
    full_util_pct: float = 100.0
    window: int = 10
    full_count: int = 3
    cut_frac: float = 0.2
    y: float = 0.5
    reset_low_pct: float = 20.0
    reset_low_relative: bool = True
    bpi_jump_ratio: float | None = 1.5
    x_min_pct: float = 1.0
    rw_min_share: float = 0.1

    def __post_init__(self) -> None:
        if not 0 <= self.rw_min_share < 0.5:
            raise ValueError(f"rw_min_share must be in [0, 0.5), got {self.rw_min_share}")
        if not 0 < self.x_initial_pct <= 100:
            raise ValueError(f"x_initial_pct must be in (0, 100], got {self.x_initial_pct}")
        if not 0 < self.full_count <= self.window:
            raise ValueError(f"need 0 < full_count <= window, got {self.full_count}/"
                             f"{self.window}")
        if not 0 <= self.cut_frac < 1 or not 0 <= self.y <= 1:
            raise ValueError("cut_frac must be in [0, 1) and y in [0, 1]")
        if self.bpi_jump_ratio is not None and self.bpi_jump_ratio <= 1:
            raise ValueError(f"bpi_jump_ratio must be > 1, got {self.bpi_jump_ratio}")
        if not 0 < self.x_min_pct <= self.x_initial_pct:
            raise ValueError("x_min_pct must be in (0, x_initial_pct]")


@dataclass(frozen=True)
class AdaptiveParams:
    """Constants of the adaptive policy (fractions are 0-1, percentages 0-100).

    Attributes:
        x_max_pct: util mode: highest target busy rate -- seed 004 §4's initial X (95 %).
            The paper keeps X under the knee because nothing else protects A; here A's
            delivered IOPS close the loop (a miss lowers X and remembers where), and on the
            lab's emulated HDD 95 % gave B 3-5 points more of the calibrated bound than 90 %,
            A at its floor in every interval (one run each; docs/guarantee.md).
        x_max_latency_pct: latency mode: highest share of the estimated knee capacity.
        x_min_pct: lowest target busy rate A-misses can push the target to.
        miss_tolerance: A delivering at least ``floor·(1 - miss_tolerance)`` has met it.
        miss_slack_ios: besides, an interval may be short by this many whole I/Os per
            direction A uses (at most half its floor): completions are counted whole, so a
            steady A at 21 IOPS completes 19-23 in a second as its I/Os land either side
            of the interval's edges (the evaluation counts A's floor met the same way).
        stall_demand_pct: PSI stall share of A above which A is taken to want more I/O.
        ewma_alpha: smoothing of costs, group shares and read/write mixes.
        full_util_pct: %util counted as saturated in util mode.
        knee_latency_factor: latency mode: await above this multiple of the baseline
            (lowest recent await) means the device is past its knee (congested).
        probe_latency_factor: latency mode: the capacity estimate is raised only while
            await stays below this multiple of the baseline (well under the knee, so
            probing never pushes A into queueing).
        baseline_drift: latency mode: how fast the baseline await follows higher values
            (per interval), so a new workload with inherently slower I/O is relearned.
        probe_step: latency mode: relative increase of the capacity estimate per healthy
            interval in which B used its whole allowance.
        write_cost_factor: latency mode: a write costs this many reads (e.g. 4 for RAID-5's
            write penalty); util mode learns read and write costs from %util instead.
        miss_gain: on an A miss the target drops by ``miss_gain`` x the busy share A fell
            short, at least ``knee_step_pct`` and at most ``max_cut_pct``.
        max_cut_pct: largest drop of the target per interval.
        knee_step_pct: drop of the target per congested interval in which A was fine.
        recover_step_pct: rise of the target per step once healthy for ``recover_after``.
        recover_after: healthy intervals (A fine, device not congested, B at its limit)
            before the target rises.
        ceiling_margin_pct: after a miss or congestion at target X the target stays at
            least this far below X until the workload changes (hysteresis: no limit cycle).
        regime_change_ratio: a change of the cost per I/O (at the same read/write mix) by this
            factor, either way, for ``recover_after`` intervals since the ceiling was set means
            a new workload: the ceiling is dropped.
        futile_after: misses in a row without A's IOPS improving after which A is taken to
            be limited by itself, not by B (stop cutting B until A's IOPS moves).
        step_up_frac, step_down_frac: largest relative rise / fall of a limit per interval.
        step_min_iops: a limit may always move by at least this many IOPS (small limits).
        deadband_frac, deadband_iops: a computed limit closer than
            ``max(deadband_iops, deadband_frac·current)`` to the current one is not written
            (hysteresis), unless A just missed.
        min_share: smallest share of a group's budget kept for its less-used direction, and
            of B's budget for an idle group, so neither is starved when its mix changes.
        mix_step: when one direction of a group sits at its limit and the other has clear
            slack for ``recover_after`` intervals, its share moves by this much per interval.
        warmup_intervals: intervals with I/O observed before the first limit is set.
        min_iops: intervals with fewer device IOPS than this do not update the estimates.
        stretch_after: intervals in a row with A at its floor before B's budget may be
            stretched beyond X (work conservation; see ``stretch_step``).
        stretch_step: util mode: while A has met its floor for ``stretch_after`` intervals
            in a row and B uses its whole limit, B's budget (X's) is multiplied by
            ``1 + stretch_step`` per interval, saturated device or not: %util = 100 says
            the spindle is always busy, not whether A still gets its floor; A's delivered
            IOPS say that (on the lab HDD an unthrottled B left A at its floor in
            evaluation 1, where X held B to 78 % of what it got unthrottled). The first
            miss withdraws the stretch at once: for that interval B gets X's budget less
            what A fell short (so that A's backlog drains), and the interval after it --
            when the queue the stretch built is still draining -- neither cuts X nor sets
            a ceiling. Later stretches stop ``stretch_backoff`` steps below the level that
            hurt, and start again only after ``restretch_after`` intervals in a row with A
            at its floor; until the floors or the workload change. 0 disables it. Not in
            latency mode, where the knee is queueing (A's latency), not a busy rate. Its
            price: a short interval for A per level found too high, and on a saturated
            spindle A's I/Os queue behind B's, so A gets its IOPS at a higher latency than
            under X.
        stretch_max: largest stretch of B's budget (a multiple of X's).
        stretch_backoff: steps (of ``stretch_step``) below a stretch that hurt A at which
            later stretches stop (until the floors or the workload change).
        restretch_after: intervals in a row with A at its floor before a stretch resumes
            after one hurt A (``stretch_after`` applies to the first).
        grid_dither: on a throttle grid (:attr:`Targets.limit_grid_iops`), a group held at
            its limit in the direction that binds alternates between the grid points each
            side of what it is allowed, so that on average it gets that, not the grid point
            below (error diffusion: the part a written limit falls short is carried into
            the next interval, at most one grid step). Only while A is fine and the device
            is not congested; a miss or congestion drops the carry.
    """

    x_max_pct: float = 95.0
    x_max_latency_pct: float = 90.0
    x_min_pct: float = 20.0
    miss_tolerance: float = 0.05
    miss_slack_ios: float = 1.0
    stall_demand_pct: float = 10.0
    ewma_alpha: float = 0.3
    full_util_pct: float = 99.0
    knee_latency_factor: float = 2.0
    probe_latency_factor: float = 1.5
    baseline_drift: float = 0.01
    probe_step: float = 0.1
    write_cost_factor: float = 1.0
    miss_gain: float = 1.0
    max_cut_pct: float = 15.0
    knee_step_pct: float = 2.0
    recover_step_pct: float = 1.0
    recover_after: int = 3
    ceiling_margin_pct: float = 2.0
    regime_change_ratio: float = 1.5
    futile_after: int = 3
    step_up_frac: float = 0.25
    step_down_frac: float = 0.5
    step_min_iops: int = 4
    deadband_frac: float = 0.05
    deadband_iops: int = 2
    min_share: float = 0.1
    mix_step: float = 0.1
    warmup_intervals: int = 2
    min_iops: float = 1.0
    stretch_after: int = 3
    stretch_step: float = 0.25
    stretch_max: float = 4.0
    stretch_backoff: int = 2
    restretch_after: int = 10
    grid_dither: bool = True

    def __post_init__(self) -> None:
        for top in ("x_max_pct", "x_max_latency_pct"):
            if not 0 < self.x_min_pct <= getattr(self, top) <= 100:
                raise ValueError(f"need 0 < x_min_pct <= {top} <= 100, got "
                                 f"{self.x_min_pct}/{getattr(self, top)}")
        if not 1 < self.probe_latency_factor < self.knee_latency_factor:
            raise ValueError("need 1 < probe_latency_factor < knee_latency_factor")
        if not 0 < self.ewma_alpha <= 1:
            raise ValueError(f"ewma_alpha must be in (0, 1], got {self.ewma_alpha}")
        if not 0 < self.step_down_frac < 1 or self.step_up_frac <= 0:
            raise ValueError("need 0 < step_down_frac < 1 and step_up_frac > 0")
        if not 0 <= self.min_share < 0.5:
            raise ValueError(f"min_share must be in [0, 0.5), got {self.min_share}")
        if self.write_cost_factor <= 0:
            raise ValueError("write_cost_factor must be > 0")
        if self.recover_after < 1 or self.futile_after < 1 or self.warmup_intervals < 1 \
                or self.stretch_after < 1 or self.restretch_after < 1:
            raise ValueError("recover_after, futile_after, warmup_intervals, stretch_after "
                             "and restretch_after must be >= 1")
        if self.stretch_step < 0 or self.stretch_max < 1 or self.stretch_backoff < 0:
            raise ValueError("need stretch_step >= 0, stretch_max >= 1, stretch_backoff >= 0")

    def x_top_pct(self, parallel: bool) -> float:
        """Highest target X for a device in latency mode (``parallel``) or util mode."""
        return self.x_max_latency_pct if parallel else self.x_max_pct


# ---- shared helpers --------------------------------------------------------------------
def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else old + alpha * (new - old)


def _clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def _whole(x: float, lo: int) -> int:
    """A limit the kernel accepts: a whole number of IOPS in [lo, MAX_LIMIT_IOPS]."""
    if not math.isfinite(x):
        return MAX_LIMIT_IOPS if x > 0 else lo
    # The epsilon keeps 180 x 0.1 = 17.999999999999996 from becoming 17.
    return int(_clamp(math.floor(x + 1e-9), lo, MAX_LIMIT_IOPS))


def _iostat_round(util_pct: float) -> float:
    """%util as iostat prints it (two decimals), so "100 %" means what an operator reads."""
    return round(util_pct, 2)


def split_budget(total: float, weights: Mapping[str, float], minimum: float,
                 min_share: float = 0.0) -> dict[str, float]:
    """Share ``total`` among groups proportionally to ``weights``, each getting >= ``minimum``.

    A group's weight is raised to ``min_share · total / n`` first, so an idle group keeps a
    small slice and can ramp up. When the minimums alone exceed ``total`` every group gets
    ``minimum`` (the caller reports the infeasibility).
    """
    names = list(weights)
    if not names:
        return {}
    n = len(names)
    if total <= minimum * n:
        return dict.fromkeys(names, minimum)
    floor_w = min_share * total / n
    w = {g: max(weights[g], floor_w, 0.0) for g in names}
    s = sum(w.values())
    if s <= 0:
        w = dict.fromkeys(names, 1.0)
        s = float(n)
    share = {g: total * w[g] / s for g in names}
    # Lift groups under the minimum and take the difference from the others, proportionally.
    fixed: dict[str, float] = {}
    while True:
        low = [g for g in names if g not in fixed and share[g] < minimum]
        if not low:
            break
        for g in low:
            fixed[g] = minimum
        rest = [g for g in names if g not in fixed]
        left = total - sum(fixed.values())
        ws = sum(w[g] for g in rest)
        for g in rest:
            share[g] = left * w[g] / ws if ws > 0 else left / len(rest)
    share.update(fixed)
    return share


def grid_targets(t: Targets, want_r: float, want_w: float, *,
                 bind: str | None = None) -> tuple[float, float]:
    """Per-direction targets for a group allowed ``want_r`` reads and ``want_w`` writes/s,
    on the throttle's grid (:attr:`Targets.limit_grid_iops`).

    Flooring both directions would cut the group twice: its reads and writes keep its mix,
    so it gets ``min(R/m, W/(1-m))`` and the direction that lost more binds. Instead the
    larger direction is floored (it binds: the group stays within its allowance) and the
    smaller one is raised to its next grid point, so it does not bind -- at the price of
    at most one grid step more in that direction if the group shifts its mix toward it.
    A smaller direction under half a grid step stays as it is (a group held near its
    minimum stays there). Example (grid 10): 72 + 18 -> 70 + 20, i.e. ~87 IOPS at 80 %
    reads instead of 50 (70 + 10 binds the writes at 10 = 20 % of 50); 45 + 6 -> 40 + 10.

    ``bind`` ("r" or "w"): the direction that bound last time keeps binding while the other
    is not larger by half a grid step or more -- for an even mix (a 50:50 backup) the larger
    direction changes with every interval's noise, and 30 + 40 / 40 + 30 would be rewritten
    every second for the same 60 IOPS.
    """
    g = t.limit_grid_iops
    if g <= 1:
        return want_r, want_w

    def down(x: float) -> float:
        return x if x < g else g * math.floor(x / g + 1e-9)

    def up(x: float) -> float:
        return x if x < g / 2 else g * math.ceil(x / g - 1e-9)

    margin = g / 2
    if bind == "r":
        reads_bind = want_r >= want_w - margin
    elif bind == "w":
        reads_bind = want_r > want_w + margin
    else:
        reads_bind = want_r >= want_w
    if reads_bind:
        return down(want_r), up(want_w)
    return up(want_r), down(want_w)


def _held(used: float, limit: int | None) -> bool:
    """A direction used (nearly) all of its limit: the limit, not demand, held it."""
    return limit is not None and used >= 0.9 * limit


def _read_share(obs: GroupObservation, default: float = 0.5) -> float:
    return obs.r_iops / obs.iops if obs.iops > 0 else default


# ---- the paper's policy ----------------------------------------------------------------
class PaperPolicy:
    """Seed 004 §4, step by step (the constants are :class:`PaperParams`).

    Every interval:

    1. ``busy_per_iops = %util / (r/s + w/s)`` (§4, "busy_per_iops = %util / (r/s + w/s)").
    2. Resets (§4, last paragraphs): X returns to ``x_initial_pct`` when %util falls below
       20 % (of X, see :class:`PaperParams`) — the only reset the paper implemented — and,
       the paper's missing piece, when busy_per_iops jumps by ``bpi_jump_ratio`` from the
       previous sample below 100 % (eval 1: 0.8 → 1.3; saturated samples are not compared:
       their busy_per_iops is 100/IOPS by definition, and the cut of step 4 moves it on
       purpose). Not during an update episode. The saturation window is cleared with it.
    3. Saturation (§4): the last ``window`` samples are kept; when %util = 100 in at least
       ``full_count`` of them, an update episode starts at this sample, "point 1":
       ``C`` = total IOPS, ``c`` = busy_per_iops.
    4. During the episode, while %util stays at 100, B gets its computed limit minus
       ``cut_frac · C`` (§4: 20 % of A+B's IOPS at 100 % busy, "IO busy率が100%を下回るまで
       継続する").
    5. The first sample below 100 % is "point 2": ``d`` = its busy_per_iops and
       ``NewX = X - (c - d)·C·y`` (§4), never above X ("X > New X") nor below ``x_min_pct``.
       The window is cleared, so a further update needs ``full_count`` new saturated samples
       (eval 1: updates at 500 s and 700 s, each after three new 100 % points, Fig. 11).
    6. B's limit (§4 (1)-(4)): ``a_busy = a·busy_per_iops``, ``b_busy = X - a_busy``,
       ``b = b_busy / busy_per_iops``, at least ``b_min_iops`` per direction.

    The paper limited B's *total* IOPS in user space (§4 (4)); the kernel limits reads and
    writes separately, so ``b`` is split into riops/wiops by B's read/write mix of the
    interval (each direction at least ``rw_min_share``), and among several B groups by their
    IOPS of the interval.

    States: ``idle`` (no I/O: limits kept), ``compute`` (step 6), ``counting`` (some 100 %
    samples in the window), ``cut`` (step 4), ``update`` (step 5), ``reset`` (step 2).
    """

    name = "paper"

    def __init__(self, targets: Targets, params: PaperParams | None = None) -> None:
        self.targets = targets
        self.params = params or PaperParams()
        self.x_pct = self.params.x_initial_pct
        self.window: deque[bool] = deque(maxlen=self.params.window)
        #: busy_per_iops of the last sample below 100 % (what a jump is measured against).
        self.prev_bpi: float | None = None
        self.bpi: float | None = None
        self.episode: tuple[float, float] | None = None  # (C, c) of point 1
        self.updates = 0
        self.resets = 0
        self.limits: dict[str, GroupLimit] = dict.fromkeys(targets.throttled, UNLIMITED)
        self._warned: str | None = None

    def step(self, obs: Observation) -> Decision:
        p = self.params
        total = obs.iops
        util = None if obs.util_pct is None else _iostat_round(obs.util_pct)
        if util is None or total <= 0 or util <= 0:
            # util 0 with I/O done (a short interval on an almost idle device: the kernel
            # counts busy time in whole ms) gives busy_per_iops 0, no proportion to use.
            return self._decision("idle", "no I/O completed, or no busy time (or no %util): "
                                  "busy_per_iops is undefined; limits kept")
        bpi = util / total
        self.bpi = bpi
        full = util >= p.full_util_pct
        notes: list[str] = []
        state = "compute"

        if self.episode is None:
            reset = self._reset_reason(util, bpi, full)
            if reset is not None:
                self.x_pct = p.x_initial_pct
                self.window.clear()
                self.resets += 1
                state = "reset"
                notes.append(reset)
        if not full:
            self.prev_bpi = bpi
        self.window.append(full)
        n_full = sum(self.window)

        cut = 0.0
        if self.episode is None and full and n_full >= p.full_count:
            self.episode = (total, bpi)  # point 1: C and c
            notes.append(f"%util = 100 in {n_full} of the last {len(self.window)} samples: "
                         f"point 1 C = {total:.1f} IOPS, c = {bpi:.4f} %/IOPS")
        if self.episode is not None:
            big_c, c = self.episode
            if full:
                cut = p.cut_frac * big_c
                state = "cut"
                notes.append(f"cutting B {cut:.1f} IOPS ({p.cut_frac:.0%} of C) below its "
                             "computed limit until %util < 100")
            else:
                d = bpi  # point 2
                x_old = self.x_pct
                new_x = x_old - (c - d) * big_c * p.y
                self.x_pct = _clamp(new_x, p.x_min_pct, x_old)
                self.episode = None
                self.window.clear()
                self.updates += 1
                state = "update"
                notes.append(f"point 2 d = {d:.4f} %/IOPS: NewX = X - (c - d)·C·y = "
                             f"{x_old:.2f} - ({c:.4f} - {d:.4f})·{big_c:.1f}·{p.y:g} = "
                             f"{new_x:.2f} %" + ("" if new_x == self.x_pct else
                                                 f" (bounded to {self.x_pct:.2f} %)"))
        elif state == "compute" and n_full:
            state = "counting"

        a = self.targets.floor_iops
        a_busy = a * bpi
        b_busy = self.x_pct - a_busy
        b = b_busy / bpi - cut
        warnings = self._feasibility(a, bpi, b)
        self._apply(obs, b)
        notes.insert(0, f"busy_per_iops = {util:.2f} / {total:.1f} = {bpi:.4f} %/IOPS; a_busy "
                     f"= {a:g}·bpi = {a_busy:.2f} %; b_busy = X - a_busy = {self.x_pct:.2f} - "
                     f"{a_busy:.2f} = {b_busy:.2f} %; b = {b_busy / bpi:.1f} IOPS"
                     + (f" - {cut:.1f}" if cut else ""))
        return self._decision(state, "; ".join(notes), bpi=bpi, warnings=warnings)

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """New floors for the protected groups (the paper's ``a``) from the next step on."""
        self.targets = retargeted(self.targets, floors)

    # -- internals --
    def _reset_reason(self, util: float, bpi: float, full: bool) -> str | None:
        p = self.params
        low = p.reset_low_pct * self.x_pct / 100 if p.reset_low_relative else p.reset_low_pct
        if util < low and self.x_pct != p.x_initial_pct:
            return (f"%util {util:.2f} < {low:.2f} %: X reset to {p.x_initial_pct:g} %")
        prev = self.prev_bpi
        # Only non-saturated samples are compared: at 100 % busy, busy_per_iops = 100/IOPS is
        # the saturated throughput, not the linear-region cost the proportional arithmetic
        # uses, and the paper's own cut of B moves it on purpose (c vs d, §4).
        if (p.bpi_jump_ratio is not None and not full and prev is not None and prev > 0
                and max(bpi / prev, prev / bpi) >= p.bpi_jump_ratio
                and self.x_pct != p.x_initial_pct):
            return (f"busy_per_iops changed {prev:.4f} → {bpi:.4f} (x{bpi / prev:.2f}): "
                    f"workload changed, X reset to {p.x_initial_pct:g} %")
        return None

    def _feasibility(self, a: float, bpi: float, b: float) -> tuple[str, ...]:
        need = a * bpi
        if b >= self.targets.b_min_iops:
            self._warned = None
            return ()
        key = f"{round(need)}"
        if key == self._warned:
            return ()
        self._warned = key
        return ((f"infeasible floor: A's floors total {a:g} IOPS, which at {bpi:.4f} %/IOPS "
                f"need {need:.1f} % busy, leaving B {b:.1f} IOPS under X = {self.x_pct:.1f} % "
                f"(capacity ≈ {100 / bpi:.0f} IOPS at 100 % busy, {self.x_pct / bpi:.0f} at "
                f"X); B is held at its minimum of {self.targets.b_min_iops} IOPS per "
                "direction"),)

    def _apply(self, obs: Observation, b_iops: float) -> None:
        mn = self.targets.b_min_iops
        groups = self.targets.throttled
        # Each direction gets at least b_min (below), so the split itself needs no minimum.
        shares = split_budget(max(b_iops, 0.0), {g: obs.group(g).iops for g in groups}, 0.0)
        for g in groups:
            go = obs.group(g)
            fr = _read_share(go, default=_read_share(GroupObservation(obs.r_iops, obs.w_iops)))
            fr = _clamp(fr, self.params.rw_min_share, 1 - self.params.rw_min_share)
            t = self.targets
            want_r, want_w = grid_targets(t, shares[g] * fr, shares[g] * (1 - fr))
            self.limits[g] = GroupLimit(t.on_grid(_whole(want_r, mn)),
                                        t.on_grid(_whole(want_w, mn)))

    def _decision(self, state: str, reason: str, *, bpi: float | None = None,
                  warnings: tuple[str, ...] = ()) -> Decision:
        return Decision(limits=dict(self.limits), x_pct=self.x_pct, state=state,
                        reason=reason, busy_per_iops=bpi,
                        capacity_iops=None if not bpi else 100.0 / bpi, warnings=warnings)


# ---- the adaptive policy ----------------------------------------------------------------
class _UtilCosts:
    """Read and write cost (device fraction per IOPS) learnt from %util, for devices where
    %util is a capacity measure (one request at a time: a single spindle; DESIGN.md §4).

    Keeps exponentially weighted sums of the regression ``u = cr·r + cw·w`` (u = %util/100,
    through the origin: an idle device is 0 % busy). When reads and writes have varied
    independently enough the 2x2 normal equations give separate costs; otherwise both get
    the single cost: seed 004's busy_per_iops ``u / (r + w)``, smoothed as the ratio of the
    decayed sums ``Σu / Σ(r + w)`` -- busy time per I/O over the recent I/Os, so an interval
    weighs by its I/Os. (A mean of per-interval ratios would let a nearly idle interval --
    a workload starting, 2 I/Os in 4 % busy -- count as much as a full one: on the lab's
    emulated disk such a start-up interval held the estimate 50 % high for ten seconds.)
    """

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.s: list[float] = [0.0] * 5  # Srr, Sww, Srw, Sru, Swu
        self.su = 0.0  # decayed Σ u
        self.sn = 0.0  # decayed Σ (r + w)
        self.single: float | None = None

    def update(self, r: float, w: float, u: float) -> None:
        k = 1.0 - self.alpha
        new = (r * r, w * w, r * w, r * u, w * u)
        self.s = [k * a + b for a, b in zip(self.s, new, strict=True)]
        self.su = k * self.su + u
        self.sn = k * self.sn + r + w
        self.single = self.su / self.sn if self.sn > 0 else self.single

    def costs(self) -> tuple[float, float] | None:
        # No busy time seen yet (I/O done, %util 0: an almost idle device whose kernel
        # counts busy time in whole ms): no cost to divide a budget by.
        if self.single is None or self.single <= 0:
            return None
        srr, sww, srw, sru, swu = self.s
        det = srr * sww - srw * srw
        # Correlation² of r and w below 0.9: the mix varied enough to tell costs apart.
        if srr > 0 and sww > 0 and det > 0.1 * srr * sww:
            cr = (sru * sww - swu * srw) / det
            cw = (swu * srr - sru * srw) / det
            lo, hi = self.single / 10, self.single * 10
            if lo <= cr <= hi and lo <= cw <= hi:
                return cr, cw
        return self.single, self.single


class _LatencyCapacity:
    """Capacity (normalised IOPS at the latency knee) for devices whose %util means nothing.

    The baseline latency ``l0`` is the lowest await seen, updated from intervals with at most
    one request outstanding (aqu-sz <= 1: no queueing, so await is the device's own latency
    for the current workload; without aqu-sz it drifts up slowly). Past ``knee·l0`` the device
    is queueing:
    the capacity is at most what it delivered. Below ``probe·l0`` with B using its whole
    allowance, the estimate may grow by ``probe_step`` (bounded by the ceiling found at the
    last knee or A-miss) — probing stops well before the knee, so it never queues A.
    """

    def __init__(self, p: AdaptiveParams, hint: float | None) -> None:
        self.p = p
        self.l0: float | None = None
        self.cap: float | None = hint
        self.ceiling: float | None = None
        self.l0_at_ceiling: float | None = None

    def normalised(self, r: float, w: float) -> float:
        return r + self.p.write_cost_factor * w

    def observe_latency(self, await_ms: float, aqu_sz: float | None) -> None:
        await_ms = max(await_ms, 1e-6)
        if self.l0 is None or await_ms < self.l0:
            self.l0 = await_ms
        elif aqu_sz is not None and aqu_sz <= 1.0:
            # At most one request outstanding on average: no queueing, so this await is the
            # device's own service latency for the current workload; follow it both ways.
            self.l0 += (await_ms - self.l0) * self.p.ewma_alpha
        elif aqu_sz is None:
            # No queue size to tell queueing from slower I/O: drift slowly up instead.
            self.l0 += (await_ms - self.l0) * self.p.baseline_drift
        # Queued (aqu-sz > 1) and slower than the baseline: congestion, not a new baseline —
        # the baseline stays, so a steady load cannot ratchet the knee upward.
        if (self.ceiling is not None and self.l0_at_ceiling is not None
                and max(self.l0 / self.l0_at_ceiling, self.l0_at_ceiling / self.l0)
                >= self.p.regime_change_ratio):
            self.ceiling = None  # a new workload: forget the old knee

    def latency_ratio(self, await_ms: float | None) -> float | None:
        if await_ms is None or self.l0 is None:
            return None
        return await_ms / self.l0

    def costs(self) -> tuple[float, float] | None:
        if self.cap is None:
            return None
        return 1.0 / self.cap, self.p.write_cost_factor / self.cap


@dataclass
class _GroupState:
    busy: float | None = None  # EWMA of the group's use, device fraction
    read_share: float | None = None
    limit: GroupLimit = UNLIMITED
    pinned: int = 0  # >0: reads pinned n intervals in a row, <0: writes
    #: The direction grid_targets raised above the group's allowance ("r", "w" or None):
    #: its slack is made on purpose and says nothing about the group's demand.
    raised: str | None = None
    #: Allowance the written limits fell short of, carried to the next interval (IOPS per
    #: direction; ``AdaptiveParams.grid_dither``).
    carry_r: float = 0.0
    carry_w: float = 0.0


class AdaptivePolicy:
    """Closed-loop guarantee (ours; the default). See the module docstring for the interface.

    Each interval:

    1. **Costs.** Util mode (single-spindle devices): read/write cost per IOPS from %util
       (:class:`_UtilCosts`). Latency mode (``Targets.device_parallel``): capacity from the
       latency knee (:class:`_LatencyCapacity`), cost = 1/capacity (writes x a factor).
    2. **A's status.** A protected group *misses* when it delivered less than
       ``floor·(1 - miss_tolerance)`` **and** it had demand: its ``demand_iops`` is known and
       at least that much, or (unknown demand) the device is congested or A's PSI stall is
       high. A below its floor on an uncongested device is A's own choice, not a miss.
       Misses that do not improve A's IOPS ``futile_after`` times in a row mean A is limited
       by itself: cutting B further stops until A's IOPS moves.
    3. **Target X.** A miss lowers X by the busy share A fell short (x ``miss_gain``, at least
       ``knee_step_pct``, at most ``max_cut_pct``); congestion without a miss lowers it by
       ``knee_step_pct``. Either sets a *ceiling*: X stays ``ceiling_margin_pct`` below the
       level that hurt, until the cost per I/O changes by ``regime_change_ratio`` (a new
       workload). Healthy for ``recover_after`` intervals with B at its limit, X rises by
       ``recover_step_pct`` up to ``min(x_max, ceiling - margin)``.
    4. **Budget.** B's share of the device = X - A's floors at their own costs; split among B
       groups by their recent use (EWMA; an idle group keeps ``min_share``), and within a
       group into reads and writes by its mix (a direction pinned at its limit while the
       other is not gains ``mix_step``), each converted to IOPS by its own cost.
    5. **Damping.** A limit moves at most ``step_up_frac`` up / ``step_down_frac`` down per
       interval, changes smaller than the deadband are not written (unless A just missed),
       and nothing goes below ``b_min_iops``.
    6. **Stretch** (util mode, work conservation). X protects A by keeping the spindle
       below its knee, but a saturated spindle may still serve A its floor -- %util = 100
       cannot tell, A's delivered IOPS can. Once A has met its floor ``stretch_after``
       intervals in a row with B at its limit, B's budget is multiplied by
       ``1 + stretch_step`` per interval (congestion no longer trims X meanwhile). The
       first miss withdraws the stretch at once -- back to X's budget, under which A was
       fine, less A's shortfall for one interval so that A catches up -- and the interval
       after it, while the stretched queue drains, does not move X. Later stretches stop
       ``stretch_backoff`` steps below the level that hurt and wait for
       ``restretch_after`` intervals with A at its floor, until the floors or the workload
       change.

    Nothing here creates load to learn: the upward movements (recovery, capacity probe,
    stretch) happen only while A is fine and let through no more than B itself asks for;
    recovery and probe stay below the device's knee and stop at the first miss or
    congestion, whose level is then remembered; the stretch goes past the knee, bounded by
    A's own IOPS, and is withdrawn at the first miss. (The stretch can therefore cost A a
    short interval per level found too high, and A's latency rises on a saturated spindle:
    ``stretch_step`` 0 keeps B to X.)

    States: ``warmup``, ``hold`` (nothing to change), ``protect`` (A missed: B cut),
    ``knee`` (congested: B trimmed), ``recover`` (target raised), ``probe`` (latency-mode
    capacity raised), ``stretch`` (B's budget stretched past X), ``a-limited`` (A below
    floor by its own doing), ``infeasible``.
    """

    name = "adaptive"

    def __init__(self, targets: Targets, params: AdaptiveParams | None = None) -> None:
        self.targets = targets
        self.params = p = params or AdaptiveParams()
        self.parallel = targets.device_parallel
        self.util_costs = _UtilCosts(p.ewma_alpha)
        self.lat = _LatencyCapacity(p, targets.capacity_hint_iops)
        self.x = p.x_top_pct(self.parallel) / 100.0
        self.ceiling: float | None = None
        self.cost_at_ceiling: tuple[float, float] | None = None
        self.mix_at_ceiling: float | None = None
        self.regime_count = 0
        self.healthy = 0
        self.seen = 0
        self.futile = 0
        self.a_at_miss: float | None = None
        self.groups = {g: _GroupState() for g in targets.throttled}
        self.a_read_share: dict[str, float | None] = dict.fromkeys(targets.protected)
        self._warned: str | None = None
        #: The floors changed: the next limits go straight to their new targets.
        self._retargeted = False
        #: The next observation was made under the old floors: A is not judged on it.
        self._grace = False
        #: B's budget as a multiple of X's (``AdaptiveParams.stretch_step``), and the
        #: intervals in a row A has met its floor.
        self.stretch = 1.0
        self.a_streak = 0
        #: Once a stretch hurt A (until the floors or the workload change): the most B's
        #: stretched budget may be, as a device fraction -- ``stretch_backoff`` steps below
        #: the budget that hurt, whatever X does meanwhile. None: only ``stretch_max``.
        self.stretch_budget_cap: float | None = None
        #: Device share taken off B's budget for one decision (A's shortfall, after a
        #: stretch is withdrawn: room for A's backlog).
        self._catchup = 0.0
        #: The next observation is the one in which a withdrawn stretch's queue drains: it
        #: does not move X.
        self._drain = False

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """New floors for the protected groups from the next step on.

        A higher floor is a new demand on the device: the ceiling learnt under the old floor
        no longer says anything, so it is dropped (A-misses will find the new one). The next
        decision moves the limits straight to the targets the new floors give, past the
        step bounds and the deadband: a floor change is a step of known size in A's need
        (seed 004 Tables 4-6 raise A's target 10x and lower it again), not noise to damp --
        damped, a 25 % step a second takes 6 s to give B back what a floor 56 -> 9 freed.
        """
        self.targets = retargeted(self.targets, floors)
        self.ceiling = None
        self.futile = 0
        self.a_at_miss = None
        self._retargeted = True
        self._grace = True
        # A's new need is judged on X's budget first; the stretch is earned again (and a
        # withdrawal's catch-up and drain belong to the old floors).
        self._reset_stretch()
        self._catchup = 0.0
        self._drain = False

    def _reset_stretch(self) -> None:
        self.stretch = 1.0
        self.a_streak = 0
        self.stretch_budget_cap = None

    # -- the step ------------------------------------------------------------------------
    def step(self, obs: Observation) -> Decision:
        p = self.params
        total = obs.iops
        if total >= p.min_iops:
            self.seen += 1
        self._learn(obs)
        costs = self._costs()
        if costs is None or self.seen < p.warmup_intervals:
            return self._decision("warmup", f"learning the device ({self.seen} of "
                                  f"{p.warmup_intervals} intervals with I/O)", None, obs)
        cr, cw = costs
        congested, cong_why = self._congested(obs)
        miss, short_frac, a_why = self._a_status(obs, congested, cr, cw)
        if self._grace and miss:
            # A delivered this interval's I/O under its old floor (seed 004's benchmark raises
            # A's load with its target): a shortfall against the new one is not a miss.
            miss, short_frac = False, 0.0
            self.futile, self.a_at_miss = 0, None
            a_why = f"{a_why} -- measured under the previous floors, not counted"
        self._grace = False
        drain, self._drain = self._drain, False
        b_constrained = self._b_constrained(obs)
        x_old = self.x
        stretched = self.stretch > 1.0
        state, why = "hold", "nothing to change"
        if drain and (miss or congested):
            # The interval after a stretch was withdrawn: B's stretched queue was still
            # draining (what it had in flight and what the throttle had let through), so
            # neither a shortfall nor saturation here says X is too high. B stays at X's
            # budget; the next interval is judged as usual.
            self.healthy = 0
            if miss:
                # A is still behind: its shortfall stays off B's budget one more interval.
                self._catchup = short_frac
                self.futile, self.a_at_miss = 0, None
                state, why = "protect", (f"{a_why} -- while the withdrawn stretch drains: X "
                                         f"unchanged, B below X's budget by A's shortfall "
                                         f"({short_frac:.1%})")
            else:
                state, why = "hold", (f"{cong_why} -- while the withdrawn stretch drains: X "
                                      "unchanged")
            miss, short_frac, congested = False, 0.0, False
        elif miss and self.futile >= p.futile_after:
            state, why = "a-limited", (f"{a_why}, but {self.futile} cuts of B did not raise "
                                       "A's IOPS: A is limited by itself; B not cut further")
            miss = False
        elif miss and stretched:
            # The stretch hurt A: back to X's budget, under which A was at its floor, at once;
            # X itself was not at fault.
            old = self.stretch
            b_frac = max(self._b_frac(cr, cw), 0.0)
            self.stretch_budget_cap = b_frac * old / (1 + p.stretch_step) ** p.stretch_backoff
            self.stretch = 1.0
            self._catchup = short_frac
            self._drain = True
            self._mark_regime(cr, cw, obs)
            self.healthy = 0
            cap = self._stretch_limit(b_frac)
            later = (f"later stretches stop at x{cap:.2f} (of today's X)" if cap > 1.0
                     else "no more stretch")
            state, why = "protect", (f"{a_why}; B's budget back from x{old:.2f} to X's less "
                                     f"A's shortfall ({short_frac:.1%}) for this interval; "
                                     f"{later} until the floors or the workload change")
        elif miss:
            drop = _clamp(p.miss_gain * short_frac, p.knee_step_pct / 100, p.max_cut_pct / 100)
            self._set_ceiling(x_old, cr, cw, obs)
            self.x = max(p.x_min_pct / 100, x_old - drop)
            self.healthy = 0
            state, why = "protect", f"{a_why}; X {x_old:.1%} → {self.x:.1%}"
        elif congested and not stretched:
            self._set_ceiling(x_old, cr, cw, obs)
            self.x = max(p.x_min_pct / 100, x_old - p.knee_step_pct / 100)
            if self.parallel and self.lat.cap is not None:
                t = self.lat.normalised(obs.r_iops, obs.w_iops)
                self.lat.ceiling = self.lat.cap
                self.lat.l0_at_ceiling = self.lat.l0
                self.lat.cap = max(min(self.lat.cap, t), 1.0)
            self.healthy = 0
            state, why = "knee", f"{cong_why}; X {x_old:.1%} → {self.x:.1%}"
        else:
            self.healthy += 1
            # While B's budget is stretched X stays where it is: saturation is expected there,
            # and only A's misses say anything.
            if b_constrained and self.healthy >= p.recover_after and not stretched:
                top = p.x_top_pct(self.parallel) / 100
                if self.ceiling is not None:
                    top = min(top, self.ceiling - p.ceiling_margin_pct / 100)
                if self.x < top - 1e-9:
                    self.x = min(top, self.x + p.recover_step_pct / 100)
                    state, why = "recover", (f"A fine and device healthy for {self.healthy} "
                                             f"intervals, B at its limit: X {x_old:.1%} → "
                                             f"{self.x:.1%}")
                elif self.parallel and self._probe(obs):
                    state, why = "probe", (f"latency {obs.await_ms:.2f} ms below "
                                           f"{p.probe_latency_factor:g}x baseline "
                                           f"{self.lat.l0:.2f} ms and B at its limit: capacity "
                                           f"estimate raised to {self.lat.cap:.0f} IOPS")
                costs = self._costs() or costs
                cr, cw = costs
            if state == "hold" and a_why:
                why = a_why
        if state in ("protect", "a-limited"):
            self.a_streak = 0
        else:
            self.a_streak += 1
            if state in ("hold", "recover") and self._stretch(b_constrained, cr, cw):
                said = f"{why}; " if state == "recover" else ""
                state, why = "stretch", (f"{said}A at its floor for {self.a_streak} intervals "
                                         "and B at its limit: B's budget stretched to "
                                         f"x{self.stretch:.2f} of X's")
        jump, self._retargeted = self._retargeted, False
        limits, warnings, budget_why = self._limits(obs, cr, cw, force=state == "protect",
                                                    jump=jump,
                                                    dither=state in ("hold", "recover"))
        if self.stretch > 1.0 and state != "stretch":
            budget_why += f", stretched x{self.stretch:.2f} (A at its floor)"
        if jump:
            why = f"floors changed: limits set to their new targets; {why}"
        if warnings and state == "hold":
            state = "infeasible"
        mix_cost = self._mix_cost(obs, cr, cw)
        reason = f"{why}; {budget_why}"
        return Decision(limits=limits, x_pct=self.x * 100, state=state, reason=reason,
                        busy_per_iops=mix_cost * 100, capacity_iops=1.0 / mix_cost,
                        a_miss=state == "protect", warnings=warnings)

    # -- learning ----------------------------------------------------------------------
    def _learn(self, obs: Observation) -> None:
        p = self.params
        total = obs.iops
        if total >= p.min_iops:
            if obs.util_pct is not None and not self.parallel:
                self.util_costs.update(obs.r_iops, obs.w_iops, _clamp(obs.util_pct, 0, 100) / 100)
            if self.parallel:
                if obs.await_ms is not None:
                    self.lat.observe_latency(obs.await_ms, obs.aqu_sz)
                t = self.lat.normalised(obs.r_iops, obs.w_iops)
                ratio = self.lat.latency_ratio(obs.await_ms)
                if self.lat.cap is None:
                    self.lat.cap = t
                elif ratio is not None and ratio < p.probe_latency_factor:
                    # Served t at healthy latency: the device can do at least that much.
                    self.lat.cap = max(self.lat.cap, t)
        for g, st in self.groups.items():
            go = obs.group(g)
            costs = self._costs()
            use = go.r_iops * costs[0] + go.w_iops * costs[1] if costs else 0.0
            st.busy = _ewma(st.busy, use, p.ewma_alpha)
            self._learn_mix(st, go, costs)
        for g in self.targets.protected:
            go = obs.group(g)
            if go.iops > 0:
                self.a_read_share[g] = _ewma(self.a_read_share[g], _read_share(go),
                                             p.ewma_alpha)
        # Regime change: the cost per I/O at the *same* read/write mix moved far from where
        # the ceiling was found, for several intervals in a row. (A cost that moved only
        # because the mix moved — e.g. because B was throttled — is not a new workload.)
        c = self._costs()
        learnt = self.ceiling is not None or self.stretch_budget_cap is not None
        if learnt and c is not None and self.cost_at_ceiling is not None \
                and total >= p.min_iops:
            fr = obs.r_iops / total
            now = fr * c[0] + (1 - fr) * c[1]
            then = fr * self.cost_at_ceiling[0] + (1 - fr) * self.cost_at_ceiling[1]
            mix_moved = self.mix_at_ceiling is not None and abs(fr - self.mix_at_ceiling) > 0.2
            if not mix_moved and max(now / then, then / now) >= p.regime_change_ratio:
                self.regime_count += 1
                if self.regime_count >= p.recover_after:
                    self.ceiling = None
                    self.stretch_budget_cap = None
                    self.regime_count = 0
            else:
                self.regime_count = 0

    def _learn_mix(self, st: _GroupState, go: GroupObservation,
                   costs: tuple[float, float] | None) -> None:
        """Move a group's read share (of its busy allowance) toward what it needs.

        A direction at its limit (>= 95 %) while the other has clear slack (<= 80 % used)
        for ``recover_after`` intervals in a row gains ``mix_step`` of the share — but the
        slack direction keeps 125 % of what it used, so the move cannot overshoot into
        pinning it. Otherwise the share follows the observed mix (EWMA). The two thresholds
        and the persistence are the hysteresis that keeps a demand sitting right at a limit
        from flipping the split every interval.
        """
        p = self.params
        lim = st.limit
        if go.iops <= 0:
            return
        share = st.read_share
        if share is None:
            st.read_share = _clamp(_read_share(go), p.min_share, 1 - p.min_share)
            return
        r_pin = lim.riops is not None and go.r_iops >= 0.95 * lim.riops
        w_pin = lim.wiops is not None and go.w_iops >= 0.95 * lim.wiops
        r_slack = (lim.riops is not None and go.r_iops <= 0.8 * lim.riops
                   and st.raised != "r")
        w_slack = (lim.wiops is not None and go.w_iops <= 0.8 * lim.wiops
                   and st.raised != "w")
        side = 1 if (r_pin and w_slack) else -1 if (w_pin and r_slack) else 0
        st.pinned = st.pinned + side if side and st.pinned * side >= 0 else side
        if side and abs(st.pinned) >= p.recover_after and costs is not None \
                and lim.riops is not None and lim.wiops is not None:
            cr, cw = costs
            allowance = lim.riops * cr + lim.wiops * cw
            if side > 0:  # reads want more; writes keep 125 % of their use
                keep = 1.25 * go.w_iops * cw / allowance if allowance > 0 else 0.0
                share = min(share + p.mix_step, 1 - keep) if 1 - keep > share else share
            else:
                keep = 1.25 * go.r_iops * cr / allowance if allowance > 0 else 0.0
                share = max(share - p.mix_step, keep) if keep < share else share
        elif not side and not (r_pin and w_pin):
            # Both at their limits: the observed mix is the limits' own ratio and says
            # nothing about demand (following it would ratchet the split through rounding).
            share = _ewma(share, _read_share(go), p.ewma_alpha)
        st.read_share = _clamp(share, p.min_share, 1 - p.min_share)

    def _costs(self) -> tuple[float, float] | None:
        return self.lat.costs() if self.parallel else self.util_costs.costs()

    def _mix_cost(self, obs: Observation, cr: float, cw: float) -> float:
        fr = _read_share(GroupObservation(obs.r_iops, obs.w_iops))
        return fr * cr + (1 - fr) * cw

    # -- judging -----------------------------------------------------------------------
    def _congested(self, obs: Observation) -> tuple[bool, str]:
        p = self.params
        if obs.iops < p.min_iops:
            return False, ""
        if self.parallel:
            ratio = self.lat.latency_ratio(obs.await_ms)
            if ratio is not None and ratio > p.knee_latency_factor:
                return True, (f"await {obs.await_ms:.2f} ms is {ratio:.1f}x the baseline "
                              f"{self.lat.l0:.2f} ms (knee at {p.knee_latency_factor:g}x)")
            return False, ""
        if obs.util_pct is not None and obs.util_pct >= p.full_util_pct:
            return True, f"%util {obs.util_pct:.1f} ≥ {p.full_util_pct:g}: device saturated"
        return False, ""

    def _a_status(self, obs: Observation, congested: bool, cr: float,
                  cw: float) -> tuple[bool, float, str]:
        """(miss, shortfall as device fraction, explanation)."""
        p = self.params
        miss = False
        short = 0.0
        notes: list[str] = []
        a_total = 0.0
        for g, floor in self.targets.protected.items():
            go = obs.group(g)
            a_total += go.iops
            want = floor if go.demand_iops is None else min(floor, go.demand_iops)
            if go.iops >= self._met_at(g, want, obs.interval_s):
                continue
            if go.demand_iops is not None:
                had = True
                evidence = f"demand {go.demand_iops:.0f} IOPS"
            elif go.stall_pct is not None and go.stall_pct >= p.stall_demand_pct:
                had, evidence = True, f"stalled on I/O {go.stall_pct:.0f} % of the time"
            elif congested:
                had, evidence = True, "device congested"
            else:
                had, evidence = False, ""
            if not had:
                notes.append(f"{g} at {go.iops:.0f} < floor {floor:g} IOPS but the device is "
                             "not congested: A's own choice, not a miss")
                continue
            miss = True
            fr = self.a_read_share.get(g) or 0.5
            short += (want - go.iops) * (fr * cr + (1 - fr) * cw)
            notes.append(f"A miss: {g} got {go.iops:.0f} of {want:.0f} IOPS ({evidence})")
        if miss:
            if self.a_at_miss is not None and a_total <= self.a_at_miss * (1 + p.miss_tolerance):
                self.futile += 1
            else:
                self.futile = 0
            if self.a_at_miss is None or a_total > self.a_at_miss:
                self.a_at_miss = a_total
        else:
            self.futile = 0
            self.a_at_miss = None
        return miss, short, "; ".join(notes)

    def _met_at(self, g: str, want: float, interval_s: float) -> float:
        """IOPS at and above which protected group ``g`` has met ``want`` in an interval."""
        p = self.params
        fr = self.a_read_share.get(g)
        directions = 2 if fr is not None and 0.0 < fr < 1.0 else 1
        least = want * (1 - p.miss_tolerance)
        return least - min(p.miss_slack_ios * directions / interval_s, 0.5 * least)

    def _b_constrained(self, obs: Observation) -> bool:
        """Some B group used (nearly) all of a limit: more room would be used."""
        for g, st in self.groups.items():
            go = obs.group(g)
            lim = st.limit
            if ((lim.riops is not None and go.r_iops >= 0.9 * lim.riops)
                    or (lim.wiops is not None and go.w_iops >= 0.9 * lim.wiops)):
                return True
        return False

    def _stretch(self, b_constrained: bool, cr: float, cw: float) -> bool:
        """Stretch B's budget one step (``AdaptiveParams.stretch_step``) if A has earned it
        and B would use it; whether it moved."""
        p = self.params
        hurt = self.stretch_budget_cap is not None
        need = p.restretch_after if hurt and self.stretch <= 1.0 else p.stretch_after
        if p.stretch_step <= 0 or self.parallel or not b_constrained or self.a_streak < need:
            return False
        new = min(self._stretch_limit(self._b_frac(cr, cw)),
                  self.stretch * (1 + p.stretch_step))
        if new <= self.stretch + 1e-9:
            return False
        self.stretch = new
        return True

    def _stretch_limit(self, b_frac: float) -> float:
        """Largest stretch (a multiple of X's budget, ``b_frac``) allowed now."""
        top = self.params.stretch_max
        cap = self.stretch_budget_cap
        if cap is None:
            return top
        if b_frac <= 0:
            return 1.0
        return min(top, max(1.0, cap / b_frac))

    def _a_frac(self, cr: float, cw: float) -> float:
        """Device share A's floors take at their own costs."""
        a_frac = 0.0
        for g, floor in self.targets.protected.items():
            fr = self.a_read_share.get(g) or 0.5
            a_frac += floor * (fr * cr + (1 - fr) * cw)
        return a_frac

    def _b_frac(self, cr: float, cw: float) -> float:
        """B's budget under X (device share; negative when A's floors exceed X)."""
        return self.x - self._a_frac(cr, cw)

    def _set_ceiling(self, x: float, cr: float, cw: float, obs: Observation) -> None:
        self.ceiling = x if self.ceiling is None else min(self.ceiling, x)
        self._mark_regime(cr, cw, obs)

    def _mark_regime(self, cr: float, cw: float, obs: Observation) -> None:
        """Remember the costs and mix under which A was hurt (see the regime change)."""
        self.cost_at_ceiling = (cr, cw)
        self.mix_at_ceiling = obs.r_iops / obs.iops if obs.iops > 0 else None
        self.regime_count = 0

    def _probe(self, obs: Observation) -> bool:
        p = self.params
        ratio = self.lat.latency_ratio(obs.await_ms)
        if self.lat.cap is None or ratio is None or ratio >= p.probe_latency_factor:
            return False
        # Smaller steps closer to the probe limit, so a probe lands inside the hold band
        # (probe..knee) instead of jumping over it; none in the last quarter below the limit,
        # where the steps would be too small to matter (creeping, not converging).
        room = (p.probe_latency_factor - ratio) / (p.probe_latency_factor - 1)
        if room < 0.25:
            return False
        new = self.lat.cap * (1 + p.probe_step * min(1.0, room))
        if self.lat.ceiling is not None:
            new = min(new, self.lat.ceiling * (1 - p.ceiling_margin_pct / 100))
        if new <= self.lat.cap:
            return False
        self.lat.cap = new
        return True

    # -- limits ------------------------------------------------------------------------
    def _limits(self, obs: Observation, cr: float, cw: float, *, force: bool,
                jump: bool = False, dither: bool = False,
                ) -> tuple[dict[str, GroupLimit], tuple[str, ...], str]:
        p = self.params
        t = self.targets
        mn = t.b_min_iops
        a_frac = self._a_frac(cr, cw)
        b_frac = self.x - a_frac - self._catchup
        self._catchup = 0.0
        # A stretch is bounded by the budget that hurt A, even if X rose since.
        self.stretch = min(self.stretch, self._stretch_limit(self.x - a_frac))
        min_frac = sum(mn * (cr + cw) for _ in t.throttled)
        warnings = self._feasibility(a_frac, b_frac, min_frac, cr, cw)
        # Each direction is floored at b_min below, so the split itself needs no minimum.
        shares = split_budget(max(b_frac, 0.0), {g: st.busy or 0.0 for g, st in
                                                 self.groups.items()}, 0.0, p.min_share)
        out: dict[str, GroupLimit] = {}
        for g, st in self.groups.items():
            sr = st.read_share if st.read_share is not None else 0.5
            budget = shares[g] * self.stretch
            raw_r, raw_w = budget * sr / cr, budget * (1 - sr) / cw
            bound = {"w": "r", "r": "w"}.get(st.raised or "")
            want_r, want_w = grid_targets(t, raw_r, raw_w, bind=bound)
            st.raised = "r" if want_r > raw_r else "w" if want_w > raw_w else None
            go = obs.group(g)
            on = dither and p.grid_dither and not jump and t.limit_grid_iops > 1
            # Only the binding (floored) direction is dithered: the other was raised.
            dr = on and st.raised != "r" and _held(go.r_iops, st.limit.riops)
            dw = on and st.raised != "w" and _held(go.w_iops, st.limit.wiops)
            if dr:
                want_r = self._dithered(raw_r + st.carry_r, want_r)
            if dw:
                want_w = self._dithered(raw_w + st.carry_w, want_w)
            st.limit = GroupLimit(self._move(st.limit.riops, want_r, force, jump),
                                  self._move(st.limit.wiops, want_w, force, jump))
            st.carry_r = self._carry(raw_r + st.carry_r, st.limit.riops) if dr else 0.0
            st.carry_w = self._carry(raw_w + st.carry_w, st.limit.wiops) if dw else 0.0
            out[g] = st.limit
        why = (f"A's floors {t.floor_iops:g} IOPS take {a_frac:.1%} of the device, B gets X - "
               f"that = {max(b_frac, 0):.1%} (read {cr * 100:.4f}, write {cw * 100:.4f} "
               "%/IOPS)")
        return out, warnings, why

    def _dithered(self, due: float, want: float) -> float:
        """The grid point at or below ``due`` (the allowance plus the carry), if that is
        above ``want`` (the allowance floored to the grid): error diffusion over intervals."""
        if due < self.targets.limit_grid_iops:
            return want
        return max(want, self.targets.on_grid(math.floor(due + 1e-9)))

    def _carry(self, due: float, written: int | None) -> float:
        """What the written limit falls short of ``due``, kept within one grid step (a
        limit held back by the step bounds must not bank a burst for later)."""
        if written is None:
            return 0.0
        return _clamp(due - written, 0.0, self.targets.limit_grid_iops * (1 - 1e-9))

    def _move(self, old: int | None, want: float, force: bool, jump: bool = False) -> int:
        """Next limit from ``old`` toward ``want``: deadband, bounded step, >= b_min;
        ``jump``: straight to ``want`` (the floors just changed)."""
        p = self.params
        t = self.targets
        mn = t.b_min_iops
        target = _whole(want, mn)
        if old is None or jump:
            # First engagement, or new floors: straight to the computed limit (A first).
            return t.on_grid(target)
        g = t.limit_grid_iops
        # On the throttle's grid a limit can only move by whole steps: a change of less than
        # half a step would overshoot by more than it corrects, so it waits (unless A just
        # missed: ``force``).
        grid_band = g / 2 if g > 1 and old >= g else 0.0
        if not force and abs(target - old) < max(p.deadband_iops, p.deadband_frac * old,
                                                 grid_band):
            return old
        up = old + max(math.ceil(old * p.step_up_frac), p.step_min_iops)
        down = max(mn, min(old - p.step_min_iops, math.floor(old * (1 - p.step_down_frac))))
        new = t.on_grid(int(_clamp(target, down, up)))
        if new == old and old >= g > 1 and target >= old + g:
            # The bounded step fell short of the next grid point: take that one step.
            new = old + g
        return new

    def _feasibility(self, a_frac: float, b_frac: float, min_frac: float, cr: float,
                     cw: float) -> tuple[str, ...]:
        t = self.targets
        if b_frac >= min_frac:
            self._warned = None
            return ()
        # Said again only when A's need moves by ~10 % (not every time X moves).
        key = f"{round(math.log(max(a_frac, 1e-9)) / math.log(1.1))}"
        if key == self._warned:
            return ()
        self._warned = key
        cap = 2.0 / (cr + cw)
        verdict = ("above the device's estimated capacity" if a_frac > 1.0 else
                   "above the target busy rate")
        return ((f"infeasible floor: A's floors total {t.floor_iops:g} IOPS, which need "
                f"{a_frac:.1%} of the device (≈ {cap:.0f} IOPS at 100 % busy), {verdict} "
                f"(target X = {self.x:.1%}); B is held at its minimum of {t.b_min_iops} IOPS "
                "per direction"),)

    def _decision(self, state: str, reason: str, x: float | None,
                  obs: Observation) -> Decision:
        return Decision(limits={g: st.limit for g, st in self.groups.items()},
                        x_pct=None if x is None else x * 100, state=state, reason=reason)


def make_policy(name: str, targets: Targets, *, paper: PaperParams | None = None,
                adaptive: AdaptiveParams | None = None) -> Policy:
    """The policy called ``name`` ("adaptive" or "paper") for ``targets``."""
    if name == "paper":
        return PaperPolicy(targets, paper)
    if name == "adaptive":
        return AdaptivePolicy(targets, adaptive)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


def retargeted(targets: Targets, floors: Mapping[str, float]) -> Targets:
    """``targets`` with new floors for the same protected groups (checked)."""
    if set(floors) != set(targets.protected):
        raise ValueError(f"new floors must name exactly the protected groups "
                         f"{sorted(targets.protected)}, got {sorted(floors)}")
    return replace(targets, protected=dict(floors))


__all__ = [
    "MAX_LIMIT_IOPS", "POLICY_NAMES", "UNLIMITED", "AdaptiveParams", "AdaptivePolicy",
    "Decision", "GroupLimit", "GroupObservation", "Observation", "PaperParams", "PaperPolicy",
    "Policy", "PolicyName", "Targets", "grid_targets", "make_policy", "retargeted",
    "split_budget",
]
