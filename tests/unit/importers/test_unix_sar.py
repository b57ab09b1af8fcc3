"""unix-sar: the Solaris, AIX and HP-UX sar samples (vlsi/ksar, BSD; see tests/fixtures/NOTICE),
a bare sar -d, refusals with file:line, --lenient counts and cut-off files."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.importing import assert_pieces_agree

from iogauge.errors import InputFormatError
from iogauge.importers import aix_iostat, solaris_iostat, unix_sar
from iogauge.importers.base import Source

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SOL = FIX / "unix-sar" / "ksar-solaris11.3-sar.txt"
AIX = FIX / "unix-sar" / "ksar-aix7.2-sar.txt"
HPUX = FIX / "unix-sar" / "ksar-hpux11.31-sar.txt"
BARE = FIX / "unix-sar" / "doc-solaris-sar-d-noheader.txt"


def parse(path: Path, data: bytes | None = None, **kw: object) -> tuple[pl.DataFrame, Source]:
    src = Source(path=str(path), **kw)  # type: ignore[arg-type]
    frame = unix_sar.parse(path.read_bytes() if data is None else data, src)
    return frame.df, src


def row(df: pl.DataFrame, device: str, ts: datetime) -> dict[str, object]:
    hit = df.filter((pl.col("device") == device) & (pl.col("ts") == ts))
    assert hit.height == 1, (device, ts, hit.height)
    return hit.to_dicts()[0]


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# Solaris 11.3
# ---------------------------------------------------------------------------------------------
def test_solaris_golden() -> None:
    df, src = parse(SOL)
    assert df.height == 1432
    assert df["ts"].n_unique() == 30
    assert df["ts"].min() == utc(2017, 5, 26, 8, 20)
    assert df["ts"].max() == utc(2017, 5, 26, 18, 0)  # the Average block is not a row
    assert set(df["host"].unique()) == {"ala52s01"}
    assert set(df["source"].unique()) == {"unix-sar"}
    # "           mpt_sas3          4     0.1      38    2700     0.0     3.1" (08:20:00)
    r = row(df, "mpt_sas3", utc(2017, 5, 26, 8, 20))
    assert r["util_pct"] == 4.0
    assert r["aqu_sz"] == 0.1
    assert r["iops"] == 38.0
    assert r["kBps"] == 1350.0  # 2700 blocks of 512 B
    assert r["queue_wait_ms"] == 0.0
    assert r["svctm_ms"] == 3.1
    assert r["await_ms"] == pytest.approx(3.1)
    assert r["device_kind"] == "port"
    assert r["interval_s"] == 1200.0  # header 08:00:00 -> 08:20:00
    # sar -u of the same time stamp: "08:20:00       0       0       0      99"
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_idle_pct"]) == (0.0, 0.0, 99.0)
    assert r["cpu_iowait_pct"] is None  # SunOS 5.11: %wio is not measured
    assert any("%wio" in n for n in src.notes)
    # "           sd5.t3.m          8     0.2      38    2702     0.0     4.5"
    r = row(df, "sd5.t3.m", utc(2017, 5, 26, 8, 20))
    assert (r["util_pct"], r["aqu_sz"], r["kBps"], r["svctm_ms"]) == (8.0, 0.2, 1351.0, 4.5)
    assert (r["device_kind"], r["parent"]) == ("other", "sd5")
    r = row(df, "sd4,a", utc(2017, 5, 26, 8, 20))
    assert (r["device_kind"], r["parent"], r["iops"]) == ("partition", "sd4", 6.0)
    assert row(df, "sd4", utc(2017, 5, 26, 8, 20))["device_kind"] == "disk"
    # 08:40:00 -> 09:00:01: the interval is what the stamps say
    assert row(df, "iscsi0", utc(2017, 5, 26, 9, 0, 1))["interval_s"] == 1201.0
    # 12:20:00 has "%sys 8"
    assert row(df, "iscsi0", utc(2017, 5, 26, 12, 20))["cpu_system_pct"] == 8.0
    assert any("Average" in n for n in src.notes)
    assert src.skipped == 0


def test_solaris_local_time_with_tz() -> None:
    df, src = parse(SOL, tz=ZoneInfo("Europe/Berlin"))
    assert df["ts"].min() == utc(2017, 5, 26, 6, 20)  # CEST = UTC+2
    assert not any("taken as UTC" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# AIX 7.2
# ---------------------------------------------------------------------------------------------
def test_aix_golden() -> None:
    df, src = parse(AIX)
    assert df.height == 30219
    per_ts = df.group_by("ts").len()
    assert per_ts.height == 1439 and set(per_ts["len"]) == {21}
    assert set(df["host"].unique()) == {"tacora1"}
    # "            hdisk29     46      0.0      255   118049      0.0      1.9" (00:01:00)
    r = row(df, "hdisk29", utc(2020, 4, 20, 0, 1))
    assert r["util_pct"] == 46.0
    assert r["iops"] == 255.0
    assert r["kBps"] == 118049.0  # Kbs/s as printed
    assert r["svctm_ms"] == 1.9
    assert r["queue_wait_ms"] == 0.0
    # AIX 5.3+ avque = requests waiting to be sent to disk, not aqu-sz
    assert r["queue_wait_len"] == 0.0
    assert r["aqu_sz"] is None
    assert r["device_kind"] == "disk" and r["interval_s"] == 60.0
    # "00:01:00      17       3       0      80   24.00": AIX measures %wio
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (17.0, 3.0, 0.0, 80.0)
    # "            hdisk28      7      0.0       28    30308      0.1      4.8"
    r = row(df, "hdisk28", utc(2020, 4, 20, 0, 1))
    assert r["queue_wait_ms"] == 0.1 and r["await_ms"] == pytest.approx(4.9)
    # the last interval: "            hdisk29     79      0.0      410   214841      0.0      2.0"
    r = row(df, "hdisk29", utc(2020, 4, 20, 23, 59))
    assert (r["util_pct"], r["iops"], r["kBps"]) == (79.0, 410.0, 214841.0)
    # "01:01:01" (a late sample) gives a 61 s interval and 01:02:00 a 59 s one
    assert row(df, "hdisk0", utc(2020, 4, 20, 1, 1, 1))["interval_s"] == 61.0
    assert row(df, "hdisk0", utc(2020, 4, 20, 1, 2))["interval_s"] == 59.0
    assert row(df, "asm/localapps-108", utc(2020, 4, 20, 0, 1))["device_kind"] == "other"
    assert src.skipped == 0


# ---------------------------------------------------------------------------------------------
# HP-UX 11.31 (the sample is cut inside its sar -d section)
# ---------------------------------------------------------------------------------------------
def test_hpux_golden_and_cut_off() -> None:
    df, src = parse(HPUX)
    # the line reads "00:05:01    disk1    8.35   10.17      39     578   12.74    3.96"
    r = row(df, "disk1", utc(2018, 3, 21, 0, 5, 1))
    assert r["util_pct"] == 8.35
    assert r["aqu_sz"] == 10.17
    assert r["iops"] == 39.0
    assert r["kBps"] == 289.0
    assert r["queue_wait_ms"] == 12.74
    assert r["svctm_ms"] == 3.96
    assert r["await_ms"] == pytest.approx(16.70)
    assert r["interval_s"] == 300.0
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (19.0, 8.0, 29.0, 45.0)
    # "          disk103  100.00    0.50     265   33883    0.00   10.89"
    r = row(df, "disk103", utc(2018, 3, 21, 0, 5, 1))
    assert (r["util_pct"], r["aqu_sz"], r["kBps"], r["svctm_ms"]) == (100.0, 0.5, 16941.5,
                                                                       10.89)
    # the section ends without its Average block: 01:20:01 may be incomplete and is dropped
    assert df["ts"].max() == utc(2018, 3, 21, 1, 15, 1)
    assert df["ts"].n_unique() == 15
    assert df.height == 841
    assert any("cut off" in n and "01:20:01" in n for n in src.notes)
    assert set(df["host"].unique()) == {"lasv"}


# ---------------------------------------------------------------------------------------------
# a bare Solaris sar -d (no SunOS header): needs the date
# ---------------------------------------------------------------------------------------------
def test_bare_sar_d_needs_a_date() -> None:
    with pytest.raises(InputFormatError, match="--start") as err:
        parse(BARE)
    assert err.value.line_no == 1


def test_bare_sar_d() -> None:
    df, src = parse(BARE, start=datetime(1996, 8, 20), host="venus")
    assert df.height == 9 and set(df["host"]) == {"venus"}
    # the line reads "13:47:28   sd0              17      .7       2      41      .6    48.1"
    r = row(df, "sd0", utc(1996, 8, 20, 13, 47, 28))
    assert (r["util_pct"], r["aqu_sz"], r["kBps"], r["queue_wait_ms"]) == (17.0, 0.7, 20.5, 0.6)
    assert r["await_ms"] == pytest.approx(48.7)
    # after "13:47:40   unix restarts" the next interval starts at the restart
    assert row(df, "sd0", utc(1996, 8, 20, 13, 48, 28))["interval_s"] == 48.0
    assert row(df, "sd0", utc(1996, 8, 20, 13, 46, 58))["interval_s"] == 30.0
    assert any("restarts" in n for n in src.notes)
    assert row(df, "sd0,a", utc(1996, 8, 20, 13, 46, 58))["parent"] == "sd0"


def test_day_rollover_and_cpu_join() -> None:
    text = ("\nSunOS h1 5.9 Generic sun4u    06/24/2001\n\n"
            "23:50:00    %usr    %sys    %wio   %idle\n"
            "23:55:00       1       2       3      94\n"
            "00:00:00       5       6       7      82\n"
            "00:05:00       9      10      11      70\n\n"
            "Average        5       6       7      82\n\n"
            "23:50:00   device        %busy   avque   r+w/s  blks/s  avwait  avserv\n\n"
            "23:55:00   sd0               1     0.0       1       8     0.0     4.0\n"
            "00:00:00   sd0               2     0.1       2      16     0.5     5.0\n"
            "00:05:00   sd0               3     0.2       3      24     1.0     6.0\n\n"
            "Average    sd0               2     0.1       2      16     0.5     5.0\n")
    df, src = parse(Path("roll.txt"), text.encode())
    assert df["ts"].to_list() == [utc(2001, 6, 24, 23, 55), utc(2001, 6, 25, 0, 0),
                                  utc(2001, 6, 25, 0, 5)]
    assert df["interval_s"].to_list() == [300.0, 300.0, 300.0]
    assert df["cpu_user_pct"].to_list() == [1.0, 5.0, 9.0]
    # SunOS 5.9 still measured %wio
    assert df["cpu_iowait_pct"].to_list() == [3.0, 7.0, 11.0]
    assert not any("cut off" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# bad input: file:line and reason; --lenient counts
# ---------------------------------------------------------------------------------------------
def _solaris_lines() -> list[str]:
    return SOL.read_text().split("\n")


def test_bad_value_names_file_and_line() -> None:
    lines = _solaris_lines()
    assert lines[41].split()[0] == "mpt_sas2"  # line 42
    lines[41] = lines[41].replace("0.0", "x.y", 1)
    with pytest.raises(InputFormatError) as err:
        parse(SOL, "\n".join(lines).encode())
    assert err.value.line_no == 42
    assert str(err.value).startswith(f"{SOL}:42: ")
    assert "not all numbers" in err.value.reason


def test_wrong_field_count_names_line() -> None:
    lines = _solaris_lines()
    lines[43] = lines[43] + "   7"  # line 44: an extra column
    with pytest.raises(InputFormatError, match=r"has 8 fields, expected 7") as err:
        parse(SOL, "\n".join(lines).encode())
    assert err.value.line_no == 44


def test_stray_line_in_cpu_section() -> None:
    lines = _solaris_lines()
    lines[10] = "garbage in the cpu section"
    with pytest.raises(InputFormatError, match="unexpected line") as err:
        parse(SOL, "\n".join(lines).encode())
    assert err.value.line_no == 11


def test_lenient_counts_skipped_lines() -> None:
    lines = _solaris_lines()
    lines[41] = lines[41].replace("0.0", "x.y", 1)
    lines[43] = lines[43] + "   7"
    df, src = parse(SOL, "\n".join(lines).encode(), lenient=True)
    full, _ = parse(SOL)
    assert src.skipped == 2
    assert [e.split(":")[0] for e in src.skipped_examples] == ["line 42", "line 44"]
    assert df.height == full.height - 2


def test_empty_and_sectionless_inputs() -> None:
    with pytest.raises(InputFormatError, match="empty"):
        parse(Path("e.txt"), b"\n\n")
    cpu_only = SOL.read_text().split("\n")[:37]
    with pytest.raises(InputFormatError, match="no sar -d section"):
        parse(SOL, "\n".join(cpu_only).encode())


# ---------------------------------------------------------------------------------------------
# cut-off files keep whole intervals
# ---------------------------------------------------------------------------------------------
_SOL_BYTES = SOL.read_bytes()
_DISK_START = _SOL_BYTES.index(b"08:20:00   iscsi0")
_DISK_END = _SOL_BYTES.index(b"Average    iscsi0")
_FULL = unix_sar.parse(_SOL_BYTES, Source(path="full")).df


def _assert_whole_intervals(df: pl.DataFrame) -> None:
    full = _FULL.filter(pl.col("ts").is_in(df["ts"].unique().implode()))
    assert df.sort("ts", "device").equals(full.sort("ts", "device"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=_DISK_START + 2000, max_value=_DISK_END - 1))
def test_cut_anywhere_keeps_whole_intervals(cut: int) -> None:
    df, src = parse(SOL, _SOL_BYTES[:cut])
    _assert_whole_intervals(df)
    cut_text = _SOL_BYTES[_DISK_START:cut].decode()
    stamps = [ln for ln in cut_text.split("\n") if re.match(r"\d\d:\d\d:\d\d(\s|$)", ln)]
    # every interval before the one the cut fell into is kept (a time stamp printed after an
    # interval proves that interval whole)
    assert df["ts"].n_unique() == len(stamps) - 1
    assert any("cut off" in n for n in src.notes)


def test_cut_at_a_line_end_drops_the_partial_interval() -> None:
    text = _SOL_BYTES[:_SOL_BYTES.index(b"           sd4 ", _DISK_START + 5000)]
    df, _src = parse(SOL, text)
    _assert_whole_intervals(df)
    assert df["ts"].max() < _FULL["ts"].max()


# ---------------------------------------------------------------------------------------------
# sniffing: its own files only
# ---------------------------------------------------------------------------------------------
def test_sniff_accepts_its_files() -> None:
    for f in (SOL, AIX, HPUX, BARE):
        assert unix_sar.sniff(f.read_bytes()[:65536].decode()), f


def test_sniff_rejects_other_formats() -> None:
    linux_sar = ("Linux 3.10.0-957.el7.x86_64 (host) \t01/02/2020 \t_x86_64_\t(4 CPU)\n\n"
                 "12:00:01 AM       DEV       tps  rd_sec/s  wr_sec/s  avgrq-sz  avgqu-sz"
                 "     await     svctm     %util\n"
                 "12:10:01 AM    dev8-0      2.51      0.00     31.22     12.44      0.00"
                 "      0.86      0.38      0.10\n")
    assert not unix_sar.sniff(linux_sar)
    sniffers = {"unix-sar": unix_sar.sniff, "solaris-iostat": solaris_iostat.sniff,
                "aix-iostat": aix_iostat.sniff}
    # every other engineer's fixture (sysstat iostat/sar, perfmon, RMF, ...) is refused
    for f in sorted(FIX.rglob("*")):
        if not f.is_file() or f.name == "NOTICE" or f.parts[len(FIX.parts)] in sniffers:
            continue
        head = f.read_bytes()[:65536].decode("utf-8", "replace")
        assert not any(s(head) for s in sniffers.values()), f


def test_own_fixtures_sniff_as_exactly_one_of_the_unix_formats() -> None:
    sniffers = {"unix-sar": unix_sar.sniff, "solaris-iostat": solaris_iostat.sniff,
                "aix-iostat": aix_iostat.sniff}
    for fmt in sniffers:
        for f in sorted((FIX / fmt).glob("*")):
            head = f.read_bytes()[:65536].decode()
            assert [n for n, s in sniffers.items() if s(head)] == [fmt], f


# ---------------------------------------------------------------------------------------------
# long files: sections read in batches, rows in (ts, device) order
# ---------------------------------------------------------------------------------------------
def _days(path: Path, days: int, host: str | None = None) -> bytes:
    """``days`` copies of a sample, each dated one day after the one before (the header's
    MM/DD/YY[YY] moved on), as a month of daily reports concatenated; ``host`` renames it."""
    text = path.read_text()
    head = re.compile(r"^(\s*(?:SunOS|AIX|HP-UX)\s+)(\S+)(\s.*?)(\d{2})/(\d{2})/(\d{2}|\d{4})"
                      r"(\s*)$", re.MULTILINE)
    m = head.search(text)
    assert m is not None
    year = int(m.group(6)) + (2000 if len(m.group(6)) == 2 else 0)
    day0 = datetime(year, int(m.group(4)), int(m.group(5)))
    out = []
    for k in range(days):
        d = day0 + timedelta(days=k)
        stamp = d.strftime("%m/%d/%y" if len(m.group(6)) == 2 else "%m/%d/%Y")
        out.append(head.sub(lambda g, s=stamp: (f"{g.group(1)}{host or g.group(2)}{g.group(3)}"
                                                f"{s}{g.group(7)}"), text))
    return "".join(t if t.endswith("\n") else t + "\n" for t in out).encode()


@pytest.mark.parametrize("path", [SOL, AIX], ids=["solaris", "aix"])
def test_batches_of_sections_read_as_one(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten days of reports: read in batches of a few sections (cpu and disk sections of a day
    falling into different batches) or all at once, the rows are the same, and day k is the
    one-day parse moved on by k days."""
    data = _days(path, 10)
    whole = unix_sar.parse(data, Source(path="w")).df
    monkeypatch.setattr(unix_sar, "BATCH_LINES", 700)
    batched = unix_sar.parse(data, Source(path="b")).df
    assert batched.equals(whole)
    one = unix_sar.parse(path.read_bytes(), Source(path="one")).df
    assert whole.height == 10 * one.height
    assert whole["ts"].is_sorted()
    for k in (0, 4, 9):
        day = whole.slice(k * one.height, one.height)
        shifted = one.with_columns(pl.col("ts") + timedelta(days=k))
        assert day.equals(shifted), k
    assert "cpu_user_pct" in whole.columns
    assert whole["cpu_user_pct"].null_count() == one["cpu_user_pct"].null_count() * 10


def test_two_hosts_of_the_same_day_are_sorted_by_time_and_device(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hosts' reports of the same day in one file: their batches overlap in time, so the
    rows are sorted again by (ts, device), ties in file order (the first host first)."""
    monkeypatch.setattr(unix_sar, "BATCH_LINES", 700)
    data = _days(SOL, 1) + _days(SOL, 1, host="twin")
    df = unix_sar.parse(data, Source(path="two")).df
    one = unix_sar.parse(SOL.read_bytes(), Source(path="one")).df
    assert df.height == 2 * one.height
    assert df.sort("ts", "device", maintain_order=True).equals(df)
    assert df.filter(pl.col("host") == "twin").drop("host").equals(one.drop("host"))
    first, second = df.select("ts", "device", "host").rows()[:2]
    assert first[:2] == second[:2]
    assert (first[2], second[2]) == (one["host"][0], "twin")


def test_a_device_line_cut_short_is_refused_by_line() -> None:
    """A device line of the AIX sample cut in half (polars 2.1 panicked on this in the
    former per-section reading): strict names the line, lenient skips it alone."""
    lines = AIX.read_bytes().split(b"\n")
    assert lines[7922].split()[0] == b"hdisk28"  # line 7923
    lines[7922] = lines[7922][:len(lines[7922]) // 2]
    data = b"\n".join(lines)
    with pytest.raises(InputFormatError, match=r"has 3 fields, expected 7") as err:
        parse(AIX, data)
    assert err.value.line_no == 7923
    df, src = parse(AIX, data, lenient=True)
    full, _ = parse(AIX)
    assert src.skipped == 1
    assert df.height == full.height - 1


# ---------------------------------------------------------------------------------------------
# a report at a time (iter_parse)
# ---------------------------------------------------------------------------------------------
def _multi_day_cases() -> list[tuple[str, bytes, dict[str, object]]]:
    """Four days of the Solaris and HP-UX samples one after another: whole, cut inside the
    last day's sar -d section, the same day twice (times overlap), blanks at the end, a line
    of day 2 lost; strict and lenient."""
    out: list[tuple[str, bytes, dict[str, object]]] = []
    for path in (SOL, HPUX):
        days = _days(path, 4)
        one = path.read_bytes()
        lines = days.split(b"\n")
        day2 = len(lines) * 3 // 8
        last_dev = days.rindex(b"device")
        cases = {"days": days,
                 "cut": days[:days.index(b"\n", last_dev + (len(days) - last_dev) // 2) + 1],
                 "same-day-twice": one + one, "blank-tail": days + b"\n \n",
                 "line-lost": b"\n".join(lines[:day2] + lines[day2 + 1:])}
        for name, text in cases.items():
            for lenient in (False, True):
                out.append((f"{path.name}:{name}:{lenient}", text, {"lenient": lenient}))
    return out


_MULTI = _multi_day_cases()


@pytest.mark.parametrize(("name", "data", "kw"), _MULTI, ids=[c[0] for c in _MULTI])
def test_reports_read_a_piece_at_a_time(name: str, data: bytes, kw: dict[str, object]) -> None:
    """Cut before report header lines, each piece's last report read again with the next:
    the rows, notes and refused lines of one read of the whole file."""
    assert_pieces_agree(unix_sar, data, (3_000, 40_000, 150_000), kw, name)


def test_a_report_cut_inside_its_disk_section_then_another() -> None:
    """Half of the AIX report (cut inside a sar -d line), twice: the first cut line is the
    one refused (the second ends the file: dropped with a note). (Read as one batch, the
    sar -d sections of the two reports took the lines between them - the second report's
    header and its other sections - as device lines: 2,880 refused.)"""
    data = AIX.read_bytes()
    half = data[:len(data) // 2]
    src = Source(path=str(AIX), lenient=True)
    df = unix_sar.parse(half * 2, src).df
    assert src.skipped == 1, src.skipped_examples
    assert "fields, expected 7" in src.skipped_examples[0]
    once = unix_sar.parse(half, Source(path=str(AIX))).df
    # (the first half's last interval is kept but for its cut line: not at the file's end)
    assert 2 * once.height < df.height < 2 * once.height + 30
