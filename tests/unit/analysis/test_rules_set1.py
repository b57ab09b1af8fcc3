"""Rules set 1: solaris_service_time, response_time_target, saturation, queueing,
interval_too_coarse, small_sequential_io, util_not_capacity, and the shared helpers in
``rules/_common.py``.

Seed cases run on the seed fixtures (Solaris iostat of [Goodus], perfmon files with [MS-Azure-JP]'s
values, sar/RMF files for the sampling interval); the other cases on frames written here,
with the expected numbers computed by hand in the comments.

[Goodus]'s quoted ``iostat -x`` outputs are one report each, which the importer flags
``since_boot`` (iostat's first report averages since boot). The seed quotes them as taken
*during* the cp / mkfile runs (a since-boot average could not show sd0 at 492.4 r/s), so the
tests clear the flag to analyse them as the measured intervals they are.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from iogauge.analysis.context import AnalysisContext, LatencyTarget
from iogauge.analysis.rules import (
    all_rules,
    interval_too_coarse,
    queueing,
    response_time_target,
    saturation,
    small_sequential_io,
    solaris_service_time,
    util_not_capacity,
)
from iogauge.analysis.rules._common import (
    SUSTAINED_MIN_INTERVALS,
    find_runs,
    fmt_num,
    judged_via_parent,
    latency_targets,
    level_expr,
    matched_evidence,
)
from iogauge.analysis.types import Attributes, Capability, CapacityEstimate, Evidence, Finding
from iogauge.importers.registry import import_file
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SOL = FIX / "solaris-iostat"
PERFMON = FIX / "perfmon"
GOODUS_START = datetime(2008, 2, 21, 10, 0)
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

PREMIUM = Capability(profile="azure-premium-p30", title="Azure Premium SSD P30",
                     matched_by="test", parallel=True, latency_ms_design=10.0)
HDD = Capability(profile="hdd-7200", title="7,200 rpm HDD", matched_by="test", parallel=False)
NVME = Capability(profile="nvme", title="NVMe SSD", matched_by="test", parallel=True)


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def _rows(device: str, n: int, *, kind: str = "disk", interval_s: float = 60.0,
          start: datetime = T0, host: str = "h1", source: str = "iostat",
          parent: str | None = None, **cols: Any) -> list[dict[str, Any]]:
    """n consecutive intervals of one device; a list value gives one value per interval."""
    out = []
    for i in range(n):
        r: dict[str, Any] = {"source": source, "host": host, "device": device,
                             "device_kind": kind, "parent": parent, "interval_s": interval_s,
                             "ts": start + timedelta(seconds=interval_s * (i + 1))}
        for k, v in cols.items():
            r[k] = v[i] if isinstance(v, list) else v
        out.append(r)
    return out


def _ctx(records: list[dict[str, Any]], **kw: Any) -> AnalysisContext:
    return AnalysisContext.build(SampleFrame.from_records(records), **kw)


def _goodus(name: str, interval_s: float) -> AnalysisContext:
    res = import_file(SOL / name, start=GOODUS_START, interval_s=interval_s)
    df = res.frame.df.with_columns(since_boot=pl.lit(value=False))  # see module docstring
    return AnalysisContext.build(SampleFrame(df))


def _ev(f: Finding, metric: str) -> Evidence:
    hits = [e for e in f.evidence if e.metric == metric]
    assert len(hits) == 1, (metric, [e.metric for e in f.evidence])
    return hits[0]


def _metrics(f: Finding) -> list[str]:
    return [e.metric for e in f.evidence]


def _utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# ------------------------------------------------------------------------------------------
# _common
# ------------------------------------------------------------------------------------------
def test_find_runs_splits_on_gaps_and_ranks_worst_first() -> None:
    # 10-s samples in 1-min windows: minutes 0-3 present, minute 4 missing, 5-7 present.
    vals = {0: 10.0, 1: 60.0, 2: 40.0, 3: 10.0, 5: 45.0, 6: 45.0, 7: 70.0}
    recs = []
    for minute, v in vals.items():
        recs += _rows("sda", 6, interval_s=10.0, start=T0 + timedelta(minutes=minute),
                      iops=100.0, await_ms=v)
    ctx = _ctx(recs)
    w = ctx.devices["sda"].windows
    assert w.height == 7
    level = level_expr(critical=pl.col("await_ms") >= 50, warning=pl.col("await_ms") > 30)
    found = find_runs(w, level, pl.col("await_ms"), window_s=ctx.window_s)
    # runs: minutes 1-2 (max 60, critical), 5-7 (max 70, critical) - the gap at minute 4
    # splits them; ranking is level, then score: 5-7 (70) before 1-2 (60).
    assert found.run_count == 2 and found.matched_windows == 5 and found.total_windows == 7
    first, second = found.runs
    assert (first.start, first.end) == (T0 + timedelta(minutes=5), T0 + timedelta(minutes=8))
    assert (first.level, first.score, first.windows, first.intervals) == (2, 70.0, 3, 18)
    assert first.worst["await_ms"] == 70.0 and first.severity == "critical"
    assert (second.start, second.end) == (T0 + timedelta(minutes=1), T0 + timedelta(minutes=3))
    assert second.wmean("await_ms", "iops") == pytest.approx(50.0)  # (60 + 40) / 2
    assert second.tmean("await_ms") == pytest.approx(50.0)
    assert second.max("await_ms") == 60.0
    ev = matched_evidence(found, first)
    assert ev.value == 5.0
    assert ev.note == "5 of 7 1-min windows in 2 run(s); this run: 3 window(s), 18 sample(s)"
    # limit 1 keeps the worst and says so
    one = find_runs(w, "await_ms", "await_ms", window_s=ctx.window_s, limit=1, min_level=31)
    assert [r.worst["await_ms"] for r in one.runs] == [70.0]
    assert matched_evidence(one).note.endswith("the worst 1 run(s) reported")


def test_find_runs_sustained_only() -> None:
    # 60-s samples, each its own window: a lone slow sample is not sustained; three are.
    aw = [5.0, 40.0, 5.0, 40.0, 40.0, 40.0, 5.0]
    ctx = _ctx(_rows("sda", 7, iops=100.0, await_ms=aw))
    w = ctx.devices["sda"].windows
    found = find_runs(w, level_expr(warning=pl.col("await_ms") > 30), window_s=ctx.window_s,
                      sustained_only=True)
    assert found.run_count == 1 and found.matched_windows == SUSTAINED_MIN_INTERVALS
    assert found.runs[0].start == T0 + timedelta(minutes=3)
    assert found.runs[0].sustained
    everything = find_runs(w, level_expr(warning=pl.col("await_ms") > 30),
                           window_s=ctx.window_s)
    # no score: equal level, so time order - the lone sample first
    assert everything.run_count == 2 and not everything.runs[0].sustained
    # one 5-min sample is sustained on its own (a 5-min mean smooths transients)
    long = _ctx(_rows("sdb", 2, interval_s=300.0, iops=100.0, await_ms=[40.0, 5.0]))
    lf = find_runs(long.devices["sdb"].windows, level_expr(warning=pl.col("await_ms") > 30),
                   window_s=long.window_s, sustained_only=True)
    assert lf.run_count == 1 and lf.runs[0].intervals == 1


def test_fmt_num() -> None:
    assert fmt_num(1246.4) == "1,246.4"
    assert fmt_num(5000.0) == "5,000"
    assert fmt_num(0.25) == "0.2"  # banker's rounding of the format, one decimal
    assert fmt_num(None) == "n/a"


def test_latency_targets_daily_window_in_local_time() -> None:
    # Europe/Berlin is UTC+1 in January: 01:00-04:00 local is 00:00-03:00 UTC.
    start = datetime(2024, 1, 15, 23, 0, tzinfo=UTC)
    tz = ZoneInfo("Europe/Berlin")
    t = LatencyTarget.parse("sdb=100@01:00-04:00")
    ctx = _ctx(_rows("sdb", 300, start=start, iops=50.0, await_ms=5.0,
                     source="perfmon", kind="logical_disk"), targets=[t], tz=tz)
    dev = ctx.devices["sdb"]
    tg = latency_targets(ctx, dev)
    w = dev.windows.with_columns(tg)
    user = w.filter(pl.col("target_kind") == "user")
    assert user["target_ms"].unique().to_list() == [100.0]
    assert (user["window_start"].min(), user["window_end"].max()) == (
        _utc(2024, 1, 16, 0, 0), _utc(2024, 1, 16, 3, 0))
    other = w.filter(pl.col("target_kind") != "user")
    assert other["target_ms"].unique().to_list() == [25.0]  # Windows guidance elsewhere
    assert other.height == 300 - 180
    # the vectorised choice is LatencyTarget.covers of each window's local midpoint
    for r in w.iter_rows(named=True):
        mid = r["window_start"] + (r["window_end"] - r["window_start"]) / 2
        assert (r["target_kind"] == "user") == t.covers(ctx.local_time(mid))
    assert user["target_src"][0] == "user target --target sdb=100@01:00-04:00"


def test_latency_targets_none_for_plain_linux_disk_and_design_for_profile() -> None:
    ctx = _ctx(_rows("sda", 3, iops=50.0, await_ms=5.0))
    dev = ctx.devices["sda"]
    assert latency_targets(ctx, dev)["target_ms"].null_count() == 3
    dev.capability = PREMIUM
    tg = latency_targets(ctx, dev)
    assert tg["target_ms"].to_list() == [10.0] * 3
    assert tg["target_kind"].to_list() == ["design"] * 3


def test_judged_via_parent() -> None:
    recs = (_rows("sda", 2, iops=10.0) + _rows("sda1", 2, kind="partition", parent="sda",
                                                 iops=10.0)
            + _rows("sdb1", 2, kind="partition", parent="sdb", iops=10.0))
    ctx = _ctx(recs)
    assert judged_via_parent(ctx, ctx.devices["sda1"]) is True
    assert judged_via_parent(ctx, ctx.devices["sdb1"]) is False  # parent not in the data
    assert judged_via_parent(ctx, ctx.devices["sda"]) is False


def test_rule_modules_load() -> None:
    ids = {r.rule_id for r in all_rules()}
    assert {"solaris_service_time", "response_time_target", "saturation", "queueing",
            "interval_too_coarse", "small_sequential_io", "util_not_capacity"} <= ids


# ------------------------------------------------------------------------------------------
# solaris_service_time ([Goodus] §3.4)
# ------------------------------------------------------------------------------------------
def test_solaris_goodus_cp_ssd2_is_a_bottleneck() -> None:
    ctx = _goodus("seed001-iostat-x5-cp-maxcontig6.txt", 5.0)
    out = solaris_service_time.check(ctx)
    # "ssd2 13.0 31.0 120.5 20650.3 0.0 6.0 137.8 2 100": 137.8 ms at 100 %b; sd0 1.1 ms at
    # 48 %b is normal; sd1, sd6, ssd0, ssd1 are idle.
    assert [(f.device, f.severity) for f in out] == [("ssd2", "critical")]
    f = out[0]
    assert (_ev(f, "svc_t_ms").value, _ev(f, "svc_t_ms").threshold) == (137.8, 50.0)
    assert (_ev(f, "busy_pct").value, _ev(f, "busy_pct").threshold) == (100.0, 20.0)
    assert _ev(f, "iops").value == 44.0
    assert "wait_pct" not in _metrics(f)  # %w 2 < 5
    # the quoted report is measured (at 100 %b it cannot average since boot): it ends one
    # interval after the start
    assert (f.window_start, f.window_end) == (_utc(2008, 2, 21, 10, 0),
                                              _utc(2008, 2, 21, 10, 0, 5))
    assert f.title.startswith("Bottleneck: response 137.8 ms at 100 % busy")
    assert "[Goodus] §3.4" in f.source


def test_solaris_goodus_mkfile_sd0_bottleneck_and_heavily_loaded() -> None:
    ctx = _goodus("seed001-iostat-x2-mkfile-maxcontig6.txt", 2.0)
    out = solaris_service_time.check(ctx)
    # "sd0 0.0 141.0 0.0 6743.3 7.5 168.2 1246.4 33 100"; ssd2 5.6 ms at 7 %b is normal.
    assert [(f.device, f.severity) for f in out] == [("sd0", "critical")]
    f = out[0]
    assert _ev(f, "svc_t_ms").value == 1246.4
    w = _ev(f, "wait_pct")
    assert (w.value, w.threshold, w.op) == (33.0, 5.0, ">=")
    assert f.title.endswith("; %w 33 %")
    assert "heavily loaded" in f.explanation


def test_solaris_goodus_idle_report_is_clean() -> None:
    # seed001-iostat-x.txt: sd0 11.9 ms at 0 %b, the rest idle.
    ctx = _goodus("seed001-iostat-x.txt", 5.0)
    assert solaris_service_time.check(ctx) == []


def test_solaris_skips_fio_jobs() -> None:
    # pkb-fio-2.1.4.json: sequential_write job at 478.7 ms - a benchmark's chosen queue
    # depth, not an operational response time
    ctx = AnalysisContext.build(import_file(FIX / "fio" / "pkb-fio-2.1.4.json").frame)
    assert any(d.device == "fio:sequential_write" for d in ctx.devices.values())
    out = solaris_service_time.check(ctx)
    # only the disk fio reports on (disk_util) is judged as a device
    assert [(f.device, f.severity) for f in out] == [("sdb", "critical")]


@pytest.mark.parametrize(("await_ms", "util", "wait_pct", "expected"), [
    (40.0, 25.0, 0.0, "warning"),    # 30-50 ms at >= 20 % busy: above normal
    (40.0, 10.0, 0.0, None),         # under 20 % busy: latency_without_load's, not load
    (40.0, 4.0, 0.0, None),          # 30-50 ms at <= 5 % busy: still normal ([Goodus])
    (60.0, 10.0, 0.0, None),         # >= 50 ms but under 20 % busy: not a bottleneck
    (60.0, 20.0, 0.0, "critical"),   # the bottleneck band
    (25.0, 90.0, 0.0, None),         # <= 30 ms is normal whatever the busy
    (10.0, 30.0, 6.0, "warning"),    # %w >= 5: heavily loaded
    (60.0, None, None, "warning"),   # no busy figure: bottleneck not claimed
])
def test_solaris_bands(await_ms: float, util: float | None, wait_pct: float | None,
                       expected: str | None) -> None:
    ctx = _ctx(_rows("sd3", 1, source="solaris-iostat", iops=20.0, await_ms=await_ms,
                     util_pct=util, queue_wait_pct=wait_pct))
    out = solaris_service_time.check(ctx)
    assert [f.severity for f in out] == ([] if expected is None else [expected])
    if util is None:
        assert _ev(out[0], "busy_pct").note.startswith("not reported")
        assert "busy not reported" in out[0].title


def test_solaris_leaves_target_windows_to_response_time_target() -> None:
    # 60 ms at 50 % busy for 4 minutes: the first two minutes are covered by a user target
    # (12:00-12:02 UTC), the last two are judged by [Goodus]'s rule.
    ctx = _ctx(_rows("sdc", 4, iops=100.0, await_ms=60.0, util_pct=50.0),
               targets=[LatencyTarget.parse("sdc=100@12:00-12:02")])
    out = solaris_service_time.check(ctx)
    assert len(out) == 1
    assert (out[0].window_start, out[0].window_end) == (T0 + timedelta(minutes=2),
                                                        T0 + timedelta(minutes=4))
    assert _ev(out[0], "windows_matched").value == 2.0
    # Windows data has the 25 ms guidance everywhere: never this rule's
    win = _ctx(_rows("D:", 4, source="perfmon", kind="logical_disk", iops=100.0,
                     await_ms=60.0, util_pct=50.0))
    assert solaris_service_time.check(win) == []


def test_solaris_at_most_three_runs_worst_first() -> None:
    # four separate 1-window runs at 40, 70, 55, 90 ms (all at 50 % busy)
    aw = [40.0, 5.0, 70.0, 5.0, 55.0, 5.0, 90.0]
    ctx = _ctx(_rows("sdd", 7, iops=100.0, await_ms=aw, util_pct=50.0))
    out = solaris_service_time.check(ctx)
    assert [_ev(f, "svc_t_ms").value for f in out] == [90.0, 70.0, 55.0]
    assert _ev(out[0], "windows_matched").note == (
        "4 of 7 1-min windows in 4 run(s); this run: 1 window(s), 1 sample(s); the worst 3 "
        "run(s) reported")


# ------------------------------------------------------------------------------------------
# response_time_target: the per-window targets of [MS-Azure-JP]
# ------------------------------------------------------------------------------------------
def _azure(capability: Capability | None = None) -> AnalysisContext:
    ctx = AnalysisContext.build(import_file(PERFMON / "relog-utf16-azure-2hosts.csv").frame)
    if capability is not None:
        for dev in ctx.devices.values():
            dev.capability = capability
    return ctx


def test_rtt_premium_ssd_3_5_ms_is_fine_tens_of_ms_is_the_disk() -> None:
    out = response_time_target.check(_azure(PREMIUM))
    # E: reads 4 KiB at ~5,000 IO/s in ~3.5 ms: under the 10 ms design, no finding.
    # F: reads 31.2/45.7/28.9 ms and writes 42.1/52.4/38.8 ms: tens of ms on a disk designed
    # for < 10 ms -> critical (>= 2 x 10 ms), logical and physical disk alike.
    assert sorted((f.device, f.severity) for f in out) == [
        ("AZVM-SQL02:1 F:", "critical"), ("AZVM-SQL02:F:", "critical")]
    f = next(f for f in out if f.device == "AZVM-SQL02:F:")
    # reads, weighted by r/s x interval: (31.2 x 498.2 x 15.002 + 45.7 x 501.6 x 14.999
    # + 28.9 x 499.9 x 15.002) / (498.2 x 15.002 + 501.6 x 14.999 + 499.9 x 15.002)
    # = 793,748.1 / 22,497.0 = 35.282 ms
    r = _ev(f, "r_await_ms")
    assert r.value == pytest.approx(35.2824, abs=1e-3)
    assert (r.threshold, r.op) == (10.0, ">")
    # writes: (42.1 x 3,752.0 + 52.4 x 3,746.8 + 38.8 x 3,756.5) / 11,255.3 = 44.427 ms
    assert _ev(f, "w_await_ms").value == pytest.approx(44.4274, abs=1e-3)
    assert _ev(f, "r_await_ms_peak").value == pytest.approx(45.7)
    assert _ev(f, "w_await_ms_peak").value == pytest.approx(52.4)
    tgt = _ev(f, "target_ms")
    assert tgt.value == 10.0 and "design latency of 'Azure Premium SSD P30'" in tgt.note
    assert "disk itself is what slows the system" in f.explanation
    assert f.title == ("Reads 35.3 ms and writes 44.4 ms against the 10 ms design latency "
                       "(worst window 4.4x the target)")
    assert _ev(f, "windows_matched").note.endswith("this run: 1 window(s), 3 sample(s)")


def test_rtt_windows_guidance_without_profile() -> None:
    out = response_time_target.check(_azure())
    # 35.3 and 44.4 ms against 25 ms: over, but under 2x (50 ms) -> warning
    assert sorted((f.device, f.severity) for f in out) == [
        ("AZVM-SQL02:1 F:", "warning"), ("AZVM-SQL02:F:", "warning")]
    f = next(f for f in out if f.device == "AZVM-SQL02:F:")
    assert _ev(f, "target_ms").value == 25.0
    assert "Windows guidance" in _ev(f, "target_ms").note
    assert "cc718984" in _ev(f, "target_ms").note


def test_rtt_standard_hdd_peaks_not_means() -> None:
    ctx = AnalysisContext.build(import_file(PERFMON / "typeperf-utf8-standard-ssd-hdd.csv").frame)
    out = response_time_target.check(ctx)
    # Standard SSD S: peaks at 24.9 ms (within 25 ms); Standard HDD H: peaks at 49.7 ms while
    # the window's mean is (3.8 x 500 x 1.001 + 4.2 x 498 x 1.001 + 49.7 x 505 x 1.002
    # + 3.5 x 500 x 1.001) / (500 x 1.001 + 498 x 1.001 + 505 x 1.002 + 500 x 1.001)
    # = 30,896.0 / 2,005.5 = 15.41 ms.
    assert sorted((f.device, f.severity) for f in out) == [("2 H:", "info"), ("H:", "info")]
    f = next(f for f in out if f.device == "H:")
    peak = _ev(f, "r_await_ms_peak")
    assert (peak.value, peak.threshold, peak.op) == (49.7, 25.0, ">")
    assert _ev(f, "r_await_ms").value == pytest.approx(15.4056, abs=1e-3)
    assert f.title == ("Read peaks reach 49.7 ms while the means stay within the 25 ms "
                       "Windows guidance")


def _backup_night(targets: list[str]) -> list[Finding]:
    # D: on a Windows host in Berlin (UTC+1 in January), 1-min samples from 00:00 to 05:30
    # local: 10 ms until 01:00, 60 ms 01:00-04:00 (the backup), 40 ms 04:00-04:30, 10 ms
    # 04:30-05:00, 60 ms 05:00-05:30.
    start = datetime(2024, 1, 15, 23, 0, tzinfo=UTC)  # 00:00 local
    aw = [10.0] * 60 + [60.0] * 180 + [40.0] * 30 + [10.0] * 30 + [60.0] * 30
    ctx = _ctx(_rows("D:", len(aw), start=start, source="perfmon", kind="logical_disk",
                     r_iops=200.0, r_await_ms=aw),
               targets=[LatencyTarget.parse(t) for t in targets], tz=ZoneInfo("Europe/Berlin"))
    return response_time_target.check(ctx)


def test_rtt_backup_window_target_overrides_only_its_window() -> None:
    out = _backup_night(["D:=100@01:00-04:00"])
    # In the window 60 ms < 100 ms: fine. Outside, the 25 ms guidance: 40 ms (1.6x) is a
    # warning, 60 ms (2.4x) critical. Worst first.
    assert [(f.severity, f.window_start, f.window_end) for f in out] == [
        ("critical", _utc(2024, 1, 16, 4, 0), _utc(2024, 1, 16, 4, 30)),
        ("warning", _utc(2024, 1, 16, 3, 0), _utc(2024, 1, 16, 3, 30)),
    ]
    crit, warn = out
    assert _ev(crit, "r_await_ms").value == pytest.approx(60.0)
    assert _ev(crit, "target_ms").value == 25.0
    assert _ev(warn, "r_await_ms").value == pytest.approx(40.0)
    assert _ev(warn, "r_await_ms_worst_window").threshold == 50.0
    assert _ev(warn, "windows_matched").note.startswith("60 of 330 1-min windows in 2 run(s)")


def test_rtt_second_target_applies_outside_the_window() -> None:
    out = _backup_night(["D:=100@01:00-04:00", "D:=50"])
    # outside the backup window the user's 50 ms applies: 40 ms fine, 60 ms a warning
    assert [(f.severity, f.window_start) for f in out] == [
        ("warning", _utc(2024, 1, 16, 4, 0))]
    tgt = _ev(out[0], "target_ms")
    assert (tgt.value, tgt.note) == (50.0, "user target --target D:=50")
    assert "Your target for this time of day is 50 ms" in out[0].explanation


def test_rtt_needs_sustained_excess() -> None:
    # one 60-s sample at 80 ms is a transient; three in a row are a finding
    lone = _ctx(_rows("E:", 5, source="perfmon", kind="logical_disk", r_iops=100.0,
                      r_await_ms=[5.0, 80.0, 5.0, 5.0, 5.0]))
    assert response_time_target.check(lone) == []
    three = _ctx(_rows("E:", 5, source="perfmon", kind="logical_disk", r_iops=100.0,
                       r_await_ms=[5.0, 80.0, 80.0, 80.0, 5.0]))
    out = response_time_target.check(three)
    assert [(f.severity, f.window_start) for f in out] == [
        ("critical", T0 + timedelta(minutes=1))]


def test_rtt_reads_and_writes_judged_separately() -> None:
    ctx = _ctx(_rows("G:", 3, source="perfmon", kind="logical_disk", r_iops=300.0,
                     w_iops=50.0, r_await_ms=4.0, w_await_ms=30.0))
    out = response_time_target.check(ctx)
    assert len(out) == 1 and out[0].severity == "warning"
    assert "r_await_ms" not in _metrics(out[0])  # reads were fine
    assert _ev(out[0], "w_await_ms").value == pytest.approx(30.0)
    assert out[0].title.startswith("Writes 30 ms against the 25 ms Windows guidance")


def test_rtt_user_target_and_design_latency() -> None:
    # user target 15 ms on a Premium SSD (design 10 ms): 14 ms fine; 16 ms exceeds the
    # target (1.07x, not 2x) and the design latency -> critical
    for aw, expected in ((14.0, []), (16.0, ["critical"])):
        ctx = _ctx(_rows("sdz", 3, r_iops=100.0, r_await_ms=aw),
                   targets=[LatencyTarget.parse("sdz=15")])
        ctx.devices["sdz"].capability = PREMIUM
        out = response_time_target.check(ctx)
        assert [f.severity for f in out] == expected
    assert _ev(out[0], "design_latency_ms").value == 10.0
    # a looser user target is respected: 60 ms in a 100 ms window is no finding
    ctx = _ctx(_rows("sdz", 3, r_iops=100.0, r_await_ms=60.0),
               targets=[LatencyTarget.parse("sdz=100")])
    ctx.devices["sdz"].capability = PREMIUM
    assert response_time_target.check(ctx) == []


def test_rtt_silent_without_any_target() -> None:
    ctx = _ctx(_rows("sda", 5, r_iops=100.0, r_await_ms=80.0))
    assert response_time_target.check(ctx) == []  # solaris_service_time's windows


# ------------------------------------------------------------------------------------------
# saturation (seeds 001, 004)
# ------------------------------------------------------------------------------------------
def _hdd_day(sat_await: float, sat_util: float = 99.0, sat_iops: float = 110.0,
             n_sat: int = 5) -> AnalysisContext:
    # 20 one-minute windows at 40 % busy, 100 IO/s, 8 ms; then n_sat at sat_util / sat_iops
    # / sat_await; 16 kB requests throughout.
    n = 20 + n_sat
    iops = [100.0] * 20 + [sat_iops] * n_sat
    ctx = _ctx(_rows("sda", n, iops=iops, r_iops=iops, r_kBps=[i * 16.0 for i in iops],
                     await_ms=[8.0] * 20 + [sat_await] * n_sat,
                     util_pct=[40.0] * 20 + [sat_util] * n_sat))
    ctx.devices["sda"].capability = HDD
    return ctx


def test_saturation_hdd_drop_off_is_critical() -> None:
    out = saturation.check(_hdd_day(40.0))
    # 99 % busy; response 40 ms = 5x the 8 ms below the knee, throughput 110/100 = 1.1x:
    # latency grew 5 / 1.1 = 4.5x more than throughput (>= 2x) -> drop-off
    assert [(f.severity, f.window_start, f.window_end) for f in out] == [
        ("critical", T0 + timedelta(minutes=20), T0 + timedelta(minutes=25))]
    f = out[0]
    assert (_ev(f, "util_pct").value, _ev(f, "util_pct").threshold) == (99.0, 95.0)
    assert _ev(f, "await_ms").value == pytest.approx(40.0)
    assert _ev(f, "await_ms").threshold == pytest.approx(16.0)  # 2 x 8 ms baseline
    assert _ev(f, "baseline_await_ms").value == pytest.approx(8.0)
    assert _ev(f, "baseline_iops").value == pytest.approx(100.0)
    assert _ev(f, "latency_gain").value == pytest.approx(5.0)
    assert _ev(f, "throughput_gain").value == pytest.approx(1.1)
    assert _ev(f, "knee_util_pct").value == 80.0
    assert f.title.startswith("Saturated: 99 % busy, response 40 ms vs 8 ms below the knee")


def test_saturation_hdd_full_busy_without_latency_climb_is_a_warning() -> None:
    out = saturation.check(_hdd_day(9.0))
    assert [f.severity for f in out] == ["warning"]
    assert out[0].title == "Near saturation: 99 % busy, at or above the 80 % knee"
    assert "is not visible" in out[0].explanation


def test_saturation_knee_from_capacity_model() -> None:
    ctx = _hdd_day(9.0, sat_util=85.0)
    assert [f.severity for f in saturation.check(ctx)] == ["warning"]  # 85 >= 80 default
    ctx.devices["sda"].capacity = CapacityEstimate(method="util-linear", reason="test",
                                                   knee_util_pct=90.0)
    assert saturation.check(ctx) == []  # below the fitted 90 % knee


def test_saturation_not_sustained() -> None:
    # two 1-min windows at 99 %: 2 samples, 120 s - not sustained
    assert saturation.check(_hdd_day(40.0, n_sat=2)) == []


def _nvme(last_await: float, last_kB: float = 16.0,
          capability: Capability | None = NVME) -> AnalysisContext:
    # 10 windows at 1,000 IO/s and 1 ms, 10 at 2,000 IO/s and 1 ms, 4 at 2,000 IO/s and
    # last_await ms; 16 kB requests except the last 4 (last_kB); %util 100 throughout.
    iops = [1000.0] * 10 + [2000.0] * 14
    size = [16.0] * 20 + [last_kB] * 4
    ctx = _ctx(_rows("nvme0n1", 24, iops=iops, r_iops=iops,
                     r_kBps=[i * s for i, s in zip(iops, size, strict=True)],
                     await_ms=[1.0] * 20 + [last_await] * 4, util_pct=100.0))
    ctx.devices["nvme0n1"].capability = capability
    return ctx


def test_saturation_parallel_latency_climb_with_flat_throughput() -> None:
    out = saturation.check(_nvme(5.0))
    # median IOPS 2,000 -> baseline = all 24 windows at <= 2,000: op-weighted await
    # (10 x 1,000 x 1 + 10 x 2,000 x 1 + 4 x 2,000 x 5) / (10,000 + 20,000 + 8,000)
    # = 70,000 / 38,000 = 1.842 ms; IOPS (10 x 1,000 + 14 x 2,000) / 24 = 1,583.3.
    # Last 4: 5 / 1.842 = 2.71x latency, 2,000 / 1,583.3 = 1.26x throughput -> drop-off.
    assert [(f.severity, f.window_start) for f in out] == [
        ("warning", T0 + timedelta(minutes=20))]
    f = out[0]
    assert _ev(f, "baseline_await_ms").value == pytest.approx(70000 / 38000)
    assert _ev(f, "latency_gain").value == pytest.approx(5 / (70000 / 38000))
    assert _ev(f, "throughput_gain").value == pytest.approx(2000 / (38000 / 24))
    assert "serves requests in parallel" in f.explanation
    assert "util_pct" not in _metrics(f)


def test_saturation_parallel_at_capability_is_critical() -> None:
    cap = Capability(profile="nvme", title="NVMe SSD", matched_by="test", parallel=True,
                     expected_iops=2100.0)
    out = saturation.check(_nvme(5.0, capability=cap))
    # 2,000 IO/s >= 0.9 x 2,100 = 1,890: at the published limit
    assert [f.severity for f in out] == ["critical"]
    assert _ev(out[0], "expected_iops").value == 2100.0


def test_saturation_parallel_mix_change_is_not_drop_off() -> None:
    # the slow windows move 64 kB requests (4x the baseline's 16 kB): a different mix
    assert saturation.check(_nvme(5.0, last_kB=64.0)) == []


def test_saturation_parallel_ignores_util() -> None:
    assert saturation.check(_nvme(1.0)) == []  # 100 % util, flat latency: nothing


# ------------------------------------------------------------------------------------------
# queueing
# ------------------------------------------------------------------------------------------
def test_queueing_goodus_sd0_time_is_in_the_device() -> None:
    ctx = _goodus("seed001-iostat-x2-mkfile-maxcontig6.txt", 2.0)
    out = queueing.check(ctx)
    assert [(f.device, f.severity) for f in out] == [("sd0", "info")]
    f = out[0]
    # Little's law at 141 IO/s: wait 7.5 -> 7.5 / 141 s = 53.19 ms in the driver queue,
    # actv 168.2 -> 1,192.9 ms in the device; busy per op 100 % x 10 / 141 = 7.092 ms,
    # device / busy = 168.2
    assert _ev(f, "queue_wait_ms").value == pytest.approx(7500 / 141)
    assert _ev(f, "device_ms").value == pytest.approx(168200 / 141)
    assert _ev(f, "busy_per_op_ms").value == pytest.approx(1000 / 141)
    assert _ev(f, "device_to_busy").value == pytest.approx(168.2)
    assert _ev(f, "actv").value == 168.2
    assert "raising host queue limits would not help" in f.explanation


def test_queueing_host_side_split() -> None:
    # iostat -xn style: wsvc_t 30 ms + asvc_t 5 ms = 35 ms -> Q = 7 (warning);
    # wsvc_t 60 ms -> Q = 13 (critical)
    for wait, expected in ((30.0, "warning"), (60.0, "critical")):
        ctx = _ctx(_rows("c1t2d0", 3, source="solaris-iostat", iops=200.0,
                         queue_wait_ms=wait, svctm_ms=5.0, await_ms=wait + 5.0,
                         util_pct=100.0))
        out = queueing.check(ctx)
        assert [f.severity for f in out] == [expected]
        f = out[0]
        assert _ev(f, "response_to_service").value == pytest.approx((wait + 5) / 5)
        assert _ev(f, "queue_wait_ms").value == pytest.approx(wait)
        assert f.title.startswith(f"Host-side queueing: requests wait {fmt_num(wait)} ms")
        assert "sd_max_throttle" in f.suggestion


def test_queueing_short_wait_is_ignored() -> None:
    # Q = 4 but the wait is 3 ms (< 5 ms): not what makes anything slow
    ctx = _ctx(_rows("c1t2d0", 3, source="solaris-iostat", iops=200.0, queue_wait_ms=3.0,
                     svctm_ms=1.0, await_ms=4.0))
    assert queueing.check(ctx) == []


def test_queueing_estimated_on_hdd_with_mm1_comparison() -> None:
    # 100 IO/s at 60 % busy: busy per op 6 ms; await 40 ms -> Q = 6.67 (warning);
    # M/M/1 at rho 0.6 expects 1 / 0.4 = 2.5: Q >= 2 x 2.5 -> bursts or a host limit
    ctx = _ctx(_rows("sda", 3, iops=100.0, await_ms=40.0, util_pct=60.0, aqu_sz=4.0))
    ctx.devices["sda"].capability = HDD
    out = queueing.check(ctx)
    assert [f.severity for f in out] == ["warning"]
    f = out[0]
    assert _ev(f, "service_ms").value == pytest.approx(6.0)
    assert _ev(f, "response_to_service").value == pytest.approx(40 / 6)
    assert _ev(f, "mm1_expected_ratio").value == pytest.approx(2.5)
    assert "arrive in bursts" in f.explanation
    # the same frame on a device of unknown media: util / IOPS is no service time
    ctx.devices["sda"].capability = None
    assert queueing.check(ctx) == []


def test_queueing_sysstat_svctm_not_trusted_on_unknown_media() -> None:
    # sysstat < 12.1.2 svctm is %util / IOPS, not a measurement
    ctx = _ctx(_rows("dm-0", 3, kind="dm", source="sar", iops=100.0, await_ms=40.0,
                     svctm_ms=3.0, util_pct=30.0))
    assert queueing.check(ctx) == []


def test_queueing_above_device_queue_depth() -> None:
    # NVMe with queue_depth 32: aqu-sz 128 at 1,000 IO/s -> 96 requests waiting in the block
    # layer, 96 / 1,000 s = 96 ms; await 128 ms -> service 32 ms, Q = 4
    ctx = _ctx(_rows("nvme0n1", 3, iops=1000.0, await_ms=128.0, aqu_sz=128.0,
                     util_pct=100.0),
               infos={"nvme0n1": DeviceInfo(name="nvme0n1", kind="disk", queue_depth=32)})
    ctx.devices["nvme0n1"].capability = NVME
    out = queueing.check(ctx)
    assert [f.severity for f in out] == ["warning"]
    assert _ev(out[0], "queue_wait_ms").value == pytest.approx(96.0)
    assert _ev(out[0], "queue_depth").value == 32.0


# ------------------------------------------------------------------------------------------
# interval_too_coarse: the short intervals [Yuge] asks for
# ------------------------------------------------------------------------------------------
def test_interval_sar_10_min_is_info() -> None:
    ctx = AnalysisContext.build(
        import_file(FIX / "sar" / "ksar-rhel7-sysstat10.1.5-sar-A.txt").frame)
    out = interval_too_coarse.check(ctx)
    assert len(out) == 1
    f = out[0]
    assert (f.severity, f.device) == ("info", None)
    assert (f.window_start, f.window_end) == (_utc(2016, 3, 28, 9, 0, 1),
                                              _utc(2016, 3, 28, 15, 0, 1))
    iv = _ev(f, "interval_s")
    assert (iv.value, iv.threshold, iv.op) == (600.0, 300.0, ">")
    assert _ev(f, "rows").note == "5 device(s) from sar on hostname.example.com"
    assert f.title == ("hostname.example.com (sar): sampled every 10 min - peaks shorter than "
                       "that are averaged away")
    assert "sysstat-collect.timer" in f.suggestion


def test_interval_30_min_is_warning_and_1_min_is_fine() -> None:
    coarse = _ctx(_rows("VOL001", 4, interval_s=1800.0, source="rmf", kind="volume",
                        iops=10.0) + _rows("VOL002", 4, interval_s=1800.0, source="rmf",
                                           kind="volume", iops=10.0))
    out = interval_too_coarse.check(coarse)
    assert [(f.severity, f.device) for f in out] == [("warning", None)]
    assert (_ev(out[0], "interval_s").value, _ev(out[0], "interval_s").threshold) == (
        1800.0, 1800.0)
    assert (out[0].window_start, out[0].window_end) == (T0, T0 + timedelta(hours=2))
    assert "RMF Monitor I INTERVAL" in out[0].suggestion
    fine = AnalysisContext.build(import_file(FIX / "rmf" / "seed000_before_1rank.txt").frame)
    assert interval_too_coarse.check(fine) == []


# ------------------------------------------------------------------------------------------
# small_sequential_io ([Goodus] §4.3-4.6)
# ------------------------------------------------------------------------------------------
def test_small_seq_goodus_cp_and_mkfile_cannot_tell_sequential() -> None:
    cp = small_sequential_io.check(_goodus("seed001-iostat-x5-cp-maxcontig6.txt", 5.0))
    # sd0 10,543.8 kB/s / 492.4 r/s = 21.41 kB at 48 % busy; ssd2 writes 666 kB: not small
    assert [(f.device, f.severity) for f in cp] == [("sd0", "info")]
    f = cp[0]
    assert _ev(f, "areq_kB").value == pytest.approx(10543.8 / 492.4)
    assert (_ev(f, "areq_kB").threshold, _ev(f, "areq_kB").op) == (64.0, "<")
    assert _ev(f, "r_areq_kB").value == pytest.approx(10543.8 / 492.4)
    assert _ev(f, "seq_pct").value is None
    assert "read-ahead" in f.explanation and "maxcontig" in f.suggestion
    assert "small random files" in f.suggestion
    mk = small_sequential_io.check(_goodus("seed001-iostat-x2-mkfile-maxcontig6.txt", 2.0))
    # sd0 6,743.3 kB/s / 141 w/s = 47.82 kB (6 x 8 KB clusters) at 100 % busy
    assert [(f.device, f.severity) for f in mk] == [("sd0", "info")]
    assert _ev(mk[0], "w_areq_kB").value == pytest.approx(6743.3 / 141)
    assert "write-behind" in mk[0].explanation


def test_small_seq_size_only_estimate_is_not_used() -> None:
    ctx = _goodus("seed001-iostat-x5-cp-maxcontig6.txt", 5.0)
    ctx.devices["sd0"].attributes = Attributes(seq_pct=21.0, seq_method="estimate")
    assert [f.severity for f in small_sequential_io.check(ctx)] == ["info"]
    ctx.devices["sd0"].attributes = Attributes(seq_pct=90.0, seq_method="rmf-cache")
    out = small_sequential_io.check(ctx)
    assert [f.severity for f in out] == ["warning"]
    assert _ev(out[0], "seq_pct").value == 90.0


def test_small_seq_linux_merges() -> None:
    # 500 r/s of 16 kB with 400 merges/s: 80 % of requests took in merged bios
    ctx = _ctx(_rows("sdb", 3, iops=500.0, r_iops=500.0, r_kBps=8000.0,
                     r_merged_ps=400.0, w_merged_ps=0.0, util_pct=60.0))
    out = small_sequential_io.check(ctx)
    assert [f.severity for f in out] == ["warning"]
    f = out[0]
    assert (_ev(f, "seq_pct").value, _ev(f, "seq_pct").threshold) == (80.0, 50.0)
    assert _ev(f, "areq_kB").value == pytest.approx(16.0)
    assert "blockdev --setra" in f.suggestion
    assert f.title == "Sequential reads in small requests: 16 kB at 500 IO/s (80 % sequential)"
    # no merges: random small reads, nothing to say
    rnd = _ctx(_rows("sdb", 3, iops=500.0, r_iops=500.0, r_kBps=8000.0, r_merged_ps=0.0,
                     w_merged_ps=0.0, util_pct=60.0))
    assert small_sequential_io.check(rnd) == []


def test_small_seq_thresholds() -> None:
    base = {"r_merged_ps": 400.0, "w_merged_ps": 0.0, "util_pct": 60.0}
    # 64 kB is not small; 99 IO/s are too few
    big = _ctx(_rows("sdb", 3, iops=500.0, r_iops=500.0, r_kBps=32000.0, **base))
    assert small_sequential_io.check(big) == []
    few = _ctx(_rows("sdb", 3, iops=99.0, r_iops=99.0, r_kBps=99 * 16.0, **base))
    assert small_sequential_io.check(few) == []


def test_small_seq_rmf_counts() -> None:
    # controller counts: 300 of 400 operations sequential (75 %), 24 kB each
    ctx = _ctx(_rows("DB2D01", 2, source="rmf", kind="volume", iops=400.0, r_iops=400.0,
                     r_kBps=9600.0, seq_read_ps=300.0))
    out = small_sequential_io.check(ctx)
    assert [f.severity for f in out] == ["warning"]
    assert _ev(out[0], "seq_pct").value == pytest.approx(75.0)
    assert "controller cache" in _ev(out[0], "seq_pct").note
    assert "db_file_multiblock_read_count" in out[0].suggestion


def test_small_seq_unknown_pattern_random_sized_is_silent() -> None:
    # Azure E: 4 KiB reads at 5,000 IO/s, 99.6 % busy: block-sized, no basis for a note
    out = small_sequential_io.check(_azure())
    assert {f.device for f in out} == set()  # F: moves 64 kB: not small either


# ------------------------------------------------------------------------------------------
# util_not_capacity
# ------------------------------------------------------------------------------------------
def test_util_not_capacity_azure_unknown_media() -> None:
    out = util_not_capacity.check(_azure())
    # E: and F: (and their physical disks) at ~99-100 %util; C: at 1-2 % is not noted
    assert sorted(f.device for f in out) == ["AZVM-SQL01:2 E:", "AZVM-SQL01:E:",
                                              "AZVM-SQL02:1 F:", "AZVM-SQL02:F:"]
    f = next(f for f in out if f.device == "AZVM-SQL01:E:")
    assert f.severity == "info"
    # time-weighted: (99.6 x 15.002 + 99.4 x 14.999 + 99.7 x 15.002) / 45.003 = 99.567
    assert _ev(f, "util_pct").value == pytest.approx(99.5667, abs=1e-3)
    # a LogicalDisk is a volume (may span disks): never a capacity measure
    assert _ev(f, "util_is_capacity").value == "false"
    assert f.title == "%util 99.6 % does not mean saturation here (a Windows volume)"
    g = next(f for f in out if f.device == "AZVM-SQL01:2 E:")  # the PhysicalDisk
    assert _ev(g, "util_is_capacity").value == "unknown"
    assert g.title == ("%util 99.6 % does not mean saturation here (service model "
                       "undetermined)")
    assert "await_ms" in _metrics(f) and "aqu_sz" in _metrics(f)


def test_util_not_capacity_by_profile_and_over_100() -> None:
    ctx = _ctx(_rows("nvme0n1", 3, iops=5000.0, await_ms=0.2, util_pct=99.0))
    ctx.devices["nvme0n1"].capability = NVME
    out = util_not_capacity.check(ctx)
    assert [f.severity for f in out] == ["info"]
    assert "NVMe SSD serves requests in parallel" in out[0].title
    # one-at-a-time device: %util is capacity, saturation's business
    ctx.devices["nvme0n1"].capability = HDD
    assert util_not_capacity.check(ctx) == []
    # ... unless %util went above 100 % somewhere
    over = _ctx(_rows("sdq", 3, iops=500.0, await_ms=2.0, util_pct=[90.0, 130.0, 95.0]))
    over.devices["sdq"].capability = HDD
    out = util_not_capacity.check(over)
    assert [f.severity for f in out] == ["info"]
    assert "(%util above 100 %)" in out[0].title
    assert "peak 130 %" in _ev(out[0], "util_pct").note


def test_util_not_capacity_no_latency() -> None:
    # iostat -d style data: IO/s and kB/s only
    ctx = _ctx(_rows("sdb", 3, iops=120.0, kBps=4000.0)
               + _rows("sdc", 3, iops=0.0, kBps=0.0))
    out = util_not_capacity.check(ctx)
    assert [(f.device, f.severity) for f in out] == [("sdb", "info")]
    f = out[0]
    assert f.title == "No response time in the data: latency rules cannot judge"
    assert (f.window_start, f.window_end) == (T0, T0 + timedelta(minutes=3))
    assert _ev(f, "iops_peak").value == 120.0
    assert _ev(f, "util_pct").value == "not reported"


# ------------------------------------------------------------------------------------------
# across rules: one angle each on the [Goodus] report
# ------------------------------------------------------------------------------------------
def test_goodus_mkfile_each_rule_its_own_angle() -> None:
    ctx = _goodus("seed001-iostat-x2-mkfile-maxcontig6.txt", 2.0)
    got = {}
    for mod in (solaris_service_time, response_time_target, saturation, queueing,
                small_sequential_io, util_not_capacity):
        got[mod.RULE_ID] = [(f.device, f.severity) for f in mod.check(ctx)]
    assert got == {
        "solaris_service_time": [("sd0", "critical")],   # the bottleneck (svc_t, %b, %w)
        "response_time_target": [],                       # no target on a Solaris disk
        "saturation": [],                                 # one 2-s report: not sustained
        "queueing": [("sd0", "info")],                    # time is in the device
        "small_sequential_io": [("sd0", "info")],         # 48 kB writes
        "util_not_capacity": [("sd0", "info")],           # 100 %b on unknown media
    }


def test_local_time_helper_matches_context() -> None:
    # the daily-window test above relies on ctx.local_time; pin its behaviour here
    ctx = _ctx(_rows("sda", 1, iops=1.0), tz=ZoneInfo("Europe/Berlin"))
    assert ctx.local_time(_utc(2024, 1, 16, 0, 30)) == time(1, 30)
