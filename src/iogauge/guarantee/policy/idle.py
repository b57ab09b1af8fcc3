"""The adaptive policy's work conservation ([Oe]'s reservation made work conserving, as
Ceph mClock's reservations and the kernel's io.latency/io.cost are): while A shows no
demand B's limits open; A's first sign of demand reserves its floor again.

:class:`WorkConservation` is a part of
:class:`~iogauge.guarantee.policy.adaptive.AdaptivePolicy`, kept apart because it is one
concern: it reads and sets the policy's state declared below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from iogauge.guarantee.policy.budget import _whole, split_budget
from iogauge.guarantee.policy.estimators import _GroupState
from iogauge.guarantee.policy.params import AdaptiveParams
from iogauge.guarantee.policy.types import (
    UNLIMITED,
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    State,
    Targets,
)


@dataclass
class _Interval:
    """One interval as judged by :meth:`AdaptivePolicy.step` (costs as device fraction per
    IOPS; ``demand``: A showed demand; ``open_now``: B's limits open this interval)."""

    obs: Observation
    cr: float
    cw: float
    congested: bool
    cong_why: str
    miss: bool
    short_frac: float
    a_why: str
    b_constrained: bool
    drain: bool
    demand: bool
    open_now: bool


def _lower(a: int | None, b: int | None) -> int | None:
    """The lower of two limits (None: no limit)."""
    return b if a is None else a if b is None else min(a, b)


def _fmt(limit: int | None) -> str:
    return "unlimited" if limit is None else str(limit)


class WorkConservation:
    """Idle A -> B opens (:meth:`_open`); A's demand back -> floor reserved (:meth:`_wake`)."""

    targets: Targets
    params: AdaptiveParams
    groups: dict[str, _GroupState]
    x: float
    opened: bool
    healthy: int
    a_idle: int
    a_streak: int
    futile: int
    a_at_miss: float | None
    _catchup: float
    _drain: bool
    _retargeted: bool
    _grace: bool
    _grace_why: str
    _held_a: dict[str, GroupLimit]
    # AdaptivePolicy's methods this part calls
    _reset_stretch: Callable[[], None]
    _mix_cost: Callable[[Observation, float, float], float]
    _met_at: Callable[[str, float, float], float]


    def _a_demand(self, obs: Observation) -> bool:
        """A protected group showed demand: a completed I/O, a known demand, or (cgroup v2)
        a task stalled on I/O -- the one sign of I/O queued but not yet done (the kernel
        keeps no per-cgroup in-flight count)."""
        return any(self._group_demand(obs.group(g), obs.interval_s)
                   for g in self.targets.protected)

    def _group_demand(self, go: GroupObservation, interval_s: float) -> bool:
        """One protected group showed demand (see :meth:`_a_demand`)."""
        if go.iops * interval_s >= 0.5 or (go.demand_iops or 0.0) > 0.0:
            return True
        return go.stall_pct is not None and go.stall_pct >= self.params.idle_stall_pct

    def _open(self, iv: _Interval) -> Decision:
        """A shows no demand: its floor is not reserved; B's limits open by
        ``open_step`` a step (the first to at least all of X), and are lifted once past
        ``open_lift_x`` x the device's
        capacity for that direction (the kernel then gives B whatever the device does; both
        directions go together)."""
        first = not self.opened
        if first:
            self.opened = True
            self._reset_stretch()
            self.healthy = 0
            self._catchup = 0.0
            self._drain = False
        out: dict[str, GroupLimit] = {}
        # The first step gives B at least all of X (nothing kept for A): a limit the
        # policy had cut far down (a congested SSD, B at its minimum) would otherwise take
        # a dozen doublings to open.
        shares = split_budget(self.x, {g: st.busy or 0.0 for g, st in self.groups.items()},
                              0.0, self.params.min_share)
        for g, st in self.groups.items():
            st.carry_r = st.carry_w = 0.0
            sr = st.read_share if st.read_share is not None else 0.5
            r = self._opened(st.limit.riops, iv.cr, shares[g] * sr / iv.cr)
            w = self._opened(st.limit.wiops, iv.cw, shares[g] * (1 - sr) / iv.cw)
            # One direction lifted: the other too (a limit B does not reach is not written
            # again and again on its way up).
            st.limit = UNLIMITED if r is None or w is None else GroupLimit(r, w)
            out[g] = st.limit
        shown = ", ".join(f"{g} r {_fmt(lim.riops)} w {_fmt(lim.wiops)}"
                          for g, lim in out.items())
        why = (f"A showed no demand for {self.a_idle} intervals (no I/O completed"
               + (", no stall" if self._stall_seen(iv.obs) else "")
               + f"): its floor is not reserved, B opens to {shown}")
        mix_cost = self._mix_cost(iv.obs, iv.cr, iv.cw)
        return Decision(limits=out, x_pct=self.x * 100, state=State.OPEN, reason=why,
                        busy_per_iops=mix_cost * 100, capacity_iops=1.0 / mix_cost)

    def _opened(self, old: int | None, cost: float, whole_x: float) -> int | None:
        """One opening step of a limit: ``open_step`` up, at least to ``whole_x`` (this
        direction's share of all of X, in IOPS); None once past ``open_lift_x``."""
        p = self.params
        if old is None:
            return None
        new = max(old + p.step_min_iops, math.ceil(old * (1 + p.open_step)),
                  _whole(whole_x, self.targets.b_min_iops))
        return None if new * cost >= p.open_lift_x else self.targets.on_grid(new)

    def _stall_seen(self, obs: Observation) -> bool:
        return any(obs.group(g).stall_pct is not None for g in self.targets.protected)

    def _wake(self, iv: _Interval) -> tuple[State, str]:
        """A's demand is back while B is open: X's budget for B at once (past the step
        bounds), and A is not judged on this interval nor the next (B's opened queue
        drains meanwhile)."""
        self.opened = False
        self.healthy = 0
        self.a_streak = 0
        self.futile, self.a_at_miss = 0, None
        self._retargeted = True
        self._grace = True
        self._grace_why = "measured while B's opened queue drained"
        a_now = ", ".join(f"{g} {iv.obs.group(g).iops:.0f} IOPS"
                          + ("" if iv.obs.group(g).stall_pct is None
                             else f" (stall {iv.obs.group(g).stall_pct:.0f} %)")
                          for g in self.targets.protected)
        return State.WAKE, (f"A's demand is back ({a_now}): its floor is reserved again (B "
                            "no higher than when A last had its floor)")

    def _a_met(self, obs: Observation) -> bool:
        return all(obs.group(g).iops >= self._met_at(g, floor, obs.interval_s)
                   for g, floor in self.targets.protected.items())

    def _wake_limits(self, limits: dict[str, GroupLimit]) -> dict[str, GroupLimit]:
        """X's budget for B, but no more than the limits under which A last had its floor
        (where the device gives less than X's budget says -- a parallel device whose knee
        estimate is high -- the wake-up does not have to find that again)."""
        for g, lim in limits.items():
            held = self._held_a.get(g)
            if held is None:
                continue
            st = self.groups[g]
            st.limit = GroupLimit(_lower(lim.riops, held.riops), _lower(lim.wiops, held.wiops))
            limits[g] = st.limit
        return limits
