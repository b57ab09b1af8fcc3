"""Workloads: what the simulator (and, as fio job files, the emulated device) is asked to do.

A :class:`Workload` is one application's stream of I/O against the device:

* **sizes**: I/O size distribution (size, share of I/Os);
* **read_share**: fraction of I/Os that are reads (the rest are writes);
* **regions**: where offsets land -- weighted ranges given as *fractions of the device*, so a
  workload scales to any device size; offsets are uniform within a region, aligned to
  ``align_bytes`` (``pattern="random"``), or each thread walks its region sequentially from
  a random start (``pattern="sequential"``);
* **threads**: closed-loop concurrency -- each thread has one I/O outstanding and issues the
  next when it completes (fio ``numjobs`` x ``iodepth=1``);
* **rate_iops** and **arrival**: an optional cap on the workload's total issue rate. The
  limiter never lets the rate exceed the cap and never banks unused time:
  ``poisson`` spaces permits by exponential gaps (fio ``rate_process=poisson``), ``fixed`` by
  ``1/rate`` (fio's default), ``per_second`` counts I/Os in each wall-clock second and blocks
  the rest of the second once ``rate_iops`` were issued -- the limiter [Oe]'s benchmark
  used (§4 step (4): "once the count exceeds b, block I/O for the rest of the second");
* **rate_schedule**: later changes of the cap, ``((from_s, rate_iops), ...)`` in virtual
  seconds -- [Oe]'s evaluations change the offered load mid-run (Tables 4-6);
* **group**: accounting and throttling group ([Oe]'s A and B; a cgroup in real life).

[Oe]'s two workloads (Table 2) are built by :func:`file_share` and :func:`backup`,
placed on the volume's first 500 GB (**A**), last 500 GB (**B**) -- "a 2 TB volume, A = its
first 500 GB, B = its last 500 GB" (§3) -- or both (**A+B**); on another device size the
same fractions are used (each partition is a quarter of the device).

What the text allows and what is approximated:

* **file share** I/O size mix and R/W ratio are the paper's Fig. 1, a chart whose values the
  text does not give. We use the *Iometer "File Server" access specification* (Intel's
  standard file-server pattern: 512 B 10 %, 1 KB 5 %, 2 KB 5 %, 4 KB 60 %, 8 KB 2 %, 16 KB
  4 %, 32 KB 4 %, 64 KB 10 %; 80 % reads; 100 % random), the conventional stand-in for a
  Samba/CIFS file server. Its offsets (Fig. 2, also a chart) are taken as uniform over the
  whole 500 GB partition.
* **backup** is given in full by Table 2: 128 KB, read:write 50:50, offsets in 0-30 GB and
  300-330 GB of the 500 GB partition; we issue them at random within those two ranges with
  equal weight (the table does not say sequential, and 65 IOPS x 128 KB = 8 MB/s at 100 %
  busy in §3 is far below any sequential rate of that array).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Arrival = Literal["poisson", "fixed", "per_second"]
Pattern = Literal["random", "sequential"]
Placement = Literal["A", "B", "A+B"]

KIB = 1024
#: [Oe] §3: partitions A (first 500 GB) and B (last 500 GB) of a 2 TB volume, as
#: fractions of the device.
PARTITIONS: dict[str, tuple[float, float]] = {"A": (0.0, 0.25), "B": (0.75, 1.0)}
#: Size of [Oe]'s partitions, to express Table 2's absolute offsets as fractions.
PAPER_PARTITION_BYTES = 500 * 10**9


@dataclass(frozen=True)
class IoSize:
    """One entry of an I/O size distribution.

    Attributes:
        size_bytes: transfer size.
        share: fraction of the workload's I/Os with this size (shares sum to 1).
    """

    size_bytes: int
    share: float


@dataclass(frozen=True)
class Region:
    """A range of offsets, as fractions of the device, and its share of the I/Os.

    Attributes:
        start: first byte as a fraction of the device (0 <= start < end <= 1).
        end: end (exclusive) as a fraction of the device.
        weight: fraction of the workload's I/Os that land here (weights sum to 1).
    """

    start: float
    end: float
    weight: float = 1.0


@dataclass(frozen=True)
class Workload:
    """One application's I/O stream (see the module docstring for every field).

    Attributes:
        name: label for reports (``file-share@A``).
        sizes: I/O size distribution.
        read_share: fraction of I/Os that are reads.
        regions: offset ranges (fractions of the device) with weights.
        threads: closed-loop threads, one I/O outstanding each.
        rate_iops: cap on the total issue rate (None: as fast as the device allows).
        arrival: how the cap spaces I/Os: ``poisson``, ``fixed`` or ``per_second``.
        pattern: ``random`` or ``sequential`` offsets within the regions.
        group: accounting/throttling group (``A``, ``B``).
        align_bytes: offsets are multiples of this (fio ``blockalign``).
        extent: the range (fractions of the device) the workload addresses -- its
            partition; fio's ``offset``/``size``. None: the hull of the regions.
        rate_schedule: ``(from_s, rate_iops)`` pairs, increasing in time: the cap from
            ``from_s`` on (before the first, ``rate_iops``). Simulator only.
        notes: what is approximated, for reports and job files.
    """

    name: str
    sizes: tuple[IoSize, ...]
    read_share: float
    regions: tuple[Region, ...] = (Region(0.0, 1.0),)
    threads: int = 1
    rate_iops: float | None = None
    arrival: Arrival = "poisson"
    pattern: Pattern = "random"
    group: str = "A"
    align_bytes: int = 4 * KIB
    extent: tuple[float, float] | None = None
    rate_schedule: tuple[tuple[float, float], ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.sizes or any(s.size_bytes <= 0 or s.size_bytes % 512 or s.share < 0
                                 for s in self.sizes):
            problems.append("sizes must be non-empty, whole 512-byte sectors, shares >= 0")
        elif abs(sum(s.share for s in self.sizes) - 1.0) > 1e-6:
            problems.append("size shares must sum to 1")
        if not 0.0 <= self.read_share <= 1.0:
            problems.append("read_share must be in [0, 1]")
        if not self.regions or any(not 0.0 <= r.start < r.end <= 1.0 or r.weight < 0
                                   for r in self.regions):
            problems.append("regions must be non-empty with 0 <= start < end <= 1")
        elif abs(sum(r.weight for r in self.regions) - 1.0) > 1e-6:
            problems.append("region weights must sum to 1")
        if self.threads < 1:
            problems.append("threads must be >= 1")
        if self.rate_iops is not None and self.rate_iops <= 0:
            problems.append("rate_iops must be > 0 (None for no cap)")
        if self.arrival == "per_second" and self.rate_iops is not None and self.rate_iops < 1:
            problems.append("a per_second cap needs rate_iops >= 1")
        if self.align_bytes <= 0 or self.align_bytes % 512:
            problems.append("align_bytes must be a positive multiple of 512")
        times = [t for t, _r in self.rate_schedule]
        if any(r <= 0 for _t, r in self.rate_schedule) or times != sorted(times) or any(
                t < 0 for t in times):
            problems.append("rate_schedule needs increasing times >= 0 and rates > 0")
        if self.arrival == "per_second" and any(r < 1 for _t, r in self.rate_schedule):
            problems.append("a per_second cap needs rates >= 1")
        if self.extent is not None and not (
                0.0 <= self.extent[0] < self.extent[1] <= 1.0
                and all(self.extent[0] <= r.start and r.end <= self.extent[1]
                        for r in self.regions)):
            problems.append("extent must lie in [0, 1] and contain every region")
        if problems:
            raise ValueError(f"workload {self.name!r}: " + "; ".join(problems))

    @property
    def hull(self) -> tuple[float, float]:
        """The addressed range: ``extent`` or the hull of the regions."""
        if self.extent is not None:
            return self.extent
        return min(r.start for r in self.regions), max(r.end for r in self.regions)

    @property
    def mean_size_bytes(self) -> float:
        return sum(s.size_bytes * s.share for s in self.sizes)

    def with_rate(self, rate_iops: float | None, arrival: Arrival | None = None) -> Workload:
        """The same workload with another cap (None: uncapped) and no schedule."""
        return replace(self, rate_iops=rate_iops, rate_schedule=(),
                       arrival=self.arrival if arrival is None else arrival)

    @property
    def capped(self) -> bool:
        """Whether a rate cap applies at some time."""
        return self.rate_iops is not None or bool(self.rate_schedule)

    def rate_at(self, t_s: float) -> float | None:
        """The cap in force at virtual time ``t_s`` (None: uncapped)."""
        rate = self.rate_iops
        for start, r in self.rate_schedule:
            if start <= t_s:
                rate = r
            else:
                break
        return rate

    def with_group(self, group: str) -> Workload:
        return replace(self, group=group)


# ---- [Oe] ------------------------------------------------------------------------

#: Iometer "File Server" access specification: (size, % of I/Os); 80 % reads, 100 % random.
FILE_SERVER_MIX: tuple[tuple[int, float], ...] = (
    (512, 0.10), (1 * KIB, 0.05), (2 * KIB, 0.05), (4 * KIB, 0.60), (8 * KIB, 0.02),
    (16 * KIB, 0.04), (32 * KIB, 0.04), (64 * KIB, 0.10),
)
FILE_SERVER_READ_SHARE = 0.80

#: [Oe] Table 2, backup offsets within a 500 GB partition (bytes).
BACKUP_RANGES_BYTES: tuple[tuple[int, int], ...] = ((0, 30 * 10**9),
                                                    (300 * 10**9, 330 * 10**9))


def _placements(placement: str) -> list[tuple[float, float]]:
    if placement == "A+B":
        return [PARTITIONS["A"], PARTITIONS["B"]]
    if placement not in PARTITIONS:
        raise ValueError(f"placement {placement!r} is not A, B or A+B")
    return [PARTITIONS[placement]]


def _within(part: tuple[float, float], lo: float, hi: float) -> tuple[float, float]:
    """Map a sub-range [lo, hi) given as fractions of a partition onto device fractions."""
    span = part[1] - part[0]
    return part[0] + lo * span, part[0] + hi * span


def file_share(placement: str = "A", *, threads: int = 10, rate_iops: float | None = None,
               arrival: Arrival = "per_second", group: str | None = None) -> Workload:
    """[Oe]'s file-share workload (Samba, ~1,000 users) on partition A, B or both.

    Sizes and R/W: the Iometer File Server pattern standing in for Fig. 1 (see the module
    docstring); offsets uniform over the partition(s), split evenly for ``A+B``.
    """
    parts = _placements(placement)
    regions = tuple(Region(a, b, 1.0 / len(parts)) for a, b in parts)
    return Workload(
        name=f"file-share@{placement}",
        sizes=tuple(IoSize(s, w) for s, w in FILE_SERVER_MIX),
        read_share=FILE_SERVER_READ_SHARE, regions=regions, threads=threads,
        rate_iops=rate_iops, arrival=arrival, group=group or placement.replace("+", ""),
        align_bytes=4 * KIB, extent=parts[0] if len(parts) == 1 else None,
        notes=(("I/O size mix and R/W ratio: Iometer File Server pattern (approximates the "
               "paper's Fig. 1, whose values the text does not give)"),
               "offsets uniform over the 500 GB partition (approximates Fig. 2)"))


def backup(placement: str = "A", *, threads: int = 10, rate_iops: float | None = None,
           arrival: Arrival = "per_second", group: str | None = None) -> Workload:
    """[Oe]'s backup workload (Table 2): 128 KB, 50:50 R/W, 0-30 GB and 300-330 GB.

    The two ranges are given within a 500 GB partition; they are scaled with it. Offsets
    are aligned to the I/O size (128 KiB), so a command covers two 64 KiB stripe units.
    Aligned to 4 KiB instead (three units a command, a write 8 member I/Os instead of 6)
    the backup on [Oe]'s device comes nearer the paper's rates (paper-sec3 --sim, seed
    4, 2026-11-25, the controller's read-modify-write reads then in parallel and the
    members' write-back after 70 ms: 93/83/67 IOPS on A/B/A+B against 115/102/85, the
    paper's 65 on A; file share / backup 2.95x against 2.37x, the paper's 3.68x) but its
    knees do not move (78/77/81 % against 78/79/81 %), so the alignment is kept.
    """
    parts = _placements(placement)
    regions: list[Region] = []
    for part in parts:
        for lo_b, hi_b in BACKUP_RANGES_BYTES:
            a, b = _within(part, lo_b / PAPER_PARTITION_BYTES, hi_b / PAPER_PARTITION_BYTES)
            regions.append(Region(a, b, 1.0 / (len(parts) * len(BACKUP_RANGES_BYTES))))
    return Workload(
        name=f"backup@{placement}", sizes=(IoSize(128 * KIB, 1.0),), read_share=0.5,
        regions=tuple(regions), threads=threads, rate_iops=rate_iops, arrival=arrival,
        group=group or placement.replace("+", ""), align_bytes=128 * KIB,
        extent=parts[0] if len(parts) == 1 else None,
        notes=(("128 KB, 50:50, 0-30 GB and 300-330 GB of the partition (Table 2); random "
               "within the ranges"),))


PAPER_SEC3_WORKLOADS = {"file-share": file_share, "backup": backup}


def oe_paper(name: str, placement: str = "A", *, threads: int = 10,
             rate_iops: float | None = None, arrival: Arrival = "per_second") -> list[Workload]:
    """[Oe]'s workload ``name`` on ``placement`` (``A``, ``B`` or ``A+B``).

    ``A+B`` gives two workloads, groups A and B, that split the threads and the rate cap
    evenly: §3 loads both areas at once, and keeping the total concurrency equal makes the
    three placements comparable.
    """
    if name not in PAPER_SEC3_WORKLOADS:
        raise ValueError(f"unknown [Oe] workload {name!r}; known: "
                         f"{', '.join(PAPER_SEC3_WORKLOADS)}")
    make = PAPER_SEC3_WORKLOADS[name]
    if placement != "A+B":
        return [make(placement, threads=threads, rate_iops=rate_iops, arrival=arrival)]
    half_t = max(1, threads // 2)
    half_r = None if rate_iops is None else rate_iops / 2.0
    return [make(p, threads=half_t, rate_iops=half_r, arrival=arrival, group=p)
            for p in ("A", "B")]


# ---- fio --------------------------------------------------------------------------------

def _size_token(n: int) -> str:
    for unit, f in (("m", 1 << 20), ("k", 1 << 10)):
        if n % f == 0:
            return f"{n // f}{unit}"
    return str(n)


def _whole_pct(x: float, what: str) -> int:
    v = x * 100.0
    if abs(v - round(v)) > 1e-6:
        raise ValueError(f"{what} is {v:.6g} %: fio takes whole percentages; give "
                         "device_bytes for absolute offsets")
    return round(v)


def fio_job(workloads: Workload | list[Workload], filename: str = "${DEVICE}", *,
            runtime_s: float | None = None, ramp_time_s: float | None = None,
            device_bytes: int | None = None) -> str:
    """A fio job file equivalent to ``workloads`` (one job section per workload).

    Threads become ``numjobs`` with ``iodepth=1`` (psync, direct I/O); a rate cap becomes
    ``rate_iops=reads,writes`` per job (fio caps each clone and each direction; whole
    numbers, so small per-thread rates are rounded) with ``rate_process=poisson`` for poisson
    arrivals (fio has no per-second-burst limiter: ``per_second`` and ``fixed`` both map to
    fio's default even spacing, which fio paces in bytes: with several I/O sizes the cap is
    written as ``rate=`` bytes/s, the same IOPS at the mix's mean size); the extent becomes
    ``offset``/``size`` and the regions within it ``random_distribution=zoned`` (access % /
    range %); sizes become ``bssplit`` and the R/W split ``rwmixread``. Without
    ``device_bytes`` every position is a whole percentage (fio parses no fractions there), so
    the file fits any device size, like the workload; with it, byte offsets and ``zoned_abs``
    are written instead. ``${DEVICE}`` is
    expanded by fio from the environment.
    """
    wls = [workloads] if isinstance(workloads, Workload) else list(workloads)
    lines = ["; generated by iogauge.lab.workloads.fio_job -- do not edit by hand",
             "[global]", f"filename={filename}", "ioengine=psync", "direct=1",
             "iodepth=1", "randrepeat=0"]
    if runtime_s is not None:
        lines += ["time_based=1", f"runtime={runtime_s:g}"]
    if ramp_time_s is not None:
        lines.append(f"ramp_time={ramp_time_s:g}")
    for w in wls:
        lines += ["", f"[{w.name}]"]
        lines += [f"; {note}" for note in w.notes]
        lo, hi = w.hull
        rw = "randrw" if w.pattern == "random" else "rw"
        lines += [f"rw={rw}", f"rwmixread={round(w.read_share * 100)}"]
        zones = _zones(w.regions, lo, hi)
        if device_bytes is None:
            lines += [f"offset={_whole_pct(lo, 'offset')}%",
                      f"size={_whole_pct(hi - lo, 'size')}%"]
            zone_txt = [f"{_whole_pct(acc, 'zone access')}/"
                        f"{_whole_pct(size, 'zone size')}" for acc, size in zones]
            dist = "zoned"
        else:
            align = w.align_bytes
            off_b = int(lo * device_bytes) // align * align
            size_b = int(hi * device_bytes) // align * align - off_b
            lines += [f"offset={off_b}", f"size={size_b}"]
            zone_txt = [f"{_whole_pct(acc, 'zone access')}/{int(size * size_b)}"
                        for acc, size in zones]
            dist = "zoned_abs"
        lines += [f"blockalign={_size_token(w.align_bytes)}", f"numjobs={w.threads}"]
        if len(w.sizes) == 1:
            lines.append(f"bs={_size_token(w.sizes[0].size_bytes)}")
        else:
            split = ":".join(f"{_size_token(s.size_bytes)}/{s.share * 100:.6g}"
                             for s in w.sizes)
            lines.append(f"bssplit={split}")
        if len(zones) > 1:
            lines.append(f"random_distribution={dist}:" + ":".join(zone_txt))
        if w.rate_iops is not None:
            # fio caps reads and writes separately (rate_iops=read,write) and per clone.
            per_job = w.rate_iops / w.threads
            r_cap = max(1, round(per_job * w.read_share)) if w.read_share > 0 else 0
            w_cap = max(1, round(per_job * (1 - w.read_share))) if w.read_share < 1 else 0
            if w.arrival != "poisson" and len(w.sizes) > 1:
                # fio's linear pacing counts bytes: rate_iops with a block size range is
                # turned into rate_iops x the *smallest* size per second (fio HOWTO,
                # rate_iops) and each I/O charged its own size, so a 512 B-64 KiB mix ran
                # at ~1/20 of the cap (measured, fio 3.33: rate_iops=40,10 gave 2.0 + 0.5
                # IOPS). A byte cap of the cap x the mix's mean size gives the cap's IOPS on
                # average (30 s: 41.3 + 10.2); second by second the count swings with the
                # sizes drawn. (Poisson pacing draws its gaps per I/O: rate_iops is exact.)
                mean = w.mean_size_bytes
                r_b = max(1, round(per_job * w.read_share * mean)) if r_cap else 0
                w_b = max(1, round(per_job * (1 - w.read_share) * mean)) if w_cap else 0
                lines.append(f"; rate = {per_job:g} IOPS x {mean:.0f} B mean I/O size "
                             "(fio paces linear caps in bytes)")
                lines.append(f"rate={r_b},{w_b}")
            else:
                lines.append(f"rate_iops={r_cap},{w_cap}")
            if w.arrival == "poisson":
                lines.append("rate_process=poisson")
    return "\n".join(lines) + "\n"


def _zones(regions: tuple[Region, ...], lo: float, hi: float) -> list[tuple[float, float]]:
    """(access share, range share) pairs covering [lo, hi); gaps get 0 access."""
    span = hi - lo
    out: list[tuple[float, float]] = []
    pos = lo
    for r in sorted(regions, key=lambda r: r.start):
        if r.start > pos + 1e-12:
            out.append((0.0, (r.start - pos) / span))
        out.append((r.weight, (r.end - r.start) / span))
        pos = r.end
    if hi > pos + 1e-12:
        out.append((0.0, (hi - pos) / span))
    return out


def bundled_job_files() -> dict[str, str]:
    """The fio job files shipped in ``iogauge/lab/jobs/``: [Oe]'s two workloads on A, B
    and A+B, uncapped, 10 threads, whole-percentage positions (any device size).

    Run one with ``DEVICE=/dev/loopN fio --time_based --runtime=60 file-share-A.fio``;
    add ``--rate_iops=r,w`` per job to cap it. A test keeps the files equal to this.
    """
    out: dict[str, str] = {}
    for name in PAPER_SEC3_WORKLOADS:
        for placement in ("A", "B", "A+B"):
            fname = f"{name}-{placement.replace('+', '')}.fio"
            out[fname] = fio_job(oe_paper(name, placement))
    return out
