"""The guarantee is work conserving on the lab's emulated HDD and SSD: with A idle B gets
>= 90 % of what it gets alone, and when A wakes with a burst at its floor A is back at
>= 95 % of its floor within 2 s (median) and 4 s (worst).

fio runs in two real cgroup v1 blkio groups on the lab's emulated device (a loop device over
a FUSE file, :func:`iogauge.lab.device.create_device`); the controller runs in-process with
the default (adaptive) policy, 1 s decisions and its 0.2 s look at A's counters while B is
open (:mod:`iogauge.lab.idle_eval`, whose module docstring defines every figure). The
ssd runs the latency method (``capacity_model = "latency"``). Each device takes ~1.3 min:
6 s B alone, 30 s with A idle (the controller's warm-up and B's opening weigh twice what
they do in 60 s, so the share is the stricter for it), 5 wake-ups of 3 s after 3 s idle
(B opened; a burst measures A's time to floor up to 2 s, so a slower one fails the 4 s goal
here), 6 s B alone again. The issue's figures (60 s idle, 10 wake-ups), with
``--reserve-idle`` and the paper's policy beside them, are
``benchmarks/guarantee_eval.py --work-conservation``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.helpers.system import require_lab_device, require_root

pytestmark = [pytest.mark.slow, pytest.mark.root]


@pytest.mark.parametrize("model", ["hdd", "ssd"])
def test_idle_a_leaves_b_the_device_and_a_waking_gets_its_floor_back(
        model: str, backing_dir: Path) -> None:
    require_root()
    if not Path("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device").exists():
        pytest.skip("needs the cgroup v1 blkio hierarchy with throttling")
    require_lab_device()
    from iogauge.lab.cgroup_rig import controller_capacity_model, leftover_cgroups
    from iogauge.lab.idle_eval import IdleConfig, results_table, run_idle

    cfg = IdleConfig(model=model, capacity_model=controller_capacity_model(model),
                     alone_s=6.0, alone_warmup_s=1.5, idle_s=30.0, wakeups=5, burst_s=3.0,
                     rest_s=3.0, backing_dir=str(backing_dir))
    r = run_idle(cfg)
    print(f"\n{results_table([r])}\n" + "\n".join(r.verdicts()))
    print("time to floor per wake-up: " + ", ".join(
        "never" if w is None else f"{w:.1f} s" for w in r.wake_s))
    # Nothing created outlives the run, and every limit was restored.
    assert leftover_cgroups(pid=os.getpid()) == []
    assert any("restored" in line for line in r.controller_lines)
    assert r.b_idle_share >= 0.90, "\n".join(r.controller_lines[-40:])
    assert len(r.wake_s) == 5
    assert r.wake_median_s <= 2.0, r.wake_s
    assert r.wake_worst_s <= 4.0, r.wake_s
