"""How much more load a device takes: [Oe]'s busy-per-IOPS model and a latency knee.

Two methods, chosen by how the device serves requests ([sysstat] on %util; [Oe]):

``util-linear`` -- one-at-a-time devices (a single spindle). [Oe] §3 observed that %util
    grows *linearly* with IOPS up to the
    **proportional-limit busy rate** (比例限界 busy 率, the knee: 80-95 % in their
    workloads), then non-linearly, and that 100 % busy is the maximum. The slope of the
    linear part, ``busy_per_iops`` = %util / (r/s + w/s), is constant for a workload mix, so
    the IOPS at 100 % busy follows by proportion. We fit util = k x IOPS through the origin
    over the interval rows (idle intervals left out), find where the points leave the line
    (:func:`_find_knee`), and take the maximum from the observed plateau when the data
    reached saturation, else by extrapolation (said so in the notes).

``latency-knee`` -- devices that serve requests in parallel (SSD, NVMe, RAID, dm/md, cloud
    volumes), where %util reaches 100 % long before the device is saturated. Bin the
    intervals by IOPS, take the median response time per bin, find the throughput where it
    climbs to twice the low-load baseline, and fit the M/M/1-like curve L = S / (1 - X/Xmax)
    (linear as 1/L = 1/S - X/(S Xmax)) whose asymptote ``Xmax`` is the maximum.

Either way ``busy_per_iops`` (and hence the maximum) holds for the *observed mix* only:
[Oe] measured 239 IOPS for a file-share mix and 65 IOPS for a backup mix on the same
array (3.7x), and -30 % when two regions were accessed at once. The estimate is for
"more of the same workload".

Everything here is vectorised numpy over the device's rows (a day of 1 s samples is 86,400
points) and never raises on odd data: too few points, a constant load, all-null %util give
``method="none"`` (or the other method) with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.analysis.attributes import iops_expr
from iogauge.analysis.points import F64, Points, device_points
from iogauge.analysis.service_model import decide
from iogauge.analysis.types import CapacityEstimate

if TYPE_CHECKING:
    from iogauge.analysis.context import DeviceContext

#: %util at or above which an interval counts as saturated (iostat rounds to 0.01 and a
#: saturated device shows 99.x-100 %).
SATURATED_UTIL_PCT = 99.0
#: Fewest non-idle intervals for a util-vs-IOPS fit.
MIN_UTIL_POINTS = 3
#: Fewest non-idle intervals with a response time for a latency knee.
MIN_LATENCY_POINTS = 8
#: Fewest populated IOPS bins for a latency knee (a curve needs a load range).
MIN_LATENCY_BINS = 3
#: Points at or below this %util form the reference line: [Oe]'s knees lie at 80-95 %,
#: so every workload it measured was linear below half busy.
REFERENCE_UTIL_PCT = 50.0
#: Width of the %util bins in which departures from the line are judged (percentage points).
UTIL_BIN_PCT = 5.0
#: Relative departure from the line that counts as non-linear, at least (a few % is the
#: scatter of a real device's service time: [Oe] quotes 0.78 % drift of svctm between
#: 80 and 160 IOPS) and at most (beyond that noise hides any knee).
MIN_TOLERANCE = 0.04
MAX_TOLERANCE = 0.25
#: A knee needs this many intervals off the line above it, and this share of them: fewer
#: are stray intervals (a burst of another workload mix, a host stall), not a pattern.
MIN_DEPARTED_POINTS = 5
MIN_DEPARTED_SHARE = 0.005
#: A bend is a knee only when IOPS grow at most this share as fast per % busy above it as
#: below (else a straight line describes the data as well).
BEND_MAX_SLOPE_SHARE = 0.9
#: Grid of candidate knees (percentage points of %util) for the two-piece fit.
HINGE_GRID_PCT = 0.25
#: Response times below this (ms) are no measurement of a device (1 us).
MIN_LATENCY_MS = 1e-3
#: Latency knee: the response time at which load "starts to hurt", as a multiple of the
#: low-load baseline (for an M/M/1 server L = S/(1-rho): twice S at rho = 0.5).
LATENCY_KNEE_FACTOR = 2.0
#: Intervals below this share of the peak IOPS are left out of the latency curve.
MIN_LOAD_SHARE = 0.02
#: Bins of the IOPS range for the latency curve.
LATENCY_BINS = 12
#: The fitted asymptote is trusted only when the observed load reached this share of it
#: (below, latency barely moved and the asymptote is an extrapolation of noise).
MIN_RHO_OBSERVED = 0.3
#: Coefficient of determination below which the util-vs-IOPS line gives no maximum.
MIN_FIT_R2 = 0.5
#: Confidence multiplier when it is unknown whether %util measures capacity.
UNKNOWN_KIND_FACTOR = 0.7
#: Relative difference of busy_per_iops between small- and large-request intervals from
#: which the notes warn that the service time depends on the size mix ([Oe] §4).
SIZE_DRIFT_REL = 0.15


def _current_iops(dev: DeviceContext) -> float | None:
    """The load headroom is measured from: the busiest window's mean IOPS."""
    w = dev.windows
    if w.height == 0:
        return None
    cols = ("iops", "r_iops", "w_iops", "d_iops")
    missing = [c for c in cols if c not in w.columns]
    if missing:
        w = w.with_columns([pl.lit(None, dtype=pl.Float64).alias(c) for c in missing])
    peak = w.select(iops_expr().max()).item()
    return None if peak is None else float(peak)


def _with_headroom(est: CapacityEstimate, current: float | None) -> CapacityEstimate:
    est.current_iops = current
    if est.max_iops is not None and current is not None and est.max_iops > 0:
        est.headroom_iops = max(0.0, est.max_iops - current)
        # 100 x h / max can round to 100.00000000000001 when nothing is used (h == max)
        est.headroom_pct = min(100.0, 100.0 * est.headroom_iops / est.max_iops)
    return est


def _wls_origin(x: F64, y: F64, w: F64, mask: npt.NDArray[np.bool_] | None = None) -> float:
    """Weighted least-squares slope of y = k x through the origin (over ``mask``).

    The mask multiplies the weights rather than indexing: a boolean-indexed copy of three
    86,400-point arrays costs more than the fit."""
    wx = w * x if mask is None else w * x * mask
    # Sums of products rather than np.dot: a BLAS call on 86,400 points costs ~8 ms on a
    # busy 2-vCPU machine (thread hand-off), the plain reduction a tenth of that.
    den = float((wx * x).sum())
    return float((wx * y).sum()) / den if den > 0 else math.nan


def _r2(y: F64, pred: F64, w: F64) -> float | None:
    """Weighted coefficient of determination (a zero weight leaves a point out); None when
    y does not vary (constant load)."""
    wsum = float(np.sum(w))
    if wsum <= 0:
        return None
    ybar = float(np.sum(w * y)) / wsum
    ss_tot = float(np.sum(w * (y - ybar) ** 2))
    if ss_tot <= 1e-9 * max(1.0, float(np.sum(w * y * y))):
        return None
    return 1.0 - float(np.sum(w * (y - pred) ** 2)) / ss_tot


def _bad_suffix_start(bin_ids: npt.NDArray[np.int64], bad: npt.NDArray[np.bool_]) -> int | None:
    """The lowest bin id from which every populated bin above is bad; None if the top bin
    is good. Isolated bad bins lower down (noise) do not end the linear region."""
    order = np.argsort(bin_ids)
    ids, flags = bin_ids[order], bad[order]
    good_idx = np.flatnonzero(~flags)
    if good_idx.size == 0:
        return int(ids[0])
    last_good = int(good_idx[-1])
    if last_good == ids.size - 1:
        return None
    return int(ids[last_good + 1])


@dataclass
class _Knee:
    """Result of the knee search on util-vs-IOPS points."""

    linear: npt.NDArray[np.bool_]      # points on the line
    departed: npt.NDArray[np.bool_]    # points off the line (above the knee), saturated incl.
    knee_util: float | None            # where linear growth ends (None: never observed)
    tolerance: float
    #: IOPS gained per % busy above the knee (the two-piece fit's upper slope), or None.
    bend_slope: float | None = None


def _find_knee(x: F64, y: F64, w: F64) -> _Knee:
    """Where %util stops growing in proportion to IOPS ([Oe]'s proportional limit).

    1. Reference line: util = k_ref x IOPS fitted through the origin on the points at or
       below 50 % busy (all of [Oe]'s knees lie higher); when fewer than 3 such points
       exist, on the lower half of the points by %util.
    2. Each point's relative departure d = util / (k_ref x IOPS) - 1: beyond the knee the
       device gives fewer IOPS per % of busy, so d grows positive.
    3. Tolerance: 3 robust standard deviations (1.4826 x MAD) of d on the reference points,
       kept within 4-25 %.
    4. Points are binned by %util (5-point bins, saturated >= 99 % on their own); a bin at
       or above 50 % busy is off the line when its median d exceeds the tolerance. The knee
       is where the run of off-line bins that reaches the top of the data begins (an
       isolated noisy bin lower down does not end the linear region); that run must hold
       at least 5 points and 0.5 % of them.
    5. The knee value is refined as the breakpoint of a two-piece fit (:func:`_hinge`)
       between half the last linear point's %util and the first departed point; else it is
       the last linear point's %util.
    """
    n = x.size
    sat = y >= SATURATED_UTIL_PCT
    ref = (y <= REFERENCE_UTIL_PCT) & ~sat
    if int(ref.sum()) < MIN_UTIL_POINTS:
        order = np.argsort(y)
        ref = np.zeros(n, dtype=bool)
        ref[order[: max(MIN_UTIL_POINTS, (n + 1) // 2)]] = True
    k_ref = _wls_origin(x, y, w, ref)
    if not math.isfinite(k_ref) or k_ref <= 0:
        return _Knee(np.ones(n, dtype=bool), np.zeros(n, dtype=bool), None, MIN_TOLERANCE)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = y / (k_ref * x) - 1.0
    # Noise from points that carry enough busy to be resolved (Solaris rounds %b to whole
    # percent: a 1 % point is +-50 % noise).
    noisy = ref & (y >= 10.0)
    dn = d[noisy] if int(noisy.sum()) >= MIN_UTIL_POINTS else d[ref]
    mad = float(np.median(np.abs(dn - np.median(dn)))) if dn.size else 0.0
    tol = min(MAX_TOLERANCE, max(MIN_TOLERANCE, 3.0 * 1.4826 * mad))
    top_bin = int(100.0 // UTIL_BIN_PCT) + 1
    # y >= 0, so truncation is the floor (and much cheaper than float floor division).
    bins = np.minimum((y * (1.0 / UTIL_BIN_PCT)).astype(np.int64), top_bin - 1)
    bins[sat] = top_bin
    # A bin is off the line when its median departure exceeds the tolerance, i.e. when
    # more than half of its points do: counted with bincount, no per-bin sort.
    count = np.bincount(bins, minlength=top_bin + 1)
    over = np.bincount(bins, weights=(d > tol).astype(np.float64), minlength=top_bin + 1)
    ids = np.flatnonzero(count)
    # Only bins from half busy up can hold the knee: below, a one-at-a-time device's busy
    # time is the plain sum of its service times (linear by construction) and a departure
    # is a change of workload mix ([Oe] §3: busy per IOPS is per mix), not the
    # proportional limit -- which [Oe] found at 80-95 %.
    bad = (over[ids] > count[ids] / 2.0) & (ids * UTIL_BIN_PCT >= REFERENCE_UTIL_PCT)
    start = _bad_suffix_start(ids, bad)
    if start is None:
        return _Knee(np.ones(n, dtype=bool), np.zeros(n, dtype=bool), None, tol)
    departed = bins >= start
    if int(departed.sum()) < max(MIN_DEPARTED_POINTS, MIN_DEPARTED_SHARE * n):
        # A few stray intervals at the top (a burst of another mix, a stall of the host)
        # are no proportional limit.
        return _Knee(np.ones(n, dtype=bool), np.zeros(n, dtype=bool), None, tol)
    linear = ~departed
    if not linear.any():
        return _Knee(linear, departed, None, tol)
    last_linear = float(y[linear].max())
    bent = departed & ~sat
    # The breakpoint lies below the first departed point that is not saturated; when only
    # the saturated points left the line, anywhere up to the last unsaturated one.
    hi = float(y[bent].min()) if bent.any() else last_linear
    hinge = _hinge(x, y, w, ~sat, k_ref, 0.5 * last_linear, hi)
    if hinge is not None:
        knee, slope = hinge
        linear = linear & (y <= knee)
        return _Knee(linear, ~linear, knee, tol, slope)
    return _Knee(linear, departed, last_linear, tol)


def _hinge(x: F64, y: F64, w: F64, use: npt.NDArray[np.bool_], k: float, lo: float,
           hi: float) -> tuple[float, float] | None:
    """The knee as the breakpoint of a continuous two-piece fit of IOPS against %util.

    Below the knee IOPS = util / k (the reference line); above it IOPS = knee / k +
    s x (util - knee) with the slope s fitted. The breakpoint minimising the weighted
    squared IOPS residuals is searched on a 0.25-point grid of %util in [lo, hi] (points
    just past a knee stay within the tolerance of the line, so the last "linear" point
    overshoots the knee; the breakpoint does not). IOPS is the dependent variable because
    a device's IOPS is what scatters at a given busy share.

    Every candidate's error follows from per-cell sums (count, w, w*u, w*x, w*u^2, w*u*x,
    w*x^2 and the line's squared residuals) accumulated with ``np.bincount``: O(n), no
    sort. Points below ``lo`` sit below every candidate, so their error is the same for
    all and they are left out.

    Returns (knee %util, s in IOPS per % busy), or None when no candidate bends clearly
    (0 <= s <= 0.9 / k: IOPS grow at most 90 % as fast per % busy as below the knee).
    """
    if not hi > lo:
        return None
    lo = math.floor(lo / HINGE_GRID_PCT) * HINGE_GRID_PCT   # grid on round %util values
    sel = use & (y >= lo)
    xs, ys, ws = x[sel], y[sel], w[sel]
    n_cells = math.ceil((hi - lo) / HINGE_GRID_PCT) + 1
    # Cell i holds lo + i*step <= util < lo + (i+1)*step; the last holds everything above.
    cell = np.minimum(((ys - lo) * (1.0 / HINGE_GRID_PCT)).astype(np.int64), n_cells)

    def per_cell(v: F64 | None) -> F64:
        return np.bincount(cell, weights=v, minlength=n_cells + 1).astype(np.float64)

    cnt = per_cell(None)
    resid = per_cell(ws * (xs - ys / k) ** 2)
    wsum, wy, wx = per_cell(ws), per_cell(ws * ys), per_cell(ws * xs)
    wyy, wxy, wxx = per_cell(ws * ys * ys), per_cell(ws * xs * ys), per_cell(ws * xs * xs)

    def above(v: F64) -> F64:
        return np.cumsum(v[::-1])[::-1]      # sum over cells >= i

    # Candidate i (1..n_cells): knee at e = lo + i*step, cells < i below, >= i above.
    i = np.arange(1, n_cells + 1)
    e = lo + i * HINGE_GRID_PCT
    below = np.cumsum(resid)[i - 1]
    n_up, s_w, s_y, s_x = above(cnt)[i], above(wsum)[i], above(wy)[i], above(wx)[i]
    s_yy, s_xy, s_xx = above(wyy)[i], above(wxy)[i], above(wxx)[i]
    suu = s_yy - 2 * e * s_y + e * e * s_w
    suv = s_xy - (e / k) * s_y - e * s_x + (e * e / k) * s_w
    svv = s_xx - 2 * (e / k) * s_x + (e / k) ** 2 * s_w
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(suu > 0, suv / suu, np.nan)
        sse = below + np.where(suu > 0, svv - suv * slope, svv)
    ok = ((n_up >= 2) & (e <= hi + 1e-9) & np.isfinite(slope) & (slope >= 0)
          & (slope <= BEND_MAX_SLOPE_SHARE / k))
    if not ok.any():
        return None
    best = int(np.argmin(np.where(ok, sse, np.inf)))
    return float(e[best]), float(slope[best])


def _size_drift_note(x: F64, y: F64, sz: F64) -> str | None:
    """Warn when busy per IOPS differs between small- and large-request intervals."""
    ok = np.isfinite(sz) & (sz > 0)
    if int(ok.sum()) < 2 * MIN_UTIL_POINTS:
        return None
    ratio, size = y[ok] / x[ok], sz[ok]
    cut = float(np.median(size))
    small, large = ratio[size <= cut], ratio[size > cut]
    if small.size < MIN_UTIL_POINTS or large.size < MIN_UTIL_POINTS:
        return None
    rs, rl = float(np.median(small)), float(np.median(large))
    if rs <= 0 or abs(rl / rs - 1.0) < SIZE_DRIFT_REL:
        return None
    return (f"busy per IOPS depends on the request size here: {rs:.4g} %/IOPS for requests "
            f"<= {cut:.0f} kB vs {rl:.4g} for larger ones ([Oe]: service time varies "
            "with the size mix); the maximum holds for the observed mix only")


#: %util below this is no busy time at all: the kernel counts busy time in whole
#: milliseconds (io_ticks), 1 ms of a 1e5 s interval is 1e-6 %. Smaller values (hypothesis
#: found 2.2e-308) made busy per IOPS denormal and the maximum infinite.
_MIN_UTIL_PCT = 1e-6


def _util_linear(p: Points, known: bool | None, reason: str) -> CapacityEstimate:
    ok = np.isfinite(p.util) & (p.util >= _MIN_UTIL_PCT)
    x, y, w = p.iops[ok], np.minimum(p.util[ok], 100.0), p.weight[ok]
    w = np.where(np.isfinite(w) & (w > 0), w, 1.0)
    n = int(x.size)
    if n < MIN_UTIL_POINTS:
        return CapacityEstimate(method="none", points=n, reason=(
            f"too few intervals with I/O and %util ({n}; at least {MIN_UTIL_POINTS} are "
            "needed to fit %util against IOPS)"))
    notes: list[str] = []
    kn = _find_knee(x, y, w)
    # Saturated intervals never enter the slope: %util is capped there (on the line or
    # not, they carry no information about busy per IOPS below the limit).
    lin = kn.linear & (y < SATURATED_UTIL_PCT)
    k = _wls_origin(x, y, w, lin) if lin.any() else math.nan
    if not math.isfinite(k) or k <= 0:
        # Every point is off the line or saturated: no linear region to fit.
        k = _wls_origin(x, y, w)
        lin = np.ones(n, dtype=bool)
        notes.append("no linear region below saturation: busy per IOPS fitted on all points")
    r2 = _r2(y, k * x, w * lin)
    y_max = float(y.max())
    sat = y >= SATURATED_UTIL_PCT
    n_sat = int(sat.sum())
    if 0 < n_sat < max(MIN_DEPARTED_POINTS, MIN_DEPARTED_SHARE * n):
        # One or two saturated intervals among many (a host stall, a burst of another
        # mix) are no plateau to read the maximum from.
        notes.append(f"{n_sat} interval(s) at >= {SATURATED_UTIL_PCT:g} % busy: too few for "
                     "a plateau, not used as the maximum")
        if (~sat).any():
            y_max = float(y[~sat].max())
        sat = np.zeros(n, dtype=bool)
        n_sat = 0
    est = CapacityEstimate(method="util-linear", reason=reason, busy_per_iops=k, r2=r2,
                           points=n)
    if r2 is not None and r2 < MIN_FIT_R2:
        # A line that explains less than half the variation of %util (or less than its
        # mean does: r2 < 0) carries no maximum and no knee: 100 % / k would be a number
        # the data never supported.
        est.confidence = 0.0
        est.notes = [*notes, (
            f"%util does not grow in proportion to IOPS here: the line through the origin "
            f"explains too little (r² {r2:.2f} < {MIN_FIT_R2:g}), so neither a knee nor a "
            f"maximum is read from it ([Oe] §3's method needs the proportion); observed "
            f"up to {float(x.max()):,.4g} IOPS at {y_max:.1f} % busy")]
        return est
    notes += _knee_and_max(est, kn, x, y, sat, k, y_max)
    # Confidence: fit quality x number of points x how much of the busy range was seen.
    c_fit = 0.5 if r2 is None else min(1.0, max(0.0, r2))
    if r2 is None:
        notes.append("the load hardly varied: the fit rests on [Oe]'s proportionality "
                     "through the origin (0 IOPS = 0 % busy)")
    c_n = min(1.0, math.sqrt(n / 20.0))
    c_range = 1.0 if n_sat else min(1.0, y_max / 90.0)
    conf = c_fit * c_n * c_range
    if known is None:
        conf *= UNKNOWN_KIND_FACTOR
    if y_max < 20.0:
        notes.append(f"low confidence: the load never exceeded {y_max:.1f} % busy, so the "
                     "maximum is a long extrapolation")
    if (drift := _size_drift_note(x, y, p.areq_kb[ok])) is not None:
        notes.append(drift)
    else:
        notes.append("busy per IOPS (and the maximum) hold for the observed workload mix "
                     "(request size, read/write ratio, locality): [Oe] measured 239 vs "
                     "65 IOPS for two mixes on the same array")
    est.confidence = conf
    est.notes = notes
    return est


def _knee_and_max(est: CapacityEstimate, kn: _Knee, x: F64, y: F64,
                  sat: npt.NDArray[np.bool_], k: float, y_max: float) -> list[str]:
    """The knee and the maximum of a util-linear fit, set on ``est``; the notes saying
    how each was read."""
    notes: list[str] = []
    n_sat = int(sat.sum())
    if kn.knee_util is not None:
        est.knee_util_pct = kn.knee_util
        est.knee_iops = kn.knee_util / k
        notes.append(f"%util grows in proportion to IOPS up to {kn.knee_util:.1f} % busy "
                     f"(the proportional-limit busy rate, [Oe] §3; departures above "
                     f"{kn.tolerance * 100:.0f} % from the line count as non-linear)")
    elif n_sat:
        notes.append("%util grows in proportion to IOPS all the way to saturation: no knee "
                     "below 100 % busy")
    else:
        notes.append(f"%util grows in proportion to IOPS up to the highest observed "
                     f"{y_max:.1f} % busy: the knee ([Oe]: 80-95 %) was not reached")
    if n_sat:
        plateau = float(np.median(x[sat]))
        est.max_iops = plateau
        notes.append(f"maximum observed at saturation: median IOPS of the {n_sat} interval(s) "
                     f"at >= {SATURATED_UTIL_PCT:g} % busy")
    elif kn.knee_util is not None and kn.bend_slope is not None:
        # Along the bent segment to 100 % busy; never below what was observed, never above
        # the straight line's 100 / k.
        along = kn.knee_util / k + kn.bend_slope * (100.0 - kn.knee_util)
        est.max_iops = min(100.0 / k, max(along, float(x[~sat].max())))
        notes.append(f"never saturated and beyond the knee: maximum extrapolated along the "
                     f"bent segment ({kn.bend_slope:.4g} IOPS per % busy above the knee) "
                     f"from {y_max:.1f} % to 100 % busy")
    elif kn.knee_util is not None:
        top = kn.departed & (y >= float(y[kn.departed].max()) - UTIL_BIN_PCT)
        r_top = float(np.median(y[top] / x[top]))
        est.max_iops = 100.0 / r_top
        notes.append(f"never saturated and beyond the knee: maximum extrapolated from the busy "
                     f"per IOPS at the heaviest load ({r_top:.4g} %/IOPS at up to "
                     f"{y_max:.1f} % busy); busy per IOPS keeps growing past the knee, so "
                     "this is an upper bound")
    else:
        est.max_iops = 100.0 / k
        notes.append(f"never saturated: maximum = 100 % / busy per IOPS, extrapolated "
                     f"linearly from {y_max:.1f} % busy ([Oe]: at 100 % busy IOPS = "
                     "1/svctm); if the knee lies below 100 % the real maximum is lower")
    return notes


def _latency_knee(p: Points, reason: str) -> CapacityEstimate:
    ok = np.isfinite(p.await_ms) & (p.await_ms >= MIN_LATENCY_MS)
    if ok.any():
        # Stragglers near idle (a few background writes between load phases) are another
        # workload, not this one at low load: they would set the baseline.
        ok &= p.iops >= MIN_LOAD_SHARE * float(np.max(p.iops[ok]))
    x, lat = p.iops[ok], p.await_ms[ok]
    n = int(x.size)
    if n < MIN_LATENCY_POINTS:
        return CapacityEstimate(method="none", points=n, reason=(
            f"{reason}; too few intervals with I/O and a response time ({n}; at least "
            f"{MIN_LATENCY_POINTS} are needed for a latency-vs-throughput curve)"))
    x_max = float(x.max())
    bins = np.minimum((x / x_max * LATENCY_BINS).astype(np.int64), LATENCY_BINS - 1)
    ids, inverse, counts = np.unique(bins, return_inverse=True, return_counts=True)
    bx = np.array([float(np.median(x[inverse == i])) for i in range(ids.size)])
    bl = np.array([float(np.median(lat[inverse == i])) for i in range(ids.size)])
    if ids.size < MIN_LATENCY_BINS or bx[-1] < 1.5 * bx[0]:
        return CapacityEstimate(method="none", points=n, reason=(
            f"{reason}; the load range is too narrow for a latency knee (IOPS "
            f"{float(x.min()):.4g}-{x_max:.4g} in {ids.size} bin(s))"))
    base = float(bl[0])
    notes: list[str] = [(f"low-load response time {base:.3g} ms (median of the lowest IOPS "
                        "bin)")]
    est = CapacityEstimate(method="latency-knee", reason=reason, points=n)
    start = _bad_suffix_start(ids.astype(np.int64), bl > LATENCY_KNEE_FACTOR * base)
    knee_iops: float | None = None
    if start is not None:
        good = ids < start
        if good.any():
            knee_iops = float(bx[good].max())
            est.knee_iops = knee_iops
            notes.append(f"response time exceeds {LATENCY_KNEE_FACTOR:g}x the low-load value "
                         f"above {knee_iops:.4g} IOPS")
    # M/M/1-like curve: L = S/(1 - X/Xmax)  <=>  1/L = 1/S - X/(S Xmax), a straight line.
    inv = 1.0 / bl
    slope, icpt = np.polyfit(bx, inv, 1, w=np.sqrt(counts.astype(np.float64)))
    asym = float(icpt / -slope) if slope < 0 and icpt > 0 else math.nan
    r2 = _r2(inv, slope * bx + icpt, counts.astype(np.float64))
    est.r2 = r2
    rho_top = bx[-1] / asym if math.isfinite(asym) else 0.0
    if math.isfinite(asym) and rho_top >= MIN_RHO_OBSERVED and (r2 or 0.0) >= 0.5:
        est.max_iops = max(asym, float(bx[-1]))
        notes.append(f"maximum = asymptote of L = S/(1 - IOPS/max) fitted to the median "
                     f"response time per IOPS bin (S = {1.0 / icpt:.3g} ms); the observed "
                     f"load reached {min(rho_top, 1.0) * 100:.0f} % of it")
        c_range = min(1.0, rho_top / 0.8)
    elif knee_iops is not None:
        est.max_iops = float(bx.max())
        notes.append("the latency curve does not fit an M/M/1 asymptote: maximum = the "
                     "highest sustained throughput observed")
        c_range = 0.5
    else:
        return CapacityEstimate(method="none", points=n, r2=r2, reason=(
            f"{reason}; response time did not climb with load (up to {x_max:.4g} IOPS at "
            f"{float(bl[-1]):.3g} ms vs {base:.3g} ms at low load): the limit lies above the "
            "observed load"), notes=notes)
    c_fit = 0.5 if r2 is None else min(1.0, max(0.0, r2))
    c_n = min(1.0, math.sqrt(ids.size / 8.0)) * min(1.0, math.sqrt(n / 30.0))
    est.confidence = c_fit * c_n * c_range
    notes.append("latency-vs-throughput curve for the observed workload mix; an M/M/1 curve "
                 "is an approximation for a device with several internal servers")
    est.notes = notes
    return est


def estimate(dev: DeviceContext, points: Points | None = None) -> CapacityEstimate:
    """Capacity and headroom of one device for its observed workload.

    Uses the device's non-idle intervals (``points``, gathered here when not given) for the
    fit and ``dev.windows`` for the current load (the busiest window's mean IOPS). The
    method follows the device's service model (``dev.service``, decided from the samples
    with the labels as a prior: ``service_model``): one at a time -> ``util-linear``;
    parallel -> ``latency-knee``; undetermined -> ``util-linear`` with lower confidence.
    A source without %util gets the latency knee. Never raises.
    """
    p = device_points(dev) if points is None else points
    current = _current_iops(dev)
    seq = dev.attributes.seq_pct if dev.attributes is not None else None
    decision = dev.service or decide(dev.device, dev.kind, dev.info, dev.capability, p, seq)
    known = decision.util_is_capacity
    has_util = bool(np.isfinite(p.util).any())
    if known is False:
        why = (f"{decision.summary}: %util saturates long before the device does "
               "([sysstat] iostat(1)), so the latency curve decides")
        return _with_headroom(_latency_knee(p, why), current)
    if not has_util:
        why = ("no %util in this source: latency vs throughput instead (a one-at-a-time "
               "device is a single-server queue, the case the M/M/1 curve describes)")
        return _with_headroom(_latency_knee(p, why), current)
    if known:
        why = f"{decision.summary}: %util measures capacity ([Oe] §3)"
    else:
        why = (f"{decision.summary}: treated as one at a time ([Oe] §3), with lower "
               "confidence")
    est = _util_linear(p, known, why)
    if known is None and est.method == "util-linear":
        est.notes.append("service model undetermined: if it serves requests in parallel "
                         "(SSD, RAID, cloud volume) %util saturates early and this maximum is "
                         "too low")
    return _with_headroom(est, current)
