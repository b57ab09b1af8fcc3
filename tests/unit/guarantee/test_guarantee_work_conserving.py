"""Work conservation: while A shows no demand B's limits open; A's return reserves its floor
at once; --reserve-idle keeps the reservation; the figures of a run (B against B alone, the
unused reservation, A's wake-ups) from the decision store, in `guarantee show` too."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cgroup_fixtures import SYSFS, FakeKernel, KernelEmu
from test_guarantee_cli import _run as _cli

from iogauge.guarantee.figures import figures_from_store
from iogauge.guarantee.policy import (
    UNLIMITED,
    AdaptiveParams,
    GroupLimit,
    GroupObservation,
    Observation,
    PaperPolicy,
    State,
    Targets,
    make_policy,
)

#: A spindle of 100 IOPS at 100 % busy; A's floor 50.
CAP = 100.0
T = Targets(protected={"A": 50.0}, throttled=("B",), limit_grid_iops=10)


def _obs(a_iops: float, limit: GroupLimit, *, stall_pct: float | None = None) -> Observation:
    """One second of the spindle: B (read-only, wants everything) under ``limit``, A at
    ``a_iops``; B gets what is left."""
    b = CAP - a_iops if limit.riops is None else min(float(limit.riops), CAP - a_iops)
    util = min(100.0, a_iops + b)
    return Observation(1.0, util, a_iops + b, 0.0,
                       {"A": GroupObservation(a_iops, 0.0, None, stall_pct),
                        "B": GroupObservation(b, 0.0)}, await_ms=10.0, aqu_sz=1.0)


def _run(policy: object, a_series: list[float], **kw: float) -> list[tuple[State, GroupLimit]]:
    limit = UNLIMITED
    out = []
    for a in a_series:
        d = policy.step(_obs(a, limit, **kw))  # type: ignore[attr-defined]
        limit = d.limits["B"]
        out.append((d.state, limit))
    return out


def test_idle_a_opens_b_in_steps_then_lifts_the_limit() -> None:
    steps = _run(make_policy("adaptive", T), [50.0] * 6 + [0.0] * 6)
    reserved = steps[5][1]
    assert reserved.riops is not None and reserved.riops < CAP
    states = [s for s, _ in steps[6:]]
    # Two idle intervals (idle_after), then open: doubled once, then lifted.
    assert states[:2] != [State.OPEN, State.OPEN] and State.OPEN in states
    opened = [lim for s, lim in steps[6:] if s is State.OPEN]
    assert opened[0].riops is not None and opened[0].riops > reserved.riops
    assert opened[-1] == UNLIMITED


def test_a_returning_reserves_its_floor_at_once_and_is_not_judged_on_the_drain() -> None:
    policy = make_policy("adaptive", T)
    steps = _run(policy, [50.0] * 6 + [0.0] * 6)
    reserved = steps[5][1]
    limit = steps[-1][1]
    assert limit == UNLIMITED
    # A's first I/O: a short interval with a few completions (the controller's fast look).
    d = policy.step(_obs(5.0, limit))
    assert d.state is State.WAKE and not d.a_miss
    assert d.limits["B"].riops is not None and d.limits["B"].riops <= (reserved.riops or 0) + 10
    # The next interval ran while B's queue drained: A short, but not a miss.
    d2 = policy.step(_obs(30.0, d.limits["B"]))
    assert not d2.a_miss and d2.state is not State.PROTECT


def test_reserve_idle_keeps_the_floor_reserved() -> None:
    policy = make_policy("adaptive", T, adaptive=AdaptiveParams(reserve_idle=True))
    steps = _run(policy, [50.0] * 6 + [0.0] * 10)
    assert all(s is not State.OPEN for s, _ in steps)
    assert all(lim.riops is not None and lim.riops < CAP for _, lim in steps[6:])


def test_a_stalled_on_io_is_not_idle() -> None:
    # cgroup v2: nothing completed, but A's tasks waited on I/O -- its I/O is queued.
    policy = make_policy("adaptive", T)
    _run(policy, [50.0] * 6)
    steps = _run(policy, [0.0] * 6, stall_pct=40.0)
    assert all(s is not State.OPEN for s, _ in steps)


def test_the_paper_policy_always_reserves() -> None:
    policy = PaperPolicy(T)
    steps = _run(policy, [50.0] * 4 + [0.0] * 8)
    assert all(s is not State.OPEN for s, _ in steps)


def test_open_params_are_checked() -> None:
    with pytest.raises(ValueError, match="idle_after"):
        AdaptiveParams(idle_after=0)


# ---- the controller, the store and `guarantee show` ----------------------------------------


def test_idle_then_waking_a_is_recorded_and_shown(tmp_path: Path, v1_root: Path,
                                                  mounts_file: Path, kernel: KernelEmu) -> None:
    a, b = v1_root / "a", v1_root / "b"
    db = tmp_path / "g.duckdb"
    fk = FakeKernel(tmp_path / "proc", r_iops=100, w_iops=0, util_pct=100, await_ms=10,
                    groups={a: (0, 0), b: (100, 0)})
    with fk:
        # A wakes after B has opened (warm-up and two idle decisions take 1.6 s): from then
        # on it does 50 reads/s. (Margins for a loaded machine.)
        timer = threading.Timer(3.5, lambda: fk.groups.update({a: (50, 0)}))
        timer.start()
        try:
            code, out, err = _cli(
                "guarantee", "--device", "sda", "--protect", f"{a}:50", "--throttle", str(b),
                "--interval", "0.4", "--sample-interval", "0.1", "--duration", "5.5",
                "--dry-run", "--db", str(db), "--capacity-model", "util",
                "--procfs-root", str(tmp_path / "proc"), "--sysfs-root", str(SYSFS),
                "--mounts-file", str(mounts_file))
        finally:
            timer.cancel()
    assert code == 0, err
    assert "[open]" in out and "[wake]" in out, out
    assert out.index("[open]") < out.index("[wake]")
    fig = figures_from_store(db)
    assert fig.a_idle_s > 0 and fig.b_idle_iops is not None and fig.b_alone_measured
    assert len(fig.wakeups) == 1
    code, out, err = _cli("guarantee", "show", "--db", str(db))
    assert code == 0, err
    assert "while A was idle" in out and "A woke 1 times" in out
    assert "reserved but not used" in out


def test_reserve_idle_option_never_opens(tmp_path: Path, v1_root: Path, mounts_file: Path,
                                         kernel: KernelEmu) -> None:
    a, b = v1_root / "a", v1_root / "b"
    db = tmp_path / "g.duckdb"
    with FakeKernel(tmp_path / "proc", r_iops=100, w_iops=0, util_pct=100, await_ms=10,
                    groups={a: (0, 0), b: (100, 0)}):
        code, out, err = _cli(
            "guarantee", "--device", "sda", "--protect", f"{a}:50", "--throttle", str(b),
            # 4 s at 0.2 s: enough decisions past the warm-up even on a loaded machine (at
            # 1.6 s a CI run under xdist saw only the warm-up's)
            "--interval", "0.2", "--duration", "4", "--dry-run", "--db", str(db),
            "--reserve-idle", "--capacity-model", "util",
            "--procfs-root", str(tmp_path / "proc"), "--sysfs-root", str(SYSFS),
            "--mounts-file", str(mounts_file))
    assert code == 0, err
    assert "[hold]" in out, out  # past the warm-up
    assert "[open]" not in out, out
    fig = figures_from_store(db)
    # A did nothing and its whole floor was held back from B.
    assert fig.reserved_unused_iops > 40 and fig.wakeups == ()
