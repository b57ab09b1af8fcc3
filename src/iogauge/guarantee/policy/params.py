"""The policies' constants: :class:`PaperParams` ([Oe] §4) and :class:`AdaptiveParams`."""

from __future__ import annotations

from dataclasses import dataclass

from iogauge.guarantee.policy.curve import MIN_POINTS


@dataclass(frozen=True)
class PaperParams:
    """Constants of [Oe] §4 (defaults are the paper's own values).

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
        x_max_pct: util mode: highest target busy rate -- [Oe] §4's initial X (95 %).
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
        latency_resolution: latency mode: an interval's await is used (baseline,
            congestion, probe) only when its uncertainty is at most this share of the
            baseline (of the await itself before there is one). The kernel counts I/O time
            in whole milliseconds ([iostats]: fields 4 and 8), so the await of n I/Os is
            uncertain by up to 2 ms / n: one I/O in a second on the lab's ``ssd`` read
            0.00 or 1.00 ms against a 0.30 ms baseline, a "knee" at 3x that cut X to its
            minimum while the device was idle. 0.1 keeps the error well inside the
            probe (1.5x) and knee (2x) margins.
        latency_curve_window: latency mode: intervals the await-vs-load curve is fitted
            over (:class:`~iogauge.guarantee.policy.curve.LatencyCurve`): where it fits, the
            knee is judged against the curve's await at the interval's load rather than the
            lowest await, and probes may raise the capacity estimate toward its asymptote.
            0: no curve (the knee at a multiple of the lowest await only).
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
        futile_knee_drop_pct: latency mode: once knee cuts have taken this share off the
            device's load (normalised IOPS at the first knee of an episode) and the await
            is still past the knee, with A at its floor all along, the await is the
            workload's, not a queue B's limit controls: the cuts are undone and later knees
            are judged against that await (until A misses or the floors change).
        step_up_frac, step_down_frac: largest relative rise / fall of a limit per interval.
        step_min_iops: a limit may always move by at least this many IOPS (small limits).
        step_up_device_frac: a limit may always rise by this share of the device's
            capacity (IOPS at the device's current mix) per interval, so that a B held at its
            minimum reaches what the device has to spare in a few intervals, not dozens.
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
        stretch_step: while A has met its floor for ``stretch_after`` intervals in a row
            and B uses its whole limit, B's budget (X's) is multiplied by
            ``1 + stretch_step`` per interval (latency mode: ``latency_stretch_step``),
            past the knee or not: %util = 100 says
            the spindle is always busy, not whether A still gets its floor; A's delivered
            IOPS say that (on the lab HDD an unthrottled B left A at its floor in
            evaluation 1, where X held B to 78 % of what it got unthrottled). The first
            miss withdraws the stretch at once: for that interval B gets X's budget less
            what A fell short (so that A's backlog drains), and the interval after it --
            when the queue the stretch built is still draining -- neither cuts X nor sets
            a ceiling. Later stretches stop ``stretch_backoff`` steps below the level that
            hurt, and start again only after ``restretch_after`` intervals in a row with A
            at its floor; until the floors or the workload change. 0 disables it. In
            latency mode the knee is where the device starts queueing, and a device whose
            await grows from light load on (one server: the lab's ``ssd``) reaches it long
            before A is short ([Oe] evaluation 2's last phase on it: A kept its floor with
            B unthrottled at 3,926 IOPS, while the knee held B to 244). Its price: a short
            interval for A per level found too high, and past the knee A's I/Os queue behind
            B's, so A gets its IOPS at a higher latency than under X.
        latency_stretch_step: the same in latency mode, where the stretch grows the
            capacity estimate (B's budget is X of the stretched estimate less A's floors).
            A step of the estimate is a larger step of B's budget, by the estimate over
            B's share of it. A miss steps the stretch back ``latency_stretch_backoff``
            steps below the level B's limits had reached rather than to X's budget; lower
            floors keep it (and drop the level that hurt under the higher ones). 0 keeps B
            under the knee.
        stretch_max: largest stretch of B's budget or the capacity estimate (a multiple).
        stretch_backoff: steps (of ``stretch_step``) below a stretch that hurt A at which
            later stretches stop (until the floors or the workload change).
        latency_stretch_backoff: the same in latency mode, in steps of
            ``latency_stretch_step`` below the level B's limits had reached: the level one
            step below is the last one A kept its floor under (the limits follow the
            stretch an interval late, which that level already counts), and the steps are
            small enough that a second one would give up more of B than it buys A.
        restretch_after: intervals in a row with A at its floor before a stretch resumes
            after one hurt A (``stretch_after`` applies to the first).
        grid_dither: on a throttle grid (:attr:`Targets.limit_grid_iops`), a group held at
            its limit in the direction that binds alternates between the grid points each
            side of what it is allowed, so that on average it gets that, not the grid point
            below (error diffusion: the part a written limit falls short is carried into
            the next interval, at most one grid step). Only while A is fine and the device
            is not congested; a miss or congestion drops the carry.
        reserve_idle: keep A's floor reserved while A shows no demand ([Oe] §4's
            reservation, ``--reserve-idle``). Default False: work conserving, as Ceph
            mClock's reservations and the kernel's io.latency/io.cost controllers are --
            while A is idle B's limits open, and A's floor is reserved again the moment A's
            demand returns.
        idle_after: decision intervals in a row with no demand from A (no I/O completed,
            no demand known, no I/O stall on cgroup v2) before B's limits open.
        idle_stall_pct: cgroup v2 ``io.pressure`` stall share of A at or above which A has
            demand even with nothing completed (its I/O is queued).
        open_step: while open, B's limits grow by this fraction per interval (at least
            ``step_min_iops``, and the first step to at least all of X); 1.0 doubles them.
        open_lift_x: once an opened limit would let B use this multiple of the device
            (limit x cost per I/O), it is lifted: the kernel gives B what the device does.
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
    latency_resolution: float = 0.1
    latency_curve_window: int = 30
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
    futile_knee_drop_pct: float = 20.0
    step_up_frac: float = 0.25
    step_down_frac: float = 0.5
    step_min_iops: int = 4
    step_up_device_frac: float = 0.03
    deadband_frac: float = 0.05
    deadband_iops: int = 2
    min_share: float = 0.1
    mix_step: float = 0.1
    warmup_intervals: int = 2
    min_iops: float = 1.0
    stretch_after: int = 3
    stretch_step: float = 0.25
    latency_stretch_step: float = 0.1
    stretch_max: float = 4.0
    stretch_backoff: int = 2
    latency_stretch_backoff: int = 1
    restretch_after: int = 10
    grid_dither: bool = True
    reserve_idle: bool = False
    idle_after: int = 2
    idle_stall_pct: float = 1.0
    open_step: float = 1.0
    open_lift_x: float = 1.5

    def __post_init__(self) -> None:
        for top in ("x_max_pct", "x_max_latency_pct"):
            if not 0 < self.x_min_pct <= getattr(self, top) <= 100:
                raise ValueError(f"need 0 < x_min_pct <= {top} <= 100, got "
                                 f"{self.x_min_pct}/{getattr(self, top)}")
        if not 1 < self.probe_latency_factor < self.knee_latency_factor:
            raise ValueError("need 1 < probe_latency_factor < knee_latency_factor")
        if not 0 < self.latency_resolution < 1:
            raise ValueError(f"latency_resolution must be in (0, 1), got "
                             f"{self.latency_resolution}")
        if not 0 < self.ewma_alpha <= 1:
            raise ValueError(f"ewma_alpha must be in (0, 1], got {self.ewma_alpha}")
        if not 0 < self.step_down_frac < 1 or self.step_up_frac <= 0 \
                or self.step_up_device_frac < 0:
            raise ValueError("need 0 < step_down_frac < 1, step_up_frac > 0 and "
                             "step_up_device_frac >= 0")
        if not 0 <= self.min_share < 0.5:
            raise ValueError(f"min_share must be in [0, 0.5), got {self.min_share}")
        if self.write_cost_factor <= 0:
            raise ValueError("write_cost_factor must be > 0")
        if self.recover_after < 1 or self.futile_after < 1 or self.warmup_intervals < 1 \
                or self.stretch_after < 1 or self.restretch_after < 1:
            raise ValueError("recover_after, futile_after, warmup_intervals, stretch_after "
                             "and restretch_after must be >= 1")
        if not 0 < self.futile_knee_drop_pct < 100:
            raise ValueError(f"futile_knee_drop_pct must be in (0, 100), got "
                             f"{self.futile_knee_drop_pct}")
        if self.latency_curve_window != 0 and self.latency_curve_window < MIN_POINTS:
            raise ValueError(f"latency_curve_window must be 0 (no curve) or at least "
                             f"{MIN_POINTS}, the fewest intervals a curve is fitted to, got "
                             f"{self.latency_curve_window}")
        if self.idle_after < 1 or self.open_step <= 0 or self.open_lift_x <= 0:
            raise ValueError("need idle_after >= 1, open_step > 0 and open_lift_x > 0")
        if self.stretch_step < 0 or self.latency_stretch_step < 0 or self.stretch_max < 1 \
                or self.stretch_backoff < 0 or self.latency_stretch_backoff < 0:
            raise ValueError("need stretch_step >= 0, latency_stretch_step >= 0, "
                             "stretch_max >= 1, stretch_backoff >= 0, "
                             "latency_stretch_backoff >= 0")

    def x_top_pct(self, parallel: bool) -> float:
        """Highest target X for a device in latency mode (``parallel``) or util mode."""
        return self.x_max_latency_pct if parallel else self.x_max_pct

