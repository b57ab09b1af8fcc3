"""Guarantee policies: observations + the policy's own state -> per-group IOPS limits.

Pure: no I/O, no clock, no randomness. The same object is driven by the live controller
(:mod:`iogauge.guarantee.controller`, real time, real cgroups) and by the lab simulator
(virtual time): each calls :meth:`Policy.step` once per interval with an :class:`Observation`
and applies the :class:`Decision` it returns. Everything the policy remembers lives inside
the policy object, so two runs fed the same observations make the same decisions.

Vocabulary ([Oe]):

* **A** — the *protected* groups, each with a floor in IOPS (the paper's ``a``). A is never
  throttled: a decision only ever carries limits for throttled groups.
* **B** — the *throttled* groups. Their combined budget is shared among them; every limit
  is at least ``Targets.b_min_iops`` per direction.
* **busy_per_iops** — ``%util / (r/s + w/s)`` in % per IOPS ([Oe] §4): the share of the
  device one I/O per second costs.
* **X** — the target total busy rate in %, kept below the *proportional-limit busy rate* (the
  knee past which %util stops growing linearly with IOPS; 80-95 % in [Oe]'s workloads).

Driving a policy (what the lab simulator does)::

    policy = make_policy("adaptive", Targets(protected={"A": 100.0}, throttled=("B",)))
    limits = {}
    for each interval of interval_s seconds:
        # device totals and per-group completions of the interval just ended, under `limits`
        obs = Observation(interval_s=1.0, util_pct=87.0, r_iops=150.0, w_iops=40.0,
                          groups={"A": GroupObservation(r_iops=98.0, w_iops=0.0,
                                                        demand_iops=120.0),
                                  "B": GroupObservation(r_iops=52.0, w_iops=40.0)},
                          await_ms=9.5, aqu_sz=1.8)
        decision = policy.step(obs)
        limits = decision.limits          # {"B": GroupLimit(riops=55, wiops=41)}
        # apply: None = unlimited; ints are I/Os per second, >= 1
    policy.set_floors({"A": 50.0})        # A's target changes mid-run ([Oe] Tables 4-6)

A group missing from ``obs.groups`` is taken as idle this interval (0 IOPS, no demand
known). ``Decision.limits`` always names every throttled group; ``GroupLimit(None, None)``
means "no limit". Limits are whole IOPS because the kernel takes integers (cgroup v2
``io.max riops=``/``wiops=``, v1 ``blkio.throttle.*_iops_device``) — the simulator applies the
same integers, so virtual and real runs agree.

Two policies:

* :class:`PaperPolicy` (``"paper"``) — [Oe] §4 exactly, constants in :class:`PaperParams`.
* :class:`AdaptivePolicy` (``"adaptive"``, the default) — closes the loop on A's delivered
  IOPS, estimates capacity from %util (single-spindle devices) or from the latency knee
  (SSD/NVMe/RAID, where %util saturates long before the device does), damps with EWMA,
  hysteresis and bounded steps, sets separate read and write limits, never creates load
  to learn, and on a single spindle stretches B past the target busy rate while A keeps its
  floor; while A shows no demand it does not reserve A's floor at all: B's limits open, and
  A's floor is reserved again as soon as A's demand returns (work conservation;
  ``AdaptiveParams.reserve_idle`` keeps the reservation). Constants in
  :class:`AdaptiveParams`.

Modules: :mod:`.types` (observations, decisions, states, targets), :mod:`.params`,
:mod:`.budget` (shared arithmetic), :mod:`.paper`, :mod:`.estimators` and :mod:`.adaptive`.
"""

from __future__ import annotations

from iogauge.guarantee.policy.adaptive import AdaptivePolicy
from iogauge.guarantee.policy.budget import grid_targets, split_budget
from iogauge.guarantee.policy.estimators import _LatencyCapacity, _UtilCosts
from iogauge.guarantee.policy.paper import PaperPolicy
from iogauge.guarantee.policy.params import AdaptiveParams, PaperParams
from iogauge.guarantee.policy.types import (
    MAX_LIMIT_IOPS,
    POLICY_NAMES,
    UNLIMITED,
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    Policy,
    PolicyName,
    State,
    Targets,
    retargeted,
)


def make_policy(name: str, targets: Targets, *, paper: PaperParams | None = None,
                adaptive: AdaptiveParams | None = None) -> Policy:
    """The policy called ``name`` ("adaptive" or "paper") for ``targets``."""
    if name == "paper":
        return PaperPolicy(targets, paper)
    if name == "adaptive":
        return AdaptivePolicy(targets, adaptive)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


__all__ = [
    "MAX_LIMIT_IOPS", "POLICY_NAMES", "UNLIMITED", "AdaptiveParams", "AdaptivePolicy",
    "Decision", "GroupLimit", "GroupObservation", "Observation", "PaperParams", "PaperPolicy",
    "Policy", "PolicyName", "State", "Targets", "_LatencyCapacity", "_UtilCosts",
    "grid_targets", "make_policy", "retargeted", "split_budget",
]
