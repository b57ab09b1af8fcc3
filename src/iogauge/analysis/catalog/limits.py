"""A profile's figures reduced to the interpolation inputs, each with its source.

Figures the catalog derives (HDD random IOPS from seek and rotation, md RAID limits from the
members, size-scaled cloud limits) carry the formula and their inputs' citations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from iogauge.analysis.catalog.profiles import REF_KB, CatalogError, Limits, Profile, RaidLevel


def derive_limits(p: Profile, raid: Mapping[str, RaidLevel], size_GiB: float | None = None
                  ) -> Limits:
    """Reduce a profile's figures to the interpolation inputs, with a source for each."""
    f = p.figures
    src: dict[str, str] = {}

    def val(name: str) -> float:
        fig = f[name]
        v = fig.at_size(size_GiB if size_GiB is not None else 0.0)
        if fig.scaled:
            parts = [f"{fig.per_GiB:g} per GiB x {size_GiB:g} GiB"]
            if fig.base is not None:
                parts.insert(0, f"{fig.base:g} +")
            cap = "" if fig.max is None else f", capped at {fig.max:g}"
            src[name] = f"{' '.join(parts)}{cap} = {v:g}; {fig.source}"
        else:
            src.setdefault(name, fig.source)
        return v

    def opt(name: str) -> float | None:
        return val(name) if name in f else None

    design, peak = opt("latency_design_ms"), opt("latency_peak_ms")
    eff = opt("seq_mix_efficiency")
    if p.kind == "hdd":
        rpm, seek_r, seek_w = val("rpm"), val("seek_read_ms"), val("seek_write_ms")
        over = opt("command_overhead_ms") or 0.0
        mmax, mmin = val("media_max_MiBps"), val("media_min_MiBps")
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
                      latency_from_service_time=True, latency_design_ms=design,
                      latency_peak_ms=peak, seq_mix_efficiency=eff or 1.0, sources=src)
    if p.kind == "ssd":
        qr, qw = opt("qd1_read_iops"), opt("qd1_write_iops")
        lat_r = lat_w = opt("latency_typical_ms")
        if qr:
            lat_r = 1000 / qr
            src["latency_read_ms"] = f"1000 / QD1 read IOPS {qr:g} = {lat_r:.3f} ms"
        if qw:
            lat_w = 1000 / qw
            src["latency_write_ms"] = f"1000 / QD1 write IOPS {qw:g} = {lat_w:.3f} ms"
        sr, sw = val("seq_read_MiBps"), val("seq_write_MiBps")
        return Limits("flash", REF_KB, val("rand_read_iops"), val("rand_write_iops"), sr, sw,
                      sr, sw, latency_read_ms=lat_r, latency_write_ms=lat_w,
                      latency_design_ms=design, latency_peak_ms=peak, sources=src)
    if p.kind == "array":
        ref = opt("ref_kB") or REF_KB
        rr = val("rand_read_iops")
        if "rand_write_iops" in f:
            rw = val("rand_write_iops")
        else:
            lvl = raid[p.raid_level or ""]
            pen = lvl.write_penalty.value or 1.0
            rw = rr / pen
            src["rand_write_iops"] = (f"random read IOPS {rr:g} / {lvl.level} write penalty "
                                      f"{pen:g} = {rw:g} (penalty: {lvl.write_penalty.source})")
        sr, sw = val("seq_read_MiBps"), val("seq_write_MiBps")
        lat = opt("latency_typical_ms")
        return Limits("rotating" if p.rotational else "flash", ref, rr, rw, sr, sw, sr, sw,
                      latency_read_ms=lat, latency_write_ms=lat, latency_design_ms=design,
                      latency_peak_ms=peak, seq_mix_efficiency=eff or 1.0, sources=src)
    # cloud
    lat = opt("latency_typical_ms")
    unit = opt("io_unit_kB")
    rm, wm = val("read_MiBps"), val("write_MiBps")
    ri, wi = val("read_iops"), val("write_iops")
    for limit, fig in (("rand_read_iops", "read_iops"), ("rand_write_iops", "write_iops"),
                       ("seq_read_MiBps", "read_MiBps"), ("seq_write_MiBps", "write_MiBps")):
        src[limit] = src[fig]
    return Limits("cloud", REF_KB, ri, wi, rm, wm, rm, wm,
                  io_unit_kB=unit, seq_merge=p.seq_merge, latency_read_ms=lat,
                  latency_write_ms=lat, latency_design_ms=design, latency_peak_ms=peak,
                  sources=src)


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
