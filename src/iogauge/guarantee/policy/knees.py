"""The adaptive policy's latency knees: what a knee does to the capacity estimate, the knee
episodes whose cuts did not lower the await (undone), and the capacity probe.

:class:`LatencyKnees` is a part of
:class:`~iogauge.guarantee.policy.adaptive.AdaptivePolicy` (latency mode, for devices whose
%util means nothing: [sysstat] iostat(1)), kept apart because it is one concern: it reads
and sets the policy's state declared below.
"""

from __future__ import annotations

from iogauge.guarantee.policy.estimators import KneeEpisode, _LatencyCapacity
from iogauge.guarantee.policy.idle import _Interval
from iogauge.guarantee.policy.params import AdaptiveParams
from iogauge.guarantee.policy.types import Observation, State


class LatencyKnees:
    """Latency mode's knee (:meth:`_latency_knee`), its undoing (:meth:`_undo_knees`,
    :meth:`_watch_knees`) and the capacity probe (:meth:`_probe`)."""

    params: AdaptiveParams
    lat: _LatencyCapacity
    x: float
    ceiling: float | None
    healthy: int
    knees: KneeEpisode | None
    undo_knees: bool
    undone: tuple[float, float | None] | None

    def _latency_knee(self, iv: _Interval) -> tuple[State, str]:
        """Latency mode: congested with A fine. The capacity estimate falls to what the
        device served; X stays (see :meth:`AdaptivePolicy._knee`). A knee of an episode
        whose cuts did not lower the await undoes them (:meth:`_undo_knees`).

        The ceiling the probes stay under is the estimate the episode's *first* knee found:
        the later ones are judged while the queue it found still drains (the limits act from
        the next interval; A catches up what it missed), and each lowering the ceiling to
        the last cut held B for the rest of the floors' time ([Oe] evaluation 3 on the lab
        ``ssd``: four knees at the floor step, the ceiling 5,004 -> 3,402 IOPS, B at 200 of
        the 1,013 IOPS a static limit left it for 35 s)."""
        p = self.params
        t = self.lat.normalised(iv.obs.r_iops, iv.obs.w_iops)
        ep = self.knees
        first = ep is None
        if ep is None:
            self.knees = KneeEpisode(t, self.x, self.lat.cap, self.ceiling,
                                     self.lat.ceiling, self.lat.l0_at_ceiling)
        elif self.undo_knees and t <= (1 - p.futile_knee_drop_pct / 100) * ep.t_first:
            return self._undo_knees(iv, ep, t)
        else:
            ep.knees += 1
        cap_old = self.lat.cap
        if cap_old is None:
            return State.KNEE, iv.cong_why
        if first or self.lat.ceiling is None:
            self.lat.set_ceiling(cap_old)
        self.lat.cap = max(min(cap_old, t), 1.0)
        return State.KNEE, (f"{iv.cong_why}; capacity estimate {cap_old:.0f} → "
                            f"{self.lat.cap:.0f} IOPS (what the device served), X stays "
                            f"{self.x:.1%}")

    def _undo_knees(self, iv: _Interval, ep: KneeEpisode, t: float) -> tuple[State, str]:
        """Knee cuts took ``futile_knee_drop_pct`` off the load and the await is still past
        the knee, A at its floor all along: the await is this workload's, not a queue B's
        limit controls (see :class:`KneeEpisode`). X, the capacity estimate and the
        ceilings go back to where the first knee found them, and later knees are judged
        against this await -- until A misses or the floors change."""
        ratio = self.lat.latency_ratio(iv.obs.await_ms, t) or 0.0
        ref = self.lat.reference_name(t)
        self.undone = (self.x, self.lat.cap)
        self.x = ep.x_before
        self.lat.cap = ep.cap_before
        self.ceiling = ep.ceiling_before
        self.lat.ceiling = ep.lat_ceiling_before
        self.lat.l0_at_ceiling = ep.l0_at_ceiling_before
        self.lat.floor_ms = iv.obs.await_ms
        self.knees = None
        self.healthy = 0
        cap = f"{self.lat.cap:.0f} IOPS" if self.lat.cap is not None else "unknown"
        return State.KNEE_UNDONE, (
            f"await {iv.obs.await_ms:.2f} ms still {ratio:.1f}x {ref} after "
            f"{ep.knees} knee cut{'s' if ep.knees > 1 else ''} took the load from "
            f"{ep.t_first:.0f} to {t:.0f} IOPS "
            f"(-{1 - t / ep.t_first:.0%}), A at its floor: not a queue B's limit controls; "
            f"cuts undone (X {self.x:.1%}, capacity estimate {cap}), the knee now judged "
            f"against {iv.obs.await_ms:.2f} ms")

    def _watch_knees(self, iv: _Interval, state: State) -> None:
        """End the knee episode when the knees' cuts worked (``recover_after`` calm intervals)
        or A missed (then the await knee cuts could not lower is forgotten too: a miss
        says the device's queue does reach A; and knees are no longer undone until the
        floors change, if it came after an undo)."""
        if state is State.PROTECT:
            if self.undone is not None:
                # The undone cuts were A's protection after all: back to where they were.
                x_cut, cap_cut = self.undone
                self.x = min(self.x, x_cut)
                if cap_cut is not None and self.lat.cap is not None:
                    self.lat.cap = min(self.lat.cap, cap_cut)
                self.undo_knees, self.undone = False, None
            self.knees = None
            self.lat.floor_ms = None
            return
        if self.knees is None or state is State.KNEE:
            return
        self.knees.calm = 0 if iv.congested else self.knees.calm + 1
        if self.knees.calm >= self.params.recover_after:
            self.knees = None

    def _probe(self, obs: Observation) -> bool:
        p = self.params
        served = self.lat.normalised(obs.r_iops, obs.w_iops)
        ratio = self.lat.latency_ratio(obs.await_ms, served)
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
        # A probe claims at most a step beyond what the device served at target X: with A
        # short of its floor (idle under --reserve-idle) the device served X's budget less
        # A's unused share, and an estimate raised past that would hand B A's reservation
        # (on the lab's ssd B alone got 97 % of the device with A's floor 74 % reserved).
        new = min(new, served / self.x * (1 + p.probe_step))
        if self.lat.fit is not None:
            # Not past what the fitted curve says the device can do at all.
            new = min(new, self.lat.fit.c)
        if new < self.lat.cap + 1.0:  # a fraction of an IOPS is the fit's rounding
            return False
        self.lat.cap = new
        return True
