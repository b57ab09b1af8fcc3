"""Explain an RMF volume's response time by its IOSQ / PEND / DISC / CONN components.

[Yuge] starts every z/OS I/O analysis with the DIRECT ACCESS DEVICE
ACTIVITY report: a volume's AVG RESP TIME is the sum of

* **IOSQ** — queued in z/OS because the device (UCB) is already busy: host queuing, cured by
  more parallel access (PAV / HyperPAV aliases) or by spreading busy data sets;
* **PEND** — the I/O has been started but the device has not accepted it yet: channel, FICON
  director port or control unit contention (IBM: "A high pending time indicates that the
  channel or logical control unit is busy");
* **DISC** — the device works without transferring data: read cache misses (staging from
  the disks), a busy RAID rank, NVS full / destage delays;
* **CONN** — data transfer on the channel: proportional to the transfer size, longer on slow
  or busy channels.

Sources: IBM, *z/OS RMF Report Analysis* (SC34-2665), Direct Access Device Activity report
fields; IBM, "Measuring I/O response time"
(https://www.ibm.com/docs/en/zdsfcp/2.1.0?topic=resources-measuring-io-response-time).
IBM publishes what the components mean, not limits for them, so the thresholds below are
iogauge's, placed between [Yuge]'s own before/after numbers (DS8870, FICON, DB2 batch):

* a volume is looked at when its mean response is at least :data:`RESP_JUDGE_MS` (1.0 ms):
  [Yuge]'s problem state was 1.5 ms, its healthy state after the fix 0.6 ms;
* a component is *elevated* when it is at least its absolute limit
  (:data:`COMPONENT_LIMIT_MS`) **and** at least :data:`SHARE_MIN_PCT` of the response:
  IOSQ 0.2 ms (with HyperPAV a volume should not queue in the host at all), PEND 0.3 ms
  (FICON pending time is ~0.1-0.2 ms: [Yuge] shows 0.12-0.15 ms before and after),
  DISC 0.5 ms (a cache hit disconnects for ~0 ms; [Yuge]'s DISC fell from 0.60 ms on the
  saturated rank to 0.07-0.09 ms after the data was spread over two ranks), CONN 1.0 ms
  ([Yuge]'s large sequential DB2 transfers took 0.40-0.75 ms);
* severity: an elevated IOSQ, PEND or DISC is a **warning**, **critical** when the response
  is also at least :data:`RESP_CRITICAL_MS` (5 ms, ten times the ~0.5 ms of a cache-hit I/O
  on current DS8000s); an elevated CONN, or a response of 1 ms or more with no elevated
  component, is **info** (transfer time follows transfer size: it is explained, not wrong).

LCU summary lines (``device_kind`` ``lcu``) are not judged: they repeat their volumes.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    c,
    find_runs,
    fmt_pct,
    has,
    iops_expr,
    level_expr,
    run_finding,
    subject,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole, Severity

RULE_ID = "rmf_response_breakdown"
ROLE = RuleRole.LOAD
DESCRIPTION = ("RMF volume response time explained by its IOSQ/PEND/DISC/CONN components "
               "([Yuge] §5.1 step 1; IBM z/OS RMF Report Analysis, Direct Access Device "
               "Activity); thresholds between [Yuge]'s before/after values.")

#: Mean response (ms) from which a volume's breakdown is reported.
RESP_JUDGE_MS = 1.0
#: Response (ms) from which an elevated IOSQ/PEND/DISC is critical.
RESP_CRITICAL_MS = 5.0
#: Component -> absolute limit (ms per I/O) from which it is elevated.
COMPONENT_LIMIT_MS: dict[str, float] = {"iosq_ms": 0.2, "pend_ms": 0.3, "disc_ms": 0.5,
                                        "conn_ms": 1.0}
#: ... and the share of the response (%) it must also reach.
SHARE_MIN_PCT = 20.0
COMPONENTS: tuple[str, ...] = ("iosq_ms", "pend_ms", "disc_ms", "conn_ms")
#: Components whose elevation is a problem to fix (CONN is transfer time: informative).
TUNABLE: tuple[str, ...] = ("iosq_ms", "pend_ms", "disc_ms")
LABEL: dict[str, str] = {"iosq_ms": "IOSQ", "pend_ms": "PEND", "disc_ms": "DISC",
                         "conn_ms": "CONN"}
MEANING: dict[str, str] = {
    "iosq_ms": "queued in z/OS because the volume (UCB) was busy",
    "pend_ms": "waiting for the channel, director port or control unit to accept the I/O",
    "disc_ms": "the storage system working without transferring: read cache misses, a busy "
               "RAID rank or destage (NVS) delays",
    "conn_ms": "transferring data on the channel: large transfers or slow/busy channels",
}
ADVICE: dict[str, str] = {
    "iosq_ms": "Add parallel access: PAV/HyperPAV aliases for the volume (check the PAV "
               "column), or spread the busiest data sets over more volumes.",
    "pend_ms": "Check the CHANNEL PATH ACTIVITY report (channel utilisation), FICON director "
               "port and host adapter load, and the CMR/DB delay columns; add channel paths "
               "or move volumes behind less busy ones.",
    "disc_ms": "Check the CACHE SUBSYSTEM ACTIVITY report (read hit ratio, DFW/NVS delays) "
               "and the ESS RANK STATISTICS of the volume's rank: a rank shared by several "
               "busy volumes (see the concentration rule) raises DISC; spread the data over "
               "more ranks ([Yuge]: response 1.5 -> 0.6 ms).",
    "conn_ms": "Transfer time follows transfer size: check the I/O sizes and channel "
               "utilisation (CHANNEL PATH ACTIVITY); zHPF and faster links shorten it.",
}
SOURCE = ("[Yuge]; IBM z/OS RMF Report Analysis SC34-2665, Direct "
          "Access Device Activity report; IBM 'Measuring I/O response time' "
          "(https://www.ibm.com/docs/en/zdsfcp/2.1.0?topic=resources-measuring-io-response-"
          "time); thresholds: iogauge, between [Yuge]'s before (1.5 ms) and after (0.6 ms) "
          "values")


def _resp(w: pl.DataFrame) -> pl.Expr:
    """The response time: AVG RESP TIME, else the sum of the four components."""
    parts = pl.sum_horizontal([c(w, x).fill_null(0.0) for x in COMPONENTS])
    return pl.coalesce(c(w, "await_ms"), parts)


def _elevated(w: pl.DataFrame, comp: str) -> pl.Expr:
    resp = _resp(w)
    share = pl.when(resp > 0).then(100.0 * c(w, comp) / resp).otherwise(0.0)
    return (c(w, comp) >= COMPONENT_LIMIT_MS[comp]) & (share >= SHARE_MIN_PCT)


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for dev in ctx.devices.values():
        w = dev.windows
        if dev.kind == "lcu" or w.height == 0 or not any(has(w, x) for x in COMPONENTS):
            continue
        out.extend(_device(ctx, dev))
    return out


def _device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    resp = _resp(w)
    judged = (resp >= RESP_JUDGE_MS) & (iops_expr(w) >= ACTIVE_IOPS)
    tunable = pl.any_horizontal([_elevated(w, x) for x in TUNABLE])
    # level 3 critical, 2 warning, 1 info (explained response); level_expr knows 2 levels,
    # so the info level is added here: judged windows with nothing tunable elevated.
    level = (level_expr(critical=judged & tunable & (resp >= RESP_CRITICAL_MS),
                        warning=judged & tunable) + 1).cast(pl.Int8)
    level = pl.when(judged.fill_null(value=False)).then(level).otherwise(pl.lit(0, pl.Int8))
    found = find_runs(w, level, score=resp, window_s=ctx.window_s)
    findings: list[Finding] = []
    for run in found.runs:
        severity: Severity = ("critical" if run.level >= 3
                              else "warning" if run.level == 2 else "info")
        findings.append(_finding(dev, run, found, severity))
    return findings


def _finding(dev: DeviceContext, run: Run, found: Matches, severity: Severity) -> Finding:
    worst = run.worst
    parts = {x: worst.get(x) for x in COMPONENTS}
    known = {x: float(v) for x, v in parts.items() if v is not None}
    resp_v = worst.get("await_ms")
    resp = float(resp_v) if resp_v is not None else sum(known.values())
    share = {x: (100.0 * v / resp if resp > 0 else 0.0) for x, v in known.items()}
    elevated = [x for x in COMPONENTS if x in known and known[x] >= COMPONENT_LIMIT_MS[x]
                and share[x] >= SHARE_MIN_PCT]
    largest = max(known, key=lambda x: known[x])
    focus = [x for x in elevated if x in TUNABLE] or elevated or [largest]
    head = ", ".join(f"{LABEL[x]} {known[x]:.3f} ms ({share[x]:.0f} %)" for x in focus)
    if severity == "info":
        title = (subject(dev) + f"response {resp:.2f} ms is mostly {LABEL[largest]} "
                 f"({known[largest]:.3f} ms, {share[largest]:.0f} %): "
                 f"{MEANING[largest].split(':')[0]}")
    else:
        title = (subject(dev) + f"response {resp:.2f} ms with {head} elevated: "
                 f"{MEANING[focus[0]].split(':')[0]}")
    evidence = [Evidence("response_ms", resp, "ms", RESP_JUDGE_MS, ">=",
                         "AVG RESP TIME of the worst window")]
    for x in COMPONENTS:
        if x not in known:
            continue
        flag = x in elevated
        evidence.append(Evidence(LABEL[x].lower() + "_ms", known[x], "ms",
                                 COMPONENT_LIMIT_MS[x], ">=" if flag else "<",
                                 f"{share[x]:.1f} % of the response"
                                 + (" - elevated" if flag else "")))
    iops = worst.get("iops")
    if iops is not None:
        evidence.append(Evidence("iops", float(iops), "IO/s", note="DEVICE ACTIVITY RATE"))
    mean_resp = run.wmean("await_ms", "iops")
    if run.windows > 1 and mean_resp is not None:
        evidence.append(Evidence("response_run_mean_ms", mean_resp, "ms",
                                 note="I/O-weighted over the run"))
    explanation = (f"The response time of {dev.key} is the sum of IOSQ, PEND, DISC and "
                   f"CONN. " + " ".join(f"{LABEL[x]} {fmt_pct(share[x])}: "
                                        f"{MEANING[x]}." for x in focus)
                   + (f" The largest part is {LABEL[largest]} ({share[largest]:.0f} %)."
                      if largest not in focus else ""))
    suggestion = " ".join(ADVICE[x] for x in focus)
    return run_finding(RULE_ID, dev, run, found,
                       title=title, evidence=evidence, explanation=explanation,
                       suggestion=suggestion, source=SOURCE, severity=severity)
