"""The metrics the exporter publishes: one table, and the families built from a judgement.

Naming follows Prometheus' rules for exporters (prometheus.io/docs/practices/naming and
/docs/instrumenting/writing_exporters): an ``iogauge_`` prefix, base units in the name
(``_seconds``, ``_iops`` = operations per second), ratios 0-1 (``_ratio``) instead of
percents, no timestamps on samples (Prometheus stamps them at the scrape), and a state set
(one series per possible state, 1 for the current one, 0 for the others) for enumerations,
so ``iogauge_device_verdict{verdict="bottleneck"} == 1`` selects the bottlenecks and a
change of verdict never leaves a stale series behind.

The families are built afresh from the latest judgement at every scrape (and every textfile
write): a device that vanished from the window vanishes from the output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from iogauge.exporter.judgement import (
    VERDICT_LABELS,
    DeviceJudgement,
    GuaranteeFigures,
    Judgement,
)

#: The service models a device can be judged to have (analysis.service_model.ServiceModel).
SERVICE_MODELS: tuple[str, ...] = ("one-at-a-time", "parallel", "undetermined")


@dataclass(frozen=True)
class MetricSpec:
    """One published metric family (all are gauges).

    Attributes:
        name: the metric name.
        help: the HELP line (cites the source of the figure).
        labels: label names, ``device`` first.
        field: the :class:`DeviceJudgement` or :class:`GuaranteeFigures` attribute it
            publishes ("" for the state sets and the exporter's own figures).
    """

    name: str
    help: str
    labels: tuple[str, ...] = ("device",)
    field: str = ""


VERDICT = MetricSpec(
    "iogauge_device_verdict",
    "iogauge's verdict on the device over the window, as a state set: 1 for the current "
    "verdict, 0 for the others (bottleneck, near_limit, slow_not_busy, "
    "busy_not_the_bottleneck, healthy, idle, cannot_judge).", ("device", "verdict"))
SERVICE_MODEL = MetricSpec(
    "iogauge_device_service_model",
    "How the device serves requests, decided from its samples ([Oe] §3: %util measures "
    "capacity only for one-at-a-time devices), as a state set.", ("device", "model"))

#: Per-device figures: published only where the samples give them (no series = unknown).
DEVICE_FIGURES: tuple[MetricSpec, ...] = (
    MetricSpec("iogauge_device_max_iops", "IOPS the device sustains for the observed mix: "
               "at 100 % busy by [Oe] §3's util-vs-IOPS line on one-at-a-time devices, the "
               "latency curve's asymptote on parallel ones.", field="max_iops"),
    MetricSpec("iogauge_device_current_iops", "The load the headroom is measured from: the "
               "busiest analysis window's IOPS.", field="current_iops"),
    MetricSpec("iogauge_device_headroom_iops", "IOPS left before the maximum: max_iops - "
               "current_iops.", field="headroom_iops"),
    MetricSpec("iogauge_device_headroom_ratio", "Headroom as a share of max_iops (0-1).",
               field="headroom_ratio"),
    MetricSpec("iogauge_device_busy_seconds_per_io", "[Oe] §3's busy rate per IOPS in base "
               "units: seconds of busy time per I/O below the knee (%util / IOPS / 100).",
               field="busy_seconds_per_io"),
    MetricSpec("iogauge_device_knee_util_ratio", "[Oe] §3's proportional-limit busy rate "
               "(0-1): where %util stops growing linearly with IOPS.",
               field="knee_util_ratio"),
    MetricSpec("iogauge_device_capacity_confidence_ratio", "How well the window's samples "
               "support the capacity figures (0-1).", field="capacity_confidence"),
)

#: The guarantee controller's latest decision per device ([Oe] §4), while it runs.
GUARANTEE_FIGURES: tuple[MetricSpec, ...] = (
    MetricSpec("iogauge_guarantee_floor_iops", "IOPS guaranteed to the protected groups "
               "(A), summed: [Oe] §4's a.", field="floor_iops"),
    MetricSpec("iogauge_guarantee_protected_iops", "IOPS the protected groups (A) got in "
               "the guarantee's last interval.", field="protected_iops"),
    MetricSpec("iogauge_guarantee_throttled_iops", "IOPS the throttled groups (B) got in "
               "the guarantee's last interval.", field="throttled_iops"),
    MetricSpec("iogauge_guarantee_throttled_read_limit_iops", "The throttled groups' (B) "
               "current read limit (cgroup io.max riops, [cgroup-v2]), summed; no series "
               "when unlimited.", field="read_limit_iops"),
    MetricSpec("iogauge_guarantee_throttled_write_limit_iops", "The throttled groups' (B) "
               "current write limit (io.max wiops), summed; no series when unlimited.",
               field="write_limit_iops"),
    MetricSpec("iogauge_guarantee_target_busy_ratio", "[Oe] §4's target total busy rate X "
               "(0-1) after the guarantee's last decision.", field="target_busy_ratio"),
    MetricSpec("iogauge_guarantee_idle_share_ratio", "Over the run so far: the throttled "
               "groups' (B) IOPS while A was idle against B alone (1 = the floor cost B "
               "nothing while A slept).", field="idle_share_ratio"),
    MetricSpec("iogauge_guarantee_reserved_unused_iops", "Over the run so far: mean IOPS of "
               "A's floor held back from B that A did not use.", field="reserved_unused_iops"),
    MetricSpec("iogauge_guarantee_wakeups", "A's returns from idle in the run so far.",
               field="wakeups"),
    MetricSpec("iogauge_guarantee_wake_to_floor_seconds", "Median time from A's wake-up to "
               ">= 95 % of its floor, over the run's wake-ups that reached it.",
               field="wake_to_floor_seconds"),
)

#: The exporter's own figures (no labels).
WINDOW_SAMPLES = MetricSpec("iogauge_exporter_window_samples", "Collector samples in the "
                            "sliding window the judgement covers.", ())
WINDOW_SECONDS = MetricSpec("iogauge_exporter_window_seconds", "Time the samples of the "
                            "judgement cover.", ())
ANALYSIS_SECONDS = MetricSpec("iogauge_exporter_analysis_seconds", "Wall time of the last "
                              "analysis of the window (it runs off the scrape path).", ())

#: Every family the exporter can publish, by name (docs, rules and dashboards are checked
#: against it).
ALL_METRICS: dict[str, MetricSpec] = {s.name: s for s in (
    VERDICT, SERVICE_MODEL, *DEVICE_FIGURES, *GUARANTEE_FIGURES, WINDOW_SAMPLES,
    WINDOW_SECONDS, ANALYSIS_SECONDS)}


def _gauge(spec: MetricSpec) -> GaugeMetricFamily:
    return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))


def _state_set(spec: MetricSpec, states: tuple[str, ...],
               current: Iterable[tuple[str, str | None]]) -> GaugeMetricFamily:
    fam = _gauge(spec)
    for device, state in current:
        if state is None:
            continue
        for s in states:
            fam.add_metric([device, s], 1.0 if s == state else 0.0)
    return fam


def _figures(specs: tuple[MetricSpec, ...],
             rows: tuple[DeviceJudgement, ...] | tuple[GuaranteeFigures, ...]
             ) -> Iterator[Metric]:
    for spec in specs:
        fam = _gauge(spec)
        for row in rows:
            value = getattr(row, spec.field)
            if value is not None:
                fam.add_metric([row.device], float(value))
        yield fam


def families(j: Judgement | None) -> list[Metric]:
    """The metric families of a judgement (None: nothing analysed yet -> no series, so an
    exporter that just started publishes no made-up verdict)."""
    if j is None:
        return []
    out: list[Metric] = [
        _state_set(VERDICT, VERDICT_LABELS, ((d.device, d.verdict) for d in j.devices)),
        _state_set(SERVICE_MODEL, SERVICE_MODELS,
                   ((d.device, d.service_model) for d in j.devices)),
        *_figures(DEVICE_FIGURES, j.devices),
        *_figures(GUARANTEE_FIGURES, j.guarantees),
    ]
    for spec, value in ((WINDOW_SAMPLES, float(j.samples)), (WINDOW_SECONDS, j.span_s),
                        (ANALYSIS_SECONDS, j.analysis_s)):
        fam = _gauge(spec)
        fam.add_metric([], value)
        out.append(fam)
    return out


class JudgementCollector(Collector):
    """A prometheus_client collector serving the latest judgement: every scrape builds the
    families afresh from ``current()`` (cheap: the analysis ran before, off the scrape)."""

    def __init__(self, current: Callable[[], Judgement | None]) -> None:
        self._current = current

    def collect(self) -> Iterable[Metric]:
        return families(self._current())


__all__ = ["ALL_METRICS", "DEVICE_FIGURES", "GUARANTEE_FIGURES", "SERVICE_MODEL",
           "SERVICE_MODELS", "VERDICT", "JudgementCollector", "MetricSpec", "families"]
