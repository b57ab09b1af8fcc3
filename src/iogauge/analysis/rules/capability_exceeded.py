"""Load at or beyond what the device does for this workload's attributes.

[Yuge]: a measured throughput means nothing until it is set against
what the device can do *for the observed mix* — one DS8000 RAID-5 rank does ~2,200 IO/s of
4 kB random reads (~8 MB/s) but ~600 MB/s sequential, so "300 MB/s on a rank says nothing
until you know the mix". The capability catalog (``catalog.capability_for``) interpolates a
profile's limits by the workload's attributes (random/sequential share, transfer size,
read/write ratio) into ``expected_iops`` / ``expected_MBps`` and the peak share
``used_pct``; this rule turns that into findings:

* per window, used = max(IO/s / expected IO/s, MB/s / expected MB/s) x 100 (window means);
  runs of windows at or above :data:`NEAR_PCT` (80 %) are reported, **critical** when a
  window reaches :data:`EXCEEDED_PCT` (100 %: "beyond what this device does for this mix")
  and the response time there is elevated (at or above the profile's design latency, or
  twice its typical latency) or the load is :data:`CLEARLY_BEYOND_PCT` (110 %) or more;
  else **warning** ("near", or "at its limit" with a normal response time: [MS-Azure-JP]'s
  Premium SSD answering in 3.5 ms at its 5,000 IO/s cap is fine, just full). 80 % leaves
  the margin [Yuge] asks for ("the published maximum must be read with some latitude")
  and sits at the bottom of [Oe]'s 80-95 % proportional-limit busy rate, beyond which
  response climbs non-linearly;
* when no window mean reaches 80 % but the catalog's ``used_pct`` (from the busiest
  *interval*) does, one finding names the window holding that peak: short peaks inside
  longer windows are still load the device could not serve faster;
* without a capability (no profile matched, or the profile has no limits for the mix) there
  is no finding: the engine reports that no profile matched.

Mixed read/write with a sequential majority (reads between 20 and 80 % of operations,
sequential share at least 50 %) gets [Yuge]'s caveat in the explanation: mixing reads and
writes (and a little random I/O) breaks up the large sequential transfers, so the device
delivers less than its pure-sequential figure — [Yuge]'s rank was at its limit at ~440 of
~600 MB/s.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    Matches,
    Run,
    find_runs,
    fmt_num,
    fmt_pct,
    iops_expr,
    kBps_expr,
    level_expr,
    run_finding,
    span_finding,
    subject,
)
from iogauge.analysis.types import Attributes, Capability, Evidence, Finding, RuleRole, Severity

RULE_ID = "capability_exceeded"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Peak load against the catalog capability for the workload's mix: >= 80 % "
               "near (warning), >= 100 % beyond (critical) ([Yuge] §5.1 step 3, [Oe] "
               "knee 80-95 %).")

NEAR_PCT = 80.0
EXCEEDED_PCT = 100.0
#: Beyond the expected capability by more than the catalog's own uncertainty (the
#: interpolation and the published figures carry ~10 %): critical whatever the latency.
CLEARLY_BEYOND_PCT = 110.0
#: Response time at or above this multiple of the profile's typical latency counts as
#: elevated (queueing has at least doubled the service time: utilisation >= 50 % in M/M/1).
ELEVATED_LATENCY_X = 2.0
#: [Yuge]'s caveat applies to mixes with reads in this range and a sequential majority.
MIXED_READ_PCT = (20.0, 80.0)
MIXED_SEQ_MIN_PCT = 50.0
SOURCE = ("[Yuge] (judge load against the device's capability for "
          "the observed attributes; mixed R/W lowers sequential capability); [Oe] "
          "(proportional-limit busy rate 80-95 %); capability figures: the profile's sources")


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for dev in ctx.devices.values():
        cap = dev.capability
        if cap is None or dev.windows.height == 0:
            continue
        if not cap.expected_iops and not cap.expected_MBps and cap.used_pct is None:
            continue
        out.extend(_device(ctx, dev, cap))
    return out


def _used_expr(w: pl.DataFrame, cap: Capability) -> pl.Expr | None:
    ratios = []
    if cap.expected_iops:
        ratios.append(100.0 * iops_expr(w) / cap.expected_iops)
    if cap.expected_MBps:
        ratios.append(100.0 * kBps_expr(w) / 1024.0 / cap.expected_MBps)
    if not ratios:
        return None
    return pl.max_horizontal(ratios)


def elevated_limit_ms(cap: Capability) -> float | None:
    """Response time (ms) from which latency counts as elevated for this profile, or None
    when the profile publishes no latency (then 100 % used alone is critical)."""
    if cap.latency_ms_design is not None:
        return cap.latency_ms_design
    if cap.latency_ms_typical is not None:
        return ELEVATED_LATENCY_X * cap.latency_ms_typical
    return None


def _latency_elevated(w: pl.DataFrame, cap: Capability) -> pl.Expr:
    limit = elevated_limit_ms(cap)
    if limit is None or "await_ms" not in w.columns:
        return pl.lit(value=True)
    return pl.col("await_ms").fill_null(float("inf")) >= limit


def _device(ctx: AnalysisContext, dev: DeviceContext, cap: Capability) -> list[Finding]:
    w = dev.windows
    used = _used_expr(w, cap)
    if used is not None:
        w = w.with_columns(_used=used, _io=iops_expr(w), _mb=kBps_expr(w) / 1024.0)
        level = level_expr(critical=(pl.col("_used") >= CLEARLY_BEYOND_PCT)
                           | ((pl.col("_used") >= EXCEEDED_PCT) & _latency_elevated(w, cap)),
                           warning=pl.col("_used") >= NEAR_PCT)
        found = find_runs(w, level, score=pl.col("_used"), window_s=ctx.window_s)
        if found:
            return [_run_finding(dev, cap, run, found) for run in found.runs]
    if cap.used_pct is not None and cap.used_pct >= NEAR_PCT:
        return [_peak_finding(dev, cap)]
    return []


def _mix(a: Attributes | None) -> str:
    if a is None:
        return "this mix"
    parts = []
    if a.read_pct is not None:
        parts.append(f"{a.read_pct:.0f} % reads")
    if a.seq_pct is not None:
        parts.append(f"{a.seq_pct:.0f} % sequential"
                     + (" (estimated)" if a.seq_method == "estimate" else ""))
    if a.areq_kB_mean is not None:
        parts.append(f"{fmt_num(a.areq_kB_mean)} kB requests")
    return ", ".join(parts) if parts else "this mix"


def _attribute_evidence(a: Attributes | None, cap: Capability) -> list[Evidence]:
    ev: list[Evidence] = []
    if a is not None:
        if a.read_pct is not None:
            ev.append(Evidence("read_pct", a.read_pct, "%", note="share of operations"))
        if a.seq_pct is not None:
            ev.append(Evidence("seq_pct", a.seq_pct, "%", note=f"method: {a.seq_method}"))
        if a.areq_kB_mean is not None:
            ev.append(Evidence("areq_kB", a.areq_kB_mean, "kB", note="IOPS-weighted mean"))
    ev.append(Evidence("capability_profile", cap.profile, "",
                       note=f"{cap.title}; matched by {cap.matched_by}"
                       + (f"; sources: {'; '.join(cap.sources)}" if cap.sources else "")))
    return ev


def _caveat(a: Attributes | None) -> str:
    if (a is None or a.read_pct is None or a.seq_pct is None
            or not MIXED_READ_PCT[0] <= a.read_pct <= MIXED_READ_PCT[1]
            or a.seq_pct < MIXED_SEQ_MIN_PCT):
        return ""
    return (" Reads and writes are mixed in a mostly sequential workload: mixing breaks up "
            "the large sequential transfers (and any random I/O interrupts them), so the "
            "device delivers less than its pure-sequential figure — [Yuge]'s DS8000 rank "
            "was at its limit at ~440 MB/s against ~600 MB/s published for sequential reads "
            "or writes alone.")


def _words(severity: Severity, used: float = 0.0) -> tuple[str, str]:
    if severity == "critical":
        return "beyond", "beyond what this device does for this mix"
    if used >= EXCEEDED_PCT:
        return "at", ("at what this device does for this mix, with the response time still "
                      "normal: full, not yet overloaded")
    return "near", "near what this device does for this mix"


def _run_finding(dev: DeviceContext, cap: Capability, run: Run, found: Matches) -> Finding:
    worst = run.worst
    used = float(worst["_used"])
    io = worst.get("_io")
    mb = worst.get("_mb")
    severity: Severity = "critical" if run.level >= 2 else "warning"
    word, phrase = _words(severity, used)
    a = dev.attributes
    # name the figure that sets the ratio
    io_ratio = (100.0 * float(io) / cap.expected_iops
                if io is not None and cap.expected_iops else None)
    mb_ratio = (100.0 * float(mb) / cap.expected_MBps
                if mb is not None and cap.expected_MBps else None)
    by_mb = mb_ratio is not None and (io_ratio is None or mb_ratio >= io_ratio)
    load = (f"{fmt_num(mb)} MB/s of ~{fmt_num(cap.expected_MBps, 0)} MB/s" if by_mb
            else f"{fmt_num(io)} IO/s of ~{fmt_num(cap.expected_iops, 0)} IO/s")
    title = (subject(dev) + f"{load} = {fmt_pct(used)} of its capability for {_mix(a)}: "
             f"{word} the limit")
    threshold = EXCEEDED_PCT if severity == "critical" else NEAR_PCT
    evidence = [Evidence("used_pct", used, "%", threshold, ">=",
                         "worst window: max of IO/s and MB/s over the expected figures")]
    if io is not None:
        evidence.append(Evidence("iops", float(io), "IO/s", cap.expected_iops,
                                 "" if cap.expected_iops is None else
                                 (">=" if float(io) >= cap.expected_iops else "<"),
                                 "window mean; threshold = expected IO/s for the mix"))
    if mb is not None:
        evidence.append(Evidence("MBps", float(mb), "MB/s", cap.expected_MBps,
                                 "" if cap.expected_MBps is None else
                                 (">=" if float(mb) >= cap.expected_MBps else "<"),
                                 "window mean; threshold = expected MB/s for the mix"))
    peak_io = run.max("iops_max") if "iops_max" in run.part.columns else None
    if peak_io is not None:
        evidence.append(Evidence("iops_peak", peak_io, "IO/s",
                                 note="busiest interval inside the run"))
    if cap.used_pct is not None:
        evidence.append(Evidence("catalog_used_pct", cap.used_pct, "%",
                                 note="catalog: busiest interval of the whole data"))
    evidence += _attribute_evidence(a, cap)
    explanation = (f"The load on {dev.key} is {phrase}: the catalog profile {cap.profile} "
                   f"({cap.title}) expects about "
                   + " / ".join(x for x in (
                       f"{fmt_num(cap.expected_iops, 0)} IO/s" if cap.expected_iops else "",
                       f"{fmt_num(cap.expected_MBps, 0)} MB/s" if cap.expected_MBps else "")
                       if x)
                   + f" for {_mix(a)}. Beyond that, requests queue and response time climbs "
                   "faster than the load.")
    if cap.notes:
        explanation += " Profile adjustments: " + "; ".join(cap.notes) + "."
    explanation += _caveat(a)
    suggestion = ("Move or spread load off this device, or give it more capability (faster "
                  "media, more drives/ranks, a larger cloud tier); check the response time in "
                  "the same windows. If the profile is wrong, name the right one with "
                  "--profile DEVICE=NAME.")
    return run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                       explanation=explanation, suggestion=suggestion, source=SOURCE,
                       severity=severity)


def _peak_finding(dev: DeviceContext, cap: Capability) -> Finding:
    used = float(cap.used_pct or 0.0)
    limit = elevated_limit_ms(cap)
    a = dev.attributes
    elevated = (limit is None or a is None or a.await_ms is None or a.await_ms >= limit)
    severity: Severity = ("critical" if used >= CLEARLY_BEYOND_PCT
                          or (used >= EXCEEDED_PCT and elevated) else "warning")
    word, phrase = _words(severity, used)
    w = dev.windows
    peak_col = "iops_max" if "iops_max" in w.columns else (
        "kBps_max" if "kBps_max" in w.columns else None)
    row = (w.sort(peak_col, descending=True, nulls_last=True).row(0, named=True)
           if peak_col is not None else w.row(0, named=True))
    a = dev.attributes
    evidence = [Evidence("used_pct", used, "%",
                         EXCEEDED_PCT if severity == "critical" else NEAR_PCT, ">=",
                         "catalog: busiest interval against the expected capability"),
                Evidence("window_mean_used_pct", None, "%", NEAR_PCT, "<",
                         "no window mean reached the threshold: short peaks only")]
    if peak_col is not None and row.get(peak_col) is not None:
        evidence.append(Evidence(peak_col.removesuffix("_max") + "_peak",
                                 float(row[peak_col]), "IO/s" if peak_col == "iops_max"
                                 else "kB/s", note="busiest interval"))
    evidence += _attribute_evidence(a, cap)
    return span_finding(
        RULE_ID, dev.key, (row["window_start"], row["window_end"]), severity=severity,
        title=(subject(dev) + f"peak intervals reach {fmt_pct(used)} of its capability for "
               f"{_mix(a)}: {word} the limit"),
        evidence=evidence,
        explanation=(f"In its busiest intervals the load on {dev.key} is {phrase} (profile "
                     f"{cap.profile}), though the window means stay lower: bursts the "
                     "device serves at its limit." + _caveat(a)),
        suggestion=("Check the response time in those intervals; smooth or move the bursts "
                    "(batch scheduling, rate limits) or add capability."),
        source=SOURCE)
