"""The policies' vocabulary: observations, decisions, states, targets, limits.

Pure data; see :mod:`iogauge.guarantee.policy` for how a policy is driven.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal, Protocol

PolicyName = Literal["adaptive", "paper"]
POLICY_NAMES: tuple[PolicyName, ...] = ("adaptive", "paper")

#: The kernel stores IOPS limits as ``unsigned int`` and treats UINT_MAX as "no limit"
#: (block/blk-throttle.c); a larger number written to v1 wraps (5e9 reads back 705032704).
MAX_LIMIT_IOPS = 2**32 - 2


class State(StrEnum):
    """What a policy did in one step (``Decision.state``; stored and printed as its value).

    Paper policy ([Oe] §4, see :class:`~iogauge.guarantee.policy.paper.PaperPolicy`):
    ``idle``, ``compute``, ``counting``, ``cut``, ``update``, ``reset``. Adaptive policy
    (:class:`~iogauge.guarantee.policy.adaptive.AdaptivePolicy`): the rest.
    """

    # paper
    IDLE = "idle"
    COMPUTE = "compute"
    COUNTING = "counting"
    CUT = "cut"
    UPDATE = "update"
    RESET = "reset"
    # adaptive
    WARMUP = "warmup"
    HOLD = "hold"
    PROTECT = "protect"
    KNEE = "knee"
    RECOVER = "recover"
    PROBE = "probe"
    STRETCH = "stretch"
    A_LIMITED = "a-limited"
    #: Latency knees whose cuts did not lower the await: the cuts undone.
    KNEE_UNDONE = "knee-undone"
    INFEASIBLE = "infeasible"
    #: A shows no demand: its floor is not reserved, B's limit opens toward the device.
    OPEN = "open"
    #: A's demand returned while B was open: A's floor reserved again at once.
    WAKE = "wake"


# ---- observations and decisions ------------------------------------------------------------
@dataclass(frozen=True)
class GroupObservation:
    """What one cgroup did on the device during the interval.

    Attributes:
        r_iops, w_iops: completed (dispatched) reads and writes per second of the group on the
            device (cgroup v2 ``io.stat`` rios/wios, v1 ``blkio.throttle.io_serviced``
            Read/Write; or the simulator's completions).
        demand_iops: I/Os per second the group *wanted* to do, when known (the simulator
            knows its offered load; a live system does not). None = unknown.
        stall_pct: share of the interval in which some task of the group was stalled on I/O
            (cgroup v2 ``io.pressure`` "some" total, PSI), in %. None = not available (v1).
    """

    r_iops: float
    w_iops: float
    demand_iops: float | None = None
    stall_pct: float | None = None

    @property
    def iops(self) -> float:
        """Reads + writes per second."""
        return self.r_iops + self.w_iops


@dataclass(frozen=True)
class Observation:
    """One interval of the device and its groups, as the policy sees it.

    Attributes:
        interval_s: length of the interval in seconds (> 0).
        util_pct: device %util over the interval (iostat -x; 0-100). None where unknown.
        r_iops, w_iops: device completions per second (iostat r/s, w/s) — every user of the
            device, not only the configured groups.
        groups: per-group observations, keyed by the names used in :class:`Targets`.
        await_ms: device average latency (iostat await), None where unknown.
        aqu_sz: device average queue size (iostat aqu-sz), None where unknown.
        r_await_ms, w_await_ms: per-direction device latency, None where unknown.
    """

    interval_s: float
    util_pct: float | None
    r_iops: float
    w_iops: float
    groups: Mapping[str, GroupObservation] = field(default_factory=dict)
    await_ms: float | None = None
    aqu_sz: float | None = None
    r_await_ms: float | None = None
    w_await_ms: float | None = None

    @property
    def iops(self) -> float:
        """Device reads + writes per second."""
        return self.r_iops + self.w_iops

    def group(self, name: str) -> GroupObservation:
        """The group's observation; an absent group is idle (0 IOPS, nothing known)."""
        return self.groups.get(name, _IDLE)


_IDLE = GroupObservation(0.0, 0.0)


@dataclass(frozen=True)
class GroupLimit:
    """Limits for one throttled group: whole I/Os per second, None = unlimited.

    Attributes:
        riops: read I/Os per second (cgroup v2 ``riops``, v1 ``read_iops_device``).
        wiops: write I/Os per second (``wiops``, ``write_iops_device``).
    """

    riops: int | None
    wiops: int | None

    @property
    def iops(self) -> int | None:
        """riops + wiops, None if either direction is unlimited."""
        if self.riops is None or self.wiops is None:
            return None
        return self.riops + self.wiops


UNLIMITED = GroupLimit(None, None)


@dataclass(frozen=True)
class Decision:
    """What a policy decided after one observation.

    Attributes:
        limits: every throttled group -> its limits (``GroupLimit(None, None)`` = unlimited).
            Never contains a protected group.
        x_pct: the target total busy rate X in % (paper: the current X; adaptive: the
            effective target), None before the policy has an estimate.
        state: short state name (see each policy's docstring).
        reason: one sentence with the numbers behind the decision.
        busy_per_iops: % of the device per IOPS used for the decision (None if unknown).
        capacity_iops: estimated IOPS at 100 % busy for the current mix (None if unknown).
        a_miss: a protected group with demand got less than its floor this interval.
        warnings: things the operator must know (an infeasible floor, with its numbers);
            repeated only when they change.
        infeasible: ``warnings`` says the floors need more than the device gives (what
            ``--on-infeasible refuse`` stops on).
    """

    limits: Mapping[str, GroupLimit]
    x_pct: float | None
    state: State
    reason: str
    busy_per_iops: float | None = None
    capacity_iops: float | None = None
    a_miss: bool = False
    warnings: tuple[str, ...] = ()
    infeasible: bool = False


class Policy(Protocol):
    """A guarantee policy: ``step`` once per interval, in order; state lives in the object."""

    name: str
    targets: Targets

    def step(self, obs: Observation) -> Decision:
        """Decide the throttled groups' limits from the interval just observed."""
        ...

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """Change the protected groups' floors from the next step on ([Oe]'s evaluations
        raise and lower A's target mid-run: Tables 4-6)."""
        ...


# ---- configuration ---------------------------------------------------------------------
@dataclass(frozen=True)
class Targets:
    """Who is protected, who is throttled, and what the device is.

    Attributes:
        protected: group name -> floor in IOPS (reads + writes) guaranteed to it ([Oe]'s
            ``a``; several protected groups add up).
        throttled: names of the groups whose I/O is limited to make room (B).
        b_min_iops: every throttled group keeps at least this many reads *and* this many
            writes per second, whatever the policy computes (>= 1: a limit of 0 would mean
            "no limit" to cgroup v1).
        device_parallel: True for devices that serve many requests at once (SSD, NVMe,
            RAID, most dm/md): their %util reaches 100 long before their capacity, so the
            adaptive policy estimates capacity from the latency knee instead.
        capacity_hint_iops: the device's capacity if the operator knows it (IOPS at 100 %
            busy for the expected mix); used as the starting estimate and for the up-front
            feasibility check. None: learned from observations.
        limit_grid_iops: the throttle enforces a limit of at least this many IOPS only in
            whole multiples of it, so limits are written as ``grid·floor(limit/grid)`` -- what
            the group will actually get, which keeps the policy's own view of B's room true.
            The kernel's blk-throttle (cgroup v1 ``*_iops_device`` and v2 ``io.max``)
            dispatches a backlogged group's I/Os per 100 ms slice and trims each slice with
            an integer division (block/blk-throttle.c ``throtl_trim_slice``: ``io_trim =
            iops·throtl_slice/HZ``, ``throtl_slice = HZ/10``), so a limit L >= 10 delivers
            ``10·floor(L/10)``: measured on kernel 6.18 (loop device, 2 x 8 s per limit),
            11 -> 9.5-10.1, 19 -> 9.7-9.9, 21 -> 18.9-21.2, 27 -> 17.7-19.1, 34 -> 27.6-29.1,
            40 -> 38.6-40.0 reads and writes/s. 1: no grid (a throttle that enforces any
            whole rate, e.g. the lab simulator's).
    """

    protected: Mapping[str, float]
    throttled: tuple[str, ...]
    b_min_iops: int = 1
    device_parallel: bool = False
    capacity_hint_iops: float | None = None
    limit_grid_iops: int = 1

    def __post_init__(self) -> None:
        if not self.protected:
            raise ValueError("at least one protected group (with a floor in IOPS) is needed")
        if not self.throttled:
            raise ValueError("at least one throttled group is needed")
        both = set(self.protected) & set(self.throttled)
        if both:
            raise ValueError(f"a group cannot be both protected and throttled: "
                             f"{', '.join(sorted(both))} (A is never throttled)")
        if len(set(self.throttled)) != len(self.throttled):
            raise ValueError("a throttled group is listed twice")
        for name, floor in self.protected.items():
            if not (math.isfinite(floor) and floor > 0):
                raise ValueError(f"floor of {name} must be a positive number of IOPS, "
                                 f"got {floor}")
        if self.b_min_iops < 1:
            raise ValueError(f"b_min_iops must be >= 1 (0 means 'no limit' to the kernel), "
                             f"got {self.b_min_iops}")
        if self.capacity_hint_iops is not None and not self.capacity_hint_iops > 0:
            raise ValueError(f"capacity_hint_iops must be > 0, got {self.capacity_hint_iops}")
        if self.limit_grid_iops < 1:
            raise ValueError(f"limit_grid_iops must be >= 1, got {self.limit_grid_iops}")

    def on_grid(self, limit: int) -> int:
        """``limit`` as the throttle enforces it: ``grid·floor(limit/grid)`` from one grid
        step up, unchanged below (see ``limit_grid_iops``)."""
        g = self.limit_grid_iops
        return limit if g <= 1 or limit < g else limit - limit % g

    @property
    def floor_iops(self) -> float:
        """Sum of the protected groups' floors (the paper's ``a``)."""
        return float(sum(self.protected.values()))




def retargeted(targets: Targets, floors: Mapping[str, float]) -> Targets:
    """``targets`` with new floors for the same protected groups (checked)."""
    if set(floors) != set(targets.protected):
        raise ValueError(f"new floors must name exactly the protected groups "
                         f"{sorted(targets.protected)}, got {sorted(floors)}")
    return replace(targets, protected=dict(floors))
