"""Titles, units and number formats of summary fields, defined once for every renderer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricFormat:
    """How a field is shown: column title, unit, and decimals."""

    title: str
    unit: str
    decimals: int

    def fmt(self, value: float | None) -> str:
        return "-" if value is None else f"{value:,.{self.decimals}f}"


#: DeviceSummary field -> presentation.
SUMMARY_FORMATS: dict[str, MetricFormat] = {
    "iops_mean": MetricFormat("IOPS mean", "", 1),
    "iops_peak": MetricFormat("IOPS peak", "", 1),
    "MBps_mean": MetricFormat("MB/s mean", "", 2),
    "MBps_peak": MetricFormat("MB/s peak", "", 2),
    "r_await_ms": MetricFormat("r_await", "ms", 2),
    "w_await_ms": MetricFormat("w_await", "ms", 2),
    "await_peak_ms": MetricFormat("await peak", "ms", 2),
    "areq_kB": MetricFormat("req size", "kB", 1),
    "aqu_sz_mean": MetricFormat("aqu-sz", "", 2),
    "util_mean_pct": MetricFormat("%util mean", "", 1),
    "util_peak_pct": MetricFormat("%util peak", "", 1),
}
