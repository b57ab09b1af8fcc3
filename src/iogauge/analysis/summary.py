"""Per-device summary of a SampleFrame: the first, honest look at a set of samples.

This is the part of the diagnosis that needs no capability model: load, latency and busy
statistics per device, with IOPS-weighted latency means (an idle interval's 0.00 await must
not pull the mean down, see SampleFrame) and the peak interval named. The full verdict
(capability, knee, rules) builds on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from iogauge.analysis.service_model import ServiceDecision, decide
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

#: A device doing fewer operations per second than this over the whole run is called idle.
IDLE_IOPS = 1.0
#: Single-spindle guidance: sustained busy above this is saturation ([Oe] observes the
#: proportional-limit busy rate at 80-95 %; [Goodus] calls %b >= 20 with svc_t >= 50 ms a
#: bottleneck). Used here only for devices where %util is a capacity measure.
BUSY_SATURATED_PCT = 90.0
BUSY_HIGH_PCT = 60.0


@dataclass
class DeviceSummary:
    """Summary statistics of one device over the analysed frame.

    Attributes:
        device, kind, parent: identity (kind from SampleFrame.device_kind).
        intervals: rows used (reset and since-boot rows excluded); span_s their total length.
        iops_mean, iops_peak: reads + writes + discards per second.
        r_iops_mean, w_iops_mean: split of the mean.
        MBps_mean, MBps_peak: throughput in MB/s (1 MB = 1024 kB).
        r_await_ms, w_await_ms: means weighted by the matching IOPS (time per request).
        await_peak_ms: the worst interval's combined await.
        util_mean_pct, util_peak_pct: %util (meaningful for one-at-a-time devices only).
        aqu_sz_mean, aqu_sz_peak: mean queue size (Little's law: IOPS x await / 1000).
        areq_kB: mean request size, weighted by IOPS.
        peak_ts: end of the busiest interval (by IOPS).
        util_is_capacity: True when %util measures capacity (a device serving one request
            at a time), None when undetermined.
        service_model: how the device serves requests and what decided it
            (``parallel (data)``), when the samples were judged.
        notes: plain-language observations with the numbers behind them.
    """

    device: str
    kind: str
    parent: str | None
    intervals: int
    span_s: float
    iops_mean: float | None
    iops_peak: float | None
    r_iops_mean: float | None
    w_iops_mean: float | None
    MBps_mean: float | None
    MBps_peak: float | None
    r_await_ms: float | None
    w_await_ms: float | None
    await_peak_ms: float | None
    util_mean_pct: float | None
    util_peak_pct: float | None
    aqu_sz_mean: float | None
    aqu_sz_peak: float | None
    areq_kB: float | None
    peak_ts: datetime | None
    util_is_capacity: bool | None
    service_model: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["peak_ts"] = self.peak_ts.isoformat() if self.peak_ts else None
        return d


def util_is_capacity(kind: str, info: DeviceInfo | None) -> bool | None:
    """Whether %util measures capacity, from the labels alone (no samples): see
    :func:`iogauge.analysis.service_model.label_prior`. ``summarize`` takes the decision
    from the samples when the caller has it."""
    return decide(info.name if info else "", kind, info, None, None, None).util_is_capacity


def _wmean(df: pl.DataFrame, value: str, weight: str) -> float | None:
    sub = df.select(pl.col(value), pl.col(weight)).drop_nulls()
    w = float(sub[weight].sum())
    if not sub.height or not w:
        return None
    return float((sub[value] * sub[weight]).sum()) / w


def _opt(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


def summarize(frame: SampleFrame, infos: dict[str, DeviceInfo] | None = None,
              decisions: Mapping[str, ServiceDecision] | None = None) -> list[DeviceSummary]:
    """One :class:`DeviceSummary` per device, busiest first.

    ``decisions`` (device -> service model, as ``analyze`` decided it from the samples)
    says where %util measures capacity; without one a device is judged by its labels."""
    infos = infos or {}
    decisions = decisions or {}
    df = frame.df.filter(~pl.col("reset") & ~pl.col("since_boot"))
    out: list[DeviceSummary] = []
    for (device,), g in df.group_by(["device"], maintain_order=True):
        dev = str(device)
        kind = str(g["device_kind"][0])
        parent = g["parent"][0]
        iops = g["iops"]
        mbps = g["kBps"] / 1024.0
        peak_idx = iops.arg_max() if iops.null_count() < g.height else None
        s = DeviceSummary(
            device=dev, kind=kind, parent=parent, intervals=g.height,
            span_s=float(g["interval_s"].sum()),
            iops_mean=_opt(_wmean(g, "iops", "interval_s")),
            iops_peak=_opt(iops.max()),
            r_iops_mean=_opt(_wmean(g, "r_iops", "interval_s")),
            w_iops_mean=_opt(_wmean(g, "w_iops", "interval_s")),
            MBps_mean=_opt(_wmean(g.with_columns(mb=mbps), "mb", "interval_s")),
            MBps_peak=_opt(mbps.max()),
            r_await_ms=_wmean(g.with_columns(n=pl.col("r_iops") * pl.col("interval_s")),
                              "r_await_ms", "n"),
            w_await_ms=_wmean(g.with_columns(n=pl.col("w_iops") * pl.col("interval_s")),
                              "w_await_ms", "n"),
            await_peak_ms=_opt(g.filter(pl.col("iops") > 0)["await_ms"].max()),
            util_mean_pct=_opt(_wmean(g, "util_pct", "interval_s")),
            util_peak_pct=_opt(g["util_pct"].max()),
            aqu_sz_mean=_opt(_wmean(g, "aqu_sz", "interval_s")),
            aqu_sz_peak=_opt(g["aqu_sz"].max()),
            areq_kB=_wmean(g.with_columns(n=pl.col("iops") * pl.col("interval_s")),
                           "areq_kB", "n"),
            peak_ts=None if peak_idx is None else g["ts"][peak_idx],
            util_is_capacity=(decisions[dev].util_is_capacity if dev in decisions
                              else util_is_capacity(kind, infos.get(dev))),
            service_model=decisions[dev].short if dev in decisions else None,
        )
        s.notes = _notes(s, infos.get(dev), decisions.get(dev))
        out.append(s)
    out.sort(key=lambda s: -(s.iops_mean or 0.0))
    return out


def _notes(s: DeviceSummary, info: DeviceInfo | None,
           decision: ServiceDecision | None) -> list[str]:
    notes: list[str] = []
    if s.iops_mean is None:
        return ["no measured interval (only reset or since-boot rows)"]
    if s.iops_mean < IDLE_IOPS:
        notes.append(f"idle: {s.iops_mean:.2f} IO/s on average over {s.span_s:.0f} s")
        return notes
    if decision is not None:
        notes.append(decision.summary)
    if s.util_is_capacity is False:
        notes.append("%util is not a capacity measure here ([sysstat] iostat(1)): judge by "
                     "latency and queue instead")
    elif s.util_is_capacity and s.util_peak_pct is not None:
        if s.util_peak_pct >= BUSY_SATURATED_PCT:
            notes.append(f"busy {s.util_peak_pct:.0f} % at peak (>= {BUSY_SATURATED_PCT:.0f} "
                         "%): at its limit, one request at a time; latency climbs from here")
        elif s.util_peak_pct >= BUSY_HIGH_PCT:
            notes.append(f"busy {s.util_peak_pct:.0f} % at peak: little headroom left on "
                         "a device serving one request at a time")
    elif s.util_is_capacity is None:
        notes.append("one request at a time or in parallel is unknown: %util read with "
                     "caution")
    if info is not None and info.kind == "partition" and info.parent:
        notes.append(f"partition of {info.parent}: its load adds to the disk's")
    return notes
