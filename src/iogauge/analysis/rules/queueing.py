"""Queueing: response time much longer than service time - where the time goes.

Response time = service time + wait (queue) time ([Goodus] §2). When requests
spend most of their response time waiting rather than being served, the question is *where*
they wait: in the host (the OS / driver queue: a queue-depth limit, ``nr_requests``, a
throttle, a burst submitted at once - the device itself may be fast) or in the device
(it is slow, or overloaded). This rule measures the ratio

    Q = response time / service time   (1 = no waiting; Q - 1 = wait in service times)

per window, with the best service-time figure the source has:

1. **host/device split** (exact): Solaris ``iostat -xn`` ``wsvc_t`` / ``asvc_t`` and sar
   ``avwait`` / ``avserv`` (``queue_wait_ms`` / ``svctm_ms``), or Solaris ``-x`` ``wait`` /
   ``actv`` turned into times by Little's law (``wait / IOPS``, ``actv / IOPS``: the
   [Goodus] report ``sd0 ... wait 7.5 actv 168.2 svc_t 1246.4`` at 141 IO/s gives 53 ms in
   the driver queue and 1,193 ms in the device). Q is then host-side queueing by
   construction; when the device side dominates a slow (> 30 ms) response instead, an
   ``info`` finding says the time is spent in the device, not in a host queue;
2. ``svctm_ms`` measured by the source (AIX ``avgserv``, HP-UX/AIX sar ``avserv``);
3. busy time per operation ``%util x 10 / IOPS`` ms ([Oe]: at 100 % busy IOPS =
   1 / svctm) - which is also exactly what sysstat < 12.1.2 printed as ``svctm`` - only
   where %util is a capacity measure (``util_is_capacity`` True): on parallel devices
   util / IOPS is not a service time (why sysstat removed svctm). Here Q = ``aqu_sz / rho``
   (Little),
   compared with the M/M/1 expectation ``1 / (1 - rho)``: a Q well above it (2x) means more
   queueing than the load explains - bursts or a host-side limit;
4. parallel devices with a known queue depth (live data: ``DeviceInfo.queue_depth``): a mean
   queue (``aqu_sz``) above the device's depth means requests wait in the block layer
   (``nr_requests``) - host-side queueing; the wait is at least ``(aqu_sz - depth) / IOPS``.

Thresholds (per window, runs of windows, at least 3 samples or 5 min: a queue is a pattern,
not a sample; only windows with ``ACTIVE_IOPS``):

* **warning** Q >= 3: requests wait twice as long as they are served, two thirds of the
  response time is queueing (M/M/1: Q = 1 / (1 - rho) reaches 3 at rho = 0.67);
* **critical** Q >= 10: 90 % of the response time is queueing (M/M/1 at rho = 0.9, inside
  [Oe]'s 80-95 % knee band);
* in both cases the wait must be at least 5 ms: below that it is shorter than one random
  HDD service time and not what makes an application slow, whatever the ratio.
* method 4 gives at most a warning (the split is a lower bound).

Distinct angle: whether the response time meets a target is ``response_time_target`` /
``solaris_service_time``'s question, whether the device is at its capacity ``saturation``'s;
this rule says where the time goes. RMF's IOSQ/PEND/DISC/CONN breakdown is left to the
RMF-specific rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.latency_standard import UNLOADED_UTIL_PCT
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    await_expr,
    c,
    devices_to_judge,
    find_runs,
    fmt_ms,
    fmt_pct,
    fmt_ratio,
    has,
    iops_expr,
    level_expr,
    run_finding,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole
from iogauge.analysis.windows import window_label

RULE_ID = "queueing"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Response time much longer than service time (ratio >= 3 warning, >= 10 "
               "critical, wait >= 5 ms): host-side queueing (driver/OS queue, queue depth) "
               "vs a slow or overloaded device ([Goodus], [Oe], M/M/1).")

#: Response / service time ratio from which requests mostly wait (see docstring).
RATIO_WARN = 3.0
#: Ratio from which 90 % of the response time is queueing.
RATIO_CRIT = 10.0
#: The wait must be at least this long to matter.
MIN_WAIT_MS = 5.0
#: Observed Q this many times the M/M/1 expectation = more queueing than the load explains.
BURST_FACTOR = 2.0
#: rho is capped here for the M/M/1 expectation (1 / (1 - rho) is infinite at 100 % busy).
RHO_CAP = 0.99

#: The device-queue note is made only when the response time is above [Goodus]'s normal
#: 30 ms: below that nobody asks where the time goes.
SLOW_MS = 30.0

EXCLUDED_KINDS = frozenset({"ram", "port", "lcu", "tablespace", "datafile"})

#: Linux sources whose ``svctm`` is not measured but computed by sysstat as %util / IOPS
#: (iostat.c before 12.1.2; removed since because it misleads on parallel devices): it is
#: used only where %util is a capacity measure, like the estimate.
SYSSTAT_SOURCES = frozenset({"iostat", "iostat-json", "sar", "sadf", "sa", "diskstats",
                             "linux-diskstats"})

SOURCE = ("[Goodus] §2 (response time = service time + queue wait; Solaris iostat wait/actv, "
          "wsvc_t/asvc_t), [Oe] (service time = busy / IOPS), Little's law "
          "L = X R and the M/M/1 queue R/S = 1/(1 - rho)")

_SPLIT = "split"
_REPORTED = "reported"
_ESTIMATED = "estimated"
_DEPTH = "depth"


def check(ctx: AnalysisContext) -> list[Finding]:
    """Queueing findings per device."""
    return [f for dev in devices_to_judge(ctx, EXCLUDED_KINDS) for f in _check_device(ctx, dev)]


def _method(dev: DeviceContext) -> str | None:
    w = dev.windows
    if has(w, "queue_wait_ms") or (has(w, "queue_wait_len") and has(w, "active_len")):
        return _SPLIT
    if has(w, "svctm_ms") and dev.source not in SYSSTAT_SOURCES:
        return _REPORTED
    if dev.util_is_capacity and (has(w, "util_pct") or has(w, "svctm_ms")):
        # sysstat's svctm is %util / IOPS: the same estimate, valid only here.
        return _ESTIMATED
    if (dev.util_is_capacity is False and dev.info is not None and dev.info.queue_depth
            and has(w, "aqu_sz")):
        return _DEPTH
    return None


def _check_device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    if not (has(w, "await_ms") or has(w, "r_await_ms") or has(w, "w_await_ms")):
        return []
    method = _method(dev)
    if method is None:
        return []
    iops = pl.col("_iops")
    active = iops.fill_null(0.0) >= ACTIVE_IOPS
    per_op_ms = pl.lit(1000.0) / iops  # Little's law: time = requests / rate
    busy_per_op = pl.when(iops > 0).then(c(w, "util_pct") * 10.0 / iops)
    if method == _SPLIT:
        host = pl.coalesce(c(w, "queue_wait_ms"), c(w, "queue_wait_len") * per_op_ms)
        device = pl.coalesce(c(w, "svctm_ms"), c(w, "active_len") * per_op_ms,
                             pl.col("_await") - host)
        service = device
    elif method == _REPORTED:
        service = c(w, "svctm_ms")
        host = pl.col("_await") - service
    elif method == _ESTIMATED:
        service = pl.coalesce(c(w, "svctm_ms"), busy_per_op)
        host = pl.col("_await") - service
    else:
        depth = float(dev.info.queue_depth)  # type: ignore[union-attr,arg-type]
        excess = (c(w, "aqu_sz") - depth).clip(lower_bound=0.0)
        host = excess * per_op_ms
        service = pl.col("_await") - host
    waits = active & (pl.col("_host") >= MIN_WAIT_MS)
    warn = waits & (pl.col("_q") >= RATIO_WARN)
    crit = waits & (pl.col("_q") >= RATIO_CRIT) if method != _DEPTH else pl.lit(value=False)
    # The device-queue note (see _device_queue): slow response, device time >= 3x the busy
    # time per operation, longer than the host wait.
    dq = pl.when(pl.col("_busy_per_op") > 0).then(pl.col("_service") / pl.col("_busy_per_op"))
    dq_cond = (active & (pl.col("_dq") >= RATIO_WARN) & (pl.col("_await") > SLOW_MS)
               & (pl.col("_service") - pl.col("_busy_per_op") >= MIN_WAIT_MS)
               & (pl.col("_host").fill_null(0.0) < pl.col("_service")))
    wt = (w.lazy().with_columns(_await=await_expr(w), _iops=iops_expr(w))
          .with_columns(_service=service, _host=host, _busy_per_op=busy_per_op,
                        _rho=(c(w, "util_pct") / 100.0).clip(upper_bound=RHO_CAP),
                        _loaded=~(c(w, "util_pct") < UNLOADED_UTIL_PCT).fill_null(value=False))
          .with_columns(_q=pl.when(active & (pl.col("_service") > 0))
                        .then(pl.col("_await") / pl.col("_service")), _dq=dq)
          .with_columns(_level=level_expr(critical=crit, warning=warn),
                        _dqlevel=level_expr(info=dq_cond))
          .collect())
    found = find_runs(wt, "_level", "_q", window_s=ctx.window_s, sustained_only=True)
    out = [_finding(ctx, dev, run, found, method) for run in found.runs]
    if method == _SPLIT and not out:
        out.extend(_device_queue(ctx, dev, wt))
    return out


_SERVICE_NOTE = {
    _SPLIT: "device time: asvc_t / avserv, or actv / IOPS (Little's law)",
    _REPORTED: "service time as the source reports it (svctm / avserv)",
    _ESTIMATED: ("busy time per operation, %util x 10 / IOPS ([Oe]; sysstat's svctm "
                 "is the same figure)"),
    _DEPTH: "response minus the block-layer wait (lower bound of the host wait)",
}


@dataclass(frozen=True)
class _Worst:
    """The figures of a run's worst window; ``expected``: the M/M/1 ratio at its busy
    (busy-time estimate only)."""

    q: float
    await_ms: float
    service_ms: float
    host_ms: float
    aqu: float | None
    rho: float | None
    expected: float | None

    @classmethod
    def of(cls, worst: dict[str, Any], method: str) -> _Worst:
        aqu, rho = worst.get("aqu_sz"), worst.get("_rho")
        expected = (1.0 / (1.0 - float(rho)) if method == _ESTIMATED and rho is not None
                    else None)
        return cls(float(worst["_q"]), float(worst["_await"]), float(worst["_service"]),
                   float(worst["_host"]), None if aqu is None else float(aqu),
                   None if rho is None else float(rho), expected)


def _finding(ctx: AnalysisContext, dev: DeviceContext, run: Run, found: Matches,
             method: str) -> Finding:
    label = window_label(ctx.window_s, ctx.timeline)
    w = _Worst.of(run.worst, method)
    note = f"worst {label} window" if run.windows > 1 else f"{label} window"
    evidence = _evidence(dev, run, method, w, note)
    # Below UNLOADED_UTIL_PCT busy a queue is bursts or a host-side limit, not load: where
    # the time goes, as context; latency_without_load judges the response time there.
    unloaded = not bool(run.part["_loaded"].any())
    severity = "info" if unloaded else run.severity
    if method == _SPLIT:
        title, explanation, suggestion = _host_split_texts(w)
    elif method == _DEPTH:
        title, explanation, suggestion = _queue_depth_texts(dev, w)
    else:
        title, explanation, suggestion = _ratio_texts(w)
    if unloaded:
        explanation += (f" The device was busy under {UNLOADED_UTIL_PCT:.0f} % of the time "
                        "in these windows: the queue does not come from a lack of capacity.")
    return run_finding(RULE_ID, dev, run, found, severity=severity, title=title,
                       evidence=evidence, explanation=explanation, suggestion=suggestion,
                       source=SOURCE)


def _evidence(dev: DeviceContext, run: Run, method: str, w: _Worst,
              note: str) -> list[Evidence]:
    evidence = [
        Evidence("await_ms", w.await_ms, "ms", note=f"response time, {note}"),
        Evidence("service_ms", w.service_ms, "ms", note=_SERVICE_NOTE[method]),
        Evidence("queue_wait_ms", w.host_ms, "ms", threshold=MIN_WAIT_MS, op=">=",
                 note="response minus service" if method != _SPLIT
                 else "wsvc_t / avwait, or wait / IOPS (Little's law)"),
        Evidence("response_to_service", w.q, "x",
                 threshold=RATIO_CRIT if run.severity == "critical" else RATIO_WARN,
                 op=">=", note="Q = response / service time"),
    ]
    if w.aqu is not None:
        evidence.append(Evidence("aqu_sz", w.aqu, "requests", note=note))
    if w.expected is not None and w.rho is not None:
        evidence.append(Evidence("util_pct", 100.0 * w.rho, "%", note=note))
        evidence.append(Evidence("mm1_expected_ratio", w.expected, "x",
                                 note="M/M/1 response / service at this busy: 1 / (1 - rho)"))
    if method == _DEPTH and dev.info is not None:
        evidence.append(Evidence("queue_depth", float(dev.info.queue_depth or 0), "requests",
                                 note="device queue depth (sysfs device/queue_depth)"))
    return evidence


def _host_split_texts(w: _Worst) -> tuple[str, str, str]:
    """Title, explanation and suggestion when the source splits host and device time."""
    title = (f"Host-side queueing: requests wait {fmt_ms(w.host_ms)} in the driver queue, "
             f"{fmt_ratio(w.host_ms / w.service_ms if w.service_ms else None)} their "
             f"{fmt_ms(w.service_ms)} device time")
    explanation = ("The source splits the response time: requests spend most of it in "
                   "the host's wait queue (driver) before the device accepts them, not in "
                   "the device. The device itself answers quickly; the host holds requests "
                   "back (a per-device throttle or queue-depth limit such as Solaris "
                   "sd_max_throttle / ssd_max_throttle) or submits them in bursts.")
    suggestion = ("Check the host's queue limits for this device (Solaris "
                  "sd_max_throttle / ssd_max_throttle, HBA queue depth; Linux "
                  "queue_depth and nr_requests) and whether the workload submits bursts "
                  "(a checkpoint, a flush); raising the limit helps only if the device "
                  "has headroom.")
    return title, explanation, suggestion


def _queue_depth_texts(dev: DeviceContext, w: _Worst) -> tuple[str, str, str]:
    """Title, explanation and suggestion when more requests are outstanding than the
    device's queue depth."""
    depth = dev.info.queue_depth if dev.info is not None else None
    title = (f"Host-side queueing: {fmt_ratio(w.aqu)} "
             f"requests outstanding with a device queue depth of {depth}")
    explanation = ("This device serves requests in parallel, but it accepts at most "
                   f"{depth} at a time; the mean number outstanding was higher, so the rest "
                   f"waited in the block layer - at least {fmt_ms(w.host_ms)} per request.")
    suggestion = ("Raise the device's queue depth if the device (and its path) can take "
                  "more (/sys/block/DEV/device/queue_depth), and nr_requests for the "
                  "block-layer queue; or spread the load over more devices or paths.")
    return title, explanation, suggestion


def _ratio_texts(w: _Worst) -> tuple[str, str, str]:
    """Title, explanation and suggestion from the response / service ratio alone, set
    against the M/M/1 expectation where there is one."""
    title = (f"Queueing: response {fmt_ms(w.await_ms)} is {fmt_ratio(w.q)} the "
             f"{fmt_ms(w.service_ms)} service time")
    explanation = (f"Requests spend {fmt_pct(100.0 * (1.0 - 1.0 / w.q))} of their response "
                   "time waiting, not being served. The source does not say whether they "
                   "wait in the host's queue or inside the device. ")
    if w.expected is not None and w.q >= BURST_FACTOR * w.expected:
        explanation += (f"At {fmt_pct(100.0 * (w.rho or 0.0))} busy, random arrivals "
                        f"would wait about {fmt_ratio(w.expected)} the service time (M/M/1); "
                        "the observed queue is far longer, so requests arrive in bursts "
                        "(many submitted at once) or a host-side limit holds them back: "
                        "the device itself is not slow per request.")
    elif w.expected is not None:
        explanation += (f"At {fmt_pct(100.0 * (w.rho or 0.0))} busy this much waiting "
                        f"is what the load explains (M/M/1: {fmt_ratio(w.expected)}): the "
                        "device is busy and requests queue behind each other - see the "
                        "saturation findings.")
    else:
        explanation += ("A fast service time with a long wait points at queueing, in the "
                        "host (queue limits, bursts) or in the device (its own queue).")
    suggestion = ("Smooth bursts (spread checkpoints/flushes, limit the submitter's queue "
                  "depth), check the host's queue limits (queue_depth, nr_requests), and "
                  "if the device is simply busy, reduce or spread the load.")
    return title, explanation, suggestion


def _device_queue(ctx: AnalysisContext, dev: DeviceContext,
                  wt: pl.DataFrame) -> list[Finding]:
    """Info: with an exact split and no host queueing, say the time is spent in the device
    when the response is slow (> 30 ms), the device time is >= 3x the busy time per
    operation (several requests inside the device at once) and longer than the host wait."""
    if not has(wt, "util_pct"):
        return []
    found = find_runs(wt, "_dqlevel", "_dq", window_s=ctx.window_s, limit=1)
    out = []
    label = window_label(ctx.window_s, ctx.timeline)
    for run in found.runs:
        worst = run.worst
        dq_v = float(worst["_dq"])
        note = f"worst {label} window" if run.windows > 1 else f"{label} window"
        evidence = [
            Evidence("await_ms", float(worst["_await"]), "ms", note=f"response time, {note}"),
            Evidence("queue_wait_ms", float(worst["_host"]), "ms",
                     note="host (driver) queue: wsvc_t, or wait / IOPS"),
            Evidence("device_ms", float(worst["_service"]), "ms",
                     note="in the device: asvc_t, or actv / IOPS"),
            Evidence("busy_per_op_ms", float(worst["_busy_per_op"]), "ms",
                     note="%b x 10 / IOPS: busy time per operation"),
            Evidence("device_to_busy", dq_v, "x", threshold=RATIO_WARN, op=">=",
                     note="device time / busy time per operation"),
        ]
        if worst.get("active_len") is not None:
            evidence.append(Evidence("actv", float(worst["active_len"]), "requests",
                                     note="mean requests active in the device"))
        title = (f"Time is spent in the device, not the host queue: "
                 f"{fmt_ms(float(worst['_service']))} of the "
                 f"{fmt_ms(float(worst['_await']))} response")
        explanation = ("The host is not holding requests back: most of the response time is "
                       "spent after the device accepted the request, "
                       f"{fmt_ratio(dq_v)} its busy time per operation - several requests "
                       "are inside the device at once. On a single disk that is a queue in "
                       "its own command queue (the disk is overloaded or slow); on an array or "
                       "SSD it is parallel service that still takes this long. Either way the "
                       "device, not a host limit, sets the response time: raising host queue "
                       "limits would not help.")
        suggestion = ("Treat the device as the limit: reduce or spread its load, make "
                      "requests larger for sequential work, or move data to faster storage.")
        out.append(run_finding(RULE_ID, dev, run, found, severity="info", title=title,
                               evidence=evidence, explanation=explanation,
                               suggestion=suggestion, source=SOURCE))
    return out
