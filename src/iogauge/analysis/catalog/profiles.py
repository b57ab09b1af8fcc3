"""The catalog's data types: a profile's figures with their sources, match rules, derived limits."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from iogauge.errors import IogaugeError
from iogauge.model.device import DeviceInfo

#: Decimal MB (10^6 bytes, as vendors print) in iogauge's MB (2^20 bytes, sysstat's 1024 kB).
MIB_PER_MB = 10**6 / 2**20
#: Reference size of the random IOPS figures (the vendors' and [Yuge]'s 4 KB).
REF_KB = 4.0
#: Profile kinds: single rotating disk, flash device, whole array measured as one, cloud volume.
KINDS = ("hdd", "ssd", "array", "cloud")


class CatalogError(IogaugeError):
    """A catalog file or profile name cannot be used; the message names the file and reason."""


@dataclass(frozen=True)
class Figure:
    """One number of a profile and where it comes from.

    Attributes:
        name: canonical name (``seek_read_ms``, ``seq_read_MiBps``, ``read_iops``).
        value: the value in canonical units (MiB/s for throughput), for a fixed figure; None
            for a size-scaled one until resolved.
        source: the citation (resolved from the file's ``[sources]``), plus any unit
            conversion or derivation the catalog applied.
        per_GiB, base, max: size scaling ``min(max, base + per_GiB x size_GiB)``, else None.
    """

    name: str
    value: float | None
    source: str
    per_GiB: float | None = None
    base: float | None = None
    max: float | None = None

    @property
    def scaled(self) -> bool:
        return self.per_GiB is not None

    def at_size(self, size_GiB: float) -> float:
        """The figure's value for a device of ``size_GiB``."""
        if self.per_GiB is None:
            assert self.value is not None  # noqa: S101 - fixed figures always carry a value
            return self.value
        v = (self.base or 0.0) + self.per_GiB * size_GiB
        return v if self.max is None else min(self.max, v)


@dataclass(frozen=True)
class MatchRule:
    """One way to recognise a device; every field given must hold.

    Attributes:
        priority: higher rules are tried first (built-ins: exclusions, then vendor/model 40-60,
            name 20, generic rotational flag 10).
        name, model, vendor: regular expressions (``re.search``, case-sensitive) on the kernel
            name, sysfs ``device/model`` and ``device/vendor``.
        rotational: required ``queue/rotational`` flag.
        kinds: device kinds it applies to (``rank``, ``disk``, ...); None for disks and
            partitions.
        sources: data source ids (``rmf``); None for any.
        note: the assumption the match makes, reported with the capability.
    """

    priority: int
    name: re.Pattern[str] | None = None
    model: re.Pattern[str] | None = None
    vendor: re.Pattern[str] | None = None
    rotational: bool | None = None
    kinds: frozenset[str] | None = None
    sources: frozenset[str] | None = None
    note: str = ""

    def matches(self, name: str, kind: str, source: str, info: DeviceInfo | None) -> str | None:
        """The facts that matched, or None."""
        kinds = self.kinds if self.kinds is not None else frozenset({"disk", "partition"})
        if kind not in kinds:
            return None
        if self.sources is not None and source not in self.sources:
            return None
        facts: list[str] = []
        if self.name is not None:
            if not self.name.search(name):
                return None
            facts.append(f"name '{name}'")
        if self.rotational is not None:
            if info is None or info.rotational is not self.rotational:
                return None
            facts.append(f"rotational={int(self.rotational)}")
        if self.vendor is not None:
            if info is None or not info.vendor or not self.vendor.search(info.vendor):
                return None
            facts.append(f"vendor '{info.vendor}'")
        if self.model is not None:
            if info is None or not info.model or not self.model.search(info.model):
                return None
            facts.append(f"model '{info.model}'")
        if self.kinds is not None:
            facts.append(f"kind {kind}")
        if self.sources is not None:
            facts.append(f"source {source}")
        return ", ".join(facts)


@dataclass(frozen=True)
class Exclusion:
    """Devices the catalog refuses to judge (virtual, memory or file-backed), and why."""

    name: re.Pattern[str] | None
    model: re.Pattern[str] | None
    vendor: re.Pattern[str] | None
    reason: str

    def matches(self, name: str, info: DeviceInfo | None) -> bool:
        if self.name is not None and self.name.search(name):
            return True
        if info is None:
            return False
        if self.model is not None and info.model and self.model.search(info.model):
            return True
        return bool(self.vendor is not None and info.vendor and self.vendor.search(info.vendor))


@dataclass(frozen=True)
class Limits:
    """A profile's figures reduced to the interpolation model's inputs (canonical units).

    Attributes:
        model: ``rotating`` (positioning + transfer), ``flash`` (max of IOPS and bandwidth
            times) or ``cloud`` (provider limits on I/O units and bandwidth).
        ref_kB: size of the random IOPS figures.
        rand_read_iops, rand_write_iops: random operations per second at ``ref_kB`` (write
            penalty applied); for cloud volumes the provider's read/write IOPS limits.
        seq_read_MiBps, seq_write_MiBps: sequential rates; for cloud volumes the bandwidth
            limits (they apply to random I/O too).
        xfer_read_MiBps, xfer_write_MiBps: rotating media: the rate a random op transfers at
            (size scaling of random IOPS).
        io_unit_kB: cloud: I/Os larger than this count as several; seq_merge: small
            sequential I/Os are merged into one unit.
        latency_read_ms, latency_write_ms: typical service time of a reference-size random
            op at low load, where known.
        latency_from_service_time: True for single disks, whose typical latency is the
            service time of the observed mix itself.
        latency_design_ms, latency_peak_ms: design limit / observed overload peaks ([MS-Azure-JP]).
        seq_mix_efficiency: share of the sequential rate kept at an even read/write mix.
        sources: limit name -> where it comes from (citation or formula with inputs).
    """

    model: str
    ref_kB: float
    rand_read_iops: float
    rand_write_iops: float
    seq_read_MiBps: float
    seq_write_MiBps: float
    xfer_read_MiBps: float
    xfer_write_MiBps: float
    io_unit_kB: float | None = None
    seq_merge: bool = False
    latency_read_ms: float | None = None
    latency_write_ms: float | None = None
    latency_from_service_time: bool = False
    latency_design_ms: float | None = None
    latency_peak_ms: float | None = None
    seq_mix_efficiency: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """One device type the catalog knows.

    Attributes:
        id: catalog name (``hdd-7200``, ``azure-premium-p30``).
        title: human name.
        kind: ``hdd``, ``ssd``, ``array`` or ``cloud``.
        parallel: serves requests in parallel (%util is then not a capacity measure).
        rotational: backed by spinning media.
        figures: the published figures (canonical names and units).
        match: rules that recognise a device as this profile.
        notes: caveats reported with every capability of this profile (text, source).
        path: the file the profile comes from.
        family, size_GiB: size-tier family and this tier's size, for tiered cloud disks.
        raid_level: RAID level of an array profile (its write penalty is applied).
        seq_merge: cloud: the provider merges small sequential I/Os.
        size_used_GiB: the size scaled figures were resolved at (None if none scale).
        assumptions: what a match assumed about the device (filled by ``Catalog.match``).
        limits: the interpolation inputs (None for a size-scaled profile not yet resolved).
    """

    id: str
    title: str
    kind: str
    parallel: bool
    rotational: bool
    figures: Mapping[str, Figure]
    match: tuple[MatchRule, ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    path: str = ""
    family: str | None = None
    size_GiB: float | None = None
    raid_level: str | None = None
    seq_merge: bool = False
    size_used_GiB: float | None = None
    assumptions: tuple[str, ...] = ()
    limits: Limits | None = None

    @property
    def scaled(self) -> bool:
        """Whether some figure scales with the device size."""
        return any(f.scaled for f in self.figures.values())

    def sources(self) -> list[str]:
        """Every citation and formula behind the profile's limits, each once, prefixed with
        the figures that use it (``rpm, media_max_MiBps: Seagate Constellation.2 ...``)."""
        items = list(self.limits.sources.items()) if self.limits else []
        items += [(f.name, f.source) for f in self.figures.values()]
        items += [("note", s) for _, s in self.notes]
        names: dict[str, list[str]] = {}
        for name, src in items:
            if src and name not in names.setdefault(src, []):
                names[src].append(name)
        return [f"{', '.join(n)}: {src}" for src, n in names.items()]


@dataclass(frozen=True)
class RaidLevel:
    """Write penalty and redundancy of a RAID level (``raid.toml``)."""

    level: str
    write_penalty: Figure
    redundancy_disks: Figure


@dataclass(frozen=True)
class Family:
    """Size tiers of one cloud disk type; a device gets the smallest tier at least its size."""

    id: str
    title: str
    tiers: tuple[Profile, ...]
    match: tuple[MatchRule, ...]
    path: str

    def tier_for(self, size_GiB: float) -> tuple[Profile, bool]:
        """The tier for a disk of ``size_GiB``; the flag is False when it exceeds every tier."""
        for t in self.tiers:
            if t.size_GiB is not None and size_GiB <= t.size_GiB + 1e-9:
                return t, True
        return self.tiers[-1], False
