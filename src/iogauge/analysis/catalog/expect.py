"""What a profile sustains for a workload mix: interpolation of the catalog's figures.

Model (all times in seconds per operation, sizes in KiB, rates in MiB/s; see
``docs/catalog.md`` for the derivation and the published figures it reproduces):

* Each operation class c — random read, random write, sequential read, sequential write — has
  a service time ``t_c(size)``: rotating media ``1/IOPS_ref + (size - ref)/rate`` (positioning
  plus transfer; single disks: overhead + seek + half a revolution + size / media rate);
  flash ``max(1/IOPS, size/rate)``; cloud volumes ``max(units/IOPS_limit, size/MBps_limit)``
  with ``units`` the number of provider I/Os (larger I/Os split at the provider's I/O size,
  small sequential ones merged where the provider merges them). Sequential ops on rotating
  media cost ``size/sequential rate``.
* A mix with operation shares f_c sustains ``IOPS = 1 / Σ f_c·t_c`` (the time-weighted
  harmonic combination: the device spends f_c·t_c of each second-per-op on class c) and
  ``MB/s = IOPS x mean size``. With reads at capability C_r and writes at C_w this is
  ``1 / (f_r/C_r + f_w/C_w)``; RAID write penalties enter through C_w.
* Rotating media lose more than that when streams interleave: a sequential read stream and a
  sequential write stream at different places make the heads travel between them ([Oe]:
  two regions at once cost ~30 %; [Yuge]: the rank's 600 MB/s fell to ~440 with 57/43 mixed
  sequential reads and writes), so the sequential time is divided by
  ``1 - (1 - e)·4·s_r·s_w`` (s_r, s_w: the read and write shares of the sequential time, e the
  profile's ``seq_mix_efficiency`` at an even mix); and each random op interleaved with a
  sequential stream costs the stream one repositioning (``f_random·f_seq/IOPS_ref`` extra).

``used_pct`` compares the observed peak interval (``Attributes.iops_peak`` and
``MBps_peak``; the means when no peak is known) with the expected figures and takes the larger
ratio. MB here is iogauge's MB: 1024 kB = 2^20 bytes (sysstat); decimal vendor MB/s figures
(keys ending ``_MBps``) are converted, binary ones (``_MiBps``) are taken as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from iogauge.analysis.catalog.lookup import Catalog
from iogauge.analysis.catalog.profiles import REF_KB, CatalogError, Limits, Profile
from iogauge.analysis.types import Attributes, Capability
from iogauge.model.device import DeviceInfo

if TYPE_CHECKING:
    from iogauge.analysis.context import DeviceContext


@dataclass(frozen=True)
class Mix:
    """The workload mix the capability is interpolated for.

    Attributes:
        read_frac: share of operations that are reads (0-1).
        seq_frac: share of operations that are sequential (0-1), reads and writes alike.
        read_kB, write_kB: mean request sizes (KiB).
    """

    read_frac: float
    seq_frac: float
    read_kB: float
    write_kB: float


@dataclass(frozen=True)
class Expected:
    """What a profile sustains for a mix (see :func:`expected`).

    Attributes:
        iops, MBps: sustained operations per second and MiB/s for the mix.
        latency_ms: typical service time at low load for the mix, when known.
        notes: adjustments made (mixing penalties, unit counting).
    """

    iops: float
    MBps: float
    latency_ms: float | None
    notes: tuple[str, ...]


def _op_time_s(lim: Limits, size_kB: float, write: bool, seq: bool) -> float:
    """Seconds one operation of this class occupies the device (at full concurrency)."""
    iops = lim.rand_write_iops if write else lim.rand_read_iops
    if lim.model == "cloud":
        rate = lim.seq_write_MiBps if write else lim.seq_read_MiBps
        unit = lim.io_unit_kB
        if unit is None:
            units = 1.0
        elif seq and lim.seq_merge:
            units = size_kB / unit  # merged into provider-sized I/Os
        else:
            units = max(1.0, size_kB / unit)  # split above the provider's I/O size
        return max(units / iops, size_kB / 1024 / rate)
    if lim.model == "flash":
        rate = lim.seq_write_MiBps if write else lim.seq_read_MiBps
        return max(1.0 / iops, size_kB / 1024 / rate)
    # rotating: sequential ops stream, random ops position then transfer
    if seq:
        rate = lim.seq_write_MiBps if write else lim.seq_read_MiBps
        return size_kB / 1024 / rate
    xfer = lim.xfer_write_MiBps if write else lim.xfer_read_MiBps
    t = 1.0 / iops + (size_kB - lim.ref_kB) / 1024 / xfer
    return max(t, size_kB / 1024 / xfer)


def expected(profile: Profile, mix: Mix) -> Expected:
    """IOPS and MB/s the profile sustains for ``mix`` (time-weighted harmonic model).

    See the module docstring; every adjustment is listed in ``notes``.
    """
    lim = profile.limits
    if lim is None:
        raise CatalogError(f"profile {profile.id!r} scales with the disk size and was not "
                           "resolved for one (Catalog.get(id, size_GiB))")
    fr, fs = min(max(mix.read_frac, 0.0), 1.0), min(max(mix.seq_frac, 0.0), 1.0)
    fw = 1.0 - fr
    classes = {  # (share of ops, seconds per op)
        "rr": (fr * (1 - fs), _op_time_s(lim, mix.read_kB, False, False)),
        "rw": (fw * (1 - fs), _op_time_s(lim, mix.write_kB, True, False)),
        "sr": (fr * fs, _op_time_s(lim, mix.read_kB, False, True)),
        "sw": (fw * fs, _op_time_s(lim, mix.write_kB, True, True)),
    }
    notes: list[str] = []
    t_rand = classes["rr"][0] * classes["rr"][1] + classes["rw"][0] * classes["rw"][1]
    t_sr = classes["sr"][0] * classes["sr"][1]
    t_sw = classes["sw"][0] * classes["sw"][1]
    t_seq = t_sr + t_sw
    if lim.model == "rotating" and t_seq > 0:
        if lim.seq_mix_efficiency < 1.0 and t_sr > 0 and t_sw > 0:
            mixing = 4 * (t_sr / t_seq) * (t_sw / t_seq)
            eff = 1 - (1 - lim.seq_mix_efficiency) * mixing
            if eff < 0.999:
                t_seq /= eff
                notes.append(
                    f"sequential reads and writes interleave ({t_sr / (t_sr + t_sw) * 100:.0f}"
                    f" % / {t_sw / (t_sr + t_sw) * 100:.0f} % of the sequential time): the "
                    f"sequential rate is lowered to {eff * 100:.0f} % (even mix keeps "
                    f"{lim.seq_mix_efficiency * 100:.0f} %)")
        interrupt = (1 - fs) * fs
        if interrupt > 0:
            extra = interrupt / lim.rand_read_iops
            t_seq += extra
            notes.append(f"{(1 - fs) * 100:.1f} % random operations interrupt the sequential "
                         f"streams: one repositioning each ({1000 / lim.rand_read_iops:.2f} ms"
                         ") added to the streams' time")
    total = t_rand + t_seq
    if total <= 0:
        raise CatalogError(f"profile {profile.id!r}: the mix has no operations")
    iops = 1.0 / total
    mean_kB = fr * mix.read_kB + fw * mix.write_kB
    mbps = iops * mean_kB / 1024
    if lim.model == "cloud" and lim.io_unit_kB is not None and max(mix.read_kB, mix.write_kB) \
            > lim.io_unit_kB:
        notes.append(f"requests larger than {lim.io_unit_kB:g} KiB count as several I/Os "
                     "toward the provider's IOPS limit")
    # Typical latency at low load: op-weighted over the classes.
    latency: float | None
    if lim.latency_from_service_time:
        latency = sum(share * t for share, t in classes.values()) * 1000
    elif lim.latency_read_ms is not None and lim.latency_write_ms is not None:
        latency = fr * lim.latency_read_ms + fw * lim.latency_write_ms
    else:
        latency = lim.latency_read_ms if fw == 0 else lim.latency_write_ms if fr == 0 else None
    return Expected(iops, mbps, latency, tuple(notes))


def _mix_from(attrs: Attributes, notes: list[str]) -> Mix:
    """The mix the attributes describe, saying what had to be assumed."""
    if attrs.read_pct is not None:
        read_frac = attrs.read_pct / 100
    elif attrs.r_iops_mean is not None and attrs.w_iops_mean is not None and \
            attrs.r_iops_mean + attrs.w_iops_mean > 0:
        read_frac = attrs.r_iops_mean / (attrs.r_iops_mean + attrs.w_iops_mean)
    else:
        read_frac = 0.5
        notes.append("read/write mix unknown: 50 % reads assumed")
    if attrs.seq_pct is None:
        seq_frac = 0.0
        notes.append("sequential share unknown: all I/O assumed random, so the expected "
                     "figures are the device's floor ([Yuge]: a rank does ~8 MB/s random "
                     "but ~600 MB/s sequential)")
    else:
        seq_frac = attrs.seq_pct / 100
        if attrs.seq_method == "estimate":
            notes.append("sequential share is an estimate from merges and request sizes")
    mean = attrs.areq_kB_mean
    sizes = []
    for v, what in ((attrs.r_areq_kB_mean, "read"), (attrs.w_areq_kB_mean, "write")):
        if v is not None and v > 0:
            sizes.append(v)
        elif mean is not None and mean > 0:
            sizes.append(mean)
            notes.append(f"{what} request size unknown: the mean request size "
                         f"{mean:.1f} kB used")
        else:
            sizes.append(REF_KB)
            notes.append(f"{what} request size unknown: {REF_KB:g} kB assumed")
    return Mix(read_frac, seq_frac, sizes[0], sizes[1])


def capability(profile: Profile, attrs: Attributes, matched_by: str) -> Capability:
    """Fill a :class:`Capability` for the observed attributes (see the module docstring).

    ``expected_iops``/``expected_MBps`` are what the profile sustains for the observed mix of
    read share, request sizes and sequential share; ``used_pct`` is the observed peak interval
    (``attrs.iops_peak``/``MBps_peak``, or the means when no peak is known) against them, the
    larger of the IOPS and MB/s ratios.
    """
    lim = profile.limits
    if lim is None:
        raise CatalogError(f"profile {profile.id!r} scales with the disk size and was not "
                           "resolved for one (Catalog.get(id, size_GiB))")
    notes: list[str] = list(profile.assumptions)
    notes += [text for text, _ in profile.notes]
    mix = _mix_from(attrs, notes)
    exp = expected(profile, mix)
    notes += exp.notes
    used: float | None = None
    ratios: list[float] = []
    for peak, mean, cap, what in ((attrs.iops_peak, attrs.iops_mean, exp.iops, "IOPS"),
                                  (attrs.MBps_peak, attrs.MBps_mean, exp.MBps, "MB/s")):
        obs = peak if peak is not None else mean
        if peak is None and mean is not None:
            notes.append(f"no peak {what} known: the mean is compared")
        if obs is not None and cap > 0:
            ratios.append(obs / cap * 100)
    if ratios:
        used = max(ratios)
    if lim.latency_peak_ms is not None:
        notes.append(f"under overload this disk type's response time peaks near "
                     f"{lim.latency_peak_ms:g} ms ([MS-Azure-JP]): compare peaks, not only means")
    return Capability(
        profile=profile.id, title=profile.title, matched_by=matched_by,
        parallel=profile.parallel, expected_iops=exp.iops, expected_MBps=exp.MBps,
        random_read_iops=lim.rand_read_iops, random_write_iops=lim.rand_write_iops,
        seq_read_MBps=lim.seq_read_MiBps, seq_write_MBps=lim.seq_write_MiBps,
        latency_ms_typical=exp.latency_ms, latency_ms_design=lim.latency_design_ms,
        used_pct=used, sources=profile.sources(), notes=_dedupe(notes))


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for x in items:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def capability_for(dev: DeviceContext, attrs: Attributes, override: str | None,
                   catalog: Catalog, infos: Mapping[str, DeviceInfo] | None = None
                   ) -> Capability | None:
    """The capability of one analysed device, or None when no profile applies.

    ``override`` is the profile id the user gave with ``--profile DEV=NAME`` (``NAME@GiB``
    for size-scaled profiles and tier families; without a size the device's own size is
    used). ``infos`` (kernel name -> DeviceInfo) lets md/dm devices see their members.
    """
    if override:
        size = None
        if dev.info is not None and dev.info.size_bytes:
            size = dev.info.size_bytes / 2**30
        prof = catalog.get(override, size)
        return capability(prof, attrs, f"user (--profile {dev.device}={override})")
    found = catalog.match(dev, infos)
    if found is None:
        return None
    prof, why = found
    return capability(prof, attrs, why)


def parse_profile_overrides(texts: Sequence[str], catalog: Catalog | None = None
                            ) -> dict[str, str]:
    """Parse ``--profile DEV=NAME`` options into {device: profile id}.

    DEV is a device key or kernel name (``sdb``, ``host1:sdb``, ``RANK:0004@ABCD1``), NAME a
    profile id, optionally with a size (``gcp-pd-ssd@500``). With ``catalog`` given, every
    NAME is checked. Raises :class:`AnalysisOptionError` on bad syntax or a device given
    twice with different profiles, :class:`CatalogError` for an unknown profile.
    """
    from iogauge.analysis.context import AnalysisOptionError  # noqa: PLC0415 - avoid a cycle

    out: dict[str, str] = {}
    for text in texts:
        dev, sep, name = text.rpartition("=")
        dev, name = dev.strip(), name.strip()
        if not sep or not dev or not name or "=" in dev or " " in name:
            raise AnalysisOptionError(f"--profile {text!r}: expected DEVICE=PROFILE, e.g. "
                                      "sdb=hdd-7200 or sdc=azure-premium@1024")
        if dev in out and out[dev] != name:
            raise AnalysisOptionError(f"--profile {text!r}: {dev} was already given profile "
                                      f"{out[dev]!r}")
        if catalog is not None:
            pid, _, size = name.partition("@")
            if pid in catalog.families and not size:
                pass  # the device's own size picks the tier
            elif catalog.by_id.get(pid) is not None and catalog.by_id[pid].scaled and not size:
                pass  # resolved with the device's size
            else:
                catalog.get(name)
        out[dev] = name
    return out
