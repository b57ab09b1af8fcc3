"""The device's latency-vs-load curve, for the adaptive policy's latency method.

A fixed multiple of the lowest await ("the knee at 2x the baseline") puts the knee where the
device's own curve puts it only on a device that serves in parallel: flat until the channels
are busy, then steep. A device whose await climbs from light load on (one server, or an
emulation bound by one CPU: the lab's ``ssd`` at 2-8k IOPS) reaches twice its light-load
await at half its throughput, so the knee held B to about half of what the device had left
-- and every knee's cut lowered the load, the await, and with it the baseline, so the next
knee came at a lower load still ([Oe] evaluation 2 on the lab ``ssd``: B 1,776 of the
4,104 IOPS a static limit left it).

:class:`LatencyCurve` fits the same M/M/1-like curve ``L = S / (1 - t/C)`` as the
analysis' latency-knee capacity (:mod:`iogauge.analysis.capacity`), over the policy's recent
intervals: ``1/L = 1/S - t/(S C)`` is a straight line in the load ``t``, and its zero ``C``
the load at which the queue grows without bound. The policy takes ``C`` as what the device
can do for this mix -- as the util method takes 100 % busy ([Oe] §3) -- where the fit holds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

#: Fewest intervals a fit uses (as the analysis' MIN_LATENCY_POINTS).
MIN_POINTS = 8
#: The loads must span this ratio (highest / lowest): a line through one load is no curve.
MIN_LOAD_RANGE = 1.3
#: The highest load seen must be at least this share of the asymptote: extrapolating far
#: beyond the data is a guess (the analysis' MIN_RHO_OBSERVED).
MIN_RHO_OBSERVED = 0.3
#: Coefficient of determination below which the curve is not M/M/1-like (the analysis'
#: MIN_FIT_R2).
MIN_FIT_R2 = 0.5


@dataclass(frozen=True)
class CurveFit:
    """``L = S / (1 - t / C)`` fitted to recent intervals."""

    s_ms: float  # await at no load
    c: float  # asymptote: normalised IOPS at which the queue grows without bound
    r2: float
    points: int

    def describe(self) -> str:
        return (f"the await-vs-load curve of the last {self.points} intervals, "
                f"L = {self.s_ms:.2f} ms / (1 - IOPS/{self.c:.0f}) (r2 {self.r2:.2f})")


class LatencyCurve:
    """The recent (normalised load, await) points of a device and their M/M/1 fit."""

    def __init__(self, window: int) -> None:
        self.points: deque[tuple[float, float]] = deque(maxlen=window)

    def add(self, t: float, await_ms: float) -> None:
        if t > 0 and await_ms > 0:
            self.points.append((t, await_ms))

    def fit(self) -> CurveFit | None:
        """The fitted curve, or None where the points do not pin one down: too few, too
        narrow a load range, an await that does not fall in 1/L as the load grows, a poor
        fit, or an asymptote far beyond the loads seen."""
        n = len(self.points)
        if n < MIN_POINTS:
            return None
        ts = [t for t, _ in self.points]
        ys = [1.0 / lat for _, lat in self.points]
        t_lo, t_hi = min(ts), max(ts)
        if t_hi < MIN_LOAD_RANGE * t_lo:
            return None
        mt, my = sum(ts) / n, sum(ys) / n
        sxx = sum((t - mt) ** 2 for t in ts)
        sxy = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True))
        syy = sum((y - my) ** 2 for y in ys)
        if sxx <= 0 or syy <= 0:
            return None
        slope = sxy / sxx
        icpt = my - slope * mt
        if slope >= 0 or icpt <= 0:
            return None
        r2 = sxy * sxy / (sxx * syy)
        c = -icpt / slope
        if r2 < MIN_FIT_R2 or c < t_hi or t_hi < MIN_RHO_OBSERVED * c:
            return None
        return CurveFit(1.0 / icpt, c, r2, n)
