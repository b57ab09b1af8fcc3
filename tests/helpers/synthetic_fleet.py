"""A synthetic fleet of node_exporter series, written as OpenMetrics for
``promtool tsdb create-blocks-from openmetrics`` (one file per 2-hour block).

Every host has the same four devices: ``sda`` (a 7,200 rpm disk: ~6 ms per request, its
%util a capacity measure), ``sdb`` (the same, lightly used), ``nvme0n1`` and ``nvme1n1``
(0.1 ms, parallel). Load follows a day's curve with noise; the service times give %util,
and the response time follows a single-server queue, R = S / (1 - rho) [Oe] §3.

Planted devices (``Plant``):

* ``saturation``: the disk's demand passes its capacity for the span's middle third: IOPS
  flat at ~97 % of 1/S, %util ~100 %, the response time ~10x the light-load one -- the
  drop-off a bottleneck verdict needs ([Goodus] §5.2's "throughput flattens while response
  time climbs");
* ``knee``: held at ~88 % busy for the middle third (past the linear part, not saturated);
* ``gap``: no samples for ``GAP_STEPS`` steps in the middle (the exporter was down);
* ``reset``: every counter restarts from 0 in the middle (the device was re-created);
* ``wrap``: the millisecond counters start 5 minutes of busy time below 2**32 ms and wrap
  (the kernel prints them as 32-bit ``%u`` [iostats]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

DEVICES: tuple[tuple[str, float, float], ...] = (
    # name, service time (s), light-load IOPS
    ("sda", 0.006, 40.0), ("sdb", 0.006, 8.0),
    ("nvme0n1", 0.0001, 900.0), ("nvme1n1", 0.0001, 300.0))
ROTATING = frozenset({"sda", "sdb"})
BLOCK_S = 7200
GAP_STEPS = 10
WRAP_S = 4294967.296  # 2**32 ms, as node_exporter's seconds


@dataclass(frozen=True)
class Plant:
    host: int
    device: str
    kind: str  # saturation | knee | gap | reset | wrap


def host_name(i: int) -> str:
    return f"host{i:04d}:9100"


def _series(n: int, svc_s: float, base_iops: float, step_s: float, rng: np.random.Generator,
            kind: str | None) -> dict[str, F64]:
    """Per-step increments of each counter for one device."""
    t = np.arange(n)
    day = 0.6 + 0.4 * np.sin(2 * math.pi * t * step_s / 86400.0) ** 2
    iops = base_iops * day * rng.uniform(0.85, 1.15, n)
    cap = 1.0 / svc_s
    mid = slice(n // 3, 2 * n // 3)
    if kind == "saturation":
        iops[mid] = cap * rng.uniform(0.96, 0.98, mid.stop - mid.start)
    elif kind == "knee":
        iops[mid] = cap * rng.uniform(0.86, 0.90, mid.stop - mid.start)
    rho = np.minimum(iops * svc_s, 0.995)
    resp = svc_s / (1.0 - np.minimum(rho, 0.9))
    if kind == "saturation":
        resp[mid] = svc_s * rng.uniform(9.0, 11.0, mid.stop - mid.start)
    reads = np.round(iops * 0.7 * step_s)
    writes = np.round(iops * 0.3 * step_s)
    ios = reads + writes
    return {
        "reads_completed": reads, "writes_completed": writes,
        "reads_merged": np.round(reads * 0.05), "writes_merged": np.round(writes * 0.2),
        "read_bytes": reads * 16384.0, "written_bytes": writes * 32768.0,
        "read_time_seconds": np.round(reads * resp * 1000) / 1000,
        "write_time_seconds": np.round(writes * resp * 1000) / 1000,
        "io_time_seconds": np.round(np.minimum(ios * svc_s, step_s) * 1000) / 1000,
        "io_time_weighted_seconds": np.round(ios * resp * 1000) / 1000,
    }


def _counters(inc: dict[str, F64], kind: str | None) -> dict[str, F64]:
    out = {k: np.cumsum(v) for k, v in inc.items()}
    n = len(next(iter(inc.values())))
    if kind == "reset":
        half = n // 2
        for k, v in inc.items():
            out[k][half:] = np.cumsum(v[half:])
    if kind == "wrap":
        for k in ("read_time_seconds", "write_time_seconds", "io_time_seconds",
                  "io_time_weighted_seconds"):
            out[k] = np.mod(out[k] + WRAP_S - 300.0, WRAP_S)
    return out


def part_of(host: int, parts: Sequence[int]) -> str:
    """The ``part`` label of a host: ``p0`` below parts[0], ``p1`` below parts[1], ...
    (a benchmark selects the first 250, 500, ... hosts with one matcher)."""
    return f"p{sum(1 for b in parts if host >= b)}"


def write_fleet(out_dir: Path, hosts: int, start_s: int, steps: int, step_s: int = 60,
                plants: Sequence[Plant] = (), seed: int = 7, parts: Sequence[int] = ()
                ) -> list[Path]:
    """OpenMetrics files, one per 2-hour block, for ``hosts`` x DEVICES over ``steps``
    samples from ``start_s``; returns their paths. ``parts``: host indices where the
    ``part`` label changes (:func:`part_of`)."""
    planted = {(p.host, p.device): p.kind for p in plants}
    ts = start_s + step_s * np.arange(steps)
    blocks = sorted(set((ts // BLOCK_S).tolist()))
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {b: (out_dir / f"block-{b}.om").open("w") for b in blocks}
    block_of = ts // BLOCK_S
    try:
        for name in ("reads_completed", "writes_completed", "reads_merged", "writes_merged",
                     "read_bytes", "written_bytes", "read_time_seconds", "write_time_seconds",
                     "io_time_seconds", "io_time_weighted_seconds", "info",
                     "ata_rotation_rate_rpm"):
            _family(files, block_of, ts, name, hosts, steps, step_s, planted, seed, parts)
        for fh in files.values():
            fh.write("# EOF\n")
    finally:
        for fh in files.values():
            fh.close()
    return [out_dir / f"block-{b}.om" for b in blocks]


def _family(files: dict[int, TextIO], block_of: npt.NDArray[np.int64],
            ts: npt.NDArray[np.int64], name: str, hosts: int, steps: int, step_s: int,
            planted: dict[tuple[int, str], str], seed: int, parts: Sequence[int]) -> None:
    gauge = name in ("info", "ata_rotation_rate_rpm")
    metric = f"node_disk_{name}"
    for fh in files.values():
        fh.write(f"# TYPE {metric} {'gauge' if gauge else 'counter'}\n")
    suffix = "" if gauge else "_total"
    for h in range(hosts):
        for d, (dev, svc, base) in enumerate(DEVICES):
            kind = planted.get((h, dev))
            labels = (f'{{instance="{host_name(h)}",job="node",part="{part_of(h, parts)}",'
                      f'device="{dev}"')
            if name == "info":
                labels += ',model="SYNTH-HDD"' if dev in ROTATING else ',model="SYNTH-NVME"'
                values = np.ones(steps)
            elif name == "ata_rotation_rate_rpm":
                values = np.full(steps, 7200.0 if dev in ROTATING else 0.0)
            else:
                rng = np.random.default_rng((seed, h, d))
                values = _counters(_series(steps, svc, base, step_s, rng, kind), kind)[name]
            labels += "}"
            keep = np.ones(steps, dtype=bool)
            if kind == "gap":
                keep[steps // 2: steps // 2 + GAP_STEPS] = False
            head = f"{metric}{suffix}{labels} "
            for b, fh in files.items():
                sel = keep & (block_of == b)
                lines = [f"{head}{v:.10g} {t}\n" for v, t in zip(values[sel].tolist(),
                                                                 ts[sel].tolist(), strict=True)]
                fh.writelines(lines)
