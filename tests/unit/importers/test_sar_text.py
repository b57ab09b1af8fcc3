"""sysstat sar text importer: golden values from real sar output of sysstat 10.1.5, 11.6.1 and
12.6.1 (C, en_US and de_DE locales), restarts, midnight and DST folds, truncation, bad input.

Fixtures: tests/fixtures/sar (see tests/fixtures/NOTICE; the 12.6.1 ones were recorded on the
project's VM by rebuild_fixtures() in tests/e2e/test_import_live_sar.py, with the zones below).
"""

from __future__ import annotations

import gzip
import io
import lzma
import struct
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers.importing import assert_pieces_agree, other_formats_fixtures, read_outcome

from iogauge.errors import InputFormatError
from iogauge.importers import sar_text
from iogauge.importers.base import Source
from iogauge.importers.io import open_binary
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SAR = FIX / "sar"
#: The POSIX TZ zones the 12.6.1 fixtures were printed in (rebuild_fixtures() returns them):
#: local midnight between the 2nd and 3rd intervals; DST (UTC+2 -> UTC+1) ending between the
#: restart's first header and its first row; the daily rotation of sadc.
META = {"midnight_tz": "MID+11:03:32", "fold_tz": "FST-1FDT-2,J1/0,J326/13:03:37",
        "rotation_tz": "ROT+11:03:46"}
V12 = "sysstat12.6.1"
DEV_MEASURES = ["iops", "r_kBps", "w_kBps", "d_kBps", "areq_kB", "aqu_sz", "await_ms",
                "svctm_ms", "util_pct"]
CPU = ["cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_steal_pct",
       "cpu_idle_pct"]


def posix_zone(tz: str) -> ZoneInfo:
    """A ZoneInfo for a POSIX TZ string (what the fixtures were printed with): a TZif v2 file
    with no transitions whose footer rule applies to every instant (RFC 8536 §3.3)."""
    header = b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, 0, 1, 4)
    block = header + struct.pack(">lbB", 0, 0, 0) + b"UTC\0"
    return ZoneInfo.from_file(io.BytesIO(block + block + b"\n" + tz.encode() + b"\n"))


def load(name: str, **kw: object) -> tuple[SampleFrame, Source]:
    src = Source(path=str(SAR / name), **kw)  # type: ignore[arg-type]
    return sar_text.parse((SAR / name).read_bytes(), src), src


def parse_text(text: str, **kw: object) -> tuple[SampleFrame, Source]:
    src = Source(path="mem.txt", **kw)  # type: ignore[arg-type]
    return sar_text.parse(text.encode(), src), src


def row(frame: SampleFrame, device: str, ts: str) -> dict[str, object]:
    t = datetime.fromisoformat(ts).replace(tzinfo=UTC)
    hit = frame.df.filter((pl.col("device") == device) & (pl.col("ts") == t))
    assert hit.height == 1, f"{device} at {ts}: {hit.height} rows"
    return hit.to_dicts()[0]


def utc(ts: str) -> datetime:
    return datetime.fromisoformat(ts).replace(tzinfo=UTC)


# ---- sniffing -----------------------------------------------------------------------------


def test_sniff_accepts_every_sysstat_sar_fixture() -> None:
    files = sorted(SAR.glob("*.txt"))
    assert len(files) >= 11
    for f in files:
        assert sar_text.sniff(f.read_text(encoding="utf-8")[:65536]), f.name


@pytest.mark.parametrize("head", [
    ("SunOS host 5.11 11.3 sun4v    04/03/2018\n\n00:00:00   device  %busy   avque   r+w/s  "
    "blks/s  avwait  avserv\n"),
    ("AIX host 2 7 00F9C1234C00    04/03/18\n\nSystem configuration: lcpu=8\n\n00:00:00  "
    "device %busy avque r+w/s Kbs/s avwait avserv\n"),
    ("HP-UX host B.11.31 U ia64    04/03/18\n\n00:00:00   device   %busy   avque   r+w/s  "
    "blks/s  avwait  avserv\n"),
    # iostat has the same banner but no timed column lines
    ("Linux 5.4.0 (host) \t11/22/26 \t_x86_64_\t(2 CPU)\n\navg-cpu:  %user   %nice %system "
    "%iowait  %steal   %idle\n           1.00    0.00    1.00    0.00    0.00   98.00\n\n"
    "Device            r/s     w/s\nsda   1.00  2.00\n"),
    "# hostname;interval;timestamp;DEV;tps;rkB/s\nvm;1;2026-11-22 10:49:25 UTC;vda;1.00;2.00\n",
    '{"sysstat": {"hosts": []}}',
    "",
])
def test_sniff_refuses_other_formats(head: str) -> None:
    assert not sar_text.sniff(head)


def test_sniff_refuses_other_formats_fixtures() -> None:
    mine = {"sar", "sa", "sadf"}
    for f in other_formats_fixtures(FIX, mine):
        head = f.read_bytes()[:65536].decode("utf-8", errors="replace")
        assert not sar_text.sniff(head), f"sar sniffer accepted {f}"


# ---- sysstat 10.1.5 (RHEL 7): rd_sec/s sectors, svctm, LINUX RESTART, grouped sar -A ------


def test_sysstat_10_golden_values() -> None:
    frame, src = load("ksar-rhel7-sysstat10.1.5-sar-A.txt")
    df = frame.df
    assert len(frame) == 180  # 36 ten-minute intervals x 5 devices, no row lost
    assert sorted(df["device"].unique()) == ["dev253-0", "dev253-1", "dev253-2", "dev8-0",
                                             "dev8-16"]
    assert set(df["source"]) == {"sar"} and set(df["host"]) == {"hostname.example.com"}
    # '09:10:01 dev8-0 0.35 0.53 1.71 6.44 0.01 20.24 5.61 0.20' (sectors halve to kB)
    r = row(frame, "dev8-0", "2016-03-28T09:10:01")
    assert r["interval_s"] == 600.0  # from the header time 09:00:01 after the restart
    assert (r["iops"], r["r_kBps"], r["w_kBps"], r["areq_kB"]) == (0.35, 0.265, 0.855, 3.22)
    assert (r["aqu_sz"], r["await_ms"], r["svctm_ms"], r["util_pct"]) == (0.01, 20.24, 5.61,
                                                                          0.2)
    assert r["d_kBps"] is None and r["since_boot"] is False
    assert (r["device_kind"], r["parent"]) == ("disk", None)
    # the 09:20:01 row of dev8-16: tps 13.52, rd_sec/s 580.18, wr_sec/s 56.83, avgrq-sz 47.10
    r = row(frame, "dev8-16", "2016-03-28T09:20:01")
    assert (r["iops"], r["r_kBps"], r["w_kBps"], r["areq_kB"]) == (13.52, 290.09, 28.415,
                                                                   23.55)
    # CPU 'all' at 09:20:01: %usr 0.01 %sys 0.02 %iowait 0.08 %irq 0 %soft 0 %idle 99.86
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (0.01, 0.02, 0.08, 99.86)
    # sadc woke one second late once: 13:20:02 then 13:30:01
    assert row(frame, "dev8-0", "2016-03-28T13:20:02")["interval_s"] == 601.0
    assert row(frame, "dev8-0", "2016-03-28T13:30:01")["interval_s"] == 599.0
    assert row(frame, "dev253-0", "2016-03-28T09:10:01")["device_kind"] == "other"
    assert df["cpu_idle_pct"].null_count() == 0
    notes = " | ".join(src.notes)
    assert "LINUX RESTART" in notes and "summary line(s)" in notes and "assumed UTC" in notes


def test_sysstat_10_with_zone() -> None:
    frame, src = load("ksar-rhel7-sysstat10.1.5-sar-A.txt", tz=ZoneInfo("America/New_York"))
    # 28 March 2016 is daylight time in New York (UTC-4)
    assert frame.df["ts"].min() == utc("2016-03-28T13:10:01")
    assert not any("assumed UTC" in n for n in src.notes)


# ---- sysstat 11.6.1: rkB/s + areq-sz (kB), live interleaved sar -A, ksar footer ----------


def test_sysstat_11_golden_values() -> None:
    frame, src = load("ksar-sysstat11.6.1-sar-A.txt")
    assert len(frame) == 18  # 6 intervals x 3 devices
    # '16:08:55 dev253-0 6.70 0.00 496.80 74.15 0.02 4.72 1.01 0.68', local UTC+2 per footer
    r = row(frame, "dev253-0", "2018-04-08T14:08:55")
    assert r["interval_s"] == 10.0
    assert (r["iops"], r["r_kBps"], r["w_kBps"], r["areq_kB"], r["aqu_sz"]) == (
        6.7, 0.0, 496.8, 74.15, 0.02)
    assert (r["await_ms"], r["svctm_ms"], r["util_pct"]) == (4.72, 1.01, 0.68)
    # CPU all: %usr 5.47 %nice 0 %sys 5.39 %iowait 0.15 %steal 0 %irq 0 %soft 0 %idle 88.99
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (5.47, 5.39, 0.15, 88.99)
    r = row(frame, "dev254-1", "2018-04-08T14:09:05")
    assert (r["iops"], r["w_kBps"], r["areq_kB"], r["svctm_ms"]) == (1.2, 14.0, 11.67, 0.33)
    assert r["cpu_idle_pct"] == 99.37
    assert frame.df["ts"].max() == utc("2018-04-08T14:09:45")
    assert frame.df["cpu_idle_pct"].null_count() == 0
    assert any("EndTime/EndTimeUTC" in n for n in src.notes)


# ---- sysstat 12.6.1: dkB/s, no svctm, restart, locales, --pretty ------------------------


def test_sysstat_12_restart_golden_values() -> None:
    frame, src = load(f"{V12}-sar-u-d-restart.txt")
    assert len(frame) == 32  # (4 + 4 intervals) x 4 devices: every device-interval
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * 8
    # '11:03:37 vda 10239.00 128464.00 131220.00 131092.00 38.17 0.47 0.05 43.20', the first
    # interval after 'LINUX RESTART': it starts at the header time 11:03:36.
    r = row(frame, "vda", "2026-11-22T11:03:37")
    assert r["interval_s"] == 1.0
    assert (r["iops"], r["r_kBps"], r["w_kBps"], r["d_kBps"]) == (10239.0, 128464.0,
                                                                  131220.0, 131092.0)
    assert (r["areq_kB"], r["aqu_sz"], r["await_ms"], r["util_pct"]) == (38.17, 0.47, 0.05,
                                                                         43.2)
    assert r["svctm_ms"] is None  # sysstat >= 12.1.2 has no svctm
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (60.61, 28.79, 9.6, 1.01)
    r = row(frame, "loop0", "2026-11-22T11:03:32")  # '1000.00 1976.00 2024.00 ... 100.40'
    assert (r["iops"], r["r_kBps"], r["util_pct"], r["device_kind"]) == (1000.0, 1976.0,
                                                                         100.4, "loop")
    assert set(frame.df["interval_s"]) == {1.0}
    assert any("LINUX RESTART" in n for n in src.notes)


def _device_part(frame: SampleFrame) -> pl.DataFrame:
    return frame.df.select("device", "device_kind", "ts", "interval_s", *DEV_MEASURES) \
        .sort("ts", "device")


def test_en_us_am_pm_and_pretty_layout_match_c_locale() -> None:
    c, _ = load(f"{V12}-sar-u-d-restart.txt")
    en, _ = load(f"{V12}-sar-dp-en_US.txt")  # '11:03:31 AM ... %util DEV' (DEV last)
    assert _device_part(en).equals(_device_part(c))


def test_de_de_commas_and_sar_u_all_in_berlin_time() -> None:
    c, _ = load(f"{V12}-sar-u-d-restart.txt")
    de, src = load(f"{V12}-sar-uALL-d-de_DE-Berlin.txt", tz=ZoneInfo("Europe/Berlin"))
    assert _device_part(de).equals(_device_part(c))
    # -u ALL: %system = %sys + %irq + %soft ('26,00 ... 3,00' -> 29.00, as plain -u prints)
    assert de.df.sort("ts", "device").select(CPU).equals(c.df.sort("ts", "device").select(CPU))
    assert row(de, "vda", "2026-11-22T11:03:31")["cpu_system_pct"] == 29.0
    assert any("summary line(s)" in n for n in src.notes)  # 'Durchschn.:' lines


def test_sar_a_of_sysstat_12() -> None:
    frame, _ = load(f"{V12}-sar-A.txt")
    assert len(frame) == 8  # 2 intervals x 4 devices out of ~40 sections
    r = row(frame, "vda", "2026-11-22T11:03:50")
    assert (r["iops"], r["r_kBps"], r["w_kBps"], r["d_kBps"], r["util_pct"]) == (
        13630.0, 171760.0, 172144.0, 167936.0, 64.8)
    # -u ALL 'all': %usr 34.72 %sys 36.27 %soft 3.11 -> system 39.38
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_idle_pct"]) == (34.72, 39.38, 1.04)


def test_live_interleaved_output() -> None:
    frame, _ = load(f"{V12}-sar-u-d-live.txt")
    assert len(frame) == 12
    r = row(frame, "vda", "2026-11-22T11:03:53")
    assert (r["iops"], r["interval_s"], r["cpu_user_pct"], r["cpu_idle_pct"]) == (
        14292.0, 1.0, 44.44, 2.53)
    assert frame.df["cpu_idle_pct"].null_count() == 0


# ---- midnight, DST, two daily files ------------------------------------------------------


def test_midnight_rollover_inside_a_file() -> None:
    frame, _ = load(f"{V12}-sar-u-d-midnight.txt")
    # 23:59:59 on the banner's day 11/21/26, then 00:00:00 .. 00:00:08 on 11/22
    assert row(frame, "vda", "2026-11-21T23:59:59")["iops"] == 9429.0
    assert row(frame, "vda", "2026-11-22T00:00:00")["interval_s"] == 1.0
    # the DEV section starts over at 23:59:58 of the first day (grouped sar -f output) and
    # the restart at 00:00:03 is on the second day
    assert row(frame, "vda", "2026-11-22T00:00:05")["iops"] == 10239.0
    assert set(frame.df["interval_s"]) == {1.0}
    assert frame.df["cpu_idle_pct"].null_count() == 0
    # in the zone it was printed in, the times are those of the C-locale UTC output
    zoned, _ = load(f"{V12}-sar-u-d-midnight.txt", tz=posix_zone(META["midnight_tz"]))
    c, _ = load(f"{V12}-sar-u-d-restart.txt")
    assert zoned.df.sort("ts", "device").drop("host").equals(c.df.sort("ts", "device")
                                                             .drop("host"))


def test_dst_fall_back_hour() -> None:
    name = f"{V12}-sar-dp-dst-fold.txt"
    # local time steps back from 13:03:36 (+2) to 12:03:37 (+1): without the zone that is
    # time running backwards, refused with file:line and a hint
    with pytest.raises(InputFormatError) as exc:
        load(name)
    assert exc.value.line_no == 28 and "daylight-saving" in exc.value.reason
    frame, _ = load(name, tz=posix_zone(META["fold_tz"]))
    c, _ = load(f"{V12}-sar-u-d-restart.txt")
    assert _device_part(frame).equals(_device_part(c))
    assert set(frame.df["interval_s"]) == {1.0}


def test_two_daily_files_are_continuous() -> None:
    zone = posix_zone(META["rotation_tz"])
    day1, _ = load(f"{V12}-sar-dp-rotation-day1.txt", tz=zone)
    day2, _ = load(f"{V12}-sar-dp-rotation-day2.txt", tz=zone)
    both = SampleFrame.concat([day1, day2]).df.sort("device", "ts")
    assert len(both) == 36
    per_dev = both.group_by("device").agg(
        pl.col("ts").diff().dt.total_seconds().drop_nulls().alias("gaps"),
        pl.col("interval_s"))
    for _dev, gaps, intervals in per_dev.iter_rows():
        assert gaps == [1] * 8  # no gap and no overlap across the file boundary
        assert intervals == [1.0] * 9
    # day 1 ends with the record sadc wrote at local midnight; day 2 starts from it
    last1 = day1.df.filter(pl.col("device") == "vda")["ts"].max()
    first2 = day2.df.filter(pl.col("device") == "vda").sort("ts").row(0, named=True)
    assert first2["ts"] - timedelta(seconds=first2["interval_s"]) == last1
    assert row(day1, "vda", "2026-11-22T11:03:46")["iops"] == 11646.0  # '00:00:00' local


# ---- truncation --------------------------------------------------------------------------


def test_cut_mid_line_drops_the_partial_interval() -> None:
    data = (SAR / f"{V12}-sar-u-d-restart.txt").read_bytes()
    cut = data.index(b"11:03:39          vda") + 30  # inside the vda row of 11:03:39
    src = Source(path="cut.txt")
    frame = sar_text.parse(data[:cut], src)
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * 6  # whole intervals
    assert frame.df["ts"].max() == utc("2026-11-22T11:03:38")
    assert any("cut off" in n for n in src.notes)


def test_cut_at_a_line_end_inside_an_interval() -> None:
    data = (SAR / f"{V12}-sar-u-d-restart.txt").read_bytes()
    cut = data.index(b"11:03:40        loop2")  # loop0, loop1 of 11:03:40 are complete lines
    src = Source(path="cut.txt")
    frame = sar_text.parse(data[:cut], src)
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * 7
    assert any("partial interval" in n for n in src.notes)


def test_cut_between_intervals_keeps_everything() -> None:
    data = (SAR / f"{V12}-sar-u-d-restart.txt").read_bytes()
    cut = data.index(b"11:03:40        loop0")
    src = Source(path="cut.txt")
    frame = sar_text.parse(data[:cut], src)
    assert len(frame) == 28 and not any("partial" in n for n in src.notes)


# ---- bad input ---------------------------------------------------------------------------

GOOD = ("Linux 6.1.0 (box) \t11/22/26 \t_x86_64_\t(2 CPU)\n\n"
        "10:00:00          DEV       tps     rkB/s     wkB/s   areq-sz    aqu-sz     await"
        "     %util\n"
        "10:00:01          sda      1.00      2.00      3.00      4.00      0.50      6.00"
        "      7.00\n"
        "10:00:01          sdb      1.00      2.00      3.00      4.00      0.50      6.00"
        "      7.00\n"
        "10:00:02          sda      1.00      2.00      3.00      4.00      0.50      6.00"
        "      7.00\n"
        "10:00:02          sdb      1.00      2.00      3.00      4.00      0.50      6.00"
        "      7.00\n")


def test_small_text_golden() -> None:
    frame, _src = parse_text(GOOD, host="ignored")
    assert len(frame) == 4
    r = row(frame, "sdb", "2026-11-22T10:00:02")
    assert (r["host"], r["interval_s"], r["iops"], r["areq_kB"], r["util_pct"]) == (
        "box", 1.0, 1.0, 4.0, 7.0)


_SDB = "10:00:01          sdb      1.00"
_NOT_A_NUMBER = GOOD.replace(_SDB, _SDB.replace("1.00", "1.x0"), 1)
_EXTRA_FIELD = GOOD.replace(_SDB + "      2.00      3.00      4.00      0.50      6.00      7.00",
                            _SDB + "      2.00      3.00      4.00      0.50      6.00      7.00"
                            "      8.00", 1)


_LETTER_FIRST = GOOD.replace(_SDB, _SDB.replace("1.00", "x.00"), 1)
_FIRST_ROW = GOOD.replace("10:00:01          sda      1.00", "10:00:01          sda      "
                          "n/a ", 1)


@pytest.mark.parametrize(("text", "line", "reason"), [
    (_NOT_A_NUMBER, 5, "column 'tps' is not a number: '1.x0'"),
    # a damaged first value makes a row look like a column header: still a bad sample
    (_LETTER_FIRST, 5, "column 'tps' is not a number: 'x.00'"),
    (_FIRST_ROW, 4, "column 'tps' is not a number: 'n/a'"),
    (_EXTRA_FIELD, 5, "9 fields where the header at line 3 has 8"),
])
def test_bad_row_names_file_line_and_reason(text: str, line: int, reason: str) -> None:
    assert text != GOOD
    with pytest.raises(InputFormatError) as exc:
        parse_text(text)
    assert (exc.value.path, exc.value.line_no, exc.value.reason) == ("mem.txt", line, reason)
    assert str(exc.value) == f"mem.txt:{line}: {reason}"
    frame, src = parse_text(text, lenient=True)
    assert src.skipped == 1 and len(frame) == 3
    assert src.skipped_examples == [f"line {line}: {reason}"]


def test_unrecognised_line() -> None:
    text = GOOD + "garbage here\n"
    with pytest.raises(InputFormatError, match=r"mem.txt:8: not a sar line"):
        parse_text(text)
    frame, src = parse_text(text, lenient=True)
    assert (len(frame), src.skipped) == (4, 1)


def test_sample_line_outside_a_section() -> None:
    text = GOOD.replace("10:00:02          sda", "\n10:00:02          sda")
    with pytest.raises(InputFormatError) as exc:
        parse_text(text)
    assert exc.value.line_no == 7 and "not under a column header" in exc.value.reason
    frame, src = parse_text(text, lenient=True)
    assert (len(frame), src.skipped) == (2, 2)


def test_time_running_backwards_is_refused() -> None:
    text = GOOD.replace("10:00:02          sda", "09:59:59          sda")
    with pytest.raises(InputFormatError) as exc:
        parse_text(text)
    assert exc.value.line_no == 6 and "not after the previous sample" in exc.value.reason


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    (("Linux 6.1.0 (box) \t11/22/26 \t_x86_64_\t(2 CPU)\n\n10:00:00        CPU     %user "
     "    %nice   %system   %iowait    %steal     %idle\n10:00:01        all      1.00      "
     "0.00      1.00      0.00      0.00     98.00\n"), "no device section"),
    ("10:00:00          DEV       tps\n10:00:01 sda 1.00\n", "no 'Linux <kernel>"),
    (GOOD.replace("11/22/26", "someday"), "banner without a readable date"),
])
def test_unusable_files(text: str, message: str) -> None:
    with pytest.raises(InputFormatError, match=message):
        parse_text(text)


def test_summary_lines_are_never_rows() -> None:
    text = GOOD + ("Average:          sda      1.00      2.00      3.00      4.00      0.50   "
                   "   6.00      7.00\n")
    frame, src = parse_text(text)
    assert len(frame) == 4 and any("1 summary line" in n for n in src.notes)


# ---- helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kind", "parent"), [
    ("dev8-0", "disk", None), ("dev8-17", "partition", "dev8-16"), ("dev7-3", "loop", None),
    ("dev9-0", "md", None), ("dev253-0", "other", None), ("dev202-1", "partition", "dev202-0"),
    ("sda", "disk", None), ("sda1", "partition", "sda"), ("nvme0n1p2", "partition", "nvme0n1"),
    ("dm-0", "dm", None), ("vg0-root", "dm", None), ("loop0", "loop", None),
    ("md127", "md", None), ("zram0", "ram", None), ("vda", "disk", None),
])
def test_device_kind_and_parent(name: str, kind: str, parent: str | None) -> None:
    assert sar_text.device_kind_and_parent(name) == (kind, parent)


@pytest.mark.parametrize(("text", "expected", "alt"), [
    ("03/28/16", date(2016, 3, 28), None),
    ("11/22/2026", date(2026, 11, 22), None),
    ("04/08/18", date(2018, 4, 8), date(2018, 8, 4)),
    ("22.11.2026", date(2026, 11, 22), None),
    ("2026-11-22", date(2026, 11, 22), None),
    ("28/03/16", date(2016, 3, 28), None),
    ("2026年11月22日", date(2026, 11, 22), None),
    ("12/31/69", date(1969, 12, 31), None),
])
def test_banner_dates(text: str, expected: date, alt: date | None) -> None:
    assert sar_text.parse_banner_date(text) == (expected, alt)


# ---- property: any sample sequence printed the sar way reads back exactly ------------------


def _render(start: datetime, gaps: list[int], values: list[list[float]], *, ampm: bool,
            pretty: bool) -> str:
    def clock(t: datetime) -> str:
        return t.strftime("%I:%M:%S %p") if ampm else t.strftime("%H:%M:%S")

    cols = ["tps", "rkB/s", "wkB/s", "dkB/s", "areq-sz", "aqu-sz", "await", "%util"]
    names = [*cols, "DEV"] if pretty else ["DEV", *cols]
    lines = [f"Linux 6.1.0 (prop) \t{start:%m/%d/%y} \t_x86_64_\t(4 CPU)", "",
             f"{clock(start):<11s}" + "".join(f" {c:>9s}" for c in names)]
    t = start
    for gap, vals in zip(gaps, values, strict=True):
        t += timedelta(seconds=gap)
        for d, dev in enumerate(("sda", "nvme0n1")):
            nums = "".join(f" {v + d:9.2f}" for v in vals)
            lines.append(f"{clock(t):<11s}" + (f"{nums} {dev}" if pretty else
                                                f" {dev:>9s}{nums}"))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2037, 1, 1)),
       gaps=st.lists(st.integers(1, 6 * 3600), min_size=1, max_size=8),
       seed=st.lists(st.integers(0, 9_999_999), min_size=8, max_size=8),
       ampm=st.booleans(), pretty=st.booleans())
def test_property_round_trip(start: datetime, gaps: list[int], seed: list[int], ampm: bool,
                             pretty: bool) -> None:
    start = start.replace(microsecond=0)
    values = [[(s * (i + 1)) % 100_000 / 100 for s in seed] for i in range(len(gaps))]
    frame, _ = parse_text(_render(start, gaps, values, ampm=ampm, pretty=pretty))
    df = frame.df.filter(pl.col("device") == "sda").sort("ts")
    ends = [start + timedelta(seconds=sum(gaps[:i + 1])) for i in range(len(gaps))]
    assert df["ts"].to_list() == [e.replace(tzinfo=UTC) for e in ends]
    assert df["interval_s"].to_list() == [float(g) for g in gaps]
    assert df["iops"].to_list() == [v[0] for v in values]
    assert df["util_pct"].to_list() == [v[7] for v in values]
    nv = frame.df.filter(pl.col("device") == "nvme0n1").sort("ts")
    assert nv["await_ms"].to_list() == [round(v[6] + 1, 2) for v in values]


# ---------------------------------------------------------------------------------------------
# a few reports at a time (iter_parse)
# ---------------------------------------------------------------------------------------------
def _report_cases() -> list[tuple[str, bytes, dict[str, object]]]:
    """Files of several reports, each led by its banner: the rotation's two days one after
    the other, sar -A three times over, the ksar export (footer included) twice, the DST
    fold twice; each whole, cut inside its last device section, with blanks after it and
    with a line of its second report lost; strict and lenient."""
    day1 = (SAR / "sysstat12.6.1-sar-dp-rotation-day1.txt").read_bytes()
    day2 = (SAR / "sysstat12.6.1-sar-dp-rotation-day2.txt").read_bytes()
    files = {
        "rotation": (day1 + day2, {}),
        "sar-A-x3": ((SAR / "sysstat12.6.1-sar-A.txt").read_bytes() * 3, {}),
        "ksar-x2": ((SAR / "ksar-sysstat11.6.1-sar-A.txt").read_bytes() * 2, {}),
        "dst-fold-x2": ((SAR / "sysstat12.6.1-sar-dp-dst-fold.txt").read_bytes() * 2,
                        {"tz": ZoneInfo("Europe/Berlin")}),
    }
    out: list[tuple[str, bytes, dict[str, object]]] = []
    for name, (data, kw) in files.items():
        lines = data.split(b"\n")
        second = len(lines) * 5 // 8
        last_dev = data.rindex(b"DEV")
        cases = {"whole": data,
                 "cut": data[:data.index(b"\n", last_dev + 200) + 40],
                 "blank-tail": data + b"\n  \n",
                 "line-lost": b"\n".join(lines[:second] + lines[second + 1:])}
        for case, text in cases.items():
            for lenient in (False, True):
                out.append((f"{name}:{case}:{lenient}", text, {**kw, "lenient": lenient}))
    return out


_REPORTS = _report_cases()


@pytest.mark.parametrize(("name", "data", "kw"), _REPORTS, ids=[c[0] for c in _REPORTS])
def test_reports_read_a_few_at_a_time(name: str, data: bytes, kw: dict[str, object]) -> None:
    """Cut before banners, each piece's last report read again with the next: the rows,
    notes and refused lines of one read of the whole file."""
    assert_pieces_agree(sar_text, data,
                        (300, 3_000) if len(data) < 50_000 else (40_000, 150_000), kw, name)


def test_a_date_read_either_way_is_named_once() -> None:
    """The same ambiguous banner date in three reports: named once in the note."""
    data = (SAR / "ksar-sysstat11.6.1-sar-A.txt").read_bytes() * 3
    src = Source(path="x")
    sar_text.parse(data, src)
    notes = [n for n in src.notes if n.startswith("banner date(s)")]
    assert notes == [("banner date(s) 04/08/18 read as month/day/year (C and en_US locales); "
                      "a day/month locale would read them the other way")]


def test_one_ksar_footer_at_the_end_holds_for_every_report(tmp_path: Path) -> None:
    """Two reports and one EndTime/EndTimeUTC footer after the last (ksar's export of two
    days): read in pieces from a file or from bytes, the first report is converted with the
    footer's offset too (it is looked up in the file before the reading starts), as when the
    file is read whole."""
    text = (SAR / "ksar-sysstat11.6.1-sar-A.txt").read_bytes()
    foot = text.index(b"## EndTime")
    data = text[:foot] + text[:foot] + text[foot:]
    whole = read_outcome(sar_text, data, None)
    assert any("stated by the file's EndTime/EndTimeUTC footer" in n for n in whole[1])
    assert read_outcome(sar_text, data, 40_000)[0].equals(whole[0])
    path = tmp_path / "two.txt"
    path.write_bytes(data)
    with path.open("rb") as fh:
        frames = list(sar_text.iter_parse(fh, Source(path=str(path)), chunk_bytes=40_000))
    assert len(frames) > 2  # (40 kB pieces: each report is read in parts)
    got = pl.concat([f.df for f in frames])
    assert got.sort(got.columns, nulls_last=True).equals(whole[0])


@pytest.mark.parametrize("compress", ["gzip", "xz"])
def test_one_ksar_footer_at_the_end_holds_in_a_compressed_file(
        tmp_path: Path, compress: str) -> None:
    """The same export compressed: the footer cannot be found before the reading starts, so
    the first piece without one decompresses the file a second time to find it; the first
    report is converted with its offset, as when the file is read whole."""
    text = (SAR / "ksar-sysstat11.6.1-sar-A.txt").read_bytes()
    foot = text.index(b"## EndTime")
    data = text[:foot] + text[:foot] + text[foot:]
    whole = read_outcome(sar_text, data, None)
    path = tmp_path / f"two.txt.{'gz' if compress == 'gzip' else 'xz'}"
    path.write_bytes(gzip.compress(data) if compress == "gzip" else lzma.compress(data))
    stream, kind = open_binary(path)
    assert kind == compress
    src = Source(path=str(path))
    with stream:
        frames = list(sar_text.iter_parse(stream, src, chunk_bytes=40_000))
    assert len(frames) > 2
    got = pl.concat([f.df for f in frames])
    assert got.sort(got.columns, nulls_last=True).equals(whole[0])
    assert sorted(src.notes) == whole[1]


# ---------------------------------------------------------------------------------------------
# one report in parts (iter_parse cuts inside a report)
# ---------------------------------------------------------------------------------------------
_ONE_REPORT = {  # fixture -> Source keywords
    f"{V12}-sar-u-d-midnight.txt": {"tz": posix_zone(META["midnight_tz"])},
    f"{V12}-sar-dp-dst-fold.txt": {"tz": posix_zone(META["fold_tz"])},
    f"{V12}-sar-u-d-live.txt": {},
    f"{V12}-sar-u-d-restart.txt": {},
    f"{V12}-sar-uALL-d-de_DE-Berlin.txt": {"tz": ZoneInfo("Europe/Berlin")},
    f"{V12}-sar-dp-en_US.txt": {},
    f"{V12}-sar-A.txt": {},
}


def _one_report_cases() -> list[tuple[str, bytes, dict[str, object]]]:
    out: list[tuple[str, bytes, dict[str, object]]] = []
    for name, kw in _ONE_REPORT.items():
        data = (SAR / name).read_bytes()
        lines = data.split(b"\n")
        mid = len(lines) // 2
        cases = {"whole": (data, False), "cut": (data[: len(data) * 2 // 3], False),
                 "line-lost": (b"\n".join(lines[:mid] + lines[mid + 1:]), True)}
        for case, (text, lenient) in cases.items():
            out.append((f"{name}:{case}:{lenient}", text, {**kw, "lenient": lenient}))
    return out


_ONE = _one_report_cases()


@pytest.mark.parametrize(("name", "data", "kw"), _ONE, ids=[c[0] for c in _ONE])
def test_one_report_read_in_parts(name: str, data: bytes, kw: dict[str, object]) -> None:
    """Pieces of 1 byte (2 kB for sar -A's 23 kB): every report is cut before its
    second-to-last interval, over and over (grouped sar -f sections and the interleaved
    ones of a live sar, a midnight, a DST repeated hour, a restart, --pretty, de_DE, every
    activity of sar -A): the rows, notes and refused lines of one read of the whole."""
    assert_pieces_agree(sar_text, data, (1,) if len(data) < 10_000 else (2_000,), kw, name)


def test_a_long_report_in_parts_keeps_its_days_and_cpu_context() -> None:
    """A grouped report (the CPU section, then the device section) over two midnights, read
    in 2 kB pieces: the device rows after each midnight are on the next day, their first
    interval after a cut is 10 s, and each carries the CPU row of its time (read pieces
    before, with the CPU section)."""
    times = [(datetime(2026, 11, 20, 23, 0) + timedelta(seconds=600 * k)) for k in range(150)]
    tod = [t.strftime("%H:%M:%S") for t in times]
    lines = ["Linux 6.1.0 (box) \t11/20/2026 \t_x86_64_\t(2 CPU)", "",
             f"{tod[0]}        CPU     %user     %nice   %system   %iowait    %steal     %idle"]
    lines += [f"{t}        all     {k % 90:5.2f}      0.00      1.00      0.00      0.00"
              f"     {99 - k % 90:5.2f}" for k, t in enumerate(tod[1:], 1)]
    dev_head = (f"{tod[0]}          DEV       tps     rkB/s     wkB/s   areq-sz    aqu-sz"
                "     await     svctm     %util")
    lines += ["", dev_head]
    lines += [f"{t}   {d:>11}  {k:8.2f}      0.00      0.00      0.00      0.00      0.00"
              "      0.00      0.00" for k, t in enumerate(tod[1:], 1) for d in ("sda", "sdb")]
    data = ("\n".join(lines) + "\n").encode()
    whole = sar_text.parse(data, Source(path="x")).df
    frames = list(sar_text.iter_parse(io.BytesIO(data), Source(path="x"), chunk_bytes=2_000))
    assert len(frames) > 5
    parts = SampleFrame.concat(frames).df
    assert parts.equals(whole)
    sda = parts.filter(pl.col("device") == "sda")
    assert sda["ts"].to_list() == [t.replace(tzinfo=UTC) for t in times[1:]]
    assert set(sda["interval_s"]) == {600.0}
    assert sda["cpu_user_pct"].to_list() == [float(k % 90) for k in range(1, 150)]
    assert sda["iops"].to_list() == [float(k) for k in range(1, 150)]


def test_cpu_context_of_two_hosts_with_the_same_times() -> None:
    """``cat`` of two hosts' reports of the same day: each host's device rows carry its own
    CPU row (they were joined on the time alone: the first host's CPU row won)."""
    a = (SAR / f"{V12}-sar-u-d-restart.txt").read_text()
    b = a.replace("(vm)", "(other)").replace("all     71.00", "all     11.00", 1)
    frame, _ = parse_text(a + b)
    first = frame.df.filter(pl.col("ts") == datetime(2026, 11, 22, 11, 3, 31, tzinfo=UTC))
    assert dict(first.group_by("host").agg(pl.col("cpu_user_pct").unique()).rows()) == {
        "vm": [71.0], "other": [11.0]}
