"""Saturation and drop-off: the device at its limit, throughput flat while latency climbs.

[Goodus]: "as utilization approaches 100 % response time climbs and throughput
flattens" - the *drop-off*; tuning looks for the resource that reached 100 % busy. [Oe]
(§5.5): %util grows linearly with IOPS up to the *proportional-limit busy rate* (the knee,
80-95 % in its workloads), then non-linearly; 100 % is the maximum.

Two methods, chosen by whether %util measures capacity on the device
(``DeviceContext.util_is_capacity``, [sysstat] iostat(1)):

**One-at-a-time devices** (single HDD: ``util_is_capacity`` True):

* baseline = active windows below the knee (``capacity.knee_util_pct`` when the capacity
  model found one, else :data:`DEFAULT_KNEE_PCT` = 80 %, the low end of [Oe]'s 80-95 %);
* **critical** - saturated with drop-off: a sustained run at %util >= 95 % in which the
  response time is at least 2x the baseline's *and* grew at least 2x more than throughput
  (the larger of the IOPS and MB/s gains, so a change to larger transfers is not mistaken
  for a plateau). By Little's law (L = X x R) a response time that grows while throughput
  does not means requests pile up: the device delivers all it can. 2x the low-load response
  is the latency knee the capacity model uses too (M/M/1: R = S / (1 - rho) doubles at
  rho = 0.5);
* **warning** - near saturation: a sustained run at or above the knee (and at 95 %+ when the
  drop-off cannot be shown: no baseline windows, no latency, or latency not climbing).

**Parallel devices** (SSD, NVMe, RAID, dm/md, cloud: ``util_is_capacity`` False) and devices
whose kind is unknown (None) - %util says nothing about their capacity, so it is not used:

* baseline = active windows at or below the median IOPS (light load);
* **warning** - drop-off: a sustained run of windows at or above the median IOPS where the
  response time is >= 2x the baseline's, at least 1 ms above it (ms-resolution counters:
  less is noise), grew at least 2x more than throughput, and the mean request size is within
  2x of the baseline's (a move to larger requests, or from cached sequential to random I/O,
  raises latency without any saturation);
* **critical** - the same while the load is at >= 90 % of what the capability profile
  expects for the mix (``capability.expected_iops`` / ``expected_MBps``): the device is at
  its published limit and requests wait longer - [Goodus]'s drop-off. Without a profile the
  latency shape alone cannot tell saturation from throttling or a neighbour, so it stays a
  warning.

The parallel method needs at least :data:`MIN_ACTIVE_WINDOWS` active windows; a critical
run needs its critical windows to be sustained themselves (3 samples or 5 min), otherwise it
is reported as a warning. How fast the response is in absolute terms is left to
``response_time_target`` and ``solaris_service_time``; where the time is spent, to
``queueing``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    areq_kB_expr,
    await_expr,
    c,
    devices_to_judge,
    find_runs,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_rate,
    fmt_ratio,
    has,
    iops_expr,
    is_sustained,
    kBps_expr,
    level_expr,
    run_finding,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole
from iogauge.analysis.windows import window_label

RULE_ID = "saturation"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Saturation and drop-off: %util >= 95 % with throughput flat while latency "
               "climbs (one-at-a-time devices; above the knee = near saturation), or latency "
               "climbing with flat throughput on parallel devices ([Goodus], [Oe]).")

#: Knee (proportional-limit busy rate) when the capacity model has none: [Oe] observed
#: 80-95 % in its workloads; the low end warns before the non-linear region.
DEFAULT_KNEE_PCT = 80.0
#: %util from which a one-at-a-time device is saturated (100 % busy is the maximum; iostat
#: rounding and interval edges keep a saturated device at 95-100 %).
SATURATED_UTIL_PCT = 95.0
#: Response time at least this multiple of the baseline's = latency climbing.
LATENCY_CLIMB = 2.0
#: Latency must have grown at least this many times more than throughput = throughput flat.
FLAT_FACTOR = 2.0
#: Parallel devices: the climb must also be at least this many ms (counter resolution).
MIN_CLIMB_MS = 1.0
#: Parallel devices: throughput at or above this share of the capability's expected IOPS
#: or MB/s = at the device's limit.
PLATEAU_SHARE = 0.9
#: Parallel devices: a window whose mean request size differs from the baseline's by more
#: than this factor is a different mix, not a drop-off.
MIX_FACTOR = 2.0
#: Fewest active windows to compare a load level with a baseline.
MIN_ACTIVE_WINDOWS = 4

#: Kinds that are not devices with a capacity of their own.
EXCLUDED_KINDS = frozenset({"ram", "tablespace", "datafile"})

SOURCE = ("[Goodus] §2 (drop-off: as utilization nears 100 % response time climbs and "
          "throughput flattens), [Oe] (%util linear in IOPS up to the "
          "proportional-limit busy rate, 80-95 %), [sysstat] iostat(1) (%util is a "
          "capacity measure only for one-at-a-time devices)")


@dataclass(frozen=True)
class _Baseline:
    """The reference load: which windows, their response time and throughput."""

    what: str
    windows: int
    await_ms: float | None
    iops: float | None
    kBps: float | None


def check(ctx: AnalysisContext) -> list[Finding]:
    """Saturation findings per device."""
    out: list[Finding] = []
    for dev in devices_to_judge(ctx, EXCLUDED_KINDS):
        if dev.util_is_capacity:
            out.extend(_util_method(ctx, dev))
        else:
            out.extend(_latency_method(ctx, dev))
    return out


def _prepared(w: pl.DataFrame) -> pl.DataFrame:
    return w.lazy().with_columns(
        _iops=iops_expr(w), _kBps=kBps_expr(w), _await=await_expr(w),
        _areq=areq_kB_expr(w)).with_columns(
        _active=pl.col("_iops").fill_null(0.0) >= ACTIVE_IOPS).collect()


def _arr(wt: pl.DataFrame, col: str) -> npt.NDArray[np.float64]:
    return wt[col].cast(pl.Float64).to_numpy()


def _baseline(wt: pl.DataFrame, mask: npt.NDArray[np.bool_], what: str) -> _Baseline:
    """Operation-weighted response time and time-weighted throughput of the masked active
    windows (numpy over the device's windows: no query)."""
    iops, span = _arr(wt, "_iops"), _arr(wt, "span_s")
    m = mask & wt["_active"].to_numpy()
    if not m.any():
        return _Baseline(what, 0, None, None, None)
    lat = _arr(wt, "_await")
    ok = m & np.isfinite(lat)
    opw = iops[ok] * span[ok]
    den = float(opw.sum())
    await_ms = float((lat[ok] * opw).sum()) / den if den > 0 else None
    mean_iops = float((iops[m] * span[m]).sum() / span[m].sum())
    kb = _arr(wt, "_kBps")
    okk = m & np.isfinite(kb)
    kBps = (float((kb[okk] * span[okk]).sum() / span[okk].sum())
            if okk.any() and span[okk].sum() > 0 else None)
    return _Baseline(what, int(m.sum()), await_ms, mean_iops, kBps)


def _gains(base: _Baseline) -> tuple[pl.Expr, pl.Expr]:
    """Per-window latency gain and throughput gain (the larger of IOPS and MB/s) vs base."""
    lat = (pl.col("_await") / base.await_ms if base.await_ms
           else pl.lit(None, dtype=pl.Float64))
    gains = []
    if base.iops:
        gains.append(pl.col("_iops") / base.iops)
    if base.kBps:
        gains.append(pl.col("_kBps") / base.kBps)
    thr = pl.max_horizontal(gains) if gains else pl.lit(None, dtype=pl.Float64)
    return lat, thr


def _dropoff(lat_gain: pl.Expr, thr_gain: pl.Expr) -> pl.Expr:
    return ((lat_gain >= LATENCY_CLIMB) & (lat_gain >= FLAT_FACTOR * thr_gain)).fill_null(
        value=False)


def _critical_sustained(run: Run) -> bool:
    crit = run.part["_crit"].to_numpy()
    return is_sustained(int(run.part["intervals"].to_numpy()[crit].sum()),
                        float(run.part["span_s"].to_numpy()[crit].sum()))


def _util_method(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    if not has(w, "util_pct"):
        return []
    knee = DEFAULT_KNEE_PCT
    knee_src = f"default {fmt_pct(DEFAULT_KNEE_PCT)} ([Oe]: knees at 80-95 %)"
    if dev.capacity is not None and dev.capacity.knee_util_pct is not None:
        knee = min(float(dev.capacity.knee_util_pct), SATURATED_UTIL_PCT)
        knee_src = "proportional-limit busy rate fitted by the capacity model ([Oe])"
    wt = _prepared(w)
    util = c(wt, "util_pct")
    util_a = _arr(wt, "util_pct")
    base = _baseline(wt, np.nan_to_num(util_a, nan=math.inf) < knee,
                     f"windows below the {fmt_pct(knee)} knee")
    lat_gain, thr_gain = _gains(base)
    wt = (wt.lazy().with_columns(_lat_gain=lat_gain, _thr_gain=thr_gain).with_columns(
        _crit=((util >= SATURATED_UTIL_PCT)
               & _dropoff(pl.col("_lat_gain"), pl.col("_thr_gain"))).fill_null(value=False),
        _near=(util >= knee).fill_null(value=False)).with_columns(
        _level=level_expr(critical=pl.col("_crit"), warning=pl.col("_near"))).collect())
    found = find_runs(wt, "_level", "util_pct", window_s=ctx.window_s, sustained_only=True)
    out = []
    for run in found.runs:
        critical = run.level >= 2 and _critical_sustained(run)  # level 2 = critical
        out.append(_util_finding(ctx, dev, run, found, base, knee, knee_src, critical=critical))
    return out


def _util_finding(ctx: AnalysisContext, dev: DeviceContext, run: Run, found: Matches,
                  base: _Baseline, knee: float, knee_src: str, *, critical: bool) -> Finding:
    label = window_label(ctx.window_s, ctx.timeline)
    util_mean = run.tmean("util_pct")
    util_max = run.max("util_pct")
    run_await = run.wmean("_await", "_iops")
    run_iops = run.tmean("_iops")
    evidence = [
        Evidence("util_pct", util_mean, "%", threshold=SATURATED_UTIL_PCT if critical else knee,
                 op=">=", note=f"time-weighted mean over the run (highest {label} window "
                               f"{fmt_pct(util_max)})"),
        Evidence("knee_util_pct", knee, "%", note=knee_src),
        Evidence("iops", run_iops, "IO/s", note="time-weighted mean over the run"),
    ]
    if base.windows:
        evidence.append(Evidence("baseline_iops", base.iops, "IO/s",
                                 note=f"{base.what} ({base.windows} windows)"))
    if run_await is not None:
        evidence.append(Evidence("await_ms", run_await, "ms",
                                 threshold=None if base.await_ms is None
                                 else LATENCY_CLIMB * base.await_ms,
                                 op=">=" if critical else "",
                                 note="operation-weighted mean over the run"))
    if base.await_ms is not None:
        evidence.append(Evidence("baseline_await_ms", base.await_ms, "ms",
                                 note=f"{base.what}, operation-weighted"))
    worst_lat, worst_thr = run.worst.get("_lat_gain"), run.worst.get("_thr_gain")
    if worst_lat is not None and worst_thr is not None:
        evidence.append(Evidence("latency_gain", float(worst_lat), "x",
                                 threshold=LATENCY_CLIMB, op=">=" if critical else "",
                                 note=f"worst {label} window's response / baseline"))
        evidence.append(Evidence("throughput_gain", float(worst_thr), "x",
                                 threshold=float(worst_lat) / FLAT_FACTOR,
                                 op="<=" if critical else "",
                                 note="larger of IOPS and MB/s gains vs baseline"))
    if critical:
        title = (f"Saturated: {fmt_pct(util_mean)} busy, response {fmt_ms(run_await)} vs "
                 f"{fmt_ms(base.await_ms)} below the knee while throughput stayed flat "
                 "(drop-off)")
        explanation = ("The disk serves one request at a time and was busy all the time; its "
                       "response time climbed well beyond what it was at lower load while it "
                       "completed hardly more work. That is the drop-off of [Goodus]: the "
                       "device has reached its limit and every extra request only waits "
                       "longer.")
    else:
        why = ""
        if util_max is not None and util_max >= SATURATED_UTIL_PCT:
            why = (" It reached 95 % busy or more, but a drop-off (response climbing while "
                   "throughput stays flat) "
                   + ("cannot be shown: there are no lower-load windows to compare with."
                      if not base.windows or base.await_ms is None
                      else "is not visible: the response time did not climb with the load."))
        title = (f"Near saturation: {fmt_pct(util_mean)} busy, at or above the "
                 f"{fmt_pct(knee)} knee")
        explanation = ("On a one-at-a-time device %util grows in proportion to IOPS up to the "
                       "knee ([Oe]'s proportional-limit busy rate) and non-linearly "
                       "beyond it: little headroom is left and response times will climb "
                       "quickly with more load." + why)
    suggestion = ("Reduce or spread the load in this window (move busy files or volumes to "
                  "other disks, reschedule batch work), make each request do more "
                  "(larger sequential transfers), or move to a device that serves requests "
                  "in parallel; to protect an application sharing the disk, use iogauge "
                  "guarantee ([Oe]).")
    return _finding(dev, run, found, critical=critical,
                    text=(title, explanation, suggestion), evidence=evidence)


def _latency_method(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    if not (has(w, "await_ms") or has(w, "r_await_ms") or has(w, "w_await_ms")):
        return []
    wt = _prepared(w)
    iops_a = _arr(wt, "_iops")
    act = wt["_active"].to_numpy() & np.isfinite(_arr(wt, "_await"))
    if int(act.sum()) < MIN_ACTIVE_WINDOWS:
        return []
    median_iops = float(np.median(iops_a[act]))
    base = _baseline(wt, np.nan_to_num(iops_a, nan=math.inf) <= median_iops,
                     f"light-load windows (<= median {fmt_rate(median_iops)})")
    if base.await_ms is None or not base.iops:
        return []
    lat_gain, thr_gain = _gains(base)
    # Same kind of requests: latency legitimately grows with request size and with a move
    # from cached sequential to random I/O, which shows as a size change.
    base_areq = base.kBps / base.iops if base.kBps else None
    same_mix: pl.Expr = pl.lit(value=True)
    if base_areq:
        ratio = pl.col("_areq") / base_areq
        same_mix = ratio.is_null() | ((ratio >= 1.0 / MIX_FACTOR) & (ratio <= MIX_FACTOR))
    drop = (pl.col("_active") & (pl.col("_iops") >= median_iops)
            & _dropoff(pl.col("_lat_gain"), pl.col("_thr_gain"))
            & (pl.col("_await") - base.await_ms >= MIN_CLIMB_MS) & same_mix)
    at_limit = _at_capability(dev)
    wt = (wt.lazy().with_columns(_lat_gain=lat_gain, _thr_gain=thr_gain).with_columns(
        _drop=drop.fill_null(value=False)).with_columns(
        _crit=(pl.col("_drop") & at_limit).fill_null(value=False)).with_columns(
        _level=level_expr(critical=pl.col("_crit"), warning=pl.col("_drop"))).collect())
    found = find_runs(wt, "_level", "_lat_gain", window_s=ctx.window_s, sustained_only=True)
    out = []
    for run in found.runs:
        critical = run.level >= 2 and _critical_sustained(run)  # level 2 = critical
        out.append(_latency_finding(ctx, dev, run, found, base, critical=critical))
    return out


def _at_capability(dev: DeviceContext) -> pl.Expr:
    """Windows at >= 90 % of the capability's expected IOPS or MB/s for the observed mix
    (false when the catalog has no figure): the device is at its published limit."""
    cap = dev.capability
    cond: pl.Expr = pl.lit(value=False)
    if cap is None:
        return cond
    if cap.expected_iops:
        cond = cond | (pl.col("_iops") >= PLATEAU_SHARE * cap.expected_iops)
    if cap.expected_MBps:
        cond = cond | (pl.col("_kBps") / 1024.0 >= PLATEAU_SHARE * cap.expected_MBps)
    return cond.fill_null(value=False)


def _latency_finding(ctx: AnalysisContext, dev: DeviceContext, run: Run, found: Matches,
                     base: _Baseline, *, critical: bool) -> Finding:
    label = window_label(ctx.window_s, ctx.timeline)
    run_await = run.wmean("_await", "_iops")
    run_iops = run.tmean("_iops")
    lat_g = float(run.worst["_lat_gain"])
    thr_g = run.worst.get("_thr_gain")
    evidence = [
        Evidence("await_ms", run_await, "ms", threshold=LATENCY_CLIMB * (base.await_ms or 0.0),
                 op=">=", note="operation-weighted mean over the run"),
        Evidence("baseline_await_ms", base.await_ms, "ms",
                 note=f"{base.what}, {base.windows} windows"),
        Evidence("iops", run_iops, "IO/s", note="time-weighted mean over the run"),
        Evidence("baseline_iops", base.iops, "IO/s", note=base.what),
        Evidence("latency_gain", lat_g, "x", threshold=LATENCY_CLIMB, op=">=",
                 note=f"worst {label} window's response / baseline"),
        Evidence("throughput_gain", None if thr_g is None else float(thr_g), "x",
                 threshold=lat_g / FLAT_FACTOR, op="<=",
                 note="larger of IOPS and MB/s gains vs baseline"),
    ]
    cap = dev.capability
    if critical and cap is not None:
        evidence.append(Evidence("expected_iops", cap.expected_iops, "IO/s",
                                 threshold=None, note=f"{cap.title} for this mix; the run is at "
                                 f">= {PLATEAU_SHARE:.0%} of it or of {fmt_num(cap.expected_MBps)} "
                                 "MB/s"))
    kind_note = ("Whether %util measures capacity on this device is unknown, so it is judged "
                 "by latency and throughput alone. " if dev.util_is_capacity is None else
                 "This device serves requests in parallel, so %util says nothing about its "
                 "capacity; latency and throughput do. ")
    if critical:
        title = (f"Drop-off at the device's limit: response {fmt_ms(run_await)} "
                 f"({fmt_ratio(lat_g)} the light-load {fmt_ms(base.await_ms)}) at its "
                 "expected throughput")
        explanation = (kind_note + "The device was delivering what its profile says it can "
                       "for this mix, while its response time climbed far beyond the "
                       "light-load value with throughput flat: requests pile up because the "
                       "device cannot complete them faster - [Goodus]'s drop-off, the device "
                       "is at its limit.")
    else:
        title = (f"Latency climbs with flat throughput: response {fmt_ms(run_await)} "
                 f"({fmt_ratio(lat_g)} the light-load {fmt_ms(base.await_ms)})")
        explanation = (kind_note + "At above-median load and with requests of the same size, "
                       "the response time rose far more than the work done - the drop-off "
                       "shape of [Goodus]. Without the device's published limit it cannot be "
                       "told whether the device is at its capacity or something slowed it "
                       "(throttling of a cloud volume at its IOPS/MB/s cap or out of burst "
                       "credits, a neighbour on shared storage, garbage collection, a "
                       "rebuild).")
    suggestion = ("Compare the run's load with the device's provisioned limits (tier or "
                  "size caps for cloud volumes; --profile to name the device's catalog "
                  "profile); check other hosts or volumes on the same storage in that window; "
                  "spread or reschedule the load.")
    return _finding(dev, run, found, critical=critical,
                    text=(title, explanation, suggestion), evidence=evidence)


def _finding(dev: DeviceContext, run: Run, found: Matches, *, critical: bool,
             text: tuple[str, str, str], evidence: list[Evidence]) -> Finding:
    """The finding of a run: ``text`` is (title, explanation, suggestion)."""
    title, explanation, suggestion = text
    return run_finding(RULE_ID, dev, run, found, severity="critical" if critical else "warning",
                       title=title, evidence=evidence, explanation=explanation,
                       suggestion=suggestion, source=SOURCE)
