"""The dispatcher: a FIFO in front of the model's service channels, kept as a schedule on
the monotonic clock (see :mod:`iogauge.lab.emulated`, Timing and Command queueing).
"""

from __future__ import annotations

import heapq
import logging
import math
import resource
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from iogauge.lab.emu.models import ConstantModel
from iogauge.lab.emu.timing import Compensation, PreciseSleeper, _fine_timer_slack
from iogauge.lab.model import DiskModel, Op, QueuedDiskModel, Request

log = logging.getLogger("iogauge.lab.emulated")


#: Replies later than this after their due time are counted as "late" in the statistics.
LATE_S = 0.001


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
