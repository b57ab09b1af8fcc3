"""capacity.estimate: [Oe]'s busy-per-IOPS model (util-linear, knee = proportional-limit
busy rate, maximum at 100 % busy) and the latency knee for parallel devices -- synthetic
devices with known truth, real iostat captures, odd data that must not raise, and scaling
properties."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from iogauge.analysis import attributes, capacity
from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.types import Capability, CapacityEstimate
from iogauge.importers.registry import import_file
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
F64 = npt.NDArray[np.float64]


def device(iops: F64 | list[float], util: F64 | list[float] | None, *,
           await_ms: F64 | list[float] | None = None, aqu: F64 | list[float] | None = None,
           rotational: bool | None = True, kind: str = "disk", areq_kb: float = 4.0,
           interval_s: float = 1.0) -> DeviceContext:
    """One device's rows, ``interval_s`` apart, reads only (the IOPS given)."""
    x = np.asarray(iops, dtype=np.float64)
    n = x.size
    cols: dict[str, Any] = {
        "source": ["t"] * n, "host": ["h"] * n, "device": ["sdz"] * n,
        "device_kind": [kind] * n, "interval_s": [interval_s] * n,
        "ts": [T0 + timedelta(seconds=interval_s * (i + 1)) for i in range(n)],
        "iops": x, "r_iops": x, "w_iops": np.zeros(n), "r_kBps": x * areq_kb,
        "w_kBps": np.zeros(n), "r_areq_kB": np.full(n, areq_kb),
    }
    if util is not None:
        cols["util_pct"] = np.asarray(util, dtype=np.float64)
    if await_ms is not None:
        cols["await_ms"] = cols["r_await_ms"] = np.asarray(await_ms, dtype=np.float64)
    if aqu is not None:
        cols["aqu_sz"] = np.asarray(aqu, dtype=np.float64)
    infos = {} if rotational is None else {"sdz": DeviceInfo("sdz", kind, rotational=rotational)}
    df = pl.DataFrame(cols, nan_to_null=True)
    ctx = AnalysisContext.build(SampleFrame(df), infos=infos)
    return ctx.devices["sdz"]


def oe_shape(*, saturate: bool = True, top_util: float = 99.0) -> tuple[F64, F64]:
    """[Oe] §3's shape with round numbers: util = 0.5 %/IOPS x IOPS up to the
    proportional limit at 85 % busy (170 IOPS); above it IOPS grow at a quarter of the
    linear rate (x = 170 + (util - 85) / 2) up to 177.5 IOPS at 100 %, where the device
    stays saturated."""
    u = np.concatenate([np.linspace(5, 85, 60), np.linspace(85.5, top_util, 20)])
    if saturate:
        u = np.concatenate([u, np.full(10, 100.0)])
    x = np.where(u <= 85, u / 0.5, 170 + (u - 85) / 2)
    return x, u


# ---- util-linear: one-at-a-time devices ([Oe]) ----------------------------------------


def test_oe_shape_knee_slope_and_plateau() -> None:
    x, u = oe_shape()
    est = capacity.estimate(device(x, u))
    assert est.method == "util-linear"
    assert "serves one request at a time" in est.reason
    assert est.busy_per_iops == pytest.approx(0.5, rel=1e-9)
    assert est.knee_util_pct == pytest.approx(85.0, abs=1e-9)
    assert est.knee_iops == pytest.approx(170.0, rel=1e-9)
    assert est.max_iops == pytest.approx(177.5)          # observed: the saturated plateau
    assert est.r2 == pytest.approx(1.0)
    assert est.points == 90
    assert est.confidence is not None and est.confidence > 0.95
    # The busiest 1-min window holds the last 30 intervals: 20 bent (85.5-99 %) + 10 at
    # 100 %; its mean IOPS is the load headroom is measured from.
    current = float(np.mean(x[-30:]))
    assert est.current_iops == pytest.approx(current)
    assert est.headroom_iops == pytest.approx(177.5 - current)
    assert est.headroom_pct == pytest.approx(100 * (177.5 - current) / 177.5)
    text = " ".join(est.notes)
    assert "proportional-limit busy rate" in text and "saturation" in text


def test_noisy_oe_shape() -> None:
    """2 % scatter on every interval's IOPS (a real spindle's seek times): the knee within
    3 points of busy, slope and plateau within 1 %."""
    x, u = oe_shape()
    rng = np.random.default_rng(1)
    est = capacity.estimate(device(x * (1 + 0.02 * rng.standard_normal(x.size)), u))
    assert est.knee_util_pct == pytest.approx(85.0, abs=3.0)
    assert est.busy_per_iops == pytest.approx(0.5, rel=0.01)
    assert est.max_iops == pytest.approx(177.5, rel=0.01)


def test_beyond_the_knee_but_never_saturated() -> None:
    """Up to 95 % busy: the maximum follows the bent segment to 100 % (177.5), not the
    straight line (200) -- the knee matters for the answer."""
    x, u = oe_shape(saturate=False, top_util=95.0)
    est = capacity.estimate(device(x, u))
    assert est.knee_util_pct == pytest.approx(85.0, abs=1e-9)
    assert est.max_iops == pytest.approx(177.5, rel=1e-6)
    assert any("bent segment" in n for n in est.notes)


def test_linear_and_never_saturated_extrapolates_from_the_slope() -> None:
    """A QD1 load stepped to 60 % busy on a 5 ms device: max = 100 / 0.5 = 200 IOPS."""
    x = np.repeat([24.0, 48.0, 72.0, 96.0, 120.0], 8)
    est = capacity.estimate(device(x, x * 0.5))
    assert est.max_iops == pytest.approx(200.0)
    assert est.knee_util_pct is None and est.knee_iops is None
    assert any("knee ([Oe]: 80-95 %) was not reached" in n for n in est.notes)
    assert any("extrapolated linearly from 60.0 % busy" in n for n in est.notes)
    # r2 1 x enough points (40 >= 20) x range covered 60/90.
    assert est.confidence == pytest.approx(60 / 90)


def test_linear_all_the_way_to_saturation() -> None:
    """A one-at-a-time device fed at queue depth 2 at the end: util hits 100 % exactly at
    1/svctm, no knee below 100 %."""
    x = np.concatenate([np.linspace(10, 190, 40), np.full(5, 200.0)])
    est = capacity.estimate(device(x, np.minimum(x * 0.5, 100.0)))
    assert est.max_iops == pytest.approx(200.0)
    assert est.knee_util_pct is None
    assert any("all the way to saturation" in n for n in est.notes)


def test_stray_intervals_are_no_knee_and_no_plateau() -> None:
    """Two intervals stretched to 100 % busy by a host stall (and one at 70 % with too few
    IOPS) among 40 on the line: neither a knee nor a plateau."""
    x = np.concatenate([np.repeat([24.0, 48.0, 72.0, 96.0, 120.0], 8), [58.0, 61.0, 60.0]])
    u = np.concatenate([x[:40] * 0.5, [100.0, 100.0, 70.0]])
    est = capacity.estimate(device(x, u))
    assert est.knee_util_pct is None
    assert est.busy_per_iops == pytest.approx(0.5, rel=0.03)   # the 70 % stray pulls a bit
    assert est.max_iops == pytest.approx(200.0, rel=0.03)
    assert any("2 interval(s) at >= 99 % busy: too few for a plateau" in n for n in est.notes)
    assert any("up to the highest observed 70.0 % busy" in n for n in est.notes)


def test_light_load_is_low_confidence() -> None:
    x = np.linspace(2, 30, 30)
    est = capacity.estimate(device(x, x * 0.5))        # at most 15 % busy
    assert est.max_iops == pytest.approx(200.0)
    assert est.confidence is not None and est.confidence <= 15 / 90 + 1e-9
    assert any("never exceeded 15.0 % busy" in n for n in est.notes)


def test_mix_change_below_half_busy_is_no_knee() -> None:
    """Large requests at low load (busy per IOPS x3) are a different mix, not the
    proportional limit: no knee is reported below 50 % busy."""
    small = np.linspace(10, 60, 30)
    big = np.linspace(5, 12, 10)
    x = np.concatenate([small, big])
    u = np.concatenate([small * 0.5, big * 1.5 * 2])
    est = capacity.estimate(device(x, u))
    assert est.knee_util_pct is None


def test_service_time_depending_on_size_is_noted() -> None:
    rows = []
    for areq, per in ((4.0, 0.4), (256.0, 0.8)):   # busy per IOPS doubles for big requests
        rows.append((np.linspace(10, 100, 15), per, areq))
    x = np.concatenate([r[0] for r in rows])
    u = np.concatenate([r[0] * r[1] for r in rows])
    sizes = np.concatenate([np.full(15, r[2]) for r in rows])
    dev = device(x, u)
    dev.rows = dev.rows.with_columns(r_areq_kB=pl.Series(sizes),
                                     r_kBps=pl.Series(x * sizes))
    est = capacity.estimate(dev)
    assert any("depends on the request size" in n for n in est.notes), est.notes


def test_unknown_kind_is_util_linear_with_lower_confidence() -> None:
    x = np.repeat([24.0, 48.0, 72.0, 96.0, 120.0], 8)
    known = capacity.estimate(device(x, x * 0.5))
    unknown = capacity.estimate(device(x, x * 0.5, rotational=None))
    assert unknown.method == "util-linear" and "unknown whether" in unknown.reason
    assert "treated as one at a time" in unknown.reason
    assert unknown.max_iops == known.max_iops
    assert unknown.confidence == pytest.approx(0.7 * (known.confidence or 0.0))
    assert any("service model undetermined" in n for n in unknown.notes)


def test_catalog_profile_decides_the_method() -> None:
    x = np.repeat([24.0, 48.0, 72.0, 96.0, 120.0], 8)
    dev = device(x, x * 0.5, await_ms=np.full(x.size, 0.2), rotational=True)
    dev.capability = Capability(profile="nvme-generic", title="NVMe", matched_by="test",
                                parallel=True)
    est = capacity.estimate(dev)
    assert est.method == "none"                      # flat latency: no knee to find
    assert "serves requests in parallel, from the labels: catalog profile nvme-generic" \
        in est.reason
    assert "did not climb" in est.reason


# ---- latency knee: parallel devices --------------------------------------------------------


def test_parallel_device_mm1_asymptote() -> None:
    """An M/M/1-like device: L = 0.5 ms / (1 - X/5000), 3 % scatter, load to 94 %."""
    rng = np.random.default_rng(3)
    x = np.linspace(100, 4700, 200)
    lat = 0.5 / (1 - x / 5000) * (1 + 0.03 * rng.standard_normal(x.size))
    # %util saturates early on such a device: 100 % from 1/5 of its capacity on.
    est = capacity.estimate(device(x, np.minimum(100.0, x / 10), await_ms=lat,
                                   rotational=False))
    assert est.method == "latency-knee"
    assert "serves requests in parallel" in est.reason
    assert est.busy_per_iops is None and est.knee_util_pct is None
    assert est.max_iops == pytest.approx(5000, rel=0.03)
    # L = 2 S at half the capacity; bins are 4700/12 = 392 IOPS wide.
    assert est.knee_iops == pytest.approx(2500, abs=400)
    assert est.r2 is not None and est.r2 > 0.99
    assert est.confidence is not None and est.confidence > 0.9


def test_parallel_device_with_flat_latency_has_no_estimate() -> None:
    x = np.linspace(100, 2000, 40)
    est = capacity.estimate(device(x, x / 20, await_ms=np.full(40, 0.3), kind="dm",
                                   rotational=None))
    assert est.method == "none"
    assert "serves requests in parallel, from the labels: dm device" in est.reason
    assert "did not climb" in est.reason
    assert est.max_iops is None and est.headroom_iops is None
    assert est.current_iops == pytest.approx(float(np.mean(x[-40:])))


def test_data_showing_parallel_service() -> None:
    """Kind unknown: a queue of 6 at 40 % util means several requests in service at once."""
    rng = np.random.default_rng(5)
    x = np.linspace(100, 4700, 60)
    lat = 0.5 / (1 - x / 5000) * (1 + 0.02 * rng.standard_normal(x.size))
    est = capacity.estimate(device(x, np.full(60, 40.0), await_ms=lat,
                                   aqu=np.full(60, 6.0), rotational=None))
    assert est.method == "latency-knee"
    assert "serves requests in parallel, from the data" in est.reason
    assert ">= 4 requests outstanding at < 60 % busy" in est.reason
    # %util over 100 % (a source summing busy over servers) is parallel even for a
    # device believed rotational.
    over = capacity.estimate(device(x, np.linspace(50, 180, 60), await_ms=lat))
    assert over.method == "latency-knee" and "above 100 %" in over.reason


def test_no_util_falls_back_to_latency() -> None:
    rng = np.random.default_rng(9)
    x = np.linspace(5, 75, 40)
    lat = 12.5 / (1 - x / 80) * (1 + 0.02 * rng.standard_normal(40))
    est = capacity.estimate(device(x, None, await_ms=lat))
    assert est.method == "latency-knee" and "no %util" in est.reason
    assert est.max_iops == pytest.approx(80, rel=0.05)


# ---- odd data: never raise -----------------------------------------------------------------


def test_odd_data_never_raises() -> None:
    # One interval.
    one = capacity.estimate(device([50.0], [25.0]))
    assert one.method == "none" and "too few intervals" in one.reason and one.points == 1
    # All-null %util and no latency on a rotational disk.
    blind = capacity.estimate(device([10.0, 20.0, 30.0], [None, None, None]))  # type: ignore[list-item]
    assert blind.method == "none" and "no %util" in blind.reason
    # Only idle intervals.
    idle = capacity.estimate(device(np.zeros(20), np.zeros(20)))
    assert idle.method == "none" and idle.points == 0
    assert idle.current_iops == 0.0 and idle.headroom_iops is None
    # A constant load: [Oe]'s proportion through the origin still gives a maximum.
    flat = capacity.estimate(device(np.full(30, 80.0), np.full(30, 40.0)))
    assert flat.method == "util-linear" and flat.r2 is None
    assert flat.max_iops == pytest.approx(200.0)
    assert any("hardly varied" in n for n in flat.notes)
    # No rows, no windows.
    empty = DeviceContext(key="x", host="h", device="x", kind="disk", parent=None, source="t",
                          rows=device([1.0], [1.0]).rows.clear(), windows=pl.DataFrame())
    e = capacity.estimate(empty)
    assert e.method == "none" and e.current_iops is None
    # Garbage: NaN/inf-free but absurd (util 0 with I/O, util > 0 without).
    weird = capacity.estimate(device([0.0, 5.0, 0.0, 7.0], [50.0, 0.0, 3.0, 0.0]))
    assert weird.method == "none"


# ---- real captures --------------------------------------------------------------------------


def test_rhel6_iostat_capture_matches_sysstat_svctm() -> None:
    """sysstat 9 `iostat -x` (t2y/iostat-tool, 317 s of 11 disks) still prints svctm =
    %util / tps: the fitted busy per IOPS must say the same, and it does within 3 % on the
    disks that carry load (sda, 127 busy seconds: 9.86 ms fitted vs 11.07 ms reported: the
    fit weighs the heavy intervals, the mean every operation)."""
    res = import_file(FIXTURES / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt")
    ctx = AnalysisContext.build(res.frame)
    for name in ("sdb", "sdd", "sdg", "sdi"):
        dev = ctx.devices[name]
        est = capacity.estimate(dev)
        att = attributes.compute(dev, ctx)
        assert est.method == "util-linear", name
        assert att.svctm_ms is not None and not att.svctm_estimated
        assert est.busy_per_iops is not None
        assert est.busy_per_iops * 10 == pytest.approx(att.svctm_ms, rel=0.03), name
        assert est.max_iops == pytest.approx(100 / est.busy_per_iops)
        # Under 20 % busy, unknown device type: low confidence, said so.
        assert est.confidence is not None and est.confidence < 0.2, name
        assert any("low confidence" in n for n in est.notes), name
    sda = capacity.estimate(ctx.devices["sda"])
    assert sda.points == 127
    assert sda.busy_per_iops == pytest.approx(0.98573, rel=1e-4)
    assert sda.max_iops == pytest.approx(101.448, rel=1e-4)
    assert sda.r2 == pytest.approx(0.93736, rel=1e-4)


def test_goodus_single_report_cannot_support_a_fit() -> None:
    res = import_file(FIXTURES / "solaris-iostat" / "seed001-iostat-x5-cp-maxcontig6.txt",
                      start=datetime(2008, 1, 1, tzinfo=UTC), interval_s=5)
    ctx = AnalysisContext.build(res.frame.df.with_columns(since_boot=pl.lit(value=False)))
    est = capacity.estimate(ctx.devices["sd0"])
    assert est.method == "none" and est.points == 1
    assert est.reason.startswith("too few intervals with I/O and %util (1;")
    assert est.current_iops == pytest.approx(492.4)


# ---- properties ------------------------------------------------------------------------------


@given(k=st.floats(0.05, 5.0), knee=st.floats(60.0, 95.0), bend=st.floats(0.1, 0.6),
       scale=st.floats(0.05, 20.0), saturate=st.booleans())
@settings(max_examples=40, deadline=None)
def test_scaling_iops_scales_capacity(k: float, knee: float, bend: float, scale: float,
                                      saturate: bool) -> None:
    """A device `scale` times faster at the same busy share: the knee's %util is unchanged,
    the maximum and knee IOPS scale by `scale`, busy per IOPS by 1/scale."""
    u = np.concatenate([np.linspace(2, knee, 40), np.linspace(knee + 0.5, 98.5, 15)])
    if saturate:
        u = np.concatenate([u, np.full(6, 100.0)])
    x = np.where(u <= knee, u / k, knee / k + bend * (u - knee) / k)
    a = capacity.estimate(device(x, u))
    b = capacity.estimate(device(x * scale, u))
    assert a.method == b.method == "util-linear"
    if a.knee_util_pct is None:
        # Missed only when the data never leaves the line by much: at its top the
        # relative departure util / (k x IOPS) - 1 stays under 2 x the 4 % tolerance.
        assert b.knee_util_pct is None
        assert u[-1] / (k * x[-1]) - 1 < 2 * capacity.MIN_TOLERANCE
    else:
        assert b.knee_util_pct == pytest.approx(a.knee_util_pct, rel=1e-6)
        assert a.knee_util_pct == pytest.approx(knee, abs=1.5)
    assert b.max_iops == pytest.approx((a.max_iops or 0) * scale, rel=1e-6)
    assert b.busy_per_iops == pytest.approx((a.busy_per_iops or 0) / scale, rel=1e-6)
    assert b.confidence == pytest.approx(a.confidence, rel=1e-6)


@given(st.lists(st.tuples(st.floats(0.0, 1e5), st.floats(0.0, 150.0),
                          st.floats(0.0, 1e4)), min_size=0, max_size=40),
       st.sampled_from([True, False, None]))
# found by CI: nothing in use, max ~7.5e163 IOPS, and 100 x max / max = 100.00000000000001
@example(points=[(1.0, 2.4002026598843746e-162, 0.0), (2.0, 2.4002026598843746e-162, 0.0),
                 (2.0, 2.4002026598843746e-162, 0.0)], rotational=True)
# found by CI: %util 2.2e-308 (denormal), busy per IOPS denormal, maximum infinite
@example(points=[(1.0, 2.2250738585072014e-308, 0.0)] * 3, rotational=True)
@settings(max_examples=80, deadline=None)
def test_headroom_never_negative(points: list[tuple[float, float, float]],
                                 rotational: bool | None) -> None:
    if not points:
        points = [(0.0, 0.0, 0.0)]
    x, u, lat = (np.array(v) for v in zip(*points, strict=True))
    est: CapacityEstimate = capacity.estimate(device(x, u, await_ms=lat,
                                                     rotational=rotational))
    assert est.method in ("util-linear", "latency-knee", "none")
    if est.headroom_iops is not None:
        assert est.headroom_iops >= 0 and 0 <= (est.headroom_pct or 0) <= 100
    if est.max_iops is not None:
        assert est.max_iops > 0 and math.isfinite(est.max_iops)
    if est.confidence is not None:
        assert 0 <= est.confidence <= 1
