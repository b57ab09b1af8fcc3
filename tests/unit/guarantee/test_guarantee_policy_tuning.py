"""Three changes found by running seed 004's evaluations on the lab's emulated HDD
(benchmarks/guarantee_eval.py): the kernel's limit grid, the I/O-weighted busy_per_iops, and
limits that follow a floor change at once. Values are worked out by hand in the comments."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from cgroup_fixtures import SYSFS

from iogauge.guarantee.config import GuaranteeConfig, ProtectSpec
from iogauge.guarantee.controller import KERNEL_LIMIT_GRID_IOPS, Controller
from iogauge.guarantee.policy import (
    AdaptiveParams,
    AdaptivePolicy,
    GroupLimit,
    GroupObservation,
    Observation,
    PaperPolicy,
    Targets,
    _UtilCosts,
    grid_targets,
)

#: Tests whose numbers are worked out for X = 90 % (the default x_max_pct is 95 %), with B's
#: budget held to X's (no stretch while A is fine: stretch_step 0).
X90 = AdaptiveParams(x_max_pct=90.0, stretch_step=0.0)


def _obs(a: float = 50.0, b: float = 50.0, util: float = 90.0) -> Observation:
    """A reads ``a``/s, B reads ``b``/s, nothing else: 0.9 % busy per IOPS at the defaults."""
    return Observation(1.0, util, a + b, 0.0, {"A": GroupObservation(a, 0.0),
                                                "B": GroupObservation(b, 0.0)})


# ---- the kernel's limit grid -----------------------------------------------------------------

def test_on_grid_floors_limits_from_one_step_up() -> None:
    t = Targets({"A": 10.0}, ("B",), limit_grid_iops=10)
    # 10·floor(L/10) from 10 on; below the grid the limit is kept as written.
    assert [t.on_grid(v) for v in (1, 9, 10, 19, 27, 369)] == [1, 9, 10, 10, 20, 360]
    assert Targets({"A": 10.0}, ("B",)).on_grid(27) == 27  # grid 1: no change
    with pytest.raises(ValueError, match="limit_grid_iops"):
        Targets({"A": 10.0}, ("B",), limit_grid_iops=0)


def test_grid_targets_bind_the_larger_direction_and_free_the_other() -> None:
    t = Targets({"A": 10.0}, ("B",), limit_grid_iops=10)
    # 72 + 18 at 80 % reads: reads floored to 70 (bind), writes raised to 20 (free): B gets
    # 70 / 0.8 = 87.5, not min(70 / 0.8, 10 / 0.2) = 50.
    assert grid_targets(t, 72.0, 18.0) == (70, 20)
    assert grid_targets(t, 18.0, 72.0) == (20, 70)
    # From half a step the smaller direction goes up to the grid (45 + 6 -> 40 + 10); under
    # half a step it stays (a group held near its minimum stays there).
    assert grid_targets(t, 45.0, 6.0) == (40, 10)
    assert grid_targets(t, 45.0, 4.0) == (40, 4.0)
    assert grid_targets(t, 5.0, 3.0) == (5.0, 3.0)
    assert grid_targets(Targets({"A": 10.0}, ("B",)), 72.0, 18.0) == (72.0, 18.0)


def test_grid_targets_keep_the_binding_direction_of_an_even_mix() -> None:
    t = Targets({"A": 10.0}, ("B",), limit_grid_iops=10)
    # A 50:50 group at ~37 + 37: whichever is larger this interval would bind, flipping
    # 30 + 40 and 40 + 30 with the noise. The direction that bound keeps binding until the
    # other is larger by half a step (5).
    assert grid_targets(t, 36.9, 37.1) == (40, 30)
    assert grid_targets(t, 36.9, 37.1, bind="r") == (30, 40)
    assert grid_targets(t, 36.9, 41.8, bind="r") == (30, 50)
    assert grid_targets(t, 36.9, 42.0, bind="r") == (40, 40)
    assert grid_targets(t, 41.5, 37.0, bind="w") == (50, 30)
    assert grid_targets(t, 42.1, 37.0, bind="w") == (40, 40)


def test_paper_policy_writes_grid_limits() -> None:
    # busy_per_iops = 90 / 100 = 0.9 %; a_busy = 40 x 0.9 = 36 %; b = (95 - 36) / 0.9 =
    # 65.6 IOPS; B only reads, so reads get 90 % (rw_min_share keeps 10 % for writes):
    # 59.0 -> 59 and 6.56 -> 6; on the grid reads bind at 50 and writes go up to 10.
    obs = _obs(a=40.0, b=60.0)
    plain = PaperPolicy(Targets({"A": 40.0}, ("B",))).step(obs)
    grid = PaperPolicy(Targets({"A": 40.0}, ("B",), limit_grid_iops=10)).step(obs)
    assert plain.limits["B"] == GroupLimit(59, 6)
    assert grid.limits["B"] == GroupLimit(50, 10)


def test_adaptive_moves_on_the_grid_and_reaches_the_next_point() -> None:
    policy = AdaptivePolicy(Targets({"A": 50.0}, ("B",), limit_grid_iops=10))
    # From 20: a target of 35 is bounded to 20 + 25 % = 25, which the grid takes back to 20;
    # the policy takes the one grid step to 30 instead of sticking at 20.
    assert policy._move(20, 35.0, force=False) == 30
    # On the grid the deadband is at least half a step (5): 16 is kept at 20 (4 over rather
    # than 6 under); 14 is not: 10 (a written 14 would deliver 10 anyway). When A just
    # missed (force) there is no deadband.
    assert policy._move(20, 16.0, force=False) == 20
    assert policy._move(20, 14.0, force=False) == 10
    assert policy._move(20, 16.0, force=True) == 10
    # Below one grid step the deadband is the ordinary one: max(2 IOPS, 5 %).
    assert policy._move(8, 6.0, force=False) == 6
    # Below one grid step nothing changes: 8 -> at most 8 + 4 = 12, on the grid 10.
    assert policy._move(8, 30.0, force=False) == 10


def test_a_direction_raised_to_the_grid_does_not_count_as_slack() -> None:
    policy = AdaptivePolicy(Targets({"A": 5.0}, ("B",), limit_grid_iops=10), X90)
    # 55 IOPS at 82.5 % busy: 1.5 %/IOPS; B's share 0.90 - 5 x 0.015 = 0.825 = 55 IOPS, at
    # B's 80:20 mix 44 + 11 -> reads bind at 40, writes raised to 20.
    obs = Observation(1.0, 82.5, 45.0, 10.0, {"A": GroupObservation(5.0, 0.0),
                                               "B": GroupObservation(40.0, 10.0)})
    for _ in range(3):
        d = policy.step(obs)
    assert d.limits["B"] == GroupLimit(40, 20) and policy.groups["B"].raised == "w"
    # B then does 40 + 6: reads pinned, writes far under their limit -- slack the grid made,
    # not B's choice. It must not count as "reads want more" (recover_after = 3 such
    # intervals would move mix_step = 10 % of the split to reads, and again, starving the
    # writes); B's read share follows what B does instead (EWMA toward 40/46 = 0.87).
    low = Observation(1.0, 76.5, 45.0, 6.0, {"A": GroupObservation(5.0, 0.0),
                                              "B": GroupObservation(40.0, 6.0)})
    shares = []
    for _ in range(6):
        policy.step(low)
        assert policy.groups["B"].pinned == 0
        shares.append(policy.groups["B"].read_share or 0.0)
    # 0.8 + 0.3 x (0.8696 - 0.8) = 0.8209, then 0.8355 ...
    assert shares[0] == pytest.approx(0.8 + 0.3 * (40 / 46 - 0.8))
    assert all(a < b < 40 / 46 for a, b in itertools.pairwise(shares))


def _held_b(policy: AdaptivePolicy, *, a: float = 5.0, used: float = 1.0) -> Observation:
    """A reads ``a``/s; B reads ``used`` x its current read limit (held there when 1) and
    writes nothing; 2 % busy per IOPS."""
    lim = policy.groups["B"].limit.riops
    b = 40.0 if lim is None else used * lim
    return Observation(1.0, 2.0 * (a + b), a + b, 0.0, {"A": GroupObservation(a, 0.0),
                                                       "B": GroupObservation(b, 0.0)})


def _run(policy: AdaptivePolicy, n: int, **kw: float) -> list[int | None]:
    return [policy.step(_held_b(policy, **kw)).limits["B"].riops for _ in range(n)]


def test_adaptive_dithers_a_held_limit_between_grid_points() -> None:
    # X 90 %, 2 %/IOPS; B's share 0.90 - 5 x 0.02 = 0.80 = 40 IOPS; B reads only, so reads
    # get 90 % (min_share keeps 10 % for writes): 36 reads/s, 4 writes/s. On the grid 36 is 30;
    # held there, B alternates 30 and 40 so that it gets 36 on average: the carry goes
    # 6 -> 2 -> 8 -> 4 -> 0, the limits 30, 40, 30, 40, 40, then again.
    policy = AdaptivePolicy(Targets({"A": 5.0}, ("B",), limit_grid_iops=10), X90)
    assert _run(policy, 2) == [None, 30]  # warm-up, then on the grid
    limits = _run(policy, 10)
    assert limits == [30, 40, 30, 40, 40] * 2
    assert sum(limits) / len(limits) == pytest.approx(36.0)
    assert policy.groups["B"].limit.wiops == 4  # writes: under half a step, not dithered


def test_adaptive_dithers_only_a_held_limit_with_a_and_the_device_fine() -> None:
    # B using 80 % of its limit is held by its own demand: nothing to make up.
    policy = AdaptivePolicy(Targets({"A": 5.0}, ("B",), limit_grid_iops=10), X90)
    _run(policy, 2)
    assert _run(policy, 4, used=0.8) == [30] * 4
    assert policy.groups["B"].carry_r == 0.0
    # Off by parameter, or without a grid: the floored limit (or the exact one) stays.
    off = AdaptivePolicy(Targets({"A": 5.0}, ("B",), limit_grid_iops=10),
                         AdaptiveParams(x_max_pct=90.0, grid_dither=False, stretch_step=0.0))
    assert _run(off, 8)[1:] == [30] * 7
    exact = AdaptivePolicy(Targets({"A": 5.0}, ("B",)), X90)
    assert _run(exact, 8)[1:] == [36] * 7
    # A miss (A at 3 of 5 with the device congested) drops the carry and cuts B at once.
    policy = AdaptivePolicy(Targets({"A": 5.0}, ("B",), limit_grid_iops=10), X90)
    _run(policy, 4)
    assert policy.groups["B"].carry_r > 0
    lim = policy.groups["B"].limit.riops
    assert lim is not None
    d = policy.step(Observation(1.0, 100.0, 3.0 + lim, 0.0, {
        "A": GroupObservation(3.0, 0.0, demand_iops=5.0), "B": GroupObservation(lim, 0.0)}))
    assert d.state == "protect" and policy.groups["B"].carry_r == 0.0
    assert d.limits["B"].riops is not None and d.limits["B"].riops < lim


def test_controller_writes_limits_on_the_kernels_grid(tmp_path: Path, v1_root: Path,
                                                       mounts_file: Path) -> None:
    cfg = GuaranteeConfig(device="sda", protect=(ProtectSpec(v1_root / "a", 50.0),),
                          throttle=(v1_root / "b",), state=tmp_path / "g.json",
                          record=False)
    ctl = Controller(cfg, say=lambda _l: None, procfs_root=tmp_path, sysfs_root=SYSFS,
                     mounts_file=mounts_file, geteuid=lambda: 0)
    assert ctl.setup().policy.targets.limit_grid_iops == KERNEL_LIMIT_GRID_IOPS == 10


# ---- busy_per_iops weighted by I/Os ---------------------------------------------------------

def test_a_nearly_idle_interval_barely_moves_the_cost() -> None:
    c = _UtilCosts(alpha=0.3)
    # Start-up: 2 I/Os in 4.2 % busy (2.1 %/IOPS), then 62 IOPS at 77.9 % (1.2565 %/IOPS).
    c.update(2.0, 0.0, 0.042)
    for _ in range(3):
        c.update(62.0, 0.0, 0.779)
    # Decayed sums (k = 0.7): Σu = 0.042·0.7³ + 0.779·(0.7² + 0.7 + 1) = 1.720416,
    # Σn = 2·0.7³ + 62·2.19 = 136.466: 1.2607 %/IOPS, 0.3 % above the steady 1.2565.
    # (A mean of the per-interval ratios would still be 23 % high: 1.546 %/IOPS.)
    cr, cw = c.costs() or (0.0, 0.0)
    assert cr == cw == pytest.approx(1.720416 / 136.466, rel=1e-9)
    assert cr == pytest.approx(0.779 / 62, rel=0.004)


# ---- a floor change moves the limits at once --------------------------------------------------

def test_a_lower_floor_gives_b_its_new_room_in_one_decision() -> None:
    policy = AdaptivePolicy(Targets({"A": 50.0}, ("B",)))
    assert policy.step(_obs()).state == "warmup"  # 1 of warmup_intervals = 2
    # Cost 0.9 %/IOPS; B's share X - A = 0.95 - 50 x 0.009 = 0.50; B reads only, so 90 % of
    # it for reads: 0.45 / 0.009 = 50, writes 0.05 / 0.009 = 5.6 -> 5.
    assert policy.step(_obs()).limits["B"] == GroupLimit(50, 5)
    policy.set_floors({"A": 5.0})
    # 0.95 - 5 x 0.009 = 0.905: reads 0.8145 / 0.009 = 90.5 -> 90, writes 10.06 -> 10, in
    # one decision -- past the 25 % step bound (50 -> at most 63).
    d = policy.step(_obs())
    assert d.limits["B"] == GroupLimit(90, 10)
    assert "floors changed" in d.reason
    # Afterwards the bounds apply again: nothing left to move, the limits hold.
    assert policy.step(_obs()).limits["B"] == GroupLimit(90, 10)


def test_a_higher_floor_cuts_b_in_one_decision() -> None:
    policy = AdaptivePolicy(Targets({"A": 5.0}, ("B",)))
    policy.step(_obs())
    assert policy.step(_obs()).limits["B"] == GroupLimit(90, 10)
    policy.set_floors({"A": 80.0})
    # 0.95 - 80 x 0.009 = 0.23: reads 0.207 / 0.009 = 23, writes 2.6 -> 2 -- past the 50 %
    # step bound (90 -> at least 45).
    assert policy.step(_obs()).limits["B"] == GroupLimit(23, 2)
