"""The single-spindle model: datasheet consistency, mechanics, cache behaviour, and the
issue's plausibility checks (4 KiB random reads at QD1 in 50-300 IOPS at ~100 % util, QD > 1
raises latency not IOPS, sequential 128 KiB reads >= 10x random MB/s)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from iogauge.lab.hdd import AVG_SQRT_DISTANCE, HddModel, HddParams
from iogauge.lab.model import Request
from iogauge.lab.profiles import build_model, load_profile
from iogauge.lab.simulator import simulate
from iogauge.lab.workloads import IoSize, Region, Workload

KIB = 1024


def hdd7200() -> HddParams:
    p = load_profile("hdd-7200").params
    assert isinstance(p, HddParams)
    return p


def rand_read(size: int = 4 * KIB, threads: int = 1, regions: tuple[Region, ...] = (
        Region(0.0, 1.0),)) -> Workload:
    return Workload("rand", (IoSize(size, 1.0),), 1.0, regions=regions, threads=threads,
                    align_bytes=size)


def test_profile_matches_its_datasheets() -> None:
    p = hdd7200()
    # 1.0 ms single-track + 8/15 * (15.0 - 1.0) = 8.4667 ms: the 7K1000.C's 8.5 ms average.
    assert pytest.approx(8 / 15) == AVG_SQRT_DISTANCE
    assert p.avg_seek_ms == pytest.approx(1.0 + 8 / 15 * 14.0)
    assert abs(p.avg_seek_ms - 8.5) < 0.1
    assert p.revolution_ms == pytest.approx(8.3333, abs=1e-4)  # 4.17 ms average latency
    m = HddModel(p)
    assert m.seek_s(0.0) == 0.0
    assert m.seek_s(1.0) == pytest.approx(0.015)
    assert m.seek_s(1.0, is_write=True) == pytest.approx(0.016)
    assert m.seek_s(2.0 / p.cylinders) == pytest.approx(0.001, abs=1e-4)


def test_zoned_layout_puts_more_capacity_on_outer_tracks() -> None:
    m = HddModel(hdd7200())
    # k = 0.5: half the capacity lies within r >= sqrt(1 - 0.5 * 0.75) = 0.7906 of r_outer,
    # i.e. the outer 41.9 % of the stroke.
    assert m.cylinder(m.capacity_bytes / 2) == pytest.approx((1 - math.sqrt(0.625)) / 0.5)
    assert m.cylinder(0) == 0.0
    assert m.cylinder(m.capacity_bytes) == pytest.approx(1.0)
    assert m.media_rate_Bps(0) == pytest.approx(200e6)
    assert m.media_rate_Bps(m.capacity_bytes - 1) == pytest.approx(100e6)


def test_4k_random_reads_qd1_in_range_at_full_util() -> None:
    res = simulate(build_model("hdd-7200"), rand_read(), 120.0, seed=3)
    iops = res.steady_iops(10.0)
    assert 50.0 <= iops <= 300.0
    # seek 8.47 + rotation 4.17 + overhead 0.2 ms ~= 12.8 ms -> ~78 IOPS
    assert iops == pytest.approx(1000 / (8.4667 + 4.1667 + 0.2 + 0.02), rel=0.08)
    assert res.steady_util_pct(10.0) > 99.0


def test_queue_depth_raises_latency_not_iops() -> None:
    qd1 = simulate(build_model("hdd-7200"), rand_read(threads=1), 120.0, seed=3)
    qd8 = simulate(build_model("hdd-7200"), rand_read(threads=8), 120.0, seed=3)
    i1, i8 = qd1.steady_iops(10.0), qd8.steady_iops(10.0)
    assert i8 == pytest.approx(i1, rel=0.05)  # no NCQ: FIFO service
    a1 = qd1.frame.df["await_ms"].mean()
    a8 = qd8.frame.df["await_ms"].mean()
    assert a8 == pytest.approx(8 * a1, rel=0.1)  # Little: 8 outstanding, same throughput


def test_sequential_128k_reads_at_least_10x_random() -> None:
    seq = Workload("seq", (IoSize(128 * KIB, 1.0),), 1.0, pattern="sequential",
                   align_bytes=128 * KIB, regions=(Region(0.0, 0.01),))
    s = simulate(build_model("hdd-7200"), seq, 30.0, seed=1)
    r = simulate(build_model("hdd-7200"), rand_read(128 * KIB), 30.0, seed=1)
    seq_MBps = s.frame.df["r_kBps"].mean() * 1024 / 1e6
    rand_MBps = r.frame.df["r_kBps"].mean() * 1024 / 1e6
    assert seq_MBps >= 10 * rand_MBps
    assert seq_MBps == pytest.approx(200.0, rel=0.03)  # the outer zone's media rate


def test_outer_tracks_stream_twice_as_fast_as_inner() -> None:
    m = build_model("hdd-7200")
    assert type(m).__name__ == "HddModel"  # pure or compiled (lab/accel.py)

    def stream(start: int) -> float:
        m.reset()
        t = 0.0
        off = start
        t = m.serve(False, off, 128 * KIB, t)
        t_first = t
        for _ in range(200):
            off += 128 * KIB
            t = m.serve(False, off, 128 * KIB, t)
        return 200 * 128 * KIB / (t - t_first)

    assert stream(0) == pytest.approx(200e6, rel=0.01)
    assert stream(m.capacity_bytes - 300 * 128 * KIB) == pytest.approx(100e6, rel=0.01)


def test_rotation_is_tracked_a_late_continuation_misses_a_revolution() -> None:
    p = replace(hdd7200(), read_ahead_KiB=0, cache_segments=0)
    m = HddModel(p)
    t1 = m.serve(False, 0, 4 * KIB, 0.0)
    # The next sector passed under the head during the 0.2 ms command overhead: almost a
    # full revolution (8.33 ms) to wait, no seek.
    t2 = m.serve(False, 4 * KIB, 4 * KIB, t1)
    rev = 60 / 7200
    xfer = 4 * KIB / 200e6
    assert t2 - t1 == pytest.approx(0.0002 + (rev - 0.0002) + xfer, rel=1e-6)


def test_read_ahead_and_segments_serve_rereads_from_cache() -> None:
    m = HddModel(hdd7200())
    t = m.serve(False, 0, 4 * KIB, 0.0)
    t = m.serve(False, 10**11, 4 * KIB, t)  # elsewhere: the first stream is frozen
    before = m.cache_hits
    t2 = m.serve(False, 0, 4 * KIB, t)  # re-read from the frozen segment
    assert m.cache_hits == before + 1
    assert t2 - t == pytest.approx(0.0002 + 4 * KIB / 600e6)


def test_write_cache_hides_writes_until_idle_and_then_destages() -> None:
    p = replace(hdd7200(), write_cache_KiB=64, destage_idle_ms=50.0)
    m = HddModel(p)
    t = 0.0
    for i in range(8):
        t = m.serve(True, i * 10**10, 4 * KIB, t)
    # Buffered: overhead + 4 KiB at 600 MB/s each, no media access yet.
    assert t == pytest.approx(8 * (0.0002 + 4 * KIB / 600e6))
    assert m.media_ops == 0
    # A read long after: the drive destaged everything in the idle spell first.
    m.serve(False, 5 * 10**11, 4 * KIB, t + 1.0)
    assert m.destages == 8
    # A full buffer makes the next write wait for a destage (visible cost).
    m2 = HddModel(replace(p, write_cache_KiB=8))
    t = m2.serve(True, 0, 4 * KIB, 0.0)
    t = m2.serve(True, 10**11, 4 * KIB, t)
    t3 = m2.serve(True, 2 * 10**11, 4 * KIB, t)
    assert m2.destages == 1
    assert t3 - t > 0.002


@pytest.mark.parametrize(("low_water_pct", "destaged", "dirty_after"),
                         [(100.0, 1, 8), (50.0, 4, 5), (0.0, 8, 1)])
def test_a_full_buffer_is_written_back_down_to_the_low_water_mark(
        low_water_pct: float, destaged: int, dirty_after: int) -> None:
    """A write that finds the 32 KiB buffer full (eight 4 KiB writes far apart, no idle
    spell) waits until the drive has written back down to the low-water mark: one entry at
    100 % (only until it fits), four at 50 % (16 KiB dirty, then the write: 20 KiB), all
    eight at 0 %; the wait grows with every destage."""
    p = replace(hdd7200(), write_cache_KiB=32, destage_idle_ms=50.0,
                destage_low_water_pct=low_water_pct)
    m = HddModel(p)
    t = 0.0
    for i in range(8):
        t = m.serve(True, i * 4 * 10**10, 4 * KIB, t)
    assert m.destages == 0
    done = m.serve(True, 3 * 10**11 + 10**9, 4 * KIB, t)
    assert m.destages == destaged
    assert len(m._dirty) == dirty_after
    assert m._dirty_bytes == dirty_after * 4 * KIB
    # each destage here is a seek + rotation + transfer, more than a millisecond
    assert done - t > destaged * 0.001


def test_reset_and_service_time_are_the_protocol_view_of_serve() -> None:
    m = build_model("hdd-7200")
    reqs = [Request("read", 123 * 4096, 4096), Request("write", 9 * 10**11, 8192),
            Request("read", 5 * 10**11, 65536)]
    t = 0.0
    first: list[float] = []
    for r in reqs:
        s = m.service_time(r, t)
        first.append(s)
        t += s
    m.reset()
    t = 0.0
    again: list[float] = []
    for r in reqs:
        s = m.service_time(r, t)
        again.append(s)
        t += s
    assert first == again
    assert all(s > 0 for s in first)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="inner_MBps"):
        replace(hdd7200(), inner_MBps=300.0)
    with pytest.raises(ValueError, match="track_to_track_ms"):
        replace(hdd7200(), track_to_track_ms=20.0)
    with pytest.raises(ValueError, match="destage_low_water_pct"):
        replace(hdd7200(), destage_low_water_pct=120.0)
