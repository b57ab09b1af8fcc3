"""One response-time standard for every source: what a device should answer within.

Every source's response time (Linux ``r_await``/``w_await``, Solaris/AIX/HP-UX ``svc_t`` or
``avwait + avserv``, perfmon ``Avg. Disk sec/Read|Write``, RMF response time, fio's
completion latency, node_exporter's read/write time per I/O) is judged against the same
expectation, chosen once per device here, most specific first:

1. the matched catalog profile's *design* latency (a provider's published bound, such as
   Azure Premium SSD's < 10 ms, [MS-Azure-JP]);
2. the device's **latency class**, from the catalog profile's kind, else the labels
   (an ``nvme`` name, a cloud volume's model, a non-virtual disk's rotational flag), else
   the service model decided from the samples (one request at a time = a spindle; in
   parallel on a Unix host or behind a SAN = an array LUN);
3. platform guidance when nothing says what the device is: the Windows 25 ms guidance
   ([MS-Azure-JP]) for perfmon data, [Goodus]'s ``svc_t`` bands (30 ms normal, 50 ms a
   bottleneck at >= 20 % busy) everywhere else.

Reads and writes have their own expectation where the class serves them differently (an
array acknowledges writes from its cache). The user's ``--target`` still beats all of this
for the windows it covers (``rules/_common.latency_targets``).

The classes' figures (``CLASS_MS``) and why each is what it is are in docs/analysis.md
("One response-time standard").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from iogauge.analysis.service_model import DecidedBy, ServiceModel, is_virtual

if TYPE_CHECKING:
    from iogauge.analysis.context import DeviceContext


class LatencyClass(Enum):
    """What kind of device a response time is judged as."""

    HDD = "hard disk"
    SSD = "SSD"
    NVME = "NVMe SSD"
    ARRAY_LUN = "array LUN"
    CLOUD = "cloud volume"
    UNKNOWN = "device of unknown media"

    @property
    def with_article(self) -> str:
        """'a hard disk', 'an SSD', 'an NVMe SSD' (read letter by letter), 'an array LUN'."""
        vowel = self in (LatencyClass.SSD, LatencyClass.NVME, LatencyClass.ARRAY_LUN)
        return f"{'an' if vowel else 'a'} {self.value}"


class ExpectationKind(Enum):
    """Where the expectation's figure comes from (cited in findings and verdicts)."""

    PROVIDER = "design"        # the provider's published latency for the matched profile
    CLASS = "class"            # the latency class's expectation
    WINDOWS = "windows"        # the Windows 25 ms guidance ([MS-Azure-JP])
    GUIDANCE = "guidance"      # [Goodus]'s svc_t bands


@dataclass(frozen=True)
class ClassFigures:
    """Normal and critical response time (ms) of one class, reads and writes, with source."""

    read_ms: float
    write_ms: float
    critical_read_ms: float
    critical_write_ms: float
    source: str
    cite: str


_GOODUS = ("[Goodus] §3.4 (svc_t <= 30 ms normal; >= 50 ms at >= 20 % busy a bottleneck; "
           "the bands were drawn for spindles)")
_AZURE = ("[MS-Azure-JP] (SSD-backed disks are designed to answer within 10 ms; tens of ms "
          "on one mean the disk slows the system)")
_LUN = ("array LUN: reads that miss the array's cache wait for a back-end spindle ([Goodus] "
        "§3.4: <= 30 ms for a loaded spindle, so 20 ms for a read spread over many), writes "
        "are acknowledged from the write cache ([Yuge]: volumes answered in 1.5 ms while "
        "their rank destaged at 141 ms), so 10 ms; critical at twice that")
_CLOUD = ("[MS-Azure-JP] (no tier known: the general 25 ms guidance; cloud tiers range from "
          "designed < 1 ms to HDD-backed volumes peaking at ~50 ms)")
_WINDOWS = ("[MS-Azure-JP] (Windows: Avg. Disk sec/Read|Write <= 25 ms, after Microsoft "
            "TechNet Magazine 'Measuring Server Performance', https://docs.microsoft.com/"
            "ja-jp/previous-versions/technet-magazine/cc718984(v=msdn.10); SQL Server aims "
            "at 10 ms: give it with --target)")

#: The expectation of each class ([Goodus] for spindles and the unknown, [MS-Azure-JP] for
#: flash and cloud volumes; see docs/analysis.md for why each).
CLASS_MS: dict[LatencyClass, ClassFigures] = {
    LatencyClass.HDD: ClassFigures(30.0, 30.0, 50.0, 50.0, _GOODUS, "[Goodus] §3.4"),
    LatencyClass.SSD: ClassFigures(10.0, 10.0, 20.0, 20.0, _AZURE, "[MS-Azure-JP]"),
    LatencyClass.NVME: ClassFigures(10.0, 10.0, 20.0, 20.0, _AZURE, "[MS-Azure-JP]"),
    LatencyClass.ARRAY_LUN: ClassFigures(20.0, 10.0, 40.0, 20.0, _LUN,
                                         "[Goodus] §3.4, [Yuge]"),
    LatencyClass.CLOUD: ClassFigures(25.0, 25.0, 50.0, 50.0, _CLOUD, "[MS-Azure-JP]"),
    LatencyClass.UNKNOWN: ClassFigures(30.0, 30.0, 50.0, 50.0, _GOODUS, "[Goodus] §3.4"),
}
WINDOWS_FIGURES = ClassFigures(25.0, 25.0, 50.0, 50.0, _WINDOWS, "[MS-Azure-JP]")
#: Below this %busy a device is not loaded: a slow response there is not a shortage of
#: capacity ([Goodus] §3.4 calls >= 50 ms a bottleneck only from 20 % busy), and is judged by
#: ``latency_without_load`` rather than as load.
UNLOADED_UTIL_PCT = 20.0
#: ... and below this %busy [Goodus] calls even 30-50 ms normal ("a mean over the few
#: requests of an almost idle disk"): only the critical line counts there.
ALMOST_IDLE_UTIL_PCT = 5.0
#: A design latency is a bound the provider promises: twice it is critical, as for the
#: classes ([MS-Azure-JP]: "tens of ms" on a disk designed for < 10 ms).
PROVIDER_CRITICAL_FACTOR = 2.0

#: Kinds no response time is expected of: memory, paths, aggregates judged by their own
#: rules (an RMF rank's time is its back end's, [Yuge]), database objects (judged by the
#: Oracle rules), and benchmark jobs (see ``expect``).
NOT_JUDGED_KINDS = frozenset({"ram", "port", "lcu", "rank", "tablespace", "datafile"})
#: Sources whose disks are SAN or array LUNs when they serve requests in parallel.
_UNIX_SOURCES = frozenset({"unix-sar", "solaris-iostat", "aix-iostat", "rmf"})
_CLOUD_MODELS = ("amazon elastic block store", "persistentdisk", "persistent disk",
                 "msft virtual disk", "ebs")
NOTHING_KNOWN = "nothing says what the device is (no profile, media label or decided service model)"
_WINDOWS_KINDS = frozenset({"logical_disk", "physical_disk"})


@dataclass(frozen=True)
class Expectation:
    """The response time a device should answer within, and why.

    Attributes:
        latency_class: what the device is judged as.
        kind: where the figures come from.
        read_ms, write_ms: normal upper bound per request (reads, writes).
        critical_read_ms, critical_write_ms: far above expectation from here.
        decided_by: what chose the class (``catalog profile hdd-7200``, ``the service model
            one-at-a-time (data)``, ``the name nvme0n1``, ``nothing: platform guidance``).
        source: the citation behind the figures, with what it says; ``cite`` its key.
        typical_ms: the catalog's unloaded service time for the observed mix, when known.
    """

    latency_class: LatencyClass
    kind: ExpectationKind
    read_ms: float
    write_ms: float
    critical_read_ms: float
    critical_write_ms: float
    decided_by: str
    source: str
    cite: str
    typical_ms: float | None = None

    @property
    def uses_busy_bands(self) -> bool:
        """Judged by [Goodus]'s bands, which read a response time with %busy
        (``solaris_service_time``): spindles and devices nothing is known of; the others by
        a target (``response_time_target``)."""
        return self.kind is ExpectationKind.GUIDANCE or (
            self.kind is ExpectationKind.CLASS and self.latency_class is LatencyClass.HDD)

    @property
    def any_ms(self) -> float:
        """The bound for a response time that mixes reads and writes (the looser one)."""
        return max(self.read_ms, self.write_ms)

    @property
    def critical_any_ms(self) -> float:
        return max(self.critical_read_ms, self.critical_write_ms)

    def bounds(self, op: str) -> tuple[float, float]:
        """(normal, critical) for ``read``, ``write`` or ``all``."""
        if op == "read":
            return self.read_ms, self.critical_read_ms
        if op == "write":
            return self.write_ms, self.critical_write_ms
        return self.any_ms, self.critical_any_ms

    def phrase(self, op: str = "all") -> str:
        """'the 20 ms expected of an array LUN', 'the 10 ms design latency'."""
        normal = _fmt(self.bounds(op)[0])
        if self.kind is ExpectationKind.PROVIDER:
            return f"the {normal} design latency"
        if self.kind is ExpectationKind.WINDOWS:
            return f"the {normal} Windows guidance"
        if self.kind is ExpectationKind.GUIDANCE:
            return f"[Goodus]'s {normal} normal"
        return f"the {normal} expected of {self.latency_class.with_article}"

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.latency_class.value, "kind": self.kind.value,
                "read_ms": self.read_ms, "write_ms": self.write_ms,
                "critical_read_ms": self.critical_read_ms,
                "critical_write_ms": self.critical_write_ms,
                "typical_ms": self.typical_ms, "decided_by": self.decided_by,
                "source": self.source, "cite": self.cite}


def _fmt(ms: float) -> str:
    return f"{ms:g} ms"


def latency_class(dev: DeviceContext,
                  profile_kind: str | None = None) -> tuple[LatencyClass, str]:
    """The device's latency class and what decided it (profile, labels, service model).

    ``profile_kind`` is the matched catalog profile's kind (``hdd``, ``ssd``, ``array``,
    ``cloud``)."""
    cap = dev.capability
    if cap is not None and profile_kind is not None:
        kind = _profile_class(profile_kind, cap.profile, dev.device)
        if kind is not None:
            return kind, f"catalog profile {cap.profile}"
    by_label = _label_class(dev)
    if by_label is not None:
        return by_label
    svc = dev.service
    # Windows data without a profile is judged by the Windows guidance ([MS-Azure-JP]); a
    # model the labels alone gave (an aggregate, a dm device) says nothing of the media.
    if (_is_windows(dev) or svc is None
            or svc.decided_by not in (DecidedBy.DATA, DecidedBy.MEDIA, DecidedBy.PROFILE)):
        return LatencyClass.UNKNOWN, NOTHING_KNOWN
    if svc.model is ServiceModel.ONE_AT_A_TIME:
        return LatencyClass.HDD, f"the service model {svc.short}: one request at a time, a spindle"
    if svc.model is ServiceModel.PARALLEL:
        if is_virtual(dev.device, dev.info):
            return LatencyClass.CLOUD, f"the service model {svc.short} on a virtual disk"
        why = (f"the service model {svc.short}: requests served in parallel, an array or "
               "flash behind one name")
        return LatencyClass.ARRAY_LUN, why
    return LatencyClass.UNKNOWN, NOTHING_KNOWN


def _profile_class(kind: str, profile: str, name: str) -> LatencyClass | None:
    if kind == "hdd":
        return LatencyClass.HDD
    if kind == "ssd":
        nvme = "nvme" in profile or name.startswith("nvme")
        return LatencyClass.NVME if nvme else LatencyClass.SSD
    if kind == "array":
        return LatencyClass.ARRAY_LUN
    if kind == "cloud":
        return LatencyClass.CLOUD
    return None


def _label_class(dev: DeviceContext) -> tuple[LatencyClass, str] | None:
    info = dev.info
    model = (info.model or "").lower() if info is not None else ""
    if any(m in model for m in _CLOUD_MODELS):
        return LatencyClass.CLOUD, f"the model {info.model if info else ''}"
    if dev.device.startswith("nvme"):
        return LatencyClass.NVME, f"the name {dev.device}"
    if dev.kind in ("disk", "partition") and is_virtual(dev.device, info):
        return LatencyClass.CLOUD, f"a virtual disk ({dev.device}): a VM's or cloud volume"
    if (info is not None and info.rotational is not None and dev.kind in ("disk", "partition")
            and not is_virtual(dev.device, info)):
        return ((LatencyClass.HDD if info.rotational else LatencyClass.SSD),
                f"queue/rotational = {int(info.rotational)}")
    if dev.kind == "volume" and dev.source in _UNIX_SOURCES:
        return LatencyClass.ARRAY_LUN, f"a {dev.source} volume (a storage-array LUN)"
    return None


def _is_windows(dev: DeviceContext) -> bool:
    return dev.kind in _WINDOWS_KINDS or dev.source == "perfmon"


def expect(dev: DeviceContext, profile_kind: str | None = None) -> Expectation | None:
    """The expectation for ``dev``, or None for what no response time is expected of.

    ``profile_kind``: the matched catalog profile's kind, see :func:`latency_class`."""
    if dev.kind in NOT_JUDGED_KINDS:
        return None
    cap = dev.capability
    typical = cap.latency_ms_typical if cap is not None else None
    cls, why = latency_class(dev, profile_kind)
    if cap is not None and cap.latency_ms_design is not None:
        d = cap.latency_ms_design
        return Expectation(cls, ExpectationKind.PROVIDER, d, d, PROVIDER_CRITICAL_FACTOR * d,
                           PROVIDER_CRITICAL_FACTOR * d, f"catalog profile {cap.profile}",
                           f"design latency of '{cap.title}' (capability catalog; "
                           "[MS-Azure-JP]: Azure Premium SSD is designed for < 10 ms)",
                           "capability catalog", typical)
    if cls is LatencyClass.UNKNOWN:
        windows = _is_windows(dev)
        fig = WINDOWS_FIGURES if windows else CLASS_MS[cls]
        kind = ExpectationKind.WINDOWS if windows else ExpectationKind.GUIDANCE
    else:
        fig, kind = CLASS_MS[cls], ExpectationKind.CLASS
    return Expectation(cls, kind, fig.read_ms, fig.write_ms, fig.critical_read_ms,
                       fig.critical_write_ms, why, fig.source, fig.cite, typical)


def is_benchmark_job(dev: DeviceContext) -> bool:
    """A fio job (``fio:<job>``, kind ``other``): its latency is what the queue depth it
    chose produces; the disks fio reports on (``disk_util``) are judged as devices."""
    return dev.source == "fio" and dev.kind == "other"
