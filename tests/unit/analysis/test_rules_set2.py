"""Rules set 2: rmf_response_breakdown, concentration, cache_hit_low, busy_not_bottleneck,
oracle_waits, capability_exceeded.

Seed cases run on the seed fixtures (RMF [Yuge] before/after, iostat [Insight-SSD9], Statspack
and AWR [Insight-SSD9]); the other cases on frames written here, with the expected numbers
computed by hand in the comments.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from iogauge.analysis.aggregate import add_aggregates
from iogauge.analysis.context import AnalysisContext
from iogauge.analysis.rules import (
    all_rules,
    busy_not_bottleneck,
    cache_hit_low,
    capability_exceeded,
    concentration,
    oracle_waits,
    rmf_response_breakdown,
)
from iogauge.analysis.types import Attributes, Capability, Evidence, Finding
from iogauge.importers.registry import import_file
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
RMF_T = datetime(2016, 6, 13, 10, 0, tzinfo=UTC)
INSIGHT_SSD9_START = datetime(2007, 8, 21, 10, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def _series(device: str, kind: str, n: int, *, interval_s: float = 60.0,
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


def _ev(f: Finding, metric: str) -> Evidence:
    hits = [e for e in f.evidence if e.metric == metric]
    assert len(hits) == 1, (metric, [e.metric for e in f.evidence])
    return hits[0]


def _rmf(name: str) -> AnalysisContext:
    return AnalysisContext.build(import_file(FIX / "rmf" / f"seed000_{name}.txt").frame)


def _rank_capability(expected_MBps: float = 560.0, used_pct: float | None = None,
                     ) -> Capability:
    # [Yuge]: ~600 MB/s sequential read or write per RAID-5 146 GB rank; lowered for the
    # mixed read/write of the DB2 batch (the catalog's job; set by hand here)
    return Capability(profile="ds8000-rank-raid5-146g", title="DS8000 RAID-5 rank (146 GB)",
                      matched_by="user", parallel=True, expected_MBps=expected_MBps,
                      seq_read_MBps=600.0, seq_write_MBps=600.0, used_pct=used_pct,
                      sources=["[Yuge] (DS8000 white paper figures)"])


def _insight_ssd9(name: str) -> pl.DataFrame:
    df = import_file(FIX / "iostat" / f"seed003-{name}.txt", start=INSIGHT_SSD9_START,
                     interval_s=10.0).frame.df
    # the sysstat 5 banner ("Linux REL (host) <TAB>date") is recognised: the first report
    # is the since-boot summary, flagged (and left out by the analysis)
    assert df.filter(pl.col("ts") == pl.col("ts").min())["since_boot"].all()
    return df


def _measured_span(df: pl.DataFrame) -> tuple[datetime, datetime]:
    """(start, end) of the six measured 10 s reports."""
    m = df.filter(~pl.col("since_boot"))
    return (m["ts"].min() - timedelta(seconds=10), m["ts"].max())


def test_rules_are_discovered() -> None:
    ids = {r.rule_id for r in all_rules()}
    assert {"rmf_response_breakdown", "concentration", "cache_hit_low", "busy_not_bottleneck",
            "oracle_waits", "capability_exceeded"} <= ids


# ------------------------------------------------------------------------------------------
# rule rmf_response_breakdown ([Yuge])
# ------------------------------------------------------------------------------------------
def test_rmf_breakdown_yuge_before_disc_elevated() -> None:
    found = rmf_response_breakdown.check(_rmf("before_1rank"))
    # the eight DB2 data volumes (1.49-1.53 ms); DB2L01/DB2W01 (0.42/0.38 ms), SYSRES,
    # PAGE01 are below 1 ms; LCU summary lines are not judged
    assert sorted(f.device or "" for f in found) == [f"DB2D0{i}" for i in range(1, 9)]
    assert {f.severity for f in found} == {"warning"}
    f = next(f for f in found if f.device == "DB2D01")
    assert (f.window_start, f.window_end) == (RMF_T, RMF_T + timedelta(minutes=2))
    # worst window 10:01-10:02: RESP 1.51 = IOSQ .000 + PEND .147 + DISC .610 + CONN .750
    assert f.title == ("DB2D01: response 1.51 ms with DISC 0.610 ms (40 %) elevated: the "
                       "storage system working without transferring")
    assert _ev(f, "response_ms").value == 1.51
    disc = _ev(f, "disc_ms")
    assert (disc.value, disc.threshold, disc.op) == (0.61, 0.5, ">=")
    assert disc.note == "40.4 % of the response - elevated"  # .610 / 1.51
    conn = _ev(f, "conn_ms")
    assert (conn.value, conn.op, conn.note) == (0.75, "<", "49.7 % of the response")
    assert _ev(f, "pend_ms").value == 0.147
    assert _ev(f, "iops").value == 1283.121
    # I/O-weighted over both minutes: (1294.064*1.49 + 1283.121*1.51) / 2577.185
    assert _ev(f, "response_run_mean_ms").value == pytest.approx(
        (1294.064 * 1.49 + 1283.121 * 1.51) / (1294.064 + 1283.121))
    assert _ev(f, "windows_matched").value == 2.0
    assert "ESS RANK STATISTICS" in f.suggestion
    assert "The largest part is CONN (50 %)" in f.explanation


def test_rmf_breakdown_yuge_after_fix_is_quiet() -> None:
    # after spreading over two ranks every volume answers in 0.59-0.61 ms (< 1.0 ms)
    assert rmf_response_breakdown.check(_rmf("after_2ranks")) == []


def test_rmf_breakdown_severities_and_worst_runs() -> None:
    # VOL1: IOSQ-dominated 6 ms responses (critical), a quiet minute between runs
    # windows:      0    1    2    3    4    5    6    7    8
    resp = [6.0, 0.5, 2.0, 0.5, 3.0, 0.5, 6.5, 0.5, 2.5]
    iosq = [4.5, 0.0, 1.0, 0.0, 1.8, 0.0, 5.0, 0.0, 1.2]
    recs = _series("VOL1", "volume", 9, source="rmf", iops=500.0, await_ms=resp,
                   iosq_ms=iosq, pend_ms=0.2, disc_ms=0.1,
                   conn_ms=[r - q - 0.3 for r, q in zip(resp, iosq, strict=True)])
    # VOL2: 1.5 ms that is mostly transfer (CONN 1.2 ms): explained, info
    recs += _series("VOL2", "volume", 2, source="rmf", iops=300.0, await_ms=1.5,
                    iosq_ms=0.0, pend_ms=0.15, disc_ms=0.15, conn_ms=1.2)
    found = rmf_response_breakdown.check(_ctx(recs))
    vol1 = [f for f in found if f.device == "VOL1"]
    # five runs of one window each (0, 2, 4, 6, 8); the three worst are reported
    assert [f.severity for f in vol1] == ["critical", "critical", "warning"]
    assert [f.window_start for f in vol1] == [T0 + timedelta(minutes=6), T0,
                                              T0 + timedelta(minutes=4)]
    assert _ev(vol1[0], "response_ms").value == 6.5
    assert _ev(vol1[0], "iosq_ms").threshold == 0.2
    assert vol1[0].title.startswith("VOL1: response 6.50 ms with IOSQ 5.000 ms (77 %) "
                                    "elevated: queued in z/OS")
    assert "PAV/HyperPAV" in vol1[0].suggestion
    matched = _ev(vol1[0], "windows_matched")
    assert matched.value == 5.0
    assert "5 of 9 1-min windows in 5 run(s)" in matched.note
    assert "the worst 3 run(s) reported" in matched.note
    vol2 = [f for f in found if f.device == "VOL2"]
    assert len(vol2) == 1
    assert vol2[0].severity == "info"
    # CONN 1.2 of 1.5 ms = 80 %: elevated but transfer time is explained, not a fault
    assert vol2[0].title == ("VOL2: response 1.50 ms is mostly CONN (1.200 ms, 80 %): "
                             "transferring data on the channel")


# ------------------------------------------------------------------------------------------
# rule concentration
# ------------------------------------------------------------------------------------------
def test_concentration_yuge_rank_before_and_after() -> None:
    before = _rmf("before_1rank")
    before.devices["RANK:0000@ABCD1"].capability = _rank_capability()
    found = concentration.check(before)
    assert len(found) == 1
    f = found[0]
    assert (f.rule, f.severity, f.device) == ("concentration", "warning", "RANK:0000@ABCD1")
    assert (f.window_start, f.window_end) == (RMF_T, RMF_T + timedelta(minutes=2))
    # worst minute 10:00-10:01: 203.8M + 238.3M bytes/s = 442.1 MB/s of the ~560 expected
    assert f.title == ("RANK:0000@ABCD1: 10 volumes share this rank at 442.1 MB/s, 79 % of "
                       "the ~560 MB/s it does for this mix")
    used = _ev(f, "used_pct")
    assert used.value == pytest.approx(442.1 / 560 * 100)
    assert (used.threshold, used.op) == (70.0, ">=")
    assert _ev(f, "MBps").value == pytest.approx(442.1)
    assert _ev(f, "iops").value == pytest.approx(3726.6 + 1906.4)
    assert _ev(f, "w_await_ms").value == 141.4  # ESS write RTIME/OP
    assert _ev(f, "r_await_ms").value == 6.3
    # shares of the volumes' I/O rates over both minutes: DB2D01 (1294.064 + 1283.121) /
    # (9986.6 + 9902.668) = 12.96 %; the two small volumes together 0.34 %
    assert _ev(f, "consumers").value == (
        "DB2D01 13.0 %, DB2D02 12.8 %, DB2D03 12.6 %, DB2D04 12.5 %, DB2D05 12.4 %, "
        "DB2D06 12.3 %, DB2D07 12.2 %, DB2D08 12.2 %, 2 more 0.3 %")
    assert _ev(f, "consumer_count").value == 10.0
    assert "DB2D01, DB2D02, DB2D03" in f.suggestion
    assert "1.5 -> 0.6 ms" in f.suggestion

    after = _rmf("after_2ranks")
    for key in ("RANK:0000@ABCD1", "RANK:0001@ABCD1"):
        after.devices[key].capability = _rank_capability()
    # rank 0000 now moves (137830.4 + 157184.0) kB/s = 288.1 MB/s = 51 % of 560: no finding
    assert concentration.check(after) == []


def test_concentration_on_synthesized_rank_without_capability_says_cannot_judge() -> None:
    df = import_file(FIX / "rmf" / "seed000_before_1rank.txt").frame.df
    df, _ = add_aggregates(df.filter(pl.col("device_kind") != "rank"))
    ctx = AnalysisContext.build(df)
    found = concentration.check(ctx)
    assert len(found) == 1
    f = found[0]
    assert (f.severity, f.device) == ("info", "RANK:0000@ABCD1")
    assert f.title == ("RANK:0000@ABCD1: 10 devices share it; cannot judge whether their "
                       "combined load is high")
    assert str(_ev(f, "consumers").value).startswith("DB2D01 13.0 %, DB2D02 12.8 %")
    assert "%util is not a capacity measure here" in f.explanation


def test_concentration_linux_disk_with_lvm_volumes_by_util() -> None:
    # sda (one spindle) carries sda1 (/boot, nearly idle) and sda2, under two LVM volumes
    n = 3
    recs = _series("sda", "disk", n, util_pct=[85.0, 96.0, 50.0], r_iops=200.0,
                   w_iops=50.0, r_kBps=3000.0, w_kBps=1000.0)
    recs += _series("sda1", "partition", n, parent="sda", r_iops=0.5, w_iops=0.0,
                    r_kBps=2.0, w_kBps=0.0)
    recs += _series("sda2", "partition", n, parent="sda", r_iops=199.5, w_iops=50.0,
                    r_kBps=2998.0, w_kBps=1000.0)
    recs += _series("dm-0", "dm", n, r_iops=150.0, w_iops=10.0, r_kBps=2400.0, w_kBps=200.0)
    recs += _series("dm-1", "dm", n, r_iops=49.5, w_iops=40.0, r_kBps=598.0, w_kBps=800.0)
    infos = {
        "sda": DeviceInfo("sda", "disk", rotational=True),
        "sda1": DeviceInfo("sda1", "partition", parent="sda"),
        "sda2": DeviceInfo("sda2", "partition", parent="sda"),
        "dm-0": DeviceInfo("dm-0", "dm", slaves=("sda2",), dm_name="vg0-root"),
        "dm-1": DeviceInfo("dm-1", "dm", slaves=("sda2",), dm_name="vg0-data"),
    }
    ctx = _ctx(recs, infos=infos)
    cons = concentration.consumers_by_device(ctx)
    # sda2 lies under dm-0/dm-1: counted once, as the LVM volumes
    assert sorted(d.key for d in cons["sda"]) == ["dm-0", "dm-1", "sda1"]
    found = concentration.check(ctx)
    assert len(found) == 1
    f = found[0]
    # windows 0-1 (85 %, 96 %) form the run; 96 % >= 95 % makes it critical
    assert (f.severity, f.device) == ("critical", "sda")
    assert (f.window_start, f.window_end) == (T0, T0 + timedelta(minutes=2))
    assert f.title == "sda: 3 devices share this disk, 96 % busy"
    assert _ev(f, "util_pct").value == 96.0
    # MB/s shares: dm-0 2600 kB/s, dm-1 1398, sda1 2 of 4000 kB/s
    assert _ev(f, "consumers").value == "dm-0 65.0 %, dm-1 35.0 %, sda1 0.1 %"


def test_concentration_needs_two_sizeable_consumers() -> None:
    # one partition carries 95 % of the load: a busy disk, not a concentration
    recs = _series("sdb", "disk", 2, util_pct=99.0, r_iops=100.0, w_iops=0.0,
                   r_kBps=1000.0, w_kBps=0.0)
    recs += _series("sdb1", "partition", 2, parent="sdb", r_iops=95.0, w_iops=0.0,
                    r_kBps=950.0, w_kBps=0.0)
    recs += _series("sdb2", "partition", 2, parent="sdb", r_iops=5.0, w_iops=0.0,
                    r_kBps=50.0, w_kBps=0.0)
    ctx = _ctx(recs, infos={"sdb": DeviceInfo("sdb", "disk", rotational=True)})
    assert concentration.check(ctx) == []


# ------------------------------------------------------------------------------------------
# rule cache_hit_low
# ------------------------------------------------------------------------------------------
def test_cache_hit_yuge_near_100_pct_is_quiet() -> None:
    assert cache_hit_low.check(_rmf("before_1rank")) == []


def test_cache_hit_low_read_hit_estimated_from_total() -> None:
    # 800 reads + 200 writes per s, TOTAL H/R 76 %: write hits are 100 % (DFW), so the read
    # hit ratio is 100 - 24 / 0.8 = 70 % -> warning; then TOTAL 55 % -> read 43.75 % ->
    # critical; then a write-heavy minute (30 % reads) and a sequential-read minute
    recs = _series("VOLA", "volume", 4, source="rmf", iops=1000.0,
                   r_iops=[800.0, 800.0, 300.0, 800.0], w_iops=[200.0, 200.0, 700.0, 200.0],
                   seq_read_ps=[100.0, 100.0, 0.0, 720.0],
                   cache_hit_pct=[76.0, 55.0, 60.0, 60.0])
    found = cache_hit_low.check(_ctx(recs))
    assert len(found) == 1
    f = found[0]
    assert (f.severity, f.device) == ("critical", "VOLA")
    assert (f.window_start, f.window_end) == (T0, T0 + timedelta(minutes=2))
    rh = _ev(f, "read_hit_pct")
    assert rh.value == pytest.approx(43.75)
    assert (rh.threshold, rh.op) == (50.0, "<")
    assert _ev(f, "cache_hit_pct").value == 55.0
    assert _ev(f, "read_pct").value == pytest.approx(80.0)
    assert _ev(f, "seq_read_pct").value == pytest.approx(12.5)  # 100 / 800
    assert _ev(f, "windows_matched").value == 2.0
    assert f.title == ("VOLA: read hit ratio 43.8 % for a read-heavy random workload: "
                       "56.2 % of reads go to the disks")


def test_cache_hit_low_without_split_judges_total() -> None:
    recs = _series("VOLB", "volume", 1, source="rmf", iops=400.0, cache_hit_pct=70.0)
    found = cache_hit_low.check(_ctx(recs))
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning"
    ch = _ev(f, "cache_hit_pct")
    assert (ch.value, ch.threshold) == (70.0, 80.0)
    assert _ev(f, "read_pct").note == "not in the data: read-heavy assumed"
    assert "writes count as hits" in f.explanation


# ------------------------------------------------------------------------------------------
# rule busy_not_bottleneck ([Insight-SSD9])
# ------------------------------------------------------------------------------------------
def test_insight_ssd9_select_on_hdd_is_busy_not_bottleneck() -> None:
    df = _insight_ssd9("select-config5-1-1-hdd-cache1024m")
    found = busy_not_bottleneck.check(AnalysisContext.build(df))
    assert len(found) == 1
    f = found[0]
    assert (f.rule, f.severity, f.device) == ("busy_not_bottleneck", "info", "sdb")
    # the six measured 10 s reports (10:00:00-10:01:00: the since-boot summary is stamped at
    # the start, 10:00:00), one 60 s window
    assert (f.window_start, f.window_end) == _measured_span(df)
    assert f.window_end - f.window_start == timedelta(seconds=60)
    assert f.title == ("sdb busy, not the bottleneck: 88.2 % util with CPU 92.7 % user and "
                       "0.0 % iowait")
    assert _ev(f, "util_pct").value == 88.2
    iow = _ev(f, "cpu_iowait_pct")
    assert (iow.value, iow.threshold, iow.op) == (0.0, 5.0, "<=")
    user = _ev(f, "cpu_user_nice_pct")
    # the window's mean of six equal 92.71 values (time-weighted: not bit-exact)
    assert (user.value, user.threshold) == (pytest.approx(92.71, abs=1e-9), 70.0)
    assert _ev(f, "cpu_system_pct").value == pytest.approx(7.29, abs=1e-9)
    # 128 MB cache: 72.2 % busy, still 0 % iowait
    small = busy_not_bottleneck.check(AnalysisContext.build(
        _insight_ssd9("select-config5-1-2-hdd-cache128m")))
    assert [(x.severity, _ev(x, "util_pct").value) for x in small] == [("info", 72.2)]


def test_insight_ssd9_select_on_ssd_is_not_busy() -> None:
    # SSD: 11.86 / 11.35 % util, below the 60 % busy threshold: nothing to explain
    for name in ("select-config5-2-1-ssd-cache1024m", "select-config5-2-2-ssd-cache128m"):
        assert busy_not_bottleneck.check(AnalysisContext.build(_insight_ssd9(name))) == []


def test_insight_ssd9_insert_disk_is_the_bottleneck() -> None:
    ctx = AnalysisContext.build(_insight_ssd9("insert-hdd-invented"))
    found = busy_not_bottleneck.check(ctx)
    assert len(found) == 1
    f = found[0]
    assert (f.severity, f.device) == ("critical", "sdb")
    assert f.title == "sdb is the bottleneck: 98.9 % busy, CPU 71.0 % iowait vs 18.4 % user"
    iow = _ev(f, "cpu_iowait_pct")
    assert (iow.value, iow.threshold, iow.op) == (pytest.approx(71.03, abs=1e-9), 20.0, ">=")
    assert _ev(f, "cpu_user_nice_pct").value == pytest.approx(18.42, abs=1e-9)
    assert _ev(f, "await_ms").value == pytest.approx(40.46, abs=1e-9)
    # the same on a device known to serve requests in parallel: %util is no capacity
    # measure there, so the rule stops at warning
    ctx.devices["sdb"].capability = Capability(profile="ssd-sata", title="SATA SSD",
                                               matched_by="user", parallel=True)
    par = busy_not_bottleneck.check(ctx)
    assert [x.severity for x in par] == ["warning"]
    assert "serves requests in parallel" in par[0].explanation


def test_busy_without_cpu_data_says_cannot_tell() -> None:
    df = _insight_ssd9("select-config5-1-1-hdd-cache1024m").filter(~pl.col("since_boot"))
    df = df.with_columns(
        [pl.lit(None, dtype=pl.Float64).alias(c) for c in
         ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct",
          "cpu_steal_pct", "cpu_idle_pct")])
    found = busy_not_bottleneck.check(AnalysisContext.build(df))
    assert len(found) == 1
    f = found[0]
    assert f.severity == "info"
    assert f.title == "sdb: 88.2 % busy, CPU data absent: cannot tell busy from bottleneck"
    assert _ev(f, "windows_busy").value == 1.0  # the six reports fill one 60 s window


# ------------------------------------------------------------------------------------------
# rule oracle_waits ([Insight-SSD9])
# ------------------------------------------------------------------------------------------
def _waits(path: Path) -> AnalysisContext:
    res = import_file(path)
    return AnalysisContext.build(res.frame, waits=res.waits)


def _avg(ctx: AnalysisContext, event: str) -> float:
    assert ctx.waits is not None
    a = oracle_waits.event_averages(ctx.waits).filter(pl.col("event") == event)
    assert a.height == 1
    return float(a["avg_ms"][0])


@pytest.mark.parametrize(("hdd", "ssd", "hdd_ms", "ssd_ms"), [
    # [Insight-SSD9]'s table: Time Waited (cs) / Waits: 14773/20004 = 0.74 cs (7.39 ms) vs
    # 7387/20013 = 0.37 cs (3.69 ms)
    ("statspack/sp_817_config5-1-1_hdd_cache1024m.txt",
     "statspack/sp_817_config5-2-1_ssd_cache1024m.txt", 14773 * 10 / 20004,
     7387 * 10 / 20013),
    # 128 MB cache: 22371/20078 = 1.11 cs vs 4933/20128 = 0.25 cs; the 10g report rounds
    # Time Waited to whole seconds (224 s, 49 s): 224/20078 = 11.16 ms, 49/20128 = 2.43 ms
    ("statspack/sp_102_config5-1-2_hdd_cache128m.txt",
     "statspack/sp_102_config5-2-2_ssd_cache128m.txt", 224000 / 20078, 49000 / 20128),
    # AWR 11.2 prints 148 s (-> 7.40 ms); AWR 19c prints the average itself, 3.69 ms
    ("awr/awr_112_config5-1-1_hdd_cache1024m.txt",
     "awr/awr_19c_config5-2-1_ssd_cache1024m.txt", 148000 / 20004, 3.69),
])
def test_insight_ssd9_scattered_read_waits_lower_on_ssd(hdd: str, ssd: str, hdd_ms: float,
                                                   ssd_ms: float) -> None:
    h = _avg(_waits(FIX / hdd), "db file scattered read")
    s = _avg(_waits(FIX / ssd), "db file scattered read")
    assert h == pytest.approx(hdd_ms)
    assert s == pytest.approx(ssd_ms)
    assert s < h
    # single-block reads too (538 / 519 / 538 ms on HDD vs 60 / 46 / 60 ms on SSD)
    assert (_avg(_waits(FIX / ssd), "db file sequential read")
            < _avg(_waits(FIX / hdd), "db file sequential read"))


def test_insight_ssd9_hdd_single_block_reads_slowed_by_full_scans() -> None:
    ctx = _waits(FIX / "statspack" / "sp_817_config5-1-1_hdd_cache1024m.txt")
    found = oracle_waits.check(ctx)
    # scattered reads (7.4 ms < 2 x 20 ms) and log file parallel write (6.6 ms, 32 waits
    # < 2 x 10 ms) are fine; only the single-block reads are flagged
    assert len(found) == 1
    f = found[0]
    assert (f.rule, f.severity, f.device) == ("oracle_waits", "critical", None)
    # the report interval: end snapshot 10:01:03, elapsed 61 s
    assert f.window_end == datetime(2007, 8, 21, 10, 1, 3, tzinfo=UTC)
    assert f.window_start == f.window_end - timedelta(seconds=61)
    assert f.title == ("db file sequential read averages 537.9 ms per wait on ORCL/orcl "
                       "(expected ~10 ms for single-block reads): heavy full scans slow "
                       "single-block reads")
    avg = _ev(f, "avg_wait_ms")
    assert avg.value == pytest.approx(224320 / 417)  # 22432 cs / 417 waits
    assert (avg.threshold, avg.op) == (50.0, ">")
    assert _ev(f, "expected_ms").value == 10.0
    assert _ev(f, "waits").value == 417.0
    # full-scan share of the read wait time: 147.73 / (147.73 + 224.32) s = 39.7 %
    share = _ev(f, "multiblock_time_share_pct")
    assert share.value == pytest.approx(100 * 147.73 / (147.73 + 224.32))
    assert (share.threshold, share.op) == (25.0, ">=")
    assert f.suggestion.startswith("Reduce the full scans first")


def test_oracle_waits_expectation_from_device_capability() -> None:
    ctx = _waits(FIX / "statspack" / "sp_817_config5-2-1_ssd_cache1024m.txt")
    # the database's SSD: 0.1 ms typical, 500 MB/s sequential -> single E = 0.1 ms,
    # multi-block E = 0.1 + 1 MB / 500 MB/s = 2.1 ms
    recs = _series("sdc", "disk", 1, host="dbsrv01", r_iops=4950.0, w_iops=0.3)
    dev_ctx = _ctx(recs)
    ctx.devices["sdc"] = dev_ctx.devices["sdc"]
    ctx.devices["sdc"].capability = Capability(
        profile="ssd-pcie", title="PCIe SSD", matched_by="user", parallel=True,
        latency_ms_typical=0.1, seq_read_MBps=500.0)
    exp = oracle_waits.expectation(ctx, "dbsrv01")
    assert (exp.single_ms, exp.multi_ms) == (pytest.approx(0.1), pytest.approx(2.1))
    found = oracle_waits.check(ctx)
    # scattered: 73.87 s / 20013 = 3.69 ms = 1.76 x 2.1 ms: not flagged; sequential:
    # 25.3 s / 424 = 59.7 ms = 597 x 0.1 ms and log file parallel write 0.24 s / 42 = 5.7 ms
    # = 57 x 0.1 ms: critical, worst ratio first
    assert [(f.severity, f.title.split(" averages")[0]) for f in found] == [
        ("critical", "db file sequential read"), ("critical", "log file parallel write")]
    assert _ev(found[0], "expected_ms").value == pytest.approx(0.1)
    assert _ev(found[0], "ratio_to_expected").value == pytest.approx(25300 / 424 / 0.1)
    # [Insight-SSD9] kept SYSTEM, UNDO and the redo logs on the hard disk sdb: with it in the
    # analysis the slowest device sets E (8 ms; multi-block 8 + 1 MB / 150 MB/s = 14.8 ms)
    hdd = _ctx(_series("sdb", "disk", 1, host="dbsrv01", r_iops=10.0, w_iops=5.0))
    ctx.devices["sdb"] = hdd.devices["sdb"]
    ctx.devices["sdb"].capability = _hdd_cap(latency_ms_typical=8.0, seq_read_MBps=150.0)
    exp = oracle_waits.expectation(ctx, "dbsrv01")
    assert (exp.single_ms, exp.multi_ms) == (8.0, pytest.approx(8.0 + 1000 / 150))
    found = oracle_waits.check(ctx)
    # 59.7 ms = 7.5 x 8 ms: still critical; the redo writes (5.7 ms) are within E
    assert [(f.severity, f.title.split(" averages")[0]) for f in found] == [
        ("critical", "db file sequential read")]


def _wait_rows(rows: list[tuple[int, str, float, float]]) -> pl.DataFrame:
    """(interval index, event, waits, time waited s) -> WaitEventFrame rows, 60 s apart."""
    return WaitEventFrame(pl.DataFrame([
        {"source": "awr", "host": "db1", "db_name": "PROD", "instance": "prod1",
         "ts": T0 + timedelta(minutes=i + 1), "interval_s": 60.0, "section":
         "foreground wait events", "event": ev, "waits": w, "time_waited_s": t}
        for i, ev, w, t in rows])).df


def test_oracle_waits_runs_redo_and_min_waits() -> None:
    rows = [
        # single-block reads: 30 ms (warning, > 20) in intervals 0-1, 60 ms (critical) in 3
        (0, "db file sequential read", 1000, 30.0), (1, "db file sequential read", 1000, 30.0),
        (2, "db file sequential read", 1000, 5.0), (3, "db file sequential read", 1000, 60.0),
        # commit writes: 50 waits of 60 ms each (3 s): critical (> 5 x 10 ms)
        (2, "log file parallel write", 50, 3.0),
        # too few waits to judge, however slow
        (1, "direct path read", 5, 10.0),
        # not an I/O event this rule judges
        (0, "enq: TX - row lock contention", 100, 500.0),
    ]
    ctx = AnalysisContext.build(SampleFrame.empty(), waits=_wait_rows(rows))
    found = oracle_waits.check(ctx)
    assert [(f.severity, f.title.split(" averages")[0], f.window_start) for f in found] == [
        ("critical", "db file sequential read", T0 + timedelta(minutes=3)),
        ("critical", "log file parallel write", T0 + timedelta(minutes=2)),
        ("warning", "db file sequential read", T0),
    ]
    assert found[2].window_end == T0 + timedelta(minutes=2)  # the run of intervals 0-1
    assert _ev(found[1], "avg_wait_ms").value == pytest.approx(60.0)
    assert "commit latency" in found[1].explanation
    assert _ev(found[0], "windows_matched").value == 3.0  # 3 of 4 intervals, 2 runs


# ------------------------------------------------------------------------------------------
# rule capability_exceeded
# ------------------------------------------------------------------------------------------
def _hdd_cap(**kw: Any) -> Capability:
    base: dict[str, Any] = {"profile": "hdd-7200", "title": "7,200 rpm SATA HDD",
                            "matched_by": "rotational=1", "parallel": False,
                            "expected_iops": 120.0, "expected_MBps": 150.0,
                            "sources": ["vendor datasheet"]}
    base.update(kw)
    return Capability(**base)


def test_capability_exceeded_runs_and_severity() -> None:
    # IO/s per minute against 120 expected: 150 (125 %), 100 (83 %), 60, 130 (108 %), 60,
    # 97 (81 %), 60, 50, 98 (82 %)
    iops = [150.0, 100.0, 60.0, 130.0, 60.0, 97.0, 60.0, 50.0, 98.0]
    ctx = _ctx(_series("sdb", "disk", 9, iops=iops, r_iops=iops, w_iops=0.0,
                       r_kBps=[4.0 * x for x in iops], w_kBps=0.0))
    dev = ctx.devices["sdb"]
    dev.capability = _hdd_cap(used_pct=125.0)
    dev.attributes = Attributes(read_pct=100.0, seq_pct=0.0, seq_method="estimate",
                                areq_kB_mean=4.0)
    found = capability_exceeded.check(ctx)
    # four runs: [0-1], [3], [5], [8]; the worst three by level then used %
    assert [(f.severity, f.window_start) for f in found] == [
        ("critical", T0), ("critical", T0 + timedelta(minutes=3)),
        ("warning", T0 + timedelta(minutes=8))]
    f = found[0]
    assert f.title == ("sdb: 150 IO/s of ~120 IO/s = 125 % of its capability for 100 % "
                       "reads, 0 % sequential (estimated), 4 kB requests: beyond the limit")
    used = _ev(f, "used_pct")
    assert (used.value, used.threshold, used.op) == (pytest.approx(125.0), 100.0, ">=")
    io = _ev(f, "iops")
    assert (io.value, io.threshold, io.op) == (150.0, 120.0, ">=")
    assert _ev(f, "capability_profile").value == "hdd-7200"
    assert "sources: vendor datasheet" in _ev(f, "capability_profile").note
    assert _ev(f, "windows_matched").value == 5.0
    assert "[Yuge]" not in f.explanation  # random reads: no mixed-sequential caveat


def test_capability_exceeded_yuge_rank_mixed_caveat() -> None:
    ctx = _rmf("before_1rank")
    rank = ctx.devices["RANK:0000@ABCD1"]
    rank.attributes = Attributes(read_pct=57.0, seq_pct=99.2, seq_method="rmf-cache")
    rank.capability = _rank_capability(560.0, used_pct=78.9)
    # 442.1 of 560 MB/s = 79 %: below 80 %, no finding (concentration speaks at 70 %)
    assert capability_exceeded.check(ctx) == []
    rank.capability = _rank_capability(500.0, used_pct=88.4)
    found = capability_exceeded.check(ctx)
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning"
    assert _ev(f, "used_pct").value == pytest.approx(442.1 / 500 * 100)  # 88.4 %
    assert _ev(f, "MBps").value == pytest.approx(442.1)
    assert "near the limit" in f.title
    assert "[Yuge]'s DS8000 rank was at its limit at ~440 MB/s" in f.explanation


def test_capability_exceeded_peak_only_and_no_capability() -> None:
    ctx = _ctx(_series("sdc", "disk", 3, iops=[50.0, 60.0, 55.0], r_iops=[50.0, 60.0, 55.0],
                       w_iops=0.0))
    # no capability: no finding (the engine says no profile matched)
    assert capability_exceeded.check(ctx) == []
    # window means stay at 42-50 % but the catalog's busiest interval is at 95 %
    ctx.devices["sdc"].capability = _hdd_cap(used_pct=95.0, expected_MBps=None)
    found = capability_exceeded.check(ctx)
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning"
    assert (f.window_start, f.window_end) == (T0 + timedelta(minutes=1),
                                              T0 + timedelta(minutes=2))
    assert _ev(f, "used_pct").value == 95.0
    assert _ev(f, "iops_peak").value == 60.0
