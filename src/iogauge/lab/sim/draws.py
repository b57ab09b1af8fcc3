"""Per-workload random draws in numpy batches, the workloads' issue limiters and the groups'
throttle token buckets (the virtual-time twin of blk-throttle).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from iogauge.lab.sim.interval import THROTTLE_SLICE_S
from iogauge.lab.workloads import Workload


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
