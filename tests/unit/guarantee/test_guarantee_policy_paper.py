"""The paper policy reproduces seed 004 §4's arithmetic on hand-made observation sequences.

Each sequence is built so the numbers can be checked by hand; the comments give the
arithmetic. Seed 004 §5 reports X lowered to 63 % (eval 1, which needed a second update) and
to 87 % in one update (eval 2; eval 3 "follows the same course"). The sequences below drive
the same path — three 100 % samples in the last ten, point 1 (C, c), B cut by 20 % of C until
%util < 100, point 2 (d), NewX = X - (c - d)·C·y with y = 0.5 — to exactly those values.
"""

from __future__ import annotations

import pytest

from iogauge.guarantee.policy import (
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    PaperParams,
    PaperPolicy,
    Targets,
    make_policy,
)


def obs(util: float, total: float, *, b_read_share: float = 1.0, a_iops: float = 0.0,
        b_iops: float | None = None) -> Observation:
    """Device at ``util`` % doing ``total`` IOPS (all reads), A doing ``a_iops``, B the rest."""
    b = total - a_iops if b_iops is None else b_iops
    return Observation(
        interval_s=20.0, util_pct=util, r_iops=total, w_iops=0.0,
        groups={"A": GroupObservation(a_iops, 0.0),
                "B": GroupObservation(b * b_read_share, b * (1 - b_read_share))})


def policy(a: float, **params: object) -> PaperPolicy:
    """The paper policy for floor ``a``; the read/write split keeps no minimum share unless
    asked (the paper limited a total, so its arithmetic is checked on one direction)."""
    params.setdefault("rw_min_share", 0.0)
    p = make_policy("paper", Targets({"A": a}, ("B",)), paper=PaperParams(**params))  # type: ignore[arg-type]
    assert isinstance(p, PaperPolicy)
    return p


def b_total(d: Decision) -> int:
    """B's read limit: these sequences are all reads, so writes sit at the minimum, 1."""
    lim = d.limits["B"]
    assert lim.riops is not None and lim.wiops == 1
    return lim.riops


def test_busy_per_iops_and_b_limit_follow_section_4() -> None:
    # busy_per_iops = 50 / (80 + 20) = 0.5 %/IOPS; a_busy = 10·0.5 = 5 %;
    # b_busy = 95 - 5 = 90 %; b = 90 / 0.5 = 180 IOPS, split 75:25 as B's reads:writes.
    p = policy(10)
    o = Observation(20.0, 50.0, 80.0, 20.0, {"A": GroupObservation(10.0, 0.0),
                                             "B": GroupObservation(60.0, 20.0)})
    d = p.step(o)
    assert d.state == "compute"
    assert d.busy_per_iops == pytest.approx(0.5)
    assert d.x_pct == 95.0
    assert d.capacity_iops == pytest.approx(200.0)
    assert d.limits == {"B": GroupLimit(135, 45)}
    assert "b = 180.0 IOPS" in d.reason
    assert "A" not in d.limits


def test_detection_needs_three_full_samples_within_the_last_ten() -> None:
    p = policy(10)
    states = []
    # Full at samples 1, 5 and 12: sample 1 has left the ten-sample window by sample 12.
    for k in range(1, 13):
        states.append(p.step(obs(100.0 if k in (1, 5, 12) else 60.0, 100.0)).state)
    assert "cut" not in states
    assert states[-1] == "counting"
    assert sum(p.window) == 2
    # One more within the window (samples 5, 12, 13) triggers point 1.
    assert p.step(obs(100.0, 100.0)).state == "cut"
    assert p.episode == (100.0, 1.0)  # C = 100 IOPS, c = 100/100 %/IOPS


def test_two_full_samples_do_not_trigger() -> None:
    p = policy(10)
    for u in (100, 100, 50, 50, 50, 50, 50, 50, 50, 50):
        d = p.step(obs(u, 100.0))
    assert d.state == "counting" and p.episode is None


def test_iostat_rounding_decides_what_100_percent_is() -> None:
    p = policy(10)
    for _ in range(3):
        p.step(obs(99.996, 100.0))  # prints as 100.00
    assert p.episode is not None
    q = policy(10)
    for _ in range(3):
        q.step(obs(99.99, 100.0))  # prints as 99.99: not "100 %"
    assert q.episode is None


def test_eval1_path_x_to_63_then_a_second_update() -> None:
    a = 50.0  # eval 1, second phase: A's target 50 IOPS (Table 4)
    p = policy(a)
    p.step(obs(100.0, 80.0, a_iops=40.0))                 # full 1
    p.step(obs(80.0, 80.0, a_iops=45.0))                  # not full
    p.step(obs(100.0, 80.0, a_iops=40.0))                 # full 2
    d = p.step(obs(100.0, 80.0, a_iops=40.0))             # full 3 -> point 1
    # C = 80, c = 100/80 = 1.25; b = (95 - 50·1.25)/1.25 = 26; cut 0.2·80 = 16 -> 10.
    assert d.state == "cut"
    assert p.episode == (80.0, 1.25)
    assert b_total(d) == 10
    d = p.step(obs(100.0, 76.0, a_iops=40.0))             # still 100 %: cut continues
    # bpi = 100/76; b = 95·0.76 - 50 = 22.2; minus 16 = 6.2 -> 6.
    assert d.state == "cut" and b_total(d) == 6
    d = p.step(obs(27.0, 60.0, a_iops=50.0))              # point 2: d = 27/60 = 0.45
    # NewX = 95 - (1.25 - 0.45)·80·0.5 = 95 - 32 = 63.
    assert d.state == "update"
    assert d.x_pct == pytest.approx(63.0)
    assert p.updates == 1
    # The limit is back to the plain computation with the new X:
    # a_busy = 50·0.45 = 22.5; b_busy = 40.5; b = 90.
    assert b_total(d) == 90
    assert "NewX = X - (c - d)·C·y = 95.00 - (1.2500 - 0.4500)·80.0·0.5 = 63.00 %" in d.reason
    # Eval 1 needed a second update, again after three *new* 100 % samples (Fig. 11):
    # the window restarted at the update.
    assert p.step(obs(100.0, 70.0, a_iops=40.0)).state == "counting"
    assert p.step(obs(100.0, 70.0, a_iops=40.0)).state == "counting"
    d = p.step(obs(100.0, 70.0, a_iops=40.0))
    assert d.state == "cut" and p.episode == (70.0, pytest.approx(100 / 70))
    d = p.step(obs(40.0, 60.0, a_iops=50.0))
    # NewX = 63 - (100/70 - 40/60)·70·0.5 = 63 - (100 - 46.667)·0.5 = 36.33.
    assert d.state == "update"
    assert d.x_pct == pytest.approx(63 - (100 / 70 - 40 / 60) * 70 * 0.5)
    assert p.updates == 2


@pytest.mark.parametrize(("a", "big_c", "point2"), [
    (100.0, 200.0, (63.0, 150.0)),  # eval 2: c = 0.5, d = 63/150 = 0.42
    (30.0, 60.0, (70.0, 50.0)),     # eval 3: c = 1.6667, d = 1.4
])
def test_eval2_and_eval3_paths_x_to_87_in_one_update(a: float, big_c: float,
                                                      point2: tuple[float, float]) -> None:
    p = policy(a)
    for _ in range(3):
        d = p.step(obs(100.0, big_c, a_iops=a * 0.8))
    assert d.state == "cut"
    d = p.step(obs(point2[0], point2[1], a_iops=a))
    # eval 2: 95 - (0.5 - 0.42)·200·0.5 = 87;  eval 3: 95 - (1.6667 - 1.4)·60·0.5 = 87.
    assert d.state == "update"
    assert d.x_pct == pytest.approx(87.0)
    assert p.updates == 1
    # Stable afterwards: below 100 % nothing changes X.
    for _ in range(10):
        d = p.step(obs(point2[0], point2[1], a_iops=a))
    assert d.x_pct == pytest.approx(87.0) and p.updates == 1


def test_cut_is_20_percent_of_c_below_the_computed_limit() -> None:
    p = policy(20, cut_frac=0.2)
    for _ in range(3):
        d = p.step(obs(100.0, 200.0, a_iops=20.0))
    # bpi = 0.5; b = (95 - 10)/0.5 = 170; cut = 0.2·200 = 40 -> 130.
    assert b_total(d) == 130
    q = policy(20, cut_frac=0.3)
    for _ in range(3):
        d = q.step(obs(100.0, 200.0, a_iops=20.0))
    assert b_total(d) == 110


def test_new_x_never_rises_nor_falls_below_its_bound() -> None:
    p = policy(10)
    for _ in range(3):
        p.step(obs(100.0, 100.0))  # c = 1.0
    d = p.step(obs(90.0, 60.0))  # d = 1.5 > c: the formula would raise X
    assert d.state == "update" and d.x_pct == 95.0
    q = policy(10, x_min_pct=30.0)
    for _ in range(3):
        q.step(obs(100.0, 100.0))  # c = 1.0
    d = q.step(obs(1.0, 100.0))  # d = 0.01: 95 - 0.99·100·0.5 = 45.5
    assert d.x_pct == pytest.approx(45.5)
    for _ in range(3):
        q.step(obs(100.0, 100.0))
    d = q.step(obs(1.0, 100.0))  # 45.5 - 49.5 < 30 -> 30
    assert d.x_pct == 30.0


def _lowered(a: float = 10.0) -> PaperPolicy:
    """A policy whose X went 95 -> 63 (c = 1.25 at C = 80, d = 0.45)."""
    p = policy(a)
    for _ in range(3):
        p.step(obs(100.0, 80.0))
    p.step(obs(27.0, 60.0))
    assert p.x_pct == pytest.approx(63.0)
    return p


def test_reset_when_busy_falls_below_20_percent_of_target() -> None:
    p = _lowered()
    d = p.step(obs(12.7, 28.0))  # 12.7 >= 0.2·63 = 12.6, bpi 0.45: stays
    assert d.x_pct == pytest.approx(63.0) and d.state == "compute"
    d = p.step(obs(12.5, 28.0))  # below 12.6 (bpi 0.446: no jump)
    assert d.state == "reset" and d.x_pct == 95.0
    assert p.resets == 1


def test_reset_low_absolute_reading() -> None:
    p = _lowered()
    p.params = PaperParams(reset_low_relative=False)
    d = p.step(obs(19.0, 42.0))  # < 20 % absolute (bpi 0.452: no jump)
    assert d.state == "reset" and d.x_pct == 95.0


def test_reset_when_busy_per_iops_jumps_as_in_eval1() -> None:
    # Eval 1 after A's target fell back to 5 IOPS: %util/iops went 0.8 -> 1.3 with %util
    # around 50 %, so the low-busy reset never fired (§5). The jump reset does.
    p = _lowered()
    d = p.step(obs(48.0, 60.0))  # 0.8 %/IOPS (from 0.45: x1.78, a jump too)
    assert d.state == "reset"
    p2 = _lowered()
    p2.prev_bpi = 0.8
    d = p2.step(obs(52.0, 40.0))  # 1.3 %/IOPS: x1.625 >= 1.5
    assert d.state == "reset" and d.x_pct == 95.0
    assert "0.8000 → 1.3000" in d.reason
    p3 = _lowered()
    p3.prev_bpi = 0.8
    d = p3.step(obs(50.0, 50.0))  # 1.0: x1.25, no reset
    assert d.state == "compute" and d.x_pct == pytest.approx(63.0)


def test_jump_reset_can_be_disabled_to_run_the_paper_as_published() -> None:
    p = _lowered()
    p.params = PaperParams(bpi_jump_ratio=None)
    p.prev_bpi = 0.8
    d = p.step(obs(52.0, 40.0))
    assert d.state == "compute" and d.x_pct == pytest.approx(63.0)


def test_saturated_samples_are_not_compared_for_jumps() -> None:
    p = _lowered()
    # 100 % at 40 IOPS (bpi 2.5, x5.6 from 0.45) must not reset: it counts toward an update.
    d = p.step(obs(100.0, 40.0))
    assert d.state == "counting" and d.x_pct == pytest.approx(63.0)


def test_infeasible_floor_keeps_b_at_its_minimum_and_says_why_once() -> None:
    p = make_policy("paper", Targets({"A": 300.0}, ("B",), b_min_iops=3))
    d = p.step(obs(80.0, 200.0, a_iops=150.0))
    # bpi 0.4: a_busy = 120 % > X = 95 %: b = -62.5.
    assert d.limits["B"] == GroupLimit(3, 3)
    assert len(d.warnings) == 1
    w = d.warnings[0]
    assert "300 IOPS" in w and "120.0 % busy" in w and "capacity ≈ 250 IOPS" in w
    assert p.step(obs(80.0, 200.0, a_iops=150.0)).warnings == ()


def test_idle_interval_keeps_limits() -> None:
    p = policy(10)
    first = p.step(obs(50.0, 100.0))
    d = p.step(Observation(20.0, 0.0, 0.0, 0.0, {}))
    assert d.state == "idle" and d.limits == first.limits


def test_several_b_groups_share_the_budget_by_recent_iops() -> None:
    p = make_policy("paper", Targets({"A": 10.0}, ("B1", "B2")),
                    paper=PaperParams(rw_min_share=0.0))
    o = Observation(20.0, 50.0, 100.0, 0.0, {"A": GroupObservation(10.0, 0.0),
                                             "B1": GroupObservation(60.0, 0.0),
                                             "B2": GroupObservation(30.0, 0.0)})
    d = p.step(o)
    # b = 180, split 2:1 -> 120 and 60 (all reads; writes at the minimum 1).
    assert d.limits["B1"] == GroupLimit(120, 1)
    assert d.limits["B2"] == GroupLimit(60, 1)


def test_set_floors_changes_a_for_the_next_step() -> None:
    p = policy(10)
    assert b_total(p.step(obs(50.0, 100.0))) == 180
    p.set_floors({"A": 50.0})
    assert b_total(p.step(obs(50.0, 100.0))) == 140  # (95 - 25)/0.5
    with pytest.raises(ValueError, match="exactly the protected groups"):
        p.set_floors({"C": 5.0})


def test_read_write_split_keeps_a_share_for_the_unused_direction() -> None:
    # B did only reads; with the default rw_min_share 0.1 its writes keep 10 % of b = 180.
    p = make_policy("paper", Targets({"A": 10.0}, ("B",)))
    d = p.step(obs(50.0, 100.0, a_iops=10.0))
    assert d.limits["B"] == GroupLimit(162, 18)
