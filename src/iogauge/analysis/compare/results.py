"""What a comparison returns: the metrics compared, their thresholds, and the result types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from iogauge.analysis.types import _clean  # the analysis result's JSON cleaning (no datetimes here)
from iogauge.errors import IogaugeError

#: Significance level. 0.01 rather than 0.05: a comparison tests a dozen metrics on many
#: devices, and a reported change should survive that many looks.
ALPHA = 0.01
#: Smallest relative change (in %) that counts as a finding even when it is significant.
MIN_EFFECT_PCT = 5.0
#: Mann-Whitney's normal approximation is used from this many samples per side (below it
#: the approximation is poor and Welch's t is used instead).
MWU_MIN_N = 8
#: A side with more intervals than this is tested on this many batch means (see
#: :func:`.samples._batches`).
MAX_SAMPLES = 1000
#: The p95 quantile test needs this many samples of each side expected above the pooled p95
#: (the usual chi-square rule: every expected cell count >= 5).
P95_MIN_EXPECTED = 5.0

#: The note of every change with one value on a side.
SINGLE_VALUE_NOTE = "single value: cannot test noise, judged by the size of the change"

Direction = Literal["better", "worse", "same", "changed"]
TestName = Literal["welch-t", "mann-whitney", "p95-chi2", "single value", "effect size only"]
_TESTED: frozenset[str] = frozenset({"welch-t", "mann-whitney", "p95-chi2"})


class CompareError(IogaugeError):
    """The two datasets cannot be compared (nothing in common, bad device map)."""


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric.

    Attributes:
        name: the metric as reported (carries its unit).
        title: short column title for renderers.
        unit: unit spelled out.
        column: the per-interval column it is computed from.
        kind: ``rate`` (time-weighted mean), ``per_op`` (op-weighted mean) or ``p95`` (95th
            percentile of the per-interval values).
        weight: the operations column that weights a ``per_op`` value; an interval where it
            is 0 completed nothing and has no value of this metric.
        better: ``lower``, ``higher`` or ``neutral`` (a workload attribute such as request
            size is neither better nor worse: a change is ``changed``).
    """

    name: str
    title: str
    unit: str
    column: str
    kind: Literal["rate", "per_op", "p95"]
    weight: str | None
    better: Literal["lower", "higher", "neutral"]


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("iops", "IOPS", "1/s", "iops", "rate", None, "higher"),
    MetricSpec("r_iops", "r/s", "1/s", "r_iops", "rate", None, "higher"),
    MetricSpec("w_iops", "w/s", "1/s", "w_iops", "rate", None, "higher"),
    MetricSpec("MBps", "MB/s", "MB/s", "MBps", "rate", None, "higher"),
    MetricSpec("await_ms", "await", "ms", "await_ms", "per_op", "iops", "lower"),
    MetricSpec("await_p95_ms", "await p95", "ms", "await_ms", "p95", "iops", "lower"),
    MetricSpec("r_await_ms", "r_await", "ms", "r_await_ms", "per_op", "r_iops", "lower"),
    MetricSpec("w_await_ms", "w_await", "ms", "w_await_ms", "per_op", "w_iops", "lower"),
    MetricSpec("svctm_ms", "svctm", "ms", "svctm_ms", "per_op", "iops", "lower"),
    MetricSpec("util_pct", "%util", "%", "util_pct", "rate", None, "lower"),
    MetricSpec("aqu_sz", "aqu-sz", "requests", "aqu_sz", "rate", None, "lower"),
    MetricSpec("areq_kB", "req size", "kB", "areq_kB", "per_op", "iops", "neutral"),
    MetricSpec("r_areq_kB", "read size", "kB", "r_areq_kB", "per_op", "r_iops", "neutral"),
    MetricSpec("w_areq_kB", "write size", "kB", "w_areq_kB", "per_op", "w_iops", "neutral"),
)
METRICS_BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}
_LATENCY = ("await_ms", "await_p95_ms", "r_await_ms", "w_await_ms", "svctm_ms")
_THROUGHPUT = ("iops", "r_iops", "w_iops", "MBps")
#: IOPS metric -> the request-size metric that explains a change of it.
_SIZE_OF = {"iops": "areq_kB", "r_iops": "r_areq_kB", "w_iops": "w_areq_kB"}

#: Oracle wait events of the Idle class (Oracle Database Reference, "Classes of Wait Events"
#: and V$EVENT_NAME WAIT_CLASS = 'Idle'): a session waiting for work, not for I/O. Reports
#: before 10g print no wait class, so they are recognised by name.
IDLE_EVENTS: frozenset[str] = frozenset({
    "SQL*Net message from client", "SQL*Net more data from client",
    "SQL*Net message from dblink", "rdbms ipc message", "pmon timer", "smon timer",
    "jobq slave wait", "wakeup time manager", "virtual circuit status", "dispatcher timer",
    "pipe get", "PX Idle Wait", "PX Deq: Execution Msg", "PX Deq: Table Q Normal",
    "Streams AQ: waiting for messages in the queue", "Streams AQ: qmn slave idle wait",
    "Streams AQ: qmn coordinator idle wait", "queue messages", "class slave wait",
    "DIAG idle wait", "Space Manager: slave idle wait", "PL/SQL lock timer",
    "gcs remote message", "ges remote message", "LogMiner: client waiting for transaction",
    "watchdog main loop", "VKTM Logical Idle Wait", "heartbeat redo informer",
    "AQPC idle", "LGWR worker group idle", "lreg timer", "pman timer", "Data Guard: Timer",
    "OFS idle", "shared server idle wait", "null event",
})
#: A report holds the same event in several sections; one is read, in this order: the
#: foreground list (what sessions waited for), the full list, the top-events table, and
#: the background list only for events that appear nowhere else.
_SECTION_RANK: dict[str, int] = {
    "foreground wait events": 0, "wait events": 1, "wait events (fg and bg)": 2,
    "top timed events": 3, "background wait events": 4,
}


@dataclass
class MetricChange:
    """One metric of one device pair, before and after.

    Attributes:
        device_before, device_after: device keys on each side (``host:device`` when a side
            holds several hosts, else the device name).
        metric: a :data:`METRICS` name (carries the unit); unit: the unit spelled out.
        before, after: the summary value of each side (weighted means, or the p95).
        change_pct: (after - before) / before x 100; None when before is 0 and after is not.
        ratio: after / before; None when before is 0 and after is not.
        direction: ``better``, ``worse``, ``same`` (not beyond noise / below the minimum
            effect) or ``changed`` (beyond noise on a metric that is neither better nor
            worse, or IOPS that moved with the request size).
        significant: p < alpha and |change| >= the minimum effect. Always False for
            untested changes (``single value``, ``effect size only``).
        test: ``welch-t``, ``mann-whitney``, ``p95-chi2``, ``single value`` or
            ``effect size only``.
        p_value: two-sided p of the test; None when untested.
        n_before, n_after: samples (intervals) on each side.
        note: why the verdict is what it is, when that is not obvious.
    """

    device_before: str
    device_after: str
    metric: str
    unit: str
    before: float
    after: float
    change_pct: float | None
    ratio: float | None
    direction: Direction
    significant: bool
    test: TestName
    p_value: float | None
    n_before: int
    n_after: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))  # type: ignore[no-any-return]


@dataclass
class WaitChange:
    """One Oracle wait event, before and after ([Insight-SSD9]: Time Waited / Waits per event).

    Attributes:
        event, wait_class: the event (wait class when the report gives it).
        unit: ``ms``. before, after: average wait per wait over all intervals of each side
            (total time waited / total waits; the report's printed average where the time
            is missing).
        change_pct, ratio, direction, significant, test, p_value, n_before, n_after, note: as
            in :class:`MetricChange`; the samples are the per-interval averages.
        waits_before, waits_after: total waits; time_waited_s_before/after: total seconds.
    """

    event: str
    wait_class: str | None
    unit: str
    before: float
    after: float
    change_pct: float | None
    ratio: float | None
    direction: Direction
    significant: bool
    test: TestName
    p_value: float | None
    n_before: int
    n_after: int
    waits_before: float
    waits_after: float
    time_waited_s_before: float | None
    time_waited_s_after: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class DevicePair:
    """Two devices compared with each other and how they were paired (``name``, ``map`` or
    ``auto``)."""

    device_before: str
    device_after: str
    how: Literal["name", "map", "auto"]
    kind_before: str
    kind_after: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """The result of :func:`compare`.

    Attributes:
        pairs: the device pairs compared, in order.
        changes: one :class:`MetricChange` per pair and metric both sides measured, grouped
            by pair in ``pairs`` order, metrics in :data:`METRICS` order.
        wait_changes: one :class:`WaitChange` per wait event both sides recorded, most time
            waited first.
        notes: what the comparison could not do or decided on its own (pairing, devices on
            one side only, idle devices skipped, since-boot reports used).
        alpha, min_effect_pct: the thresholds used.
    """

    pairs: list[DevicePair] = field(default_factory=list)
    changes: list[MetricChange] = field(default_factory=list)
    wait_changes: list[WaitChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    min_effect_pct: float = MIN_EFFECT_PCT

    def for_pair(self, pair: DevicePair) -> list[MetricChange]:
        return [c for c in self.changes if (c.device_before, c.device_after)
                == (pair.device_before, pair.device_after)]

    def change(self, device_before: str, metric: str) -> MetricChange:
        """The change of ``metric`` for the pair whose before-side device is given."""
        for c in self.changes:
            if c.device_before == device_before and c.metric == metric:
                return c
        raise KeyError(f"{device_before}/{metric}")

    def wait(self, event: str) -> WaitChange:
        for w in self.wait_changes:
            if w.event == event:
                return w
        raise KeyError(event)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "min_effect_pct": self.min_effect_pct,
            "pairs": [p.to_dict() for p in self.pairs],
            "changes": [c.to_dict() for c in self.changes],
            "wait_changes": [w.to_dict() for w in self.wait_changes],
            "notes": list(self.notes),
        }
