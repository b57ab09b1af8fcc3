"""Latency without load: a device that answers slowly while it is barely used.

A response time far above what the device's class should give ([Goodus] §3.4 for spindles
and the unknown, [MS-Azure-JP] for flash and cloud volumes; ``latency_standard``) is not a
shortage of capacity when the device was busy less than
:data:`~iogauge.analysis.latency_standard.UNLOADED_UTIL_PCT` of the time: more capacity
would not help. Two causes are told apart by the queue, since aqu-sz / busy share =
await / service time ([sysstat] iostat(1): aqu-sz = IOPS x await, %util = IOPS x svctm):

* **each request is slow** (requests in service while busy < :data:`BURST_QUEUE_RATIO`):
  no queue, so the device itself (or what is behind it) takes that long per request: a
  write cache off or without its battery, a degraded array or a rebuild, a congested or
  failing path (multipath, FC/iSCSI retries), a throttle (a cloud volume's or a cgroup's
  limit);
* **bursts queue** (>= :data:`BURST_QUEUE_RATIO`): requests arrive together (a writeback
  flush, a checkpoint) and wait behind each other, though the device idles between
  bursts; the response time is the burst's queue, not the device's speed.

Per window, reads and writes separately where the source splits them (a 437 ms write
average must not hide behind fast reads): warning above the class's normal response time
(from 5 % busy: [Goodus] calls 30-50 ms on an almost idle disk normal, so below 5 % only the
critical line counts), critical from the class's critical line. A user ``--target``
covering the window replaces the class's figures (critical at twice it). Only windows with
at least :data:`MIN_REQUESTS` of the operation: a mean of a handful says little.

Role ``UNLOADED``: the verdict is ``slow, not busy``, never ``bottleneck``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.latency_standard import (
    ALMOST_IDLE_UTIL_PCT,
    UNLOADED_UTIL_PCT,
    Expectation,
    is_benchmark_job,
)
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    c,
    devices_to_judge,
    find_runs,
    fmt_ms,
    fmt_num,
    fmt_pct,
    has,
    iops_expr,
    latency_target_exprs,
    level_expr,
    run_finding,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole

RULE_ID = "latency_without_load"
ROLE = RuleRole.UNLOADED
DESCRIPTION = ("Reads or writes far slower than the device's class should answer while it is "
               "busy < 20 % of the time: not a capacity shortage; tells a slow device "
               "(write cache, degraded array, path, throttle) from queued bursts "
               "([Goodus] §3.4, [MS-Azure-JP], [sysstat]).")
SOURCE = ("[Goodus] §3.4 (svc_t <= 30 ms normal; >= 50 ms a bottleneck only from 20 % busy; "
          "30-50 ms normal on an almost idle disk); [MS-Azure-JP] (flash designed < 10 ms, "
          "Windows 25 ms); [sysstat] iostat(1) (aqu-sz, %util, svctm)")

#: Requests in service per busy second from which requests are queueing in bursts.
BURST_QUEUE_RATIO = 2.0
#: Fewest operations of a kind in a window for its mean to be judged.
MIN_REQUESTS = 10.0


@dataclass(frozen=True)
class _Op:
    name: str
    col: str
    rate: str
    target: str


_READ = _Op("reads", "r_await_ms", "r_iops", "target_r_ms")
_WRITE = _Op("writes", "w_await_ms", "w_iops", "target_w_ms")
_ALL = _Op("I/O", "await_ms", "iops", "target_ms")


def check(ctx: AnalysisContext) -> list[Finding]:
    """Findings for every device with a response time, a busy figure and an expectation."""
    out: list[Finding] = []
    for dev in devices_to_judge(ctx):
        exp = dev.expectation
        if exp is not None and has(dev.windows, "util_pct") and not is_benchmark_job(dev):
            out.extend(_device(ctx, dev, exp))
    return out


def _ops(w: pl.DataFrame) -> list[_Op]:
    split = [op for op in (_READ, _WRITE) if has(w, op.col) and has(w, op.rate)]
    return split or ([_ALL] if has(w, "await_ms") else [])


def _bounds(op: _Op, exp: Expectation) -> tuple[pl.Expr, pl.Expr]:
    """(normal, critical) per window: a user target where one covers it, else the class's."""
    normal, critical = exp.bounds({"reads": "read", "writes": "write"}.get(op.name, "all"))
    user = pl.col("target_kind") == "user"
    return (pl.when(user).then(pl.col(op.target)).otherwise(pl.lit(normal)),
            pl.when(user).then(2.0 * pl.col(op.target)).otherwise(pl.lit(critical)))


def _device(ctx: AnalysisContext, dev: DeviceContext, exp: Expectation) -> list[Finding]:
    w = dev.windows
    ops = _ops(w)
    if not ops:
        return []
    util = c(w, "util_pct")
    unloaded = util < UNLOADED_UTIL_PCT
    flags, crits, scores = [], [], []
    for op in ops:
        normal, critical = _bounds(op, exp)
        v = c(w, op.col)
        rate = c(w, op.rate).fill_null(0.0)
        active = (rate >= ACTIVE_IOPS) & (rate * pl.col("span_s") >= MIN_REQUESTS)
        slow = active & unloaded & (((v > normal) & (util >= ALMOST_IDLE_UTIL_PCT))
                                    | (v >= critical))
        flags.append(slow.fill_null(value=False).alias(f"_slow_{op.col}"))
        crits.append((slow & (v >= critical)).fill_null(value=False))
        scores.append(pl.when(slow).then(v / normal).otherwise(None))
    slow_cols = [pl.col(f"_slow_{op.col}") for op in ops]
    wt = (w.lazy().with_columns(*latency_target_exprs(ctx, dev))
          .with_columns(*flags, _iops=iops_expr(w))
          .with_columns(_level=level_expr(critical=pl.any_horizontal(crits),
                                          warning=pl.any_horizontal(slow_cols)),
                        _score=pl.max_horizontal(scores))
          .collect())
    found = find_runs(wt, "_level", "_score", window_s=ctx.window_s)
    return [_finding(dev, exp, run, found, ops) for run in found.runs]


def _finding(dev: DeviceContext, exp: Expectation, run: Run, found: Matches,
             ops: list[_Op]) -> Finding:
    worst = run.worst
    slow_ops = [op for op in ops if bool(run.part[f"_slow_{op.col}"].any())]
    evidence: list[Evidence] = []
    parts: list[str] = []
    for op in slow_ops:
        mean = run.wmean(op.col, op.rate)
        normal = float(exp.bounds({"reads": "read", "writes": "write"}.get(op.name, "all"))[0])
        if worst.get("target_kind") == "user" and worst.get(op.target) is not None:
            normal = float(worst[op.target])
        evidence.append(Evidence(op.col, mean, "ms", threshold=normal, op=">",
                                 note="operation-weighted mean over the run's windows"))
        parts.append(f"{op.name} {fmt_ms(mean)}")
    util = _f(worst.get("util_pct"))
    iops = _f(worst.get("_iops"))
    aqu = _f(worst.get("aqu_sz"))
    svc_ms = 10.0 * util / iops if util is not None and iops else None
    in_service = aqu / (util / 100.0) if aqu is not None and util else None
    evidence += [Evidence("util_pct", util, "%", UNLOADED_UTIL_PCT, "<", "worst window"),
                 Evidence("iops", iops, "IO/s", note="worst window")]
    if svc_ms is not None:
        evidence.append(Evidence("svctm_ms", svc_ms, "ms",
                                 note="busy time per request (%util x 10 / IOPS, [sysstat])"))
    if in_service is not None:
        evidence.append(Evidence("requests_in_service_while_busy", in_service, "requests",
                                 BURST_QUEUE_RATIO, ">=" if in_service >= BURST_QUEUE_RATIO
                                 else "<", "aqu-sz / busy share = await / svctm"))
    burst = in_service is not None and in_service >= BURST_QUEUE_RATIO
    what = " and ".join(parts)
    against = exp.phrase({"reads": "read", "writes": "write"}.get(slow_ops[0].name, "all")
                         if len(slow_ops) == 1 else "all")
    if burst:
        title = (f"{what[:1].upper()}{what[1:]} at {fmt_pct(util)} busy: requests queue in "
                 f"bursts ({fmt_num(in_service)} in service while busy), not for capacity")
        explanation = (
            f"{dev.key} was busy only {fmt_pct(util)} of the time, yet its requests waited: "
            f"{fmt_num(in_service)} were in service on average whenever it was busy, each "
            f"taking about {fmt_ms(svc_ms)} of device time. They arrive together (a "
            "writeback flush, a checkpoint, a batch commit) and wait behind each other while "
            "the device idles between bursts: the response time, above "
            f"{against} ({exp.decided_by}), is the bursts' queue, not a lack of capacity.")
        suggestion = ("Spread the bursts: writeback pacing (vm.dirty_background_bytes, "
                      "dirty_expire_centisecs), the database's checkpoint or commit pacing; "
                      "look at 1-s samples of a burst. A device serving requests in parallel "
                      "(an array, flash) absorbs a burst at once.")
    else:
        title = (f"{what[:1].upper()}{what[1:]} at {fmt_pct(util)} busy: slow without load, "
                 f"above {against}")
        explanation = (
            f"{dev.key} was busy only {fmt_pct(util)} of the time with no queue to speak of, "
            f"yet it answered slower than {against} ({exp.decided_by}; {exp.source}). More "
            "capacity would not help: each request itself takes long. Usual causes: the "
            "write cache off or its battery failed (when writes are the slow ones), a "
            "degraded array or a rebuild, a congested or failing path (multipath, FC/iSCSI "
            "retries), or a throttle (a cloud volume's or a cgroup's limit).")
        suggestion = ("Check the controller's cache and battery state and the array's health "
                      "(rebuild, failed member), the path's error counters, and any I/O limit "
                      "(cloud volume tier, cgroup io.max) on this device.")
    return run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                       explanation=explanation, suggestion=suggestion, source=SOURCE)


def _f(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]
