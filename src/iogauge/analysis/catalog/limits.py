"""A profile's figures reduced to the interpolation inputs, each with its source.

Figures the catalog derives (HDD random IOPS from seek and rotation, md RAID limits from the
members, size-scaled cloud limits) carry the formula and their inputs' citations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import NamedTuple

from iogauge.analysis.catalog.profiles import (
    REF_KB,
    CatalogError,
    Figure,
    Limits,
    Profile,
    RaidLevel,
)


class _Figures:
    """A profile's figures read at one size; ``sources`` collects each figure's source as
    it is read (a size-scaled one with its arithmetic)."""

    def __init__(self, figures: Mapping[str, Figure], size_GiB: float | None) -> None:
        self.figures = figures
        self.size_GiB = size_GiB
        self.sources: dict[str, str] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.figures

    def val(self, name: str) -> float:
        fig = self.figures[name]
        v = fig.at_size(self.size_GiB if self.size_GiB is not None else 0.0)
        if fig.scaled:
            parts = [f"{fig.per_GiB:g} per GiB x {self.size_GiB:g} GiB"]
            if fig.base is not None:
                parts.insert(0, f"{fig.base:g} +")
            cap = "" if fig.max is None else f", capped at {fig.max:g}"
            self.sources[name] = f"{' '.join(parts)}{cap} = {v:g}; {fig.source}"
        else:
            self.sources.setdefault(name, fig.source)
        return v

    def opt(self, name: str) -> float | None:
        return self.val(name) if name in self.figures else None


class _Latency(NamedTuple):
    """The figures every kind takes as they are: latency design and peak, and the
    sequential-mix efficiency."""

    design_ms: float | None
    peak_ms: float | None
    seq_mix_efficiency: float | None


def derive_limits(p: Profile, raid: Mapping[str, RaidLevel], size_GiB: float | None = None
                  ) -> Limits:
    """Reduce a profile's figures to the interpolation inputs, with a source for each."""
    f = _Figures(p.figures, size_GiB)
    # read first, whatever the kind (the sources keep this order)
    lat = _Latency(f.opt("latency_design_ms"), f.opt("latency_peak_ms"),
                   f.opt("seq_mix_efficiency"))
    if p.kind == "hdd":
        return _hdd_limits(f, lat)
    if p.kind == "ssd":
        return _ssd_limits(f, lat)
    if p.kind == "array":
        return _array_limits(p, raid, f, lat)
    return _cloud_limits(p, f, lat)


def _hdd_limits(f: _Figures, lat: _Latency) -> Limits:
    """Random IOPS from command overhead, seek, half a revolution and the transfer at the
    mean media rate; sequential rates: the outer zone."""
    src = f.sources
    rpm, seek_r, seek_w = f.val("rpm"), f.val("seek_read_ms"), f.val("seek_write_ms")
    over = f.opt("command_overhead_ms") or 0.0
    mmax, mmin = f.val("media_max_MiBps"), f.val("media_min_MiBps")
    if rpm <= 0 or mmax <= 0 or mmin <= 0:
        raise ValueError("rpm and media rates must be > 0")
    half_rot = 30000.0 / rpm
    mean_rate = (mmax + mmin) / 2
    xfer_ms = REF_KB / 1024 / mean_rate * 1000
    t_r = over + seek_r + half_rot + xfer_ms
    t_w = over + seek_w + half_rot + xfer_ms
    formula = ("1000 / (command overhead {o:g} + average seek {s:g} + half a revolution "
               "30000/{rpm:g} rpm = {h:.3f} + 4 KiB at the mean media rate "
               "({a:.1f}+{b:.1f})/2 MiB/s = {x:.4f}) ms = {i:.1f} IOPS (inputs: "
               "command_overhead_ms, seek_*_ms, rpm, media_max/min_MiBps)")
    src["rand_read_iops"] = formula.format(o=over, s=seek_r, rpm=rpm, h=half_rot, a=mmax,
                                           b=mmin, x=xfer_ms, i=1000 / t_r)
    src["rand_write_iops"] = formula.format(o=over, s=seek_w, rpm=rpm, h=half_rot, a=mmax,
                                            b=mmin, x=xfer_ms, i=1000 / t_w)
    src["seq_read_MiBps"] = src["seq_write_MiBps"] = (
        f"outer-zone media rate media_max_MiBps = {mmax:.1f} MiB/s (inner zones: "
        f"{mmin:.1f})")
    src["xfer"] = f"random transfers at the mean media rate {mean_rate:.1f} MiB/s"
    return Limits("rotating", REF_KB, 1000 / t_r, 1000 / t_w, mmax, mmax, mean_rate,
                  mean_rate, latency_read_ms=t_r, latency_write_ms=t_w,
                  latency_from_service_time=True, latency_design_ms=lat.design_ms,
                  latency_peak_ms=lat.peak_ms, seq_mix_efficiency=lat.seq_mix_efficiency or 1.0,
                  sources=src)


def _ssd_limits(f: _Figures, lat: _Latency) -> Limits:
    """The published IOPS and rates; latency from the QD1 IOPS when given."""
    qr, qw = f.opt("qd1_read_iops"), f.opt("qd1_write_iops")
    lat_r = lat_w = f.opt("latency_typical_ms")
    if qr:
        lat_r = 1000 / qr
        f.sources["latency_read_ms"] = f"1000 / QD1 read IOPS {qr:g} = {lat_r:.3f} ms"
    if qw:
        lat_w = 1000 / qw
        f.sources["latency_write_ms"] = f"1000 / QD1 write IOPS {qw:g} = {lat_w:.3f} ms"
    sr, sw = f.val("seq_read_MiBps"), f.val("seq_write_MiBps")
    return Limits("flash", REF_KB, f.val("rand_read_iops"), f.val("rand_write_iops"), sr, sw,
                  sr, sw, latency_read_ms=lat_r, latency_write_ms=lat_w,
                  latency_design_ms=lat.design_ms, latency_peak_ms=lat.peak_ms,
                  sources=f.sources)


def _array_limits(p: Profile, raid: Mapping[str, RaidLevel], f: _Figures,
                  lat: _Latency) -> Limits:
    """The published figures; random writes from reads and the RAID write penalty when
    not given."""
    ref = f.opt("ref_kB") or REF_KB
    rr = f.val("rand_read_iops")
    if "rand_write_iops" in f:
        rw = f.val("rand_write_iops")
    else:
        lvl = raid[p.raid_level or ""]
        pen = lvl.write_penalty.value or 1.0
        rw = rr / pen
        f.sources["rand_write_iops"] = (f"random read IOPS {rr:g} / {lvl.level} write "
                                        f"penalty {pen:g} = {rw:g} (penalty: "
                                        f"{lvl.write_penalty.source})")
    sr, sw = f.val("seq_read_MiBps"), f.val("seq_write_MiBps")
    typical = f.opt("latency_typical_ms")
    return Limits("rotating" if p.rotational else "flash", ref, rr, rw, sr, sw, sr, sw,
                  latency_read_ms=typical, latency_write_ms=typical,
                  latency_design_ms=lat.design_ms, latency_peak_ms=lat.peak_ms,
                  seq_mix_efficiency=lat.seq_mix_efficiency or 1.0, sources=f.sources)


def _cloud_limits(p: Profile, f: _Figures, lat: _Latency) -> Limits:
    """The provisioned IOPS and throughput, random and sequential alike."""
    typical = f.opt("latency_typical_ms")
    unit = f.opt("io_unit_kB")
    rm, wm = f.val("read_MiBps"), f.val("write_MiBps")
    ri, wi = f.val("read_iops"), f.val("write_iops")
    src = f.sources
    for limit, fig in (("rand_read_iops", "read_iops"), ("rand_write_iops", "write_iops"),
                       ("seq_read_MiBps", "read_MiBps"), ("seq_write_MiBps", "write_MiBps")):
        src[limit] = src[fig]
    return Limits("cloud", REF_KB, ri, wi, rm, wm, rm, wm,
                  io_unit_kB=unit, seq_merge=p.seq_merge, latency_read_ms=typical,
                  latency_write_ms=typical, latency_design_ms=lat.design_ms,
                  latency_peak_ms=lat.peak_ms, sources=src)


def md_profile(member: Profile, lvl: RaidLevel, n: int, name: str) -> Profile:
    """A profile for an md array of ``n`` identical members (write penalty applied)."""
    ml = member.limits
    if ml is None:
        raise CatalogError(f"{name}: member profile {member.id} has unresolved size-scaled "
                           "figures")
    penalty = lvl.write_penalty.value or 1.0
    if lvl.level == "raid1":
        # Every member holds a copy: a write goes to all n (2 for a pair, as cited).
        penalty, data = float(max(n, 2)), 1.0
        data_why = "RAID-1 streams at one member's rate"
    elif lvl.level == "raid10":
        data = n / 2
        data_why = f"RAID-10 near=2: n/2 = {data:g} data disks"
    else:
        data = n - (lvl.redundancy_disks.value or 0.0)
        data_why = (f"{lvl.level}: n - {lvl.redundancy_disks.value:g} = {data:g} data disks "
                    f"({lvl.redundancy_disks.source})")
    if data <= 0:
        raise CatalogError(f"{name}: {lvl.level} with {n} member(s) has no data disk")
    rr = n * ml.rand_read_iops
    rw = n * ml.rand_write_iops / penalty
    sr, sw = data * ml.seq_read_MiBps, data * ml.seq_write_MiBps
    src = {
        "rand_read_iops": f"{n} members x {ml.rand_read_iops:.1f} ({member.id}) = {rr:.1f}",
        "rand_write_iops": (f"{n} members x {ml.rand_write_iops:.1f} ({member.id}) / "
                            f"{lvl.level} write penalty {penalty:g} = {rw:.1f} (penalty: "
                            f"{lvl.write_penalty.source})"),
        "seq_read_MiBps": f"{data_why} x {ml.seq_read_MiBps:.1f} MiB/s = {sr:.1f}",
        "seq_write_MiBps": f"{data_why} x {ml.seq_write_MiBps:.1f} MiB/s = {sw:.1f}",
    }
    lat_w = ml.latency_write_ms
    if lat_w is not None and lvl.level in ("raid5", "raid6"):
        # A small write reads the old data and parity before writing: two member operations
        # in series (EMC ISM 3.5), so its low-load latency is about twice a member write.
        lat_w = ml.latency_read_ms + lat_w if ml.latency_read_ms is not None else lat_w
        src["latency_write_ms"] = ("read-modify-write: member read + member write latency "
                                   f"({lvl.write_penalty.source})")
    lim = replace(ml, rand_read_iops=rr, rand_write_iops=rw, seq_read_MiBps=sr,
                  seq_write_MiBps=sw, xfer_read_MiBps=data * ml.xfer_read_MiBps,
                  xfer_write_MiBps=data * ml.xfer_write_MiBps,
                  latency_from_service_time=False, latency_write_ms=lat_w,
                  sources={**{f"member {k}": v for k, v in ml.sources.items()}, **src})
    return Profile(id=f"md-{lvl.level}-{n}x{member.id}",
                   title=f"md {lvl.level} of {n} x {member.title}", kind="array",
                   parallel=True, rotational=member.rotational, figures=member.figures,
                   notes=member.notes, path=member.path, raid_level=lvl.level,
                   assumptions=member.assumptions, limits=lim)
