"""What the adaptive policy learns about the device: costs from %util, capacity from latency."""

from __future__ import annotations

from dataclasses import dataclass

from iogauge.guarantee.policy.budget import _clamp, _ewma, _read_share
from iogauge.guarantee.policy.curve import CurveFit, LatencyCurve
from iogauge.guarantee.policy.params import AdaptiveParams
from iogauge.guarantee.policy.types import UNLIMITED, GroupLimit, GroupObservation


class _UtilCosts:
    """Read and write cost (device fraction per IOPS) learnt from %util, for devices where
    %util is a capacity measure (one request at a time: a single spindle; [iostats]).

    Keeps exponentially weighted sums of the regression ``u = cr·r + cw·w`` (u = %util/100,
    through the origin: an idle device is 0 % busy). When reads and writes have varied
    independently enough the 2x2 normal equations give separate costs; otherwise both get
    the single cost: [Oe]'s busy_per_iops ``u / (r + w)``, smoothed as the ratio of the
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
    is queueing: the capacity is at most what it delivered. Below ``probe·l0`` with B using
    its whole allowance, the estimate may grow by ``probe_step`` (bounded by ``ceiling``, the
    estimate the first knee of the last knee episode found or the lowest a miss of A
    happened under, and by the fitted curve's asymptote) — probing stops well before the
    knee, so it never queues A.

    Knee and probe are judged against :meth:`reference`: the highest of the baseline, the
    await that knee cuts could not lower (``floor_ms``, see :class:`KneeEpisode`) and, where
    the recent intervals fit one, the await-vs-load curve's await at the interval's load
    (:mod:`~iogauge.guarantee.policy.curve`).
    """

    def __init__(self, p: AdaptiveParams, hint: float | None) -> None:
        self.p = p
        self.l0: float | None = None
        self.cap: float | None = hint
        self.ceiling: float | None = None
        self.l0_at_ceiling: float | None = None
        #: The await knee cuts could not lower (None: none found since the floors changed
        #: or A last missed).
        self.floor_ms: float | None = None
        self.curve = LatencyCurve(p.latency_curve_window)
        #: The curve fitted after the latest interval (None: the points do not fit one).
        self.fit: CurveFit | None = None

    def set_ceiling(self, cap: float) -> None:
        """Probes stay below ``cap`` until the workload changes (a baseline that moved by
        ``regime_change_ratio`` from the one seen here) or the floors do."""
        self.ceiling = cap
        self.l0_at_ceiling = self.l0

    def on_curve_ms(self, t: float | None) -> float | None:
        """The fitted curve's await at load ``t``; None without a fit, or past the middle
        between the load the policy aims at (X of the asymptote) and the asymptote: there
        the await grows without bound, and the baseline's knee judges."""
        fit = self.fit
        if fit is None or t is None:
            return None
        x_top = self.p.x_top_pct(True) / 100
        if t >= (1.0 + x_top) / 2 * fit.c:
            return None
        return fit.s_ms / (1.0 - t / fit.c)

    def reference(self, t: float | None = None) -> float | None:
        """The await the knee and the probe are multiples of, at load ``t``."""
        if self.l0 is None:
            return None
        return max(self.l0, self.floor_ms or 0.0, self.on_curve_ms(t) or 0.0)

    def reference_name(self, t: float | None = None) -> str:
        ref = self.reference(t)
        curve = self.on_curve_ms(t)
        if curve is not None and ref == curve and self.fit is not None:
            return (f"{curve:.2f} ms, the await at {t:.0f} IOPS on "
                    f"{self.fit.describe()}")
        if self.floor_ms is not None and ref == self.floor_ms:
            return f"the await knee cuts could not lower, {ref:.2f} ms"
        return f"the baseline {ref or 0.0:.2f} ms"

    def observe_point(self, t: float, await_ms: float) -> None:
        """Add an interval to the curve. A steady load pins no curve down, but does not
        contradict the last one either: that fit stays until a new one replaces it. A knee
        judged against the curve does not drop it: the intervals that follow refit it, and
        without it the knee would be judged against the lowest await again (on the lab
        ``ssd``, [Oe] evaluation 2: 0.37 ms, A alone at 4,265 IOPS with B at 250 -- three
        knees then cut B from 1,600 IOPS to 250 while A kept its floor)."""
        self.curve.add(t, await_ms)
        fit = self.curve.fit()
        if fit is not None:
            self.fit = fit

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

    def resolved(self, await_ms: float | None, ios: float) -> float | None:
        """``await_ms`` if the ``ios`` I/Os it averages pin it down to
        ``latency_resolution`` of the baseline (of itself before there is one), else None:
        the kernel's I/O time is whole milliseconds, so it is uncertain by 2 ms / ios
        (``AdaptiveParams.latency_resolution``)."""
        if await_ms is None or ios <= 0:
            return None
        ref = self.l0 if self.l0 is not None else await_ms
        return await_ms if 2.0 / ios <= self.p.latency_resolution * ref else None

    def latency_ratio(self, await_ms: float | None, t: float | None = None) -> float | None:
        ref = self.reference(t)
        if await_ms is None or ref is None:
            return None
        return await_ms / ref

    def costs(self) -> tuple[float, float] | None:
        if self.cap is None:
            return None
        return 1.0 / self.cap, self.p.write_cost_factor / self.cap


@dataclass
class KneeEpisode:
    """The latency knees since the device was last calm, and what stood before the first.

    A knee trims B because the device queues. If later knees find the await still past the
    knee after B's cuts took ``futile_knee_drop_pct`` off the device's load -- A at its floor
    throughout (a miss ends the episode) -- the await was not a queue B's limit controls
    (on the lab's ``ssd``, [Oe] evaluation 3, 1.5-2.3 ms at 1,070-2,880 IOPS alike, while
    each knee cut X and the capacity estimate again). Those cuts are undone.
    """

    t_first: float  # normalised IOPS at the first knee
    x_before: float
    cap_before: float | None
    ceiling_before: float | None
    lat_ceiling_before: float | None
    l0_at_ceiling_before: float | None
    knees: int = 1
    calm: int = 0  # intervals since the last knee without congestion


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


def learn_mix(st: _GroupState, go: GroupObservation, costs: tuple[float, float] | None,
              p: AdaptiveParams) -> None:
    """Move a group's read share (of its busy allowance) toward what it needs.

    A direction at its limit (>= 95 %) while the other has clear slack (<= 80 % used)
    for ``recover_after`` intervals in a row gains ``mix_step`` of the share — but the
    slack direction keeps 125 % of what it used, so the move cannot overshoot into
    pinning it. Otherwise the share follows the observed mix (EWMA). The two thresholds
    and the persistence are the hysteresis that keeps a demand sitting right at a limit
    from flipping the split every interval.
    """
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
