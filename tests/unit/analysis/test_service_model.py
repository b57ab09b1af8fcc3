"""The service model decided from the samples (``analysis.service_model``), through the
library function a user calls (``analyze``) on frames from the lab's simulator, and each
signal on its own.

Devices: a 7,200 rpm HDD, a SATA SSD, an NVMe-like device of 16 channels, [Oe]'s RAID-5 of
six spindles (under a queue-depth sweep and under [Oe] §3's own workloads), a loop device
on memory, and a device idle half the time.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.analysis.points import Points
from iogauge.analysis.service_model import (
    MediaOptionError,
    ServiceModel,
    Strength,
    data_signals,
    decide,
    parse_media_overrides,
)
from iogauge.analysis.types import DeviceReport
from iogauge.lab.emulated import constant_model
from iogauge.lab.simulator import EPOCH, _as_model, simulate, simulate_max_iops
from iogauge.lab.workloads import IoSize, Workload, oe_paper
from iogauge.model.device import DeviceInfo

KIB = 1024


def _sweep(model: object, threads: tuple[int, ...], secs: int, *, kind: str = "disk",
           rates: tuple[float, ...] = (), idle_s: int = 0, device: str = "sim0"
           ) -> pl.DataFrame:
    """Random 4 kB reads: one closed-loop run per thread count, then rate-capped runs at
    one thread; ``idle_s`` idle seconds between runs."""
    frames, t = [], EPOCH
    runs = [(n, None) for n in threads] + [(1, r) for r in rates]
    for n, rate in runs:
        m = _as_model(model) if not hasattr(model, "service_time") else model
        wl = Workload(name="r", sizes=(IoSize(4 * KIB, 1.0),), read_share=1.0, threads=n,
                      rate_iops=rate)
        res = simulate(m, wl, float(secs), interval_s=1.0, seed=1, start=t,
                       device=device, device_kind=kind)
        frames.append(res.frame.df)
        t += timedelta(seconds=secs)
        if idle_s:
            idle = res.frame.df.head(1).with_columns(
                [pl.lit(0.0).alias(c) for c in ("r_iops", "w_iops", "iops", "util_pct",
                                                "aqu_sz", "r_kBps", "w_kBps", "kBps")])
            for _ in range(idle_s):
                t += timedelta(seconds=1)
                frames.append(idle.with_columns(ts=pl.lit(t)))
    return pl.concat(frames, how="diagonal_relaxed")


def _report(df: pl.DataFrame, infos: dict[str, DeviceInfo] | None = None,
            **opts: object) -> DeviceReport:
    res = analyze(df, None, infos, AnalysisOptions(**opts))  # type: ignore[arg-type]
    return res.devices[0]


def _svc(r: DeviceReport) -> tuple[str, str]:
    assert r.service is not None
    return str(r.service.model), str(r.service.decided_by)


def test_hdd_is_one_at_a_time_from_its_samples() -> None:
    r = _report(_sweep("hdd-7200", (1, 2, 4, 8, 16), 10, rates=(20, 40, 60)))
    assert _svc(r) == ("one-at-a-time", "data")
    names = {s.name: s for s in r.service.signals}  # type: ignore[union-attr]
    assert names["concurrency"].points_to is ServiceModel.ONE_AT_A_TIME
    assert names["plateau"].points_to is ServiceModel.ONE_AT_A_TIME
    assert r.capacity is not None and r.capacity.method == "util-linear"
    assert r.capacity.max_iops == pytest.approx(80, rel=0.1)


def test_ssd_is_parallel_from_its_samples() -> None:
    r = _report(_sweep("ssd-sata", (1, 4, 16), 4))
    assert _svc(r) == ("parallel", "data")
    assert "several requests are served at once" in r.service.summary  # type: ignore[union-attr]
    assert r.capacity is not None and r.capacity.method in ("latency-knee", "none")


def test_nvme_like_device_is_parallel() -> None:
    nvme = constant_model("constant:1ms:16", 64 << 30)
    r = _report(_sweep(nvme, (1, 4, 16, 32), 5, device="nvme0n1"))
    assert _svc(r) == ("parallel", "data")


def test_raid5_under_a_queue_sweep_is_parallel() -> None:
    """Six spindles serving a growing queue: the samples show parallel service."""
    r = _report(_sweep("raid5-6x400g", (1, 4, 16), 15))
    assert _svc(r) == ("parallel", "data")


def test_raid5_under_oe_workloads_keeps_the_util_method() -> None:
    """[Oe] §3's file share on its RAID-5 (10 threads, rate steps): %util linear to
    saturation, the maximum at 100 % busy -- as the paper found on that array."""
    prof = "raid5-6x400g"
    mx = simulate_max_iops(prof, "file-share", 30.0)
    frames, t = [], EPOCH
    for f in (0.1, 0.3, 0.5, 0.7, 0.9, 1.1):
        wls = [w.with_rate(mx * f) for w in oe_paper("file-share", "A", threads=10)]
        frames.append(simulate(_as_model(prof), wls, 20.0, seed=4, start=t).frame.df)
        t += timedelta(seconds=20)
    r = _report(pl.concat(frames))
    assert r.service is not None
    assert r.service.model is not ServiceModel.PARALLEL, r.service.summary
    assert r.capacity is not None and r.capacity.method == "util-linear"
    assert r.capacity.max_iops == pytest.approx(mx, rel=0.1)


def test_loop_on_memory_is_parallel() -> None:
    """A loop device over tmpfs: microsecond services on several CPUs."""
    mem = constant_model("constant:20us:4", 1 << 30)
    r = _report(_sweep(mem, (1, 2, 4, 8), 3, kind="loop", device="loop7"))
    assert _svc(r) == ("parallel", "data")


def test_device_idle_half_the_time_is_still_judged() -> None:
    r = _report(_sweep("hdd-7200", (1, 4, 16), 10, rates=(30, 60), idle_s=10))
    assert _svc(r) == ("one-at-a-time", "data")


def test_virtio_label_loses_to_the_data_and_says_so() -> None:
    """vda says rotational = 1; the samples say flash."""
    df = _sweep("ssd-sata", (1, 4, 16), 4, device="vda")
    info = DeviceInfo(name="vda", kind="disk", rotational=True, vendor="0x1af4")
    r = _report(df, {"vda": info})
    assert r.service is not None and r.service.conflict
    assert r.service.summary.startswith("serves requests in parallel: labelled "
                                        "queue/rotational = 1 on a virtual disk")
    # A real SATA disk's flag is a label of more weight, yet direct evidence still wins.
    sd = DeviceInfo(name="sdb", kind="disk", rotational=True)
    r2 = _report(df.with_columns(device=pl.lit("sdb")), {"sdb": sd})
    assert _svc(r2) == ("parallel", "data")


def test_overrides_beat_the_samples() -> None:
    df = _sweep("ssd-sata", (1, 4, 16), 4, kind="loop", device="loop0")
    r = _report(df, media=parse_media_overrides(["loop0=hdd"]))
    assert _svc(r) == ("one-at-a-time", "--media")
    r = _report(df, profiles={"loop0": "hdd-7200"})
    assert _svc(r) == ("one-at-a-time", "--profile")
    with pytest.raises(MediaOptionError, match="expected DEVICE=MEDIA"):
        parse_media_overrides(["loop0=floppy"])


def test_labels_decide_when_the_data_cannot() -> None:
    one = Points(*(np.array([50.0]) for _ in range(9)))
    d = decide("sda", "disk", DeviceInfo(name="sda", kind="disk", rotational=True), None,
               one, None)
    assert (d.model, str(d.decided_by)) == (ServiceModel.ONE_AT_A_TIME, "label")
    d = decide("loop3", "loop", None, None, one, None)
    assert d.model is ServiceModel.UNDETERMINED and d.util_is_capacity is None
    assert "loop device" in d.summary
    # A virtual disk's rotational flag is shown but never decides.
    vda = DeviceInfo(name="vda", kind="disk", rotational=True, vendor="0x1af4")
    d = decide("vda", "disk", vda, None, one, None)
    assert d.model is ServiceModel.UNDETERMINED and d.label is ServiceModel.ONE_AT_A_TIME
    assert "on a virtual disk" in d.summary


# ---- each signal on its own -----------------------------------------------------------


def _points(**cols: list[float]) -> Points:
    n = len(next(iter(cols.values())))
    nan = [float("nan")] * n
    get = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    names = ("iops", "util", "await_ms", "areq_kb", "weight", "aqu_sz", "r_iops",
             "r_await_ms", "kbps")
    return Points(*(get.get(k, np.asarray(nan if k != "weight" else [1.0] * n))
                    for k in names))


def _signal(p: Points, name: str, seq: float | None = None) -> tuple[ServiceModel, Strength]:
    found = {s.name: s for s in data_signals(p, seq)}
    return found[name].points_to, found[name].strength


def test_concurrency_signal() -> None:
    c = [1.0] * 4 + [8.0] * 4
    flat = _points(iops=[80.0] * 8, util=[100.0] * 8, aqu_sz=c)
    assert _signal(flat, "concurrency") == (ServiceModel.ONE_AT_A_TIME, Strength.DIRECT)
    rising = _points(iops=[1000.0] * 4 + [6000.0] * 4, util=[100.0] * 8, aqu_sz=c)
    assert _signal(rising, "concurrency") == (ServiceModel.PARALLEL, Strength.DIRECT)
    ncq = _points(iops=[80.0] * 4 + [150.0] * 4, util=[100.0] * 8, aqu_sz=c)
    assert _signal(ncq, "concurrency")[0] is ServiceModel.UNDETERMINED


def test_plateau_and_over_100_signals() -> None:
    plateau = _points(iops=[80.0, 81, 79, 80, 80], util=[100.0] * 5,
                      aqu_sz=[1.0, 2, 4, 8, 16])
    assert _signal(plateau, "plateau")[0] is ServiceModel.ONE_AT_A_TIME
    climbing = _points(iops=[100.0, 200, 400, 800, 1600], util=[100.0] * 5,
                       aqu_sz=[1.0, 2, 4, 8, 16])
    assert _signal(climbing, "plateau")[0] is ServiceModel.PARALLEL
    over = _points(iops=[10.0, 20], util=[150.0, 180])
    assert _signal(over, "over_100") == (ServiceModel.PARALLEL, Strength.DIRECT)


def test_physical_and_positioning_signals() -> None:
    """The bounds of the catalog's fastest spindle (hdd-15k), and seek times."""
    fast = _points(iops=[20000.0] * 3, kbps=[400_000.0] * 3)
    assert _signal(fast, "physical") == (ServiceModel.PARALLEL, Strength.STRONG)
    flash = _points(iops=[5000.0] * 3, r_iops=[5000.0] * 3, r_await_ms=[0.2] * 3,
                    areq_kb=[4.0] * 3)
    assert _signal(flash, "physical", seq=5.0)[0] is ServiceModel.PARALLEL
    assert "physical" not in {s.name for s in data_signals(flash, 90.0)}  # sequential
    seek = _points(iops=[50.0] * 3, await_ms=[9.0] * 3, aqu_sz=[0.5] * 3, areq_kb=[4.0] * 3)
    assert _signal(seek, "positioning", seq=5.0) == (ServiceModel.ONE_AT_A_TIME,
                                                     Strength.MEDIUM)


def test_fit_without_proportion_gives_no_maximum() -> None:
    """%util that does not follow IOPS (r2 < 0.5, here negative) yields no maximum and no
    knee, and the note says why; the old fit reported 100 / k regardless."""
    rng = np.random.default_rng(1)
    x = rng.uniform(100, 5000, 60)
    u = rng.uniform(60, 95, 60)
    df = _sweep("hdd-7200", (1,), 60).with_columns(
        iops=pl.Series(x), r_iops=pl.Series(x), util_pct=pl.Series(u), aqu_sz=pl.lit(None))
    r = _report(df, media={"sim0": ServiceModel.ONE_AT_A_TIME})
    cap = r.capacity
    assert cap is not None and cap.method == "util-linear"
    assert cap.max_iops is None and cap.knee_util_pct is None and cap.r2 is not None
    assert cap.r2 < 0.5
    assert any("does not grow in proportion" in n for n in cap.notes)
    assert r.verdict != "near limit"
