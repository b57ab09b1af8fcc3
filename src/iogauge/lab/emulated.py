"""The emulated disk's server: one FUSE file whose reads and writes take a model's time.

``iogauge lab device create`` (:mod:`iogauge.lab.device`) starts this module as a daemon
process (``python -m iogauge.lab.emulated``). It serves a directory with one file,
``disk.img``, of the device's size; the file is attached to a loop device with direct I/O,
so every block request of ``/dev/loopN`` becomes one FUSE read or write here, and the
kernel's own accounting (/proc/diskstats, iostat, cgroup throttles) sees a disk whose
service times are the model's.

Data path. The bytes live in a sparse backing file (a 1 TB emulated disk costs nothing until
written). The file is opened with FUSE's ``direct_io`` flag, and the loop device uses
direct I/O (``losetup --direct-io=on``), so no page cache sits between the loop device and
this process: a request served from a cache would complete in microseconds and every
timing would be fake. :mod:`iogauge.lab.device` refuses a loop device whose kernel did not
enable direct I/O, and the end-to-end tests count that each fio I/O reaches the handler.

Timing. :class:`Dispatcher` is a FIFO queue in front of ``model.channels`` service
channels (:mod:`iogauge.lab.model`). It keeps each channel's schedule
on the monotonic clock: a request arriving at ``a`` takes the channel that frees first,
starts at ``max(a, free)``, and the model is asked ``service_time(req, start, channel)`` for
that start -- the same calls, in the same order and with the same start times, as a
dispatcher that waited for the channel in real time, because FIFO service starts are
non-decreasing. The handler thread then does the real read/write and sleeps until the
request's completion time. Keeping the schedule (rather than "hold the channel, then sleep
the service time") makes the emulated capacity exact: a channel can never start a request
before the previous one's modelled end, whatever Python or the kernel add, so a saturated
device gives exactly the model's IOPS.

Command queueing. A model that reorders its queue (``model.queued``: an HDD with NCQ, a
RAID of such drives; :mod:`iogauge.lab.hdd`) cannot be scheduled at admission: which
request runs next is decided when the previous one ends, from the requests that have
arrived by then. For such a model the dispatcher is the model's clock (``model.bind``):
:meth:`Dispatcher.admit` submits the request at its arrival, the model's events (a drive
finishing a command, a RAID phase reaching its members) sit in a heap on the monotonic
clock, and a timer thread runs each at its time. Every admission first runs the events due
before its arrival, so the model decides exactly as the simulator would from the same
arrivals, however late the timer thread wakes; the handler thread waits until the model
knows its request's completion (at once when the drive is idle, else when the drive
chooses it) and then replies as for FIFO service. Concurrent requests reach the handlers
when fio runs with ``iodepth`` > 1 (libaio) or ``numjobs`` > 1: the loop device submits
its direct I/O asynchronously (below).

Compensation. What the kernel and the application see is the hold plus the FUSE round trip
(block layer -> loop -> FUSE -> this process and back) plus the wake-ups of idle CPUs on
that path. On a 2-vCPU VM that overhead grew from ~0.14 ms (0.5 ms services) to ~0.45 ms
(15 ms services), measured with fio at queue depth 1: idle vCPUs wake more slowly the
longer they slept. :mod:`iogauge.lab.device` measures it after attaching the loop device
(:func:`~iogauge.lab.device.calibrate`, constant probe services of 0.25..16 ms) and hands
the table here; each reply is then sent ``lead_s(service)`` before the modelled
completion. The lead only moves replies: the channel schedule, hence the capacity, is
untouched.

Multi-threading. libfuse runs its multi-threaded loop; each request occupies one libfuse
worker thread (which calls into Python) for its whole life, so the kernel may have up to
``max_background`` (raised to 128 here, the loop device's queue depth) requests
outstanding and the queue forms in the dispatcher, not in the kernel.

Priority. The server runs with SCHED_RR priority 1 (:func:`raise_priority`): a disk's
timing does not depend on what the CPUs are doing, and under CPU contention an ordinary
process replied milliseconds late. The kernel's part of the path (loop submits its direct
I/O from an ordinary unbound kworker) cannot be raised: on a saturated machine it adds
latency this process never sees (at ~100 % CPU pressure on the dev VM, a 10 ms service
measured 10.1-11.0 ms mean at fio and iostat while replies left within 0.1 ms of due).

Cost (dev VM, 2 vCPUs, Python 3.11): ~0.5 ms of CPU per request at HDD rates (4-5 % of one
CPU at 80 IOPS) and ~0.3-0.4 ms per 128 KiB sequential read (40-50 % of a CPU at 1,400
IOPS: interpreter ~40 %, kernel data copies ~40 %); the spin of :class:`PreciseSleeper` is
~40-60 us of it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import functools
import gc
import heapq
import importlib
import itertools
import json
import logging
import math
import os
import re
import resource
import signal
import socket
import socketserver
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from iogauge.lab.model import DiskModel, Op, QueuedDiskModel, Request
from iogauge.lab.profiles import build_model, load_profile

log = logging.getLogger("iogauge.lab.emulated")

#: Name of the one file the FUSE file system exposes.
IMAGE_NAME = "disk.img"

#: Outstanding FUSE background requests the kernel allows (its default is 12). Loop's
#: direct I/O is asynchronous: each block request is a FUSE background request, so this
#: caps the queue depth the emulated device can see. 128 = loop's default hw_queue_depth.
MAX_BACKGROUND = 128

#: ``PR_SET_TIMERSLACK`` (linux/prctl.h): the kernel may delay a sleeping thread's wake-up
#: by its timer slack (default 50 us) to batch wake-ups; 1 ns asks for hrtimer precision.
_PR_SET_TIMERSLACK = 29

#: fallocate(2) modes (linux/falloc.h) the loop device sends for discard/write-zeroes.
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_FALLOC_FL_ZERO_RANGE = 0x10

#: Replies later than this after their due time are counted as "late" in the statistics.
LATE_S = 0.001


# ---- a constant-time model (calibration, accuracy measurements) --------------------------


@dataclass
class ConstantModel:
    """Every request takes ``service_s`` on one of ``channels`` channels.

    Used by the calibration probe and to measure the emulator's timing accuracy (a 10 ms
    service must look like 10 ms to fio and iostat). Model spec: ``constant:10ms``,
    ``constant:500us:4`` (4 channels).
    """

    service_s: float
    capacity_bytes: int
    channels: int = 1
    name: str = "constant"

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        return self.service_s

    def reset(self) -> None:
        """Stateless: nothing to reset."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us|µs)\s*$")


def parse_duration_s(text: str) -> float:
    """``"10ms"`` -> 0.01, ``"500us"`` -> 0.0005, ``"0.2s"`` -> 0.2 (ValueError otherwise)."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"bad duration {text!r}: expected a number with s, ms or us "
                         "(e.g. 10ms)")
    value = float(m.group(1))
    return value * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}[m.group(2)]


def constant_model(spec: str, capacity_bytes: int) -> ConstantModel:
    """The model of a ``constant:<duration>[:<channels>]`` spec."""
    parts = spec.split(":")
    if parts[0] != "constant" or len(parts) not in (2, 3):
        raise ValueError(f"bad constant model {spec!r}: expected constant:<duration>"
                         "[:<channels>], e.g. constant:10ms or constant:1ms:4")
    service_s = parse_duration_s(parts[1])
    channels = int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 1
    if (len(parts) == 3 and not parts[2].isdigit()) or channels < 1:
        raise ValueError(f"bad channel count in {spec!r}: expected an integer >= 1")
    return ConstantModel(service_s, capacity_bytes, channels, name=spec)


#: Short model names of the CLI (``--model hdd`` is the issue's default, "a 7,200 rpm
#: single spindle") -> bundled profiles of :mod:`iogauge.lab.profiles`.
MODEL_ALIASES = {"hdd": "hdd-7200", "ssd": "ssd-sata", "raid": "raid5-6x400g",
                 "raid5": "raid5-6x400g"}


def profile_name(spec: str) -> str:
    """The profile (bundled name or TOML path) a model spec names (aliases resolved)."""
    return MODEL_ALIASES.get(spec, spec)


def load_model(spec: str, capacity_bytes: int | None) -> DiskModel:
    """The model named by ``spec`` for a device of ``capacity_bytes`` (None: the profile's).

    ``constant:...`` is built here; anything else is a disk profile of
    :mod:`iogauge.lab.profiles` (a bundled name, an alias of :data:`MODEL_ALIASES` or a TOML
    file), rescaled to the device's capacity so the whole stroke maps onto the device.
    """
    if spec.startswith("constant:"):
        if capacity_bytes is None:
            raise ValueError(f"model {spec} has no capacity of its own: give a size")
        return constant_model(spec, capacity_bytes)
    return build_model(profile_name(spec), capacity_bytes=capacity_bytes)


def model_kind(spec: str) -> str:
    """``hdd``, ``ssd``, ``raid`` (the profile's kind) or ``constant``."""
    if spec.startswith("constant:"):
        return "constant"
    return load_profile(profile_name(spec)).kind


# ---- compensation of the path outside the dispatcher -------------------------------------


@dataclass(frozen=True)
class Compensation:
    """How early to reply, as a function of the service time (see the module docstring).

    Attributes:
        points: ``(service_s, lead_s)`` pairs sorted by service time, measured by the
            calibration probe; interpolated linearly between points and held constant
            beyond the ends. Empty: no compensation.
    """

    points: tuple[tuple[float, float], ...] = ()

    def lead_s(self, service_s: float) -> float:
        """Seconds to reply before the modelled completion (never more than the service)."""
        pts = self.points
        if not pts:
            return 0.0
        if service_s <= pts[0][0]:
            lead = pts[0][1]
        elif service_s >= pts[-1][0]:
            lead = pts[-1][1]
        else:
            lead = pts[-1][1]
            for (x0, y0), (x1, y1) in itertools.pairwise(pts):
                if x0 <= service_s <= x1:
                    lead = y0 + (y1 - y0) * (service_s - x0) / (x1 - x0)
                    break
        return min(max(lead, 0.0), service_s)

    @classmethod
    def from_json(cls, raw: object) -> Compensation:
        if not isinstance(raw, list):
            raise TypeError("compensation must be a list of [service_s, lead_s] pairs")
        pts: list[tuple[float, float]] = []
        for item in raw:
            if (not isinstance(item, list) or len(item) != 2
                    or not all(isinstance(v, int | float) and math.isfinite(v) and v >= 0
                               for v in item)):
                raise ValueError(f"bad compensation point {item!r}: need [service_s, lead_s]"
                                 " with finite values >= 0")
            pts.append((float(item[0]), float(item[1])))
        pts.sort()
        if len({p[0] for p in pts}) != len(pts):
            raise ValueError("compensation points must have distinct service times")
        return cls(tuple(pts))


# ---- precise sleeping -------------------------------------------------------------------

_thread_state = threading.local()


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fine_timer_slack() -> None:
    """Ask for 1 ns timer slack on the calling thread (once per thread; best effort)."""
    if getattr(_thread_state, "slack_set", False):
        return
    _thread_state.slack_set = True
    try:
        _libc().prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("prctl(PR_SET_TIMERSLACK) unavailable; sleeps keep the default slack")


class PreciseSleeper:
    """Sleep until a monotonic deadline with ~10 us precision at a small CPU cost.

    ``time.sleep`` oversleeps (timer slack, then the wake-up of an idle vCPU: 20-160 us on
    the dev VM, growing with the sleep). So it sleeps until ``deadline - early`` and spins
    the rest with ``sched_yield`` (which releases the GIL, so spinning threads do not
    delay each other); ``early`` follows the observed oversleep (EWMA x 1.5 + 20 us), so the
    spin costs roughly the oversleep and no more.
    """

    MIN_EARLY_S = 20e-6
    MAX_EARLY_S = 1e-3

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._oversleep_s = 50e-6
        self.spin_s = 0.0  # total time spent spinning (CPU cost accounting)

    @property
    def early_s(self) -> float:
        e = 1.5 * self._oversleep_s + 20e-6
        return min(max(e, self.MIN_EARLY_S), self.MAX_EARLY_S)

    def sleep_until(self, deadline: float) -> None:
        _fine_timer_slack()
        clock = self._clock
        now = clock()
        if deadline <= now:
            return
        early = self.early_s
        target = deadline - early
        if target > now:
            time.sleep(target - now)
            now = clock()
            over = now - target
            # Racy update from several threads: a lost update only delays the EWMA.
            self._oversleep_s += 0.1 * (min(max(over, 0.0), self.MAX_EARLY_S)
                                        - self._oversleep_s)
        spin_from = now
        while now < deadline:
            os.sched_yield()
            now = clock()
        self.spin_s += now - spin_from


def raise_priority(realtime: bool = True) -> str:
    """Give this thread (and the threads it creates later) a scheduling priority above
    ordinary processes; returns what was obtained, for the log and the statistics.

    A disk keeps its timing whatever the CPUs are doing; an emulator competing with its own
    load generator (and everything else on a small VM) does not. Measured on the 2-vCPU
    dev VM at load average ~7, the QD1 reply lateness p99 of the emulated HDD was 4-34 ms
    as an ordinary process, 4-5 ms at nice -15 and 21-79 us with SCHED_RR priority 1. The
    lowest real-time priority is enough (it only has to win against SCHED_OTHER), the
    server uses a few % of a CPU at HDD rates, and the kernel's RT throttling
    (sched_rt_runtime_us) keeps 5 % of every CPU for ordinary tasks whatever happens.
    Falls back to nice -15, then to nothing, where not permitted (a container without
    CAP_SYS_NICE).
    """
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
        except (OSError, AttributeError):
            pass
        else:
            return "SCHED_RR priority 1"
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -15)
    except OSError:
        return "normal (no permission to raise the priority)"
    return "nice -15"


# ---- the dispatcher ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ticket:
    """One admitted request and its schedule (monotonic seconds).

    Attributes:
        req: the request.
        channel: service channel.
        arrival: when the handler admitted it.
        start: when its service starts (``>= arrival``; later when it queued).
        service_s: the model's service time for that start.
        end: ``start + service_s``, the modelled completion.
        reply_at: when to answer the kernel (``end`` minus the compensation lead).
    """

    req: Request
    channel: int
    arrival: float
    start: float
    service_s: float
    end: float
    reply_at: float


@dataclass
class DispatchStats:
    """Counters of one dispatcher (returned by the ``stats`` control command).

    Times in seconds; ``lateness`` = actual reply time - due reply time, a bounded sample of
    the most recent requests.
    """

    reads: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    service_s: float = 0.0
    queue_wait_s: float = 0.0
    max_in_system: int = 0
    late: int = 0
    io_errors: int = 0
    sizes: dict[int, int] = field(default_factory=dict)
    lateness: deque[float] = field(default_factory=lambda: deque(maxlen=20_000))
    since: float = field(default_factory=time.monotonic)


class Pending:
    """A request submitted to a queued model whose completion is not known yet.

    Attributes:
        req: the request.
        arrival: when it was admitted (monotonic s).
        start: when the model started it (monotonic s; None until known).
        end: its modelled completion (monotonic s; None until known).
        known: set once ``start`` and ``end`` are.
    """

    __slots__ = ("arrival", "end", "known", "req", "start")

    def __init__(self, req: Request, arrival: float) -> None:
        self.req = req
        self.arrival = arrival
        self.start: float | None = None
        self.end: float | None = None
        self.known = threading.Event()


class Dispatcher:
    """FIFO queue in front of ``model.channels`` channels, scheduled on the monotonic clock;
    for a queued model (``model.queued``), the model's own queue driven by its events.

    Thread-safe: libfuse worker threads call :meth:`admit`, do their I/O, sleep until
    ``ticket.reply_at`` and call :meth:`done`.

    Args:
        model: the disk model (called under a lock, in FIFO order; a queued model in
            arrival order, its events in time order).
        clock: monotonic clock (injectable for tests).
    """

    def __init__(self, model: DiskModel, clock: Callable[[], float] = time.monotonic) -> None:
        if model.channels < 1:
            raise ValueError(f"model {model.name} has {model.channels} channels; need >= 1")
        self.model = model
        self._clock = clock
        self._lock = threading.Lock()
        self.t0 = clock()
        self._free_at = [self.t0] * model.channels
        self._probe: ConstantModel | None = None
        self.compensation = Compensation()
        self._in_system = 0
        self.stats = DispatchStats(since=self.t0)
        self.scheduling = "normal"  # what raise_priority() obtained, for the statistics
        self.sleeper: PreciseSleeper | None = None  # for its spin accounting
        # A queued model's clock: its events (model time, sequence, handler, argument),
        # the time of the event or arrival being processed, the requests not yet known,
        # and the timer thread that runs the events (started with the first request).
        self.queued = bool(getattr(model, "queued", False))
        self._events: list[tuple[float, int, Callable[[float, Any], None], Any]] = []
        self._event_seq = 0
        self._now_model = 0.0
        self._unknown: set[Pending] = set()
        self._wakeup = threading.Condition(self._lock)
        self._timer: threading.Thread | None = None
        self._qmodel = cast("QueuedDiskModel", model)  # when queued: submit/bind
        if self.queued:
            self._qmodel.bind(self._model_at, self._model_done)

    # -- modes ----------------------------------------------------------------------------
    def probe(self, service_s: float) -> None:
        """Serve every request in ``service_s`` without touching the model (calibration)."""
        with self._lock:
            self._probe = ConstantModel(service_s, self.model.capacity_bytes,
                                        self.model.channels, name="probe")
            self.compensation = Compensation()

    def resume(self, compensation: Compensation) -> None:
        """Back to the model, reset to its initial state, with ``compensation``; the
        statistics restart."""
        with self._lock:
            self._probe = None
            self.compensation = compensation
            self.model.reset()
            now = self._clock()
            self._free_at = [max(f, now) for f in self._free_at]
            self.stats = DispatchStats(since=now)
            # A reset model forgets its queue: requests still waiting in it complete now
            # rather than never, and its pending events are void.
            self._events.clear()
            for p in self._unknown:
                p.start = p.end = now
                p.known.set()
            self._unknown.clear()

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = DispatchStats(since=self._clock())

    # -- a queued model's clock ------------------------------------------------------------
    def _model_at(self, t: float, fn: Callable[[float, Any], None], arg: Any) -> None:
        """Schedule ``fn(t, arg)`` at model time ``t`` (called by the model, under the
        lock)."""
        self._event_seq += 1
        heapq.heappush(self._events, (t, self._event_seq, fn, arg))
        if self._events[0][1] == self._event_seq:
            self._wakeup.notify_all()  # a new earliest event: the timer re-arms

    def _model_done(self, token: Any, done: float) -> None:
        """The model knows when a request completes (called by the model, under the lock)."""
        p: Pending = token
        p.start = self._now_model + self.t0
        p.end = done + self.t0
        self._unknown.discard(p)
        p.known.set()

    def _run_due_locked(self, now: float) -> None:
        ev = self._events
        t0 = self.t0
        # Compared on the monotonic clock, as the timer computes its wait (t + t0 - t0
        # need not give t back in floating point: a due event must not look early).
        while ev and ev[0][0] + t0 <= now:
            t, _seq, fn, arg = heapq.heappop(ev)
            self._now_model = t
            fn(t, arg)

    def run_due(self) -> None:
        """Run the queued model's events due by now (the timer thread does this; tests with
        a fake clock call it)."""
        with self._lock:
            self._run_due_locked(self._clock())

    def next_event_at(self) -> float | None:
        """Monotonic time of the queued model's next event (None: none scheduled)."""
        with self._lock:
            return self._events[0][0] + self.t0 if self._events else None

    def _timer_loop(self) -> None:
        _fine_timer_slack()
        clock = self._clock
        with self._wakeup:
            while True:
                if not self._events:
                    self._wakeup.wait()
                    continue
                wait_s = self._events[0][0] + self.t0 - clock()
                if wait_s > 0:
                    self._wakeup.wait(wait_s)  # or earlier, when an earlier event comes
                    continue
                try:
                    self._run_due_locked(clock())
                except Exception:
                    # A model error must not leave the kernel's requests unanswered for
                    # ever: log it and let every waiting request complete now.
                    log.exception("queued model event failed")
                    self._events.clear()
                    now = clock()
                    for p in self._unknown:
                        p.start = p.end = now
                        p.known.set()
                    self._unknown.clear()

    def submit(self, op: Op, offset_bytes: int, size_bytes: int) -> Pending:
        """Hand a request to a queued model at its arrival (now), after the events due
        before it; returns at once (:meth:`ticket` once ``pending.known`` is set)."""
        if not self.queued:
            raise ValueError(f"model {self.model.name} is not queued: use admit()")
        req = Request(op, offset_bytes, size_bytes)
        with self._lock:
            arrival = self._clock()
            self._run_due_locked(arrival)
            p = Pending(req, arrival)
            self._unknown.add(p)
            self._now_model = arrival - self.t0
            self._qmodel.submit(p, op == "write", offset_bytes, size_bytes,
                                arrival - self.t0)
            self._account(req)
            if self._timer is None:
                self._timer = threading.Thread(target=self._timer_loop, name="ncq-timer",
                                               daemon=True)
                self._timer.start()
        return p

    def ticket(self, p: Pending) -> Ticket:
        """The schedule of a request whose completion the model knows."""
        if p.start is None or p.end is None:
            raise ValueError("the model has not started this request yet")
        service_s = p.end - p.start
        reply_at = max(p.arrival, p.end - self.compensation.lead_s(service_s))
        with self._lock:
            self.stats.service_s += service_s
            self.stats.queue_wait_s += p.start - p.arrival
        return Ticket(p.req, 0, p.arrival, p.start, service_s, p.end, reply_at)

    def _account(self, req: Request) -> None:
        """Count an admitted request (under the lock)."""
        self._in_system += 1
        st = self.stats
        st.max_in_system = max(st.max_in_system, self._in_system)
        if req.op == "read":
            st.reads += 1
            st.read_bytes += req.size_bytes
        else:
            st.writes += 1
            st.write_bytes += req.size_bytes
        st.sizes[req.size_bytes] = st.sizes.get(req.size_bytes, 0) + 1

    # -- requests -------------------------------------------------------------------------
    def admit(self, op: Op, offset_bytes: int, size_bytes: int) -> Ticket:
        """Queue a request: its channel, start, service time and reply time (for a queued
        model, once the model has started it)."""
        if self.queued and self._probe is None:
            p = self.submit(op, offset_bytes, size_bytes)
            p.known.wait()
            return self.ticket(p)
        req = Request(op, offset_bytes, size_bytes)
        with self._lock:
            arrival = self._clock()
            free = self._free_at
            ch = min(range(len(free)), key=free.__getitem__)
            start = arrival if free[ch] <= arrival else free[ch]
            model: DiskModel = self._probe if self._probe is not None else self.model
            service_s = float(model.service_time(req, start - self.t0, ch))
            if not (math.isfinite(service_s) and service_s >= 0.0):
                raise ValueError(f"model {model.name} returned service time {service_s!r} "
                                 f"for {req}")
            end = start + service_s
            free[ch] = end
            reply_at = max(arrival, end - self.compensation.lead_s(service_s))
            self._in_system += 1
            st = self.stats
            st.max_in_system = max(st.max_in_system, self._in_system)
            if op == "read":
                st.reads += 1
                st.read_bytes += size_bytes
            else:
                st.writes += 1
                st.write_bytes += size_bytes
            st.sizes[size_bytes] = st.sizes.get(size_bytes, 0) + 1
            st.service_s += service_s
            st.queue_wait_s += start - arrival
        return Ticket(req, ch, arrival, start, service_s, end, reply_at)

    def done(self, ticket: Ticket, replied_at: float, *, failed: bool = False) -> None:
        """Account a request answered at ``replied_at``."""
        with self._lock:
            self._in_system -= 1
            st = self.stats
            late = replied_at - ticket.reply_at
            st.lateness.append(late)
            if late > LATE_S:
                st.late += 1
            if failed:
                st.io_errors += 1

    def snapshot(self) -> dict[str, Any]:
        """Statistics as JSON-ready data (see :class:`DispatchStats`)."""
        with self._lock:
            st = self.stats
            lat = sorted(st.lateness)
            now = self._clock()
            mode = "probe" if self._probe is not None else "model"
            comp = [list(p) for p in self.compensation.points]
            in_system = self._in_system

        def q(p: float) -> float | None:
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None

        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "model": self.model.name, "channels": self.model.channels, "mode": mode,
            "queued": self.queued,
            "capacity_bytes": self.model.capacity_bytes,
            "elapsed_s": now - st.since, "reads": st.reads, "writes": st.writes,
            "read_bytes": st.read_bytes, "write_bytes": st.write_bytes,
            "service_s": st.service_s, "queue_wait_s": st.queue_wait_s,
            "in_system": in_system, "max_in_system": st.max_in_system,
            "sizes": {str(k): v for k, v in sorted(st.sizes.items())},
            "late": st.late, "io_errors": st.io_errors,
            "lateness_mean_s": (sum(lat) / len(lat)) if lat else None,
            "lateness_p50_s": q(0.5), "lateness_p99_s": q(0.99),
            "lateness_max_s": lat[-1] if lat else None,
            "compensation": comp,
            "cpu_user_s": ru.ru_utime, "cpu_system_s": ru.ru_stime,
            "scheduling": self.scheduling,
            "spin_s": self.sleeper.spin_s if self.sleeper else None,
            "early_s": self.sleeper.early_s if self.sleeper else None,
        }


# ---- the FUSE file system ---------------------------------------------------------------


def _fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    res = _libc().fallocate(ctypes.c_int(fd), ctypes.c_int(mode), ctypes.c_longlong(offset),
                          ctypes.c_longlong(length))
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class DiskFileSystem:
    """FUSE operations (mfusepy, ``raw_fi=True``): ``/`` holding one file, ``disk.img``.

    Only the image's reads and writes go through the dispatcher; metadata operations are
    answered at once (a block device has no metadata, and the loop driver sends none).
    Operations not defined here are left unimplemented in libfuse (ENOSYS).
    """

    use_ns = True  # mfusepy: times as integer nanoseconds

    def __init__(self, dispatcher: Dispatcher, backing_fd: int, size_bytes: int,
                 sleeper: PreciseSleeper) -> None:
        self.dispatcher = dispatcher
        self.fd = backing_fd
        self.size = size_bytes
        self.sleeper = sleeper
        self.clock = time.monotonic
        self._mtime_ns = time.time_ns()

    # -- metadata ------------------------------------------------------------------------
    def init_with_config(self, conn: Any, config: Any) -> None:
        if conn is not None:
            conn.max_background = MAX_BACKGROUND
            conn.congestion_threshold = MAX_BACKGROUND * 3 // 4
        if config is not None:
            config.direct_io = 1  # no page cache for any opener of the image

    def getattr(self, path: str, fh: Any = None) -> dict[str, int]:
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o700, "st_nlink": 2,
                    "st_mtime": self._mtime_ns, "st_ctime": self._mtime_ns,
                    "st_atime": self._mtime_ns}
        if path == "/" + IMAGE_NAME:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": self.size,
                    "st_blksize": 4096, "st_blocks": (self.size + 511) // 512,
                    "st_mtime": self._mtime_ns, "st_ctime": self._mtime_ns,
                    "st_atime": self._mtime_ns}
        raise OSError(errno.ENOENT, "no such file")

    def readdir(self, path: str, fh: Any) -> list[str]:
        if path != "/":
            raise OSError(errno.ENOTDIR, "not a directory")
        return [".", "..", IMAGE_NAME]

    def access(self, path: str, amode: int) -> int:
        self.getattr(path)
        return 0

    def open(self, path: str, fi: Any) -> int:
        if path != "/" + IMAGE_NAME:
            raise OSError(errno.ENOENT, "no such file")
        # FOPEN_DIRECT_IO: every read/write of this open file reaches us, never the page
        # cache; loop's O_DIRECT requests would bypass it anyway, this covers other openers.
        fi.direct_io = 1
        fi.keep_cache = 0
        fi.fh = 0
        return 0

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        if length != self.size:
            raise OSError(errno.EPERM, "the emulated disk has a fixed size")
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": self.size // 4096,
                "f_bfree": 0, "f_bavail": 0, "f_files": 1, "f_ffree": 0, "f_namemax": 255}

    def flush(self, path: str, fh: Any) -> int:
        return 0

    def release(self, path: str, fh: Any) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: Any) -> int:
        # A cache flush of the emulated disk. The models have no flush operation, and the
        # backing file is scratch space deleted on destroy: syncing it would add the host
        # disk's latency to the emulated disk's, so nothing is done.
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: Any) -> int:
        # The loop device turns discard and write-zeroes into fallocate(PUNCH_HOLE |
        # KEEP_SIZE) / ZERO_RANGE on its backing file. Passed to the sparse backing file
        # untimed: the disk models have no discard operation.
        if offset < 0 or size < 0 or offset + size > self.size:
            raise OSError(errno.EINVAL, "range beyond the device")
        if mode & (_FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_ZERO_RANGE):
            _fallocate(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, size)
            return 0
        if mode in (0, _FALLOC_FL_KEEP_SIZE):
            return 0  # allocation within a fixed-size device: nothing to do
        raise OSError(errno.EOPNOTSUPP, f"fallocate mode {mode:#x} not supported")

    # -- data ---------------------------------------------------------------------------
    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        if offset >= self.size or size <= 0:
            return b""
        size = min(size, self.size - offset)
        ticket = self.dispatcher.admit("read", offset, size)
        failed = True
        try:
            data = os.pread(self.fd, size, offset)
            if len(data) < size:  # never past EOF (ftruncated to size): holes read as 0
                data += bytes(size - len(data))
            failed = False
        finally:
            self.sleeper.sleep_until(ticket.reply_at)
            self.dispatcher.done(ticket, self.clock(), failed=failed)
        return data

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        if offset + len(data) > self.size:
            raise OSError(errno.ENOSPC, "write beyond the end of the emulated disk")
        ticket = self.dispatcher.admit("write", offset, len(data))
        failed = True
        try:
            view = memoryview(data)
            done = 0
            while done < len(data):
                done += os.pwrite(self.fd, view[done:], offset + done)
            failed = False
        finally:
            self.sleeper.sleep_until(ticket.reply_at)
            self.dispatcher.done(ticket, self.clock(), failed=failed)
        return len(data)


# ---- control socket ---------------------------------------------------------------------


def _handle_command(dispatcher: Dispatcher, msg: dict[str, Any]) -> dict[str, Any]:
    cmd = msg.get("cmd")
    if cmd == "stats":
        return {"ok": True, "stats": dispatcher.snapshot()}
    if cmd == "probe":
        service_s = msg.get("service_s")
        if not isinstance(service_s, int | float) or not 0 <= service_s < 10:
            return {"ok": False, "error": "probe needs service_s in [0, 10)"}
        dispatcher.probe(float(service_s))
        return {"ok": True}
    if cmd == "resume":
        try:
            comp = Compensation.from_json(msg.get("compensation", []))
        except (TypeError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        dispatcher.resume(comp)
        return {"ok": True}
    if cmd == "reset_stats":
        dispatcher.reset_stats()
        return {"ok": True}
    return {"ok": False, "error": f"unknown command {cmd!r}"}


def _control_server(path: Path, dispatcher: Dispatcher) -> socketserver.UnixStreamServer:
    """A line-JSON server on a root-only Unix socket: one request, one reply."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            line = self.rfile.readline(1 << 16)
            try:
                msg = json.loads(line)
            except ValueError as exc:
                msg = f"bad request: {exc}"
            if isinstance(msg, dict):
                reply = _handle_command(dispatcher, msg)
            else:
                reply = {"ok": False, "error": f"bad request: {msg!r} is not a JSON object"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    old = os.umask(0o077)
    try:
        server = Server(str(path), Handler)
    finally:
        os.umask(old)
    return server


def control(path: str | Path, msg: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one command to a server's control socket; return its reply (OSError if down)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(path))
        s.sendall(json.dumps(msg).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    reply = json.loads(buf)
    if not isinstance(reply, dict):
        raise OSError(errno.EPROTO, f"bad reply from {path}: {buf[:200]!r}")
    return reply


# ---- the daemon -------------------------------------------------------------------------


@contextlib.contextmanager
def _backing_file(path: Path, size_bytes: int) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size_bytes)  # sparse: costs nothing until written
        yield fd
    finally:
        os.close(fd)


def serve(mountpoint: Path, backing: Path, size_bytes: int, model_spec: str,
          control_path: Path, fsname: str, *, realtime: bool = True) -> int:
    """Mount the file system and serve until unmounted or SIGTERM/SIGINT; exit status."""
    # Imported here: importing it loads libfuse3 (ctypes), which only the daemon needs.
    mfusepy = importlib.import_module("mfusepy")

    model = load_model(model_spec, size_bytes)
    # Before any thread exists: libfuse's and the control thread inherit it.
    scheduling = raise_priority(realtime)
    dispatcher = Dispatcher(model)
    dispatcher.scheduling = scheduling
    sleeper = PreciseSleeper()
    dispatcher.sleeper = sleeper
    # A thread waking to reply must get the GIL quickly even while another runs Python
    # (default switch interval: 5 ms, which would show up as latency).
    sys.setswitchinterval(1e-4)
    server = _control_server(control_path, dispatcher)
    # Everything allocated so far lives as long as the server: keep it out of the garbage
    # collector's way (a full collection of the start-up heap takes ~5 ms).
    gc.collect()
    gc.freeze()
    threading.Thread(target=server.serve_forever, name="control", daemon=True).start()
    log.info("serving %s (%d bytes, model %s, %d channels) at %s; scheduling %s", backing,
             size_bytes, model.name, model.channels, mountpoint, scheduling)
    try:
        with _backing_file(backing, size_bytes) as fd:
            ops = DiskFileSystem(dispatcher, fd, size_bytes, sleeper)
            # Foreground, multi-threaded; libfuse installs SIGTERM/SIGINT/SIGHUP handlers
            # that end the loop and unmount. subtype makes /proc/mounts say fuse.iogauge.
            # max_threads: libfuse's default (10 worker threads) would cap the requests in
            # service at 10 and queue the rest in the kernel, out of the model's reach.
            try:
                mfusepy.FUSE(ops, str(mountpoint), raw_fi=True, foreground=True,
                             fsname=fsname, subtype="iogauge",
                             max_threads=MAX_BACKGROUND + 8)
            except RuntimeError as exc:
                # fuse_main returns 8 when its loop ends with an error, and libfuse 3's
                # signal handler records the signal as that error: SIGTERM/SIGINT/SIGHUP
                # end the loop (and unmount) this way. Other codes are real failures
                # (3: setup, 4: mount, 7: init).
                if exc.args != (8,):
                    raise
                log.info("event loop ended by a signal (fuse_main status 8)")
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            control_path.unlink()
        final = dispatcher.snapshot()
        final.pop("sizes", None)
        log.info("stopped; final statistics %s, spin %.3f s", json.dumps(final),
                 sleeper.spin_s)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the daemon (started by :func:`iogauge.lab.device.create`)."""
    p = argparse.ArgumentParser(prog="python -m iogauge.lab.emulated",
                                description="Serve an emulated disk image over FUSE.")
    p.add_argument("--mountpoint", type=Path, required=True)
    p.add_argument("--backing", type=Path, required=True)
    p.add_argument("--size", type=int, required=True, help="bytes")
    p.add_argument("--model", required=True)
    p.add_argument("--control", type=Path, required=True)
    p.add_argument("--fsname", default="iogauge-lab")
    p.add_argument("--no-realtime", action="store_true",
                   help="stay an ordinary process (default: SCHED_RR priority 1)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # SIGTERM must reach libfuse's handler (it ends the loop and unmounts): Python leaves
    # SIGTERM at its default, which libfuse only replaces when it finds it at SIG_DFL.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        return serve(args.mountpoint, args.backing, args.size, args.model, args.control,
                     args.fsname, realtime=not args.no_realtime)
    except Exception:
        log.exception("emulated disk server failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
