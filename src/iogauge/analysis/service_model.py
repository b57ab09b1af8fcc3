"""How a device serves its requests -- one at a time, or several at once -- decided from its
samples, with the sysfs labels as a prior only.

Why it matters: [Oe] §3's busy rate per IOPS (and the maximum at 100 % busy) holds for a
device that serves one request at a time; [sysstat] iostat(1) warns that %util "does not
reflect the performance limits" of devices serving requests in parallel (RAID arrays, SSDs).
The labels that would say which a device is lie often: a virtio disk reports
``queue/rotational = 1`` over flash, and loop, dm and md devices report 0 over spindles. So
the samples decide, by these signals (each kept as evidence, see :class:`Signal`):

* **I/O per busy second against requests in service.** On a one-at-a-time device every
  request costs the same busy time whatever the queue (util = IOPS x service time, [Oe]
  §3); on a parallel device the busy time is shared by the requests in service, so I/O per
  busy second grows with them.
* **The plateau at high %util:** IOPS flat while the queue grows (one at a time), or still
  rising with the queue (parallel).
* **%util above 100 %:** only a source summing busy time over several servers shows it.
* **A deep queue at moderate %util:** several requests in service at once.
* **Physical plausibility of a spindle** (bounds from the catalog's fastest disk,
  profile ``hdd-15k``: Seagate Cheetah 15K.7, 204 MB/s at most, 2.0 ms average rotational
  latency): no spindle moves more than that rate, serves random reads in under half its
  rotational latency, or 1,000 random IOPS; and positioning times (>= 2 ms per small
  random request at low queue) are a spindle's (or an array of spindles').
* **The labels** (kind, rotational flag, model, catalog profile) as a prior.

A user's ``--media DEV=...`` or ``--profile DEV=NAME`` beats every signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from iogauge.analysis.points import F64, Points
from iogauge.errors import IogaugeError

if TYPE_CHECKING:
    from iogauge.analysis.types import Capability
    from iogauge.model.device import DeviceInfo


class ServiceModel(StrEnum):
    """How a device serves requests."""

    ONE_AT_A_TIME = "one-at-a-time"
    PARALLEL = "parallel"
    UNDETERMINED = "undetermined"


class DecidedBy(StrEnum):
    """What settled the service model."""

    MEDIA = "--media"
    PROFILE = "--profile"
    DATA = "data"
    LABEL = "label"
    NOTHING = "nothing"


class Strength(StrEnum):
    """How much a signal or a label weighs."""

    DIRECT = "direct"     # measures the service itself: decides against everything else
    STRONG = "strong"     # decides against any label
    MEDIUM = "medium"     # decides against a weak label or none
    WEAK = "weak"         # decides only where nothing else says anything
    HINT = "hint"         # a label known to lie (a virtual disk's rotational flag): shown,
                          # never decides


class MediaOptionError(IogaugeError):
    """A ``--media`` option cannot be understood."""


#: ``--media`` values and the service model each means. ``raid``: an array's members serve
#: requests at once ([sysstat] iostat(1)); an array whose controller takes them one at a
#: time shows that in its samples -- leave --media out to let them decide.
MEDIA: dict[str, ServiceModel] = {
    "hdd": ServiceModel.ONE_AT_A_TIME, "one-at-a-time": ServiceModel.ONE_AT_A_TIME,
    "ssd": ServiceModel.PARALLEL, "nvme": ServiceModel.PARALLEL,
    "raid": ServiceModel.PARALLEL, "parallel": ServiceModel.PARALLEL,
}

# ---- bounds (catalog profile hdd-15k: Seagate Cheetah 15K.7 product manual §4.2.3) --------
#: The fastest spindle's sustained media rate is 204 MB/s; half as much again for margin.
SPINDLE_MAX_MBPS = 1.5 * 204.0
#: A random read on spinning media waits half a revolution on average: 2.0 ms at 15,000
#: rpm. A mean below half of that (and for many reads) is no spindle's.
SPINDLE_MIN_RANDOM_READ_MS = 1.0
#: A 15k spindle's random small read takes ~5.5 ms (3.3 ms seek + 2.0 ms rotation + 0.2 ms
#: controller): ~180 IOPS; command queueing at most doubles that. 1,000 is over 5x.
SPINDLE_MAX_RANDOM_IOPS = 1000.0
#: Positioning: at low queue, small random requests taking this long are seeks and
#: rotations (flash serves them in well under a millisecond).
MECHANICAL_MIN_MS = 2.0
#: Requests up to this size count as small for the positioning and random-read bounds.
SMALL_REQUEST_KB = 64.0
#: The workload counts as random when its (estimated) sequential share is below this.
RANDOM_MAX_SEQ_PCT = 50.0

# ---- concurrency signal -------------------------------------------------------------------
#: Intervals below this %util carry too little busy time to measure the busy per I/O.
MIN_BUSY_PCT = 10.0
#: The requests in service must span at least this ratio, up to at least CONC_MIN_HIGH.
CONC_MIN_SPAN = 2.5
CONC_MIN_HIGH = 3.0
#: I/O per busy second growing this much with the requests in service = parallel; at most
#: ONE_MAX_GAIN = one at a time (each request costs the same busy time whatever the queue,
#: within the scatter of the mix). Between lies a spindle's command reordering (the lab's
#: NCQ drive: 1.8x) or a parallel device held back by one shared stage (a host link): the
#: signal leaves those to the others.
PARALLEL_MIN_GAIN = 2.5
ONE_MAX_GAIN = 1.3
#: %util at or above this is saturation for the plateau signal.
PLATEAU_UTIL_PCT = 95.0
PLATEAU_MIN_POINTS = 3
#: Deep queue at moderate %util (a single server with 4 queued is busy ~80 % of the time
#: unless its arrivals are very bursty).
DEEP_QUEUE = 4.0
DEEP_QUEUE_MAX_UTIL_PCT = 60.0
#: %util above this is sums of busy time over several servers (an interval's timing
#: jitter gives Linux 100-101 %), when it is more than a stray interval.
OVER_FULL_PCT = 102.0


@dataclass(frozen=True)
class Signal:
    """One piece of evidence: what the data (or a label) shows, and where it points.

    Attributes:
        name: short id (``concurrency``, ``plateau``, ``physical``, ``positioning``,
            ``over_100``, ``deep_queue``, ``util_linear``, ``label``).
        points_to: the model it supports, or UNDETERMINED when it was measured and shows
            neither (kept: "not seen" is evidence too).
        strength: how much it weighs.
        text: the sentence a user reads, with the numbers.
    """

    name: str
    points_to: ServiceModel
    strength: Strength
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.name, "points_to": str(self.points_to),
                "strength": str(self.strength), "text": self.text}


@dataclass
class ServiceDecision:
    """The decision and everything behind it.

    Attributes:
        model: the service model used by every part of the analysis.
        decided_by: what settled it.
        label: the model the labels alone suggest (UNDETERMINED when they say nothing).
        signals: data signals in the order measured, then the label.
        conflict: the data overrode the labels (said so in ``summary``).
        summary: one sentence: the model, what decided it, and the disagreement if any.
    """

    model: ServiceModel
    decided_by: DecidedBy
    label: ServiceModel = ServiceModel.UNDETERMINED
    signals: list[Signal] = field(default_factory=list)
    conflict: bool = False
    summary: str = ""

    @property
    def util_is_capacity(self) -> bool | None:
        """True when %util measures capacity ([Oe] §3), None when undetermined."""
        if self.model is ServiceModel.UNDETERMINED:
            return None
        return self.model is ServiceModel.ONE_AT_A_TIME

    @property
    def short(self) -> str:
        """``parallel (data)``: for a table column."""
        return f"{self.model} ({self.decided_by})"

    def to_dict(self) -> dict[str, Any]:
        return {"model": str(self.model), "decided_by": str(self.decided_by),
                "label": str(self.label), "conflict": self.conflict, "summary": self.summary,
                "signals": [s.to_dict() for s in self.signals]}


_PHRASE = {ServiceModel.ONE_AT_A_TIME: "serves one request at a time",
           ServiceModel.PARALLEL: "serves requests in parallel",
           ServiceModel.UNDETERMINED: "unknown whether it serves requests one at a time"}


def parse_media_overrides(texts: list[str] | tuple[str, ...]) -> dict[str, ServiceModel]:
    """``--media DEV=hdd|ssd|nvme|raid|one-at-a-time|parallel`` options to {device: model}."""
    out: dict[str, ServiceModel] = {}
    for text in texts:
        dev, sep, name = text.rpartition("=")
        dev, name = dev.strip(), name.strip().lower()
        if not sep or not dev or name not in MEDIA:
            raise MediaOptionError(f"--media {text!r}: expected DEVICE=MEDIA with MEDIA one "
                                   f"of {', '.join(MEDIA)}, e.g. loop0=hdd")
        out[dev] = MEDIA[name]
    return out


# ---- labels -----------------------------------------------------------------------------

#: Kinds of other platforms that aggregate several devices or paths (RMF ranks, LCUs and
#: ports, Oracle tablespaces, Windows volumes) or are memory: never one spindle.
_AGGREGATE_KINDS = frozenset({"rank", "lcu", "port", "tablespace", "datafile",
                              "logical_disk", "ram"})


def is_virtual(name: str, info: DeviceInfo | None) -> bool:
    """A hypervisor's disk (virtio, Xen, QEMU/VirtualBox/VMware models): its labels
    describe the emulation, not the storage behind it."""
    if name.startswith(("vd", "xvd")):
        return True
    if info is None:
        return False
    vendor, model = (info.vendor or "").lower(), (info.model or "").lower()
    return vendor == "0x1af4" or any(v in model for v in ("qemu", "vbox", "virtual disk",
                                                           "vmware"))


def label_prior(name: str, kind: str, info: DeviceInfo | None,
                capability: Capability | None = None) -> tuple[ServiceModel, Strength, str]:
    """What the labels alone say: (model, how far to trust it, why)."""
    if kind in _AGGREGATE_KINDS:
        return (ServiceModel.PARALLEL, Strength.STRONG,
                f"kind {kind}: an aggregate of several devices or paths")
    if capability is not None and "--profile" not in capability.matched_by:
        model = ServiceModel.PARALLEL if capability.parallel else ServiceModel.ONE_AT_A_TIME
        strength = Strength.HINT if is_virtual(name, info) else Strength.MEDIUM
        return model, strength, f"catalog profile {capability.profile} ({capability.matched_by})"
    if kind == "loop":
        return (ServiceModel.UNDETERMINED, Strength.WEAK,
                ("loop device: its backing file's storage decides, and its rotational flag "
                 "says nothing about it"))
    if kind == "dm" and info is not None and len(info.slaves) == 1:
        return (ServiceModel.UNDETERMINED, Strength.WEAK,
                f"dm device over one device ({info.slaves[0]}): that device's media decides")
    if kind in ("dm", "md"):
        return (ServiceModel.PARALLEL, Strength.WEAK,
                (f"{kind} device over other devices (over spindles it may still serve one "
                 "request at a time)"))
    if name.startswith("nvme"):
        return ServiceModel.PARALLEL, Strength.MEDIUM, "NVMe device"
    if info is None or info.rotational is None:
        return ServiceModel.UNDETERMINED, Strength.WEAK, "no rotational flag or profile"
    model = ServiceModel.ONE_AT_A_TIME if info.rotational else ServiceModel.PARALLEL
    flag = f"queue/rotational = {int(info.rotational)}"
    if is_virtual(name, info):
        return model, Strength.HINT, (f"{flag} on a virtual disk (the hypervisor's flag, not "
                                      "the storage behind it)")
    return model, Strength.MEDIUM, flag


# ---- data signals -----------------------------------------------------------------------


def _finite(*arrays: F64) -> np.ndarray[Any, np.dtype[np.bool_]]:
    ok = np.ones(arrays[0].size, dtype=bool)
    for a in arrays:
        ok &= np.isfinite(a)
    return ok


def _concurrency(p: Points) -> Signal | None:
    """I/O per busy second against requests in service (aqu-sz / busy share)."""
    ok = _finite(p.util, p.aqu_sz, p.iops) & (p.util >= MIN_BUSY_PCT) & (p.aqu_sz > 0)
    if int(ok.sum()) < 6:
        return None
    busy = np.minimum(p.util[ok], 100.0) / 100.0
    conc = p.aqu_sz[ok] / busy
    per_busy = p.iops[ok] / busy
    lo_c, hi_c = np.quantile(conc, [0.25, 0.75])
    lo, hi = conc <= lo_c, conc >= hi_c
    if int(lo.sum()) < 3 or int(hi.sum()) < 3:
        return None
    c_lo, c_hi = float(np.median(conc[lo])), float(np.median(conc[hi]))
    if c_hi < CONC_MIN_HIGH or c_hi < CONC_MIN_SPAN * max(c_lo, 1e-9):
        return None
    gain = float(np.median(per_busy[hi]) / np.median(per_busy[lo]))
    what = (f"I/O per busy second {gain:.2g}x as high with {c_hi:.3g} requests in service "
            f"as with {c_lo:.2g}")
    if gain >= PARALLEL_MIN_GAIN:
        return Signal("concurrency", ServiceModel.PARALLEL, Strength.DIRECT,
                      f"{what}: several requests are served at once")
    if gain <= ONE_MAX_GAIN:
        return Signal("concurrency", ServiceModel.ONE_AT_A_TIME, Strength.DIRECT,
                      f"{what}: each request costs the same busy time whatever the queue "
                      "([Oe] §3)")
    return Signal("concurrency", ServiceModel.UNDETERMINED, Strength.WEAK,
                  f"{what}: more than one at a time (<= {ONE_MAX_GAIN:g}x), less than "
                  f"parallel service (>= {PARALLEL_MIN_GAIN:g}x): a spindle reordering its "
                  "queue, or a parallel device held back by one shared stage")


def _plateau(p: Points) -> Signal | None:
    """IOPS at >= 95 % busy: flat while the queue grows, or still rising with it."""
    ok = _finite(p.util, p.aqu_sz, p.iops) & (p.util >= PLATEAU_UTIL_PCT)
    if int(ok.sum()) < PLATEAU_MIN_POINTS:
        return None
    x, q = p.iops[ok], p.aqu_sz[ok]
    q_lo, q_hi = (float(v) for v in np.quantile(q, [0.1, 0.9]))
    if q_hi < 2.0 * max(q_lo, 1e-9):
        return None
    lo, hi = q <= q_lo, q >= q_hi
    x_lo, x_hi = float(np.median(x[lo])), float(np.median(x[hi]))
    n = int(ok.sum())
    what = (f"at >= {PLATEAU_UTIL_PCT:g} % busy ({n} intervals) {x_lo:,.4g} IOPS with "
            f"{q_lo:.3g} requests queued, {x_hi:,.4g} with {q_hi:.3g}")
    if x_hi >= PARALLEL_MIN_GAIN * x_lo:
        return Signal("plateau", ServiceModel.PARALLEL, Strength.DIRECT,
                      f"{what}: IOPS still rise with the queue at full busy")
    if x_hi <= 1.2 * x_lo and q_lo <= 2.5:
        return Signal("plateau", ServiceModel.ONE_AT_A_TIME, Strength.DIRECT,
                      f"{what}: a plateau, the queue only waits ([Oe] §3: 100 % busy is the "
                      "maximum)")
    return None


def _over_full(p: Points) -> Signal | None:
    over = np.isfinite(p.util) & (p.util > OVER_FULL_PCT)
    if int(over.sum()) < max(2, int(0.05 * p.size)):
        return None
    return Signal("over_100", ServiceModel.PARALLEL, Strength.DIRECT,
                  f"%util above 100 % ({float(p.util[over].max()):.0f} %) in {int(over.sum())} "
                  "interval(s): the source sums busy time over several servers")


def _deep_queue(p: Points) -> Signal | None:
    q = _finite(p.aqu_sz, p.util)
    deep = q & (p.aqu_sz >= DEEP_QUEUE) & (p.util < DEEP_QUEUE_MAX_UTIL_PCT)
    if int(deep.sum()) < max(2, int(0.1 * int(q.sum()))):
        return None
    # Weak: bursty arrivals queue up at moderate %util on a single server too ([Oe] §5's
    # load generator issues each second's requests at once).
    return Signal("deep_queue", ServiceModel.PARALLEL, Strength.WEAK,
                  f"{int(deep.sum())} interval(s) with >= {DEEP_QUEUE:g} requests outstanding "
                  f"at < {DEEP_QUEUE_MAX_UTIL_PCT:g} % busy: several in service at once, or "
                  "bursty arrivals")


def _physical(p: Points, seq_pct: float | None) -> Signal | None:
    """Figures no single spindle can give (catalog profile hdd-15k's bounds)."""
    mbps = p.kbps / 1024.0
    fast = np.isfinite(mbps) & (mbps > SPINDLE_MAX_MBPS)
    if int(fast.sum()) >= 2:
        return Signal("physical", ServiceModel.PARALLEL, Strength.STRONG,
                      f"{float(np.max(mbps[fast])):,.0f} MB/s in {int(fast.sum())} intervals: "
                      f"more than any single spindle moves (the fastest in the catalog, "
                      f"hdd-15k, sustains 204 MB/s): flash or several devices")
    if seq_pct is None or seq_pct >= RANDOM_MAX_SEQ_PCT:
        return None
    small = _finite(p.r_iops, p.r_await_ms, p.areq_kb) & (p.areq_kb <= SMALL_REQUEST_KB)
    busy = small & (p.r_iops >= 100.0)
    if int(busy.sum()) < 3:
        return None
    r_iops = float(np.median(p.r_iops[busy]))
    r_await = float(np.average(p.r_await_ms[busy], weights=p.r_iops[busy]))
    if r_iops > SPINDLE_MAX_RANDOM_IOPS or r_await < SPINDLE_MIN_RANDOM_READ_MS:
        return Signal("physical", ServiceModel.PARALLEL, Strength.STRONG,
                      f"{r_iops:,.0f} random reads/s at {r_await:.3g} ms: a spindle gives at "
                      f"most ~{SPINDLE_MAX_RANDOM_IOPS:,.0f} random IOPS and needs >= "
                      f"{SPINDLE_MIN_RANDOM_READ_MS:g} ms (half a revolution at 15,000 rpm, "
                      "catalog profile hdd-15k): flash")
    return None


def _positioning(p: Points, seq_pct: float | None) -> Signal | None:
    """Seek and rotation times at low queue: spinning media."""
    if seq_pct is None or seq_pct >= RANDOM_MAX_SEQ_PCT:
        return None
    low = (_finite(p.await_ms, p.aqu_sz, p.areq_kb, p.iops) & (p.aqu_sz <= 1.5)
           & (p.areq_kb <= SMALL_REQUEST_KB) & (p.iops <= SPINDLE_MAX_RANDOM_IOPS))
    if int(low.sum()) < 3:
        return None
    lat = float(np.median(p.await_ms[low]))
    if lat < MECHANICAL_MIN_MS:
        return None
    return Signal("positioning", ServiceModel.ONE_AT_A_TIME, Strength.MEDIUM,
                  f"{lat:.3g} ms per small random request at low queue ({int(low.sum())} "
                  "intervals): seek and rotation times of spinning media")


def _util_linear(p: Points) -> Signal | None:
    """How well %util = k x IOPS through the origin describes the unsaturated intervals."""
    ok = _finite(p.util, p.iops) & (p.util < PLATEAU_UTIL_PCT) & (p.util > 0)
    if int(ok.sum()) < 5:
        return None
    x, y = p.iops[ok], p.util[ok]
    if float(y.max()) < 20.0 or float(x.max()) < 2.0 * float(x.min()):
        return None
    k = float((x * y).sum() / (x * x).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    # %util that does not move while IOPS do is as far from proportional as it gets.
    r2 = 1.0 - float(((y - k * x) ** 2).sum()) / ss_tot if ss_tot > 1e-9 else -math.inf
    if r2 >= 0.9:
        return Signal("util_linear", ServiceModel.ONE_AT_A_TIME, Strength.WEAK,
                      f"%util proportional to IOPS below saturation (r² {r2:.2f}; also true "
                      "of a parallel device kept at one request at a time)")
    if not math.isfinite(r2):
        return Signal("util_linear", ServiceModel.PARALLEL, Strength.WEAK,
                      f"%util stayed at {float(y.mean()):.3g} % while IOPS went from "
                      f"{float(x.min()):,.4g} to {float(x.max()):,.4g}")
    return Signal("util_linear", ServiceModel.PARALLEL, Strength.WEAK,
                  f"%util not proportional to IOPS below saturation (r² {r2:.2f} for a line "
                  "through the origin)")


def data_signals(p: Points, seq_pct: float | None) -> list[Signal]:
    """Every data signal that could be measured, strongest kinds first."""
    found = [_over_full(p), _concurrency(p), _plateau(p), _physical(p, seq_pct),
             _deep_queue(p), _positioning(p, seq_pct), _util_linear(p)]
    return [s for s in found if s is not None]


# ---- the decision -----------------------------------------------------------------------


def _vote(signals: list[Signal], strength: Strength) -> ServiceModel | None:
    """The model the signals of this strength agree on; None if none or they conflict."""
    sides = {s.points_to for s in signals
             if s.strength is strength and s.points_to is not ServiceModel.UNDETERMINED}
    return sides.pop() if len(sides) == 1 else None


def decide(name: str, kind: str, info: DeviceInfo | None, capability: Capability | None,
           points: Points | None, seq_pct: float | None,
           override: ServiceModel | None = None) -> ServiceDecision:
    """The service model of one device: ``--media``, then ``--profile``, then the data's
    direct signals, then its strong ones, then medium ones unless a label of more weight
    disagrees, then the labels (a hint never decides); weak signals only where nothing else
    says anything and two or more agree. Never raises."""
    label, label_strength, label_why = label_prior(name, kind, info, capability)
    signals = data_signals(points, seq_pct) if points is not None and points.size else []
    label_sig = Signal("label", label, label_strength, label_why)
    if override is not None:
        return ServiceDecision(override, DecidedBy.MEDIA, label, [*signals, label_sig],
                               summary=f"{_PHRASE[override]}: given with --media")
    if capability is not None and "--profile" in capability.matched_by:
        model = ServiceModel.PARALLEL if capability.parallel else ServiceModel.ONE_AT_A_TIME
        return ServiceDecision(model, DecidedBy.PROFILE, label, [*signals, label_sig],
                               summary=f"{_PHRASE[model]}: profile {capability.profile} "
                               "given with --profile")
    sides = {st: {s.points_to for s in signals if s.strength is st}
             - {ServiceModel.UNDETERMINED} for st in Strength}
    # What measures the service itself beats an inference from the media (a flash device
    # behind a single-threaded server serves one request at a time), which beats labels.
    direct = _vote(signals, Strength.DIRECT)
    strong = direct or (None if len(sides[Strength.DIRECT]) > 1
                        else _vote(signals, Strength.STRONG))
    conflicting = strong is None and (len(sides[Strength.DIRECT]) > 1
                                      or len(sides[Strength.STRONG]) > 1)
    medium = None if conflicting else _vote(signals, Strength.MEDIUM)
    data = strong
    if data is None and medium is not None and (
            label_strength in (Strength.WEAK, Strength.HINT)
            or label in (medium, ServiceModel.UNDETERMINED)):
        data = medium
    if data is None and not conflicting and (label is ServiceModel.UNDETERMINED
                                             or label_strength is Strength.HINT):
        # Nothing else to go by: weak signals decide when two or more agree and none
        # disagrees.
        weak = _vote(signals, Strength.WEAK)
        if sum(1 for s in signals if s.points_to is weak) >= 2:
            data = weak
    if data is not None:
        deciding = next(s for s in signals if s.points_to is data)
        conflict = label not in (data, ServiceModel.UNDETERMINED)
        text = f"{_PHRASE[data]}, from the data: {deciding.text}"
        if conflict:
            text = f"{_PHRASE[data]}: labelled {label_why}, but {deciding.text}"
        return ServiceDecision(data, DecidedBy.DATA, label, [*signals, label_sig],
                               conflict=conflict, summary=text)
    if label is not ServiceModel.UNDETERMINED and label_strength is not Strength.HINT:
        text = f"{_PHRASE[label]}, from the labels: {label_why}"
        if conflicting:
            text += " (the data's signals disagree with each other)"
        return ServiceDecision(label, DecidedBy.LABEL, label, [*signals, label_sig],
                               summary=text)
    return ServiceDecision(ServiceModel.UNDETERMINED, DecidedBy.NOTHING, label,
                           [*signals, label_sig],
                           summary=f"{_PHRASE[ServiceModel.UNDETERMINED]} ({label_why}; the "
                           "data shows no queue variation, plateau or physical bound to judge "
                           "by)")
