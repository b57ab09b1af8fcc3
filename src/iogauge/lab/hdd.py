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
    finds the buffer full waits for enough destages. Work hidden in idle time at low load
    thus becomes visible as the load rises -- one reason %util stops growing linearly
    with IOPS (seed 004 §1 names "the effect of the cache built into the storage
    device"); under seed 004's per-second bursts this puts the knee where the idle part
    of each second no longer holds the write-back.
* No command queueing (NCQ): commands are served in arrival order, so a queue depth > 1
  raises latency but not IOPS, as seed 004's single-queue observations assume.

Times inside are seconds, sizes bytes, rates bytes/s; profile parameters carry their units
in their names (``_ms``, ``_MBps`` with 1 MB = 10**6 bytes as datasheets use, ``_KiB``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from iogauge.lab.model import Request

#: E[sqrt(|x - y|)] for x, y independent uniform on [0, 1]: the average-seek weight.
AVG_SQRT_DISTANCE = 8.0 / 15.0


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

    Attributes:
        head_cyl: radial head position in [0, 1].
        free_at_s: end of the last command or destage the drive started.
        media_ops, cache_hits, destages: counters for tests and reports.
    """

    __slots__ = (
        "_area_coef", "_capacity", "_cyl_eps", "_dirty", "_dirty_bytes", "_head_off",
        "_idle_s", "_iface_Bps", "_inner_Bps", "_last_Bps", "_last_host_done", "_one_minus_k",
        "_outer_Bps", "_overhead_s", "_ra_Bps", "_ra_base", "_ra_bytes", "_ra_limit",
        "_ra_lo", "_ra_t0", "_rev_s", "_rps", "_seek_span_s", "_segments",
        "_segments_max", "_t2t_s", "_wc_bytes", "_wsettle_s", "_zone_Bps", "_zone_track",
        "_zones", "cache_hits", "capacity_bytes", "channels", "destages", "free_at_s",
        "head_cyl", "media_ops", "name", "params",
    )

    def __init__(self, params: HddParams, name: str = "hdd") -> None:
        self.name = name
        self.params = params
        self.channels = 1
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
        while self._dirty_bytes + size > self._wc_bytes:
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
