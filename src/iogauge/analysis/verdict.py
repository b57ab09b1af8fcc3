"""A device's verdict: the worst of its findings, read by each rule's role, with evidence.

* ``bottleneck``: a critical finding about its load or its response time under load. A
  critical finding that rests on %busy (``RuleRole.BUSY``) is overruled when the device's
  response times are within its expectation and it is not known to serve one request at a
  time (where %busy measures capacity, [Oe] §3): %busy alone never makes a bottleneck.
* ``near limit``: a warning about its load or its response time under load, or headroom
  under :data:`NEAR_LIMIT_HEADROOM_PCT` of its maximum.
* ``slow, not busy``: slower than its class should answer while busy < 20 % of the time
  (``latency_without_load``): the cause is not its capacity.
* ``busy, not the bottleneck``: busy, but the work waits on something else
  ([Insight-SSD9]), or busy with response times within expectation.
* ``healthy``: its response times were judged against the standard
  (``latency_standard``) and found within it; the verdict line says against what.
* ``idle``; ``cannot judge``: nothing to judge the response time by, and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import NamedTuple

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.latency_standard import (
    UNLOADED_UTIL_PCT,
    Expectation,
    LatencyClass,
    is_benchmark_job,
)
from iogauge.analysis.rules import roles
from iogauge.analysis.summary import IDLE_IOPS
from iogauge.analysis.types import Attributes, Claim, DeviceReport, Finding, RuleRole

#: Headroom below this share of max IOPS makes a device "near limit" ([Oe] §3: the knee
#: sits at 80-95 % busy, so less than ~20 % left is inside the non-linear region).
NEAR_LIMIT_HEADROOM_PCT = 20.0
#: A benchmark job keeping at least this many requests in flight (Little's law) chose its
#: own queue: its latency is what that depth gives, not the device's response time.
BENCHMARK_QUEUE = 2.0


class Verdict(NamedTuple):
    """A device's verdict, the sentence behind it, and the evidence that decided it."""

    label: str
    reason: str
    basis: str


class LatencyJudgement(NamedTuple):
    """The device's mean response times against its expectation.

    ``within``: True/False, or None when there is nothing to judge (``text`` says why)."""

    within: bool | None
    text: str
    basis: str


@cache
def _roles() -> Mapping[str, RuleRole]:
    return roles()


def _role(f: Finding) -> RuleRole:
    return _roles().get(f.rule, RuleRole.ADVICE)


def _finding_basis(f: Finding) -> str:
    return f"finding {f.rule} ({f.severity}, {f.device or 'host'})"


def _against(exp: Expectation, ops: list[tuple[str, float, float]]) -> str:
    bounds = {b for _n, _v, b in ops}
    if len(bounds) == 1:
        return exp.phrase("read" if ops[0][0] == "reads" else
                          "write" if ops[0][0] == "writes" else "all")
    each = " / ".join(f"{b:g} ms ({n})" for n, _v, b in ops)
    return f"the {each} expected of {exp.latency_class.with_article}"


def judge_latency(dev: DeviceContext) -> LatencyJudgement:
    """Reads and writes (or the combined response time) against ``dev.expectation``."""
    exp = dev.expectation
    a = dev.attributes or Attributes()
    if exp is None:
        return LatencyJudgement(None, "", f"no response-time standard for a {dev.kind}: "
                                          "its own rules judge it")
    if is_benchmark_job(dev) and (a.concurrency_little or 0.0) >= BENCHMARK_QUEUE:
        return LatencyJudgement(
            None, (f"a benchmark job keeping {a.concurrency_little:.3g} requests in flight: "
                   "its latency is what that queue depth gives, not the device's response "
                   "time; the device it ran on is judged on its own"),
            "benchmark queue depth")
    ops: list[tuple[str, float, float]] = []
    if a.r_await_ms is not None and (a.r_iops_mean or 0.0) > 0:
        ops.append(("reads", a.r_await_ms, exp.read_ms))
    if a.w_await_ms is not None and (a.w_iops_mean or 0.0) > 0:
        ops.append(("writes", a.w_await_ms, exp.write_ms))
    if not ops and a.await_ms is not None:
        ops.append(("I/O", a.await_ms, exp.any_ms))
    if not ops:
        return LatencyJudgement(None, "the source reports no response time",
                                "no response time")
    within = all(v <= b for _n, v, b in ops)
    values = " and ".join(f"{n} {v:.1f} ms" for n, v, _b in ops)
    text = f"{values} {'within' if within else 'above'} {_against(exp, ops)}"
    if exp.latency_class is LatencyClass.UNKNOWN:
        basis = f"response times against platform guidance ({exp.cite}): {exp.decided_by}"
    else:
        basis = (f"response times against the {exp.latency_class.value} expectation "
                 f"({exp.cite}; class from {exp.decided_by})")
    return LatencyJudgement(within, text, basis)


def verdict(dev: DeviceContext, findings: Sequence[Finding]) -> Verdict:
    """The verdict of a device from its findings, its response times and its capacity."""
    a = dev.attributes or Attributes()
    if a.iops_mean is None:
        return Verdict("cannot judge", "no measured interval with I/O counts", "no data")
    judged = [f for f in findings if _role(f) is not RuleRole.CONTEXT]
    lat = judge_latency(dev)
    crit = [f for f in judged if f.severity == "critical" and _role(f) is not RuleRole.UNLOADED]
    # On a device serving one request at a time %busy measures capacity ([Oe] §3): there
    # it stands; elsewhere it counts time with any request outstanding ([sysstat]).
    overruled = [f for f in crit if _role(f) is RuleRole.BUSY and lat.within
                 and dev.util_is_capacity is not True]
    crit = [f for f in crit if f not in overruled]
    if crit:
        return Verdict("bottleneck", crit[0].title, _finding_basis(crit[0]))
    if overruled:
        f = overruled[0]
        busy = f"{a.util_peak_pct:.0f} % busy at peak" if a.util_peak_pct is not None else "busy"
        return Verdict("busy, not the bottleneck",
                       (f"{busy} and the host waited on I/O, yet {lat.text}: %busy alone does "
                        "not make a bottleneck (it counts time with any request outstanding, "
                        "[sysstat] iostat(1))"),
                       f"{_finding_basis(f)} overruled by the {lat.basis}")
    not_bn = [f for f in judged if f.claim is Claim.NOT_BOTTLENECK]
    if not_bn:
        return Verdict("busy, not the bottleneck", not_bn[0].title, _finding_basis(not_bn[0]))
    warn = [f for f in judged if f.severity == "warning"
            and _role(f) in (RuleRole.LOAD, RuleRole.LATENCY)]
    slow = [f for f in judged if _role(f) is RuleRole.UNLOADED and f.severity != "info"]
    if a.iops_mean < IDLE_IOPS and not warn and not slow:
        return Verdict("idle", f"{a.iops_mean:.2f} IO/s on average", "load below 1 IO/s")
    if warn:
        return Verdict("near limit", warn[0].title, _finding_basis(warn[0]))
    if slow:
        return Verdict("slow, not busy", slow[0].title, _finding_basis(slow[0]))
    near = _near_limit(dev)
    return near if near is not None else _judged(dev, lat)


def _near_limit(dev: DeviceContext) -> Verdict | None:
    cap = dev.capacity
    if (cap is not None and cap.headroom_pct is not None and cap.max_iops
            and cap.headroom_pct < NEAR_LIMIT_HEADROOM_PCT and (cap.confidence or 0) >= 0.5):
        return Verdict("near limit", (f"{cap.headroom_pct:.0f} % headroom left: peak "
                                      f"{cap.current_iops:,.0f} of ~{cap.max_iops:,.0f} IO/s "
                                      f"({cap.method})"),
                       f"capacity {cap.method} (confidence {cap.confidence:.2f}; service "
                       f"model {dev.service_decision().short})")
    return None


def _capacity_text(dev: DeviceContext) -> tuple[str | None, str | None]:
    """(reason part, basis part) about headroom or capability, when there is one."""
    cap = dev.capacity
    if cap is not None and cap.headroom_pct is not None and cap.max_iops:
        return ((f"{cap.headroom_pct:.0f} % headroom (~{cap.max_iops:,.0f} IO/s max, "
                f"{cap.method})"),
                f"capacity {cap.method} (service model {dev.service_decision().short})")
    if dev.capability is not None and dev.capability.used_pct is not None:
        return ((f"{dev.capability.used_pct:.0f} % of {dev.capability.title} capability for "
                "this mix"), f"capability {dev.capability.profile}")
    if cap is not None and cap.max_iops is None:
        return f"no maximum from the data ({cap.method})", None
    return None, None


def _judged(dev: DeviceContext, lat: LatencyJudgement) -> Verdict:
    """No finding: healthy only when the response times were judged within expectation."""
    a = dev.attributes or Attributes()
    cap_text, cap_basis = _capacity_text(dev)
    if lat.within is None and dev.expectation is None:
        # aggregates and database objects: their own rules found nothing
        parts = [f"response {a.await_ms:.1f} ms on average"] if a.await_ms is not None else []
        parts += [cap_text] if cap_text else []
        basis = "; ".join(["no rule found a problem", lat.basis, *([cap_basis] if cap_basis
                                                                   else [])])
        return Verdict("healthy", "; ".join(parts) or "no rule found a problem", basis)
    if lat.within is None:
        reason = "; ".join([f"nothing to judge the response time by: {lat.text}",
                            *([cap_text] if cap_text else [])])
        return Verdict("cannot judge", reason, lat.basis)
    if lat.within is False:
        util = a.util_mean_pct
        if util is None:
            return Verdict("cannot judge", (f"{lat.text} on average, and no busy figure to "
                                            "tell load from a slow device"), lat.basis)
        label = "slow, not busy" if util < UNLOADED_UTIL_PCT else "near limit"
        return Verdict(label, (f"{lat.text} on average at {util:.0f} % busy (no window long "
                               "or busy enough for a finding)"), lat.basis)
    reason = "; ".join([lat.text, *([cap_text] if cap_text else [])])
    basis = "; ".join([lat.basis, "no rule found a problem", *([cap_basis] if cap_basis
                                                               else [])])
    return Verdict("healthy", reason, basis)


def blame_parents(reports: list[DeviceReport], ctx: AnalysisContext) -> None:
    """A part of a device that is the bottleneck says so first ([Yuge]: the volumes' 1.5 ms
    came from their shared rank; the fix was on the rank, not on any volume)."""
    # by the source's own device name (keys may be host:device, and names such as
    # RANK:0000@ABCD1 or E: carry colons themselves)
    by_name = {(r.host, ctx.devices[r.device].device): r for r in reports
               if r.device in ctx.devices}
    for r in reports:
        parent = by_name.get((r.host, r.parent)) if r.parent else None
        if (parent is not None and parent.verdict == "bottleneck"
                and r.verdict in ("near limit", "healthy")):
            if r.kind == "partition":
                # A partition is the same spindle: its requests wait in the disk's queue.
                r.verdict = "bottleneck"
                r.verdict_reason = (f"a partition of {parent.device}, which is the "
                                    f"bottleneck: {parent.verdict_reason}")
            else:
                r.verdict_reason = (f"on {parent.device}, which is the bottleneck "
                                    f"({parent.verdict_reason}); {r.verdict_reason}")
