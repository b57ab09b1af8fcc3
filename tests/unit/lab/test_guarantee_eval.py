"""The pure parts of [Oe]'s evaluation benchmark (iogauge.lab.guarantee_eval): schedule
scaling, the per-interval floor test, convergence, the oracle, the run's numbers, fio jobs.
Every expected value is worked out by hand in the comment next to it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from iogauge.lab import guarantee_eval as ge
from iogauge.lab.workloads import file_share


def test_split_rate_adds_up_and_follows_the_read_share() -> None:
    # 54 x 0.8 = 43.2 -> 43 reads, 11 writes; 3 x 0.8 = 2.4 -> 2 + 1; 45 x 0.5 = 22.5 ->
    # round-half-even 22 + 23; 1 IOPS cannot be split: all reads at 0.8.
    assert ge.split_rate(54, 0.8) == (43, 11)
    assert ge.split_rate(3, 0.8) == (2, 1)
    assert ge.split_rate(45, 0.5) == (22, 23)
    assert ge.split_rate(1, 0.8) == (1, 0)
    # A mix that rounds to one direction keeps at least one of the other.
    assert ge.split_rate(4, 0.95) == (3, 1)
    with pytest.raises(ValueError, match="at least 1 IOPS"):
        ge.split_rate(0, 0.5)


def test_scale_schedule_keeps_the_papers_share_of_the_device() -> None:
    shares = {"file-share": 0.8, "backup": 0.5}
    # The paper's file share on A+B: 239 x 0.70 = 167.3 IOPS; a device with half of that
    # halves every target of evaluation 2: A 10/100/50 -> 5/50/25, B 200 -> 100; 4 s per
    # paper minute: 5, 10, 10 min -> 20, 40, 40 s.
    cap = {"file-share": 239.0 * 0.70 / 2, "backup": 65.0 * 0.69 * 2}
    ph = ge.scale_schedule(ge.PAPER_EVALUATIONS[2], cap, 4.0, shares)
    assert [(p.a_floor_iops, p.a_riops, p.a_wiops) for p in ph] == [(5, 4, 1), (50, 40, 10),
                                                                     (25, 20, 5)]
    assert {(p.b_demand_iops, p.b_riops, p.b_wiops) for p in ph} == {(100, 80, 20)}
    assert [(p.start_s, p.duration_s) for p in ph] == [(0.0, 20.0), (20.0, 40.0), (60.0, 40.0)]
    # Backup on A+B in the paper: 65 x 0.69 = 44.85; twice that doubles evaluation 3:
    # A 5/30/5 -> 10/60/10 (reads and writes 50:50), B 30 -> 60.
    ph3 = ge.scale_schedule(ge.PAPER_EVALUATIONS[3], cap, 1.0, shares)
    assert [(p.a_floor_iops, p.a_riops, p.a_wiops) for p in ph3] == [(10, 5, 5), (60, 30, 30),
                                                                      (10, 5, 5)]
    assert ph3[-1].end_s == 25.0


def test_floor_met_allows_boundary_slack() -> None:
    # Floor 20, 1 s: 0.95 x 20 = 19 -> 18 completions or more. Floor 3: 2.85 -> ceil 3,
    # less one: 2. A 1.1 s interval at floor 20: 20.9 -> 21 - 1 = 20.
    assert ge.floor_met([18, 17, 19], [1.0, 1.0, 1.0], 20).tolist() == [True, False, True]
    assert ge.floor_met([2, 1], [1.0, 1.0], 3).tolist() == [True, False]
    assert ge.floor_met([19, 20], [1.1, 1.1], 20).tolist() == [False, True]
    # Reads and writes paced separately: one I/O each -- floor 8: 8 - 2 = 6.
    assert ge.floor_met([6, 5, 10], [1.0] * 3, 8, slack_ios=2).tolist() == [True, False, True]


@pytest.mark.parametrize(("met", "expect"), [
    ([True] * 5, 0),
    ([False, False, True, True, True], 2),
    # One dip with two met intervals on each side is forgiven...
    ([False, True, True, False, True, True], 1),
    # ... two misses in a row, or one without two met intervals before it, are not.
    ([True, True, False, False, True, True], 4),
    ([True, False, True, False, True], 4),
    ([True, True, False, False], None),
    ([False, True, False], None),
    ([False], None),
    # The phase's end may cut the two met intervals after a dip short: one miss in the last
    # two intervals, after two met ones, is a dip (not "never settled").
    ([True, True, True, False, True], 0),
    ([False, True, True, False], 1),
    ([True, True, False], 0),
    ([], 0),
])
def test_settle_index(met: list[bool], expect: int | None) -> None:
    assert ge.settle_index(met) == expect


def test_oracle_leaves_b_the_capacity_beyond_as_floor() -> None:
    # 77.6 IOPS at 97 % busy: 80 IOPS at 100 %; A's floor 27 leaves 53 (< demand 75).
    cap, orc = ge.oracle_b_iops(97.0, 77.6, 27, 75)
    assert cap == pytest.approx(80.0) and orc == pytest.approx(53.0)
    # An unsaturated mix: 65 IOPS at 77.4 % -> 84.0 at 100 %; 84 - 9 = 75 > demand 56.
    assert ge.oracle_b_iops(77.4, 65.0, 9, 56)[1] == 56
    # A floor above the capacity leaves B nothing; no I/O: unknown.
    assert ge.oracle_b_iops(100.0, 50.0, 60, 40)[1] == 0.0
    assert all(math.isnan(v) for v in ge.oracle_b_iops(0.0, 0.0, 10, 10))


def _two_phases() -> list[ge.ScaledPhase]:
    return [ge.ScaledPhase(10, 8, 2, 40, 20, 20, 0.0, 5.0),
            ge.ScaledPhase(20, 16, 4, 40, 20, 20, 5.0, 5.0)]


def test_phase_of_uses_the_intervals_midpoint() -> None:
    import numpy as np

    t = np.array([1.0, 5.0, 5.4, 10.0, 11.0])
    dt = np.array([1.0, 1.0, 0.4, 1.0, 1.0])
    # Midpoints 0.5, 4.5, 5.2, 9.5, 10.5: phases 0, 0, 1, 1 and after the end.
    assert ge.phase_of(t, dt, _two_phases()).tolist() == [0, 0, 1, 1, -1]


def test_run_metrics_by_hand() -> None:
    s = ge.Samples()
    s.t_end_s = [float(k) for k in range(1, 11)]
    s.dt_s = [1.0] * 10
    # A uses reads and writes (slack 2). Phase 1 (floor 10: >= 8 each) all met; phase 2
    # (floor 20: >= 17) misses 5 and 12, then meets: settled after 2 s. 8 of 10 intervals
    # met; all 8 after convergence.
    s.a_ios = [10.0] * 5 + [5.0, 12.0, 20.0, 20.0, 20.0]
    # B: 30/s then 10/s -> 200 I/Os in 10 s = 20 IOPS; the oracle 40 then 10 -> 250 I/Os:
    # 200 / 250 = 80 %.
    s.b_ios = [30.0] * 5 + [10.0] * 5
    s.util_pct = [90.0] * 10
    s.dev_iops = [40.0] * 10
    nan = math.nan
    # Limits set at t=2 (20/5), raised at t=4 (25/5), cut at t=7 (10/3): 3 changes in 10 s.
    s.b_riops = [nan, 20, 20, 25, 25, 25, 10, 10, 10, 10]
    s.b_wiops = [nan, 5, 5, 5, 5, 5, 3, 3, 3, 3]
    m = ge.run_metrics(s, _two_phases(), [40.0, 10.0])
    assert m.a_met_share == pytest.approx(0.8)
    assert m.a_met_after_share == pytest.approx(1.0)
    assert m.settle_s == [0.0, 2.0] and m.unsettled == []
    assert m.b_iops == pytest.approx(20.0)
    assert m.oracle_b_iops == pytest.approx(25.0)
    assert m.b_vs_oracle == pytest.approx(0.8)
    assert m.limit_changes_per_min == pytest.approx(18.0)
    p2 = m.phases[1]
    # Phase 2: A (5 + 12 + 60) / 5 s = 15.4 IOPS, B 10, 3 of 5 met.
    assert p2.a_iops == pytest.approx(15.4)
    assert (p2.b_iops, p2.a_met_share) == (10.0, 0.6)


def test_run_metrics_names_a_phase_that_never_settles() -> None:
    s = ge.Samples()
    s.t_end_s = [float(k) for k in range(1, 11)]
    s.dt_s = [1.0] * 10
    s.a_ios = [10.0] * 5 + [5.0] * 5
    s.b_ios = [0.0] * 10
    s.util_pct = s.dev_iops = [0.0] * 10
    s.b_riops = s.b_wiops = [math.nan] * 10
    m = ge.run_metrics(s, _two_phases(), [40.0, 10.0])
    # Only phase 1's intervals count after convergence; phase 2 is reported as unsettled.
    assert m.settle_s == [0.0, None] and m.unsettled == [1]
    assert m.a_met_share == pytest.approx(0.5) and m.a_met_after_share == pytest.approx(1.0)
    assert m.limit_changes_per_min == 0.0


def test_static_limit_is_phase_ones_share() -> None:
    # 0.9 x 84.0 - 9 = 66.6 IOPS, 50:50: 33.3 + 33.3; on the kernel's grid reads bind at 30
    # and writes go up to 40 (B at 50:50 gets 60, as 30 + 30 would, and no less).
    first = ge.ScaledPhase(9, 5, 4, 56, 28, 28, 0.0, 20.0)
    assert ge._static_limit([first], 84.0, 0.5, 0.9) == (30, 40)
    # Small: 0.9 x 20 - 9 = 9 -> 4.5 + 4.5, under one grid step: 4 + 4.
    assert ge._static_limit([first], 20.0, 0.5, 0.9) == (4, 4)


def test_fio_text_places_caps_and_starts_each_phase() -> None:
    wl = file_share("A", threads=1)
    text = ge.fio_text([ge.FioJob("a-phase1", wl, 0.0, 20.0, 2, 1),
                        ge.FioJob("a-phase2", wl, 20.0, 40.0, 43, 11)], "/dev/loop9",
                       10**12, 10)
    glob, one, two = text.rstrip("\n").split("\n\n")
    assert "ioengine=libaio" in glob.splitlines() and "iodepth=10" in glob.splitlines()
    assert "filename=/dev/loop9" in glob and "time_based=1" in glob
    # Partition A: the device's first quarter, from fio_job with device_bytes.
    assert "offset=0" in one.splitlines() and "size=249999998976" in one.splitlines()
    assert one.splitlines()[-3:] == ["startdelay=0", "runtime=20", "rate_iops=2,1"]
    # 2 reads + 1 write a second: the mix follows the caps (67 % reads), not the 80 % default.
    assert "rwmixread=67" in one.splitlines()
    assert two.splitlines()[-3:] == ["startdelay=20", "runtime=40", "rate_iops=43,11"]
    assert "rwmixread=80" in two.splitlines()


def test_cgroup_pair_removes_both_groups_even_on_error(tmp_path: Path) -> None:
    made: list[Path] = []

    def fail_inside() -> None:
        with ge.cgroup_pair("t", root=tmp_path) as (a, b):
            made.extend((a, b))
            assert a.is_dir() and b.is_dir() and a.name.startswith(ge.CGROUP_PREFIX)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert len(made) == 2 and not any(p.exists() for p in made)
    assert ge.leftover_cgroups(tmp_path) == []


def test_config_refuses_unknown_evaluations_and_controllers() -> None:
    with pytest.raises(ValueError, match="evaluations"):
        ge.EvalConfig(evaluations=(4,))
    with pytest.raises(ValueError, match="controllers"):
        ge.EvalConfig(controllers=("oracle",))  # type: ignore[arg-type]
    assert ge.QUICK.seconds_per_minute * 5 == pytest.approx(8.0)


def test_grid_oracle_keeps_bs_mix_on_the_kernels_grid() -> None:
    # 50:50, oracle 35: 17.5 per direction -> 10 enforceable each -> 20 in all.
    assert ge.grid_oracle_b_iops(35.0, 0.5) == 20.0
    # 80:20, oracle 54: reads 43.2 -> 40 binding (writes above need): 40/0.8 = 50; or writes
    # 10.8 -> 10 binding: 10/0.2 = 50. Oracle 90.7: reads 72.6 -> 70: 87.5 (writes binding at
    # 18.1 -> 10 would give only 50).
    assert ge.grid_oracle_b_iops(54.0, 0.8) == pytest.approx(50.0)
    assert ge.grid_oracle_b_iops(90.7, 0.8) == pytest.approx(87.5)
    # Below one grid step a direction is enforced as written: 8 at 50:50 -> 4 + 4.
    assert ge.grid_oracle_b_iops(8.0, 0.5) == 8.0
    # One direction only: 37 -> 30.
    assert ge.grid_oracle_b_iops(37.0, 1.0) == 30.0
    assert ge.grid_oracle_b_iops(0.0, 0.5) == 0.0


def test_run_metrics_against_the_grid_oracle() -> None:
    s = ge.Samples()
    s.t_end_s = [float(k) for k in range(1, 11)]
    s.dt_s = [1.0] * 10
    s.a_ios = [20.0] * 10
    s.b_ios = [20.0] * 10
    s.util_pct = s.dev_iops = [50.0] * 10
    s.b_riops = s.b_wiops = [10.0] * 10
    # 200 B I/Os against 5 s x 40 + 5 s x 20 = 300 (fluid) and 5 x 20 + 5 x 20 = 200 (grid).
    m = ge.run_metrics(s, _two_phases(), [40.0, 20.0], grid_oracle=[20.0, 20.0])
    assert m.b_vs_oracle == pytest.approx(200 / 300)
    assert m.b_vs_grid_oracle == pytest.approx(1.0)
    assert [p.grid_oracle_b_iops for p in m.phases] == [20.0, 20.0]
    assert math.isnan(ge.run_metrics(s, _two_phases(), [40.0, 20.0]).b_vs_grid_oracle)


# ---- the static oracle, found by trying limits ----------------------------------------------

def test_static_limit_candidates_cover_each_enforced_rate_once() -> None:
    # B 95 IOPS at 80 % reads: below the grid every whole read limit is its own rate (1 read
    # keeps B at 1.25 IOPS), on it the reads bind in steps of 10 (12.5 IOPS of B) and the
    # writes are raised to the next step; last, no limit (B's whole demand).
    c = ge.static_limit_candidates(95, 0.8)
    assert c[:3] == [((1, 1), 1.25), ((2, 1), 2.5), ((3, 1), 3.75)]
    assert c[-4:] == [((50, 20), 62.5), ((60, 20), 75.0), ((70, 20), 87.5), (None, 95.0)]
    keeps = [k for _lim, k in c]
    assert keeps == sorted(set(keeps))
    # A 50:50 B: both directions bind together, in steps of 20 IOPS of B on the grid.
    assert ge.static_limit_candidates(45, 0.5)[-3:] == [((10, 10), 20.0), ((20, 20), 40.0),
                                                        (None, 45.0)]


@pytest.mark.parametrize(("n", "last_good", "start"), [
    (13, 9, 8), (13, 9, 12), (13, 12, 3), (13, -1, 5), (1, 0, 0), (1, -1, 0), (5, 0, 4)])
def test_largest_good_bisects_from_the_start(n: int, last_good: int, start: int) -> None:
    tried: list[int] = []

    def good(i: int) -> bool:
        tried.append(i)
        return i <= last_good

    assert ge.largest_good(n, good, start=start) == last_good
    assert tried[0] == start and len(tried) == len(set(tried))
    assert len(tried) <= 1 + math.ceil(math.log2(n + 1))


def test_search_static_oracle_keeps_the_best_limit_that_meets_a(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A device on which A (floor 20, reads only) is met while B gets at most 40 IOPS: the
    # search must settle on the candidate that keeps B at 37.5 (reads 30, writes 10) and
    # report what B did under it.
    phase = ge.ScaledPhase(20, 20, 0, 95, 76, 19, 0.0, 40.0)
    cal = ge.PhaseCalibration(20, 95, 100.0, 90.0, 20.0, 70.0, 90.0, 70.0)
    cfg = ge.EvalConfig(warmup_s=2.0, oracle_search_s=6.0)
    limits: list[tuple[int, int] | None] = []

    def fake_run_once(_dev: str, _bytes: int, _ev: ge.Evaluation,
                      sched: list[ge.ScaledPhase], controller: str, _cfg: ge.EvalConfig,
                      _wd: Path, _tag: str, *, static_limit: tuple[int, int] | None = None,
                      **_kw: object) -> ge.RunResult:
        assert sched[0].duration_s == 8.0 and sched[0].a_floor_iops == 20
        assert controller == ("static" if static_limit else "no-control")
        limits.append(static_limit)
        b = 95.0 if static_limit is None else min(95.0, static_limit[0] / 0.8,
                                                  static_limit[1] / 0.2)
        s = ge.Samples()
        s.t_end_s = [float(k) for k in range(1, 9)]
        s.dt_s = [1.0] * 8
        s.a_ios = [20.0 if b <= 40 else 12.0] * 8
        s.b_ios = [b] * 8
        return ge.RunResult(1, controller, sched, static_limit, s)

    monkeypatch.setattr(ge, "run_once", fake_run_once)
    ge.search_static_oracle("/dev/null", 1, ge.PAPER_EVALUATIONS[2], phase, cal, cfg,
                            tmp_path)
    assert cal.static_oracle_limit == (30, 10)
    assert cal.static_oracle_b_iops == pytest.approx(37.5)
    # The first try is the candidate nearest the calibrated bound (70: reads 50, writes 20).
    assert limits[0] == (50, 20) and len(limits) <= 5
    assert [t[:2] for t in cal.static_oracle_tries] == [lim for lim in limits if lim]
    # A phase whose bound is B's whole demand is tried without a limit first; here A is
    # short then (B 60 > 40), so the search goes down to the same 37.5.
    free = ge.PhaseCalibration(20, 60, 70.0, 65.0, 20.0, 60.0, 93.0, 60.0)
    limits.clear()
    ge.search_static_oracle("/dev/null", 1, ge.PAPER_EVALUATIONS[2],
                            ge.ScaledPhase(20, 20, 0, 60, 48, 12, 0.0, 40.0), free, cfg,
                            tmp_path)
    assert limits[0] is None and free.static_oracle_limit == (30, 10)
    assert free.static_oracle_b_iops == pytest.approx(37.5)


def test_config_refuses_a_negative_oracle_search() -> None:
    with pytest.raises(ValueError, match="oracle_search_s"):
        ge.EvalConfig(oracle_search_s=-1.0)
    assert ge.QUICK.oracle_search_s == 0.0 and ge.EvalConfig().oracle_search_s == 20.0


def test_run_metrics_against_the_static_oracle() -> None:
    s = ge.Samples()
    s.t_end_s = [float(k) for k in range(1, 11)]
    s.dt_s = [1.0] * 10
    s.a_ios = [10.0] * 5 + [20.0] * 5
    s.b_ios = [30.0] * 5 + [10.0] * 5
    s.util_pct = s.dev_iops = [50.0] * 10
    s.b_riops = s.b_wiops = [math.nan] * 10
    # B 200 I/Os; the static oracle left 36 then 14 IOPS: 250 -> 80 %.
    m = ge.run_metrics(s, _two_phases(), [40.0, 20.0], static_oracle=[36.0, 14.0])
    assert m.b_vs_static_oracle == pytest.approx(0.8)
    assert m.phases[1].static_oracle_b_iops == 14.0
    assert math.isnan(ge.run_metrics(s, _two_phases(), [40.0, 20.0]).b_vs_static_oracle)


def test_the_last_phase_runs_past_the_schedule_so_the_last_interval_has_load() -> None:
    # Evaluation 3 on the ssd, --quick (2026-12-06 17:35): the last interval woke 0.15 s
    # late (t 39.0-40.15) with fio already done, and A's 333 I/Os were judged against
    # 458 x 1.15. The last phase's jobs now run two intervals past the end.
    wl = file_share("A", threads=1)
    ph = [ge.ScaledPhase(9, 5, 4, 57, 29, 28, 0.0, 8.0),
          ge.ScaledPhase(57, 29, 28, 57, 29, 28, 8.0, 16.0)]
    a = ge.phase_jobs("a", wl, ph, lambda p: (p.a_riops, p.a_wiops), 2.0)
    b = ge.phase_jobs("b", wl, ph, lambda p: (p.b_riops, p.b_wiops), 2.0)
    assert [(j.name, j.start_s, j.duration_s, j.riops, j.wiops) for j in a] == [
        ("a-phase1", 0.0, 8.0, 5, 4), ("a-phase2", 8.0, 18.0, 29, 28)]
    assert [(j.start_s + j.duration_s, j.riops) for j in b] == [(8.0, 29), (26.0, 29)]
    text = ge.fio_text(a, "/dev/loop9", 10**12, 10)
    assert "runtime=18" in text.splitlines()


def test_the_ssd_is_run_by_its_latency_knee() -> None:
    # The emulated device is a loop device, which the controller's auto detection takes
    # for one spindle: the evaluation asks for what auto picks on the device emulated.
    assert ge.EvalConfig(model="ssd").capacity_model == "latency"
    assert ge.EvalConfig(model="raid").capacity_model == "latency"
    assert ge.EvalConfig().capacity_model == "auto"
    assert ge.EvalConfig(model="ssd", capacity_model="util").capacity_model == "util"
