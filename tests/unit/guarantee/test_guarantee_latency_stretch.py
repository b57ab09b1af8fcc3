"""The stretch in latency mode: past the device's latency knee while A keeps its floor, the
capacity estimate is stretched and B gets X of it less A's floors -- judged by A's delivered
IOPS, as the util method's stretch is. Driven through ``make_policy`` / ``step`` by plants
built on the lab ``ssd`` in [Oe] evaluation 2 (2026-12-07 01:57, benchmarks/README.md),
where no static limit at all kept A at its floor in the last phase while the knee held B
to 6 % of that."""

from __future__ import annotations

from plant_obs import observed
from test_guarantee_latency_curve import _OneServer, _run

from iogauge.guarantee.policy import (
    UNLIMITED,
    AdaptiveParams,
    Decision,
    Observation,
    Policy,
    Targets,
    make_policy,
)


def _eval2(params: AdaptiveParams) -> list[list[tuple[Observation, Decision]]]:
    """[Oe] evaluation 2's floors (410, 4,099, then 2,049 IOPS for 20, 40 and 40 s) on a
    single-server device of 6,150 IOPS that serves A and B in proportion past 98 % of it."""
    t = Targets(protected={"A": 410.0}, throttled=("B",), limit_grid_iops=10,
                device_parallel=True)
    policy = make_policy("adaptive", t, adaptive=params)
    plant = _OneServer(410.0)
    phases = [_run(policy, plant, 20)]
    for floor in (4099.0, 2049.0):
        policy.set_floors({"A": floor})
        plant.a_iops = floor
        phases.append(_run(policy, plant, 40))
    return phases


def _b_iops(phase: list[tuple[Observation, Decision]]) -> float:
    return sum(o.group("B").iops for o, _ in phase) / len(phase)


def test_the_stretch_finds_the_edge_by_a_miss_and_stays_under_it() -> None:
    # A's floor 4,099 of the 6,150 IOPS: X (90 % of the estimate) leaves B ~1,050, where
    # the device gives A its floor up to 0.98 x 6,150 - 4,099 = 1,928 for B.
    phases = _eval2(AdaptiveParams())
    held = _eval2(AdaptiveParams(latency_stretch_step=0.0))
    assert _b_iops(phases[1]) >= 1.1 * _b_iops(held[1]), (_b_iops(phases[1]),
                                                          _b_iops(held[1]))
    assert _b_iops(phases[2]) >= _b_iops(held[2])
    # The price: A short in an interval a stretch went too far; the stretch then steps
    # back below the level B's limits had reached, and stays there (no second miss). (The
    # phase's first interval ran under the previous floor's limits.)
    run = phases[1][1:]
    short = [(k, d) for k, (o, d) in enumerate(run) if o.group("A").iops < 0.95 * 4099]
    assert len(short) == 1, [(round(o.group("A").iops), d.state.value) for o, d in run]
    k, d = short[0]
    assert "stretch back from" in d.reason and "what B's limits had reached" in d.reason
    assert all(d.state.value != "stretch" for _, d in run[k + 1:])
    stretched = [d for ph in phases for _, d in ph if d.state.value == "stretch"]
    assert stretched and "capacity estimate" in stretched[0].reason


def test_the_step_back_is_one_step_and_lower_floors_may_stretch_past_it() -> None:
    # [Oe] evaluation 2 on the lab ``ssd`` (2026-12-07 07:11): the miss at A's floor 3,816
    # stepped the stretch back two steps, from x1.21 to x1.00, and that level held B
    # through the last phase (A's floor 1,908) at 64 % of the static limit's IOPS. One step
    # back is the last level A kept its floor under; lower floors stretch past it again.
    phases = _eval2(AdaptiveParams())
    two = _eval2(AdaptiveParams(latency_stretch_backoff=2))
    bound2, bound3 = 0.98 * 6150 - 4099, 0.98 * 6150 - 2049
    assert _b_iops(phases[1]) >= 0.95 * bound2 > _b_iops(two[1]), (_b_iops(phases[1]),
                                                                   _b_iops(two[1]))
    assert _b_iops(phases[2]) >= 0.93 * bound3, _b_iops(phases[2])
    assert any(d.state.value == "stretch" for _, d in phases[2])
    assert all(o.group("A").iops >= 0.95 * 2049 for o, _ in phases[2][-20:])


class _QueueOfB:
    """A device of 7,000 IOPS that serves A first (A always gets its floor) and whose await
    follows B's queue, not the load: 0.15 ms with B idle, up to 1.35 ms with B's I/Os
    outnumbering A's (the lab ``ssd`` read 0.15 ms for A alone at 4,552 IOPS and 1.5 ms
    with B's queue beside it at 3,000). B wants ``b_half`` reads and as many writes."""

    def __init__(self, a_iops: float) -> None:
        self.a_iops = a_iops
        self.b_half = 0.0
        self.limit: object = UNLIMITED

    def __call__(self, limit: object) -> Observation:
        lim_r, lim_w = getattr(limit, "riops", None), getattr(limit, "wiops", None)
        want = self.b_half
        br = want if lim_r is None else min(float(lim_r), want)
        bw = want if lim_w is None else min(float(lim_w), want)
        room = 0.98 * 7000.0 - self.a_iops
        scale = min(1.0, room / (br + bw)) if br + bw > 0 else 1.0
        br, bw = br * scale, bw * scale
        b_share = (br + bw) / (self.a_iops + br + bw)
        return observed(self.a_iops, br, bw, 0.15 * (1.0 + 8.0 * b_share))


def _queue_of_b(floor: float, params: AdaptiveParams) -> tuple[Policy, _QueueOfB]:
    """The policy and a :class:`_QueueOfB` after 10 s of A alone at ``floor`` (the
    baseline set at 0.15 ms); B's job starts next."""
    t = Targets(protected={"A": floor}, throttled=("B",), limit_grid_iops=10,
                device_parallel=True)
    policy = make_policy("adaptive", t, adaptive=params)
    plant = _QueueOfB(floor)
    _run(policy, plant, 10)
    plant.b_half = 2500.0
    return policy, plant


def test_a_stretch_lifts_b_where_a_floors_took_all_of_the_estimate() -> None:
    # A alone for 10 s sets the baseline at 0.15 ms; then B's job starts. Each knee cuts
    # the estimate to what the device served, the await falls with B's queue, and the next
    # rise of B is a knee again: the estimate ends near A's floor and B near its minimum.
    # A is at its floor throughout, so the stretch lifts the estimate.
    def run(params: AdaptiveParams) -> list[tuple[Observation, Decision]]:
        policy, plant = _queue_of_b(2276.0, params)
        return _run(policy, plant, 40)

    held = run(AdaptiveParams(latency_stretch_step=0.0))
    seen = run(AdaptiveParams())
    assert _b_iops(held[-10:]) < 2000, _b_iops(held[-10:])
    assert _b_iops(seen[-10:]) >= 4000, [(round(o.group("B").iops), d.state.value)
                                          for o, d in seen]
    assert all(o.group("A").iops >= 2276.0 for o, _ in seen)
    # B's limits climb by 3 % of the device an interval, not only by 25 % of themselves:
    # from its minimum B had 4,440 IOPS after 15 s; by 25 % steps alone, 300.
    crawl = run(AdaptiveParams(step_up_device_frac=0.0))
    assert seen[14][0].group("B").iops >= 10 * crawl[14][0].group("B").iops


def test_lower_floors_keep_the_stretch_higher_floors_drop_it() -> None:
    # A's floor 4,000, then 2,000 (the same stretch is the same load on the device, which
    # A kept its floor under), then 4,000 again (a new demand: earned again).
    policy, plant = _queue_of_b(4000.0, AdaptiveParams())
    before = _run(policy, plant, 30)
    assert "stretched x" in before[-1][1].reason
    policy.set_floors({"A": 2000.0})
    plant.a_iops = 2000.0
    lower = _run(policy, plant, 3)
    assert all("stretched x" in d.reason for _, d in lower)
    policy.set_floors({"A": 4000.0})
    plant.a_iops = 4000.0
    higher = _run(policy, plant, 1)
    assert "stretched" not in higher[0][1].reason


class _FlatAwait:
    """[Oe] evaluation 3's phase 2 on the lab ``ssd`` (2026-12-07 06:14): a device of 3,700
    IOPS shared by A and B in proportion to what they send, its await flat at 2.9 ms
    whatever the load (1.3x the baseline: never a knee). A sends its floor, 2,745; B sends
    what its limits let through of 2,745 each way."""

    def __init__(self) -> None:
        self.limit: object = UNLIMITED

    def __call__(self, limit: object) -> Observation:
        lim_r, lim_w = getattr(limit, "riops", None), getattr(limit, "wiops", None)
        br = 1372.0 if lim_r is None else min(float(lim_r), 1372.0)
        bw = 1372.0 if lim_w is None else min(float(lim_w), 1372.0)
        scale = min(1.0, 3700.0 / (2745.0 + br + bw))
        return observed(2745.0 * scale, br * scale, bw * scale, 2.9)


def test_a_short_under_a_stretch_is_a_miss_though_the_await_is_no_knee() -> None:
    # The await never passes the knee, so "the device is not congested" had made A's
    # shortfall under a stretch A's own choice (in the run: B at 2,790 IOPS, A at ~2,000 of
    # 2,745 for 35 s). Now the first interval A is short under a stretch is a miss.
    t = Targets(protected={"A": 2745.0}, throttled=("B",), limit_grid_iops=10,
                device_parallel=True)
    policy = make_policy("adaptive", t)
    seen = _run(policy, _FlatAwait(), 12)
    k = next(i for i, (_, d) in enumerate(seen) if d.state.value == "stretch")
    assert seen[k + 1][1].a_miss and "stretched x" in seen[k + 1][1].reason
    assert "no more stretch" in seen[k + 1][1].reason
