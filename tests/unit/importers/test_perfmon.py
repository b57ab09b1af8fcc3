"""perfmon: PDH-CSV/TSV 4.0 from relog, typeperf and logman (fixtures built from Microsoft's
documented layout with seed 002's numbers, see tests/fixtures/NOTICE); encodings, time
zones, blank samples, refusals with file:line, and a property test of the frame rules."""

from __future__ import annotations

import io
import math
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iogauge.errors import InputFormatError
from iogauge.importers import perfmon
from iogauge.importers.base import Source
from iogauge.importers.io import HEAD_BYTES
from iogauge.importers.perfmon import body as perfmon_body
from iogauge.importers.perfmon import decoding as perfmon_decoding
from iogauge.importers.registry import detect, import_file
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "perfmon"
RELOG = FIX / "relog-utf16-azure-2hosts.csv"
TYPEPERF = FIX / "typeperf-utf8-standard-ssd-hdd.csv"
LOGMAN = FIX / "logman-cp1252-mountpoint.csv"
TSV = FIX / "relog-tsv-utc.tsv"
ROOT = Path(__file__).resolve().parents[3]
REL = 1e-12


def parse(data: bytes, path: str = "x.csv", **kw: object) -> tuple[pl.DataFrame, Source]:
    src = Source(path=path, **kw)  # type: ignore[arg-type]
    return perfmon.parse(data, src).df, src


def one(df: pl.DataFrame, host: str, device: str, ts: datetime) -> dict[str, object]:
    hit = df.filter((pl.col("host") == host) & (pl.col("device") == device)
                    & (pl.col("ts") == ts))
    assert hit.height == 1, (host, device, ts, hit.height)
    return hit.to_dicts()[0]


def close(got: object, want: float) -> bool:
    return isinstance(got, float) and math.isclose(got, want, rel_tol=REL, abs_tol=1e-12)


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# sniffing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(FIX.iterdir()), ids=lambda p: p.name)
def test_every_fixture_is_detected_as_perfmon(path: Path) -> None:
    assert detect(path.read_bytes()[:HEAD_BYTES], str(path)) == "perfmon"


@pytest.mark.parametrize("text", [
    '{"fio version" : "fio-3.33"}',
    "   8       0 sda 1 2 3 4 5 6 7 8 0 9 10\n",
    "Linux 6.1.0 (host) \t04/15/2024 \t_x86_64_\t(2 CPU)\n",
    '"Time","\\\\HOST\\LogicalDisk(C:)\\Disk Reads/sec"\n',  # no PDH format cell
    "",
])
def test_sniff_refuses_other_text(text: str) -> None:
    assert not perfmon.sniff(text)


def test_sniff_accepts_leading_blank_line_and_bom() -> None:
    assert perfmon.sniff('\ufeff\r\n"(PDH-CSV 4.0) (Coordinated Universal Time)(0)","x"')
    assert perfmon.sniff('"(PDH-TSV 4.0) (UTC)(0)"\t"x"')


# ---------------------------------------------------------------------------------------------
# relog, UTF-16 LE with BOM: two Azure VMs (seed 002), _Total, Processor, Memory
# ---------------------------------------------------------------------------------------------
def test_relog_utf16_devices_kinds_parents() -> None:
    df, src = parse(RELOG.read_bytes(), str(RELOG))
    # 3 sample lines x (4 devices on SQL01 + 2 on SQL02); the empty first sample gives none
    assert df.height == 18
    devs = df.select("host", "device", "device_kind", "parent").unique().sort("host", "device")
    assert devs.rows() == [
        ("AZVM-SQL01", "0 C:", "physical_disk", None),
        ("AZVM-SQL01", "2 E:", "physical_disk", None),
        ("AZVM-SQL01", "C:", "logical_disk", "0 C:"),
        ("AZVM-SQL01", "E:", "logical_disk", "2 E:"),
        ("AZVM-SQL02", "1 F:", "physical_disk", None),
        ("AZVM-SQL02", "F:", "logical_disk", "1 F:"),
    ]
    assert set(df["source"]) == {"perfmon"}
    assert not df["since_boot"].any() and not df["reset"].any()
    notes = " | ".join(src.notes)
    assert "_Total instances skipped" in notes
    assert "Memory" in notes
    assert "% Disk Time" in notes
    assert "relog leaves the first sample empty" in notes
    SampleFrame(df).validate()


def test_relog_utf16_premium_ssd_golden() -> None:
    df, _ = parse(RELOG.read_bytes(), str(RELOG))
    # "04/15/2024 11:00:15.002" Tokyo, header bias -540: UTC = local - 9 h
    r = one(df, "AZVM-SQL01", "E:", utc(2024, 4, 15, 2, 0, 15, 2000))
    # the empty first sample at 11:00:00.000 opens the interval
    assert r["interval_s"] == pytest.approx(15.002, rel=REL)
    assert close(r["r_await_ms"], 0.0035123456789012343 * 1000)  # Avg. Disk sec/Read
    assert close(r["w_await_ms"], 0.0)
    assert close(r["await_ms"], 0.0035123456789012348 * 1000)
    assert close(r["r_iops"], 5000.266666666666)
    assert close(r["w_iops"], 0.0)
    assert close(r["iops"], 5000.266666666666)
    assert close(r["r_kBps"], 20481092.266666666 / 1024)
    assert close(r["kBps"], 20481092.266666666 / 1024)
    assert close(r["aqu_sz"], 17.562)
    assert close(r["inflight"], 18.0)
    assert close(r["util_pct"], 100 - 0.4)  # % Idle Time 0.4; % Disk Time 1756.2 ignored
    assert close(r["r_areq_kB"], 4.0)
    assert close(r["w_areq_kB"], 0.0)
    assert close(r["areq_kB"], 4.0)
    assert close(r["split_iops"], 0.0)
    # Processor(_Total) of the same host and line
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_idle_pct"]) == (12.5, 6.25, 81.25)
    assert r["cpu_iowait_pct"] is None  # Windows has no iowait


def test_relog_utf16_tens_of_ms_host() -> None:
    df, _ = parse(RELOG.read_bytes(), str(RELOG))
    r = one(df, "AZVM-SQL02", "F:", utc(2024, 4, 15, 2, 0, 15, 2000))
    assert close(r["r_await_ms"], 31.2) and close(r["w_await_ms"], 42.1)
    assert close(r["await_ms"], 0.03484304423359615 * 1000)
    assert close(r["r_kBps"], 32650035.2 / 1024) and close(r["w_kBps"], 16390553.6 / 1024)
    assert close(r["r_areq_kB"], 64.0) and close(r["w_areq_kB"], 64.0)
    assert close(r["util_pct"], 100.0) and close(r["split_iops"], 1.5)
    assert (r["cpu_user_pct"], r["cpu_system_pct"]) == (3.125, 9.375)
    peaks = df.filter(pl.col("device") == "F:")["r_await_ms"].to_list()
    assert peaks == pytest.approx([31.2, 45.7, 28.9], rel=REL)


# ---------------------------------------------------------------------------------------------
# typeperf to a console: blank first line, first sample with values, trailer, UTF-8
# ---------------------------------------------------------------------------------------------
def test_typeperf_standard_ssd_vs_hdd_peaks() -> None:
    df, src = parse(TYPEPERF.read_bytes(), str(TYPEPERF))
    assert df.height == 16
    s = df.filter(pl.col("device") == "S:").sort("ts")
    h = df.filter(pl.col("device") == "H:").sort("ts")
    # seed 002: ~3-4 ms on average, peaks ~25 ms (Standard SSD) vs ~50 ms (Standard HDD)
    assert s["r_await_ms"].to_list() == pytest.approx([3.1, 3.6, 24.9, 3.4], rel=REL)
    assert h["r_await_ms"].to_list() == pytest.approx([3.8, 4.2, 49.7, 3.5], rel=REL)
    assert s["r_iops"].to_list() == [500.0, 499.0, 512.0, 500.0]
    # "11/12/2024 01:59:57.123" Pacific Standard Time (480): UTC = local + 8 h
    assert s["ts"][0] == utc(2024, 11, 12, 9, 59, 57, 123000)
    # first line has values: one sampling interval (median spacing 1.001 s)
    assert s["interval_s"].to_list() == pytest.approx([1.001, 1.001, 1.002, 1.001], rel=REL)
    assert h["util_pct"].to_list() == pytest.approx([20.0, 21.0, 100.0, 18.5], rel=REL)
    assert s["parent"].to_list() == ["1 S:"] * 4
    notes = " | ".join(src.notes)
    assert "2 line(s) after the last sample" in notes
    assert "first sample has values" in notes


# ---------------------------------------------------------------------------------------------
# logman in the ANSI code page: mount point, volume without letter, spanned volume, gaps
# ---------------------------------------------------------------------------------------------
def test_logman_cp1252_golden() -> None:
    df, src = parse(LOGMAN.read_bytes(), str(LOGMAN))
    assert set(df["device"]) == {"D:\\Données", "HarddiskVolume3", "G:", "K:", "3 G: K:",
                                 "4 K:"}
    parents = dict(df.select("device", "parent").unique().rows())
    assert parents["G:"] == "3 G: K:"
    assert parents["K:"] is None  # listed by two physical disks
    assert parents["HarddiskVolume3"] is None and parents["D:\\Données"] is None
    d = df.filter(pl.col("device") == "D:\\Données").sort("ts")
    # empty in the 09:00:30.500 line: no row; the next covers 30 s (Romance Daylight, -120)
    assert d["ts"].to_list() == [utc(2024, 6, 2, 7, 0, 15, 500000),
                                 utc(2024, 6, 2, 7, 0, 45, 500000)]
    assert d["interval_s"].to_list() == [15.0, 30.0]
    assert d["r_iops"].to_list() == [120.0, 150.0]
    assert d["util_pct"].to_list() == pytest.approx([29.0, 35.0], rel=REL)
    hv = one(df, "PARIS-DB1", "HarddiskVolume3", utc(2024, 6, 2, 7, 0, 45, 500000))
    assert hv["util_pct"] == 0.0  # % Idle Time 100.2 -> clipped at 0
    k = one(df, "PARIS-DB1", "K:", utc(2024, 6, 2, 7, 0, 45, 500000))
    assert k["r_iops"] is None and close(k["r_await_ms"], 12.5)  # "-1" -> null
    notes = " | ".join(src.notes)
    assert "Windows-1252" in notes and "spanned volume" in notes
    assert "1 negative or non-finite" in notes


def test_tsv_relog_utc() -> None:
    df, src = parse(TSV.read_bytes(), str(TSV))
    assert df["ts"].to_list() == [utc(2025, 1, 1, 0, 1), utc(2025, 1, 1, 0, 2)]
    assert df["interval_s"].to_list() == [60.0, 60.0]
    r = df.row(0, named=True)
    assert close(r["iops"], 250.5) and close(r["await_ms"], 2.1)
    assert close(r["kBps"], 1026048 / 1024) and close(r["areq_kB"], 4.0)
    assert close(r["util_pct"], 100 - 90.25)
    assert r["r_iops"] is None  # Disk Reads/sec not logged: not measured
    assert not any("assumed" in n or "taken as UTC" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# encodings: the same log in every encoding Windows tools write
# ---------------------------------------------------------------------------------------------
def _non_ascii_log() -> str:
    return ('"(PDH-CSV 4.0) (W. Europe Standard Time)(-60)",'
            '"\\\\SRV\\LogicalDisk(D:\\Bänder)\\Disk Reads/sec",'
            '"\\\\SRV\\LogicalDisk(D:\\Bänder)\\Avg. Disk sec/Read"\r\n'
            '"01/10/2024 08:00:00.000"," "," "\r\n'
            '"01/10/2024 08:00:10.000","12.5","0.004"\r\n'
            '"01/10/2024 08:00:20.000","13","0.005"\r\n')


@pytest.mark.parametrize(("encoding", "bom"), [
    ("utf-8", b""), ("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"),
    ("utf-16-be", b"\xfe\xff"), ("utf-16-le", b""), ("cp1252", b""),
])
def test_encodings_give_the_same_frame(encoding: str, bom: bytes) -> None:
    data = bom + _non_ascii_log().encode(encoding)
    df, _ = parse(data)
    assert df["device"].to_list() == ["D:\\Bänder", "D:\\Bänder"]
    assert df["r_iops"].to_list() == [12.5, 13.0]
    assert df["r_await_ms"].to_list() == pytest.approx([4.0, 5.0], rel=REL)
    assert df["ts"].to_list() == [utc(2024, 1, 10, 7, 0, 10), utc(2024, 1, 10, 7, 0, 20)]


def test_typeperf_fixture_in_utf16_equals_utf8() -> None:
    text = TYPEPERF.read_bytes().decode("utf-8")
    a, _ = parse(TYPEPERF.read_bytes())
    b, _ = parse(b"\xff\xfe" + text.encode("utf-16-le"))
    assert a.equals(b)


# A stream is read as to_utf8 reads the same bytes, whatever the pieces: ASCII pieces by
# their low bytes, the first non-ASCII piece and all after it by the codec (a surrogate pair
# or a code unit split between pieces included), an odd last byte as U+FFFD.
_TEXT = st.text(alphabet=st.sampled_from([*'ab,"\r\n0.5 ', "ä", "€", "\U0001f4be"]),
                max_size=60)


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, form=st.sampled_from(["utf-16-le-bom", "utf-16-be-bom", "utf-16-le",
                                          "utf-8", "utf-8-bom", "cp1252"]),
       piece=st.integers(min_value=1, max_value=9), odd=st.booleans(),
       plain_file=st.booleans(), grow=st.integers(min_value=0, max_value=7))
def test_streamed_decoding_equals_whole(text: str, form: str, piece: int, odd: bool,
                                        plain_file: bool, grow: int) -> None:
    # plain_file: a real file, whose size pre-sizes the output (``grow`` bytes are appended
    # after that size was taken, as by a writer still at work); else a stream of unknown size
    if form == "cp1252":
        data = text.encode("cp1252", errors="replace")
    elif form.startswith("utf-8"):
        data = (b"\xef\xbb\xbf" if form.endswith("bom") else b"") + text.encode("utf-8")
    else:
        enc = form.removesuffix("-bom")
        bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}[enc]
        data = (bom if form.endswith("bom") else b"") + text.encode(enc)
    if odd:
        data += b"x"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perfmon_decoding, "READ_BYTES", piece)
        if not plain_file:
            streamed = perfmon.read_utf8(io.BytesIO(data))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "log.csv"
                path.write_bytes(data)
                extra = b"a\x00" * (grow // 2) + b"\x00" * (grow % 2)
                real_remaining = perfmon_decoding._remaining

                def remaining_then_grow(stream: io.BufferedReader) -> int:
                    size = real_remaining(stream)
                    with path.open("ab") as out:
                        out.write(extra)
                    return size

                mp.setattr(perfmon_decoding, "_remaining", remaining_then_grow)
                with path.open("rb") as f:
                    streamed = perfmon.read_utf8(f)
                data = path.read_bytes()  # as read: grown when the UTF-16 path sized it
    assert streamed == perfmon.to_utf8(data)


def test_registry_streams_a_utf16_file_and_gets_the_frame_parse_gives(tmp_path: Path) -> None:
    text = TYPEPERF.read_bytes().decode("utf-8")
    u16 = tmp_path / "typeperf16.csv"
    u16.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perfmon_decoding, "READ_BYTES", 1000)  # many pieces
        res = import_file(u16)
    assert res.input_bytes == u16.stat().st_size
    assert res.frame.df.equals(parse(TYPEPERF.read_bytes())[0])


# ---------------------------------------------------------------------------------------------
# time zones
# ---------------------------------------------------------------------------------------------
_NO_ZONE = ('"(PDH-CSV 4.0)","\\\\H\\PhysicalDisk(0 C:)\\Disk Writes/sec"\r\n'
            '"07/01/2024 12:00:00.000","1"\r\n"07/01/2024 12:00:05.000","2"\r\n')


def test_zone_from_tz_when_header_has_none() -> None:
    df, src = parse(_NO_ZONE.encode(), tz=ZoneInfo("Europe/Berlin"))
    assert df["ts"].to_list() == [utc(2024, 7, 1, 10, 0, 0), utc(2024, 7, 1, 10, 0, 5)]
    assert any("Europe/Berlin" in n for n in src.notes)


def test_no_zone_anywhere_means_utc_with_note() -> None:
    df, src = parse(_NO_ZONE.encode())
    assert df["ts"][1] == utc(2024, 7, 1, 12, 0, 5)
    assert any("taken as UTC" in n for n in src.notes)


def test_header_zone_wins_over_tz() -> None:
    data = ('"(PDH-CSV 4.0) (Eastern Daylight Time)(240)",'
            '"\\\\H\\PhysicalDisk(0 C:)\\Disk Writes/sec"\r\n'
            '"07/01/2024 12:00:00.000","1"\r\n"07/01/2024 12:00:05.000","2"\r\n')
    df, _ = parse(data.encode(), tz=ZoneInfo("Asia/Tokyo"))
    assert df["ts"][1] == utc(2024, 7, 1, 16, 0, 5)  # 12:00 EDT + 240 min


def test_localised_zone_name_with_parentheses() -> None:
    data = ('"(PDH-CSV 4.0) (Maroc (heure d\'été))(-60)",'
            '"\\\\H\\PhysicalDisk(0 C:)\\Disk Writes/sec"\r\n'
            '"07/01/2024 12:00:00.000","1"\r\n"07/01/2024 12:00:05.000","2"\r\n')
    df, _ = parse(data.encode())
    assert df["ts"][1] == utc(2024, 7, 1, 11, 0, 5)


# ---------------------------------------------------------------------------------------------
# refusals: file:line:reason, and --lenient
# ---------------------------------------------------------------------------------------------
_HEAD = '"(PDH-CSV 4.0) (UTC)(0)","\\\\H\\LogicalDisk(C:)\\Disk Reads/sec"\r\n'


def test_bad_value_names_line_and_column() -> None:
    data = (_HEAD + '"01/01/2024 00:00:00.000","1"\r\n"01/01/2024 00:00:01.000","1,5"\r\n'
            '"01/01/2024 00:00:02.000","3"\r\n')
    with pytest.raises(InputFormatError) as err:
        parse(data.encode(), path="bad.csv")
    assert err.value.line_no == 3
    assert "column 2" in err.value.reason and "'1,5'" in err.value.reason
    assert str(err.value).startswith("bad.csv:3:")
    df, src = parse(data.encode(), lenient=True)
    assert src.skipped == 1
    assert df["r_iops"].to_list() == [1.0, 3.0]
    # the refused line is gone entirely: the next covers 2 s, and the first line (which has
    # values) one sampling interval, the median spacing of what is left (2 s)
    assert df["interval_s"].to_list() == [2.0, 2.0]


_HEAD3 = ('"(PDH-CSV 4.0) (UTC)(0)","\\\\H\\LogicalDisk(C:)\\Disk Reads/sec",'
          '"\\\\H\\LogicalDisk(C:)\\Disk Writes/sec"\r\n')
_MALFORMED = [
    # (line 3 as written, the reason's words); each raised a bare polars error or lost the
    # line without a word before the lines were checked
    ('"01/01/2024 00:00:01.000","2"', "2 cells where the header has 3"),
    ('"01/01/2024 00:00:01.000","2","5","7"', "4 cells where the header has 3"),
    ('"01/01/2024 00:00:01.000","2","5', "not cells joined by the separator"),
    ('"01/01/2024 00:00:01.000","2"x,"5"', "not cells joined by the separator"),
]


@pytest.mark.parametrize(("line", "why"), _MALFORMED)
@pytest.mark.parametrize("where", ["first", "middle"])
def test_a_malformed_sample_line_is_refused_by_number(line: str, why: str, where: str) -> None:
    """A sample line with too few or too many cells, or a quote left open: strict names the
    line, lenient skips it alone and the other lines keep their values."""
    rows = ['"01/01/2024 00:00:00.000","1","2"', line, '"01/01/2024 00:00:02.000","3","6"',
            '"01/01/2024 00:00:03.000","4","8"']
    if where == "first":
        rows = rows[1:]
    data = (_HEAD3 + "\r\n".join(rows) + "\r\n").encode()
    bad_line = 2 if where == "first" else 3
    with pytest.raises(InputFormatError) as err:
        parse(data, path="bad.csv")
    assert err.value.line_no == bad_line
    assert why in err.value.reason
    df, src = parse(data, lenient=True)
    assert src.skipped == 1
    assert src.skipped_examples[0].startswith(f"line {bad_line}: ")
    kept = [1.0, 3.0, 4.0] if where == "middle" else [3.0, 4.0]
    assert df["r_iops"].to_list() == kept
    assert df["w_iops"].to_list() == [2 * v for v in kept]


@pytest.mark.parametrize("where", ["first", "middle"])
def test_blank_samples_stay_on_the_fast_path(monkeypatch: pytest.MonkeyPatch,
                                             where: str) -> None:
    """relog writes " " in every cell of a binary log's first sample. A blank last cell of a
    used counter is null as a missing one is, but the line is whole: it is read without the
    line check (4.9-6.1 s instead of 1.3 s on the 403 MB benchmark file), and a line
    cut short is still refused."""
    blank = '"01/01/2024 00:00:01.000"," "," "'
    rows = ['"01/01/2024 00:00:00.000","1","2"', blank, '"01/01/2024 00:00:02.000","3","6"',
            '"01/01/2024 00:00:03.000","4","8"']
    if where == "first":
        rows = rows[1:]
    data = (_HEAD3 + "\r\n".join(rows) + "\r\n").encode()
    want, _ = parse(data)
    kept = [1.0, 3.0, 4.0] if where == "middle" else [3.0, 4.0]  # (a blank sample: no row)
    assert want["r_iops"].to_list() == kept
    assert want["w_iops"].to_list() == [2 * v for v in kept]

    def no_line_check(*_a: object, **_k: object) -> None:
        raise AssertionError("the lines went to the line check")

    monkeypatch.setattr(perfmon_body, "_read_checked", no_line_check)
    got, _ = parse(data)
    assert got.equals(want)
    short = data.replace(b'" "," "', b'" "', 1)
    with pytest.raises(AssertionError, match="line check"):
        parse(short)


def test_bad_timestamp_and_time_going_back() -> None:
    bad_ts = _HEAD + '"2024-01-01 00:00:00","1"\r\n"01/01/2024 00:00:01.000","2"\r\n'
    with pytest.raises(InputFormatError, match="MM/DD/YYYY") as err:
        parse(bad_ts.encode())
    assert err.value.line_no == 2
    back = (_HEAD + '"10/27/2024 02:59:45.000","1"\r\n"10/27/2024 02:59:55.000","2"\r\n'
            '"10/27/2024 02:00:05.000","3"\r\n"10/27/2024 03:00:05.000","4"\r\n')
    with pytest.raises(InputFormatError, match="daylight-saving") as err:
        parse(back.encode())
    assert err.value.line_no == 4
    df, src = parse(back.encode(), lenient=True)
    assert df["r_iops"].to_list() == [1.0, 2.0, 4.0] and src.skipped == 1


def test_single_sample_and_empty_and_non_pdh_are_refused() -> None:
    with pytest.raises(InputFormatError, match="single sample"):
        parse((_HEAD + '"01/01/2024 00:00:00.000","1"\r\n').encode())
    with pytest.raises(InputFormatError, match="no sample lines"):
        parse(_HEAD.encode())
    with pytest.raises(InputFormatError, match="PDH format cell") as err:
        parse(b'"Time","\\\\H\\LogicalDisk(C:)\\Disk Reads/sec"\r\n')
    assert err.value.line_no == 1
    with pytest.raises(InputFormatError, match="no LogicalDisk or PhysicalDisk"):
        parse(b'"(PDH-CSV 4.0) (UTC)(0)","\\\\H\\Memory\\Available MBytes"\r\n'
              b'"01/01/2024 00:00:00.000","1"\r\n')


def test_cut_off_last_line_is_dropped_with_note() -> None:
    data = (_HEAD + '"01/01/2024 00:00:00.000","1"\r\n"01/01/2024 00:00:01.000","2"\r\n'
            '"01/01/2024 00:00:02.000","3.')
    df, src = parse(data.encode())
    assert df["r_iops"].to_list() == [1.0, 2.0]
    assert any("incomplete" in n for n in src.notes)
    complete = data + '25"'  # a last line without its line break but whole is kept
    df, _ = parse(complete.encode())
    assert df["r_iops"].to_list() == [1.0, 2.0, 3.25]


def test_import_file_end_to_end() -> None:
    res = import_file(RELOG)
    assert res.format == "perfmon" and res.detected and len(res.frame) == 18
    assert res.input_bytes == RELOG.stat().st_size


# ---------------------------------------------------------------------------------------------
# property: any PDH log gives a frame that satisfies every SampleFrame rule, with exact values
# (the importer builds its frame without re-validating; this is the proof it need not)
# ---------------------------------------------------------------------------------------------
_COUNTERS = list(perfmon.DISK_COUNTERS)
_value = st.one_of(st.just(" "), st.floats(min_value=-5.0, max_value=1e12, allow_nan=False),
                   st.integers(min_value=0, max_value=10**9))


@st.composite
def _pdh_log(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, str, str]], list[list[str]]]:
    hosts = draw(st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, max_size=2,
                          unique=True))
    cols: list[tuple[str, str, str, str]] = []
    for h in hosts:
        for obj, inst in draw(st.lists(st.sampled_from(
                [("LogicalDisk", "C:"), ("LogicalDisk", "HarddiskVolume1"),
                 ("PhysicalDisk", "0 C:"), ("LogicalDisk", "_Total"),
                 ("Processor", "_Total")]), min_size=1, max_size=4, unique=True)):
            counters = (["% User Time", "% Privileged Time", "% Idle Time"]
                        if obj == "Processor" else
                        draw(st.lists(st.sampled_from(_COUNTERS), min_size=1, max_size=5,
                                      unique=True)))
            cols += [(h, obj, inst, c) for c in counters]
    n = draw(st.integers(min_value=2, max_value=6))
    steps = draw(st.lists(st.integers(min_value=1, max_value=3600_000), min_size=n,
                          max_size=n))
    rows = []
    t = 1_700_000_000_000
    for step in steps:
        t += step
        stamp = datetime.fromtimestamp(t / 1000, tz=UTC).strftime("%m/%d/%Y %H:%M:%S.%f")[:-3]
        rows.append([stamp, *[str(draw(_value)) for _ in cols]])
    return "(PDH-CSV 4.0) (UTC)(0)", cols, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pdh_log())
def test_any_pdh_log_satisfies_the_frame_rules(log: tuple[str, list[tuple[str, str, str, str]],
                                                          list[list[str]]]) -> None:
    zone, cols, rows = log
    header = [zone] + [f"\\\\{h}\\{o}({i})\\{c}" for h, o, i, c in cols]
    text = "\r\n".join(",".join(f'"{c}"' for c in r) for r in [header, *rows]) + "\r\n"
    disk_cols = [k for k, (_h, o, i, _c) in enumerate(cols)
                 if o != "Processor" and i != "_Total"]
    values_present = [any(r[1 + k].strip() for k in disk_cols) for r in rows]
    # the only refusals this generator can provoke: no named disk instance, or no disk cell
    # with a value
    if not disk_cols or not any(values_present):
        with pytest.raises(InputFormatError, match=r"no LogicalDisk|no disk counter"):
            parse(text.encode())
        return
    df, _ = parse(text.encode())
    SampleFrame(df).validate()  # raises on any violated rule
    # exactness: every mapped cell reappears converted in its device's row
    by_key = {(r["host"], r["device"], r["ts"]): r for r in df.to_dicts()}
    for row in rows:
        ts = datetime.strptime(row[0], "%m/%d/%Y %H:%M:%S.%f").replace(tzinfo=UTC)
        for k in disk_cols:
            h, _o, inst, counter = cols[k]
            cell = row[1 + k].strip()
            if not cell:
                continue
            column, conv = perfmon.DISK_COUNTERS[counter.lower()]
            got = by_key[(h, inst, ts)][column]
            v = float(cell)
            if v < 0:
                assert got is None
                continue
            want = {"s->ms": v * 1000.0, "B->kB": v / 1024.0,
                    "idle->util": max(100.0 - v, 0.0)}.get(conv, v)
            assert got == pytest.approx(want, rel=1e-15, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# the benchmark's generator produces what the importer reads (kept in step)
# ---------------------------------------------------------------------------------------------
def test_benchmark_generator_round_trip(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _perfmon_speed as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    shape = bench.generate(tmp_path / "g.csv", 0.3, hosts=2, instances=4)
    res = import_file(tmp_path / "g.csv")
    assert res.format == "perfmon"
    assert len(res.frame) == shape["rows"] * shape["hosts"] * shape["instances"]
    u16 = bench.utf16_copy(tmp_path / "g.csv", tmp_path / "g16.csv")
    res16 = import_file(u16["path"])
    assert res16.frame.df.equals(res.frame.df)


def test_lenient_bad_line_before_an_empty_sample_keeps_rows_aligned() -> None:
    # line 2 refused (lenient), line 3 an empty sample, lines 4-5 kept: the kept rows must
    # be the right ones once the refused line is gone from the table
    data = (_HEAD + '"01/01/2024 00:00:00.000","oops"\r\n"01/01/2024 00:00:01.000"," "\r\n'
            '"01/01/2024 00:00:02.000","7"\r\n"01/01/2024 00:00:03.000","8"\r\n')
    df, src = parse(data.encode(), lenient=True)
    assert src.skipped == 1
    assert df["r_iops"].to_list() == [7.0, 8.0]
    assert df["ts"].to_list() == [utc(2024, 1, 1, 0, 0, 2), utc(2024, 1, 1, 0, 0, 3)]
    assert df["interval_s"].to_list() == [1.0, 1.0]


def test_benchmark_run_reports_its_figures(tmp_path: Path) -> None:
    """benchmarks/import_speed.py calls run(work_dir): check its plumbing on a tiny file."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import _perfmon_speed as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    res = bench.run(tmp_path, size_mb=0.3, repeats=1)
    for key in ("utf8", "utf16"):
        r = res[key]
        assert r["import_rows"] == res["shape"]["rows"] * 40
        assert r["read_csv_rows"] == res["shape"]["rows"]
        assert r["import_s"] > 0 and r["read_csv_s"] > 0 and r["import_peak_rss"] > 0
        assert r["time_ratio"] == r["import_s"] / r["read_csv_s"]
    assert "perfmon PDH-CSV" in bench.report(res)
    assert not list(tmp_path.iterdir())  # generated files removed
