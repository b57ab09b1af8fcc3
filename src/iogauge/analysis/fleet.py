"""Many hosts at once: analyse batch after batch, keep the verdicts, rank the devices.

A fleet's samples never sit in memory together: each batch of hosts (a SampleFrame and its
device metadata) is analysed by :func:`iogauge.analysis.engine.analyze` and let go, and only
the per-device reports, findings and a few figures stay. Memory then follows the batch
size, not the fleet.

The ranking puts first what an operator must look at first:

1. the worst verdict (``VERDICTS`` order: bottleneck, near limit, ...);
2. then the least headroom left (share of the device's estimated maximum, [Oe] §3 for the
   util-vs-IOPS fit; a device without an estimate goes after those with one);
3. then the longest time over its response-time target (``--target``; [MS-Azure-JP]: the
   target is the system's own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from iogauge.analysis.context import LatencyTarget
from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.analysis.types import VERDICTS, AnalysisResult, DeviceReport, WindowRef
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

#: One batch: its samples and device metadata keyed ``host:device``.
Batch = tuple[SampleFrame, Mapping[str, DeviceInfo]]


@dataclass
class FleetRow:
    """One device's line in the fleet ranking.

    Attributes:
        rank: 1 = look at it first.
        host, device: as the source names them; key: the analysis' device key.
        verdict: one of VERDICTS; reason: the sentence behind it.
        headroom_pct: headroom as a share of the estimated maximum IOPS, None if unknown.
        over_target_s: seconds of samples whose response time exceeded the device's
            ``--target`` (0 when it has none).
        worst: the worst window (by response time, else by load), None when idle.
    """

    rank: int
    host: str
    device: str
    key: str
    verdict: str
    reason: str
    headroom_pct: float | None
    over_target_s: float
    worst: WindowRef | None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "device": self.device, "key": self.key,
                "verdict": self.verdict, "reason": self.reason,
                "headroom_pct": self.headroom_pct, "over_target_s": self.over_target_s,
                "worst_window": None if self.worst is None else self.worst.to_dict()}


@dataclass
class FleetResult:
    """The merged analysis of every batch and the ranking over it."""

    result: AnalysisResult
    rows: list[FleetRow] = field(default_factory=list)
    hosts: int = 0
    batches: int = 0

    def to_dict(self) -> dict[str, Any]:
        doc = self.result.to_dict()
        doc["fleet"] = {"hosts": self.hosts, "devices": len(self.rows),
                        "ranking": [r.to_dict() for r in self.rows]}
        return doc


def over_target_s(frame: SampleFrame, targets: Iterable[LatencyTarget], multi_host: bool,
                  opts: AnalysisOptions) -> dict[str, float]:
    """Seconds each device spent above its target: the first ``--target`` matching its key,
    counted only inside the target's daily window (in ``opts.tz``)."""
    targets = list(targets)
    df = frame.df
    if not targets or df.height == 0 or "await_ms" not in df.columns:
        return {}
    keys = df.select("host", "device").unique()
    out: dict[str, float] = {}
    local = pl.col("ts").dt.convert_time_zone(str(opts.tz)).dt.time()
    for host, device in keys.iter_rows():
        key = f"{host}:{device}" if multi_host else str(device)
        target = next((t for t in targets if t.matches(key)), None)
        if target is None:
            continue
        rows = df.filter((pl.col("host") == host) & (pl.col("device") == device)
                         & (pl.col("await_ms") > target.ms))
        if target.start is not None and target.end is not None:
            if target.start <= target.end:
                rows = rows.filter((local >= target.start) & (local < target.end))
            else:
                rows = rows.filter((local >= target.start) | (local < target.end))
        out[key] = float(rows["interval_s"].sum()) if rows.height else 0.0
    return out


def _merge(parts: list[AnalysisResult]) -> AnalysisResult:
    devices = [d for p in parts for d in p.devices]
    findings = [f for p in parts for f in p.findings]
    notes: list[str] = []
    for p in parts:
        notes.extend(n for n in p.notes if n not in notes)
    starts = [p.start for p in parts if p.start is not None]
    ends = [p.end for p in parts if p.end is not None]
    first = parts[0]
    return AnalysisResult(devices=devices, findings=findings, window_s=first.window_s,
                          interval_s=first.interval_s, start=min(starts) if starts else None,
                          end=max(ends) if ends else None, notes=notes)


def _worst(d: DeviceReport) -> WindowRef | None:
    return d.worst_windows[0] if d.worst_windows else None


def rank(result: AnalysisResult, over: Mapping[str, float]) -> list[FleetRow]:
    """Devices in the order of the module docstring; ``over`` = seconds over target."""
    order = {v: i for i, v in enumerate(VERDICTS)}

    def headroom(d: DeviceReport) -> float | None:
        cap = d.capacity
        return None if cap is None or cap.max_iops is None else cap.headroom_pct

    def key(d: DeviceReport) -> tuple[int, int, float, float, str]:
        h = headroom(d)
        # headroom rounded: float noise in the last digit must not reorder equal devices
        return (order.get(d.verdict, len(order)), h is None, round(h, 6) if h is not None else 0.0,
                -over.get(d.device, 0.0), d.device)

    ranked = sorted(result.devices, key=key)
    rows = []
    for i, d in enumerate(ranked, 1):
        name = d.device[len(d.host) + 1:] if d.device.startswith(f"{d.host}:") else d.device
        rows.append(FleetRow(i, d.host, name, d.device, d.verdict, d.verdict_reason,
                             headroom(d), over.get(d.device, 0.0), _worst(d)))
    return rows


def order_by_rank(result: AnalysisResult, rows: list[FleetRow]) -> None:
    """Put ``result.devices`` in the ranking's order."""
    order = {r.key: r.rank for r in rows}
    result.devices.sort(key=lambda d: order.get(d.device, len(order)))


def rank_hosts(result: AnalysisResult, frame: SampleFrame, opts: AnalysisOptions) -> None:
    """Several hosts analysed at once (a store or files): devices in the fleet order."""
    if len({d.host for d in result.devices}) > 1:
        order_by_rank(result, rank(result, over_target_s(frame, opts.targets, True, opts)))


def analyze_fleet(batches: Iterable[Batch], opts: AnalysisOptions, *,
                  multi_host: bool = True,
                  on_batch: Callable[[SampleFrame, AnalysisResult], None] | None = None
                  ) -> FleetResult:
    """Analyse each batch, keep its verdicts, and rank every device of the fleet.

    ``multi_host``: the fleet has several hosts (device keys are ``host:device``); each
    batch must then hold two hosts or more, as the analysis keys a lone host's devices by
    name. ``on_batch`` sees each batch's frame and result before the frame is let go (the
    HTML report keeps its charts' points from there).
    """
    parts: list[AnalysisResult] = []
    over: dict[str, float] = {}
    hosts: set[str] = set()
    n = 0
    for frame, infos in batches:
        n += 1
        if len(frame) == 0:
            continue
        hosts.update(frame.df["host"].unique().to_list())
        by_name = infos if multi_host else {v.name: v for v in infos.values()}
        res = analyze(frame, None, by_name, opts)
        over.update(over_target_s(frame, opts.targets, multi_host, opts))
        if on_batch is not None:
            on_batch(frame, res)
        parts.append(res)
        del frame
    if not parts:
        return FleetResult(AnalysisResult([], [], opts.window_s or 60.0, None, None, None),
                           [], 0, n)
    result = _merge(parts)
    rows = rank(result, over)
    order_by_rank(result, rows)
    return FleetResult(result, rows, len(hosts), n)
