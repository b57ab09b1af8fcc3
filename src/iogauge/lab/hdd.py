"""A single-spindle hard disk: seek by distance, rotation, zoned transfer, on-drive cache.

Service time of one command (Ruemmler & Wilkes, "An introduction to disk drive modeling",
IEEE Computer 1994, give the same decomposition)::

    command overhead + [wait for in-progress background destage]
      + seek(distance) + rotational wait + size / zone_rate(radius)

* **Seek** ``t(d) = track_to_track + (full_stroke - track_to_track) * sqrt(d)`` for a radial
  distance ``d`` in [0, 1] of the stroke (0 = same cylinder: no seek). For uniformly random
  seeks E[sqrt|x - y|] = 8/15, so the datasheet *average* seek is
  ``track_to_track + 8/15 * (full_stroke - track_to_track)``; the three published figures
  (single-track, average, full-stroke) are therefore checked against each other by
  :attr:`HddParams.avg_seek_ms`. Writes settle longer (datasheets list write seeks ~1 ms
  slower than reads); the extra is added to every write that moves the head.
* **Rotation** is tracked, not drawn at random: the platter angle at time t is
  ``frac(t * rpm / 60)`` and the target sector's angle is its position along its track. A
  random request therefore waits U(0, 1 revolution) on average (half a turn = the datasheet
  "average latency"), while a request that continues where the previous one ended waits
  nothing -- and one that arrives a little late waits almost a whole turn (a "missed
  revolution"), which is what read-ahead exists to hide.
* **Zoned recording**: linear bit density is constant, so bytes per track grow with the
  radius r and the media rate is ``outer_rate * r / r_outer``; the LBA-to-radius map follows
  from the area: the first fraction f of the capacity lies between r_outer and
  ``r = r_outer * sqrt(1 - f * (1 - k**2))`` with ``k = inner_rate / outer_rate``. The rate is
  quantised into ``zones`` equal-width bands (Deskstar 7K500: 30 zones).
* **On-drive cache** (optional, per profile):
  - *read-ahead*: after a read the drive keeps streaming the following sectors into a
    cache segment while no other command needs the head, up to ``read_ahead_KiB``; a read
    of data already streamed is served at interface speed, one of data the stream is about
    to reach completes when the stream gets there. ``cache_segments`` older streams are
    kept (LRU) for re-reads.
  - *write-back* (WCE): a write completes once in the buffer; the drive writes dirty data
    back once it has been idle for ``destage_idle_ms`` (background work waits for an idle
    spell) and then until the next command arrives, choosing among the
    ``DESTAGE_CANDIDATES`` entries each side of the head (by offset) the one it reaches
    soonest, seek plus rotation (drives order the writes they hold). A command arriving
    while such a destage is in progress waits for it (no pre-emption), and a write that
    finds the buffer full waits while the drive writes back, the same way, down to
    ``destage_low_water_pct`` of the buffer (100: only until the write fits). That is the
    high/low-water-mark destaging that Nam & Park ("An adaptive high-low water mark
    destage algorithm for cached RAID5", PRDC 2002, doi:10.1109/PRDC.2002.1185636) call
    widely used in cached RAID-5 controllers; no drive datasheet states a policy, so the
    mark is a profile's assumption. Work hidden in idle time at low load
    thus becomes visible as the load rises -- one reason %util stops growing linearly
    with IOPS ([Oe] §1 names "the effect of the cache built into the storage
    device"); under [Oe]'s per-second bursts this puts the knee where the idle part
    of each second no longer holds the write-back.
* **Command queueing** (optional, ``ncq_depth`` > 1): SATA Native Command Queuing lets the
  host keep up to 32 commands outstanding in the drive, each under a tag 0-31 (Intel &
  Seagate, "Serial ATA Native Command Queuing", July 2003 whitepaper; Seagate Barracuda
  7200.10 manual reproduces it: "Tag values can be between 0 and 31"), and the drive
  executes them in the order it chooses: *Rotational Position Ordering*, "commands are
  executed in an order that results in the shortest overall access time, the combined seek
  and rotational latency time" (same whitepaper). So when the drive finishes a command it
  starts, among the oldest ``ncq_depth`` commands it holds, the one whose data it reaches
  soonest (:meth:`HddModel.positioning_s`: seek + rotation from the head's position after
  the command overhead; a read the read-ahead cache holds and a write the write buffer
  takes cost no positioning). Pure shortest-positioning-time-first starves a command far
  from where the others cluster, so drives age their queue (Worthington, Ganger & Patt,
  "Scheduling algorithms for modern disk drives", SIGMETRICS 1994: aged SPTF; US patent
  6,965,965, "Dynamic response shaping for command aging", claim 3: the oldest queued
  command is selected next once its age exceeds a minimum age threshold): here the oldest
  command goes first once it has waited ``ncq_age_limit_ms``. A command therefore never
  waits longer than the age limit plus the services of the command in progress and of the
  older ones still waiting when it became overdue. ``ncq_age_limit_ms = 0`` gives
  first-come first-served service inside the queue (a control for experiments).

  A queued drive is *event driven*: which command runs next is decided when the previous
  one ends, from what has arrived by then, so a completion time is only known once its
  command starts. The clock that drives it (the simulator's event heap in virtual time,
  the emulated device's timer in real time) is handed over with :meth:`HddModel.bind`;
  :meth:`HddModel.submit` queues a host command, and the clock's ``complete(token,
  done_s)`` is called as soon as the command starts, with its completion time.
  ``ncq_depth = 1`` (the default) is no queueing: commands are served in arrival order
  through :meth:`HddModel.serve`, exactly as before, so a queue depth > 1 raises latency
  but not IOPS.

Times inside are seconds, sizes bytes, rates bytes/s; profile parameters carry their units
in their names (``_ms``, ``_MBps`` with 1 MB = 10**6 bytes as datasheets use, ``_KiB``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iogauge.lab.model import Request

#: E[sqrt(|x - y|)] for x, y independent uniform on [0, 1]: the average-seek weight.
AVG_SQRT_DISTANCE = 8.0 / 15.0
#: Most commands a SATA drive can hold: NCQ tags are 0..31 (Intel & Seagate NCQ whitepaper,
#: 2003; SCSI TCQ allows more, but no modelled drive is SCSI).
MAX_NCQ_DEPTH = 32
#: Default anti-starvation age limit (ms). Assumed: drives keep theirs in firmware (a
#: mode-page byte in US 6,965,965) and publish no value. It must exceed the ordinary wait
#: at a full queue, or aging takes over and the queue runs first come, first served: 4 KiB
#: random reads on hdd-7200-ncq in the simulator give 78.6 IOPS at QD1, and at QD32 181
#: with no aging, 168 with 500 ms (mean wait ~190 ms), but 78.6 again with 250 or 100 ms.
#: 500 ms keeps the positional gain ("nearly 100 %" more IOPS with deep queues for SATA
#: drives: Wikipedia, "IOPS") and bounds the tail.
DEFAULT_NCQ_AGE_LIMIT_MS = 500.0

#: An event handler of a queued model: called with the event's time and its argument.
EventFn = Callable[[float, Any], None]
#: The clock a queued model is bound to: ``at(t, fn, arg)`` calls ``fn(t, arg)`` at time t
#: (after everything scheduled earlier; events at equal times in the order scheduled).
At = Callable[[float, EventFn, Any], None]
#: ``known(tag, done_s)``: the command ``tag`` has started and completes at ``done_s``.
Known = Callable[[Any, float], None]


def unbound_at(t: float, fn: EventFn, arg: Any) -> None:
    """The clock of a queued model before :meth:`HddModel.bind`: refuses to schedule."""
    raise RuntimeError("a queued disk model needs a clock: call bind() first")


def unbound_known(tag: Any, done_s: float) -> None:
    """The completion callback before :meth:`HddModel.bind`: refuses."""
    raise RuntimeError("a queued disk model needs a clock: call bind() first")


class QueuedCommand:
    """One command held in a queued drive (NCQ).

    Attributes:
        arrival_s: when it reached the drive.
        is_write, offset, size: the command (bytes).
        tag: the owner's handle, passed back to ``known``.
        known: called with (tag, done_s) when the command starts.
        cyl: radial position of its first sector in [0, 1].
        turns: its first sector's angle in revolutions (offset / bytes per track; the
            fraction is the angle), for the positioning estimate.
        start_s, done_s: when it started and completes (-1 until it starts).
    """

    __slots__ = ("arrival_s", "cyl", "done_s", "is_write", "known", "offset", "size",
                 "start_s", "tag", "turns")

    def __init__(self, arrival_s: float, is_write: bool, offset: int, size: int, tag: Any,
                 known: Known, cyl: float, turns: float) -> None:
        self.arrival_s = arrival_s
        self.is_write = is_write
        self.offset = offset
        self.size = size
        self.tag = tag
        self.known = known
        self.cyl = cyl
        self.turns = turns
        self.start_s = -1.0
        self.done_s = -1.0


@dataclass(frozen=True)
class HddParams:
    """Parameters of one spindle (a profile's ``[hdd]`` table).

    Attributes:
        capacity_bytes: user capacity.
        rpm: spindle speed (rev/min).
        track_to_track_ms: single-track seek incl. settling (read).
        full_stroke_ms: full-stroke seek (read).
        write_settle_ms: extra settling of a write seek (write avg seek - read avg seek).
        outer_MBps: sustained media rate at the outer diameter (1 MB = 10**6 bytes).
        inner_MBps: sustained media rate at the inner diameter.
        zones: number of recording zones (>= 1).
        cylinders: tracks per surface; two offsets closer than one cylinder need no seek.
        command_overhead_ms: controller/firmware time per command.
        interface_MBps: host link rate, for data served from the buffer (SATA 3 Gb/s: 300).
        read_ahead_KiB: read-ahead beyond the last read (0: off).
        cache_segments: frozen read-ahead segments kept besides the active one.
        write_cache_KiB: write-back buffer (0: write cache disabled, the default).
        destage_idle_ms: idle time after the last host command before the drive starts
            writing its dirty buffer back (background work waits for an idle spell).
        destage_low_water_pct: when a write finds the write-back buffer full, the drive
            writes back until no more than this share of it is dirty (a low-water mark), the
            write waiting meanwhile; 100 = only until the write fits.
        ncq_depth: commands the drive holds and reorders (SATA NCQ: up to 32 tags); 1 = no
            queueing, commands served in arrival order.
        ncq_age_limit_ms: wait after which the oldest queued command goes next whatever its
            position (anti-starvation aging; 0 = first come, first served).
    """

    capacity_bytes: int
    rpm: float
    track_to_track_ms: float
    full_stroke_ms: float
    write_settle_ms: float
    outer_MBps: float
    inner_MBps: float
    zones: int
    cylinders: int
    command_overhead_ms: float
    interface_MBps: float
    read_ahead_KiB: int = 0
    cache_segments: int = 0
    write_cache_KiB: int = 0
    destage_idle_ms: float = 0.0
    destage_low_water_pct: float = 100.0
    ncq_depth: int = 1
    ncq_age_limit_ms: float = DEFAULT_NCQ_AGE_LIMIT_MS

    def __post_init__(self) -> None:
        checks = (
            (self.capacity_bytes > 0, "capacity_bytes must be > 0"),
            (self.rpm > 0, "rpm must be > 0"),
            (0 <= self.track_to_track_ms <= self.full_stroke_ms,
             "need 0 <= track_to_track_ms <= full_stroke_ms"),
            (self.write_settle_ms >= 0, "write_settle_ms must be >= 0"),
            (0 < self.inner_MBps <= self.outer_MBps, "need 0 < inner_MBps <= outer_MBps"),
            (self.zones >= 1, "zones must be >= 1"),
            (self.cylinders >= 1, "cylinders must be >= 1"),
            (self.command_overhead_ms >= 0, "command_overhead_ms must be >= 0"),
            (self.interface_MBps > 0, "interface_MBps must be > 0"),
            (self.read_ahead_KiB >= 0, "read_ahead_KiB must be >= 0"),
            (self.cache_segments >= 0, "cache_segments must be >= 0"),
            (self.write_cache_KiB >= 0, "write_cache_KiB must be >= 0"),
            (self.destage_idle_ms >= 0, "destage_idle_ms must be >= 0"),
            (0 <= self.destage_low_water_pct <= 100,
             "destage_low_water_pct must be in 0..100"),
            (1 <= self.ncq_depth <= MAX_NCQ_DEPTH,
             f"ncq_depth must be in 1..{MAX_NCQ_DEPTH} (SATA NCQ has 32 tags)"),
            (self.ncq_age_limit_ms >= 0, "ncq_age_limit_ms must be >= 0"),
        )
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)

    @property
    def revolution_ms(self) -> float:
        """One revolution; the datasheet "average latency" is half of it."""
        return 60_000.0 / self.rpm

    @property
    def avg_seek_ms(self) -> float:
        """Average read seek over uniformly random pairs of cylinders (datasheet definition)."""
        return self.track_to_track_ms + AVG_SQRT_DISTANCE * (
            self.full_stroke_ms - self.track_to_track_ms)


#: Dirty entries (each side of the head, by offset) a destage chooses among by positioning
#: time: drives reorder the commands they hold (rotational position ordering).
DESTAGE_CANDIDATES = 3


class HddModel:
    """A :class:`~iogauge.lab.model.DiskModel` of one spindle (``channels`` = 1).

    Besides the protocol, :meth:`serve` gives the completion time directly, for RAID
    controllers that drive member disks and for the simulator; both share all state.
    With ``ncq_depth`` > 1 the drive is ``queued``: its clock drives it through
    :meth:`bind`, :meth:`submit` / :meth:`enqueue` and the events it schedules (module
    docstring); ``channels`` is then the queue depth (the tags the host may use).

    Attributes:
        head_cyl: radial head position in [0, 1].
        free_at_s: end of the last command or destage the drive started.
        queued: whether the drive reorders a queue of commands (``ncq_depth`` > 1).
        media_ops, cache_hits, destages: counters for tests and reports.
        ncq_reordered: queued commands started ahead of an older one.
        ncq_aged: starts of the oldest command because it had waited the age limit while
            others were queued too.
    """

    __slots__ = (
        "_age_s", "_area_coef", "_at", "_busy_until", "_capacity", "_complete", "_cyl_eps",
        "_depth", "_dirty", "_dirty_bytes", "_head_off", "_idle_s", "_iface_Bps",
        "_inner_Bps", "_last_Bps", "_last_host_done", "_low_water_bytes", "_one_minus_k",
        "_outer_Bps", "_overhead_s", "_queue", "_ra_Bps", "_ra_base", "_ra_bytes", "_ra_limit",
        "_ra_lo", "_ra_t0", "_rev_s", "_rps", "_seek_span_s", "_segments", "_segments_max",
        "_t2t_s", "_wc_bytes", "_wsettle_s", "_zone_Bps", "_zone_track", "_zones", "cache_hits",
        "capacity_bytes", "channels", "destages", "free_at_s", "head_cyl", "media_ops",
        "name", "ncq_aged", "ncq_reordered", "params", "queued",
    )

    def __init__(self, params: HddParams, name: str = "hdd") -> None:
        self.name = name
        self.params = params
        self.queued = params.ncq_depth > 1
        self._depth = params.ncq_depth
        self._age_s = params.ncq_age_limit_ms / 1000.0
        self.channels = params.ncq_depth
        self._at: At = unbound_at
        self._complete: Known = unbound_known
        self.capacity_bytes = params.capacity_bytes
        p = params
        self._capacity = float(p.capacity_bytes)
        self._rev_s = 60.0 / p.rpm
        self._rps = p.rpm / 60.0
        self._t2t_s = p.track_to_track_ms / 1000.0
        self._seek_span_s = (p.full_stroke_ms - p.track_to_track_ms) / 1000.0
        self._wsettle_s = p.write_settle_ms / 1000.0
        self._overhead_s = p.command_overhead_ms / 1000.0
        self._iface_Bps = p.interface_MBps * 1e6
        self._outer_Bps = p.outer_MBps * 1e6
        self._inner_Bps = p.inner_MBps * 1e6
        k = p.inner_MBps / p.outer_MBps
        self._one_minus_k = 1.0 - k
        self._area_coef = 1.0 - k * k
        self._zones = p.zones
        self._cyl_eps = 1.0 / p.cylinders
        self._ra_bytes = p.read_ahead_KiB * 1024
        self._segments_max = p.cache_segments
        self._wc_bytes = p.write_cache_KiB * 1024
        self._low_water_bytes = int(self._wc_bytes * p.destage_low_water_pct / 100.0)
        self._idle_s = p.destage_idle_ms / 1000.0
        # Zone rates: zone 0 at the outer diameter, the last at the inner one.
        if p.zones == 1:
            self._zone_Bps = [self._outer_Bps]
        else:
            step = (self._outer_Bps - self._inner_Bps) / (p.zones - 1)
            self._zone_Bps = [self._outer_Bps - z * step for z in range(p.zones)]
        self._zone_track = [r * self._rev_s for r in self._zone_Bps]  # bytes per track
        self.reset()

    # ---- state ------------------------------------------------------------------------
    def reset(self) -> None:
        """Head parked at the outer edge, caches empty, no background work."""
        self.head_cyl = 0.0
        self.free_at_s = 0.0
        self._head_off = 0
        self._last_host_done = 0.0
        self._last_Bps = self._outer_Bps  # media rate of the last media access
        # Active read-ahead stream: served range [ra_lo, ...), streaming from ra_base at
        # ra_t0 with rate ra_Bps until ra_limit. ra_lo < 0: no active stream.
        self._ra_lo = -1
        self._ra_base = 0
        self._ra_t0 = 0.0
        self._ra_Bps = 1.0
        self._ra_limit = 0
        self._segments: list[tuple[int, int]] = []  # LRU order, most recent last
        self._dirty: list[tuple[int, int]] = []  # (offset, size), sorted by offset
        self._dirty_bytes = 0
        self.media_ops = 0
        self.cache_hits = 0
        self.destages = 0
        # Command queue (queued drives): commands in arrival order, and when the command in
        # service completes. Invariant: a queue that is not empty has a wake-up event
        # scheduled at _busy_until or later. A bound clock stays bound.
        self._queue: list[QueuedCommand] = []
        self._busy_until = -math.inf
        self.ncq_reordered = 0
        self.ncq_aged = 0

    # ---- geometry ---------------------------------------------------------------------
    def cylinder(self, offset_bytes: float) -> float:
        """Radial position in [0, 1] (0 = outer edge) of a byte offset (zoned layout)."""
        f = offset_bytes / self._capacity
        f = 0.0 if f < 0.0 else (1.0 if f > 1.0 else f)
        if self._one_minus_k <= 0.0:
            return f
        return (1.0 - math.sqrt(1.0 - f * self._area_coef)) / self._one_minus_k

    def media_rate_Bps(self, offset_bytes: float) -> float:  # noqa: N802 - unit: bytes/s
        """Sustained media rate (bytes/s) of the zone holding ``offset_bytes``."""
        z = int(self.cylinder(offset_bytes) * self._zones)
        return self._zone_Bps[z if z < self._zones else self._zones - 1]

    def seek_s(self, distance: float, is_write: bool = False) -> float:
        """Seek time (s) over a radial distance in [0, 1] of the stroke."""
        if distance < self._cyl_eps:
            return 0.0
        t = self._t2t_s + self._seek_span_s * math.sqrt(distance)
        return t + self._wsettle_s if is_write else t

    # ---- protocol ---------------------------------------------------------------------
    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        """Seconds the drive is occupied by ``req`` if the dispatcher starts it at ``start_s``."""
        return self.serve(req.op == "write", req.offset_bytes, req.size_bytes,
                          start_s) - start_s

    def serve(self, is_write: bool, offset: int, size: int, t: float) -> float:
        """Serve one command that reaches the drive at ``t``; return its completion time."""
        if self._dirty and self._last_host_done + self._idle_s < t:
            self._destage_until(t)
        if self.free_at_s > t:  # noqa: PLR1730 - an if is cheaper than max() (hot path)
            t = self.free_at_s  # a background destage was in progress: no pre-emption
        t0 = t + self._overhead_s
        if is_write:
            if self._wc_bytes and size <= self._wc_bytes:
                done = self._buffered_write(offset, size, t0)
            else:
                if self._ra_lo >= 0:
                    self._stop_stream(t)
                done = self._media_op(True, offset, size, t0)
        else:
            done = self._read(offset, size, t0, t)
        self.free_at_s = done
        self._last_host_done = done
        return done

    # ---- command queueing (NCQ) ---------------------------------------------------------
    def bind(self, at: At, complete: Known) -> None:
        """Hand a queued drive its clock: ``at`` schedules its events, ``complete(token,
        done_s)`` learns when each host command (:meth:`submit`) completes."""
        self._at = at
        self._complete = complete

    def submit(self, token: Any, is_write: bool, offset: int, size: int, t: float) -> None:
        """A host command reaches the drive at ``t`` (now, on the bound clock)."""
        self.enqueue(is_write, offset, size, t, token, self._complete)

    def enqueue(self, is_write: bool, offset: int, size: int, t: float, tag: Any,
                known: Known) -> None:
        """A command reaches the drive at ``t`` (now); ``known(tag, done_s)`` is called when
        it starts. RAID controllers queue member commands this way."""
        q = self._queue
        if not q and self._busy_until <= t:
            # Idle drive: nothing to choose from, the command starts now (_start_next
            # without the queue: the common case of a lightly loaded drive).
            done = self.serve(is_write, offset, size, t)
            self._busy_until = done
            known(tag, done)
            return
        # Geometry of the target, computed once (the positioning estimate of every later
        # choice uses it): the same arithmetic as _arrival.
        f = offset / self._capacity
        if self._one_minus_k > 0.0:
            cyl = (1.0 - math.sqrt(1.0 - f * self._area_coef)) / self._one_minus_k
        else:
            cyl = f
        z = int(cyl * self._zones)
        turns = offset / self._zone_track[z if z < self._zones else self._zones - 1]
        q.append(QueuedCommand(t, is_write, offset, size, tag, known, cyl, turns))
        if len(q) == 1:
            # The drive is busy: choose the next command when it is done. (Only a queue
            # that is not empty needs that event: most commands of a lightly loaded drive
            # start at once and schedule nothing.)
            self._at(self._busy_until, self._wake, None)

    @property
    def queue_length(self) -> int:
        """Commands waiting in the drive (the one in service not counted)."""
        return len(self._queue)

    def positioning_s(self, is_write: bool, offset: int, size: int, t: float) -> float:
        """Seconds from ``t`` (the end of the command overhead) until the drive could
        transfer this command's data: seek plus rotation from the head's current position,
        0 for a read the cache holds or a write the write buffer takes."""
        if is_write:
            wc = self._wc_bytes
            if wc and size <= wc and self._dirty_bytes + size <= wc:
                return 0.0
        elif self._cached(offset, size, t):
            return 0.0
        return self._arrival(is_write, offset, t) - t

    def _cached(self, offset: int, size: int, t: float) -> bool:
        """Whether a read of [offset, offset + size) is served from the cache at ``t``
        (the same tests as :meth:`_read`)."""
        lo = self._ra_lo
        if lo >= 0 and lo <= offset <= self._stream_avail(t):
            return True
        end = offset + size
        return any(seg[0] <= offset and end <= seg[1] for seg in self._segments)

    def _choose(self, t: float) -> int:
        """Index in the queue of the command to start at ``t``: the oldest once it has
        waited the age limit, else the one of the oldest ``ncq_depth`` that arrived before
        ``t`` reached soonest (:meth:`positioning_s`; ties: the older)."""
        q = self._queue
        n = len(q)
        # The drive chooses the instant its command ends: one arriving at that very instant
        # (the host re-issuing on the completion) is not yet there, unless it is alone.
        while n > 1 and q[n - 1].arrival_s >= t:
            n -= 1
        if n == 1:
            return 0
        if t - q[0].arrival_s >= self._age_s:
            self.ncq_aged += 1
            return 0
        n = min(n, self._depth)
        free = self.free_at_s
        t0 = (free if free > t else t) + self._overhead_s
        # positioning_s for each candidate, inlined with the constants in locals and the
        # targets' geometry precomputed (this loop is the queued drive's hot path).
        head, eps, t2t, span = self.head_cyl, self._cyl_eps, self._t2t_s, self._seek_span_s
        settle, rps, rev, sqrt = self._wsettle_s, self._rps, self._rev_s, math.sqrt
        wc = self._wc_bytes
        room = wc - self._dirty_bytes
        ra_lo = self._ra_lo
        avail = self._stream_avail(t0) if ra_lo >= 0 else -1
        segs = self._segments
        best_i = 0
        best = math.inf
        for j in range(n):
            c = q[j]
            if c.is_write:
                if wc and c.size <= wc and c.size <= room:
                    best_i = j  # no positioning: nothing can be sooner
                    break
            else:
                off = c.offset
                if ra_lo >= 0 and ra_lo <= off <= avail:
                    best_i = j
                    break
                if segs:
                    end = off + c.size
                    hit = False
                    for seg in segs:
                        if seg[0] <= off and end <= seg[1]:
                            hit = True
                            break
                    if hit:
                        best_i = j
                        break
            dist = c.cyl - head if c.cyl > head else head - c.cyl
            ta = t0
            if dist >= eps:
                ta += t2t + span * sqrt(dist)
                if c.is_write:
                    ta += settle
            ta += ((c.turns - ta * rps) % 1.0) * rev
            if ta - t0 < best:
                best, best_i = ta - t0, j
        if best_i:
            self.ncq_reordered += 1
        return best_i

    def _start_next(self, t: float) -> None:
        q = self._queue
        cmd = q.pop(self._choose(t))
        cmd.start_s = t
        done = self.serve(cmd.is_write, cmd.offset, cmd.size, t)
        cmd.done_s = done
        self._busy_until = done
        if q:
            # Choose the next one when this one is done. Scheduled before the owner hears
            # of the completion time, so anything the owner schedules for that instant (a
            # RAID-5 write's second phase) reaches the drive after it has chosen.
            self._at(done, self._wake, None)
        cmd.known(cmd.tag, done)

    def _wake(self, t: float, arg: Any) -> None:
        """Event: the command in service is done and others are queued."""
        if self._queue:
            self._start_next(t)

    # ---- reads ------------------------------------------------------------------------
    def _read(self, offset: int, size: int, t0: float, t: float) -> float:
        end = offset + size
        lo = self._ra_lo
        if lo >= 0:
            # What the active stream has read by now (nearest byte: the stream's own
            # completion times must count as having reached the data).
            if t <= self._ra_t0:
                avail = self._ra_base
            else:
                avail = self._ra_base + int((t - self._ra_t0) * self._ra_Bps + 0.5)
                avail = min(avail, self._ra_limit)
            if lo <= offset <= avail:
                self.cache_hits += 1
                self._extend_stream(end, t)
                if end <= avail:
                    return t0 + size / self._iface_Bps
                # The stream will reach `end`: the head keeps streaming, no repositioning.
                reach = self._ra_t0 + (end - self._ra_base) / self._ra_Bps
                buffered = t0 + size / self._iface_Bps
                return reach if reach > buffered else buffered
            # The head is needed elsewhere: freeze the stream into an LRU segment.
            self._ra_lo = -1
            if self._segments_max:
                segs = self._segments
                for seg in segs:
                    if seg[0] <= offset and end <= seg[1]:
                        self.cache_hits += 1
                        segs.remove(seg)
                        segs.append(seg)
                        segs.append((lo, avail))
                        if len(segs) > self._segments_max:
                            del segs[0]
                        return t0 + size / self._iface_Bps
                segs.append((lo, avail))
                if len(segs) > self._segments_max:
                    del segs[0]
        elif self._segments:
            segs = self._segments
            for seg in segs:
                if seg[0] <= offset and end <= seg[1]:
                    self.cache_hits += 1
                    segs.remove(seg)
                    segs.append(seg)
                    return t0 + size / self._iface_Bps
        done = self._media_op(False, offset, size, t0)
        if self._ra_bytes:
            self._ra_lo = offset
            self._ra_base = end
            self._ra_t0 = done
            self._ra_Bps = self._last_Bps
            limit = end + self._ra_bytes
            self._ra_limit = limit if limit < self.capacity_bytes else self.capacity_bytes
        return done

    def _stream_avail(self, t: float) -> int:
        """End of the data the active stream has read by time ``t``."""
        if t <= self._ra_t0:
            return self._ra_base
        # Nearest byte: the stream's own completion times must count as having reached it.
        got = self._ra_base + int((t - self._ra_t0) * self._ra_Bps + 0.5)
        return got if got < self._ra_limit else self._ra_limit

    def _extend_stream(self, end: int, t: float) -> None:
        """A sequential hit: read further ahead (restarting a stream that had stopped)."""
        new_limit = min(end + self._ra_bytes, self.capacity_bytes)
        if new_limit <= self._ra_limit:
            return
        if t > self._ra_t0 and self._stream_avail(t) >= self._ra_limit:
            # The stream had stopped at its limit; the head waits for that sector to come
            # round again before it can go on.
            self._ra_base = self._ra_limit
            self._ra_t0 = t + self._rotational_wait(self._ra_base, t)
        self._ra_limit = new_limit

    def _stop_stream(self, t: float) -> None:
        """The head is needed elsewhere: freeze the active stream into an LRU segment."""
        if self._segments_max:
            self._segments.append((self._ra_lo, self._stream_avail(t)))
            if len(self._segments) > self._segments_max:
                del self._segments[0]
        self._ra_lo = -1

    # ---- writes -----------------------------------------------------------------------
    def _buffered_write(self, offset: int, size: int, t0: float) -> float:
        """Write-back: complete once buffered; wait for destages if the buffer is full."""
        ready = t0
        if self._dirty_bytes + size > self._wc_bytes:
            # Full: write back down to the low-water mark (at least until this write fits),
            # one destage after another, while the write waits.
            target = self._wc_bytes - size
            if self._low_water_bytes < target:  # noqa: PLR1730 - hot path
                target = self._low_water_bytes
            while self._dirty and self._dirty_bytes > target:
                ready = self._destage_one(max(ready, self.free_at_s))
        dirty = self._dirty
        i = bisect.bisect_left(dirty, (offset, 0))
        if i < len(dirty) and dirty[i][0] == offset:
            # Rewrite of data still dirty: the buffer entry is updated in place.
            old = dirty[i][1]
            if size > old:
                dirty[i] = (offset, size)
                self._dirty_bytes += size - old
        else:
            dirty.insert(i, (offset, size))
            self._dirty_bytes += size
        return ready + size / self._iface_Bps

    def _destage_until(self, t: float) -> None:
        """Write dirty data back in the idle spell before ``t`` (lazily evaluated): from
        ``destage_idle_ms`` after the last host command, one destage after another."""
        start = self._last_host_done + self._idle_s
        if self.free_at_s > start:  # noqa: PLR1730 - hot path
            start = self.free_at_s
        while self._dirty and start < t:
            start = self._destage_one(start)

    def _destage_one(self, start: float) -> float:
        """Write back one dirty entry: of the few nearest the head (by offset), the one
        reached soonest (seek + rotation), as drives order the commands they hold."""
        dirty = self._dirty
        n = len(dirty)
        i = bisect.bisect_left(dirty, (self._head_off, 0))
        best_i = -1
        best_t = math.inf
        lo = i - DESTAGE_CANDIDATES if i > DESTAGE_CANDIDATES else 0
        hi = i + DESTAGE_CANDIDATES if i + DESTAGE_CANDIDATES < n else n
        # _arrival(True, offset, start) for each candidate, inlined with the constants in
        # locals (this loop is a third of a write-back RAID's simulation time).
        cap, omk, area = self._capacity, self._one_minus_k, self._area_coef
        head, eps, t2t, span = self.head_cyl, self._cyl_eps, self._t2t_s, self._seek_span_s
        settle, zones, track, rps = self._wsettle_s, self._zones, self._zone_track, self._rps
        rev, sqrt = self._rev_s, math.sqrt
        for j in range(lo, hi):
            off = dirty[j][0]
            cyl = (1.0 - sqrt(1.0 - off / cap * area)) / omk if omk > 0.0 else off / cap
            dist = cyl - head if cyl > head else head - cyl
            ta = start
            if dist >= eps:
                ta += t2t + span * sqrt(dist)
                ta += settle
            z = int(cyl * zones)
            ta += ((off / track[z if z < zones else zones - 1] - ta * rps) % 1.0) * rev
            if ta < best_t:
                best_t, best_i = ta, j
        off, size = dirty.pop(best_i)
        self._dirty_bytes -= size
        if self._ra_lo >= 0:
            self._stop_stream(start)
        done = self._media_op(True, off, size, start)
        self.free_at_s = done
        self.destages += 1
        return done

    # ---- mechanics --------------------------------------------------------------------
    def _rotational_wait(self, offset: int, t: float) -> float:
        track = self.media_rate_Bps(offset) * self._rev_s
        theta = (offset / track) % 1.0
        phi = (t * self._rps) % 1.0
        return ((theta - phi) % 1.0) * self._rev_s

    def _arrival(self, is_write: bool, offset: int, t: float) -> float:
        """When the head would be over ``offset``'s first sector (seek + rotation)."""
        f = offset / self._capacity
        if self._one_minus_k > 0.0:
            cyl = (1.0 - math.sqrt(1.0 - f * self._area_coef)) / self._one_minus_k
        else:
            cyl = f
        dist = cyl - self.head_cyl
        if dist < 0.0:
            dist = -dist
        if dist >= self._cyl_eps:
            t += self._t2t_s + self._seek_span_s * math.sqrt(dist)
            if is_write:
                t += self._wsettle_s
        z = int(cyl * self._zones)
        track = self._zone_track[z if z < self._zones else self._zones - 1]
        return t + (((offset / track) - t * self._rps) % 1.0) * self._rev_s

    def _media_op(self, is_write: bool, offset: int, size: int, t: float) -> float:
        """Position the head and transfer: completion time of a media access started at t."""
        # Inlined geometry (this is the simulator's hot path).
        f = offset / self._capacity
        if self._one_minus_k > 0.0:
            cyl = (1.0 - math.sqrt(1.0 - f * self._area_coef)) / self._one_minus_k
        else:
            cyl = f
        dist = cyl - self.head_cyl
        if dist < 0.0:
            dist = -dist
        if dist >= self._cyl_eps:
            t += self._t2t_s + self._seek_span_s * math.sqrt(dist)
            if is_write:
                t += self._wsettle_s
        z = int(cyl * self._zones)
        if z >= self._zones:
            z = self._zones - 1
        # Rotational wait: the sector's angle on its track minus the platter's phase.
        t += (((offset / self._zone_track[z]) - t * self._rps) % 1.0) * self._rev_s
        rate = self._zone_Bps[z]
        t += size / rate
        self._last_Bps = rate
        self.head_cyl = cyl
        self._head_off = offset + size
        self.media_ops += 1
        return t
