"""Which charts a device gets, from the data it has: specs for the embedded data block and
the figures of its section.
"""

from __future__ import annotations

from typing import Any

from iogauge.analysis.types import (
    DeviceReport,
)
from iogauge.reporting.html.rows import MAX_RMF_BARS, RMF_PARTS, SIZE_EDGES_KB, TS_CHARTS
from iogauge.reporting.html.sections import _duration


def _chart_specs(i: int, rep: DeviceReport, has: set[str], ts: dict[str, Any] | None,
                 util_sc: dict[str, Any] | None, lat_sc: dict[str, Any] | None,
                 mix: dict[str, Any] | None, rmf: dict[str, Any] | None
                 ) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str]]]:
    """Chart specs for the data block and (id, title, caption, kind) for the figures."""
    specs: list[dict[str, Any]] = []
    figs: list[tuple[str, str, str, str]] = []
    if ts is not None:
        cap = ("every sample" if ts["mode"] == "raw" else
               f"min\u2013max band of the samples in each {_duration(ts['dt'])} column")
        for cid, title, first, fallback, extra in TS_CHARTS:
            names = [c for c in first if c in has] or [c for c in fallback if c in has]
            names += [c for c in extra if c in has]
            if not names:
                continue
            el = f"d{i}-{cid}"
            specs.append({"el": el, "type": "ts", "title": title, "series": names})
            figs.append((el, title, cap, "ts"))
    c = rep.capacity
    if util_sc is not None:
        el = f"d{i}-sc-util"
        fit: dict[str, Any] = {}
        if c is not None:
            fit = {"method": c.method, "busy_per_iops": c.busy_per_iops,
                   "knee_iops": c.knee_iops, "knee_util_pct": c.knee_util_pct,
                   "max_iops": c.max_iops, "current_iops": c.current_iops}
        specs.append({"el": el, "type": "scatter", "title": "%util vs IOPS",
                      "x": "iops", "y": "util_pct", "data": util_sc, "fit": fit})
        cap = "one dot per occupied pixel cell (darker = more intervals)"
        if c is not None and c.method == "util-linear" and c.busy_per_iops:
            cap += "; line: linear fit up to the knee, dashed to the max at 100 %"
        figs.append((el, "%util vs IOPS", cap, "scatter"))
    if lat_sc is not None:
        el = f"d{i}-sc-lat"
        ref: dict[str, Any] = {}
        cap_obj = rep.capability
        if cap_obj is not None:
            ref = {"typical_ms": cap_obj.latency_ms_typical,
                   "design_ms": cap_obj.latency_ms_design}
        if c is not None and c.method == "latency-knee":
            ref.update(knee_iops=c.knee_iops, max_iops=c.max_iops)
        specs.append({"el": el, "type": "scatter", "title": "Latency vs IOPS",
                      "x": "iops", "y": "await_ms", "data": lat_sc, "fit": ref})
        figs.append((el, "Latency vs IOPS", "await per interval against its load", "scatter"))
    if mix is not None and any(v for v in mix["ops"] if v):
        a = rep.attributes
        el = f"d{i}-mix"
        specs.append({"el": el, "type": "mix", "title": "Read/write mix", "data": mix,
                      "read_pct": a.read_pct, "read_bytes_pct": a.read_bytes_pct,
                      "seq_pct": a.seq_pct, "seq_method": a.seq_method})
        figs.append((el, "Read/write mix", "share of operations and of bytes", "mix"))
        if mix["hist"]:
            el = f"d{i}-sizes"
            specs.append({"el": el, "type": "hist", "title": "Request sizes",
                          "edges": list(SIZE_EDGES_KB), "data": mix["hist"]})
            figs.append((el, "Request sizes",
                         "operations by mean request size of their interval", "hist"))
    if rmf is not None:
        el = f"d{i}-rmf"
        specs.append({"el": el, "type": "stack", "title": "RMF response time",
                      "data": rmf, "parts": list(RMF_PARTS)})
        cap = "IOSQ + PEND + DISC + CONN per interval"
        if rmf["merged"]:
            cap += f" (intervals merged into {MAX_RMF_BARS} bars, IOPS-weighted)"
        figs.append((el, "RMF response time", cap, "stack"))
    return specs, figs
