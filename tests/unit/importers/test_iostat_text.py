"""iostat text importer: every sysstat generation, every time style, damage, speed paths.

Golden values are literals read from the fixture files (tests/fixtures/iostat, see NOTICE):
the real samples of ../shared/samples, captures of this machine's sysstat 12.6.1, and a few
fixtures derived from them (locales, sysstat 10 -h, DST fold, overflow) whose construction
NOTICE describes.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import re
from collections.abc import Iterator
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_iostat_native import decode_native

from iogauge.errors import InputFormatError
from iogauge.importers import iostat, registry
from iogauge.importers.base import Source
from iogauge.importers.first_report import FirstReport
from iogauge.importers.iostat import fixed as iostat_fixed
from iogauge.importers.iostat import native
from iogauge.importers.iostat import steady as iostat_steady
from iogauge.model import timeline
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "iostat"
SAMPLES = Path(__file__).resolve().parents[2] / "fixtures"
MB = "iostat-tool-rhel6-iostat-x-t-mb.txt"
SECTORS = "iostat-tool-rhel6-iostat-x-t-sectors.txt"
V117 = "iostat-tool-sysstat11.7.3-iostat-x-t.txt"
CENTOS10 = "jc-centos-7.7-sysstat10-iostat-x.txt"
UBUNTU116 = "jc-ubuntu-18.04-sysstat11.6-iostat-x.txt"
UBUNTU12 = "jc-ubuntu-20.10-sysstat12-iostat-x.txt"


@pytest.fixture(autouse=True, scope="module", params=["native", "numpy"])
def kernels(request: pytest.FixtureRequest) -> Any:
    """Every test of this module runs twice: with the C kernels (iostat/kernels.c, when
    built) and with the numpy routines they replace, which must give the same results."""
    if request.param == "native" and native.kernels() is None:
        pytest.skip("the native iostat kernels are not built (make install builds them when "
                    "a C compiler is present; test_iostat_native.py checks that they are)")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "numpy":
            mp.setattr(native, "kernels", lambda: None)
        yield request.param


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]


def load(name: str | bytes, **kw: Any) -> tuple[SampleFrame, Source]:
    data = name if isinstance(name, bytes) else (FIX / name).read_bytes()
    src = Source(path="t.txt" if isinstance(name, bytes) else name, **kw)
    return iostat.parse(data, src), src


def one(frame: SampleFrame, device: str, nth: int = 0) -> dict[str, Any]:
    """The nth row (in time order) of ``device``."""
    rows = frame.df.filter(pl.col("device") == device).sort("ts")
    return rows.row(nth, named=True)


# ---- sniffing ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(FIX.glob("*.txt")), ids=lambda p: p.name)
def test_sniff_accepts_every_iostat_fixture(path: Path) -> None:
    head = path.read_bytes()[:65536]
    assert iostat.sniff(head.decode("utf-8"))
    assert registry.detect(head, str(path)) == "iostat"


@pytest.mark.parametrize("path", [
    *sorted((SAMPLES / "iostat-json").glob("*.json")),
    *sorted((SAMPLES / "sar").glob("*")),
    *sorted((SAMPLES / "diskstats").glob("*")),
    *sorted((SAMPLES / "fio").glob("*.json")),
], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_refuses_other_formats(path: Path) -> None:
    # sar prints the same 'Linux … (host) date _arch_ (n CPU)' banner: not enough.
    assert not iostat.sniff(path.read_bytes()[:65536].decode("utf-8", "replace"))


def test_sniff_needs_an_iostat_block_not_just_the_banner() -> None:
    banner = "Linux 5.8.0-53-generic (ubuntu) \t12/02/2021 \t_x86_64_\t(2 CPU)\n\n"
    assert not iostat.sniff(banner + "12:00:01 AM  DEV  tps  rkB/s\n")
    assert iostat.sniff(banner + "avg-cpu:  %user   %nice %system\n")
    assert iostat.sniff("     r/s     rkB/s   rrqm/s Device\n")
    # Solaris iostat -xn: lower-case 'device' last, kr/s columns
    assert not iostat.sniff("    r/s    w/s   kr/s   kw/s wait actv wsvc_t asvc_t  %w  "
                                 "%b device\n")


# ---- sysstat 9.x (RHEL 6): -x -t -m, 12-hour clock ----------------------------------------


def test_rhel6_megabytes_golden() -> None:
    frame, src = load(MB)
    df = frame.df
    assert len(frame) == 3498  # 318 reports x 11 devices, every one present
    assert df["device"].n_unique() == 11
    assert df["ts"].n_unique() == 318
    assert set(df["source"].unique()) == {"iostat"}
    assert set(df["host"].unique()) == {"myhostname"}
    assert set(df["device_kind"].unique()) == {"disk"}
    assert df["parent"].null_count() == len(frame)
    # the first report is iostat's since-boot summary: kept, flagged
    assert df.filter(pl.col("since_boot"))["ts"].unique().to_list() == [utc(2018, 6, 13, 14, 10,
                                                                             50)]
    assert int(df["since_boot"].sum()) == 11
    assert df["interval_s"].unique().to_list() == [1.0]
    sdd = one(frame, "sdd")
    assert sdd["ts"] == utc(2018, 6, 13, 14, 10, 50)  # 02:10:50 PM, read as UTC (noted)
    assert sdd["r_merged_ps"] == 0.07 and sdd["w_merged_ps"] == 45.88
    assert sdd["r_iops"] == 1.57 and sdd["w_iops"] == 0.59
    assert sdd["r_kBps"] == 0.08 * 1024 and sdd["w_kBps"] == 0.18 * 1024  # rMB/s x 1024
    assert sdd["areq_kB"] == 246.55 / 2  # avgrq-sz is in 512-byte sectors
    assert sdd["aqu_sz"] == 0.26
    assert sdd["await_ms"] == 121.04
    assert sdd["r_await_ms"] == 1.28 and sdd["w_await_ms"] == 436.94
    assert sdd["svctm_ms"] == 2.07 and sdd["util_pct"] == 0.45
    assert (sdd["cpu_user_pct"], sdd["cpu_nice_pct"], sdd["cpu_system_pct"],
            sdd["cpu_iowait_pct"], sdd["cpu_steal_pct"], sdd["cpu_idle_pct"]) == (
        0.47, 0.0, 0.24, 0.18, 0.0, 99.11)
    assert sdd["r_rqm_pct"] is None and sdd["d_iops"] is None  # not in this layout: null
    # 02:13:00 PM (file line 2218) and the last report, 02:16:07 PM
    sdb = df.filter((pl.col("device") == "sdb")
                    & (pl.col("ts") == utc(2018, 6, 13, 14, 13, 0))).row(0, named=True)
    assert (sdb["w_merged_ps"], sdb["w_iops"], sdb["w_kBps"], sdb["areq_kB"]) == (
        1005.0, 10.0, 3.75 * 1024, 768.80 / 2)
    last = one(frame, "sdf", -1)
    assert last["ts"] == utc(2018, 6, 13, 14, 16, 7)
    assert (last["w_merged_ps"], last["w_kBps"], last["areq_kB"], last["svctm_ms"],
            last["util_pct"], last["cpu_user_pct"], last["cpu_idle_pct"]) == (
        634.0, 2.51 * 1024, 321.0, 18.12, 14.5, 1.53, 97.78)
    assert any("UTC" in n for n in src.notes)


def test_rhel6_in_its_own_zone() -> None:
    frame, src = load(MB, tz=ZoneInfo("Asia/Tokyo"))
    assert one(frame, "sdd")["ts"] == utc(2018, 6, 13, 5, 10, 50)
    assert not any("read as UTC" in n for n in src.notes)


def test_rhel6_sectors_golden() -> None:
    frame, _ = load(SECTORS)
    assert len(frame) == 55
    sdb = one(frame, "sdb")
    # the banner says 06/13/2018, the first stamp 06/14/2018 06:08:37 PM: the stamp wins
    assert sdb["ts"] == utc(2018, 6, 14, 18, 8, 37)
    assert sdb["r_kBps"] == 1149.19 / 2 and sdb["w_kBps"] == 601.76 / 2  # rsec/s / 2
    assert sdb["areq_kB"] == 268.22 / 2
    assert sdb["aqu_sz"] == 0.0 and sdb["await_ms"] == 0.06
    assert one(frame, "sda", -1)["w_kBps"] == 8.0 / 2


# ---- sysstat 10 / 11 / 12 ------------------------------------------------------------------


def test_sysstat_1173_transitional_with_megabytes() -> None:
    frame, _ = load(V117)
    assert len(frame) == 82 and frame.devices() == ["sda"]
    df = frame.df.sort("ts")
    assert df["ts"][0] == utc(2021, 9, 26, 3, 35, 19)  # 09/26/21: two-digit year
    assert df["ts"][-1] == utc(2021, 9, 26, 3, 36, 40)
    assert df["since_boot"].to_list() == [True] + [False] * 81
    r = df.filter(pl.col("ts") == utc(2021, 9, 26, 3, 35, 23)).row(0, named=True)
    assert (r["w_iops"], r["w_kBps"], r["w_areq_kB"], r["w_await_ms"], r["svctm_ms"],
            r["util_pct"]) == (577.0, 72.0 * 1024, 127.79, 0.19, 0.15, 8.8)
    assert (r["cpu_system_pct"], r["cpu_iowait_pct"], r["cpu_idle_pct"]) == (9.18, 1.02, 89.8)
    assert r["await_ms"] is None  # 11.6-11.7 print no total await


def test_sysstat10_since_boot_only() -> None:
    frame, src = load(CENTOS10)
    df = frame.df
    assert frame.devices() == ["dm-0", "dm-1", "sda"]
    assert df["since_boot"].all()
    # no -t: stamped at midnight of the banner date, nominal 1 s, both said in notes
    assert df["ts"].unique().to_list() == [utc(2021, 11, 30)]
    assert df["interval_s"].unique().to_list() == [1.0]
    assert any("since-boot summary" in n for n in src.notes)
    assert any("no time stamps" in n for n in src.notes)
    sda = one(frame, "sda")
    assert (sda["r_merged_ps"], sda["w_merged_ps"], sda["r_iops"], sda["w_iops"],
            sda["r_kBps"], sda["w_kBps"], sda["areq_kB"], sda["aqu_sz"], sda["await_ms"],
            sda["r_await_ms"], sda["w_await_ms"], sda["svctm_ms"], sda["util_pct"]) == (
        0.0, 0.02, 0.13, 0.11, 5.27, 1.10, 52.53 / 2, 0.0, 0.88, 0.53, 1.29, 0.52, 0.01)
    assert one(frame, "dm-0")["device_kind"] == "dm"
    assert one(frame, "dm-1")["areq_kB"] == 50.09 / 2


def test_sysstat5_banner_without_arch_and_cpu_count() -> None:
    # sysstat 5.x-8.0 banner: "Linux REL (host) <TAB>date", no "_arch_ (N CPU)" (seed 003)
    frame, src = load("seed003-select-config5-1-1-hdd-cache1024m.txt", interval_s=10.0,
                      start=dt.datetime(2007, 8, 21, 10, tzinfo=dt.UTC))
    df = frame.df.sort("ts")
    assert df["host"].unique().to_list() == ["dbsrv01"]
    assert df["since_boot"].to_list() == [True] + [False] * 6
    assert df["ts"].to_list() == [utc(2007, 8, 21, 10) + dt.timedelta(seconds=10 * k)
                                  for k in range(7)]
    boot, sel = df.row(0, named=True), df.row(1, named=True)
    assert (boot["r_iops"], boot["w_iops"], boot["util_pct"]) == (3.12, 0.85, 1.2)
    assert (sel["r_iops"], sel["r_kBps"], sel["areq_kB"], sel["aqu_sz"], sel["await_ms"],
            sel["svctm_ms"], sel["util_pct"]) == (334.39, 40731.70, 243.62 / 2, 1.87, 5.61,
                                                  2.64, 88.2)
    assert (sel["cpu_user_pct"], sel["cpu_system_pct"], sel["cpu_iowait_pct"]) == (
        92.71, 7.29, 0.0)
    assert not any("fragment" in n for n in src.notes)
    # without --start the banner's date gives midnight, as for newer banners
    frame2, src2 = load("seed003-select-config5-1-1-hdd-cache1024m.txt", interval_s=10.0)
    assert frame2.df["ts"].min() == utc(2007, 8, 21)
    assert any("08/21/2007" in n for n in src2.notes)


def test_sysstat116_golden() -> None:
    frame, src = load(UBUNTU116)
    assert len(frame) == 20 and frame.df["since_boot"].all()
    sda = one(frame, "sda")
    assert (sda["r_iops"], sda["w_iops"], sda["r_kBps"], sda["w_kBps"], sda["r_merged_ps"],
            sda["w_merged_ps"], sda["r_rqm_pct"], sda["w_rqm_pct"], sda["r_await_ms"],
            sda["w_await_ms"], sda["aqu_sz"], sda["r_areq_kB"], sda["w_areq_kB"],
            sda["svctm_ms"], sda["util_pct"]) == (
        127.92, 67.15, 8595.16, 12457.33, 15.79, 142.95, 10.99, 68.04, 2.57, 6.93, 0.79,
        67.19, 185.52, 0.78, 15.14)
    assert (sda["cpu_user_pct"], sda["cpu_nice_pct"], sda["cpu_system_pct"],
            sda["cpu_iowait_pct"], sda["cpu_idle_pct"]) == (39.64, 12.36, 28.21, 2.28, 17.51)
    assert one(frame, "loop15")["device_kind"] == "loop"
    assert one(frame, "scd0")["r_kBps"] == 317.88
    # 12/01/2021 could be 1 December or 12 January: the guess is said
    assert any("ambiguous" in n for n in src.notes)


def test_sysstat12_discard_and_flush_golden() -> None:
    frame, _ = load(UBUNTU12)
    assert len(frame) == 14
    sda = one(frame, "sda")
    assert (sda["r_iops"], sda["r_kBps"], sda["r_merged_ps"], sda["r_rqm_pct"],
            sda["r_await_ms"], sda["r_areq_kB"], sda["w_iops"], sda["w_kBps"],
            sda["w_merged_ps"], sda["w_rqm_pct"], sda["w_await_ms"], sda["w_areq_kB"]) == (
        2.67, 100.76, 0.66, 19.76, 0.36, 37.75, 2.81, 129.44, 4.42, 61.15, 0.42, 46.11)
    assert (sda["d_iops"], sda["d_kBps"], sda["d_merged_ps"], sda["d_rqm_pct"],
            sda["d_await_ms"], sda["d_areq_kB"], sda["f_iops"], sda["f_await_ms"],
            sda["aqu_sz"], sda["util_pct"]) == (0.0,) * 9 + (0.41,)
    assert sda["svctm_ms"] is None  # gone since sysstat 12.1.2: null, not 0
    assert one(frame, "dm-0")["device_kind"] == "dm"


# ---- this machine's sysstat 12.6.1: human, pretty, short, basic, ISO, -z --------------------


def test_human_pretty_four_tables_joined() -> None:
    # iostat -x -h: device last, k/M suffixes, %, four tables per report
    frame, _ = load("live-sysstat12.6-x-h.txt", interval_s=1.0)
    assert len(frame) == 12 and frame.devices() == ["loop0", "loop1", "loop2", "vda"]
    first = one(frame, "loop0")
    assert first["r_kBps"] == 22.1 * 1024  # "22.1M": 1 M = 1024 kB (sysstat cprintf_unit)
    assert first["r_areq_kB"] == 240.4 and first["r_await_ms"] == 3.36
    assert first["w_kBps"] == 7.0 * 1024 and first["w_areq_kB"] == 279.5
    assert first["f_iops"] == 0.23 and first["util_pct"] == 8.2  # "8.2%"
    assert first["cpu_user_pct"] == 30.4 and first["cpu_idle_pct"] == 64.6  # "30.4%"
    vda = one(frame, "vda", 1)
    assert (vda["r_iops"], vda["r_kBps"], vda["w_kBps"], vda["w_rqm_pct"], vda["d_kBps"],
            vda["d_areq_kB"], vda["aqu_sz"], vda["util_pct"]) == (
        8917.0, 34.8 * 1024, 200.0 * 1024, 0.4, 100.0 * 1024, 33.3 * 1024, 0.85, 85.6)
    assert one(frame, "loop1", 0)["w_kBps"] == 799.0  # "799.0k"
    # every device-interval has its read, write, discard and flush parts
    cols = ["r_iops", "w_iops", "d_iops", "f_iops", "util_pct"]
    assert frame.df.select(cols).null_count().sum_horizontal().item() == 0


def test_pretty_with_stamps_matches_human_with_stamps() -> None:
    pretty, _ = load("live-sysstat12.6-x-pretty-t.txt")
    human, _ = load("live-sysstat12.6-x-human-t.txt")
    assert len(pretty) == len(human) == 12
    # same counters, printed exactly (pretty) and scaled (human): equal within human rounding
    p = one(pretty, "loop0")
    h = one(human, "loop0")
    assert p["r_iops"] == h["r_iops"]
    assert abs(p["r_kBps"] - h["r_kBps"]) <= 0.05 * 1024
    assert p["ts"] == h["ts"] == utc(2026, 11, 22, 11, 14, 35)


def test_basic_report_with_partitions_option() -> None:
    frame, _ = load("live-sysstat12.6-basic-t-p.txt")
    loop0 = one(frame, "loop0")
    assert (loop0["iops"], loop0["r_kBps"], loop0["w_kBps"], loop0["d_kBps"]) == (
        119.88, 22645.78, 7181.15, 0.0)
    assert loop0["r_iops"] is None  # the basic report has tps only


def test_short_basic_megabytes_sums_read_and_write_discard() -> None:
    frame, _ = load("live-sysstat12.6-s-t-m.txt")
    loop0 = one(frame, "loop0")
    assert loop0["r_kBps"] == 22.12 * 1024
    assert loop0["kBps"] == 22.12 * 1024 + 7.01 * 1024  # MB_read/s + MB_w+d/s
    assert loop0["w_kBps"] is None  # writes and discards are not separable here


def test_short_extended() -> None:
    frame, src = load("live-sysstat12.6-x-s-t.txt")
    loop0 = one(frame, "loop0")
    assert (loop0["iops"], loop0["kBps"], loop0["await_ms"], loop0["areq_kB"],
            loop0["aqu_sz"], loop0["util_pct"]) == (119.88, 29827.0, 3.19, 248.8, 0.38, 8.19)
    assert any("rqm/s" in n for n in src.notes)


def test_iso_stamps_carry_their_offset() -> None:
    frame, src = load("live-sysstat12.6-x-t-iso.txt", tz=ZoneInfo("Asia/Tokyo"))
    # +0000 in the stamp wins over --tz
    assert frame.df["ts"].min() == utc(2026, 11, 22, 11, 14, 35)
    assert not any("read as UTC" in n for n in src.notes)


def test_iso_offset_converted() -> None:
    text = (FIX / "live-sysstat12.6-x-t-iso.txt").read_text().replace("+0000", "+0530")
    frame, _ = load(text.encode())
    assert frame.df["ts"].min() == utc(2026, 11, 22, 5, 44, 35)


def test_z_omits_idle_devices_in_some_reports() -> None:
    frame, _ = load("live-sysstat12.6-x-z-t.txt")
    per_report = frame.df.group_by("ts").len().sort("ts")["len"].to_list()
    assert per_report == [4, 1, 1, 1]
    assert one(frame, "vda", 1)["r_iops"] == 9995.0


# ---- locales -------------------------------------------------------------------------------


def test_day_first_locale_inferred_from_a_day_above_12() -> None:
    frame, src = load("derived-en_GB-ddmmyy-x-t.txt")
    assert frame.df["ts"].min() == utc(2021, 9, 26, 3, 35, 19)
    assert any("day/month/year" in n for n in src.notes)


def test_german_locale_dots_and_decimal_commas() -> None:
    frame, src = load("derived-de_DE-comma-x-t.txt")
    assert len(frame) == 55
    sdb = one(frame, "sdb")
    assert sdb["ts"] == utc(2018, 6, 14, 18, 8, 37)
    assert sdb["r_kBps"] == 1149.19 / 2 and sdb["await_ms"] == 0.06
    assert sdb["cpu_user_pct"] == 0.48 and sdb["cpu_idle_pct"] == 99.11
    assert any("day/month/year" in n for n in src.notes)


def test_japanese_locale_stamps() -> None:
    frame, _ = load("derived-ja_JP-x-t.txt")
    assert frame.df.sort("ts")["ts"].to_list() == [
        utc(2021, 9, 26, 3, 35, 19), utc(2021, 9, 26, 3, 35, 20), utc(2021, 9, 26, 3, 35, 21)]


def test_ambiguous_dates_decided_by_the_changing_field() -> None:
    frame, src = load("derived-ambiguous-dmy-x-t.txt")
    assert frame.df.sort("ts")["ts"].to_list() == [
        utc(2021, 2, 1, 23, 59, 58), utc(2021, 2, 1, 23, 59, 59), utc(2021, 2, 2)]
    assert any("first field is the one that changes" in n for n in src.notes)


def test_date_order_given_by_the_user_wins_over_the_guess() -> None:
    frame, _ = load("derived-ambiguous-dmy-x-t.txt", date_order="MDY")
    assert frame.df["ts"].min() == utc(2021, 1, 2, 23, 59, 58)


def test_daylight_saving_fold() -> None:
    # 01:59:58, 01:59:59 EDT, then clocks go back: 01:00:00, 01:00:01 EST
    frame, _ = load("derived-dst-fold-x-t.txt", tz=ZoneInfo("America/New_York"))
    assert frame.df["ts"].unique().sort().to_list() == [
        utc(2021, 11, 7, 5, 59, 58), utc(2021, 11, 7, 5, 59, 59),
        utc(2021, 11, 7, 6, 0, 0), utc(2021, 11, 7, 6, 0, 1)]
    assert frame.df["interval_s"].unique().to_list() == [1.0]


# ---- odd layouts ---------------------------------------------------------------------------


def test_overflowing_value_and_long_partition_name() -> None:
    frame, _ = load("derived-overflow-longname-x.txt")
    assert one(frame, "sda")["r_kBps"] == 1234567.89
    assert one(frame, "sda")["r_areq_kB"] == 37.75  # columns after the overflow still right
    p = one(frame, "nvme10n1p12345")
    assert (p["device_kind"], p["parent"]) == ("partition", "nvme10n1")


def test_sysstat10_h_device_names_on_their_own_line() -> None:
    frame, _ = load("derived-sysstat10-h-namelines-x.txt")
    assert frame.devices() == ["centos-root", "centos-swap", "sda"]
    assert one(frame, "centos-root")["r_kBps"] == 4.41
    assert one(frame, "sda")["util_pct"] == 0.01


def test_partitions_get_kind_and_parent() -> None:
    text = (FIX / CENTOS10).read_text().replace("dm-1         ", "vda1         ")
    frame, _ = load(text.encode())
    p = one(frame, "vda1")
    assert (p["device_kind"], p["parent"]) == ("partition", "vda")


def test_nan_and_negative_values_are_not_measured() -> None:
    text = (FIX / UBUNTU12).read_text()
    text = text.replace("loop0            0.02", "loop0            -nan", 1)
    text = re.sub(r"(?m)^(sda .*)   0\.41$", r"\1  -1.00", text)  # sda %util
    frame, src = load(text.encode())
    assert one(frame, "loop0")["r_iops"] is None
    assert one(frame, "sda")["util_pct"] is None
    assert any("nan" in n for n in src.notes) and any("negative" in n for n in src.notes)


def test_cpu_only_report_gives_no_rows() -> None:
    text = (FIX / CENTOS10).read_text().split("Device:")[0]
    frame, src = load(text.encode())
    assert len(frame) == 0
    assert any("no device statistics" in n for n in src.notes)


# ---- times without -t, gaps, several runs ---------------------------------------------------


def _reports(name: str) -> list[str]:
    """Banner + reports of a -t fixture, split at the stamp lines."""
    return re.split(r"(?m)^(?=\d\d/\d\d/\d\d)", (FIX / name).read_text())


def test_no_stamps_and_no_interval_are_numbered_on_the_relative_line() -> None:
    # iostat -x without -t and no options: the rates are per second already, so every
    # report is read; they are numbered from the epoch a nominal interval apart, the first
    # (after the banner, 0.x % busy) being the since-boot summary
    text = re.sub(r"(?m)^\d\d/\d\d/\d\d \d\d:\d\d:\d\d\n", "", (FIX / V117).read_text())
    frame, src = load(text.encode())
    ts = frame.df.sort("ts")["ts"].unique(maintain_order=True)
    step = dt.timedelta(seconds=timeline.NOMINAL_INTERVAL_S)
    assert ts[0] == timeline.RELATIVE_EPOCH + step and ts[1] == ts[0] + step
    assert ts.len() == 82 and all(timeline.is_relative(t) for t in ts)
    assert frame.df.filter(pl.col("ts") == ts[0])["since_boot"].all()
    assert not frame.df.filter(pl.col("ts") > ts[0])["since_boot"].any()
    assert any("relative time line" in n for n in src.notes)
    assert any("since-boot average (the 'Linux" in n for n in src.notes)


def test_an_excerpt_without_banner_or_stamps_needs_no_options() -> None:
    # two measured reports pasted from the middle of a log: no banner, no -t
    text = re.sub(r"(?m)^\d\d/\d\d/\d\d \d\d:\d\d:\d\d\n", "", "".join(_reports(V117)[3:5]))
    frame, src = load(text.encode())
    assert frame.df["ts"].n_unique() == 2 and not frame.df["since_boot"].any()
    assert any("fragment of a longer log" in n for n in src.notes)
    # --first-report since-boot: the user knows it was the start of the run
    frame, src = load(text.encode(), first_report=FirstReport.SINCE_BOOT)
    assert frame.df.filter(pl.col("since_boot"))["ts"].n_unique() == 1
    assert not any("fragment of a longer log" in n for n in src.notes)


def test_a_banner_report_implausible_since_boot_is_measured() -> None:
    # the banner, then a first report with sdb 98.9 % busy: no average since boot looks like
    # that, so the paste is an excerpt that kept the banner
    text = (FIX / "seed003-insert-hdd-invented.txt").read_text()
    head, _quiet, rest = text.split("avg-cpu:", 2)
    frame, src = load(("avg-cpu:".join([head, rest])).encode())
    assert not frame.df["since_boot"].any()
    assert any("sdb is 98.9 % busy" in n for n in src.notes)
    frame, src = load(("avg-cpu:".join([head, rest])).encode(),
                      first_report=FirstReport.MEASURED)
    assert not frame.df["since_boot"].any()
    assert any("--first-report measured" in n for n in src.notes)


def test_no_stamps_with_interval_counts_from_banner_midnight() -> None:
    text = re.sub(r"(?m)^\d\d/\d\d/\d\d \d\d:\d\d:\d\d\n", "", (FIX / V117).read_text())
    frame, src = load(text.encode(), interval_s=5.0)
    ts = frame.df.sort("ts")["ts"]
    assert ts[0] == utc(2021, 9, 26) and ts[1] == utc(2021, 9, 26, 0, 0, 5)
    assert ts[-1] == utc(2021, 9, 26) + dt.timedelta(seconds=5 * 81)
    assert any("only their spacing is real" in n for n in src.notes)


def test_no_stamps_with_start_and_zone() -> None:
    text = re.sub(r"(?m)^\d\d/\d\d/\d\d \d\d:\d\d:\d\d\n", "", (FIX / V117).read_text())
    frame, _ = load(text.encode(), interval_s=1.0, start=dt.datetime(2021, 9, 26, 3, 35, 19),
                    tz=ZoneInfo("Europe/Paris"))
    assert frame.df["ts"].min() == utc(2021, 9, 26, 1, 35, 19)


def test_gap_between_reports_is_the_interval() -> None:
    parts = _reports(V117)
    text = "".join(parts[:5] + parts[8:12])  # reports 03:35:22 -> 03:35:26: a 4 s gap
    frame, _ = load(text.encode())
    df = frame.df.sort("ts")
    assert df.filter(pl.col("ts") == utc(2021, 9, 26, 3, 35, 26))["interval_s"].item() == 4.0
    assert df.filter(pl.col("ts") == utc(2021, 9, 26, 3, 35, 27))["interval_s"].item() == 1.0


def test_interval_hint_disagreeing_with_stamps_is_noted() -> None:
    frame, src = load(V117, interval_s=10.0)
    assert frame.df["interval_s"].unique().to_list() == [1.0]  # the stamps are facts
    assert any("--interval 10 s differs" in n for n in src.notes)


def test_two_runs_in_one_file() -> None:
    text = (FIX / SECTORS).read_bytes() + (FIX / V117).read_bytes()
    frame, _ = load(text)
    df = frame.df
    assert set(df["host"].unique()) == {"myhostname", "localhost.localdomain"}
    assert len(frame) == 55 + 82
    assert int(df["since_boot"].sum()) == 11 + 1  # one since-boot report per run


# ---- damage --------------------------------------------------------------------------------


def test_cut_mid_line_keeps_whole_reports() -> None:
    data = (FIX / MB).read_bytes()
    cut = data.index(b"sdg", data.index(b"02:10:53 PM")) + 20  # inside a device line
    frame, src = load(data[:cut])
    assert frame.df["ts"].n_unique() == 3  # 02:10:50, :51, :52; :53 was being written
    assert len(frame) == 33
    assert any("incomplete" in n for n in src.notes)


def test_cut_between_lines_drops_the_short_last_report() -> None:
    data = (FIX / MB).read_bytes()
    cut = data.index(b"sdg", data.index(b"02:10:53 PM"))  # after sdb, a line boundary
    frame, src = load(data[:cut])
    assert len(frame) == 33 and any("incomplete" in n for n in src.notes)


def test_complete_last_report_without_closing_blank_line_is_kept() -> None:
    frame, src = load((FIX / MB).read_bytes().rstrip(b"\n") + b"\n")
    assert len(frame) == 3498
    assert not any("incomplete" in n for n in src.notes)


def test_fragment_starting_mid_report() -> None:
    lines = (FIX / SECTORS).read_text().splitlines(keepends=True)
    frame, src = load("".join(lines[10:]).encode())
    assert len(frame) == 44  # reports 2..5
    assert not frame.df["since_boot"].any()
    assert any("middle of a report" in n for n in src.notes)
    assert any("fragment" in n for n in src.notes)


def test_malformed_row_names_file_line_and_reason() -> None:
    lines = (FIX / SECTORS).read_text().splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("sdb ")][1]  # second report
    lines[at] = "sdb               0.00     0.00    0.00\n"
    data = "".join(lines).encode()
    with pytest.raises(InputFormatError) as err:
        load(data)
    assert err.value.line_no == at + 1 == 27
    assert "expected 14 fields" in err.value.reason and "found 4" in err.value.reason
    assert str(err.value).startswith("t.txt:27: ")
    frame, src = load(data, lenient=True)
    assert len(frame) == 54 and src.skipped == 1
    assert src.skipped_examples[0].startswith("line 27: expected 14 fields")


def test_unreadable_value_and_stray_line() -> None:
    lines = (FIX / SECTORS).read_text().splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("sdg ")][2]  # third report
    lines[at] = lines[at].replace("0.00", "0.0x", 1)
    stray = [i for i, ln in enumerate(lines) if re.match(r"\d\d/", ln)][1]  # 2nd stamp
    assert lines[stray - 1] == "\n"
    lines.insert(stray, "this is not iostat\n")  # after the blank line closing report 1
    frame, src = load("".join(lines).encode(), lenient=True)
    assert src.skipped == 2 and len(frame) == 54
    assert [e.split(":")[0] for e in src.skipped_examples] == [f"line {stray + 1}",
                                                               f"line {at + 2}"]
    with pytest.raises(InputFormatError, match=rf":{stray + 1}: line not understood"):
        load("".join(lines).encode())
    del lines[stray]
    with pytest.raises(InputFormatError, match=rf":{at + 1}: a value is not a number"):
        load("".join(lines).encode())


def test_crlf_bom_and_utf16_read_the_same() -> None:
    data = (FIX / SECTORS).read_bytes()
    base, _ = load(data)
    crlf, _ = load(data.replace(b"\n", b"\r\n"))
    bom, _ = load(b"\xef\xbb\xbf" + data)
    u16, _ = load(data.decode().encode("utf-16"))
    for other in (crlf, bom, u16):
        assert other.df.equals(base.df)


# ---- streaming = whole file; printed = parsed ------------------------------------------------


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk=st.integers(min_value=1_500, max_value=60_000),
       link=st.integers(min_value=0, max_value=40_000))
def test_streaming_in_any_chunk_size_gives_the_same_rows(chunk: int, link: int) -> None:
    data = (FIX / V117).read_bytes() + (FIX / SECTORS).read_bytes()
    whole = iostat.parse(data, Source(path="x"))
    parts = list(iostat.iter_parse(io.BytesIO(data), Source(path="x"), chunk_bytes=chunk,
                                        link_bytes=link))
    assert SampleFrame.concat(parts).df.equals(whole.df)


@pytest.mark.parametrize(("chunk", "link"), [(1_000, 0), (3_000, 10_000), (1 << 20, 1 << 20)])
def test_cut_last_report_found_whatever_the_pieces(chunk: int, link: int) -> None:
    data = (FIX / MB).read_bytes()
    cut = data.index(b"sdg", data.index(b"02:11:30 PM"))  # line boundary inside a table
    src = Source(path="x")
    frames = list(iostat.iter_parse(io.BytesIO(data[:cut]), src, chunk_bytes=chunk,
                                         link_bytes=link))
    assert sum(len(f) for f in frames) == 11 * 40  # 02:10:50 .. 02:11:29
    assert any("incomplete" in n for n in src.notes)


def test_damage_is_reported_by_its_line_when_streamed() -> None:
    lines = (FIX / MB).read_text().splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("sdb ")][100]
    lines[at] = "sdb   1.00\n"
    data = "".join(lines).encode()
    with pytest.raises(InputFormatError) as err:
        list(iostat.iter_parse(io.BytesIO(data), Source(path="x"), chunk_bytes=20_000))
    assert err.value.line_no == at + 1
    src = Source(path="x", lenient=True)
    frames = list(iostat.iter_parse(io.BytesIO(data), src, chunk_bytes=20_000))
    assert sum(len(f) for f in frames) == 3497 and src.skipped == 1


_NAMES = st.from_regex(r"(sd[a-z]{1,2}|nvme[0-9]n[0-9]p[0-9]{1,9}|dm-[0-9]{1,3}|vg-[a-z]{1,12})",
                       fullmatch=True)
_VALUE = st.integers(min_value=0, max_value=10**10 - 1)  # hundredths: up to 99,999,999.99


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(_NAMES, st.lists(_VALUE, min_size=22, max_size=22)),
                     min_size=1, max_size=12, unique_by=lambda r: r[0]))
def test_values_read_exactly_as_sysstat_prints_them(
        rows: list[tuple[str, list[int]]]) -> None:
    """sysstat 12 prints '%-13s' then ' %*.2f' per field (widths 7/9/8/6/7/8 …); values
    that do not fit push the rest of the line right. Every printed value is read back."""
    header = ("Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s"
              "   wrqm/s  %wrqm w_await wareq-sz     d/s     dkB/s   drqm/s  %drqm d_await "
              "dareq-sz     f/s f_await  aqu-sz  %util")
    widths = [7, 9, 8, 6, 7, 8] * 3 + [7, 7, 7, 6]
    lines = ["Linux 6.1.0 (h) \t01/02/2024 \t_x86_64_\t(2 CPU)", "", header]
    for name, vals in rows:
        lines.append(f"{name:<13s}" + "".join(f" {v / 100:{w}.2f}"
                                              for v, w in zip(vals, widths, strict=True)))
    frame = iostat.parse(("\n".join(lines) + "\n\n").encode(), Source(path="x"))
    cols = ["r_iops", "r_kBps", "r_merged_ps", "r_rqm_pct", "r_await_ms", "r_areq_kB",
            "w_iops", "w_kBps", "w_merged_ps", "w_rqm_pct", "w_await_ms", "w_areq_kB",
            "d_iops", "d_kBps", "d_merged_ps", "d_rqm_pct", "d_await_ms", "d_areq_kB",
            "f_iops", "f_await_ms", "aqu_sz", "util_pct"]
    got = {r["device"]: [r[c] for c in cols] for r in frame.df.iter_rows(named=True)}
    assert got == {name: [float(f"{v / 100:.2f}") for v in vals] for name, vals in rows}


def test_parse_speed_path_reads_one_mebibyte_per_few_ms() -> None:
    # Not a benchmark (see benchmarks/import_speed.py): the fixed-width path must be the one
    # taken for ordinary rows, so 8 copies of the RHEL6 log parse in well under a second.
    data = b"".join([(FIX / MB).read_bytes()] * 8)
    import time
    t0 = time.perf_counter()
    frame = iostat.parse(data, Source(path="x"))
    assert len(frame) == 8 * 3498
    assert time.perf_counter() - t0 < 5.0


# ---- the fixed-width decoder against a reference ---------------------------------------------

_CELL = st.sampled_from([*" 0123456789.", "-", "x", ",", "e", "M"])


def _reference(rows: list[str], fields: list[tuple[int, int]]
               ) -> tuple[list[list[float]], list[bool]]:
    """What _decode_fixed must give, the slow way: a range is spaces, digits, then (at the
    first row's dot) a dot and digits; its value is Python's float() of it (correctly
    rounded, as strtod)."""
    dots = []
    for a, b in fields:
        d = rows[0][a:b].rfind(".")
        dots.append(a + d if d >= 0 else b)
    values, oks = [], []
    for row in rows:
        ok, vals = True, []
        for (a, b), d in zip(fields, dots, strict=True):
            whole, frac = row[a:d], row[d + 1:b] if d < b else ""
            ok = ok and bool(re.fullmatch(r" *[0-9]+", whole)) and \
                (d == b or (row[d] == "." and bool(re.fullmatch(r"[0-9]*", frac))))
            # digits that do not fit a double exactly are left to the regex path
            ok = ok and int(whole + frac) < 2**53
            vals.append(float(row[a:b]) if ok else math.nan)
        values.append(vals)
        oks.append(ok)
    return values, oks


@settings(max_examples=300, deadline=None)
@given(widths=st.lists(st.integers(min_value=2, max_value=21), min_size=1, max_size=5),
       decimals=st.integers(min_value=0, max_value=9), data=st.data())
def test_fixed_width_decoder_reads_what_strtod_reads_and_refuses_the_rest(
        widths: list[int], decimals: int, data: st.DataObject) -> None:
    rows: list[str] = []
    for _ in range(data.draw(st.integers(min_value=1, max_value=30))):
        parts = ["sda          "]
        for w in widths:
            digits = max(1, w - decimals - 2)
            v = data.draw(st.integers(min_value=0, max_value=10 ** digits - 1))
            parts.append(" " + f"{v / 10 ** decimals:{w}.{decimals}f}"[-w:])
        row = "".join(parts)
        for _ in range(data.draw(st.integers(min_value=0, max_value=2))):  # damage
            at = data.draw(st.integers(min_value=13, max_value=len(row) - 1))
            row = row[:at] + data.draw(_CELL) + row[at + 1:]
        rows.append(row)
    ends = list(accumulate([13, *(w + 1 for w in widths)]))
    fields = list(pairwise(ends))
    mat = np.frombuffer("".join(rows).encode(), dtype=np.uint8).reshape(len(rows), -1)
    want, want_ok = _reference(rows, fields)
    for how, (values, ok) in _decoders(mat, rows, fields):
        assert ok.tolist() == want_ok, how
        for r, good in enumerate(want_ok):
            if good:
                assert [float(v[r]) for v in values] == want[r], how


def _decoders(mat: np.ndarray, rows: list[str], fields: list[tuple[int, int]]
              ) -> Iterator[tuple[str, tuple[list[np.ndarray], np.ndarray]]]:
    """The numpy decoder's result, then (when built) the C decoder's, with its SSE4.1 reader
    and without (two 8-byte words, or place by place beyond 8 digits a side)."""
    yield "numpy", iostat_fixed.decode_fixed(mat, fields)
    if native.kernels() is not None:
        for vector in (True, False):
            yield f"C vector={vector}", decode_native(rows, fields, vector=vector)


def test_fixed_width_decoder_leaves_more_than_15_digits_to_the_regex_path() -> None:
    rows = ["sda          " + f" {v:21.2f}" for v in (1.5, 12345678901234.5, 1.2e17)]
    mat = np.frombuffer("".join(rows).encode(), dtype=np.uint8).reshape(3, -1)
    for how, (values, ok) in _decoders(mat, rows, [(13, 35)]):
        assert ok.tolist() == [True, True, False], how
        assert values[0][:2].tolist() == [1.5, 12345678901234.5], how
    # sixteen digit places in 17 bytes: the widest range the C vector reader takes
    rows = ["sda          " + f" {v:16d}" for v in (2**53 - 1, 2**53, 10**16 - 1)]
    mat = np.frombuffer("".join(rows).encode(), dtype=np.uint8).reshape(3, -1)
    for how, (values, ok) in _decoders(mat, rows, [(13, 30)]):
        assert ok.tolist() == [True, False, False], how
        assert values[0][0] == float(2**53 - 1), how


def test_device_names_are_grouped_exactly_even_when_their_hashes_collide(
        monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["sda", "sdb", "nvme0n1p12", "sda", "dm-0", "sdb", "x y", "1234567890123"]
    mat = np.frombuffer("".join(f"{n:<13s}  1.00" for n in names).encode(),
                        dtype=np.uint8).reshape(len(names), -1)
    device, valid = iostat_fixed.device_names(mat, 13)
    assert device.to_list() == [n if " " not in n else "x y" for n in names]
    assert valid.tolist() == [" " not in n for n in names]
    # a multiplier of 0 hashes by the last 8 bytes only: "sda" and "sdb" (and "dm-0") collide
    monkeypatch.setattr(iostat_fixed, "_NAME_HASH", np.uint64(0))
    collided, valid2 = iostat_fixed.device_names(mat, 13)
    assert collided.to_list() == device.to_list()
    assert valid2.tolist() == valid.tolist()


# ---- the steady path against the general one -------------------------------------------------


def _run(data: bytes, *, steady: bool, chunk: int, lenient: bool = False,
         **kw: Any) -> tuple[Any, list[str], int, list[str]]:
    """(frame rows or the error, notes, skipped, skip reasons) of a streamed parse with the
    steady path on or off."""
    src = Source(path="x", lenient=lenient, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(iostat_steady, "ENABLED", steady)
        try:
            frames = list(iostat.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk,
                                                 link_bytes=0))
        except InputFormatError as exc:
            return (str(exc), exc.line_no), src.notes, src.skipped, src.skipped_examples
    df = SampleFrame.concat(frames).df if frames else None
    return df, src.notes, src.skipped, src.skipped_examples


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    if isinstance(a[0], pl.DataFrame) and isinstance(b[0], pl.DataFrame):
        assert a[0].equals(b[0], null_equal=True)
    else:
        assert type(a[0]) is type(b[0])
        assert a[0] == b[0]
    if isinstance(a[0], tuple):
        # an error: the same one, after the same skipped lines; the notes gathered before it
        # are not reported (the command prints a failed file's error only) and depend on
        # how far the paths had linked when they met the line
        assert a[2:] == b[2:]
    else:
        # (the skipped lines as listed: Source keeps them in line order, so the general
        # path, which reports an unreadable time stamp when the piece's times are decided,
        # after a bad row further on, lists them as the steady path does - a hypothesis run
        # on 2026-11-24 found 1522 and 1691 listed in either order before)
        assert a[1:] == b[1:]


class _Count:
    """How often the steady path (``steady.link``) linked a piece."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.taken = 0
        original = iostat_steady.link

        def counted(parser: Any, *args: Any) -> Any:
            out = original(parser, *args)
            self.taken += out is not None
            return out
        mp.setattr(iostat_steady, "link", counted)


@pytest.mark.parametrize("path", sorted(FIX.glob("*.txt")), ids=lambda p: p.name)
def test_steady_path_gives_what_the_general_path_gives(path: Path) -> None:
    data = path.read_bytes()
    chunk = max(len(data) // 40, 4_000)  # some 40 pieces: each is a chance to switch paths
    for lenient in (False, True):
        _same(_run(data, steady=True, chunk=chunk, lenient=lenient, interval_s=2.0),
              _run(data, steady=False, chunk=chunk, lenient=lenient, interval_s=2.0))


def test_steady_path_takes_a_regular_log() -> None:
    """Not a vacuous comparison: on a -t log the steady path links almost every piece."""
    data = (FIX / MB).read_bytes() * 2
    with pytest.MonkeyPatch.context() as mp:
        count = _Count(mp)
        on = _run(data, steady=True, chunk=12_000)
    assert count.taken >= 0.8 * (len(data) // 12_000)  # two runs: each starts general
    _same(on, _run(data, steady=False, chunk=12_000))
    assert isinstance(on[0], pl.DataFrame) and on[0].height == 2 * 3498


_DAMAGE = st.sampled_from(["row", "nan", "banner", "drop", "stamp", "cpu", "header", "blank",
                           "partition", "long-name"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damage=st.lists(st.tuples(_DAMAGE, st.floats(0.0, 1.0)), max_size=3),
       cut=st.one_of(st.none(), st.floats(0.5, 1.0)), chunk=st.integers(8_000, 40_000),
       lenient=st.booleans())
# (a stamp line lost: the steady piece after the general path's open report took the time
# before that report as its first report's previous one - interval 3 s instead of 1 s)
@example(damage=[("drop", 0.8272211223013826)], cut=None, chunk=8000, lenient=False)
@example(damage=[("row", 0.3125), ("stamp", 0.28125)], cut=None, chunk=13937, lenient=True)
def test_steady_and_general_paths_agree_on_damaged_logs(
        damage: list[tuple[str, float]], cut: float | None, chunk: int, lenient: bool) -> None:
    """A -t log (the RHEL6 capture) with lines damaged, inserted or dropped anywhere, maybe
    cut short: rows, notes, skipped lines and errors are the same with and without the
    steady path, whatever the pieces."""
    lines = (FIX / MB).read_text().splitlines(keepends=True)
    for kind, where in damage:
        at = min(int(where * len(lines)), len(lines) - 1)
        line = lines[at]
        if kind == "row":
            lines[at] = "sdb   1.00\n"
        elif kind == "nan":
            lines[at] = re.sub(r"\d+\.\d\d", "nan", line, count=1)
        elif kind == "banner":
            lines.insert(at, "Linux 2.6.32-754.el6.x86_64 (other) \t06/14/2018 \t_x86_64_\t"
                             "(8 CPU)\n\n")
        elif kind == "drop":
            del lines[at]
        elif kind == "stamp":
            lines[at] = "13/45/2018 02:10:50 PM\n"
        elif kind == "cpu":
            lines[at] = "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
        elif kind == "header":
            lines[at] = line.replace("Device:", "Device: ", 1) if line.startswith(
                "Device:") else line
        elif kind == "blank":
            lines.insert(at, "\n")
        elif kind == "partition":
            lines[at] = re.sub(r"^sd([a-z]) ", r"sd\g<1>1", line)
        else:
            lines[at] = re.sub(r"^(\S+)\s", r"\g<1>-with-a-long-name ", line)
    data = "".join(lines).encode()
    if cut is not None:
        data = data[:int(cut * len(data))]
    _same(_run(data, steady=True, chunk=chunk, lenient=lenient),
          _run(data, steady=False, chunk=chunk, lenient=lenient))


@pytest.mark.parametrize("tz", [None, "America/New_York"])
def test_steady_path_through_a_daylight_saving_change(tz: str | None) -> None:
    """Stamps read by the byte kernel, converted with the user's zone: a log written
    through the end of daylight saving time (01:59:59 AM, then 01:00:00 AM again, as in
    derived-dst-fold-x-t.txt) gives the same times by both paths."""
    text = (FIX / "derived-dst-fold-x-t.txt").read_text()
    banner, first = text.split("\n\n")[0], text.index("11/07/2021 01:59:58 AM")
    body = text[first:].split("\n\n", 2)
    report = "\n" + body[0].split("\n", 1)[1] + "\n\n" + body[1] + "\n\n"
    clock = [f"01:59:{s:02d}" for s in range(30, 60)] + [f"01:00:{s:02d}" for s in range(30)]
    data = (banner + "\n\n" + "".join(f"11/07/2021 {c} AM{report}" for c in clock)).encode()
    zone = ZoneInfo(tz) if tz else None
    with pytest.MonkeyPatch.context() as mp:
        count = _Count(mp)
        on = _run(data, steady=True, chunk=4_000, tz=zone, date_order="MDY")
    assert count.taken
    _same(on, _run(data, steady=False, chunk=4_000, tz=zone, date_order="MDY"))
