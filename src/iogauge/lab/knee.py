"""The proportional-limit busy rate ([Oe] §3): fit a line to %util against IOPS and find
where the measured points leave it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class KneeFit:
    """The straight line and where the points leave it.

    Attributes:
        intercept_pct, slope_pct_per_iops: util = intercept + slope * IOPS.
        knee_util_pct: the proportional-limit busy rate as [Oe] §3 defines it ("iops が
            線形増加する上限 %util 値", the highest %util up to which IOPS grows linearly):
            the %util of the last measured point within ``edge_tol`` of the line before
            the first one more than ``tol`` below it (None: no point at or above
            ``fit_lo``). A measured point, not an interpolation: where the curve falls off
            a cliff (the backup: "80-85 %, then 2-3 IOPS more and %util is at 100 %") the
            knee lies between it and ``beyond_util_pct``, and the sweep's bisection on
            the cap narrows that gap to one IOPS.
        knee_iops: IOPS of that point (None likewise).
        beyond_util_pct: %util of the first measured point above the knee (None: the knee
            is the highest point measured).
        points_fitted: how many points the line was fitted to.
        tol_util_pct: %util where IOPS first falls short of the line by ``tol``,
            interpolated between the points either side (None: never). Beyond a cliff
            whose plateau lies less than ``tol`` below the line (the model's file share
            on A+B: ~6 % at 100 %) this is high up the wall, which is why the knee is the
            line's last point rather than this crossing.
        tol_iops: IOPS there (None likewise).
    """

    intercept_pct: float
    slope_pct_per_iops: float
    knee_util_pct: float | None
    knee_iops: float | None
    points_fitted: int
    beyond_util_pct: float | None = None
    tol_util_pct: float | None = None
    tol_iops: float | None = None

    @property
    def busy_per_iops_ms(self) -> float:
        """Slope as milliseconds of busy time per I/O (the paper's svctm = util/IOPS)."""
        return self.slope_pct_per_iops * 10.0

    def shortfall(self, iops: float, util_pct: float) -> float:
        """How far ``iops`` falls short of the line at ``util_pct`` (0.05 = 5 %)."""
        on_line = (util_pct - self.intercept_pct) / self.slope_pct_per_iops
        return 1.0 - iops / on_line if on_line > 0 else 0.0


#: Shortfall from the line within which a point counts as linear for the knee (the
#: sweeps' points in the linear range scatter by up to ~1.2 %).
EDGE_TOL = 0.02


def find_knee(points: Sequence[tuple[float, float]], *, tol: float = 0.05,
              fit_lo: float = 15.0, fit_hi: float = 70.0,
              edge_tol: float = EDGE_TOL) -> KneeFit:
    """Fit util = a + b * IOPS to the (iops, util_pct) points with util in
    [fit_lo, fit_hi] and find where the points leave the line (:class:`KneeFit`)."""
    fit = [(x, u) for x, u in points if fit_lo <= u <= fit_hi and x > 0]
    if len(fit) < 2:
        raise ValueError(f"need at least 2 points between {fit_lo} and {fit_hi} %util to "
                         f"fit a line, got {len(fit)}")
    xs = np.array([p[0] for p in fit])
    us = np.array([p[1] for p in fit])
    b, a = np.polyfit(xs, us, 1)
    if b <= 0:
        raise ValueError("%util does not grow with IOPS over the fitted range")
    line = KneeFit(float(a), float(b), None, None, len(fit))
    ordered = [(x, u) for x, u in sorted(points, key=lambda p: (p[1], p[0])) if u >= fit_lo]
    prev: tuple[float, float, float] | None = None  # (util, iops, shortfall)
    edge: tuple[float, float] | None = None  # (util, iops) of the last point on the line
    cross: tuple[float, float] | None = None
    for x, u in ordered:
        s = line.shortfall(x, u)
        if s > tol:
            if prev is None:
                cross = (u, x)
            else:
                u0, x0, s0 = prev
                f = (tol - s0) / (s - s0) if s != s0 else 0.0
                cross = (u0 + f * (u - u0), x0 + f * (x - x0))
            break
        if s <= edge_tol:
            edge = (u, x)
        prev = (u, x, s)
    if cross is not None:
        line = replace(line, tol_util_pct=cross[0], tol_iops=cross[1])
    if edge is None:
        return replace(line, beyond_util_pct=ordered[0][1] if ordered else None)
    above = [u for _x, u in ordered if u > edge[0]]
    return replace(line, knee_util_pct=edge[0], knee_iops=edge[1],
                   beyond_util_pct=min(above) if above else None)


__all__ = ["EDGE_TOL", "KneeFit", "find_knee"]
