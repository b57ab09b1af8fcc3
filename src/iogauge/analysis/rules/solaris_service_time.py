"""[Goodus]'s rule of thumb: a disk's response time judged together with how busy it is.

[Goodus] §3.4 (Solaris ``iostat -x``) reads ``svc_t`` - which, despite its name, is the
whole response time including the wait queue (iostat(8): "reports the overall response
time, rather than the service time") - together with ``%b`` (busy) and ``%w`` (share of
time the wait queue is non-empty):

* ``svc_t`` <= 30 ms is normal;
* 30-50 ms with ``%b`` <= 5 % is still normal (a mean over the few requests of an almost
  idle disk says little about it);
* ``svc_t`` >= 50 ms with ``%b`` >= 20 % means the disk is a bottleneck;
* ``%w`` >= 5 % means the disk is heavily loaded (requests queue in the driver).

These are the response-time standard's figures for spindles and for devices nothing is
known of (``latency_standard.CLASS_MS``); this rule applies them *under load* (busy >= 20 %,
or no busy figure), where they were drawn. Below 20 % busy a slow response is not load:
``latency_without_load`` judges it with the same figures. Other classes (SSD, NVMe, array
LUN, cloud volume, Windows) and user targets are ``response_time_target``'s (``_common
.latency_targets``): every window's response time is judged by exactly one rule.

Applies to: every device with a response time (SampleFrame ``await_ms``: Solaris/AIX/HP-UX
``svc_t``/``avwait+avserv``, Linux ``await``; reads and writes apart where the source
splits them, so a slow write average does not hide behind fast reads) and a busy figure
(``util_pct``: ``%b``, ``%util``, ``%busy``). Not ``ram`` devices, ports, LCUs and
tablespaces (aggregates, not disks), not fio jobs (a benchmark's latency is set by its
chosen queue depth), and not a partition or datafile whose parent is in the data (the
parent carries the same I/O). The ``%w`` check is this rule's alone and applies to every
window.

Severities (per window, then runs of windows; a single sample suffices because [Goodus]
applies the rule to single ``iostat`` reports):

* **critical** - bottleneck: response >= 50 ms and busy >= 20 %;
* **warning** - above normal: response > 30 ms at >= 20 % busy; response >= 50 ms where the
  source reports no busy figure (the %b condition cannot be checked, so bottleneck is not
  claimed); or ``%w`` >= 5 % (heavily loaded).
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.latency_standard import (
    ALMOST_IDLE_UTIL_PCT,
    CLASS_MS,
    UNLOADED_UTIL_PCT,
    LatencyClass,
)
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    await_expr,
    c,
    find_runs,
    fmt_ms,
    fmt_pct,
    has,
    iops_expr,
    judged_via_parent,
    latency_target_exprs,
    level_expr,
    run_finding,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole
from iogauge.analysis.windows import window_label

RULE_ID = "solaris_service_time"
ROLE = RuleRole.LATENCY
DESCRIPTION = ("[Goodus]'s rule of thumb on response time (svc_t/await) with busy "
               "(%b/%util) and %w, under load: >= 50 ms at >= 20 % busy is a bottleneck, "
               "> 30 ms at >= 20 % busy is above normal, %w >= 5 % is heavily loaded.")

#: svc_t at or below this is normal ([Goodus] §3.4; the standard's figure for spindles and
#: for devices nothing is known of, ``latency_standard.CLASS_MS``).
NORMAL_MS = CLASS_MS[LatencyClass.HDD].read_ms
#: svc_t at or above this with busy >= BOTTLENECK_BUSY_PCT is a bottleneck ([Goodus] §3.4).
BOTTLENECK_MS = CLASS_MS[LatencyClass.HDD].critical_read_ms
#: Busy above which 30-50 ms is no longer normal ([Goodus]: "30-50 ms with %b <= 5 %").
LIGHT_BUSY_PCT = ALMOST_IDLE_UTIL_PCT
#: Busy from which >= 50 ms is a bottleneck ([Goodus]); below it a slow response is
#: ``latency_without_load``'s.
BOTTLENECK_BUSY_PCT = UNLOADED_UTIL_PCT
#: %w (wait queue non-empty) from which a disk is heavily loaded ([Goodus]).
HEAVY_WAIT_PCT = 5.0

#: Kinds the rule of thumb does not apply to: memory, paths and aggregates, not disks.
EXCLUDED_KINDS = frozenset({"ram", "port", "lcu", "tablespace"})

SOURCE = ("[Goodus] §3.4 (Solaris iostat -x rules of thumb: svc_t <= 30 ms normal; 30-50 ms "
          "with %b <= 5 % normal; svc_t >= 50 ms with %b >= 20 % = bottleneck; %w >= 5 % = "
          "heavily loaded)")


def check(ctx: AnalysisContext) -> list[Finding]:
    """Findings for every disk-like device with a response time or a %w figure."""
    out: list[Finding] = []
    for dev in ctx.devices.values():
        if (dev.windows.height == 0 or dev.kind in EXCLUDED_KINDS
                or judged_via_parent(ctx, dev) or _is_benchmark_job(dev)
                or _is_array_backend(dev)):
            continue
        out.extend(_check_device(ctx, dev))
    return out


def _is_array_backend(dev: DeviceContext) -> bool:
    """An RMF ESS rank or extent pool: its RTIME/OP is the array's back-end time per
    operation (destage included: [Yuge]'s 141.4 ms write RTIME/OP on a rank whose volumes
    answered in 1.5 ms), not a response time anyone waits for; ranks are judged against
    their capability (``capability_exceeded``, ``concentration``)."""
    return dev.source == "rmf" and dev.kind in ("rank", "other")


def _is_benchmark_job(dev: DeviceContext) -> bool:
    """A fio job (``fio:<job>``, kind ``other``): its latency is what the benchmark's chosen
    queue depth produces, not an operational response time; the disks fio reports on
    (``disk_util``) are judged as devices."""
    return dev.source == "fio" and dev.kind == "other"


def _check_device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    has_latency = has(w, "await_ms") or has(w, "r_await_ms") or has(w, "w_await_ms")
    has_wait = has(w, "queue_wait_pct")
    if not (has_latency or has_wait):
        return []
    svc, busy, wpct = pl.col("_svc"), c(w, "util_pct"), c(w, "queue_wait_pct")
    # Judge response time only in windows with no explicit expectation (see docstring) and
    # with real activity: an idle window's 0.0 await is "no request", not "fast". Below
    # BOTTLENECK_BUSY_PCT the window is not loaded: latency_without_load judges it.
    judged = pl.col("target_ms").is_null() & (pl.col("_iops").fill_null(0.0) >= ACTIVE_IOPS)
    bottleneck = judged & (svc >= BOTTLENECK_MS) & (busy >= BOTTLENECK_BUSY_PCT)
    above = judged & (svc > NORMAL_MS) & (busy >= BOTTLENECK_BUSY_PCT)
    no_busy = judged & (svc >= BOTTLENECK_MS) & busy.is_null()
    heavy = wpct >= HEAVY_WAIT_PCT
    # Rank by response time relative to the bottleneck line, %w relative to its threshold.
    score = pl.max_horizontal(
        pl.when(judged).then(svc / BOTTLENECK_MS).otherwise(None), wpct / HEAVY_WAIT_PCT)
    wt = (w.lazy()
          .with_columns(*latency_target_exprs(ctx, dev), *_worst_op(w), _iops=iops_expr(w))
          .with_columns(_bottleneck=bottleneck.fill_null(value=False),
                        _above=(above | no_busy).fill_null(value=False),
                        _heavy=heavy.fill_null(value=False), _score=score)
          .with_columns(_level=level_expr(critical=pl.col("_bottleneck"),
                                          warning=pl.col("_above") | pl.col("_heavy")))
          .collect())
    found = find_runs(wt, "_level", "_score", window_s=ctx.window_s)
    return [_finding(ctx, dev, run, found) for run in found.runs]


def _worst_op(w: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """``_svc``: the slower of reads and writes where the source splits them (a 437 ms
    write average must not hide behind fast reads), else the combined response time;
    ``_what``: which ("writes", "reads", "response")."""
    ops = [(col, rate, name) for col, rate, name in
           (("r_await_ms", "r_iops", "reads"), ("w_await_ms", "w_iops", "writes"))
           if has(w, col) and has(w, rate)]
    if not ops:
        return await_expr(w).alias("_svc"), pl.lit("response").alias("_what")
    vals = [pl.when(c(w, rate).fill_null(0.0) >= ACTIVE_IOPS).then(c(w, col)).otherwise(None)
            for col, rate, _n in ops]
    svc = pl.coalesce(pl.max_horizontal(vals), await_expr(w))
    what: pl.Expr = pl.lit("response")
    for v, (_c, _r, name) in zip(vals, ops, strict=True):
        what = pl.when(v.is_not_null() & (v >= svc)).then(pl.lit(name)).otherwise(what)
    return svc.alias("_svc"), what.alias("_what")


def _finding(ctx: AnalysisContext, dev: DeviceContext, run: Run, found: Matches) -> Finding:
    label = window_label(ctx.window_s, ctx.timeline)
    worst = run.worst
    svc = worst.get("_svc")
    what = str(worst.get("_what") or "response")
    busy = worst.get("util_pct")
    wpct = worst.get("queue_wait_pct")
    bottleneck = bool(run.part["_bottleneck"].any())
    above = bool(run.part["_above"].any())
    heavy = bool(run.part["_heavy"].any())
    note = f"worst {label} window" if run.windows > 1 else f"{label} window"
    evidence: list[Evidence] = []
    if bottleneck or above:
        evidence.append(Evidence("svc_t_ms", None if svc is None else float(svc), "ms",
                                 threshold=BOTTLENECK_MS if bottleneck else NORMAL_MS,
                                 op=">=" if bottleneck else ">",
                                 note=f"response time incl. queue (svc_t / await; {what}), "
                                      f"{note}"))
        evidence.append(Evidence("busy_pct", None if busy is None else float(busy), "%",
                                 threshold=None if busy is None else BOTTLENECK_BUSY_PCT,
                                 op="" if busy is None else ">=",
                                 note=("%b / %util" if busy is not None
                                       else "not reported: the busy condition cannot be "
                                            "checked")))
        if run.windows > 1:
            evidence.append(Evidence("svc_t_ms_run_mean", run.wmean("_svc", "_iops"), "ms",
                                     note="operation-weighted mean over the run"))
    if heavy:
        evidence.append(Evidence("wait_pct", None if wpct is None else float(wpct), "%",
                                 threshold=HEAVY_WAIT_PCT, op=">=",
                                 note=f"%w: wait queue non-empty, {note}"))
    evidence.append(Evidence("iops", None if worst.get("_iops") is None
                             else float(worst["_iops"]), "IO/s", note=note))
    parts = []
    if bottleneck:
        title = (f"Bottleneck: {what} {fmt_ms(svc)} at {fmt_pct(busy)} busy "
                 f"([Goodus]: >= {fmt_ms(BOTTLENECK_MS)} at >= "
                 f"{fmt_pct(BOTTLENECK_BUSY_PCT)})")
        parts.append("A response time of 50 ms or more while the disk is busy at least 20 % "
                     "of the time is what [Goodus] calls a disk bottleneck: the disk is "
                     "working and each request still takes long, so the applications on it "
                     "wait on I/O.")
    elif above:
        if busy is None:
            title = (f"{what.capitalize()} {fmt_ms(svc)}: above the {fmt_ms(BOTTLENECK_MS)} "
                     "line; busy not reported")
            parts.append("The response time is above [Goodus]'s 50 ms bottleneck line, but "
                         "this source reports no busy figure, so whether the disk was loaded "
                         "(>= 20 % busy) cannot be checked; a bottleneck is not claimed.")
        else:
            title = (f"{what.capitalize()} {fmt_ms(svc)} at {fmt_pct(busy)} busy: above "
                     f"[Goodus]'s normal {fmt_ms(NORMAL_MS)}")
            parts.append("[Goodus] treats up to 30 ms as normal; this disk is loaded (at "
                         "least 20 % busy) and slower than that, though not yet in the "
                         "bottleneck band.")
    else:
        title = f"Heavily loaded: wait queue non-empty {fmt_pct(wpct)} of the time (%w)"
    if heavy:
        parts.append(f"%w {fmt_pct(wpct)} means requests waited in the driver's queue before "
                     "the disk accepted them during that share of the time; [Goodus] calls a "
                     "disk with %w >= 5 % heavily loaded.")
        if bottleneck or above:
            title += f"; %w {fmt_pct(wpct)}"
    suggestion = ("Find what issues the I/O in this window and spread it: move busy files to "
                  "other disks or stripe them ([Goodus] tuning: find the resource that reached "
                  "100 % busy), enlarge transfers for sequential work (read-ahead / "
                  "write-behind, see small_sequential_io), and check the queueing and "
                  "saturation findings for where the time goes.")
    return run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                       explanation=" ".join(parts), suggestion=suggestion, source=SOURCE)
