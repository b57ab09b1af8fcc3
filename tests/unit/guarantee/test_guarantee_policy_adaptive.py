"""The adaptive policy against simulated constant plants, plus its safety properties.

The plant is a device of fixed capacity: the groups' offered I/O (B's clipped by its limits)
costs ``1/cap`` of the device per read/s and ``write_cost/cap`` per write/s; when the load
exceeds the device every group is served in proportion (``served = offered / load``).
Util mode reports %util = load·100 (one spindle); the parallel ("ssd") plant reports the
M/M/c latency of ``channels`` servers (Sakasegawa's approximation), so %util means nothing
and the policy must find the knee from latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iogauge.guarantee.policy import (
    MAX_LIMIT_IOPS,
    UNLIMITED,
    AdaptiveParams,
    AdaptivePolicy,
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    Targets,
    _UtilCosts,
    make_policy,
    split_budget,
)


@dataclass
class Plant:
    cap: float
    floor: float
    a_demand: float
    b_demand_r: float
    b_demand_w: float
    write_cost: float = 1.0
    a_read_share: float = 1.0
    kind: str = "util"  # or "ssd"
    channels: int = 8
    report_demand: bool = True
    groups: tuple[str, ...] = ("B",)
    b_split: tuple[float, ...] = (1.0,)
    history: list[Observation] = field(default_factory=list)

    def observe(self, limits: Mapping[str, GroupLimit]) -> Observation:
        ar = self.a_demand * self.a_read_share
        aw = self.a_demand - ar
        offered: dict[str, tuple[float, float]] = {"A": (ar, aw)}
        for g, share in zip(self.groups, self.b_split, strict=True):
            lim = limits.get(g, UNLIMITED)
            r = self.b_demand_r * share
            w = self.b_demand_w * share
            r = r if lim.riops is None else min(r, lim.riops)
            w = w if lim.wiops is None else min(w, lim.wiops)
            offered[g] = (r, w)
        load = sum(r + self.write_cost * w for r, w in offered.values()) / self.cap
        s = 1.0 if load <= 1 else 1.0 / load
        served = {g: (r * s, w * s) for g, (r, w) in offered.items()}
        tr = sum(r for r, _ in served.values())
        tw = sum(w for _, w in served.values())
        service_ms = self.channels / self.cap * 1000 if self.kind == "ssd" else 1000 / self.cap
        if self.kind == "ssd":
            rho = min(load, 0.99)
            c = self.channels
            wait = rho ** (math.sqrt(2 * (c + 1)) - 1) / (c * (1 - rho))
            await_ms = service_ms * (1 + wait + max(0.0, load - 0.99) * 50)
            util = min(100.0, 100.0 * min(1.0, (tr + tw) / max(self.cap, 1) * c))
        else:
            util = min(100.0, load * 100)
            await_ms = service_ms / (1 - min(load, 0.99))
        groups = {g: GroupObservation(r, w, (self.a_demand if self.report_demand else None)
                                      if g == "A" else None)
                  for g, (r, w) in served.items()}
        o = Observation(1.0, util, tr, tw, groups, await_ms=await_ms,
                        aqu_sz=(tr + tw) * await_ms / 1000)
        self.history.append(o)
        return o


def drive(policy: AdaptivePolicy, plant: Plant, steps: int) -> list[Decision]:
    limits: Mapping[str, GroupLimit] = {}
    out = []
    for _ in range(steps):
        d = policy.step(plant.observe(limits))
        limits = d.limits
        out.append(d)
    return out


def check_invariants(decisions: list[Decision], t: Targets, p: AdaptiveParams) -> None:
    """A never limited, B never below its minimum, whole IOPS, bounded steps."""
    prev: dict[str, GroupLimit] = {}
    for d in decisions:
        assert set(d.limits) == set(t.throttled)
        assert not set(d.limits) & set(t.protected)
        for g, lim in d.limits.items():
            for key in ("riops", "wiops"):
                v = getattr(lim, key)
                if v is None:
                    continue
                assert isinstance(v, int) and t.b_min_iops <= v <= MAX_LIMIT_IOPS
                old = getattr(prev.get(g, UNLIMITED), key)
                if old is not None:
                    rise = p.step_up_device_frac * (d.capacity_iops or 0.0)
                    up = old + max(math.ceil(old * p.step_up_frac), p.step_min_iops,
                                   math.floor(rise))
                    down = max(t.b_min_iops, min(old - p.step_min_iops,
                                                 math.floor(old * (1 - p.step_down_frac))))
                    assert down <= v <= up, (g, key, old, v)
        prev = dict(d.limits)


# ---- constant plants: convergence, no oscillation, A protected -------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=st.floats(100, 3000), floor_frac=st.floats(0.05, 0.6),
       a_ratio=st.floats(0.3, 1.3), b_factor=st.floats(0.2, 3.0),
       b_read=st.floats(0.0, 1.0), report=st.booleans())
def test_util_plant_converges_without_oscillation_and_protects_a(
        cap: float, floor_frac: float, a_ratio: float, b_factor: float, b_read: float,
        report: bool) -> None:
    floor = cap * floor_frac
    plant = Plant(cap=cap, floor=floor, a_demand=min(floor * a_ratio, 0.8 * cap),
                  b_demand_r=cap * b_factor * b_read, b_demand_w=cap * b_factor * (1 - b_read),
                  report_demand=report)
    t = Targets({"A": floor}, ("B",), b_min_iops=2)
    p = AdaptiveParams()
    policy = AdaptivePolicy(t, p)
    ds = drive(policy, plant, 160)
    check_invariants(ds, t, p)
    tail = ds[100:]
    assert all(d.limits == tail[0].limits for d in tail), "limits still moving"
    # Met as the policy counts it: 95 % of the floor less one whole I/O per direction A
    # uses (counting noise), at most half the floor.
    least = min(floor, plant.a_demand) * (1 - p.miss_tolerance)
    want = least - min(p.miss_slack_ios, 0.5 * least)
    assert want == pytest.approx(policy._met_at("A", min(floor, plant.a_demand), 1.0))
    for o in plant.history[100:]:
        assert o.groups["A"].iops >= want - 1e-9
    # Once converged, the only miss A may see is the one that ends B's stretch, once: a
    # later stretch stops two steps below the level that hurt (on a constant plant, below
    # the last level A was fine at).
    late = [d for d in ds[10:] if d.a_miss]
    assert len(late) <= 1, "recovery hurt A again"
    assert all("B's budget back from" in d.reason for d in late), [d.reason for d in late]
    if policy.stretch_budget_cap is not None:
        b_frac = policy.x - policy._a_frac(*(policy._costs() or (0.0, 0.0)))
        assert policy.stretch * b_frac <= policy.stretch_budget_cap * (1 + 1e-9) or \
            policy.stretch == 1.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=st.floats(1000, 50000), floor_frac=st.floats(0.05, 0.5),
       b_factor=st.floats(0.5, 3.0), channels=st.integers(4, 32))
def test_parallel_plant_finds_the_latency_knee(cap: float, floor_frac: float,
                                               b_factor: float, channels: int) -> None:
    floor = cap * floor_frac
    plant = Plant(cap=cap, floor=floor, a_demand=floor, b_demand_r=cap * b_factor,
                  b_demand_w=0.0, kind="ssd", channels=channels)
    t = Targets({"A": floor}, ("B",), device_parallel=True)
    p = AdaptiveParams()
    policy = AdaptivePolicy(t, p)
    ds = drive(policy, plant, 200)
    check_invariants(ds, t, p)
    tail = ds[150:]
    assert all(d.limits == tail[0].limits for d in tail), "limits still moving"
    l0 = policy.lat.l0
    # The baseline is the lowest latency the device showed (it never ran idle: A alone may
    # load it to 50 %), and the run stays below the knee measured from it.
    assert l0 == pytest.approx(min(o.await_ms or math.inf for o in plant.history))
    for o in plant.history[150:]:
        # At its floor as the policy and the evaluations count it: within the tolerance,
        # less one I/O an interval (an I/O counts in whole; A reads only here).
        assert o.groups["A"].iops >= floor * (1 - p.miss_tolerance) - p.miss_slack_ios
        # Held below the knee it found (of the baseline, or where the device's await
        # follows a fitted curve, of the curve's await at that load) -- unless A kept its
        # floor past it: the stretch of the capacity estimate.
        ref = policy.lat.reference(policy.lat.normalised(o.r_iops, o.w_iops))
        assert o.await_ms is not None and ref is not None
        assert o.await_ms <= ref * p.knee_latency_factor or policy.stretch > 1.0
    # Work-conserving: B gets a good share of what is left (not starved at its minimum).
    b_served = plant.history[-1].groups["B"].iops
    assert b_served >= 0.3 * (cap - floor)


def test_util_mode_settles_at_the_target_on_a_linear_device() -> None:
    # cap 400 IOPS, A wants 120 with floor 100, B floods 300 r + 200 w; B held to X's budget.
    plant = Plant(cap=400, floor=100, a_demand=120, b_demand_r=300, b_demand_w=200)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)), AdaptiveParams(stretch_step=0.0))
    ds = drive(policy, plant, 80)
    assert ds[0].state == "warmup" and ds[1].state == "protect"
    last = plant.history[-1]
    assert last.groups["A"].iops == pytest.approx(120)
    # B gets X·cap - floor, with X recovered to 2 points under where A was hurt (the
    # initial X, x_max_pct = 95 %).
    assert ds[-1].x_pct == pytest.approx(93.0)
    assert last.groups["B"].iops == pytest.approx(0.93 * 400 - 100, abs=8)


# ---- B's stretch: work conservation while A is at its floor ---------------------------------
def test_stretch_is_withdrawn_at_the_first_miss_and_capped() -> None:
    # cap 400 IOPS, A wants exactly its floor of 100 reads/s, B floods 300 r + 200 w. The
    # start saturates the device (X trimmed to 87.7 %: B's budget 62.7 % = 251 IOPS);
    # stretched x1.25 (313) the device is asked for 103 % and A still gets 97; at x1.56
    # (392) everyone is served in proportion and A gets 82 < 94 (95 % of 100 less one I/O).
    plant = Plant(cap=400, floor=100, a_demand=100, b_demand_r=300, b_demand_w=200)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)))
    ds = drive(policy, plant, 80)
    states = [d.state for d in ds]
    assert "stretch" in states
    misses = [d for d in ds[states.index("stretch"):] if d.a_miss]
    assert len(misses) == 1 and "B's budget back from x1.56" in misses[0].reason
    # Later stretches would stop two steps below x1.56, i.e. at X's budget: no more stretch
    # in this regime, B stays at X's budget.
    assert "no more stretch" in misses[0].reason
    assert policy.stretch == 1.0
    assert "stretch" not in states[states.index("protect", states.index("stretch")):]
    for o in plant.history[-20:]:
        assert o.groups["A"].iops == pytest.approx(100)


def _stretch_plant() -> tuple[Plant, AdaptivePolicy, list[Decision]]:
    # cap 400 IOPS, A wants its floor of 100 reads/s, B floods reads. X (60 % at most)
    # leaves B ~31 % = 124 IOPS; A is served in full up to x1.95 (B 212 + A 100 = 312 <
    # 400) and x2.44 (265), and hurt at x3.05 (332: A gets 93 < 94).
    plant = Plant(cap=400, floor=100, a_demand=100, b_demand_r=400, b_demand_w=0)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)), AdaptiveParams(x_max_pct=60))
    return plant, policy, drive(policy, plant, 40)


def test_stretch_resumes_two_steps_below_the_level_that_hurt() -> None:
    plant, policy, ds = _stretch_plant()
    p = policy.params
    states = [d.state for d in ds]
    hurt = states.index("protect", states.index("stretch"))
    assert "B's budget back from x3.05" in ds[hurt].reason
    assert "later stretches stop at x1.95" in ds[hurt].reason
    b_frac = policy.x - policy._a_frac(1 / 400, 1 / 400)
    # B got X's budget less A's shortfall at once (the step bound allows halving).
    assert ds[hurt].limits["B"].riops == 166
    # The next stretch waits for restretch_after intervals with A at its floor ...
    again = states.index("stretch", hurt)
    assert again - hurt == p.restretch_after
    assert ds[again].reason.startswith(f"A at its floor for {p.restretch_after} intervals")
    # ... climbs to the cap and holds there: A is not hurt again, B keeps ~1.8x X's budget.
    assert not any(d.a_miss for d in ds[hurt + 1:])
    assert policy.stretch_budget_cap is not None
    assert policy.stretch * b_frac == pytest.approx(policy.stretch_budget_cap)
    assert all(h.groups["A"].iops == pytest.approx(100) for h in plant.history[hurt + 2:])
    # Two steps below the budget that hurt (31 % of the device x 3.05 / 1.25**2 = 60.5 %,
    # reads 90 % of it: 217 IOPS), although X has risen from 56 to 58 % since: the cap is
    # on the budget, not on the multiple of X's.
    assert ds[hurt].x_pct == pytest.approx(56.0) and ds[-1].x_pct == pytest.approx(58.0)
    assert plant.history[-1].groups["B"].iops == pytest.approx(217)


def test_interval_after_a_withdrawn_stretch_does_not_move_x() -> None:
    plant, policy, ds = _stretch_plant()
    x, ceiling = ds[-1].x_pct, policy.ceiling
    limits = ds[-1].limits
    assert policy.stretch > 1.8
    # The device slows to 45 %: A misses under the stretch, and again in the interval after
    # it, while B's limit comes down (at most halved per interval).
    plant.cap = 180
    out = []
    for _ in range(3):
        out.append(policy.step(plant.observe(limits)))
        limits = out[-1].limits
    first, drain, after = out
    a = [h.groups["A"].iops for h in plant.history[-3:]]
    assert a[0] < 94 and a[1] < 94 and a[2] == pytest.approx(100)
    assert first.a_miss and "B's budget back from x1.83" in first.reason
    assert first.x_pct == x
    # The drain interval's miss neither cuts X nor sets a ceiling; A's shortfall stays off
    # B's budget one more interval.
    assert drain.state == "protect" and "while the withdrawn stretch drains" in drain.reason
    assert drain.x_pct == x and policy.ceiling == ceiling
    assert after.state == "hold" and after.x_pct == x
    rs = [d.limits["B"].riops for d in out]
    assert rs[0] is not None and rs[1] is not None and rs[2] is not None
    assert rs[0] > rs[1] > rs[2]


def test_stretch_gives_b_its_whole_demand_when_a_is_not_hurt() -> None:
    # B wants 300 IOPS: with A's 100 the device is exactly full, A gets all it asks. X's
    # budget would hold B to 280 (the same plant without the stretch shows it).
    def run(params: AdaptiveParams) -> tuple[AdaptivePolicy, Plant, list[Decision]]:
        plant = Plant(cap=400, floor=100, a_demand=100, b_demand_r=180, b_demand_w=120)
        policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)), params)
        return policy, plant, drive(policy, plant, 80)

    policy, plant, ds = run(AdaptiveParams())
    _, held_plant, _ = run(AdaptiveParams(stretch_step=0.0))
    assert not any(d.a_miss for d in ds[2:])
    assert plant.history[-1].groups["B"].iops == pytest.approx(300)
    assert held_plant.history[-1].groups["B"].iops < 290
    assert 1.0 < policy.stretch <= AdaptiveParams().stretch_max
    assert ds[-1].state in ("hold", "stretch") and "stretched x" in ds[-1].reason


def test_new_floors_withdraw_the_stretch() -> None:
    plant = Plant(cap=400, floor=100, a_demand=100, b_demand_r=180, b_demand_w=120)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)))
    before = drive(policy, plant, 40)[-1].limits["B"]
    assert policy.stretch > 1.0
    policy.set_floors({"A": 150.0})
    plant.floor = plant.a_demand = 150
    d = policy.step(plant.observe({"B": before}))
    # The interval just observed ran under the old floor: A's shortfall against the new one
    # (133 of 150 IOPS) is not a miss -- only the saturation trims X, by the knee step, not
    # by A's shortfall -- and B goes straight to X's budget for the new floor.
    assert plant.history[-1].groups["A"].iops < 140
    assert not d.a_miss and d.state == "knee" and d.x_pct == pytest.approx(91.0)
    assert policy.stretch == 1.0 and policy.a_streak == 1
    lim = d.limits["B"]
    assert lim.riops is not None and lim.wiops is not None
    assert before.riops is not None and before.wiops is not None
    assert lim.riops + lim.wiops < before.riops + before.wiops


def test_stretch_params_are_checked() -> None:
    for bad in ({"stretch_step": -0.1}, {"stretch_max": 0.5}, {"stretch_after": 0},
                {"restretch_after": 0}, {"stretch_backoff": -1},
                {"latency_stretch_backoff": -1}):
        with pytest.raises(ValueError, match="stretch"):
            AdaptiveParams(**bad)  # type: ignore[arg-type]


# ---- separate read and write limits -------------------------------------------------------
def test_read_and_write_limits_follow_b_mix() -> None:
    plant = Plant(cap=1000, floor=100, a_demand=100, b_demand_r=2100, b_demand_w=900)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)))
    d = drive(policy, plant, 60)[-1]
    lim = d.limits["B"]
    assert lim.riops is not None and lim.wiops is not None
    assert lim.riops / (lim.riops + lim.wiops) == pytest.approx(0.7, abs=0.05)


def test_write_only_b_keeps_reads_at_a_small_share() -> None:
    plant = Plant(cap=1000, floor=100, a_demand=100, b_demand_r=0, b_demand_w=3000)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)))
    d = drive(policy, plant, 60)[-1]
    lim = d.limits["B"]
    assert lim.riops is not None and lim.wiops is not None
    assert lim.wiops > 5 * lim.riops
    assert plant.history[-1].groups["B"].w_iops == pytest.approx(lim.wiops)


def test_b_wanting_more_writes_than_its_share_gets_them() -> None:
    # B's history was read-heavy; now it wants writes: the pinned direction gains share.
    plant = Plant(cap=1000, floor=100, a_demand=100, b_demand_r=3000, b_demand_w=100)
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",)))
    drive(policy, plant, 40)
    plant.b_demand_r, plant.b_demand_w = 100, 3000
    d = drive(policy, plant, 60)[-1]
    lim = d.limits["B"]
    assert lim.riops is not None and lim.wiops is not None
    assert lim.wiops > lim.riops


def test_util_costs_separate_reads_from_writes_when_the_mix_varies() -> None:
    c = _UtilCosts(alpha=0.3)
    for k in range(40):
        r, w = 50 + 40 * (k % 5), 20 + 30 * ((k * 3) % 4)
        c.update(r, w, 0.002 * r + 0.006 * w)
    cr, cw = c.costs() or (0, 0)
    assert cr == pytest.approx(0.002, rel=1e-6)
    assert cw == pytest.approx(0.006, rel=1e-6)


def test_util_costs_fall_back_to_one_cost_for_a_constant_mix() -> None:
    c = _UtilCosts(alpha=0.3)
    for _ in range(20):
        c.update(100, 50, 0.5)
    assert c.costs() == (pytest.approx(0.5 / 150), pytest.approx(0.5 / 150))


def test_write_cost_differs_and_the_plant_still_settles() -> None:
    plant = Plant(cap=600, floor=60, a_demand=60, a_read_share=0.5, b_demand_r=800,
                  b_demand_w=800, write_cost=3.0)
    t = Targets({"A": 60.0}, ("B",))
    p = AdaptiveParams()
    ds = drive(AdaptivePolicy(t, p), plant, 150)
    check_invariants(ds, t, p)
    assert all(d.limits == ds[100].limits for d in ds[100:])
    assert plant.history[-1].util_pct is not None and plant.history[-1].util_pct < 99


# ---- demand: a miss only counts when A wanted the I/O ----------------------------------------
def _engaged(parallel: bool = False) -> AdaptivePolicy:
    policy = AdaptivePolicy(Targets({"A": 100.0}, ("B",), device_parallel=parallel))
    for _ in range(5):
        policy.step(Observation(1.0, 60.0, 300.0, 0.0, {"A": GroupObservation(100.0, 0.0),
                                                        "B": GroupObservation(200.0, 0.0)},
                                await_ms=2.0, aqu_sz=0.6))
    return policy


def test_no_miss_when_a_asks_for_less_than_its_floor() -> None:
    p = _engaged()
    d = p.step(Observation(1.0, 100.0, 300.0, 0.0,
                           {"A": GroupObservation(40.0, 0.0, demand_iops=40.0),
                            "B": GroupObservation(260.0, 0.0)}))
    assert not d.a_miss


def test_no_miss_below_floor_on_an_uncongested_device_without_demand_signal() -> None:
    p = _engaged()
    d = p.step(Observation(1.0, 50.0, 250.0, 0.0, {"A": GroupObservation(40.0, 0.0),
                                                   "B": GroupObservation(210.0, 0.0)}))
    assert not d.a_miss and "A's own choice" in d.reason


def test_miss_inferred_from_congestion_or_stall() -> None:
    p = _engaged()
    d = p.step(Observation(1.0, 100.0, 300.0, 0.0, {"A": GroupObservation(40.0, 0.0),
                                                    "B": GroupObservation(260.0, 0.0)}))
    assert d.a_miss and d.state == "protect" and "device congested" in d.reason
    q = _engaged()
    d = q.step(Observation(1.0, 60.0, 300.0, 0.0,
                           {"A": GroupObservation(40.0, 0.0, stall_pct=80.0),
                            "B": GroupObservation(260.0, 0.0)}))
    assert d.a_miss and "stalled on I/O 80 %" in d.reason


def test_cuts_that_do_not_help_a_stop() -> None:
    p = _engaged()
    states = []
    for _ in range(8):  # A stuck at 40 whatever B does: A is limited by itself
        d = p.step(Observation(1.0, 100.0, 300.0, 0.0, {"A": GroupObservation(40.0, 0.0),
                                                        "B": GroupObservation(60.0, 0.0)}))
        states.append(d.state)
    # Three cuts, none of which raised A's IOPS (futile_after = 3), then no more cuts.
    assert states[:3] == ["protect"] * 3
    assert states[3:] == ["a-limited"] * 5
    # A moving again resumes protection.
    d = p.step(Observation(1.0, 100.0, 300.0, 0.0, {"A": GroupObservation(60.0, 0.0),
                                                    "B": GroupObservation(60.0, 0.0)}))
    assert d.state == "protect"


# ---- several B groups, minimums, infeasible floors -------------------------------------------
def test_split_budget_is_proportional_with_minimums() -> None:
    assert split_budget(300, {"x": 200, "y": 100}, 10) == {"x": 200, "y": 100}
    s = split_budget(100, {"x": 1000, "y": 0}, 10, min_share=0.1)
    assert s["y"] == pytest.approx(10) and s["x"] == pytest.approx(90)
    assert split_budget(15, {"x": 5, "y": 5}, 10) == {"x": 10, "y": 10}
    s = split_budget(100, {"x": 95, "y": 3, "z": 2}, 10)
    assert s["y"] == s["z"] == 10 and s["x"] == pytest.approx(80)


@given(total=st.floats(0, 1e6), weights=st.lists(st.floats(0, 1e5), min_size=1, max_size=6),
       minimum=st.floats(0, 100))
def test_split_budget_properties(total: float, weights: list[float], minimum: float) -> None:
    w = {f"g{i}": x for i, x in enumerate(weights)}
    s = split_budget(total, w, minimum, min_share=0.1)
    assert set(s) == set(w)
    assert all(v >= minimum - 1e-9 for v in s.values())
    if total > minimum * len(w):
        assert sum(s.values()) == pytest.approx(total, rel=1e-9, abs=1e-6)


def test_several_b_groups_share_by_recent_use() -> None:
    plant = Plant(cap=1000, floor=100, a_demand=100, b_demand_r=3000, b_demand_w=0,
                  groups=("B1", "B2"), b_split=(0.8, 0.2))
    t = Targets({"A": 100.0}, ("B1", "B2"), b_min_iops=5)
    ds = drive(AdaptivePolicy(t), plant, 60)
    check_invariants(ds, t, AdaptiveParams())
    l1, l2 = ds[-1].limits["B1"], ds[-1].limits["B2"]
    assert l1.riops is not None and l2.riops is not None
    assert l1.riops > l2.riops >= 5
    assert plant.history[-1].groups["A"].iops == pytest.approx(100)


def test_infeasible_floor_warns_with_numbers_and_keeps_b_at_minimum() -> None:
    plant = Plant(cap=200, floor=300, a_demand=300, b_demand_r=500, b_demand_w=0)
    t = Targets({"A": 300.0}, ("B",), b_min_iops=4)
    ds = drive(AdaptivePolicy(t), plant, 30)
    warned = [w for d in ds for w in d.warnings]
    assert warned, "no infeasibility warning"
    assert "300 IOPS" in warned[0] and "above the device's estimated capacity" in warned[0]
    assert "≈ 200 IOPS at 100 % busy" in warned[0]
    assert ds[-1].limits["B"] == GroupLimit(4, 4)
    assert len(warned) <= 3, "the same warning repeated every interval"


def test_warmup_leaves_b_unlimited_then_engages() -> None:
    policy = make_policy("adaptive", Targets({"A": 10.0}, ("B",)))
    d = policy.step(Observation(1.0, 50.0, 100.0, 0.0, {"B": GroupObservation(90.0, 0.0)}))
    assert d.state == "warmup" and d.limits == {"B": UNLIMITED} and d.x_pct is None
    d = policy.step(Observation(1.0, 50.0, 100.0, 0.0, {"B": GroupObservation(90.0, 0.0)}))
    assert d.state != "warmup" and d.limits["B"].riops is not None


def test_targets_refuse_a_group_both_protected_and_throttled() -> None:
    with pytest.raises(ValueError, match="A is never throttled"):
        Targets({"A": 10.0}, ("A",))
    with pytest.raises(ValueError, match="b_min_iops must be >= 1"):
        Targets({"A": 10.0}, ("B",), b_min_iops=0)


def test_raising_the_floor_mid_run_cuts_b() -> None:
    plant = Plant(cap=400, floor=20, a_demand=200, b_demand_r=1000, b_demand_w=0)
    policy = AdaptivePolicy(Targets({"A": 20.0}, ("B",)))
    drive(policy, plant, 40)
    before = plant.history[-1].groups["A"].iops
    policy.set_floors({"A": 200.0})
    plant.floor = 200
    drive(policy, plant, 60)
    assert plant.history[-1].groups["A"].iops >= 200 * 0.95 > before * 0 + 0


def test_a_short_by_counting_noise_is_not_a_miss() -> None:
    # A at 21 IOPS, reads and writes paced separately: 19-23 complete in a 1 s interval.
    policy = AdaptivePolicy(Targets({"A": 21.0}, ("B",)))
    policy.a_read_share["A"] = 0.5
    assert policy._met_at("A", 21.0, 1.0) == pytest.approx(21 * 0.95 - 2)
    assert policy._met_at("A", 21.0, 2.0) == pytest.approx(21 * 0.95 - 1)  # per interval
    policy.a_read_share["A"] = 1.0  # reads only: one direction
    assert policy._met_at("A", 21.0, 1.0) == pytest.approx(21 * 0.95 - 1)
    # A tiny floor keeps at least half of 95 % of it: 2 IOPS asks for 0.95 at least.
    assert policy._met_at("A", 2.0, 1.0) == pytest.approx(0.95)

    def obs(a_r: float, a_w: float) -> Observation:
        return Observation(1.0, 100.0, a_r + 50, a_w + 30,
                           {"A": GroupObservation(a_r, a_w), "B": GroupObservation(50, 30)})

    policy = AdaptivePolicy(Targets({"A": 21.0}, ("B",)))
    for _ in range(3):
        policy.step(obs(11, 10))
    assert not policy.step(obs(10, 9)).a_miss  # 19 of 21 on a saturated device
    assert policy.step(obs(9, 8)).a_miss  # 17: short by more than one I/O per direction


@pytest.mark.parametrize("name", ["paper", "adaptive"])
@pytest.mark.parametrize("parallel", [False, True])
def test_io_without_busy_time_is_no_crash(name: str, parallel: bool) -> None:
    """An almost idle device: I/O completed but %util 0 (the kernel counts busy time in
    whole ms). Both policies divided by a busy per I/O of 0 (ZeroDivisionError on an idle
    vda); they must hold their limits instead."""
    t = Targets(protected={"A": 50.0}, throttled=("B",), device_parallel=parallel)
    policy = make_policy(name, t)
    for i in range(40):
        b = 5.0 if i % 3 else 0.0
        util = 3.0 if (i % 2 and name == "paper") else 0.0
        d = policy.step(Observation(1.0, util, b, 0.0,
                                    {"A": GroupObservation(0.0, 0.0, 0.0),
                                     "B": GroupObservation(b, 0.0, None)},
                                    await_ms=0.0, aqu_sz=0.0))
        assert set(d.limits) == {"B"}
