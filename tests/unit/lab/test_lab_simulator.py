"""The simulator: exact counters on a hand-checkable model, determinism, Little's law,
limiters, throttles and the controller hook, and the SampleFrame it produces."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import polars as pl
import pytest

from iogauge.collector.derive import counter_deltas, derive_metrics
from iogauge.collector.diskstats import IDX
from iogauge.lab.model import Request
from iogauge.lab.profiles import build_model
from iogauge.lab.simulator import (
    SOURCE,
    IntervalObservation,
    IopsLimit,
    policy_controller,
    simulate,
    simulate_max_iops,
)
from iogauge.lab.workloads import IoSize, Region, Workload, oe_paper
from iogauge.model.sampleframe import SampleFrame

KIB = 1024


class Fixed:
    """A protocol-only DiskModel (no ``serve``): every request takes ``service_s``."""

    def __init__(self, service_s: float, channels: int = 1) -> None:
        self.name = f"fixed-{service_s}"
        self.capacity_bytes = 10**9
        self.channels = channels
        self.service_s = service_s
        self.calls: list[tuple[Request, float, int]] = []

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        self.calls.append((req, start_s, channel))
        return self.service_s

    def reset(self) -> None:
        self.calls.clear()


def w4k(threads: int = 1, read_share: float = 1.0, **kw: object) -> Workload:
    return Workload("w", (IoSize(4 * KIB, 1.0),), read_share, threads=threads,
                    **kw)  # type: ignore[arg-type]


def test_constant_model_gives_exact_iostat_numbers() -> None:
    # 1 thread, 10 ms per request: exactly 100 IOPS, await 10 ms, 100 % util, aqu-sz 1.
    res = simulate(Fixed(0.010), w4k(), 10.0, interval_s=1.0)
    df = res.frame.df
    assert df.height == 10
    # Float event times can put a completion a hair either side of a boundary: allow one.
    assert df["r_iops"].to_list() == pytest.approx([100.0] * 10, abs=1.0)
    assert df["r_await_ms"].to_list() == pytest.approx([10.0] * 10, abs=0.01)
    assert df["util_pct"].to_list() == pytest.approx([100.0] * 10)
    assert df["aqu_sz"].to_list() == pytest.approx([1.0] * 10, abs=0.011)
    assert df["r_kBps"].to_list() == pytest.approx([400.0] * 10, abs=4.0)
    assert df["w_iops"].to_list() == [0.0] * 10
    assert df["d_iops"].to_list() == [0.0] * 10  # measured: no discards happened
    c = res.counters
    assert c[-1, IDX["rd_ios"]] == res.completed
    assert c[-1, IDX["rd_sectors"]] == 8 * res.completed
    assert c[-1, IDX["rd_ticks_ms"]] == pytest.approx(10 * res.completed, abs=1)


def test_rate_cap_halves_util_and_queue_not_latency() -> None:
    w = w4k(threads=4, rate_iops=50.0, arrival="fixed")
    res = simulate(Fixed(0.010), w, 20.0, interval_s=2.0)
    df = res.frame.df
    assert df["iops"].to_list() == pytest.approx([50.0] * 10, abs=0.5)
    assert df["await_ms"].to_list() == pytest.approx([10.0] * 10, abs=0.01)
    assert df["util_pct"].to_list() == pytest.approx([50.0] * 10, abs=0.6)
    assert df["aqu_sz"].to_list() == pytest.approx([0.5] * 10, abs=0.01)


def test_queueing_on_one_channel_and_parallelism_on_several() -> None:
    one = simulate(Fixed(0.010, channels=1), w4k(threads=4), 10.0)
    four = simulate(Fixed(0.010, channels=4), w4k(threads=4), 10.0)
    assert one.steady_iops(1.0) == pytest.approx(100.0, abs=1.0)
    assert four.steady_iops(1.0) == pytest.approx(400.0, abs=1.0)
    assert one.frame.df["await_ms"].mean() == pytest.approx(40.0, rel=0.01)  # 4 deep FIFO
    assert four.frame.df["await_ms"].mean() == pytest.approx(10.0, rel=0.01)
    assert one.frame.df["aqu_sz"].mean() == pytest.approx(4.0, rel=0.01)
    # Channels used by the dispatcher: each in-service request has its own.
    m = Fixed(0.010, channels=4)
    simulate(m, w4k(threads=4), 1.0)
    assert {ch for _r, _t, ch in m.calls} == {0, 1, 2, 3}


def test_frame_is_the_sysstat_derivation_of_the_counters() -> None:
    res = simulate(build_model("raid5-6x400g"), oe_paper("file-share", "A", rate_iops=150),
                   60.0, interval_s=5.0, seed=9)
    c = res.counters
    ones = np.ones_like(c[1:], dtype=np.bool_)
    d = counter_deltas(c[:-1], c[1:], ones, ones)
    m = derive_metrics(d.delta, np.full(c.shape[0] - 1, 5.0))
    df = res.frame.df
    for col in ("r_iops", "w_iops", "r_await_ms", "w_await_ms", "util_pct", "aqu_sz",
                "r_areq_kB", "w_areq_kB"):
        assert df[col].to_list() == pytest.approx(m[col].tolist(), rel=1e-12)
    assert set(df["source"]) == {SOURCE}
    assert set(df["device"]) == {"sim0"}
    ts = df["ts"].to_list()
    assert all((b - a).total_seconds() == 5.0 for a, b in itertools.pairwise(ts))
    SampleFrame(df).validate()


def test_same_seed_same_frame_other_seed_other_frame() -> None:
    wls = oe_paper("file-share", "A+B", rate_iops=120)
    a = simulate(build_model("raid5-6x400g"), wls, 40.0, interval_s=2.0, seed=5)
    b = simulate(build_model("raid5-6x400g"), wls, 40.0, interval_s=2.0, seed=5)
    c = simulate(build_model("raid5-6x400g"), wls, 40.0, interval_s=2.0, seed=6)
    assert a.frame.df.equals(b.frame.df)
    assert a.groups.equals(b.groups)
    assert np.array_equal(a.counters, b.counters)
    assert not a.frame.df.equals(c.frame.df)


@pytest.mark.parametrize("profile", ["hdd-7200", "raid5-6x400g", "ssd-sata"])
def test_littles_law_and_util_bounds(profile: str) -> None:
    res = simulate(build_model(profile), oe_paper("file-share", "A", threads=6), 60.0,
                   interval_s=10.0, seed=1)
    df = res.frame.df
    assert (df["util_pct"] <= 100.0).all()
    assert (df["util_pct"] >= 0.0).all()
    # Little: requests in the system = throughput x time in the system (6 threads).
    lhs = df["aqu_sz"].to_numpy()
    rhs = (df["iops"] * df["await_ms"] / 1000.0).to_numpy()
    assert lhs == pytest.approx(rhs, rel=0.02)
    assert lhs == pytest.approx(np.full(len(lhs), 6.0), rel=0.02)


def test_per_second_limiter_bursts_at_the_start_of_each_second() -> None:
    w = w4k(threads=10, rate_iops=30.0, arrival="per_second")
    res = simulate(Fixed(0.005, channels=10), w, 10.0, interval_s=0.1)
    per_tenth = res.frame.df["iops"].to_numpy().reshape(10, 10) * 0.1
    # 30 I/Os each second, all within its first 0.1 s (10 threads x 3 rounds of 5 ms).
    assert per_tenth.sum(axis=1) == pytest.approx([30.0] * 10)
    assert per_tenth[:, 0] == pytest.approx([30.0] * 10)


def test_poisson_and_fixed_limiters_hit_their_rate() -> None:
    for arrival in ("poisson", "fixed"):
        w = w4k(threads=8, rate_iops=200.0, arrival=arrival)
        res = simulate(Fixed(0.001, channels=8), w, 100.0, interval_s=10.0, seed=3)
        assert res.steady_iops(0.0) == pytest.approx(200.0, rel=0.03), arrival


def test_rate_schedule_changes_the_cap_mid_run() -> None:
    w = w4k(threads=4, rate_iops=20.0, arrival="fixed", rate_schedule=((10.0, 60.0),))
    res = simulate(Fixed(0.001, channels=4), w, 20.0, interval_s=5.0)
    # Permits already reserved at the old spacing when the cap changes finish first.
    assert res.frame.df["iops"].to_list() == pytest.approx([20, 20, 59, 60], abs=1.0)
    assert res.groups["demand_iops"].to_list() == [20.0, 20.0, 60.0, 60.0]


def test_group_throttle_and_controller_hook() -> None:
    a = w4k(threads=4, group="A", regions=(Region(0.0, 0.25),))
    b = w4k(threads=4, group="B", read_share=0.5, regions=(Region(0.75, 1.0),))
    seen: list[IntervalObservation] = []

    def controller(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        seen.append(obs)
        if obs.t_end_s == pytest.approx(10.0):
            return {"B": IopsLimit(riops=10.0, wiops=10.0)}
        if obs.t_end_s == pytest.approx(20.0):
            return {"B": IopsLimit()}  # lift the throttle
        return None

    res = simulate(Fixed(0.002, channels=1), [a, b], 30.0, interval_s=5.0,
                   controller=controller)
    g = res.groups
    b_iops = g.filter(pl.col("group") == "B")["iops"].to_list()
    a_iops = g.filter(pl.col("group") == "A")["iops"].to_list()
    # Unthrottled the 8 threads share 500 IOPS; B throttled to 10 + 10 from t = 10 s.
    assert b_iops[:2] == pytest.approx([250.0, 250.0], abs=3.0)
    b_rows = g.filter(pl.col("group") == "B")
    # (+2 I/Os in the first throttled interval: one in flight, one burst token.)
    assert (b_rows["r_iops"][2:4] <= 10.41).all()
    assert (b_rows["w_iops"][2:4] <= 10.41).all()
    # Each direction is capped apart (io.max riops/wiops): a thread waiting for a write
    # token cannot use a spare read token, so the sum may fall a little short of 20.
    assert all(16.0 <= x <= 20.4 for x in b_iops[2:4])
    assert a_iops[2:4] == pytest.approx([480.0, 480.0], abs=3.0)
    assert b_iops[4:] == pytest.approx([250.0, 250.0], abs=3.0)
    assert [o.t_end_s for o in seen] == pytest.approx([5, 10, 15, 20, 25, 30])
    # The observation's device view is the frame's row; the limits are those in force.
    row = res.frame.df.row(2, named=True)
    assert seen[2].device["util_pct"] == pytest.approx(row["util_pct"])
    assert seen[2].device["iops"] == pytest.approx(row["iops"])
    assert seen[2].limits["B"] == IopsLimit(10.0, 10.0)
    assert seen[2].groups["B"].throttle_wait_ms > 0
    assert [c[1:] for c in res.limit_changes] == [("B", IopsLimit(10.0, 10.0)),
                                                  ("B", IopsLimit())]


def test_initial_limits_and_errors() -> None:
    res = simulate(Fixed(0.001), w4k(threads=2, group="B"), 10.0,
                   limits={"B": IopsLimit(riops=40.0)})
    assert res.steady_iops(1.0) == pytest.approx(40.0, abs=0.5)
    with pytest.raises(ValueError, match="no workload is in group"):
        simulate(Fixed(0.001), w4k(), 1.0, limits={"Z": IopsLimit(riops=1.0)})
    with pytest.raises(ValueError, match="whole number"):
        simulate(Fixed(0.001), w4k(), 2.5, interval_s=1.0)
    with pytest.raises(ValueError, match="> 0"):
        IopsLimit(riops=0.0)


def test_offsets_sizes_and_mix_follow_the_workload() -> None:
    seen: list[Request] = []

    class Recorder(Fixed):
        def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
            seen.append(req)
            return 0.001

    w = oe_paper("backup", "B")[0]
    m = Recorder(0.001)
    m.capacity_bytes = 2 * 10**12
    simulate(m, w, 20.0, seed=4)
    offs = np.array([r.offset_bytes for r in seen])
    assert all(r.size_bytes == 128 * KIB for r in seen)
    assert (offs % (128 * KIB) == 0).all()
    cap = m.capacity_bytes
    in_ranges = ((offs >= 0.75 * cap) & (offs + 128 * KIB <= 0.765 * cap)) | (
        (offs >= 0.90 * cap) & (offs + 128 * KIB <= 0.915 * cap))
    assert in_ranges.all()
    reads = sum(r.op == "read" for r in seen) / len(seen)
    assert reads == pytest.approx(0.5, abs=0.02)


def test_sequential_threads_walk_their_region() -> None:
    seen: list[int] = []

    class Recorder(Fixed):
        def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
            seen.append(req.offset_bytes)
            return 0.001

    w = Workload("s", (IoSize(64 * KIB, 1.0),), 1.0, pattern="sequential",
                 align_bytes=64 * KIB)
    simulate(Recorder(0.001), w, 1.0)
    steps = np.diff(np.array(seen))
    assert (steps == 64 * KIB).mean() > 0.99  # wraps at most once


def test_simulate_max_iops_accepts_names_and_rescales() -> None:
    full = simulate_max_iops("hdd-7200", "file-share", duration_s=60, seed=1)
    small = simulate_max_iops("hdd-7200", "file-share", duration_s=60, seed=1,
                              capacity_bytes=64 * 2**30)
    # The geometry is stretched onto the smaller device: the same fractions, the same IOPS.
    assert small == pytest.approx(full, rel=0.05)
    assert 60.0 < full < 200.0
    wl = oe_paper("file-share", "A", rate_iops=5.0)  # caps are removed
    assert simulate_max_iops("hdd-7200", wl, duration_s=60, seed=1) == pytest.approx(full)


def test_policy_controller_drives_a_guarantee_policy() -> None:
    from iogauge.guarantee.policy import Targets, make_policy

    policy = make_policy("paper", Targets(protected={"A": 50.0}, throttled=("B",)))
    decisions: list[object] = []
    a = oe_paper("file-share", "A", rate_iops=60.0)[0]
    b = oe_paper("backup", "B", rate_iops=200.0)[0]
    res = simulate(build_model("raid5-6x400g"), [a, b], 200.0, interval_s=20.0, seed=1,
                   controller=policy_controller(policy, decisions))
    assert len(decisions) == 10
    g = res.groups
    # B is throttled (its limits come from the policy), A never is.
    assert g.filter(pl.col("group") == "A")["limit_riops"].null_count() == 10
    assert g.filter(pl.col("group") == "B")["limit_riops"].drop_nulls().len() >= 8
    last_b = g.filter(pl.col("group") == "B")["iops"].to_list()[-1]
    assert last_b < 200.0


def test_group_limits_are_reported_for_the_interval_they_are_in_force() -> None:
    # The limit the controller sets at the end of interval 2 (t = 10 s) throttles interval 3
    # (10-15 s) and the one it lifts at t = 20 s is gone from interval 5 (20-25 s) on.
    b = w4k(threads=2, group="B")

    def controller(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        if obs.t_end_s == pytest.approx(10.0):
            return {"B": IopsLimit(riops=10.0)}
        if obs.t_end_s == pytest.approx(20.0):
            return {"B": IopsLimit()}
        return None

    res = simulate(Fixed(0.002), b, 30.0, interval_s=5.0, controller=controller)
    assert res.groups["limit_riops"].to_list() == [None, None, 10.0, 10.0, None, None]
    # 2 threads at 2 ms: 1,000 reads/s; 10/s (+ the slice's one burst token) while limited.
    assert res.groups["iops"].to_list()[2:4] == pytest.approx([10.0, 10.0], abs=0.6)


def test_user_level_cap_counts_per_second_before_issue() -> None:
    # [Oe]'s actuator (IopsLimit.iops): 4 threads that could do 4,000 IOPS at 1 ms are
    # held to the cap per wall-clock second, and the smaller of it and their own cap wins.
    w = w4k(threads=4, group="B", arrival="per_second")
    res = simulate(Fixed(0.001, channels=4), w, 10.0, limits={"B": IopsLimit(iops=30.0)})
    assert res.frame.df["iops"].to_list() == pytest.approx([30.0] * 10, abs=1.0)
    assert res.groups["limit_iops"].to_list() == [30.0] * 10
    # Held back before issue: nothing waits in the kernel's throttle.
    assert res.groups["throttle_wait_ms"].to_list() == [0.0] * 10
    own = w4k(threads=4, group="B", arrival="per_second", rate_iops=20.0)
    res = simulate(Fixed(0.001, channels=4), own, 10.0, limits={"B": IopsLimit(iops=30.0)})
    assert res.steady_iops(1.0) == pytest.approx(20.0, abs=0.2)

    # Lifted by the controller at t = 5 s: back to the device's 4,000 IOPS.
    def lift(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        return {"B": IopsLimit()} if obs.t_end_s == pytest.approx(5.0) else None

    res = simulate(Fixed(0.001, channels=4), w, 10.0, limits={"B": IopsLimit(iops=30.0)},
                   controller=lift)
    iops = res.frame.df["iops"].to_list()
    assert iops[:5] == pytest.approx([30.0] * 5, abs=1.0)
    assert iops[6:] == pytest.approx([4000.0] * 4, rel=0.01)


def test_user_level_cap_is_shared_by_the_groups_workloads_caps() -> None:
    # Two workloads of group B capped at 30 and 10 IOPS share a user cap of 20 as 15 + 5.
    a = w4k(threads=2, group="B", arrival="per_second", rate_iops=30.0)
    b = w4k(threads=2, group="B", arrival="per_second", rate_iops=10.0,
            regions=(Region(0.5, 1.0),))
    res = simulate(Fixed(0.001, channels=4), [a, b], 10.0, limits={"B": IopsLimit(iops=20.0)})
    assert res.steady_iops(1.0) == pytest.approx(20.0, abs=0.2)


def test_throttle_release_advances_past_the_clock_resolution() -> None:
    # Regression: a token 1.07e-12 short at t = 512 s (rate 29.6/s) needs 3.6e-14 s, below
    # the spacing of doubles there (1.1e-13 s): t + wait == t, and the release event used to
    # reschedule itself at t for ever. It must land strictly later and then pass.
    from iogauge.lab.simulator import _Bucket

    b = _Bucket()
    b.set_rate(0.0, 29.6)
    t = 512.0158203061154
    b.last = t
    b.tokens = 1.0 - 1.07e-12
    assert not b.take(t)
    at = b.ready_at(t)
    assert at > t
    assert b.take(at)
    # (Found when [Oe]'s evaluation 2 -- B throttled to 29.6 reads/s -- hung at 512 s.)
