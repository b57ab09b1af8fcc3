"""compare: two datasets per device and metric, with a noise test.

Seed cases: [Goodus] §4.3/4.4 (UFS maxcontig 6 -> 128, the `iostat -x` lines of a 500 MB cp and
mkfile before and after) and [Insight-SSD9] (Oracle on HDD vs SSD: Statspack waits, and the iostat
lines of sdb vs sdc). Distribution tails are checked against closed forms and t-table values
(no SciPy in the project)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from iogauge.analysis.compare import (
    SINGLE_VALUE_NOTE,
    CompareError,
    betainc,
    chi2_2x2_p,
    compare,
    mann_whitney_p,
    normal_two_sided_p,
    t_two_sided_p,
    welch_p,
)
from iogauge.cli.compare_cmd import compare as compare_cmd
from iogauge.importers.base import ImportResult
from iogauge.importers.registry import import_file
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SOL = FIX / "solaris-iostat"
SP = FIX / "statspack"
START = datetime(2008, 2, 21, 10, 0, 0)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _solaris(name: str, interval_s: float) -> ImportResult:
    return import_file(SOL / name, start=START, interval_s=interval_s)


def _frame(device: str, n: int, interval_s: float = 1.0, host: str = "h",
           start: datetime = T0, **cols: Any) -> pl.DataFrame:
    """n intervals of one device; ``cols`` are arrays or scalars of SampleFrame columns."""
    data: dict[str, Any] = {
        "source": "iostat", "host": host, "device": device, "device_kind": "disk",
        "ts": pl.datetime_range(start + timedelta(seconds=interval_s),
                                start + timedelta(seconds=interval_s * n),
                                timedelta(seconds=interval_s), time_unit="us",
                                time_zone="UTC", eager=True),
        "interval_s": interval_s,
    }
    for k, v in cols.items():
        data[k] = np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).copy()
    return pl.DataFrame(data)


def _sf(*parts: pl.DataFrame) -> SampleFrame:
    return SampleFrame(pl.concat(parts, how="diagonal"))


# ---------------------------------------------------------------------------------------------
# distribution tails
# ---------------------------------------------------------------------------------------------
def test_t_tail_closed_forms_and_table_values() -> None:
    # df = 1 is the Cauchy distribution: P(|T| >= t) = 1 - 2/pi * atan(t)
    assert t_two_sided_p(2.0, 1.0) == pytest.approx(1 - 2 / math.pi * math.atan(2.0), rel=1e-12)
    # df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    t = 2 * math.sqrt(2)
    assert t_two_sided_p(t, 2.0) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-12)
    # t tables, df = 10: 2.228 at two-sided 0.05, 3.169 at 0.01
    assert t_two_sided_p(2.228, 10.0) == pytest.approx(0.05, abs=2e-4)
    assert t_two_sided_p(-3.169, 10.0) == pytest.approx(0.01, abs=1e-4)
    # huge df -> the normal distribution: 1.959964 at 0.05
    assert t_two_sided_p(1.959964, 1e8) == pytest.approx(0.05, abs=1e-6)
    assert normal_two_sided_p(1.959964) == pytest.approx(0.05, abs=1e-6)
    assert t_two_sided_p(0.0, 5.0) == pytest.approx(1.0)
    assert t_two_sided_p(math.inf, 5.0) == 0.0


def test_incomplete_beta_identities() -> None:
    assert betainc(1.0, 1.0, 0.3) == pytest.approx(0.3, rel=1e-12)  # uniform CDF
    assert betainc(7.5, 7.5, 0.5) == pytest.approx(0.5, rel=1e-12)  # symmetry
    # I_x(a, 1) = x^a
    assert betainc(3.0, 1.0, 0.7) == pytest.approx(0.7**3, rel=1e-12)
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0


def test_welch_two_samples_of_two_has_df_2() -> None:
    # [1, 3] vs [5, 7]: means 2 and 6, variances 2 and 2 -> se = sqrt(2/2 + 2/2) = sqrt 2,
    # t = 4 / sqrt 2 = 2.828, Welch df = (1 + 1)^2 / (1 + 1) = 2 -> p = 1 - t/sqrt(2 + t^2)
    assert welch_p(2.0, 2.0, 2, 6.0, 2.0, 2) == pytest.approx(0.1055728090, rel=1e-9)
    assert welch_p(5.0, 0.0, 3, 5.0, 0.0, 3) == 1.0  # both constant and equal
    assert welch_p(5.0, 0.0, 3, 6.0, 0.0, 3) == 0.0  # both constant, different


def test_mann_whitney_normal_approximation() -> None:
    # 1..10 vs 11..20: before ranks sum to 55, U = 0, mu = 50, sigma^2 = 10*10*21/12 = 175,
    # z = (50 - 0.5)/sqrt(175) = 3.7418 -> p = erfc(z / sqrt 2) = 1.8267e-4
    assert mann_whitney_p(55.0, 10, 10, 0.0) == pytest.approx(1.826717911e-4, rel=1e-8)
    # every value tied: the sides cannot be told apart
    assert mann_whitney_p(10.5, 10, 10, 20.0**3 - 20.0) == 1.0


def test_chi2_2x2_with_yates() -> None:
    # [[10, 90], [30, 70]]: chi2 = 200 * (|700 - 2700| - 100)^2 / (100*100*40*160) = 11.28125
    assert chi2_2x2_p(10, 100, 30, 100) == pytest.approx(math.erfc(math.sqrt(11.28125 / 2)),
                                                         rel=1e-12)
    assert chi2_2x2_p(10, 100, 30, 100) == pytest.approx(7.829e-4, rel=1e-3)
    assert chi2_2x2_p(0, 100, 0, 100) == 1.0


# ---------------------------------------------------------------------------------------------
# synthetic: the noise test
# ---------------------------------------------------------------------------------------------
def _normal_await(rng: np.random.Generator, n: int, mean_ms: float) -> pl.DataFrame:
    return _frame("sdb", n, r_iops=100.0, w_iops=0.0, r_kBps=800.0, w_kBps=0.0,
                  r_await_ms=rng.normal(mean_ms, 1.0, n), w_await_ms=0.0)


def test_twenty_percent_shift_is_significant() -> None:
    rng = np.random.default_rng(1)
    comp = compare(_sf(_normal_await(rng, 60, 10.0)), _sf(_normal_await(rng, 60, 12.0)))
    c = comp.change("sdb", "r_await_ms")
    assert c.test == "mann-whitney" and c.n_before == 60 and c.n_after == 60
    assert c.p_value is not None and c.p_value < 1e-12
    assert c.significant and c.direction == "worse"
    assert c.change_pct == pytest.approx(20.0, abs=3.0)
    # the load did not change: IOPS identical on both sides
    i = comp.change("sdb", "iops")
    assert (i.before, i.after, i.direction, i.significant) == (100.0, 100.0, "same", False)
    assert i.p_value == 1.0  # every value tied


def test_identical_distributions_are_not_significant() -> None:
    rng = np.random.default_rng(7)
    comp = compare(_sf(_normal_await(rng, 120, 10.0)), _sf(_normal_await(rng, 120, 10.0)))
    assert comp.changes
    assert all(not c.significant and c.direction == "same" for c in comp.changes)
    c = comp.change("sdb", "r_await_ms")
    assert c.p_value is not None and c.p_value > 0.01
    assert abs(c.change_pct or 0.0) < 5.0


def test_small_effect_with_huge_n_is_not_a_finding() -> None:
    # 1 % slower with 200,000 intervals per side: detectable, not a finding. Over 1,000
    # intervals the tests use 1,000 batch means (consecutive intervals are correlated).
    rng = np.random.default_rng(3)
    n = 200_000
    comp = compare(_sf(_normal_await(rng, n, 10.0)), _sf(_normal_await(rng, n, 10.1)))
    c = comp.change("sdb", "r_await_ms")
    assert c.n_before == n and c.n_after == n
    assert c.test == "mann-whitney" and c.p_value is not None and c.p_value < 1e-6
    assert c.change_pct == pytest.approx(1.0, abs=0.1)
    assert not c.significant and c.direction == "same"
    assert "smaller than the 5 % minimum effect" in c.note
    assert "batch means (1000 before, 1000 after)" in c.note


def test_few_intervals_use_welch() -> None:
    # 4 intervals per side: Welch's t on r_await [10, 11, 12, 13] vs [20, 21, 22, 23]:
    # t = 10 / sqrt(1.6667/4 * 2) = 10.954, df = 6
    before = _frame("sdb", 4, r_iops=50.0, r_await_ms=[10, 11, 12, 13])
    after = _frame("sdb", 4, r_iops=50.0, r_await_ms=[20, 21, 22, 23])
    c = compare(_sf(before), _sf(after)).change("sdb", "r_await_ms")
    assert c.test == "welch-t"
    assert c.p_value == pytest.approx(t_two_sided_p(10 / math.sqrt(5 / 3 / 4 * 2), 6.0),
                                      rel=1e-9)
    assert c.p_value < 1e-4 and c.significant and c.direction == "worse"
    assert (c.before, c.after) == (11.5, 21.5)
    assert c.change_pct == pytest.approx(10 / 11.5 * 100)


def test_within_noise_is_said() -> None:
    # +8 % on 3 noisy intervals: beyond the minimum effect, not beyond noise
    before = _frame("sdb", 3, r_iops=50.0, r_await_ms=[5.0, 15.0, 10.0])
    after = _frame("sdb", 3, r_iops=50.0, r_await_ms=[5.8, 15.8, 10.8])
    c = compare(_sf(before), _sf(after)).change("sdb", "r_await_ms")
    assert c.test == "welch-t" and c.p_value is not None and c.p_value > 0.5
    assert not c.significant and c.direction == "same"
    assert "+8.0 % is within the noise" in c.note


def test_peaks_are_compared_not_only_means() -> None:
    # [MS-Azure-JP]: the same kind of average hides peaks of ~25 vs ~50 ms. 400 intervals a
    # side, 10 % of them spikes: before 3 ms / 25 ms, after 1.5 ms / 50 ms.
    def side(base: float, spike: float) -> pl.DataFrame:
        aw = np.where(np.arange(400) % 10 == 0, spike, base)
        return _frame("sdc", 400, r_iops=500.0, r_await_ms=aw)

    comp = compare(_sf(side(3.0, 25.0)), _sf(side(1.5, 50.0)))
    p95 = comp.change("sdc", "await_p95_ms")
    assert (p95.before, p95.after) == (25.0, 50.0)
    # pooled p95 of the 800 values is 26.25: 0 of the before side above it, 40 of the
    # after side -> chi2 (Yates) = 800 * (16000 - 400)^2 / (400*400*40*760) = 40.026
    assert p95.test == "p95-chi2"
    assert p95.p_value == pytest.approx(math.erfc(math.sqrt(40.026315789 / 2)), rel=1e-6)
    assert p95.significant and p95.direction == "worse"
    mean = comp.change("sdc", "await_ms")
    assert mean.before == pytest.approx(0.9 * 3.0 + 0.1 * 25.0)  # 5.2 ms
    assert mean.after == pytest.approx(0.9 * 1.5 + 0.1 * 50.0)  # 6.35 ms


def test_idle_intervals_do_not_dilute_latency() -> None:
    # an interval without reads prints r_await 0.00: it is not a fast read (SampleFrame)
    before = _frame("sdb", 4, r_iops=[100, 0, 100, 0], r_await_ms=[10, 0, 10, 0])
    after = _frame("sdb", 4, r_iops=[100, 100, 100, 100], r_await_ms=[10, 10, 10, 10])
    c = compare(_sf(before), _sf(after)).change("sdb", "r_await_ms")
    assert (c.before, c.after, c.n_before, c.n_after) == (10.0, 10.0, 2, 4)
    assert c.direction == "same"


# ---------------------------------------------------------------------------------------------
# [Goodus]: UFS maxcontig 6 -> 128 (one quoted iostat report per run: single values)
# ---------------------------------------------------------------------------------------------
def test_goodus_cp_maxcontig() -> None:
    b = _solaris("seed001-iostat-x5-cp-maxcontig6.txt", 5.0)
    a = _solaris("seed001-iostat-x5-cp-maxcontig128.txt", 5.0)
    comp = compare(b.frame, a.frame)
    assert [p.device_before for p in comp.pairs] == ["sd0", "ssd2"]
    assert any("idle on both sides" in n and "sd1, sd6, ssd0, ssd1" in n for n in comp.notes)
    # ssd2 at 100 %b cannot be an average since boot: the quoted report is a measured one
    assert not b.frame.df["since_boot"].any()
    assert any("measured interval" in n and "ssd2 is 100 % busy" in n for n in b.notes)
    # sd0 (the source of the copy): 492.4 r/s 10543.8 kr/s -> 95.5 r/s 15047.4 kr/s
    mb = comp.change("sd0", "MBps")
    assert (mb.before, mb.after) == (10543.8 / 1024, 15047.4 / 1024)
    assert mb.ratio == pytest.approx(1.42713, rel=1e-5)
    assert mb.direction == "better" and mb.test == "single value"
    assert not mb.significant and mb.p_value is None and SINGLE_VALUE_NOTE in mb.note
    size = comp.change("sd0", "r_areq_kB")
    assert size.before == pytest.approx(21.41308, rel=1e-6)  # 10543.8 / 492.4
    assert size.after == pytest.approx(157.56440, rel=1e-6)  # 15047.4 / 95.5
    assert size.ratio == pytest.approx(7.358, rel=1e-3) and size.direction == "changed"
    iops = comp.change("sd0", "r_iops")
    assert iops.change_pct == pytest.approx(-80.605, abs=1e-3)
    # fewer, larger requests moving more data: IOPS alone is neither better nor worse
    assert iops.direction == "changed" and "fewer, larger requests" in iops.note
    aw = comp.change("sd0", "await_ms")  # svc_t 1.1 -> 5.0 ms per (7x larger) request
    assert (aw.before, aw.after, aw.direction) == (1.1, 5.0, "worse")
    assert "mean request size changed (21.4 -> 157.6 kB)" in aw.note
    assert comp.change("sd0", "util_pct").direction == "same"  # 48 -> 47 %b: -2.1 %


def test_goodus_mkfile_maxcontig_is_3x_faster() -> None:
    # mkfile 500m took 1m26.18s with maxcontig 6 and 0m27.59s with 128 (x3.12); the iostat
    # lines show the same: 6743.3 -> 25411.4 kw/s on sd0.
    b = _solaris("seed001-iostat-x2-mkfile-maxcontig6.txt", 2.0)
    a = _solaris("seed001-iostat-x2-mkfile-maxcontig128.txt", 2.0)
    comp = compare(b.frame, a.frame)
    mb = comp.change("sd0", "MBps")
    assert mb.ratio == pytest.approx(25411.4 / 6743.3) and mb.ratio == pytest.approx(3.768,
                                                                                    abs=1e-3)
    assert mb.direction == "better" and mb.change_pct == pytest.approx(276.84, abs=0.01)
    assert mb.ratio > 86.18 / 27.59  # the copy rate grew at least as much as elapsed shrank
    w = comp.change("sd0", "w_areq_kB")
    assert w.before == pytest.approx(47.8248, rel=1e-5)  # 6743.3 / 141.0
    assert w.after == pytest.approx(660.0364, rel=1e-5)  # 25411.4 / 38.5
    assert w.ratio == pytest.approx(13.80, abs=0.01)
    wi = comp.change("sd0", "w_iops")
    assert (wi.before, wi.after, wi.direction) == (141.0, 38.5, "changed")
    aw = comp.change("sd0", "await_ms")  # svc_t 1246.4 -> 353.6 ms
    assert aw.change_pct == pytest.approx(-71.630, abs=1e-3) and aw.direction == "better"
    q = comp.change("sd0", "aqu_sz")  # wait + actv: 7.5 + 168.2 -> 0.0 + 13.6
    assert (q.before, q.after, q.direction) == (pytest.approx(175.7), 13.6, "better")
    # %b 100 -> 99: saturated in both runs, the change is in what each request carries
    assert comp.change("sd0", "util_pct").direction == "same"
    assert not any(c.significant for c in comp.changes)  # one report per run: untested


# ---------------------------------------------------------------------------------------------
# [Insight-SSD9]: HDD vs SSD
# ---------------------------------------------------------------------------------------------
def test_insight_ssd9_statspack_8i_scattered_read_waits() -> None:
    hdd = import_file(SP / "sp_817_config5-1-1_hdd_cache1024m.txt")
    ssd = import_file(SP / "sp_817_config5-2-1_ssd_cache1024m.txt")
    comp = compare(hdd.frame, ssd.frame, hdd.waits, ssd.waits)
    w = comp.wait("db file scattered read")
    # [Insight-SSD9]: Time Waited 14773 cs / 20004 waits = 0.74 cs (HDD); 7387 / 20013 = 0.37 cs
    assert (w.waits_before, w.waits_after) == (20004.0, 20013.0)
    assert (w.time_waited_s_before, w.time_waited_s_after) == (147.73, 73.87)
    assert w.before == pytest.approx(147.73 * 1000 / 20004)  # 7.385 ms
    assert w.after == pytest.approx(73.87 * 1000 / 20013)  # 3.691 ms
    assert (round(w.before / 10, 2), round(w.after / 10, 2)) == (0.74, 0.37)  # in cs
    assert w.direction == "better" and w.test == "single value" and not w.significant
    assert w.change_pct == pytest.approx(-50.02, abs=0.01)
    seq = comp.wait("db file sequential read")  # 22432 cs / 417 -> 2530 cs / 424
    assert (seq.before, seq.after) == (pytest.approx(537.938, abs=1e-3),
                                       pytest.approx(59.670, abs=1e-3))
    assert seq.direction == "better"
    # idle events are not compared; the most time waited comes first
    events = [x.event for x in comp.wait_changes]
    assert "SQL*Net message from client" not in events
    assert events[:2] == ["db file sequential read", "db file scattered read"]
    # 1 cs vs 2 cs over ~70 waits: within the report's rounding, not a change
    cf = comp.wait("control file sequential read")
    assert cf.direction == "same" and "rounding" in cf.note
    # the user datafile moved from /u02 (HDD) to /ssd: paired automatically
    auto = [p for p in comp.pairs if p.how == "auto"]
    assert [(p.device_before, p.device_after) for p in auto] == [
        ("/u02/oradata/ORCL/user_data01.dbf", "/ssd/oradata/ORCL/user_data01.dbf")]
    assert any(n.startswith("paired /u02/oradata/ORCL/user_data01.dbf") for n in comp.notes)
    rd = comp.change("/u02/oradata/ORCL/user_data01.dbf", "r_await_ms")
    assert (rd.before, rd.after, rd.direction) == (18.2, 4.9, "better")
    assert comp.change("USER_DATA", "r_iops").direction == "same"  # 334.77 -> 335.03 /s


def test_insight_ssd9_statspack_10g_waits_within_report_rounding() -> None:
    hdd = import_file(SP / "sp_102_config5-1-2_hdd_cache128m.txt")
    ssd = import_file(SP / "sp_102_config5-2-2_ssd_cache128m.txt")
    comp = compare(hdd.frame, ssd.frame, hdd.waits, ssd.waits)
    w = comp.wait("db file scattered read")
    # 10g prints Time (s) to the second: 224 s / 20078 and 49 s / 20128 (the seed's
    # 22371 cs and 4933 cs rounded); the printed Avg wait (ms) 11 and 2 are coarser.
    assert w.before == pytest.approx(224 * 1000 / 20078)  # 11.157 ms
    assert w.after == pytest.approx(49 * 1000 / 20128)  # 2.434 ms
    # the seed's 1.11 and 0.25 cs lie inside what the report's rounding allows
    assert 223.5 / 20078 * 100 <= 1.1142 <= 224.5 / 20078 * 100
    assert 48.5 / 20128 * 100 <= 0.2451 <= 49.5 / 20128 * 100
    assert w.direction == "better" and w.change_pct == pytest.approx(-78.18, abs=0.01)
    # for 23 waits, 0 s says nothing: the printed 15 and 17 ms averages are used
    cf = comp.wait("control file parallel write")
    assert (cf.before, cf.after) == (15.0, 17.0)


def test_insight_ssd9_awr_truncated_event_names_merge() -> None:
    hdd = import_file(FIX / "awr" / "awr_112_config5-1-1_hdd_cache1024m.txt")
    ssd = import_file(FIX / "awr" / "awr_19c_config5-2-1_ssd_cache1024m.txt")
    comp = compare(hdd.frame, ssd.frame, hdd.waits, ssd.waits)
    events = [w.event for w in comp.wait_changes]
    # AWR 11.2 cuts names to 28 characters in its wait lists ("control file sequential
    # re"); the full name from the other report stands for both
    assert "control file sequential read" in events
    assert not any(e == "control file sequential re" for e in events)
    w = comp.wait("db file scattered read")
    # 11.2 foreground list: 148 s / 20004 waits; 19c: "3.69ms" printed (74 s is coarser)
    assert w.before == pytest.approx(148 * 1000 / 20004)
    assert w.after == pytest.approx(3.69)
    assert w.direction == "better"
    assert [(p.device_before, p.how) for p in comp.pairs] == [
        ("/u02/oradata/ORCL/user_data01.dbf", "auto")]
    assert any("only before" in n and "USER_DATA" in n for n in comp.notes)


def _insight_ssd9_iostat(device: str, rkbps: float, wkbps: float, avgrq_sectors: float,
                    aqu: float, await_ms: float, svctm: float, util: float) -> pl.DataFrame:
    """One `iostat -x` line of [Insight-SSD9] (sysstat 7-era: avgrq-sz in 512-byte sectors)."""
    kbps = rkbps + wkbps
    return _frame(device, 1, interval_s=60.0, kBps=kbps, r_kBps=rkbps, w_kBps=wkbps,
                  areq_kB=avgrq_sectors / 2, iops=kbps / (avgrq_sectors / 2), aqu_sz=aqu,
                  await_ms=await_ms, svctm_ms=svctm, util_pct=util)


def test_insight_ssd9_iostat_hdd_sdb_vs_ssd_sdc() -> None:
    # Config5-1-1 "sdb 40731.70 2.10 243.62 1.87 5.61 2.64 88.20" vs Config5-2-1
    # "sdc 39575.15 2.40 15.99 1.10 0.22 0.02 11.86", plus an idle system disk on both
    idle = _frame("sda", 1, interval_s=60.0, iops=0.0, kBps=0.0, util_pct=0.0)
    hdd = _sf(_insight_ssd9_iostat("sdb", 40731.70, 2.10, 243.62, 1.87, 5.61, 2.64, 88.20), idle)
    ssd = _sf(_insight_ssd9_iostat("sdc", 39575.15, 2.40, 15.99, 1.10, 0.22, 0.02, 11.86), idle)
    comp = compare(hdd, ssd)
    assert [(p.device_before, p.device_after, p.how) for p in comp.pairs] == [
        ("sdb", "sdc", "auto")]
    assert any("paired sdb (before) with sdc (after)" in n for n in comp.notes)
    aw = comp.change("sdb", "await_ms")
    assert (aw.before, aw.after, aw.direction) == (5.61, 0.22, "better")
    assert aw.change_pct == pytest.approx(-96.078, abs=1e-3)
    ut = comp.change("sdb", "util_pct")
    assert (ut.before, ut.after, ut.direction) == (pytest.approx(88.20), pytest.approx(11.86),
                                                   "better")
    sz = comp.change("sdb", "areq_kB")  # 121.81 kB -> 7.995 kB per request
    assert (sz.before, sz.after, sz.direction) == (121.81, 7.995, "changed")
    # same data rate (-2.8 %): within the minimum effect
    assert comp.change("sdb", "MBps").direction == "same"
    # the explicit map gives the same pairing, named as such
    mapped = compare(hdd, ssd, device_map={"sdb": "sdc"})
    assert [(p.device_before, p.how) for p in mapped.pairs] == [("sdb", "map")]
    assert mapped.change("sdb", "await_ms").after == 0.22


# ---------------------------------------------------------------------------------------------
# pairing, since-boot rows, errors
# ---------------------------------------------------------------------------------------------
def test_bad_device_map_names_the_missing_device() -> None:
    f = _sf(_frame("sdb", 2, iops=10.0))
    with pytest.raises(CompareError, match=r"no device 'sdz' before \(devices: sdb\)"):
        compare(f, f, device_map={"sdz": "sdb"})
    with pytest.raises(CompareError, match="no device 'sdq' after"):
        compare(f, f, device_map={"sdb": "sdq"})


def test_two_busy_unmatched_devices_are_not_guessed() -> None:
    before = _sf(_frame("sdb", 2, iops=10.0), _frame("sdc", 2, iops=10.0))
    after = _sf(_frame("sdd", 2, iops=10.0), _frame("sde", 2, iops=10.0))
    comp = compare(before, after)
    assert comp.pairs == [] and comp.changes == []
    assert any("pair them with --map" in n for n in comp.notes)


def test_since_boot_rows_dropped_where_intervals_exist() -> None:
    boot = _frame("sdb", 1, iops=1000.0, r_iops=1000.0).with_columns(since_boot=True)
    rest = _frame("sdb", 3, start=T0 + timedelta(seconds=1), iops=10.0,
                  r_iops=10.0).with_columns(since_boot=False)
    comp = compare(_sf(boot, rest), _sf(rest))
    c = comp.change("sdb", "iops")
    assert (c.before, c.n_before) == (10.0, 3)
    assert not any("since-boot" in n for n in comp.notes)


def test_nothing_to_compare() -> None:
    with pytest.raises(CompareError, match="nothing to compare"):
        compare(SampleFrame.empty(), SampleFrame.empty())


def test_to_dict_is_json() -> None:
    rng = np.random.default_rng(1)
    comp = compare(_sf(_normal_await(rng, 20, 10.0)), _sf(_normal_await(rng, 20, 12.0)))
    doc = json.loads(json.dumps(comp.to_dict()))
    assert set(doc) == {"alpha", "min_effect_pct", "pairs", "changes", "wait_changes", "notes"}
    row = next(c for c in doc["changes"] if c["metric"] == "r_await_ms")
    assert set(row) == {"device_before", "device_after", "metric", "unit", "before", "after",
                        "change_pct", "ratio", "direction", "significant", "test", "p_value",
                        "n_before", "n_after", "note"}
    assert row["significant"] is True and row["test"] == "mann-whitney"


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command("compare")(compare_cmd)

    @app.callback()
    def _root() -> None:
        """test wrapper (the lead registers the command in cli/main.py)"""

    return app


def test_cli_json_statspack() -> None:
    res = CliRunner().invoke(_app(), ["compare", str(SP / "sp_817_config5-1-1_hdd_cache1024m.txt"),
                                      str(SP / "sp_817_config5-2-1_ssd_cache1024m.txt"),
                                      "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    w = next(x for x in doc["wait_changes"] if x["event"] == "db file scattered read")
    assert round(w["before"], 3) == 7.385 and round(w["after"], 3) == 3.691
    assert w["direction"] == "better"


def test_cli_table_goodus_and_errors() -> None:
    args = ["compare", str(SOL / "seed001-iostat-x2-mkfile-maxcontig6.txt"),
            str(SOL / "seed001-iostat-x2-mkfile-maxcontig128.txt"),
            "--start", "2008-02-21T10:00", "--interval", "2"]
    res = CliRunner().invoke(_app(), args)
    assert res.exit_code == 0, res.output
    assert "+276.8 % (x3.77)" in res.stdout  # MB/s of sd0
    assert "better (untested)" in res.stdout
    assert "fewer, larger requests" in res.stdout
    bad = CliRunner().invoke(_app(), [*args, "--map", "sd0"])
    assert bad.exit_code == 2 and "use BEFORE=AFTER" in bad.output
    missing = CliRunner().invoke(_app(), ["compare", "nope.txt", args[2]])
    assert missing.exit_code == 2 and "no such file" in missing.output
    # without --start the untimestamped Solaris reports are compared all the same (each file
    # is one report on the relative time line: no clock time is needed to compare them)
    nostart = CliRunner().invoke(_app(), args[:3])
    assert nostart.exit_code == 0, nostart.output
    assert "+276.8 % (x3.77)" in nostart.stdout


def test_batches_have_one_duration_on_both_sides() -> None:
    # 3,000 one-second intervals before, 500 after: batches of ceil(3000 s / 1000) = 3 s on
    # both sides -> 1,000 and 167 batch means (not 1,000 means against 500 raw intervals)
    rng = np.random.default_rng(11)
    comp = compare(_sf(_normal_await(rng, 3000, 10.0)), _sf(_normal_await(rng, 500, 10.0)))
    c = comp.change("sdb", "r_await_ms")
    assert "batch means (1000 before, 167 after)" in c.note
    assert (c.n_before, c.n_after) == (3000, 500)
    assert not c.significant and c.direction == "same"
    shifted = compare(_sf(_normal_await(rng, 3000, 10.0)), _sf(_normal_await(rng, 500, 11.0)))
    s = shifted.change("sdb", "r_await_ms")
    assert s.significant and s.direction == "worse" and s.test == "mann-whitney"


def test_waits_over_several_reports_are_tested() -> None:
    from iogauge.model.waitevents import WaitEventFrame

    def reports(avg_cs: list[float]) -> WaitEventFrame:
        # one Statspack report per hour, 1,000 scattered reads each; every event also in the
        # top-events table (the same figures), which must not count twice
        rows = []
        for i, cs in enumerate(avg_cs):
            for section in ("top timed events", "wait events"):
                rows.append({"source": "statspack", "host": "db", "instance": "orcl",
                             "ts": T0 + timedelta(hours=i + 1), "interval_s": 3600.0,
                             "section": section, "event": "db file scattered read",
                             "waits": 1000.0, "time_waited_s": cs * 1000 / 100})
        return WaitEventFrame(pl.DataFrame(rows))

    empty = SampleFrame.empty()
    comp = compare(empty, empty, reports([0.74, 0.70, 0.78, 0.72, 0.76]),
                   reports([0.37, 0.35, 0.39, 0.36, 0.38]))
    w = comp.wait("db file scattered read")
    assert (w.n_before, w.n_after, w.waits_before) == (5, 5, 5000.0)
    assert w.before == pytest.approx(7.4) and w.after == pytest.approx(3.7)
    # Welch: means 7.4 and 3.7 ms, variances 0.1 and 0.025 ms^2 -> t = 3.7/sqrt(0.025)
    # = 23.4, df = 0.025^2 / (0.02^2/4 + 0.005^2/4) = 5.88
    assert w.test == "welch-t"
    assert w.p_value == pytest.approx(t_two_sided_p(3.7 / math.sqrt(0.025),
                                                    0.025**2 / (0.02**2 / 4 + 0.005**2 / 4)),
                                      rel=1e-6)
    assert w.significant and w.direction == "better"
    assert comp.changes == [] and comp.pairs == []
