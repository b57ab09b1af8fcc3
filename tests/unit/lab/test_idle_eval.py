"""The pure part of the work-conservation evaluation (iogauge.lab.idle_eval): A's time to
floor from cumulative counts, and the result's goals."""

from __future__ import annotations

import math

import pytest

from iogauge.lab.idle_eval import IdleConfig, IdleResult, time_to_floor


def _counts(rate_at: list[tuple[float, float]], end_s: float, step_s: float = 0.1
            ) -> tuple[list[float], list[int]]:
    """Cumulative completions sampled every ``step_s`` for a piecewise-constant rate
    (``rate_at``: (from_s, IOPS) pairs)."""
    ts, ios, total = [], [], 0.0
    t = 0.0
    while t <= end_s + 1e-9:
        ts.append(round(t, 3))
        ios.append(int(total))
        rate = [r for t0, r in rate_at if t0 <= t][-1]
        total += rate * step_s
        t += step_s
    return ts, ios


def test_a_at_its_floor_from_the_start_takes_no_time() -> None:
    ts, ios = _counts([(0.0, 50.0)], 6.0)
    assert time_to_floor(ts, ios, 0.0, 50, 6.0, 1.0, 0.1) == 0.0


def test_a_held_back_for_a_while_is_measured_from_the_burst_start() -> None:
    # 10 IOPS for 1.5 s (B's queue draining), then its floor of 50.
    ts, ios = _counts([(0.0, 10.0), (1.5, 50.0)], 6.0)
    took = time_to_floor(ts, ios, 0.0, 50, 6.0, 1.0, 0.1)
    assert took is not None and 1.2 <= took <= 1.5


def test_a_never_at_its_floor_within_the_burst() -> None:
    ts, ios = _counts([(0.0, 30.0)], 6.0)
    assert time_to_floor(ts, ios, 0.0, 50, 6.0, 1.0, 0.1) is None


def test_goals_count_a_wake_up_that_never_reached_the_floor_as_late() -> None:
    r = IdleResult(IdleConfig(), "/dev/loop0", b_alone_iops=100.0, b_idle_iops=95.0,
                   wake_s=[0.1, 0.2, None])
    assert r.b_idle_share == pytest.approx(0.95)
    assert r.wake_median_s == pytest.approx(0.2) and math.isinf(r.wake_worst_s)
    lines = r.verdicts()
    assert "meets >= 90%" in lines[0] and "worst never (MISSES" in lines[1]


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="controller"):
        IdleConfig(controller="static")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="burst_s"):
        IdleConfig(burst_s=1.0, window_s=1.0)
