"""Timing on the host: the compensation of the path outside the dispatcher, sleeping to a
deadline more precisely than time.sleep, and the server's real-time priority.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("iogauge.lab.emulated")


#: ``PR_SET_TIMERSLACK`` (linux/prctl.h): the kernel may delay a sleeping thread's wake-up
#: by its timer slack (default 50 us) to batch wake-ups; 1 ns asks for hrtimer precision.
_PR_SET_TIMERSLACK = 29


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
