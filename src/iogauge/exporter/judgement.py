"""An analysis result as the plain figures the exporter publishes, in base units.

Prometheus' naming rules (prometheus.io/docs/practices/naming): base units (seconds, not
milliseconds) and ratios 0-1, not percents. The engine reports %util-based figures in
percent ([Oe] §3: busy rate per IOPS in %/(IO/s)); they are converted here, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iogauge.analysis.types import VERDICTS, AnalysisResult, DeviceReport


def label_value(text: str) -> str:
    """A verdict as a label value PromQL can match without quoting games:
    ``busy, not the bottleneck`` -> ``busy_not_the_bottleneck``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


#: Every verdict's label value, in the engine's order (worst first).
VERDICT_LABELS: tuple[str, ...] = tuple(label_value(v) for v in VERDICTS)


@dataclass(frozen=True)
class DeviceJudgement:
    """One device's judgement over the window (None: the data do not give the figure).

    Attributes:
        device: kernel name.
        verdict: one of :data:`VERDICT_LABELS`.
        service_model: ``one-at-a-time``, ``parallel`` or ``undetermined`` (None: no
            decision was made, e.g. an idle device).
        max_iops: IOPS at 100 % busy (util-linear) or the latency curve's asymptote.
        current_iops: the load the headroom is measured from (the peak window's IOPS).
        headroom_iops: max_iops - current_iops.
        headroom_ratio: headroom as a share of max_iops, 0-1.
        busy_seconds_per_io: [Oe] §3's busy rate per IOPS in seconds of busy time per I/O
            (%util per IO/s / 100; the service time of a one-at-a-time device).
        knee_util_ratio: the proportional-limit busy rate ([Oe] §3: 0.80-0.95), 0-1.
        capacity_confidence: how well the samples support the capacity figures, 0-1.
    """

    device: str
    verdict: str
    service_model: str | None
    max_iops: float | None = None
    current_iops: float | None = None
    headroom_iops: float | None = None
    headroom_ratio: float | None = None
    busy_seconds_per_io: float | None = None
    knee_util_ratio: float | None = None
    capacity_confidence: float | None = None


@dataclass(frozen=True)
class GuaranteeFigures:
    """The guarantee controller's latest decision on one device ([Oe] §4's a, A and B).

    Attributes:
        device: the disk the limits apply to.
        floor_iops: the protected groups' floors, summed (the paper's a).
        protected_iops: the IOPS the protected groups (A) got in the interval.
        throttled_iops: the IOPS the throttled groups (B) got.
        read_limit_iops, write_limit_iops: B's current limits, summed (None: unlimited).
        target_busy_ratio: the target total busy rate X, 0-1 (None: the policy has none).
        idle_share_ratio: over the run so far, B's IOPS while A was idle against B alone
            (``guarantee/figures.py``; None: A never idle or B alone unknown).
        reserved_unused_iops: mean IOPS of A's floor held back from B and not used by A.
        wakeups: A's returns from idle in the run; wake_to_floor_seconds their median time
            to >= 95 % of the floor (None: none reached it yet).
    """

    device: str
    floor_iops: float | None
    protected_iops: float | None
    throttled_iops: float | None
    read_limit_iops: float | None
    write_limit_iops: float | None
    target_busy_ratio: float | None
    idle_share_ratio: float | None = None
    reserved_unused_iops: float | None = None
    wakeups: float | None = None
    wake_to_floor_seconds: float | None = None


@dataclass(frozen=True)
class Judgement:
    """What one analysis of the window found: the exporter serves the latest one.

    Attributes:
        devices: one judgement per device.
        guarantees: the guarantee's latest decision per device (empty when it does not run).
        samples: collector samples in the window; span_s: the time they cover (s).
        analysis_s: wall time the analysis took (s).
    """

    devices: tuple[DeviceJudgement, ...] = ()
    guarantees: tuple[GuaranteeFigures, ...] = ()
    samples: int = 0
    span_s: float = 0.0
    analysis_s: float = 0.0


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100.0


def device_judgement(rep: DeviceReport) -> DeviceJudgement:
    """The published figures of one device report."""
    cap = rep.capacity
    return DeviceJudgement(
        device=rep.device,
        verdict=label_value(rep.verdict),
        service_model=None if rep.service is None else str(rep.service.model),
        max_iops=None if cap is None else cap.max_iops,
        current_iops=None if cap is None else cap.current_iops,
        headroom_iops=None if cap is None else cap.headroom_iops,
        headroom_ratio=None if cap is None else _ratio(cap.headroom_pct),
        # %util per IO/s: busy seconds per second per (I/O per second) x 1/100 = s per I/O
        busy_seconds_per_io=None if cap is None else _ratio(cap.busy_per_iops),
        knee_util_ratio=None if cap is None else _ratio(cap.knee_util_pct),
        capacity_confidence=None if cap is None else cap.confidence,
    )


def judgement_from(result: AnalysisResult, *, samples: int, span_s: float,
                   analysis_s: float,
                   guarantees: tuple[GuaranteeFigures, ...] = ()) -> Judgement:
    """The exporter's figures of an analysis (synthetic parents the engine adds are kept:
    a partition's disk is judged as the engine judges it)."""
    return Judgement(devices=tuple(device_judgement(r) for r in result.devices),
                     guarantees=guarantees, samples=samples, span_s=span_s,
                     analysis_s=analysis_s)
