"""Monitor: one :class:`~iogauge.guarantee.policy.Observation` per interval, from the kernel.

* Device totals come from the live collector (:class:`~iogauge.collector.linux.LinuxCollector`
  on ``/proc/diskstats``): r/s, w/s, %util, await, aqu-sz exactly as ``iostat -x`` prints them
  ([sysstat] compute_ext_disk_stats), over the monotonic interval between two snapshots —
  of the *whole disk*, since throttles and contention are per disk even when a partition
  was named.
* Per-cgroup completions come from the hierarchy (v2 ``io.stat`` rios/wios, v1
  ``blkio.throttle.io_serviced_recursive`` Read/Write), read right after the diskstats
  snapshot and turned into rates over their own monotonic interval.
* v2 only: each group's ``io.pressure`` "some" total gives the share of the interval in
  which one of its tasks stalled on I/O — the policy's evidence that A wanted more I/O.

A cgroup counter that goes backwards (the cgroup was removed and re-created) gives an idle
interval for that group and a message, never a negative rate; a group whose files vanish
is reported once and treated as idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iogauge.collector.linux import LinuxCollector
from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators import BlockDevice, Hierarchy
from iogauge.guarantee.policy import GroupObservation, Observation


@dataclass(frozen=True)
class GroupHandle:
    """A configured cgroup.

    Attributes:
        name: the key the policy knows it by (the directory as text).
        path: the cgroup directory.
        role: ``protected`` or ``throttled``.
    """

    name: str
    path: Path
    role: str


@dataclass
class MonitorSample:
    """One interval.

    Attributes:
        obs: what the policy gets.
        ts_us: wall-clock end of the interval, UTC µs.
        interval_s: device interval (monotonic).
        messages: things the operator should know (a group vanished, a counter reset).
    """

    obs: Observation
    ts_us: int
    interval_s: float
    messages: list[str] = field(default_factory=list)


@dataclass
class _Counter:
    reads: int
    writes: int
    stall_us: int | None
    mono: float


def _finite(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


class Monitor:
    """Samples the device and the groups.

    Args:
        device: the resolved disk.
        groups: protected and throttled groups.
        hierarchy: where their counters are read.
        procfs_root, sysfs_root: for the collector (tests pass fixture trees).
        monotonic, wall: clocks (injectable for tests).
    """

    def __init__(self, device: BlockDevice, groups: Sequence[GroupHandle], hierarchy: Hierarchy,
                 *, procfs_root: str | Path = "/proc", sysfs_root: str | Path = "/sys",
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.device = device
        self.groups = list(groups)
        self.hierarchy = hierarchy
        self.collector = LinuxCollector(procfs_root, sysfs_root, devices=[device.disk],
                                        include_idle=True, monotonic=monotonic, wall=wall)
        self._monotonic = monotonic
        self._prev: dict[str, _Counter | None] = {}
        self._reported: set[str] = set()

    def prime(self) -> list[str]:
        """Baseline snapshot of the device and every group."""
        msgs = [m for m in self.collector.prime() if self.device.disk in m]
        for g in self.groups:
            self._prev[g.name], msg = self._read(g)
            if msg:
                msgs.append(msg)
        return msgs

    def sample(self) -> MonitorSample:
        """The interval since the previous call (or :meth:`prime`)."""
        res = self.collector.sample()
        messages = [m for m in res.messages if self.device.disk in m]
        if self.device.disk not in res.devices:
            if any(self.device.disk in m and "disappeared" in m for m in res.messages):
                raise GuaranteeError(f"device {self.device.disk} disappeared from "
                                     f"{self.collector.procfs_root / 'diskstats'}")
            # Just (re)appeared: baselined now, reported from the next sample.
            return MonitorSample(Observation(1.0, None, 0.0, 0.0), res.ts_us, 0.0, messages)
        i = res.devices.index(self.device.disk)
        m = {k: float(v[i]) for k, v in res.metrics.items()}
        interval = float(res.interval_s[i])
        groups: dict[str, GroupObservation] = {}
        for g in self.groups:
            cur, msg = self._read(g)
            if msg:
                messages.append(msg)
            prev = self._prev.get(g.name)
            self._prev[g.name] = cur
            groups[g.name] = self._rates(g, prev, cur, messages)
        if res.reset[i]:
            messages.append(f"device {self.device.disk}: counters reset; interval skipped")
            obs = Observation(interval, None, 0.0, 0.0, groups)
        else:
            obs = Observation(
                interval_s=interval, util_pct=_finite(m["util_pct"]),
                r_iops=_finite(m["r_iops"]) or 0.0, w_iops=_finite(m["w_iops"]) or 0.0,
                groups=groups, await_ms=_finite(m["await_ms"]), aqu_sz=_finite(m["aqu_sz"]),
                r_await_ms=_finite(m["r_await_ms"]), w_await_ms=_finite(m["w_await_ms"]))
        return MonitorSample(obs, res.ts_us, interval, messages)

    def protected_active(self) -> bool:
        """A protected group completed an I/O or stalled on I/O since the last
        :meth:`sample` (a cheap look between decisions: two small files per group, no
        baseline moved)."""
        for g in self.groups:
            if g.role != "protected":
                continue
            prev = self._prev.get(g.name)
            cur, _ = self._read(g)
            if prev is None or cur is None:
                continue
            if cur.reads > prev.reads or cur.writes > prev.writes:
                return True
            if cur.stall_us is not None and prev.stall_us is not None \
                    and cur.stall_us > prev.stall_us:
                return True
        return False

    # -- internals ---------------------------------------------------------------------
    def _read(self, g: GroupHandle) -> tuple[_Counter | None, str | None]:
        try:
            r, w = self.hierarchy.read_counts(g.path, self.device.devnum)
            stall = self.hierarchy.read_stall_us(g.path)
        except GuaranteeError as exc:
            if g.name in self._reported:
                return None, None
            self._reported.add(g.name)
            return None, f"{g.role} cgroup {g.path}: {exc}; treated as idle"
        if g.name in self._reported:
            self._reported.discard(g.name)
            return _Counter(r, w, stall, self._monotonic()), (f"{g.role} cgroup {g.path} is "
                                                               "readable again")
        return _Counter(r, w, stall, self._monotonic()), None

    def _rates(self, g: GroupHandle, prev: _Counter | None, cur: _Counter | None,
               messages: list[str]) -> GroupObservation:
        if prev is None or cur is None:
            return GroupObservation(0.0, 0.0)
        dt = cur.mono - prev.mono
        dr, dw = cur.reads - prev.reads, cur.writes - prev.writes
        if dt <= 0:
            return GroupObservation(0.0, 0.0)
        if dr < 0 or dw < 0:
            messages.append(f"{g.role} cgroup {g.path}: I/O counters went backwards (cgroup "
                            "re-created?); interval counted as idle")
            return GroupObservation(0.0, 0.0)
        stall = None
        if cur.stall_us is not None and prev.stall_us is not None \
                and cur.stall_us >= prev.stall_us:
            stall = min(100.0, (cur.stall_us - prev.stall_us) / (dt * 1e6) * 100.0)
        return GroupObservation(dr / dt, dw / dt, None, stall)


__all__ = ["GroupHandle", "Monitor", "MonitorSample"]
