"""What the data cannot say: %util that is not a capacity measure, and missing latency.

Two "cannot judge" notes (severity ``info``), so that silence is never mistaken for health
(an honest "cannot judge"):

1. **High %util on a device where %util is not capacity.** %util is the share of time at
   least one request was in flight. sysstat's iostat(1) manual: "Device saturation occurs
   when this value is close to 100% for devices serving requests serially. But for devices
   serving requests in parallel, such as RAID arrays and modern SSDs, this number does not
   reflect their performance limits." ([sysstat] iostat(1); [Oe] lists it among the method's
   weaknesses.) For devices with ``util_is_capacity`` False (SSD/NVMe/RAID/cloud profiles,
   dm/md, ranks...), unknown (None: no profile, no rotational flag), or whose %util exceeds
   100 % anywhere (only parallel service or a differently counted busy can do that), a run
   of windows at >= :data:`HIGH_UTIL_PCT` = 80 % (the low end of [Oe]'s knee band, where
   a one-at-a-time device would be near saturation) gets one note per device: it does not
   mean saturation, look at response time and queue instead - with the window's values.
2. **No response time at all** (``await_ms``, ``r_await_ms``, ``w_await_ms`` all null, e.g.
   ``iostat -d``, ``sar -b``) on a device that did I/O: the response-time rules
   (``response_time_target``, ``solaris_service_time``, ``queueing``, the latency part of
   ``saturation``) cannot judge it; one note over the whole span.

Partitions and datafiles whose parent is in the data are left to the parent.
"""

from __future__ import annotations

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    await_expr,
    c,
    find_runs,
    fmt_pct,
    has,
    iops_expr,
    judged_via_parent,
    level_expr,
    run_finding,
    span_finding,
    whole_span,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole

RULE_ID = "util_not_capacity"
ROLE = RuleRole.CONTEXT
DESCRIPTION = ("Says what the data cannot support: %util >= 80 % on devices that serve "
               "requests in parallel (or unknown) is not saturation; devices without "
               "response times cannot be judged by the latency rules.")

#: %util from which a note is worth making ([Oe]: knees at 80-95 %).
HIGH_UTIL_PCT = 80.0
#: %util above this proves the source counts busy time that is not "one at a time".
OVER_FULL_PCT = 100.0

SOURCE_UTIL = ("[sysstat] iostat(1) manual, %util: 'for devices serving requests in parallel, "
               "such as RAID arrays and modern SSDs, this number does not reflect their "
               "performance limits' (a capacity measure only for one-at-a-time devices); "
               "[Oe] (busy rate per IOPS measured on single-device members)")
SOURCE_LATENCY = ("[MS-Azure-JP] (response time is the judgement metric); iogauge says "
                  "when the data cannot support a judgement")


def check(ctx: AnalysisContext) -> list[Finding]:
    """At most one note of each kind per device."""
    out: list[Finding] = []
    for dev in ctx.devices.values():
        if dev.windows.height == 0 or judged_via_parent(ctx, dev):
            continue
        out.extend(_high_util(ctx, dev))
        out.extend(_no_latency(dev))
    return out


def _why_not_capacity(dev: DeviceContext, over_full: bool) -> tuple[str, str]:
    """(short reason for the title, sentence for the explanation)."""
    if over_full:
        return ("%util above 100 %",
                ("%util went above 100 %, which only a device serving several requests at once "
                 "(or a source that sums busy time over parallel paths) can show."))
    decision = dev.service_decision()
    if dev.util_is_capacity is None:
        return ("service model undetermined",
                (f"Whether this device serves one request at a time is undetermined "
                 f"({decision.summary}): if it serves them in parallel (SSD, NVMe, RAID, "
                 "cloud volume), %util says nothing about its capacity."))
    if str(decision.decided_by) != "label":
        return (f"parallel ({decision.decided_by})", f"This device {decision.summary}.")
    cap = dev.capability
    if cap is not None and cap.parallel:
        return (f"{cap.title} serves requests in parallel",
                (f"The matched profile ({cap.title}, {cap.profile}) serves requests in "
                 "parallel."))
    if dev.kind in ("dm", "md"):
        return (f"{dev.kind} device over other devices",
                (f"A {dev.kind} device passes requests to the devices under it, which serve "
                 "them in parallel (its samples did not show otherwise)."))
    if dev.kind in ("rank", "lcu", "port"):
        return (f"{dev.kind} aggregate", f"A {dev.kind} aggregates several devices or paths.")
    if dev.kind == "logical_disk":
        return ("a Windows volume",
                ("A LogicalDisk is a volume that may span several physical disks ([MS-Azure-JP]: "
                 "look at the logical disk first, then the physical ones)."))
    return ("parallel device", f"This device {decision.summary}.")


def _high_util(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    if not has(w, "util_pct"):
        return []
    util = c(w, "util_pct")
    peak_col = "util_pct_max" if has(w, "util_pct_max") else "util_pct"
    peak_max = w[peak_col].max()
    over_full = peak_max is not None and float(peak_max) > OVER_FULL_PCT  # type: ignore[arg-type]
    if dev.util_is_capacity and not over_full:
        return []  # %util is capacity here: saturation judges it
    wt = (w.lazy().with_columns(_await=await_expr(w), _iops=iops_expr(w),
                                _level=level_expr(info=util >= HIGH_UTIL_PCT)).collect())
    found = find_runs(wt, "_level", "util_pct", window_s=ctx.window_s, limit=1)
    out = []
    short, why = _why_not_capacity(dev, over_full)
    for run in found.runs:
        worst = run.worst
        evidence = [
            Evidence("util_pct", run.tmean("util_pct"), "%", threshold=HIGH_UTIL_PCT, op=">=",
                     note=f"time-weighted mean over the run (peak {fmt_pct(run.max(peak_col))})"),
            Evidence("util_is_capacity", "unknown" if dev.util_is_capacity is None
                     else str(dev.util_is_capacity).lower(), "", note=short),
        ]
        look = []
        if worst.get("_await") is not None:
            evidence.append(Evidence("await_ms", float(worst["_await"]), "ms",
                                     note="response time in the run's highest-%util window"))
            look.append("response time")
        if worst.get("aqu_sz") is not None:
            evidence.append(Evidence("aqu_sz", float(worst["aqu_sz"]), "requests",
                                     note="mean requests outstanding in that window"))
            look.append("queue")
        if worst.get("_iops") is not None:
            evidence.append(Evidence("iops", float(worst["_iops"]), "IO/s",
                                     note="in that window"))
        title = (f"%util {fmt_pct(run.tmean('util_pct'))} does not mean saturation here "
                 f"({short})")
        explanation = (why + " %util is the share of time at least one request was in "
                       "flight; such a device reaches 100 % with a single request outstanding "
                       "and can still take much more. Its limits show in the response time "
                       "and the queue: saturation is latency climbing while throughput stays "
                       "flat.")
        if not look:
            explanation += " This source reports neither, so its load cannot be judged."
        suggestion = ("Judge this device by its response time against its target or design "
                      "latency and by latency vs throughput (the response_time_target and "
                      "saturation findings); for its capacity, compare IOPS and MB/s with "
                      "the device's published limits for this workload.")
        out.append(run_finding(RULE_ID, dev, run, found, severity="info", title=title,
                               evidence=evidence, explanation=explanation,
                               suggestion=suggestion, source=SOURCE_UTIL))
    return out


def _no_latency(dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    if has(w, "await_ms") or has(w, "r_await_ms") or has(w, "w_await_ms"):
        return []
    peak_iops = w.select(iops_expr(w).max()).item()  # one query, only for such devices
    if peak_iops is None or float(peak_iops) < ACTIVE_IOPS:
        return []  # idle, or no I/O counts at all: nothing to judge
    span = whole_span(dev)
    if span is None:
        return []
    has_util = has(w, "util_pct")
    evidence = [
        Evidence("await_ms", None, "ms", note="not reported by this source"),
        Evidence("iops_peak", float(peak_iops), "IO/s", threshold=ACTIVE_IOPS, op=">=",
                 note="the device did I/O"),
        Evidence("util_pct", "reported" if has_util else "not reported", ""),
    ]
    explanation = ("The source reports no response time for this device, so the rules "
                   "that judge response time (targets, [Goodus]'s service-time rule, "
                   "queueing, drop-off) cannot say whether it was slow. A verdict on it rests "
                   "on load alone" + (" and %util." if has_util else "."))
    suggestion = ("Collect extended statistics: iostat -x (r_await/w_await), sar -d, "
                  "perfmon Avg. Disk sec/Read and sec/Write, or iogauge's own collector.")
    return [span_finding(RULE_ID, dev.key, span, severity="info",
                         title="No response time in the data: latency rules cannot judge",
                         evidence=evidence, explanation=explanation, suggestion=suggestion,
                         source=SOURCE_LATENCY)]
