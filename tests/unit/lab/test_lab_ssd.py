"""The SSD model: IOPS scales with queue depth up to the channel count, then flattens,
while %util is 100 % throughout (why %util is no capacity measure on parallel devices)."""

from __future__ import annotations

import pytest

from iogauge.lab.profiles import build_model
from iogauge.lab.simulator import simulate
from iogauge.lab.ssd import SsdModel, SsdParams
from iogauge.lab.workloads import IoSize, Workload

KIB = 1024


def iops_at(qd: int) -> tuple[float, float]:
    w = Workload("r", (IoSize(4 * KIB, 1.0),), 1.0, threads=qd)
    res = simulate(build_model("ssd-sata"), w, 2.0, interval_s=0.5, seed=1)
    return res.steady_iops(0.5), res.steady_util_pct(0.5)


def test_qd1_latency_matches_the_datasheet_class() -> None:
    iops, util = iops_at(1)
    # controller 10 us + media 90 us + 4 KiB over 540 MB/s = 107.6 us
    assert iops == pytest.approx(1e6 / (10 + 90 + 4096 / 540), rel=1e-3)
    assert util > 99.0


def test_iops_scales_with_queue_depth_up_to_channels() -> None:
    base, _ = iops_at(1)
    for qd in (2, 4, 8):
        iops, util = iops_at(qd)
        assert iops == pytest.approx(qd * base, rel=0.08)
        assert util > 99.0  # %util saturated since QD1 while IOPS grew qd-fold
    i10, _ = iops_at(10)
    i32, _ = iops_at(32)
    # Beyond 10 channels only the queue grows; the controller caps at 100k IOPS.
    assert i32 == pytest.approx(i10, rel=0.1)
    assert i32 <= 100_000


def test_sequential_reads_saturate_the_link() -> None:
    w = Workload("s", (IoSize(128 * KIB, 1.0),), 1.0, threads=4, pattern="sequential",
                 align_bytes=128 * KIB)
    res = simulate(build_model("ssd-sata"), w, 2.0, interval_s=0.5, seed=1)
    assert res.frame.df["r_kBps"].mean() * 1024 / 1e6 == pytest.approx(540.0, rel=0.02)


def test_bad_ssd_parameters() -> None:
    with pytest.raises(ValueError):
        SsdModel(SsdParams(capacity_bytes=0, channels=4, read_us=1, write_us=1,
                           controller_us=1, link_MBps=1))
