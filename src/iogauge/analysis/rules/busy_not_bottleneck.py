"""Busy is not bottleneck: read %util together with the host's CPU (%user, %iowait).

[Insight-SSD9] ran the same Oracle workloads on a hard disk and on an SSD and read
``iostat -x`` with the CPU lines:

* **INSERT**: high %util, high %iowait, low %user — the CPU waits for the disk: the disk is
  the bottleneck (moving the data to SSD raised %user and throughput);
* **SELECT** (full scans of small tables): the disk was 72-88 % busy on HDD (8x the SSD's
  busy), yet %iowait was 0 and %user above 90 % in every configuration, and SQL response
  hardly differed — the database buffer cache absorbs the reads: the disk is *busy but not
  the bottleneck*; tuning logical I/O (indexes, SQL), not the disk, would help.

Per window (means over the window), on devices with %util:

* busy: %util at least :data:`BUSY_PCT` (60 %, as ``summary.BUSY_HIGH_PCT``; [Insight-SSD9]'s
  busy HDD windows are 72.2 % and 88.2 %);
* **busy, not the bottleneck** (``info``): %iowait at most :data:`IOWAIT_LOW_PCT` (5 %) and
  %user + %nice at least :data:`USER_HIGH_PCT` (70 %) — the CPUs are busy with the
  application and almost never idle waiting for I/O ([Insight-SSD9]: 0 % iowait, 90-93 % user);
* **the disk is the bottleneck**: %iowait at least :data:`IOWAIT_HIGH_PCT` (20 %) and at
  least %user + %nice — the CPUs wait for I/O more than they compute ([Insight-SSD9]'s INSERT
  case): **warning**, **critical** from :data:`UTIL_CRITICAL_PCT` (90 %, inside [Oe]'s
  80-95 % proportional-limit busy rate) on a device where %util measures capacity (not
  known to serve requests in parallel; on SSD/NVMe/RAID %util saturates early, [sysstat] iostat(1)).

Where the data has the kernel's I/O pressure stall information (``psi_io_some_pct``,
``psi_io_full_pct``: live collection reads ``/proc/pressure/io``), it is used ahead of
%iowait: it measures directly whether tasks waited for I/O, whatever the CPU count.

* **busy, not the bottleneck** (``info``): tasks stalled on I/O at most :data:`PSI_LOW_PCT`
  (2 %) of the time while %user + %nice is at least :data:`USER_HIGH_PCT` -- "88 % busy,
  but tasks stalled on I/O 0.4 % of the time" answers [Insight-SSD9]'s question directly.
  The CPU condition stays: a task waiting for asynchronous I/O (libaio) is no stall to
  PSI, so a quiet stall share alone does not make the work CPU-bound;
* **the disk is the bottleneck**: some task stalled at least :data:`PSI_HIGH_PCT` (20 %) of
  the time (**warning**), every non-idle task at once at least :data:`PSI_FULL_CRITICAL_PCT`
  (10 %) of the time (**critical**). PSI is host-wide: the explanation says so.

%iowait is averaged over all CPUs: one thread waiting for I/O on an 8-CPU host shows at most
12.5 %, so a low %iowait on a large host does not clear the disk by itself — the rule also
needs high %user for "not the bottleneck". Without CPU columns in the data (iostat ``-d``,
sar without ``-u``, perfmon without Processor counters) the rule cannot tell the two apart
and says so once per busy device.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    Matches,
    Run,
    c,
    find_runs,
    fmt_pct,
    has,
    judged_via_parent,
    level_expr,
    run_finding,
    span_finding,
    subject,
)
from iogauge.analysis.types import Claim, Evidence, Finding, RuleRole, Severity

RULE_ID = "busy_not_bottleneck"
ROLE = RuleRole.BUSY
DESCRIPTION = ("High %util read with the host CPU: 0 % iowait and high %user = busy, not the "
               "bottleneck; high %iowait with low %user = the disk is the bottleneck "
               "([Insight-SSD9] §5.4).")

BUSY_PCT = 60.0
IOWAIT_LOW_PCT = 5.0
USER_HIGH_PCT = 70.0
IOWAIT_HIGH_PCT = 20.0
UTIL_CRITICAL_PCT = 90.0
#: Kinds whose %util mirrors another device's or means nothing (judged there instead). A
#: loop device is judged only when its samples show it serves one request at a time (an
#: emulated or file-backed spindle): otherwise it mirrors the device under its file.
SKIP_KINDS = frozenset({"ram", "tablespace", "datafile", "lcu", "port"})
CPU_COLUMNS = ("cpu_user_pct", "cpu_iowait_pct")
#: What to do when the work waits for this disk (by %iowait or by the stall share).
BOTTLENECK_SUGGESTION = ("Reduce or spread the I/O on this device (faster media, more "
                         "spindles, write batching), or move the busiest data elsewhere; "
                         "check its response time against its capability.")
PSI_LOW_PCT = 2.0
PSI_HIGH_PCT = 20.0
PSI_FULL_CRITICAL_PCT = 10.0
PSI_COLUMNS = ("psi_io_some_pct", "psi_io_full_pct")
PSI_SOURCE = ("[Insight-SSD9] (busy, or the bottleneck?); Linux kernel "
              "Documentation/accounting/psi.rst (/proc/pressure/io: share of time some or all "
              "non-idle tasks stalled on I/O)")
SOURCE = ("[Insight-SSD9] (iostat %util with %user/%iowait; SELECT 88.2 % util, "
          "0 % iowait, ~90 % user = busy, not the bottleneck; INSERT high %iowait, low "
          "%user = disk bottleneck); [Oe] (knee at 80-95 % busy)")


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for dev in ctx.devices.values():
        w = dev.windows
        if dev.kind in SKIP_KINDS or w.height == 0 or not has(w, "util_pct"):
            continue
        if dev.kind == "loop" and dev.util_is_capacity is not True:
            continue
        if judged_via_parent(ctx, dev):
            continue
        out.extend(_device(ctx, dev))
    return out


def _device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    util = c(w, "util_pct")
    busy = util >= BUSY_PCT
    if all(has(w, col) for col in PSI_COLUMNS):
        return _by_pressure(ctx, dev, busy)
    if not all(has(w, col) for col in CPU_COLUMNS):
        return _no_cpu(ctx, dev, busy)
    user = c(w, "cpu_user_pct") + c(w, "cpu_nice_pct").fill_null(0.0)
    iowait = c(w, "cpu_iowait_pct")
    w = w.with_columns(_user=user, _iowait=iowait)
    not_bn = busy & (pl.col("_iowait") <= IOWAIT_LOW_PCT) & (pl.col("_user") >= USER_HIGH_PCT)
    bn = busy & (pl.col("_iowait") >= IOWAIT_HIGH_PCT) & (pl.col("_iowait") >= pl.col("_user"))
    capacity = dev.util_is_capacity is not False
    out: list[Finding] = []
    # the disk is the bottleneck: warning, critical when %util is a capacity measure and high
    level = level_expr(critical=bn & (util >= UTIL_CRITICAL_PCT) if capacity else None,
                       warning=bn)
    found = find_runs(w, level, score=pl.col("_iowait"), window_s=ctx.window_s)
    out.extend(_bottleneck(dev, run, found, capacity) for run in found.runs)
    # busy but not the bottleneck: info
    found_nb = find_runs(w, level_expr(info=not_bn), score=util, window_s=ctx.window_s)
    out.extend(_not_bottleneck(dev, run, found_nb) for run in found_nb.runs)
    return out


def _cpu_evidence(run: Run) -> list[Evidence]:
    worst = run.worst
    ev = []
    for col, name in (("cpu_user_pct", "%user"), ("cpu_nice_pct", "%nice"),
                      ("cpu_system_pct", "%system"), ("cpu_iowait_pct", "%iowait"),
                      ("cpu_idle_pct", "%idle")):
        v = worst.get(col)
        if v is not None:
            ev.append(Evidence(col, float(v), "%", note=f"host CPU {name}, window mean"))
    return ev


def _bottleneck(dev: DeviceContext, run: Run, found: Matches, capacity: bool) -> Finding:
    worst = run.worst
    util = float(worst["util_pct"])
    iowait = float(worst["_iowait"])
    user = float(worst["_user"])
    severity: Severity = "critical" if run.level >= 2 else "warning"
    evidence = [Evidence("util_pct", util, "%", BUSY_PCT, ">=", "window mean"),
                Evidence("cpu_iowait_pct", iowait, "%", IOWAIT_HIGH_PCT, ">=",
                         "window mean; also >= %user + %nice"),
                Evidence("cpu_user_nice_pct", user, "%", iowait, "<=",
                         "%user + %nice, window mean")]
    evidence += [e for e in _cpu_evidence(run) if e.metric != "cpu_iowait_pct"]
    aw = worst.get("await_ms")
    if aw is not None:
        evidence.append(Evidence("await_ms", float(aw), "ms", note="window mean"))
    explanation = (f"{dev.key} is {fmt_pct(util)} busy while the CPUs spend "
                   f"{fmt_pct(iowait)} idle waiting for I/O and only {fmt_pct(user)} on the "
                   "application: the work waits for the disk ([Insight-SSD9]'s INSERT case, where "
                   "moving the data to SSD raised %user and throughput).")
    if not capacity:
        explanation += (" This device serves requests in parallel, so %util does not say how "
                        "close it is to its limit; its latency and capability decide that.")
    return run_finding(
        RULE_ID, dev, run, found,
        title=(f"{dev.key} is the bottleneck: {fmt_pct(util)} busy, CPU {fmt_pct(iowait)} "
               f"iowait vs {fmt_pct(user)} user"),
        evidence=evidence, explanation=explanation,
        suggestion=BOTTLENECK_SUGGESTION,
        source=SOURCE, severity=severity)


#: Words every "busy, not the bottleneck" title carries (the verdict reads the finding's
#: ``claim``, ``Claim.NOT_BOTTLENECK``, not these words).
NOT_BOTTLENECK = Claim.NOT_BOTTLENECK.value


def _not_bottleneck(dev: DeviceContext, run: Run, found: Matches) -> Finding:
    worst = run.worst
    util = float(worst["util_pct"])
    iowait = float(worst["_iowait"])
    user = float(worst["_user"])
    evidence = [Evidence("util_pct", util, "%", BUSY_PCT, ">=", "window mean"),
                Evidence("cpu_iowait_pct", iowait, "%", IOWAIT_LOW_PCT, "<=", "window mean"),
                Evidence("cpu_user_nice_pct", user, "%", USER_HIGH_PCT, ">=",
                         "%user + %nice, window mean")]
    evidence += [e for e in _cpu_evidence(run) if e.metric != "cpu_iowait_pct"]
    return _claims_not_bottleneck(run_finding(
        RULE_ID, dev, run, found,
        title=(f"{dev.key} {NOT_BOTTLENECK}: {fmt_pct(util)} util with CPU "
               f"{fmt_pct(user)} user and {fmt_pct(iowait)} iowait"),
        evidence=evidence,
        explanation=(f"{dev.key} is {fmt_pct(util)} busy, but the CPUs are almost never idle "
                     "waiting for I/O and spend their time in the application: the work is "
                     "CPU-bound. [Insight-SSD9]'s SELECT on a hard disk was 88 % busy with 0 % "
                     "iowait and ~90 % user; an SSD cut the busy to 12 % and changed neither "
                     "%user nor SQL response (the database buffer cache absorbed the reads)."),
        suggestion=("A faster disk will not speed this up; reduce CPU work instead (logical "
                    "I/O: indexes, SQL, caching). Watch this device again if %iowait rises."),
        source=SOURCE, severity="info"))


def _claims_not_bottleneck(f: Finding) -> Finding:
    f.claim = Claim.NOT_BOTTLENECK
    return f


def _no_cpu(ctx: AnalysisContext, dev: DeviceContext, busy: pl.Expr) -> list[Finding]:
    w = dev.windows
    found = find_runs(w, level_expr(info=busy), score=c(w, "util_pct"), window_s=ctx.window_s,
                      limit=1)
    if not found.runs:
        return []
    run = found.runs[0]
    util = float(run.worst["util_pct"])
    return [span_finding(
        RULE_ID, dev.key, (run.start, run.end), severity="info",
        title=(subject(dev) + f"{fmt_pct(util)} busy, CPU data absent: cannot tell busy from "
               "bottleneck"),
        evidence=[Evidence("util_pct", util, "%", BUSY_PCT, ">=", "worst window mean"),
                  Evidence("windows_busy", float(found.matched_windows), "windows",
                           note=f"of {found.total_windows}")],
        explanation=("High %util alone does not say the device limits the work: [Insight-SSD9]'s "
                     "SELECT kept a disk 88 % busy while the CPUs were the limit. That needs "
                     "the host's %user and %iowait over the same intervals, which the data "
                     "lacks."),
        suggestion=("Collect CPU figures with the disk figures (iostat -x without -d, "
                    "sar -u -d, perfmon Processor counters) and analyse again."),
        source=SOURCE)]


def _by_pressure(ctx: AnalysisContext, dev: DeviceContext, busy: pl.Expr) -> list[Finding]:
    """The verdict from I/O stall shares (PSI) rather than %iowait."""
    w = dev.windows.with_columns(_some=c(dev.windows, "psi_io_some_pct"),
                                 _full=c(dev.windows, "psi_io_full_pct"))
    util = c(w, "util_pct")
    bn = busy & (pl.col("_some") >= PSI_HIGH_PCT)
    level = level_expr(critical=bn & (pl.col("_full") >= PSI_FULL_CRITICAL_PCT), warning=bn)
    found = find_runs(w, level, score=pl.col("_some"), window_s=ctx.window_s)
    out = [_psi_finding(dev, run, found, stalled=True) for run in found.runs]
    # No stall is not yet CPU-bound work: a task waiting for asynchronous I/O (libaio's
    # io_getevents) is no I/O stall to PSI. The CPUs must be busy with the application too.
    quiet = busy & (pl.col("_some") <= PSI_LOW_PCT) & (
        c(w, "cpu_user_pct") + c(w, "cpu_nice_pct").fill_null(0.0) >= USER_HIGH_PCT)
    found_nb = find_runs(w, level_expr(info=quiet), score=util, window_s=ctx.window_s)
    out += [_psi_finding(dev, run, found_nb, stalled=False) for run in found_nb.runs]
    return out


def _psi_finding(dev: DeviceContext, run: Run, found: Matches, *, stalled: bool) -> Finding:
    worst = run.worst
    util, some = float(worst["util_pct"]), float(worst["_some"])
    # A critical run is critical by its worst "full" window, which need not be the window
    # of the most "some": quote the run's highest, so the evidence meets its threshold.
    full = run.max("_full") if stalled else float(worst["_full"])
    full = 0.0 if full is None else full
    evidence = [Evidence("util_pct", util, "%", BUSY_PCT, ">=", "window mean"),
                Evidence("psi_io_some_pct", some, "%",
                         PSI_HIGH_PCT if stalled else PSI_LOW_PCT, ">=" if stalled else "<=",
                         "share of the window some task stalled on I/O (host-wide)"),
                Evidence("psi_io_full_pct", full, "%",
                         PSI_FULL_CRITICAL_PCT if stalled else None, ">=" if stalled else "",
                         ("highest window of the run: " if stalled else "")
                         + "share of the window all non-idle tasks stalled on I/O")]
    evidence += _cpu_evidence(run)
    if not stalled:
        return _claims_not_bottleneck(run_finding(
            RULE_ID, dev, run, found,
            title=(f"{dev.key} {NOT_BOTTLENECK}: {fmt_pct(util)} util, but tasks stalled on "
                   f"I/O {fmt_pct(some)} of the time"),
            evidence=evidence,
            explanation=(f"{dev.key} is {fmt_pct(util)} busy, yet the kernel counted tasks "
                         f"waiting for I/O only {fmt_pct(some)} of the time (PSI, all devices "
                         "together): nothing waits for this disk. [Insight-SSD9] asked this "
                         "of an 88 % busy disk under a CPU-bound SELECT; the stall share "
                         "answers it directly, where %iowait is only a hint on a multi-core "
                         "host."),
            suggestion=("A faster disk will not speed this up; look at what the tasks wait "
                        "for instead (CPU, locks, the network). Watch the stall share if the "
                        "load grows."),
            source=PSI_SOURCE, severity="info"))
    severity: Severity = "critical" if run.level >= 2 else "warning"
    return run_finding(
        RULE_ID, dev, run, found,
        title=(f"{dev.key} is the bottleneck: {fmt_pct(util)} busy, tasks stalled on I/O "
               f"{fmt_pct(some)} of the time ({fmt_pct(full)} all at once)"),
        evidence=evidence,
        explanation=(f"While {dev.key} was {fmt_pct(util)} busy, some task waited for I/O "
                     f"{fmt_pct(some)} of the time and every non-idle task at once "
                     f"{fmt_pct(full)} of it: the work waits for storage. PSI counts stalls "
                     "on any device of the host: check that this is the busy one."),
        suggestion=BOTTLENECK_SUGGESTION,
        source=PSI_SOURCE, severity=severity)
