"""What the simulator exchanges with its caller: group limits, per-interval observations for a
controller, and the result of a run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.collector.diskstats import IDX
from iogauge.lab.workloads import Workload
from iogauge.model.sampleframe import SampleFrame

SOURCE = "lab-sim"
#: Burst allowance of a throttle: blk-throttle's slice on rotational devices (HZ/10).
THROTTLE_SLICE_S = 0.1
#: Default start of virtual time for timestamps (any fixed instant keeps runs reproducible).
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


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
