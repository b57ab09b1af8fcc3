"""Event-driven simulator of workloads on a disk model, in virtual time.

Deterministic for a seed (numpy ``Generator``; events at equal times run in the order they
were scheduled). The event loop is a heap of plain tuples, random draws are made in numpy
batches, and the models' hot paths are inlined: ~6 us of CPU per request for the loop
itself, plus the model's share (an HDD ~2-3 us, [Oe]'s RAID-5 with write-back members
~15 us) on the development VM; ``benchmarks/simulator_speed.py`` measures an hour of a
200-IOPS device per profile.

What happens to one request::

    thread ready --(workload rate cap)--> issued --(group throttle: io.max riops/wiops)-->
    submitted to the device (counted in flight) --(FIFO until one of the model's
    ``channels`` is free)--> in service for ``model.service_time(...)`` --> completed
    --> the thread is ready again (closed loop: one outstanding I/O per thread)

**Queued models** (``model.queued``: an HDD with command queueing, or a RAID of such
members; :mod:`iogauge.lab.hdd`) reorder what they hold, so a request's completion is not
known when it reaches the device. The simulator binds such a model to its event heap
(``model.bind(at, complete)``): the model schedules its own events (a drive finishing a
command, a RAID phase reaching its members) with ``at``, which run in time order among
the simulator's, and reports each request's completion time with ``complete`` as soon as
it is known; the completion then happens as for any model. ``channels`` is the queue
depth the host may fill (a drive's NCQ tags, a controller's queue); requests beyond it
wait in the same FIFO. Those events roughly double the heap traffic: an hour of the
benchmark's 200 IOPS on ``raid5-6x400g-ncq`` took 11-16 us of CPU per request against
8-10 us for ``raid5-6x400g`` in the same runs (compiled models, loaded dev VM).

**Counters exactly as the kernel keeps them** (block/genhd.c ``diskstats_show``, 6.x): a
request is in flight from submission to the device until completion (blk-throttle holds a
bio *before* it is accounted, so throttled requests are not in flight); ``rd_ticks`` /
``wr_ticks`` are the sums of per-request durations in nanoseconds, printed as ms with
``div_u64(nsecs, NSEC_PER_MSEC)``; ``time_in_queue`` is the same division applied to the
sum of all the nsecs; ``io_ticks`` is the time with at least one request in flight, brought
up to the read time when something is in flight (``update_io_ticks`` in
``diskstats_show``); ``in_flight`` is the gauge at the read. No merges, discards or flushes
happen, so those counters are present and stay 0. Sampling the counters every
``interval_s`` and passing them through :func:`iogauge.collector.derive.counter_deltas` and
:func:`~iogauge.collector.derive.derive_metrics` gives the SampleFrame (source
``lab-sim``), exactly as the live collector derives a real device's.

**Groups and throttles.** Every workload belongs to a group ([Oe]'s A and B). Each group
has per-direction IOPS limits, the virtual-time twin of cgroup v2 ``io.max``
``riops=``/``wiops=``: a token bucket of the limit's rate holding at most one throttle slice
of tokens (blk-throttle's ``throtl_slice``, 100 ms on rotational devices), FIFO per group and
direction. A group may instead (or also) have a *user-level* cap on its total issue rate,
``IopsLimit.iops``: [Oe]'s own actuator (§4 (4), §5: B's load threads run at the smaller
of their own target and the controller's ``b``, counted per wall-clock second before the
I/O is issued), which each of the group's workloads applies through its issue limiter.

**The controller hook** drives a guarantee policy in virtual time. At the end of every
sampling interval the simulator calls ``controller(observation)`` with an
:class:`IntervalObservation`: the interval's device metrics (the SampleFrame row, as a
dict), per-group statistics (:class:`GroupInterval`: IOPS, kB/s, latency, throttle wait,
queue) and the limits in force. The controller returns ``None`` (no change) or a mapping
``group -> IopsLimit`` for the groups whose limits change (``IopsLimit()`` removes a
group's throttle). New limits apply from that instant, as writing ``io.max`` would. The
controller sees exactly what the live monitor sees (the device's diskstats and the
groups' io.stat), one interval at a time, and nothing else.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.collector.derive import DERIVED_COLUMNS, counter_deltas, derive_metrics
from iogauge.collector.diskstats import IDX, N_FIELDS
from iogauge.lab.model import DiskModel, QueuedDiskModel, Request
from iogauge.lab.profiles import ModelProfile, build_model
from iogauge.lab.workloads import Workload, oe_paper
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

SOURCE = "lab-sim"
#: Burst allowance of a throttle: blk-throttle's slice on rotational devices (HZ/10).
THROTTLE_SLICE_S = 0.1
#: Default start of virtual time for timestamps (any fixed instant keeps runs reproducible).
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

_COMPLETE, _ISSUE, _RELEASE, _SAMPLE, _MODEL = 0, 1, 2, 3, 4
# Per-group accumulator slots.
_G_RIOS, _G_WIOS, _G_RBYTES, _G_WBYTES, _G_RNS, _G_WNS, _G_THRNS, _G_ISSUED = range(8)
_G_SLOTS = 8


@dataclass(frozen=True)
class IopsLimit:
    """Per-direction IOPS limits of a group (cgroup v2 ``io.max`` ``riops``/``wiops``), and
    optionally a user-level cap on its total issue rate.

    Attributes:
        riops: reads per second allowed (None: unlimited).
        wiops: writes per second allowed (None: unlimited).
        iops: reads + writes per second the group's threads may *issue* (None: no cap):
            [Oe]'s actuator, not the kernel's -- its benchmark counted I/Os per second
            in user space and blocked the rest of the second once ``b`` were issued (§4
            (4)), B's load threads running at the smaller of their own target and ``b``
            (§5). Each workload of the group gets its share (by the caps in force, equal
            when uncapped) as a cap in its own arrival mode, the smaller of that and its
            own cap applying. The I/O it holds back is not issued: neither in flight nor
            queued in the kernel.
    """

    riops: float | None = None
    wiops: float | None = None
    iops: float | None = None

    def __post_init__(self) -> None:
        for v in (self.riops, self.wiops, self.iops):
            if v is not None and not v > 0:
                raise ValueError("an IOPS limit must be > 0 (None for unlimited)")

    @classmethod
    def total(cls, iops: float, read_share: float) -> IopsLimit:
        """Split a total IOPS limit by the observed read share (the kernel has no total)."""
        rs = min(1.0, max(0.0, read_share))
        return cls(riops=max(iops * rs, 1e-3), wiops=max(iops * (1.0 - rs), 1e-3))


@dataclass(frozen=True)
class GroupInterval:
    """One group's statistics over one sampling interval (what io.stat deltas give).

    Attributes:
        group: group name.
        r_ios, w_ios: reads / writes completed in the interval.
        r_iops, w_iops, iops: the same per second.
        r_kBps, w_kBps: kilobytes (1024 B) per second.
        r_await_ms, w_await_ms: mean device time (submission to completion) of the
            completed requests (0.0 when none, as iostat prints).
        throttle_wait_ms: mean time the completed requests were held by the throttle.
        queued: requests held by the throttle at the end of the interval.
        issued: requests the group's threads issued in the interval (before the throttle).
        demand_iops: the group's offered load -- the sum of its workloads' caps in force at
            the end of the interval; None when one of them is uncapped (closed loop: the
            demand is whatever the device gives).
    """

    group: str
    r_ios: int
    w_ios: int
    r_iops: float
    w_iops: float
    iops: float
    r_kBps: float
    w_kBps: float
    r_await_ms: float
    w_await_ms: float
    throttle_wait_ms: float
    queued: int
    issued: int
    demand_iops: float | None


@dataclass(frozen=True)
class IntervalObservation:
    """What a controller sees at the end of a sampling interval.

    Attributes:
        t_end_s: virtual time of the end of the interval (s since the start).
        interval_s: its length.
        device: the device's SampleFrame measures for the interval (``r_iops``, ``w_iops``,
            ``iops``, ``util_pct``, ``await_ms``, ``aqu_sz``, ... as
            :func:`~iogauge.collector.derive.derive_metrics` names them).
        groups: per-group statistics.
        limits: the limits in force during the interval, per group.
    """

    t_end_s: float
    interval_s: float
    device: Mapping[str, float]
    groups: Mapping[str, GroupInterval]
    limits: Mapping[str, IopsLimit]


Controller = Callable[[IntervalObservation], Mapping[str, IopsLimit] | None]


@dataclass
class SimResult:
    """The outcome of a simulation.

    Attributes:
        frame: one SampleFrame row per interval (source ``lab-sim``).
        groups: per group per interval: ``ts``, ``t_end_s``, ``group`` and the
            :class:`GroupInterval` fields, plus ``limit_riops`` / ``limit_wiops`` /
            ``limit_iops`` in force.
        counters: int64 (intervals + 1, 17) diskstats snapshots, the first at time 0.
        sample_times_s: virtual time of each snapshot.
        limit_changes: (time, group, new limit) in the order they were applied.
        completed: requests completed in the run.
        model: the model's profile name.
        workloads: the workloads simulated.
        seed: the seed.
    """

    frame: SampleFrame
    groups: pl.DataFrame
    counters: npt.NDArray[np.int64]
    sample_times_s: npt.NDArray[np.float64]
    limit_changes: list[tuple[float, str, IopsLimit]]
    completed: int
    model: str
    workloads: tuple[Workload, ...]
    seed: int

    def steady_iops(self, warmup_s: float = 0.0) -> float:
        """Completions per second after ``warmup_s`` (counter difference, exact)."""
        t = self.sample_times_s
        k0 = int(np.searchsorted(t, warmup_s - 1e-9))
        if k0 >= len(t) - 1:
            raise ValueError("warm-up covers the whole run")
        c = self.counters
        n = (c[-1, IDX["rd_ios"]] + c[-1, IDX["wr_ios"]]
             - c[k0, IDX["rd_ios"]] - c[k0, IDX["wr_ios"]])
        return float(n) / float(t[-1] - t[k0])

    def steady_util_pct(self, warmup_s: float = 0.0) -> float:
        """%util over the run after ``warmup_s``."""
        t = self.sample_times_s
        k0 = int(np.searchsorted(t, warmup_s - 1e-9))
        c = self.counters
        busy_ms = c[-1, IDX["io_ticks_ms"]] - c[k0, IDX["io_ticks_ms"]]
        return float(busy_ms) / float((t[-1] - t[k0]) * 1000.0) * 100.0


# ---- random draws ---------------------------------------------------------------------

class _Draws:
    """Pre-drawn (is_write, offset, size) triples of one workload, refilled in batches."""

    __slots__ = ("_batch", "_cap", "i", "n", "offs", "rng", "sizes", "w", "writes")

    def __init__(self, w: Workload, rng: np.random.Generator, capacity: int,
                 batch: int) -> None:
        self.w = w
        self.rng = rng
        self._cap = capacity
        self._batch = batch
        self.writes: list[bool] = []
        self.offs: list[int] = []
        self.sizes: list[int] = []
        self.i = 0
        self.n = 0
        for r in w.regions:
            lo, hi = self._bounds(r.start, r.end)
            if hi - lo < max(s.size_bytes for s in w.sizes):
                raise ValueError(f"workload {w.name!r}: region {r.start:g}-{r.end:g} of a "
                                 f"{capacity}-byte device is smaller than its largest I/O")

    def _bounds(self, start: float, end: float) -> tuple[int, int]:
        """First and end byte of a region, rounded inwards to the alignment."""
        a = self.w.align_bytes
        return (math.ceil(start * self._cap / a) * a,
                math.floor(end * self._cap / a) * a)

    def refill(self) -> None:
        w, rng, n = self.w, self.rng, self._batch
        size_vals = np.array([s.size_bytes for s in w.sizes], dtype=np.int64)
        size_p = np.array([s.share for s in w.sizes], dtype=np.float64)
        sizes = size_vals[rng.choice(len(size_vals), size=n, p=size_p / size_p.sum())]
        writes = rng.random(n) >= w.read_share
        if len(w.regions) == 1:
            ridx = np.zeros(n, dtype=np.int64)
        else:
            rp = np.array([r.weight for r in w.regions], dtype=np.float64)
            ridx = rng.choice(len(rp), size=n, p=rp / rp.sum())
        bounds = np.array([self._bounds(r.start, r.end) for r in w.regions], dtype=np.int64)
        lo = bounds[ridx, 0]
        hi = bounds[ridx, 1]
        a = w.align_bytes
        # Aligned start positions such that the whole transfer stays inside the region.
        slots = (hi - lo - sizes) // a + 1
        offs = lo + (rng.random(n) * slots).astype(np.int64) * a
        self.writes = writes.tolist()
        self.offs = offs.tolist()
        self.sizes = sizes.tolist()
        self.i = 0
        self.n = n


class _SeqCursor:
    """A sequential thread's position: walks its region, wrapping to its start."""

    __slots__ = ("hi", "lo", "pos")

    def __init__(self, lo: int, hi: int, pos: int) -> None:
        self.lo, self.hi, self.pos = lo, hi, pos


# ---- limiters ---------------------------------------------------------------------------

class _Limiter:
    """A workload's issue-rate cap (see :mod:`iogauge.lab.workloads`).

    ``rate`` None lets every thread through (an uncapped stretch of a schedule).
    """

    __slots__ = ("_count", "_gaps", "_gi", "_last", "_mode", "_override", "_per_s", "_rate",
                 "_rng", "_schedule", "_win")

    def __init__(self, w: Workload, rng: np.random.Generator) -> None:
        self._mode = w.arrival
        self._rng = rng
        self._last = -math.inf
        self._gaps: list[float] = []
        self._gi = 0
        self._win = -1
        self._count = 0
        self._schedule = list(w.rate_schedule)
        self._rate: float | None = None
        self._per_s = 1
        self._override: float | None = None
        self._set_rate(w.rate_iops)

    def set_override(self, rate: float | None) -> None:
        """A cap from outside (a user-level group limit, :attr:`IopsLimit.iops`); the
        smaller of it and the workload's own cap applies. None: the workload's own."""
        self._override = rate

    def _set_rate(self, rate: float | None) -> None:
        self._rate = rate
        if rate is not None:
            self._per_s = max(1, round(rate))

    def _gap(self, rate: float) -> float:
        if self._mode == "fixed":
            return 1.0 / rate
        if self._gi >= len(self._gaps):
            # Unit-mean exponential draws, scaled by the rate in force when used.
            self._gaps = self._rng.exponential(1.0, 4096).tolist()
            self._gi = 0
        g = self._gaps[self._gi]
        self._gi += 1
        return g / rate

    def next_permit(self, t: float) -> float:
        """Reserve the next issue slot for a thread ready at ``t``; return its time."""
        while self._schedule and self._schedule[0][0] <= t:
            self._set_rate(self._schedule.pop(0)[1])
        rate = self._rate
        per_s = self._per_s
        ov = self._override
        if ov is not None and (rate is None or ov < rate):
            rate = ov
            per_s = max(1, round(ov))
        if rate is None:
            return t
        if self._mode == "per_second":
            # [Oe]'s limiter: count per wall-clock second, block the rest once full.
            w = math.floor(t)
            if w > self._win:
                self._win, self._count = w, 0
            if self._count >= per_s:
                self._win += 1
                self._count = 0
            self._count += 1
            return t if t >= self._win else float(self._win)
        p = self._last + self._gap(rate)
        p = max(p, t)  # no banking of unused time
        self._last = p
        return p


class _Bucket:
    """One group's throttle in one direction: a token bucket + FIFO (blk-throttle)."""

    __slots__ = ("cap", "gen", "last", "queue", "rate", "tokens")

    def __init__(self) -> None:
        self.rate: float | None = None
        self.cap = 1.0
        self.tokens = 1.0
        self.last = 0.0
        self.queue: deque[list[Any]] = deque()
        self.gen = 0

    def _refill(self, t: float) -> None:
        if self.rate is not None and t > self.last:
            self.tokens = min(self.cap, self.tokens + (t - self.last) * self.rate)
        self.last = t

    def take(self, t: float) -> bool:
        if self.rate is None:
            return True
        self._refill(t)
        if self.tokens >= 1.0 - 1e-12:
            self.tokens -= 1.0
            return True
        return False

    def ready_at(self, t: float) -> float:
        """When the head of the queue may pass (a token is available)."""
        if self.rate is None:
            return t
        self._refill(t)
        at = t + max(0.0, 1.0 - self.tokens) / self.rate
        if at <= t and self.tokens < 1.0 - 1e-12:
            # The missing fraction of a token takes less than the spacing of doubles at t
            # (2**-43 s at t = 512 s): t + wait rounds back to t, and a release scheduled
            # there would fail to take and reschedule itself at t for ever. The next
            # representable instant holds that fraction (wait < spacing).
            at = math.nextafter(t, math.inf)
        return at

    def set_rate(self, t: float, rate: float | None) -> None:
        self._refill(t)
        self.rate = rate
        if rate is not None:
            self.cap = max(1.0, rate * THROTTLE_SLICE_S)
            self.tokens = min(self.tokens, self.cap)
        self.gen += 1


# ---- the simulation -----------------------------------------------------------------------

def simulate(model: DiskModel, workloads: Workload | Sequence[Workload], duration_s: float,
             *, interval_s: float = 1.0, seed: int = 0, controller: Controller | None = None,
             limits: Mapping[str, IopsLimit] | None = None, device: str = "sim0",
             host: str = "lab", start: datetime = EPOCH,
             device_kind: str = "disk", batch: int = 8192) -> SimResult:
    """Run ``workloads`` on ``model`` for ``duration_s`` of virtual time.

    Args:
        model: a disk model (it is reset first).
        workloads: the I/O streams; each thread keeps one request outstanding.
        duration_s: virtual seconds to simulate (a whole number of ``interval_s``).
        interval_s: sampling interval of the counters (and the controller).
        seed: seed of every random draw: the same seed gives the same result.
        controller: called at the end of every interval (see the module docstring).
        limits: group limits in force from the start.
        device, host, device_kind, start: identity and time origin of the SampleFrame.
        batch: random draws made per refill (performance only; part of the random stream,
            so keep it fixed to reproduce a run).
    """
    wls = (workloads,) if isinstance(workloads, Workload) else tuple(workloads)
    if not wls:
        raise ValueError("no workload to simulate")
    if interval_s <= 0 or duration_s < interval_s:
        raise ValueError("need interval_s > 0 and duration_s >= interval_s")
    n_samples = round(duration_s / interval_s)
    if abs(n_samples * interval_s - duration_s) > 1e-9 * max(1.0, duration_s):
        raise ValueError("duration_s must be a whole number of intervals")
    eng = _Engine(model, wls, seed=seed, controller=controller, batch=batch)
    for g, lim in (limits or {}).items():
        eng.apply_limit(0.0, g, lim, initial=True)
    eng.run(n_samples, interval_s)
    return eng.result(n_samples, interval_s, device=device, host=host, start=start,
                      device_kind=device_kind)


class _Engine:
    """The event loop and its state (one simulation)."""

    def __init__(self, model: DiskModel, wls: tuple[Workload, ...], *, seed: int,
                 controller: Controller | None, batch: int) -> None:
        self.model = model
        model.reset()
        self.wls = wls
        self.seed = seed
        self.controller = controller
        root = np.random.default_rng(seed)
        # One independent stream per workload (and its limiter), so adding a workload
        # does not change the draws of the others.
        streams = root.spawn(2 * len(wls))
        cap = model.capacity_bytes
        self.draws = [_Draws(w, streams[2 * i], cap, batch) for i, w in enumerate(wls)]
        self.limiters: list[_Limiter | None] = [
            _Limiter(w, streams[2 * i + 1]) if w.capped else None
            for i, w in enumerate(wls)]
        # An uncapped workload gets its limiter (and this stream) only if a user-level
        # group cap is set on it, so its draws do not change the other streams.
        self._limiter_rngs = [streams[2 * i + 1] for i in range(len(wls))]
        self._user_capped: set[str] = set()
        self.group_names: list[str] = []
        for w in wls:
            if w.group not in self.group_names:
                self.group_names.append(w.group)
        self.group_index = {g: i for i, g in enumerate(self.group_names)}
        self.buckets = [[_Bucket(), _Bucket()] for _ in self.group_names]
        self.limits: dict[str, IopsLimit] = {g: IopsLimit() for g in self.group_names}
        self.limit_changes: list[tuple[float, str, IopsLimit]] = []
        # Threads: workload index, group index, sequential cursor.
        self.thread_w: list[int] = []
        self.thread_g: list[int] = []
        self.cursors: list[_SeqCursor | None] = []
        seq_rng = streams[0]
        for i, w in enumerate(wls):
            for _ in range(w.threads):
                self.thread_w.append(i)
                self.thread_g.append(self.group_index[w.group])
                if w.pattern == "sequential":
                    r = w.regions[int(seq_rng.choice(len(w.regions),
                                                     p=[x.weight for x in w.regions]))]
                    lo, hi = self.draws[i]._bounds(r.start, r.end)
                    a = w.align_bytes
                    pos = lo + int(seq_rng.random() * ((hi - lo) // a)) * a
                    self.cursors.append(_SeqCursor(lo, hi, pos))
                else:
                    self.cursors.append(None)
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.free_ch = list(range(model.channels - 1, -1, -1))
        self.devq: deque[list[Any]] = deque()
        # Device state (its counters are the sums of the groups': see _snapshot).
        self.inflight = 0
        self.busy_start = 0.0
        self.busy_acc = 0.0
        self.gacc = [[0] * _G_SLOTS for _ in self.group_names]
        self.snapshots: list[list[int]] = []
        self.gsnaps: list[list[list[int]]] = []
        self.queued_snaps: list[list[int]] = []
        self.limit_snaps: list[dict[str, IopsLimit]] = []
        self.sample_times: list[float] = []
        self._queued = bool(getattr(model, "queued", False))
        self._fast = None if self._queued else getattr(model, "serve", None)
        # The same object, typed as what it is when queued (submit/bind).
        self._qmodel = cast("QueuedDiskModel", model)
        if self._queued:
            self._qmodel.bind(self._model_at, self._model_done)

    # ---- limits -------------------------------------------------------------------------
    def apply_limit(self, t: float, group: str, lim: IopsLimit, *, initial: bool = False
                    ) -> None:
        if group not in self.group_index:
            raise ValueError(f"no workload is in group {group!r}; groups: "
                             f"{', '.join(self.group_names)}")
        gi = self.group_index[group]
        self.limits[group] = lim
        self.limit_changes.append((t, group, lim))
        if lim.iops is not None or group in self._user_capped:
            self._user_cap(t, group, lim.iops)
        for d, rate in ((0, lim.riops), (1, lim.wiops)):
            b = self.buckets[gi][d]
            b.set_rate(t, rate)
            if initial:
                b.tokens = b.cap
            if b.queue:
                self._push(b.ready_at(t), _RELEASE, (gi, d, b.gen))

    def _user_cap(self, t: float, group: str, iops: float | None) -> None:
        """Share a group's user-level cap among its workloads' issue limiters."""
        idx = [i for i, w in enumerate(self.wls) if w.group == group]
        rates = [self.wls[i].rate_at(t) for i in idx]
        known = [r for r in rates if r is not None]
        total = sum(known)
        for i, r in zip(idx, rates, strict=True):
            share = (r / total if r is not None and len(known) == len(rates) and total > 0
                     else 1.0 / len(idx))
            lim = self.limiters[i]
            if lim is None:
                if iops is None:
                    continue
                lim = _Limiter(self.wls[i], self._limiter_rngs[i])
                self.limiters[i] = lim
            lim.set_override(None if iops is None else iops * share)
        if iops is None:
            self._user_capped.discard(group)
        else:
            self._user_capped.add(group)

    # ---- event plumbing -----------------------------------------------------------------
    def _push(self, t: float, kind: int, x: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, x))

    def _model_at(self, t: float, fn: Callable[[float, Any], None], arg: Any) -> None:
        """A queued model's clock: run ``fn(t, arg)`` at ``t`` among the other events."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, _MODEL, (fn, arg)))

    def _model_done(self, req: Any, done: float) -> None:
        """A queued model knows when ``req`` completes."""
        self.seq += 1
        heapq.heappush(self.heap, (done, self.seq, _COMPLETE, req))

    def _dispatch(self, req: list[Any], ch: int, t: float) -> None:
        is_write = req[0]
        if self._queued:
            req[7] = ch
            self._qmodel.submit(req, is_write, req[1], req[2], t)
            return
        if self._fast is not None:
            done = self._fast(is_write, req[1], req[2], t)
        else:
            done = t + self.model.service_time(
                Request("write" if is_write else "read", req[1], req[2]),
                t, ch)
        req[7] = ch
        self.seq += 1
        heapq.heappush(self.heap, (done, self.seq, _COMPLETE, req))

    def _submit(self, req: list[Any], t: float) -> None:
        if self.inflight == 0:
            self.busy_start = t
        self.inflight += 1
        req[6] = t
        if self.free_ch:
            self._dispatch(req, self.free_ch.pop(), t)
        else:
            self.devq.append(req)

    def _issue(self, th: int, t: float) -> None:
        wi = self.thread_w[th]
        d = self.draws[wi]
        i = d.i
        if i >= d.n:
            d.refill()
            i = 0
        d.i = i + 1
        is_write = d.writes[i]
        size = d.sizes[i]
        cur = self.cursors[th]
        if cur is None:
            off = d.offs[i]
        else:
            if cur.pos + size > cur.hi:
                cur.pos = cur.lo
            off = cur.pos
            cur.pos += size
        gi = self.thread_g[th]
        self.gacc[gi][_G_ISSUED] += 1
        b = self.buckets[gi][1 if is_write else 0]
        if b.rate is None and not b.queue:
            # Unthrottled: straight to the device (the _submit/_dispatch path, inlined:
            # this is the simulator's hot path).
            if self.inflight == 0:
                self.busy_start = t
            self.inflight += 1
            if self.free_ch:
                ch = self.free_ch.pop()
                if self._queued:
                    self._qmodel.submit([is_write, off, size, gi, th, t, t, ch], is_write,
                                        off, size, t)
                    return
                if self._fast is not None:
                    done = self._fast(is_write, off, size, t)
                else:
                    done = t + self.model.service_time(
                        Request("write" if is_write else "read", off, size), t, ch)
                self.seq += 1
                heapq.heappush(self.heap, (done, self.seq, _COMPLETE,
                                           [is_write, off, size, gi, th, t, t, ch]))
            else:
                self.devq.append([is_write, off, size, gi, th, t, t, -1])
            return
        req: list[Any] = [is_write, off, size, gi, th, t, 0.0, -1]
        if not b.queue and b.take(t):
            self._submit(req, t)
        else:
            b.queue.append(req)
            if len(b.queue) == 1:
                self._push(b.ready_at(t), _RELEASE, (gi, 1 if is_write else 0, b.gen))

    def _thread_ready(self, th: int, t: float) -> None:
        lim = self.limiters[self.thread_w[th]]
        if lim is None:
            self._issue(th, t)
            return
        p = lim.next_permit(t)
        if p <= t:
            self._issue(th, t)
        else:
            self._push(p, _ISSUE, th)

    # ---- main loop ----------------------------------------------------------------------
    def run(self, n_samples: int, interval_s: float) -> None:
        self._snapshot(0.0)
        for th in range(len(self.thread_w)):
            self._thread_ready(th, 0.0)
        k = 1
        self._push(k * interval_s, _SAMPLE, k)
        heap = self.heap
        pop = heapq.heappop
        push = heapq.heappush
        gacc = self.gacc
        free_ch = self.free_ch
        devq = self.devq
        limiters = self.limiters
        thread_w = self.thread_w
        issue = self._issue
        # Device counters are the sums of the groups' (every request belongs to a group),
        # so a completion updates its group only (see _snapshot).
        while heap:
            t, _s, kind, x = pop(heap)
            if kind == _COMPLETE:
                req: list[Any] = x
                self.inflight -= 1
                if self.inflight == 0:
                    self.busy_acc += t - self.busy_start
                t_dev: float = req[6]
                g = gacc[req[3]]
                if req[0]:
                    g[_G_WIOS] += 1
                    g[_G_WBYTES] += req[2]
                    g[_G_WNS] += int((t - t_dev) * 1e9 + 0.5)
                else:
                    g[_G_RIOS] += 1
                    g[_G_RBYTES] += req[2]
                    g[_G_RNS] += int((t - t_dev) * 1e9 + 0.5)
                if t_dev != req[5]:
                    g[_G_THRNS] += int((t_dev - req[5]) * 1e9 + 0.5)
                if devq:
                    self._dispatch(devq.popleft(), req[7], t)
                else:
                    free_ch.append(req[7])
                th = req[4]
                lim = limiters[thread_w[th]]
                if lim is None:
                    issue(th, t)
                else:
                    p = lim.next_permit(t)
                    if p <= t:
                        issue(th, t)
                    else:
                        self.seq += 1
                        push(heap, (p, self.seq, _ISSUE, th))
            elif kind == _ISSUE:
                self._issue(x, t)
            elif kind == _MODEL:
                x[0](t, x[1])
            elif kind == _RELEASE:
                gi, d, gen = x
                b = self.buckets[gi][d]
                if gen != b.gen:
                    continue  # superseded by a limit change
                while b.queue and b.take(t):
                    self._submit(b.queue.popleft(), t)
                if b.queue:
                    self._push(b.ready_at(t), _RELEASE, (gi, d, b.gen))
            else:  # _SAMPLE
                self._snapshot(t)
                if self.controller is not None:
                    self._control(t, interval_s)
                if k >= n_samples:
                    break
                k += 1
                self._push(k * interval_s, _SAMPLE, k)

    def _snapshot(self, t: float) -> None:
        busy = self.busy_acc + (t - self.busy_start if self.inflight else 0.0)
        ga = self.gacc
        rd_ns = sum(g[_G_RNS] for g in ga)
        wr_ns = sum(g[_G_WNS] for g in ga)
        row = [0] * N_FIELDS
        row[IDX["rd_ios"]] = sum(g[_G_RIOS] for g in ga)
        row[IDX["rd_sectors"]] = sum(g[_G_RBYTES] for g in ga) >> 9
        row[IDX["rd_ticks_ms"]] = rd_ns // 1_000_000
        row[IDX["wr_ios"]] = sum(g[_G_WIOS] for g in ga)
        row[IDX["wr_sectors"]] = sum(g[_G_WBYTES] for g in ga) >> 9
        row[IDX["wr_ticks_ms"]] = wr_ns // 1_000_000
        row[IDX["in_flight"]] = self.inflight
        row[IDX["io_ticks_ms"]] = int(busy * 1000.0 + 1e-9)
        row[IDX["time_in_queue_ms"]] = (rd_ns + wr_ns) // 1_000_000
        self.snapshots.append(row)
        self.gsnaps.append([list(g) for g in self.gacc])
        self.queued_snaps.append([len(b[0].queue) + len(b[1].queue) for b in self.buckets])
        self.limit_snaps.append(dict(self.limits))
        self.sample_times.append(t)

    def _demand(self, name: str, t: float) -> float | None:
        total = 0.0
        for w in self.wls:
            if w.group == name:
                r = w.rate_at(t)
                if r is None:
                    return None
                total += r
        return total

    def _group_intervals(self, k: int, dt: float) -> dict[str, GroupInterval]:
        out: dict[str, GroupInterval] = {}
        t_end = self.sample_times[k]
        for gi, name in enumerate(self.group_names):
            a, b = self.gsnaps[k - 1][gi], self.gsnaps[k][gi]
            d = [y - x for x, y in zip(a, b, strict=True)]
            r, w = d[_G_RIOS], d[_G_WIOS]
            out[name] = GroupInterval(
                group=name, r_ios=r, w_ios=w, r_iops=r / dt, w_iops=w / dt,
                iops=(r + w) / dt, r_kBps=d[_G_RBYTES] / 1024.0 / dt,
                w_kBps=d[_G_WBYTES] / 1024.0 / dt,
                r_await_ms=d[_G_RNS] / 1e6 / r if r else 0.0,
                w_await_ms=d[_G_WNS] / 1e6 / w if w else 0.0,
                throttle_wait_ms=d[_G_THRNS] / 1e6 / (r + w) if r + w else 0.0,
                queued=self.queued_snaps[k][gi], issued=d[_G_ISSUED],
                demand_iops=self._demand(name, t_end - 1e-9))
        return out

    def _control(self, t: float, interval_s: float) -> None:
        k = len(self.snapshots) - 1
        prev = np.array([self.snapshots[k - 1]], dtype=np.int64)
        cur = np.array([self.snapshots[k]], dtype=np.int64)
        ones = np.ones_like(prev, dtype=np.bool_)
        deltas = counter_deltas(prev, cur, ones, ones)
        m = derive_metrics(deltas.delta, np.array([interval_s]))
        obs = IntervalObservation(
            t_end_s=t, interval_s=interval_s,
            device={name: float(v[0]) for name, v in m.items()},
            groups=self._group_intervals(k, interval_s), limits=dict(self.limit_snaps[k]))
        assert self.controller is not None  # noqa: S101 - checked by the caller
        change = self.controller(obs)
        if change:
            for g, lim in change.items():
                self.apply_limit(t, g, lim)

    # ---- output -------------------------------------------------------------------------
    def result(self, n_samples: int, interval_s: float, *, device: str, host: str,
               start: datetime, device_kind: str) -> SimResult:
        snaps = np.array(self.snapshots, dtype=np.int64)
        k = snaps.shape[0] - 1
        present = np.ones_like(snaps[1:], dtype=np.bool_)
        deltas = counter_deltas(snaps[:-1], snaps[1:], present, present)
        dt = np.full(k, interval_s, dtype=np.float64)
        metrics = derive_metrics(deltas.delta, dt)
        times = np.array(self.sample_times, dtype=np.float64)
        start_us = int(start.timestamp() * 1_000_000)
        ts_us = start_us + np.round(times[1:] * 1_000_000).astype(np.int64)
        cols: dict[str, object] = {
            "source": [SOURCE] * k, "host": [host] * k, "device": [device] * k,
            "device_kind": [device_kind] * k, "parent": [None] * k, "ts": ts_us,
            "interval_s": dt, "since_boot": np.zeros(k, dtype=np.bool_),
            "reset": deltas.reset,
        }
        for name in DERIVED_COLUMNS:
            cols[name] = metrics[name]
        df = pl.DataFrame(cols, nan_to_null=True, strict=False).with_columns(
            pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").cast(TS_DTYPE),
            pl.col("parent").cast(pl.String))
        frame = SampleFrame(df)
        rows: list[dict[str, object]] = []
        for kk in range(1, k + 1):
            gis = self._group_intervals(kk, interval_s)
            for name, gi in gis.items():
                lim = self.limit_snaps[kk][name]  # in force during interval kk
                rows.append({
                    "ts": start + timedelta(seconds=float(times[kk])),
                    "t_end_s": float(times[kk]), **{
                        f: getattr(gi, f) for f in GroupInterval.__dataclass_fields__},
                    "limit_riops": lim.riops, "limit_wiops": lim.wiops,
                    "limit_iops": lim.iops})
        groups = pl.DataFrame(rows, schema_overrides={
            "limit_riops": pl.Float64, "limit_wiops": pl.Float64, "limit_iops": pl.Float64,
            "demand_iops": pl.Float64})
        return SimResult(frame=frame, groups=groups, counters=snaps,
                         sample_times_s=times, limit_changes=self.limit_changes,
                         completed=int(snaps[-1, IDX["rd_ios"]] + snaps[-1, IDX["wr_ios"]]),
                         model=self.model.name, workloads=self.wls,
                         seed=self.seed)


# ---- guarantee policies ----------------------------------------------------------------

def policy_controller(policy: Any, decisions: list[Any] | None = None) -> Controller:
    """A controller that drives a guarantee policy (:mod:`iogauge.guarantee.policy`).

    Each interval's observation becomes the policy's ``Observation`` (device %util, r/s,
    w/s, await, aqu-sz; per group completed r/s and w/s and the offered load); the
    ``Decision``'s limits (whole IOPS, None = unlimited) become the groups' throttles. Every
    decision is appended to ``decisions`` when given (for plots and assertions).
    """
    # Imported here: the lab does not need the guarantee package unless a policy is driven.
    from iogauge.guarantee.policy import GroupObservation, Observation  # noqa: PLC0415

    def control(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        d = obs.device
        pobs = Observation(
            interval_s=obs.interval_s, util_pct=d["util_pct"], r_iops=d["r_iops"],
            w_iops=d["w_iops"], await_ms=d["await_ms"], aqu_sz=d["aqu_sz"],
            r_await_ms=d["r_await_ms"], w_await_ms=d["w_await_ms"],
            groups={g: GroupObservation(r_iops=gi.r_iops, w_iops=gi.w_iops,
                                        demand_iops=gi.demand_iops)
                    for g, gi in obs.groups.items()})
        decision = policy.step(pobs)
        if decisions is not None:
            decisions.append(decision)
        return {g: IopsLimit(riops=None if lim.riops is None else float(lim.riops),
                             wiops=None if lim.wiops is None else float(lim.wiops))
                for g, lim in decision.limits.items()}

    return control


# ---- convenience ------------------------------------------------------------------------

def _as_model(model_profile: object, capacity_bytes: int | None = None) -> DiskModel:
    if isinstance(model_profile, ModelProfile | str | Path):
        return build_model(model_profile, capacity_bytes=capacity_bytes)
    if capacity_bytes is not None:
        raise ValueError("capacity_bytes applies to a profile, not to a built model")
    return model_profile  # type: ignore[return-value]


def simulate_max_iops(model_profile: object, workload: Workload | Sequence[Workload] | str,
                      duration_s: float = 120.0, seed: int = 0, *,
                      capacity_bytes: int | None = None, warmup_frac: float = 0.1,
                      placement: str = "A", threads: int | None = None) -> float:
    """The most IOPS ``workload`` gets from the model: its rate caps removed, closed loop.

    Args:
        model_profile: a profile name, profile file path, ``ModelProfile`` or a built
            ``DiskModel``.
        workload: a Workload, several, or a seed-004 workload name (``file-share``,
            ``backup``) placed on ``placement`` with ``threads`` threads (default 10).
        duration_s: virtual seconds (whole seconds; sampled every second).
        seed: random seed.
        capacity_bytes: rescale a profile to this device size (the emulated device's).
        warmup_frac: leading share of the run left out (empty caches, queues filling).

    Returns:
        completed I/Os per second over the rest of the run -- what fio's IOPS over the
        same steady window reports for the same workload.
    """
    if isinstance(workload, str):
        wls: list[Workload] = oe_paper(workload, placement, threads=threads or 10)
    elif isinstance(workload, Workload):
        wls = [workload]
    else:
        wls = list(workload)
    wls = [w.with_rate(None) for w in wls]
    model = _as_model(model_profile, capacity_bytes)
    whole = max(1, round(duration_s))
    res = simulate(model, wls, float(whole), interval_s=1.0, seed=seed)
    return res.steady_iops(warmup_s=math.floor(whole * warmup_frac))


@dataclass
class SweepPoint:
    """One rate-capped run: what the cap asked for and what the device did.

    Attributes:
        rate_iops: the cap (None: uncapped).
        iops: completed I/Os per second (steady window).
        util_pct: %util over the steady window.
        await_ms: mean latency over the steady window.
        samples: per-interval (iops, util_pct) pairs of the steady window.
    """

    rate_iops: float | None
    iops: float
    util_pct: float
    await_ms: float
    samples: list[tuple[float, float]] = field(default_factory=list)


def run_point(model: DiskModel, wls: Sequence[Workload], duration_s: float, *,
              interval_s: float, seed: int, warmup_s: float) -> SweepPoint:
    """Simulate once and reduce to a :class:`SweepPoint` (rate = the caps' sum)."""
    res = simulate(model, wls, duration_s, interval_s=interval_s, seed=seed)
    # Frame row k covers (times[k], times[k + 1]]: keep the rows that end after the warm-up.
    steady = res.sample_times_s[1:] > warmup_s + 1e-9
    df = res.frame.df.filter(pl.Series(steady))
    c, tt = res.counters, res.sample_times_s
    k0 = int(np.searchsorted(tt, warmup_s - 1e-9))
    ios = (c[-1, IDX["rd_ios"]] + c[-1, IDX["wr_ios"]] - c[k0, IDX["rd_ios"]]
           - c[k0, IDX["wr_ios"]])
    ticks = (c[-1, IDX["rd_ticks_ms"]] + c[-1, IDX["wr_ticks_ms"]] - c[k0, IDX["rd_ticks_ms"]]
             - c[k0, IDX["wr_ticks_ms"]])
    rates = [w.rate_iops for w in wls]
    rate = None if any(r is None for r in rates) else float(sum(r for r in rates if r))
    return SweepPoint(rate_iops=rate, iops=res.steady_iops(warmup_s),
                      util_pct=res.steady_util_pct(warmup_s),
                      await_ms=float(ticks) / float(ios) if ios else 0.0,
                      samples=list(zip(df["iops"].to_list(), df["util_pct"].to_list(),
                                       strict=True)))
