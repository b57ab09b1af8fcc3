"""The adaptive policy (ours; the default): closed loop on A's delivered IOPS."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from iogauge.guarantee.policy.budget import (
    _clamp,
    _ewma,
    _held,
    _read_share,
    _whole,
    grid_targets,
    split_budget,
)
from iogauge.guarantee.policy.estimators import (
    KneeEpisode,
    _GroupState,
    _LatencyCapacity,
    _UtilCosts,
    learn_mix,
)
from iogauge.guarantee.policy.idle import WorkConservation, _Interval
from iogauge.guarantee.policy.knees import LatencyKnees
from iogauge.guarantee.policy.params import AdaptiveParams
from iogauge.guarantee.policy.stretch import Stretch
from iogauge.guarantee.policy.types import (
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    State,
    Targets,
    retargeted,
)


class AdaptivePolicy(WorkConservation, LatencyKnees, Stretch):
    """Closed-loop guarantee (ours; the default). See the module docstring for the interface.

    Each interval:

    1. **Costs.** Util mode (single-spindle devices): read/write cost per IOPS from %util
       (:class:`_UtilCosts`). Latency mode (``Targets.device_parallel``): capacity from the
       latency knee (:class:`_LatencyCapacity`), cost = 1/capacity (writes x a factor). The
       knee is judged against the lowest await or, where the recent intervals fit one, the
       device's await-vs-load curve at the interval's load (:mod:`.curve`).
    2. **A's status.** A protected group *misses* when it delivered less than
       ``floor·(1 - miss_tolerance)`` **and** it had demand: its ``demand_iops`` is known and
       at least that much, or (unknown demand) the device is congested or A's PSI stall is
       high. A below its floor on an uncongested device is A's own choice, not a miss.
       Misses that do not improve A's IOPS ``futile_after`` times in a row mean A is limited
       by itself: cutting B further stops until A's IOPS moves.
    3. **Target X.** A miss lowers X by the busy share A fell short (x ``miss_gain``, at least
       ``knee_step_pct``, at most ``max_cut_pct``); congestion without a miss lowers it by
       ``knee_step_pct`` in util mode (in latency mode the capacity estimate falls to what
       the device served instead, and X stays). Either sets a *ceiling*: X stays
       ``ceiling_margin_pct`` below the level that hurt, until the cost per I/O changes by
       ``regime_change_ratio`` (a new workload). Healthy for ``recover_after`` intervals
       with B at its limit, X rises by ``recover_step_pct`` up to
       ``min(x_max, ceiling - margin)``.
    4. **Budget.** B's share of the device = X - A's floors at their own costs; split among B
       groups by their recent use (EWMA; an idle group keeps ``min_share``), and within a
       group into reads and writes by its mix (a direction pinned at its limit while the
       other is not gains ``mix_step``), each converted to IOPS by its own cost.
    5. **Damping.** A limit moves at most ``step_up_frac`` up / ``step_down_frac`` down per
       interval, changes smaller than the deadband are not written (unless A just missed),
       and nothing goes below ``b_min_iops``.
    6. **Stretch** (work conservation; :mod:`.stretch`). X protects A by keeping the spindle
       below its knee, but a saturated spindle may still serve A its floor -- %util = 100
       cannot tell, A's delivered IOPS can. Once A has met its floor ``stretch_after``
       intervals in a row with B at its limit, B's budget is multiplied by
       ``1 + stretch_step`` per interval (congestion no longer trims X meanwhile). The
       first miss withdraws the stretch at once -- back to X's budget, under which A was
       fine, less A's shortfall for one interval so that A catches up -- and the interval
       after it, while the stretched queue drains, does not move X. Later stretches stop
       ``stretch_backoff`` steps below the level that hurt and wait for
       ``restretch_after`` intervals with A at its floor, until the floors or the workload
       change. Latency mode stretches the capacity estimate instead (B's budget is X of it
       less A's floors), by ``latency_stretch_step``: there the knee is the device
       queueing, which a single-server device does long before A is short. A miss steps
       it back ``latency_stretch_backoff`` steps; lower floors keep it.

    Nothing here creates load to learn: the upward movements (recovery, capacity probe,
    stretch) happen only while A is fine and let through no more than B itself asks for;
    recovery and probe stay below the device's knee and stop at the first miss or
    congestion, whose level is then remembered; the stretch goes past the knee, bounded by
    A's own IOPS, and is withdrawn at the first miss. (The stretch can therefore cost A a
    short interval per level found too high, and A's latency rises on a saturated spindle:
    ``stretch_step`` 0 keeps B to X.)

    7. **Idle A** (work conservation, unless ``reserve_idle``): after ``idle_after``
       intervals with no demand from A, B's limits open (:meth:`_open`); A's first sign of
       demand reserves its floor again at once (:meth:`_wake`), B no higher than X's budget
       nor than the limits under which A last had its floor.

    States (:class:`~iogauge.guarantee.policy.types.State`): ``warmup``, ``hold`` (nothing
    to change), ``protect`` (A missed: B cut), ``knee`` (congested: B trimmed), ``recover``
    (target raised), ``probe`` (latency-mode capacity raised), ``stretch`` (B's budget
    stretched past X), ``a-limited`` (A below floor by its own doing), ``infeasible``,
    ``open`` (A idle: B opening or open), ``wake`` (A back: floor reserved). :meth:`step`
    hands each interval to one method per situation.
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
        #: Latency mode: the knees since the device was last calm (:class:`KneeEpisode`).
        self.knees: KneeEpisode | None = None
        #: False once A missed after knee cuts were undone: until the floors change, knees
        #: are not undone again (the undone cuts were A's protection after all).
        self.undo_knees = True
        #: X and the capacity estimate the undone knee cuts had reached.
        self.undone: tuple[float, float | None] | None = None
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
        #: Work conservation: intervals in a row A showed no demand, and whether B's limits
        #: are open (A's floor not reserved) -- see :meth:`_open`.
        self.a_idle = 0
        self.opened = False
        self._grace_why = "measured under the previous floors"
        #: B's limits in the last interval A had demand and met its floor.
        self._held_a: dict[str, GroupLimit] = {}

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """New floors for the protected groups from the next step on.

        A higher floor is a new demand on the device: the ceiling learnt under the old floor
        no longer says anything, so it is dropped (A-misses will find the new one). The next
        decision moves the limits straight to the targets the new floors give, past the
        step bounds and the deadband: a floor change is a step of known size in A's need
        ([Oe] Tables 4-6 raise A's target 10x and lower it again), not noise to damp --
        damped, a 25 % step a second takes 6 s to give B back what a floor 56 -> 9 freed.
        """
        lower = all(floors.get(g, f) <= f for g, f in self.targets.protected.items())
        self.targets = retargeted(self.targets, floors)
        self.ceiling = None
        # So is the knee found under the old floors (its mix, A's share of the queue), and
        # the await knee cuts could not lower.
        self.lat.ceiling = None
        self.lat.floor_ms = None
        self.knees = None
        self.undo_knees = True
        self.undone = None
        self.futile = 0
        self.a_at_miss = None
        self._retargeted = True
        self._grace = True
        self._grace_why = "measured under the previous floors"
        self._held_a = {}
        # A's new need is judged on X's budget first; the stretch is earned again (and a
        # withdrawal's catch-up and drain belong to the old floors) -- unless it stretched
        # the device's capacity estimate and the floors fell.
        if self.parallel and lower:
            # Latency mode stretches the device's capacity estimate: with lower floors the
            # same stretch is the same load on the device that A kept its floor under, and
            # A needs less of it. Only its growth waits for A at its new floor -- past the
            # level that hurt A under the higher floors, which says nothing of the new
            # ones (the lab ``ssd``, [Oe] evaluation 2: held there, B had 64 % of the
            # static limit's IOPS for the last 40 s).
            self.a_streak = 0
            self.stretch_budget_cap = None
        else:
            self._reset_stretch()
        self._catchup = 0.0
        self._drain = False

    # -- the step ------------------------------------------------------------------------
    def step(self, obs: Observation) -> Decision:
        p = self.params
        if self.parallel and obs.await_ms is not None:
            # An await too coarse to judge (a few I/Os, whole-ms kernel counters) is no
            # latency at all: neither a baseline, nor a knee, nor room to probe.
            obs = replace(obs, await_ms=self.lat.resolved(obs.await_ms,
                                                          obs.iops * obs.interval_s))
        if obs.iops >= p.min_iops:
            self.seen += 1
        self._learn(obs)
        costs = self._costs()
        if costs is None or self.seen < p.warmup_intervals:
            return self._decision(State.WARMUP, f"learning the device ({self.seen} of "
                                  f"{p.warmup_intervals} intervals with I/O)", None, obs)
        iv = self._judge(obs, *costs)
        if iv.open_now:
            return self._open(iv)
        if self.opened:
            return self._finish(iv, *self._wake(iv))
        handler = self._handler(iv)
        state, why = handler(iv)
        self._watch_knees(iv, state)
        if state in (State.PROTECT, State.A_LIMITED):
            self.a_streak = 0
        else:
            self.a_streak += 1
            # A stretch needs A's delivered IOPS to show A is fine: not while A is idle
            # (with ``reserve_idle`` its floor stays reserved then).
            if state in (State.HOLD, State.RECOVER) and iv.demand \
                    and self._stretch(iv.b_constrained, iv.cr, iv.cw):
                said = f"{why}; " if state == State.RECOVER else ""
                what = self._stretched()
                what, of = ((f"{what} (B gets X of it less A's floors)", "")
                            if self.parallel else (what, " of X's"))
                state, why = State.STRETCH, (f"{said}A at its floor for {self.a_streak} "
                                             f"intervals and B at its limit: {what} "
                                             f"stretched to x{self.stretch:.2f}{of}")
        return self._finish(iv, state, why)

    def _judge(self, obs: Observation, cr: float, cw: float) -> _Interval:
        """What the interval says: A's status, the device's, B's, and A's demand."""
        p = self.params
        congested, cong_why = self._congested(obs)
        # A's shortfall is the device's doing when the device queues against its baseline,
        # even where knees are judged against a higher await (KneeEpisode).
        queued = congested or self._past_baseline_knee(obs)
        miss, short_frac, a_why = self._a_status(obs, queued, cr, cw)
        if self._grace and miss:
            # A delivered this interval's I/O under its old floor ([Oe]'s benchmark raises
            # A's load with its target), or while B's opened queue drained after A woke: a
            # shortfall against the floor is not a miss.
            miss, short_frac = False, 0.0
            self.futile, self.a_at_miss = 0, None
            a_why = f"{a_why} -- {self._grace_why}, not counted"
        self._grace = False
        drain, self._drain = self._drain, False
        demand = self._a_demand(obs)
        self.a_idle = 0 if demand else self.a_idle + 1
        open_now = (not p.reserve_idle and not demand
                    and (self.opened or self.a_idle >= p.idle_after))
        return _Interval(obs, cr, cw, congested, cong_why, miss, short_frac, a_why,
                         self._b_constrained(obs), drain, demand, open_now)

    def _handler(self, iv: _Interval) -> Callable[[_Interval], tuple[State, str]]:
        """The method that handles this interval, by what it showed."""
        if iv.drain and (iv.miss or iv.congested):
            return self._drain_interval
        if (iv.miss or iv.congested) and self._b_at_minimum():
            return self._nothing_to_cut
        if iv.miss and self.futile >= self.params.futile_after:
            return self._a_limited
        if iv.miss and self.stretch > 1.0:
            return self._withdraw_stretch
        if iv.miss:
            return self._protect
        if iv.congested and self.stretch <= 1.0:
            return self._knee
        return self._healthy

    def _drain_interval(self, iv: _Interval) -> tuple[State, str]:
        """The interval after a stretch was withdrawn: B's stretched queue was still
        draining (what it had in flight and what the throttle had let through), so neither
        a shortfall nor saturation here says X is too high. B stays at X's budget; the next
        interval is judged as usual."""
        self.healthy = 0
        if not iv.miss:
            return State.HOLD, f"{iv.cong_why} -- while the withdrawn stretch drains: X unchanged"
        # A is still behind: its shortfall stays off B's budget one more interval.
        self._catchup = iv.short_frac
        self.futile, self.a_at_miss = 0, None
        return State.PROTECT, (f"{iv.a_why} -- while the withdrawn stretch drains: X "
                               f"unchanged, B below X's budget by A's shortfall "
                               f"({iv.short_frac:.1%})")

    def _b_at_minimum(self) -> bool:
        """Every B group is held at ``b_min_iops`` in both directions: cutting B further is
        not possible, so a shortfall or a queue is not B's doing."""
        mn = self.targets.b_min_iops
        return all(st.limit.riops is not None and st.limit.riops <= mn
                   and st.limit.wiops is not None and st.limit.wiops <= mn
                   for st in self.groups.values())

    def _nothing_to_cut(self, iv: _Interval) -> tuple[State, str]:
        """A miss or a knee with B already at its minimum: lowering X or the capacity
        estimate would not give A anything, only keep B down once A's need falls (on the
        lab's ``ssd`` A's floor alone held the latency past the knee, and each such interval
        cut X by 2 points, down to 20 %: the next, lower floor then left B 8 % of the
        device). X and the capacity estimate stay."""
        self.healthy = 0
        mn = self.targets.b_min_iops
        if iv.miss:
            return State.A_LIMITED, (f"{iv.a_why}, but B is at its minimum ({mn} IOPS per "
                                     f"direction): nothing left to cut, X stays {self.x:.1%}")
        return State.HOLD, (f"{iv.cong_why}, but B is at its minimum ({mn} IOPS per "
                            "direction): the queue is not B's, X and the capacity estimate "
                            "stay")

    def _a_limited(self, iv: _Interval) -> tuple[State, str]:
        return State.A_LIMITED, (f"{iv.a_why}, but {self.futile} cuts of B did not raise "
                                 "A's IOPS: A is limited by itself; B not cut further")

    def _protect(self, iv: _Interval) -> tuple[State, str]:
        p = self.params
        x_old = self.x
        drop = _clamp(p.miss_gain * iv.short_frac, p.knee_step_pct / 100, p.max_cut_pct / 100)
        self._set_ceiling(x_old, iv.cr, iv.cw, iv.obs)
        self.x = max(p.x_min_pct / 100, x_old - drop)
        self.healthy = 0
        return State.PROTECT, f"{iv.a_why}; X {x_old:.1%} → {self.x:.1%}"

    def _knee(self, iv: _Interval) -> tuple[State, str]:
        """Congested with A fine. Util mode: X down a step, its ceiling set. Latency mode:
        the capacity estimate down to what the device served -- the estimate *is* the knee
        there, and X the margin kept under it: cutting X too cut twice, and X's ceiling then
        held B down for the rest of the floors' time ([Oe] evaluation 3 on the lab ``ssd``:
        X 81 -> 75 % in three knees, B 275 of the 1,227 IOPS a static limit left it)."""
        p = self.params
        self.healthy = 0
        if not self.parallel:
            x_old = self.x
            self._set_ceiling(x_old, iv.cr, iv.cw, iv.obs)
            self.x = max(p.x_min_pct / 100, x_old - p.knee_step_pct / 100)
            return State.KNEE, f"{iv.cong_why}; X {x_old:.1%} → {self.x:.1%}"
        return self._latency_knee(iv)

    def _healthy(self, iv: _Interval) -> tuple[State, str]:
        """A fine, device not congested (or B stretched): X may recover, capacity probe."""
        p = self.params
        self.healthy += 1
        x_old = self.x
        state, why = State.HOLD, iv.a_why or "nothing to change"
        # While B's budget is stretched X stays where it is: saturation is expected there,
        # and only A's misses say anything.
        if iv.b_constrained and self.healthy >= p.recover_after and self.stretch <= 1.0:
            top = p.x_top_pct(self.parallel) / 100
            if self.ceiling is not None:
                top = min(top, self.ceiling - p.ceiling_margin_pct / 100)
            if self.x < top - 1e-9:
                self.x = min(top, self.x + p.recover_step_pct / 100)
                state, why = State.RECOVER, (f"A fine and device healthy for {self.healthy} "
                                             f"intervals, B at its limit: X {x_old:.1%} → "
                                             f"{self.x:.1%}")
            elif self.parallel and self._probe(iv.obs):
                t = self.lat.normalised(iv.obs.r_iops, iv.obs.w_iops)
                state, why = State.PROBE, (f"latency {iv.obs.await_ms:.2f} ms below "
                                           f"{p.probe_latency_factor:g}x "
                                           f"{self.lat.reference_name(t)} and B at its limit: "
                                           "capacity "
                                           f"estimate raised to {self.lat.cap:.0f} IOPS")
            iv.cr, iv.cw = self._costs() or (iv.cr, iv.cw)
        return state, why

    # -- the decision ------------------------------------------------------------------
    def _finish(self, iv: _Interval, state: State, why: str) -> Decision:
        if iv.demand and state not in (State.WAKE, State.PROTECT) and self._a_met(iv.obs):
            # The limits this interval ran under kept A at its floor: a wake-up goes no
            # higher than these.
            self._held_a = {g: st.limit for g, st in self.groups.items()}
        jump, self._retargeted = self._retargeted, False
        limits, warnings, budget_why = self._limits(iv.obs, iv.cr, iv.cw,
                                                    force=state in (State.PROTECT, State.WAKE),
                                                    jump=jump,
                                                    dither=state in (State.HOLD, State.RECOVER))
        if state is State.WAKE:
            limits = self._wake_limits(limits)
        if self.stretch > 1.0 and state != State.STRETCH:
            budget_why += f", {self._stretched()} stretched x{self.stretch:.2f} (A at its floor)"
        if jump and state != State.WAKE:
            why = f"floors changed: limits set to their new targets; {why}"
        if warnings and state == State.HOLD:
            state = State.INFEASIBLE
        mix_cost = self._mix_cost(iv.obs, iv.cr, iv.cw)
        return Decision(limits=limits, x_pct=self.x * 100, state=state,
                        reason=f"{why}; {budget_why}", busy_per_iops=mix_cost * 100,
                        capacity_iops=1.0 / mix_cost, a_miss=state == State.PROTECT,
                        warnings=warnings, infeasible=bool(warnings))

    # -- learning ----------------------------------------------------------------------
    def _learn(self, obs: Observation) -> None:
        p = self.params
        total = obs.iops
        if total >= p.min_iops:
            if obs.util_pct is not None and not self.parallel:
                self.util_costs.update(obs.r_iops, obs.w_iops, _clamp(obs.util_pct, 0, 100) / 100)
            if self.parallel:
                t = self.lat.normalised(obs.r_iops, obs.w_iops)
                if obs.await_ms is not None:
                    self.lat.observe_latency(obs.await_ms, obs.aqu_sz)
                    self.lat.observe_point(t, obs.await_ms)
                ratio = self.lat.latency_ratio(obs.await_ms, t)
                if self.lat.cap is None:
                    self.lat.cap = t
                elif ratio is not None and ratio < p.probe_latency_factor \
                        and t > self.lat.cap:
                    # Served t at healthy latency: the device can do at least that much.
                    # A stretch of the estimate (latency mode) keeps what it stretched to.
                    self.stretch = max(1.0, self.stretch * self.lat.cap / t)
                    self.lat.cap = t
        for g, st in self.groups.items():
            go = obs.group(g)
            costs = self._costs()
            use = go.r_iops * costs[0] + go.w_iops * costs[1] if costs else 0.0
            st.busy = _ewma(st.busy, use, p.ewma_alpha)
            learn_mix(st, go, costs, p)
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
            t = self.lat.normalised(obs.r_iops, obs.w_iops)
            ratio = self.lat.latency_ratio(obs.await_ms, t)
            if ratio is not None and ratio > p.knee_latency_factor:
                return True, (f"await {obs.await_ms:.2f} ms is {ratio:.1f}x "
                              f"{self.lat.reference_name(t)} (knee at "
                              f"{p.knee_latency_factor:g}x)")
            return False, ""
        if obs.util_pct is not None and obs.util_pct >= p.full_util_pct:
            return True, f"%util {obs.util_pct:.1f} ≥ {p.full_util_pct:g}: device saturated"
        return False, ""

    def _past_baseline_knee(self, obs: Observation) -> bool:
        """Latency mode: the await is past the knee of the baseline itself."""
        l0 = self.lat.l0
        return (self.parallel and obs.await_ms is not None and l0 is not None
                and obs.iops >= self.params.min_iops
                and obs.await_ms > self.params.knee_latency_factor * l0)

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
            elif congested and self._group_demand(go, obs.interval_s):
                had, evidence = True, "device congested"
            elif self.stretch > 1.0 and self._group_demand(go, obs.interval_s):
                # The stretch let B past the knee: A short while it does I/O is the
                # stretch's doing until cuts show otherwise (``futile_after``). In latency
                # mode the await need not say so ([Oe] evaluation 3 on the lab ``ssd``: A at
                # 1,900 of 2,745 for 35 s, the device 100 % busy at 1.3x its baseline).
                had, evidence = True, f"{self._stretched()} stretched x{self.stretch:.2f}"
            else:
                had, evidence = False, ""
            if not had:
                # No I/O completed and no stall is "no demand" (what opens B, step 7): a
                # congested device does not make an idle A short.
                why = ("the device is not congested" if not congested else
                       "it completed no I/O and shows no stall: no demand")
                notes.append(f"{g} at {go.iops:.0f} < floor {floor:g} IOPS but {why}: A's "
                             "own choice, not a miss")
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

    def _a_frac(self, cr: float, cw: float) -> float:
        """Device share A's floors take at their own costs."""
        a_frac = 0.0
        for g, floor in self.targets.protected.items():
            fr = self.a_read_share.get(g) or 0.5
            a_frac += floor * (fr * cr + (1 - fr) * cw)
        return a_frac

    def _set_ceiling(self, x: float, cr: float, cw: float, obs: Observation) -> None:
        """A was hurt at target ``x``: X recovers no higher, and in latency mode (where B's
        budget is X of the estimate) probes raise the estimate no higher than the one in
        force -- else a probe hands B what X's ceiling holds back ([Oe] evaluation 2 on the
        lab ``ssd``: a probe 9 s after a miss raised the estimate past it, and A missed
        again)."""
        self.ceiling = x if self.ceiling is None else min(self.ceiling, x)
        cap = self.lat.cap
        if self.parallel and cap is not None \
                and (self.lat.ceiling is None or cap < self.lat.ceiling):
            self.lat.set_ceiling(cap)
        self._mark_regime(cr, cw, obs)

    def _mark_regime(self, cr: float, cw: float, obs: Observation) -> None:
        """Remember the costs and mix under which A was hurt (see the regime change)."""
        self.cost_at_ceiling = (cr, cw)
        self.mix_at_ceiling = obs.r_iops / obs.iops if obs.iops > 0 else None
        self.regime_count = 0

    # -- limits ------------------------------------------------------------------------
    def _limits(self, obs: Observation, cr: float, cw: float, *, force: bool,
                jump: bool = False, dither: bool = False,
                ) -> tuple[dict[str, GroupLimit], tuple[str, ...], str]:
        p = self.params
        t = self.targets
        mn = t.b_min_iops
        a_frac = self._a_frac(cr, cw)
        catchup, self._catchup = self._catchup, 0.0
        b_frac = self.x - a_frac - catchup
        # A stretch is bounded by the level that hurt A, even if X rose since.
        self.stretch = min(self.stretch, self._stretch_limit(cr, cw))
        min_frac = sum(mn * (cr + cw) for _ in t.throttled)
        warnings = self._feasibility(a_frac, b_frac, min_frac, cr, cw)
        # A limit may always rise by ``step_up_device_frac`` of the device (at its mix).
        rise = p.step_up_device_frac / self._mix_cost(obs, cr, cw)
        grow = self.stretch
        if self.parallel:
            # Latency mode stretches the capacity estimate: the costs per I/O shrink.
            cr, cw, grow = cr / self.stretch, cw / self.stretch, 1.0
            a_frac = self._a_frac(cr, cw)
            b_frac = self.x - a_frac - catchup / self.stretch
        # Each direction is floored at b_min below, so the split itself needs no minimum.
        shares = split_budget(max(b_frac, 0.0), {g: st.busy or 0.0 for g, st in
                                                 self.groups.items()}, 0.0, p.min_share)
        out: dict[str, GroupLimit] = {}
        for g, st in self.groups.items():
            sr = st.read_share if st.read_share is not None else 0.5
            budget = shares[g] * grow
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
            st.limit = GroupLimit(self._move(st.limit.riops, want_r, force, jump, rise),
                                  self._move(st.limit.wiops, want_w, force, jump, rise))
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

    def _move(self, old: int | None, want: float, force: bool, jump: bool = False,
              rise: float = 0.0) -> int:
        """Next limit from ``old`` toward ``want``: deadband, bounded step, >= b_min;
        ``jump``: straight to ``want`` (the floors just changed). A rise may always be
        ``rise`` IOPS (``AdaptiveParams.step_up_device_frac`` of the device): from B's
        minimum, 25 % steps alone took 25 intervals to reach 500 IOPS on the lab's ``ssd``
        ([Oe] evaluation 2's last phase), where the device had 4,000 to spare."""
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
        up = old + max(math.ceil(old * p.step_up_frac), p.step_min_iops, math.floor(rise))
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

    def _decision(self, state: State, reason: str, x: float | None,
                  obs: Observation) -> Decision:
        return Decision(limits={g: st.limit for g, st in self.groups.items()},
                        x_pct=None if x is None else x * 100, state=state, reason=reason)
