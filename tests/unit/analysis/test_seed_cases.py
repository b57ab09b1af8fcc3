"""The seeds' own cases, end to end through the engine: each reaches the seed's conclusion.

Fixtures (tests/fixtures/NOTICE): [Goodus]'s quoted Solaris `iostat -x` reports, [Yuge]'s
RMF reports (before/after spreading the DB2 data over two ranks), [MS-Azure-JP]'s perfmon
captures (Azure Premium SSD), [Insight-SSD9]'s iostat and Statspack reports (HDD vs SSD).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.analysis.types import AnalysisResult, DeviceReport, Finding
from iogauge.importers.registry import import_file

FIX = Path(__file__).resolve().parents[2] / "fixtures"
STRICT = AnalysisOptions(strict=True)


def _run(path: Path, options: AnalysisOptions = STRICT, **kw: object) -> AnalysisResult:
    r = import_file(path, **kw)  # type: ignore[arg-type]
    return analyze(r.frame, r.waits, None, options)


def _dev(res: AnalysisResult, name: str) -> DeviceReport:
    return next(d for d in res.devices if d.device == name)


def _findings(res: AnalysisResult, device: str, rule: str | None = None) -> list[Finding]:
    return [f for f in res.findings if f.device == device and (rule is None or f.rule == rule)]


def _solaris(name: str) -> AnalysisResult:
    # Quoted single reports carry no time stamps: give them a start and the interval the
    # seed ran iostat with (iostat -x 5 / -x 2).
    interval = 2.0 if "x2-" in name else 5.0
    return _run(FIX / "solaris-iostat" / name, start=datetime(2008, 2, 21, 10, tzinfo=UTC),
                interval_s=interval)


# ---- [Goodus] (Solaris) ---------------------------------------------------------------------
def test_goodus_ssd2_137ms_at_100pct_busy_is_the_bottleneck() -> None:
    res = _solaris("seed001-iostat-x5-cp-maxcontig6.txt")
    ssd2 = _dev(res, "ssd2")
    assert ssd2.verdict == "bottleneck"
    crit = [f for f in _findings(res, "ssd2") if f.severity == "critical"]
    assert [f.rule for f in crit] == ["solaris_service_time"]
    ev = {e.metric: e for e in crit[0].evidence}
    svc = next(e for m, e in ev.items() if m.startswith(("svc_t", "await", "response")))
    assert svc.value == pytest.approx(137.8)
    assert svc.threshold == pytest.approx(50.0)
    # the single quoted report is analysed as a measured interval: at 100 %b it cannot be an
    # average since boot (importers/first_report.py)
    assert any(f.window_end == res.end for f in crit)


def test_goodus_sd0_1246ms_with_w33_is_flagged_and_idle_disks_are_clean() -> None:
    res = _solaris("seed001-iostat-x2-mkfile-maxcontig6.txt")
    sd0 = _dev(res, "sd0")
    assert sd0.verdict == "bottleneck"
    f = next(f for f in _findings(res, "sd0", "solaris_service_time"))
    assert f.severity == "critical"
    assert "1,246.4 ms" in f.title
    assert "%w 33" in f.title
    for idle in ("sd1", "sd6", "ssd0", "ssd1"):
        assert _dev(res, idle).verdict == "idle"
        assert all(f.severity == "info" for f in _findings(res, idle))


# ---- [Yuge] (RMF, DS8000 rank) -----------------------------------------------------------
def test_yuge_rank_near_its_limit_before_and_relieved_after_the_fix() -> None:
    before = _run(FIX / "rmf" / "seed000_before_1rank.txt")
    rank = _dev(before, "RANK:0000@ABCD1")
    # ~440 MB/s of mixed sequential I/O against what the rank does for that mix (~600 MB/s
    # for pure sequential reads or writes, less when they mix): at the rank's limit
    assert rank.attributes.MBps_mean == pytest.approx(440.4, abs=0.5)
    assert rank.capability is not None
    assert rank.capability.profile == "ds8000-rank-raid5-146g"
    assert rank.attributes.seq_method == "rmf-cache"  # counted by the controller
    assert rank.capability.expected_MBps is not None
    assert 400.0 < rank.capability.expected_MBps < 600.0
    assert rank.capability.used_pct is not None
    assert 90.0 <= rank.capability.used_pct <= 110.0
    assert rank.verdict in ("near limit", "bottleneck")
    cap = _findings(before, "RANK:0000@ABCD1", "capability_exceeded")
    assert cap and "Reads and writes are mixed" in cap[0].explanation  # the seed's caveat
    conc = _findings(before, "RANK:0000@ABCD1", "concentration")
    assert conc and conc[0].severity in ("warning", "critical")
    assert "10 volumes" in conc[0].title
    # the volumes' 1.5 ms responses are explained by the rank
    vol = _dev(before, "DB2D01")
    assert vol.attributes.await_ms == pytest.approx(1.5, abs=0.05)
    assert _findings(before, "DB2D01", "rmf_response_breakdown")

    after = _run(FIX / "rmf" / "seed000_after_2ranks.txt")
    for name in ("RANK:0000@ABCD1", "RANK:0001@ABCD1"):
        r = _dev(after, name)
        assert r.capability is not None and r.capability.used_pct is not None
        assert r.capability.used_pct < 75.0
        assert r.verdict == "healthy"
        assert not _findings(after, name, "concentration")
    assert _dev(after, "DB2D01").attributes.await_ms == pytest.approx(0.6, abs=0.05)
    assert not _findings(after, "DB2D01", "rmf_response_breakdown")


# ---- [MS-Azure-JP] (Windows perfmon, Azure Premium SSD) ----------------------------------
def test_ms_azure_premium_ssd_fine_at_3ms_and_the_cause_at_tens_of_ms() -> None:
    opts = AnalysisOptions(strict=True, profiles={"AZVM-SQL01:E:": "azure-premium-p30",
                                                  "AZVM-SQL02:F:": "azure-premium-p30"})
    res = _run(FIX / "perfmon" / "relog-utf16-azure-2hosts.csv", opts)
    e = _dev(res, "AZVM-SQL01:E:")
    # 5,000 IO/s at 3.5 ms: the P30's full rate with a normal response time, not a problem
    assert e.attributes.iops_mean == pytest.approx(5000.0, abs=1.0)
    assert e.attributes.await_ms == pytest.approx(3.5, abs=0.05)
    assert e.verdict != "bottleneck"
    assert not [f for f in _findings(res, "AZVM-SQL01:E:", "response_time_target")
                if f.severity != "info"]
    f = _dev(res, "AZVM-SQL02:F:")
    assert f.verdict == "bottleneck"
    rt = [x for x in _findings(res, "AZVM-SQL02:F:", "response_time_target")
          if x.severity == "critical"]
    assert rt and "10 ms design latency" in rt[0].title
    # without a profile, only the general Windows guidance applies: a warning
    plain = _run(FIX / "perfmon" / "relog-utf16-azure-2hosts.csv")
    g = [x for x in _findings(plain, "AZVM-SQL02:F:", "response_time_target")
         if x.severity != "info"]
    assert g and g[0].severity == "warning" and "25 ms" in g[0].title


def test_json_shape_matches_the_documented_schema() -> None:
    res = _solaris("seed001-iostat-x5-cp-maxcontig6.txt")
    d = res.to_dict()
    assert set(d) == {"start", "end", "interval_s", "window_s", "notes", "timeline",
                      "devices", "findings"}
    assert d["timeline"] is None  # on the clock (--start given)
    dev = d["devices"][0]
    assert {"device", "verdict", "attributes", "capability", "capacity"} <= set(dev)
    f = d["findings"][0]
    assert set(f) == {"rule", "severity", "device", "window_start", "window_end", "when",
                      "title", "evidence", "explanation", "suggestion", "source"}
    assert f["when"].endswith(" UTC")
    assert {"metric", "value", "threshold"} <= set(f["evidence"][0])


# ---- [Insight-SSD9] (Oracle on HDD vs SSD: iostat -x with CPU, Statspack waits) ----------------
INSIGHT_SSD9_START = datetime(2007, 8, 21, 10, tzinfo=UTC)


def _insight_ssd9(name: str) -> AnalysisResult:
    r = import_file(FIX / "iostat" / f"seed003-{name}.txt", start=INSIGHT_SSD9_START,
                    interval_s=10.0)
    df = r.frame.df
    # sysstat 5's banner ("Linux 2.6.9-55.ELsmp (dbsrv01) <TAB>08/21/2007", no "_arch_ (N
    # CPU)") is recognised, so the first report is iostat's since-boot summary, flagged.
    first = df.filter(df["ts"] == df["ts"].min())
    assert first["since_boot"].all() and not df.filter(~df["since_boot"]).is_empty()
    assert set(df["host"].unique()) == {"dbsrv01"}
    return analyze(df, None, None, STRICT)


def test_insight_ssd9_select_on_hdd_is_busy_but_not_the_bottleneck() -> None:
    res = _insight_ssd9("select-config5-1-1-hdd-cache1024m")
    sdb = _dev(res, "sdb")
    assert sdb.attributes.util_mean_pct == pytest.approx(88.2, abs=0.05)
    assert sdb.verdict == "busy, not the bottleneck"
    f = _findings(res, "sdb", "busy_not_bottleneck")[0]
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["cpu_iowait_pct"] == pytest.approx(0.0)
    assert ev["cpu_user_nice_pct"] == pytest.approx(92.71)


def test_insight_ssd9_ssd_serves_the_same_select_with_little_busy() -> None:
    res = _insight_ssd9("select-config5-2-1-ssd-cache1024m")
    dev = next(d for d in res.devices if d.attributes.iops_mean and d.attributes.iops_mean > 1)
    assert dev.attributes.util_mean_pct is not None
    assert dev.attributes.util_mean_pct < 20.0
    assert dev.verdict in ("healthy", "busy, not the bottleneck")
    assert not [f for f in res.findings if f.severity == "critical"]


def test_insight_ssd9_insert_with_high_iowait_is_a_disk_bottleneck() -> None:
    res = _insight_ssd9("insert-hdd-invented")
    sdb = _dev(res, "sdb")
    assert sdb.verdict == "bottleneck"
    assert any(f.rule == "busy_not_bottleneck" and f.severity == "critical"
               for f in _findings(res, "sdb"))


def test_insight_ssd9_ssd_waits_are_lower_per_event() -> None:
    hdd = import_file(FIX / "statspack" / "sp_817_config5-1-1_hdd_cache1024m.txt")
    ssd = import_file(FIX / "statspack" / "sp_817_config5-2-1_ssd_cache1024m.txt")
    res_h = analyze(hdd.frame, hdd.waits, None, STRICT)
    res_s = analyze(ssd.frame, ssd.waits, None, STRICT)

    def scattered(waits: object) -> float:
        df = waits.df  # type: ignore[attr-defined]
        row = df.filter(df["event"] == "db file scattered read").row(0, named=True)
        return float(row["time_waited_s"]) / float(row["waits"]) * 100.0  # centiseconds

    # [Insight-SSD9]: 0.74 cs per scattered read on HDD vs 0.37 cs on SSD
    assert scattered(hdd.waits) == pytest.approx(0.74, abs=0.005)
    assert scattered(ssd.waits) == pytest.approx(0.37, abs=0.005)
    worst_h = max((f.rank for f in res_h.findings if f.rule == "oracle_waits"), default=-1)
    worst_s = max((f.rank for f in res_s.findings if f.rule == "oracle_waits"), default=-1)
    assert worst_h >= worst_s


def test_a_partition_of_the_bottleneck_disk_is_named_as_part_of_it() -> None:
    # Solaris iostat -xcnpz: c1t2d0 at 982.7 ms / 100 % busy; its slice c1t2d0s0 carries
    # the load and is judged through its disk (same spindle, same queue)
    res = _run(FIX / "solaris-iostat" / "doc-iostat-xcnpz-Td.txt")
    disk, part = _dev(res, "c1t2d0"), _dev(res, "c1t2d0s0")
    assert disk.verdict == "bottleneck"
    assert part.verdict == "bottleneck"
    assert part.verdict_reason.startswith("a partition of c1t2d0, which is the bottleneck")
    assert _dev(res, "c1t0d0").verdict == "healthy"
