"""The adaptive policy's stretch: B's budget past X while A keeps its floor (work
conservation judged by A's delivered IOPS, not by the device's busy rate or await).

:class:`Stretch` is a part of :class:`~iogauge.guarantee.policy.adaptive.AdaptivePolicy`,
kept apart because it is one concern: it reads and sets the policy's state declared below.

What a stretch multiplies depends on the capacity method. Util mode: B's budget under X
(%util = 100 says the spindle is always busy, not whether A still gets its floor). Latency
mode: the capacity estimate, so that B's budget is X of the stretched estimate less A's
floors -- the knee is where the device starts queueing, and a device whose await grows
from light load on (one server: the lab's ``ssd``) reaches it long before A is short; a
stretch of B's budget did nothing there where A's floors took all of X of the estimate
([Oe] evaluation 2: B at 1 IOPS for 40 s, A at its floor, the device 25-40 % busy). A
stretch that hurt A bounds later ones ``stretch_backoff`` steps below its level; in latency
mode it steps back ``latency_stretch_backoff`` steps at once
(:meth:`Stretch._withdraw_stretch`).
"""

from __future__ import annotations

from collections.abc import Callable

from iogauge.guarantee.policy.estimators import _GroupState, _LatencyCapacity
from iogauge.guarantee.policy.idle import _Interval
from iogauge.guarantee.policy.params import AdaptiveParams
from iogauge.guarantee.policy.types import Observation, State


class Stretch:
    """Growing (:meth:`_stretch`), bounding (:meth:`_stretch_limit`) and withdrawing or
    stepping back (:meth:`_withdraw_stretch`) the stretch past X."""

    params: AdaptiveParams
    parallel: bool
    lat: _LatencyCapacity
    x: float
    healthy: int
    a_streak: int
    stretch: float
    stretch_budget_cap: float | None
    groups: dict[str, _GroupState]
    _catchup: float
    _drain: bool
    # AdaptivePolicy's methods this part calls
    _a_frac: Callable[[float, float], float]
    _mark_regime: Callable[[float, float, Observation], None]

    def _reset_stretch(self) -> None:
        self.stretch = 1.0
        self.a_streak = 0
        self.stretch_budget_cap = None

    def _stretched(self) -> str:
        """What the stretch multiplies, as the decisions' reasons name it."""
        return "the capacity estimate" if self.parallel else "B's budget"

    def _stretch_step(self) -> float:
        p = self.params
        return p.latency_stretch_step if self.parallel else p.stretch_step

    def _stretch_backoff(self) -> int:
        p = self.params
        return p.latency_stretch_backoff if self.parallel else p.stretch_backoff

    def _stretch_base(self, cr: float, cw: float) -> float:
        """What a stretch multiplies: B's budget under X (util mode, device share at today's
        costs), or the capacity estimate (latency mode, normalised IOPS)."""
        if self.parallel:
            return self.lat.cap or 0.0
        return self.x - self._a_frac(cr, cw)

    def _stretch(self, b_constrained: bool, cr: float, cw: float) -> bool:
        """Stretch one step (``stretch_step``, ``latency_stretch_step``) if A has earned it
        and B would use it; whether it moved."""
        p = self.params
        step = self._stretch_step()
        hurt = self.stretch_budget_cap is not None
        need = p.restretch_after if hurt and self.stretch <= 1.0 else p.stretch_after
        if step <= 0 or not b_constrained or self.a_streak < need:
            return False
        new = min(self._stretch_limit(cr, cw), self.stretch * (1 + step))
        if new <= self.stretch + 1e-9:
            return False
        self.stretch = new
        return True

    def _stretch_limit(self, cr: float, cw: float) -> float:
        """Largest stretch allowed now: ``stretch_max``, and once a stretch hurt A, the one
        at which it reaches ``stretch_budget_cap`` (in the units of :meth:`_stretch_base`:
        the capacity the stretch may claim holds when the estimate moves)."""
        top = self.params.stretch_max
        cap = self.stretch_budget_cap
        if cap is None:
            return top
        base = self._stretch_base(cr, cw)
        if base <= 0:
            return 1.0
        return min(top, max(1.0, cap / base))

    def _withdraw_stretch(self, iv: _Interval) -> tuple[State, str]:
        """The stretch hurt A. Util mode: back to X's budget, under which A was at its floor,
        at once (X itself was not at fault). Latency mode: ``latency_stretch_backoff``
        steps below the level B's limits had reached -- X's budget there is under a knee
        that says little about A (on the lab ``ssd`` the knees that followed each
        withdrawal cut the estimate to A's floor, and B climbed back from its minimum for
        15 s of 40). Later stretches stop at that level, until the floors or the workload
        change; in both modes B gives up A's shortfall for this interval."""
        old = self.stretch
        level = self._level_in_force(iv.cr, iv.cw)
        back = level / (1 + self._stretch_step()) ** self._stretch_backoff()
        self.stretch_budget_cap = max(self._stretch_base(iv.cr, iv.cw), 0.0) * back
        self.stretch = back if self.parallel and back > 1.0 else 1.0
        self._catchup = iv.short_frac
        self._drain = True
        self._mark_regime(iv.cr, iv.cw, iv.obs)
        self.healthy = 0
        short = f"less A's shortfall ({iv.short_frac:.1%}) for this interval"
        if self.stretch > 1.0:
            return State.PROTECT, (
                f"{iv.a_why}; the capacity estimate's stretch back from x{level:.2f} (what "
                f"B's limits had reached) to x{self.stretch:.2f}, {short}; later stretches "
                "stop there until the floors or the workload change")
        cap = self._stretch_limit(iv.cr, iv.cw)
        of = "the capacity estimate" if self.parallel else "today's X"
        later = (f"later stretches stop at x{cap:.2f} (of {of})" if cap > 1.0
                 else "no more stretch")
        return State.PROTECT, (f"{iv.a_why}; {self._stretched()} back from x{old:.2f} to "
                               f"X's {short}; "
                               f"{later} until the floors or the workload change")

    def _level_in_force(self, cr: float, cw: float) -> float:
        """The stretch the limits in force had reached when A missed. Util mode: the
        stretch itself. Latency mode: the limits climb at most ``step_up_frac`` an interval,
        so a stretch of the estimate can run ahead of them; A missed under the limits, not
        under the target."""
        if not self.parallel or self.x <= 0:
            return self.stretch
        b_frac = 0.0
        for st in self.groups.values():
            if st.limit.riops is None or st.limit.wiops is None:
                return self.stretch
            b_frac += st.limit.riops * cr + st.limit.wiops * cw
        return max(1.0, min(self.stretch, (b_frac + self._a_frac(cr, cw)) / self.x))
