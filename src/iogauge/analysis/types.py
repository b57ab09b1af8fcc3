"""Result types of the analysis engine: findings with evidence, attributes, capability, capacity.

Every type here is plain data with a ``to_dict`` that gives the JSON shape documented in
``docs/analysis.md`` (the ``iogauge analyze --json`` schema). Producers: ``attributes.py``
(:class:`Attributes`), ``catalog/`` (:class:`Capability`), ``capacity.py``
(:class:`CapacityEstimate`), ``rules/`` (:class:`Finding`), ``engine.py``
(:class:`DeviceReport`, :class:`AnalysisResult`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from iogauge.analysis.latency_standard import Expectation
    from iogauge.analysis.service_model import ServiceDecision

from iogauge.model.timeline import RelativeTimeline, when

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

#: Verdict words, worst first. ``bottleneck``: the device limits the workload now;
#: ``near limit``: it will soon (little headroom for these attributes); ``slow, not busy``:
#: it answers slower than its class should while barely loaded, so the cause is not its
#: capacity (write cache, a degraded array, the path, a throttle); ``busy, not the
#: bottleneck``: high busy but the evidence says something else limits ([Insight-SSD9]);
#: ``healthy``: its response times were judged and are within expectation; ``idle``;
#: ``cannot judge``: the data cannot support a verdict.
VERDICTS: tuple[str, ...] = ("bottleneck", "near limit", "slow, not busy",
                             "busy, not the bottleneck", "healthy", "idle", "cannot judge")


class RuleRole(Enum):
    """What a rule's findings mean for a device's verdict (each rule module's ``ROLE``).

    ``LOAD``: the device at or near its limit (warning = near limit, critical =
    bottleneck). ``LATENCY``: response time above expectation under load (as ``LOAD``).
    ``BUSY``: %busy read with the host's waits (critical = bottleneck unless the response
    times are within expectation: %busy alone never makes one). ``UNLOADED``: slow without
    load (``slow, not busy``). ``ADVICE``: workload advice (only a critical finding sets the
    verdict). ``CONTEXT``: about the data or the method (never sets the verdict).
    """

    LOAD = "load"
    LATENCY = "latency"
    BUSY = "busy"
    UNLOADED = "unloaded"
    ADVICE = "advice"
    CONTEXT = "context"


class Claim(Enum):
    """What a single finding says about its device beyond its severity."""

    NOT_BOTTLENECK = "busy, not the bottleneck"


def _clean_dict(d: dict[str, Any]) -> dict[str, Any]:
    """:func:`_clean` for a dict (typed, so ``to_dict`` methods need no cast)."""
    return {k: _clean(x) for k, x in d.items()}


def _clean(v: Any) -> Any:
    """JSON-safe value: datetimes as ISO 8601, NaN/inf as None, nested containers cleaned."""
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


@dataclass(frozen=True)
class Evidence:
    """One value a rule compared, and what it was compared with.

    Attributes:
        metric: what was measured, with its unit in the name where it has one
            (``svc_t_ms``, ``util_pct``, ``avg_wait_ms``).
        value: the observed value (a number, or text such as a device list).
        unit: unit spelled out for renderers (``ms``, ``%``, ``IO/s``, ``MB/s``, ``""``).
        threshold: the number it was compared with; None when the evidence is context only.
        op: the comparison that held (``>=``, ``>``, ``<``, ``<=``, ``≈``); "" for context.
        note: where the value comes from when that matters ("worst 1-min window",
            "IOPS-weighted mean", "estimate").
    """

    metric: str
    value: float | str | None
    unit: str = ""
    threshold: float | None = None
    op: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict(asdict(self))


@dataclass
class Finding:
    """One explained judgement about a device (or the host) over a window of time.

    Attributes:
        rule: id of the rule that produced it (its module name under ``analysis/rules``).
        severity: ``info`` (context, or the rule cannot judge), ``warning``, ``critical``.
        device: the device key (``AnalysisContext.devices``); None for host-wide findings.
        window_start, window_end: the time span the finding is about (UTC). For a finding
            about the whole data set, its first interval's start and last interval's end.
        title: one line a specialist would write in a ticket.
        evidence: the values and thresholds compared.
        explanation: why this matters, in plain words.
        suggestion: what to do or check next.
        source: where the threshold or the method comes from (reference key and section).
        claim: what the finding says about the device's verdict beyond its severity
            (``Claim.NOT_BOTTLENECK``); None for most findings.
    """

    rule: str
    severity: Severity
    device: str | None
    window_start: datetime
    window_end: datetime
    title: str
    evidence: list[Evidence]
    explanation: str
    suggestion: str
    source: str
    claim: Claim | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("rule", "severity", "device", "window_start",
                                            "window_end", "title")}
        d["evidence"] = [e.to_dict() for e in self.evidence]
        d.update(explanation=self.explanation, suggestion=self.suggestion, source=self.source)
        return _clean_dict(d)

    @property
    def rank(self) -> int:
        return SEVERITY_RANK[self.severity]


@dataclass
class Attributes:
    """The workload's "application attributes" on one device ([Yuge]).

    Means are over the analysed intervals (reset and since-boot rows excluded); rates are
    time-weighted, latencies and sizes weighted by the matching operation counts.

    Attributes:
        intervals: rows used; span_s: their total length in seconds.
        iops_mean, iops_peak: reads + writes (+ discards) per second; peak = busiest interval.
        r_iops_mean, w_iops_mean: the split of the mean.
        MBps_mean, MBps_peak: throughput (1 MB = 1024 kB).
        read_pct: share of operations that are reads, 0-100.
        read_bytes_pct: share of bytes that are read, 0-100.
        areq_kB_mean, r_areq_kB_mean, w_areq_kB_mean: mean request size (kB), IOPS-weighted.
        areq_kB_p10, areq_kB_p50, areq_kB_p90: distribution of the per-interval mean request
            size, weighted by each interval's operation count.
        seq_pct: estimated share of sequential operations, 0-100, or None.
        seq_method: how ``seq_pct`` was obtained: ``rmf-cache`` (counted by the controller),
            ``estimate`` (Linux: merges and request size — an estimate, said so), or None.
        aqu_sz_mean, aqu_sz_peak: mean requests queued or in service.
        concurrency_little: Little's law L = IOPS x await / 1000 (requests in the system);
            checks ``aqu_sz`` and stands in for it where the source has none.
        cache_hit_pct: controller or database cache hit ratio, 0-100, where the source has it.
        burstiness: peak-to-mean ratio of IOPS over the analysed windows (1 = flat).
        util_mean_pct, util_peak_pct: %util (a capacity measure on one-at-a-time devices only).
        await_ms, r_await_ms, w_await_ms: operation-weighted mean response time.
        await_p95_ms: 95th percentile of per-window await (peaks, not only means: [MS-Azure-JP]).
        svctm_ms: service time: as reported, else estimated util / IOPS ([Oe]:
            at 100 % busy IOPS = 1/svctm); ``svctm_estimated`` says which.
        notes: facts a reader needs to trust the numbers ("sequential share is an estimate").
    """

    intervals: int = 0
    span_s: float = 0.0
    iops_mean: float | None = None
    iops_peak: float | None = None
    r_iops_mean: float | None = None
    w_iops_mean: float | None = None
    MBps_mean: float | None = None
    MBps_peak: float | None = None
    read_pct: float | None = None
    read_bytes_pct: float | None = None
    areq_kB_mean: float | None = None
    r_areq_kB_mean: float | None = None
    w_areq_kB_mean: float | None = None
    areq_kB_p10: float | None = None
    areq_kB_p50: float | None = None
    areq_kB_p90: float | None = None
    seq_pct: float | None = None
    seq_method: str | None = None
    aqu_sz_mean: float | None = None
    aqu_sz_peak: float | None = None
    concurrency_little: float | None = None
    cache_hit_pct: float | None = None
    burstiness: float | None = None
    util_mean_pct: float | None = None
    util_peak_pct: float | None = None
    await_ms: float | None = None
    r_await_ms: float | None = None
    w_await_ms: float | None = None
    await_p95_ms: float | None = None
    svctm_ms: float | None = None
    svctm_estimated: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict(asdict(self))


@dataclass
class Capability:
    """What the device can do for the observed attributes, from the capability catalog.

    Attributes:
        profile: catalog id (``hdd-7200``, ``azure-premium-p30``, ``ds8000-rank-raid5-146g``).
        title: human name of the profile.
        matched_by: why this profile: ``user`` (``--profile``) or the facts that matched
            (``rotational=1, model 'ST4000DM000'``).
        parallel: True when the device serves requests in parallel (SSD, NVMe, RAID, cloud
            volumes): %util is then not a capacity measure ([sysstat]).
        expected_iops: IOPS the device should sustain for the observed mix of size,
            read/write and sequential share (interpolated, see ``catalog.expected``).
        expected_MBps: MB/s for the same mix.
        random_read_iops, random_write_iops: small random operation limits (per the
            profile's reference size, write penalty applied).
        seq_read_MBps, seq_write_MBps: large sequential transfer limits.
        latency_ms_typical: service time expected at low load for the mix.
        latency_ms_design: the latency the provider designs for (Azure Premium < 10 ms),
            when published; None otherwise.
        used_pct: observed peak load as a share of the expected capability (max of IOPS and
            MB/s ratios), 0-100+.
        sources: where every figure comes from (the profile's ``source`` entries).
        notes: adjustments made ("mixed read/write: sequential limit lowered").
    """

    profile: str
    title: str
    matched_by: str
    parallel: bool
    expected_iops: float | None = None
    expected_MBps: float | None = None
    random_read_iops: float | None = None
    random_write_iops: float | None = None
    seq_read_MBps: float | None = None
    seq_write_MBps: float | None = None
    latency_ms_typical: float | None = None
    latency_ms_design: float | None = None
    used_pct: float | None = None
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict(asdict(self))


@dataclass
class CapacityEstimate:
    """How much more load the device takes ([Oe]'s capacity model).

    Attributes:
        method: ``util-linear`` (fit of %util vs IOPS, one-at-a-time devices),
            ``latency-knee`` (latency vs throughput, parallel devices), or ``none``.
        reason: why that method (or why none): "rotational single disk",
            "NVMe serves requests in parallel: %util saturates early", "too few points".
        busy_per_iops: %util per IO/s below the knee ([Oe]); None for latency-knee.
        knee_util_pct: the proportional-limit busy rate — where linear growth ends.
        knee_iops: IOPS at the knee (latency-knee: where latency starts to climb).
        max_iops: IOPS at 100 % busy (util-linear) or the asymptote of the latency curve.
        current_iops: the load the headroom is measured from (peak window mean IOPS).
        headroom_iops: max_iops - current_iops (never negative).
        headroom_pct: headroom as a share of max_iops.
        confidence: 0-1: how well the data support the figures (fit quality, range of load
            covered, number of points).
        r2: coefficient of determination of the linear fit, where one was made.
        points: number of intervals used.
        notes: caveats ("load never exceeded 30 % busy: the knee is extrapolated").
    """

    method: str
    reason: str
    busy_per_iops: float | None = None
    knee_util_pct: float | None = None
    knee_iops: float | None = None
    max_iops: float | None = None
    current_iops: float | None = None
    headroom_iops: float | None = None
    headroom_pct: float | None = None
    confidence: float | None = None
    r2: float | None = None
    points: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict(asdict(self))


@dataclass(frozen=True)
class WindowRef:
    """A named window of time on a device: one of its worst windows.

    Attributes:
        start, end: UTC span.
        metric: what it is worst by (``await_ms``, ``iops``, ``util_pct``).
        value: the window's value of that metric.
        unit: unit of ``value``.
    """

    start: datetime
    end: datetime
    metric: str
    value: float
    unit: str

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict(asdict(self))


@dataclass
class DeviceReport:
    """The verdict on one device with everything behind it.

    Attributes:
        device: device key (kernel name, or ``host:device`` when several hosts).
        host, kind, parent, source: identity as in the SampleFrame.
        verdict: one of :data:`VERDICTS`; verdict_reason: the sentence behind it;
            verdict_basis: the evidence that decided it (a finding, the capacity model).
        service: how the device serves requests (``service_model``), with its evidence.
        attributes, capability, capacity: see their types (capability None when no
            catalog profile matched).
        worst_windows: the worst windows, by response time then by load.
        finding_count: findings by severity.
    """

    device: str
    host: str
    kind: str
    parent: str | None
    source: str
    verdict: str
    verdict_reason: str
    attributes: Attributes
    capability: Capability | None
    capacity: CapacityEstimate | None
    worst_windows: list[WindowRef] = field(default_factory=list)
    finding_count: dict[str, int] = field(default_factory=dict)
    verdict_basis: str = ""
    service: ServiceDecision | None = None
    expectation: Expectation | None = None

    def to_dict(self) -> dict[str, Any]:
        return _clean_dict({
            "device": self.device, "host": self.host, "kind": self.kind,
            "parent": self.parent, "source": self.source, "verdict": self.verdict,
            "verdict_reason": self.verdict_reason, "verdict_basis": self.verdict_basis,
            "service_model": None if self.service is None else self.service.to_dict(),
            "latency_expectation": (None if self.expectation is None
                                    else self.expectation.to_dict()),
            "attributes": self.attributes.to_dict(),
            "capability": None if self.capability is None else self.capability.to_dict(),
            "capacity": None if self.capacity is None else self.capacity.to_dict(),
            "worst_windows": [w.to_dict() for w in self.worst_windows],
            "finding_count": dict(self.finding_count),
        })


@dataclass
class AnalysisResult:
    """Everything ``iogauge analyze`` reports.

    Attributes:
        devices: one report per device, worst verdict first.
        findings: all findings, most severe first, then by device and time.
        window_s: length of the analysis windows in seconds.
        interval_s: the data's median sampling interval in seconds.
        start, end: span of the analysed data (UTC).
        notes: facts about the analysis as a whole (rows skipped, time zone assumed).
        timeline: the relative time line of reports without time stamps (None: the data
            are on the clock); the JSON then names each finding's reports in ``when``.
    """

    devices: list[DeviceReport]
    findings: list[Finding]
    window_s: float
    interval_s: float | None
    start: datetime | None
    end: datetime | None
    notes: list[str] = field(default_factory=list)
    timeline: RelativeTimeline | None = None

    def to_dict(self) -> dict[str, Any]:
        line = self.timeline
        devices = [d.to_dict() for d in self.devices]
        for d, dev in zip(devices, self.devices, strict=True):
            for w, ref in zip(d["worst_windows"], dev.worst_windows, strict=True):
                w["when"] = when(ref.start, ref.end, line)
        findings = [{**f.to_dict(), "when": when(f.window_start, f.window_end, line)}
                    for f in self.findings]
        return _clean_dict({
            "start": self.start, "end": self.end, "interval_s": self.interval_s,
            "window_s": self.window_s, "notes": list(self.notes),
            "timeline": None if line is None else line.to_dict(),
            "devices": devices, "findings": findings,
        })
