"""solaris-iostat: seed 001's quoted iostat -x outputs, documented -xn/-T layouts, refusals with
file:line, --lenient counts and cut-off files (fixtures described in tests/fixtures/NOTICE)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers.importing import (
    Outcome,
    assert_pieces_agree,
    reading_variants,
)

from iogauge.errors import InputFormatError
from iogauge.importers import solaris_iostat
from iogauge.importers.base import Source
from iogauge.importers.first_report import FirstReport
from iogauge.model import timeline

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "solaris-iostat"
SEED_X = FIX / "seed001-iostat-x.txt"
SEED_CP = FIX / "seed001-iostat-x5-cp-maxcontig6.txt"
SEED_MKFILE = FIX / "seed001-iostat-x2-mkfile-maxcontig6.txt"
XN = FIX / "doc-iostat-xcnpz-Td.txt"
XTC = FIX / "doc-iostat-xtc-Tu.txt"
EXCERPT = FIX / "goodus-excerpt-two-reports.txt"
START = datetime(2008, 2, 21, 10, 0, 0)


def parse(path: Path, data: bytes | None = None, **kw: object) -> tuple[pl.DataFrame, Source]:
    src = Source(path=str(path), **kw)  # type: ignore[arg-type]
    frame = solaris_iostat.parse(path.read_bytes() if data is None else data, src)
    return frame.df, src


def one(df: pl.DataFrame, device: str, ts: datetime | None = None) -> dict[str, object]:
    hit = df.filter(pl.col("device") == device)
    if ts is not None:
        hit = hit.filter(pl.col("ts") == ts)
    assert hit.height == 1, (device, ts, hit.height)
    return hit.to_dicts()[0]


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# seed 001's quoted outputs (no -T: start and interval come from the user)
# ---------------------------------------------------------------------------------------------
def test_untimestamped_without_options_is_numbered_on_the_relative_line() -> None:
    # a pasted excerpt ([Goodus] quotes iostat -x without -T): no start, no interval
    df, src = parse(SEED_X)
    assert set(df["ts"]) == {timeline.RELATIVE_EPOCH + timedelta(seconds=60)}  # report 1
    assert set(df["interval_s"]) == {timeline.NOMINAL_INTERVAL_S}
    assert any("relative time line" in n for n in src.notes)
    # --interval alone: the real spacing, still no clock time
    df, _ = parse(EXCERPT, interval_s=5.0)
    assert sorted(set(df["ts"])) == [timeline.RELATIVE_EPOCH + timedelta(seconds=s)
                                     for s in (5, 10)]
    # --start without an interval cannot place report 2
    with pytest.raises(InputFormatError, match="--interval") as err:
        parse(SEED_X, start=START)
    assert err.value.line_no is None


def test_an_excerpt_at_100pct_busy_starts_with_a_measured_report() -> None:
    # [Goodus]'s two reports pasted together: ssd2 at 100 %b in the first is no average
    # since boot, so that report is measured (and said so)
    df, src = parse(EXCERPT)
    assert not df["since_boot"].any()
    ssd2 = df.filter(pl.col("device") == "ssd2").sort("ts")
    assert ssd2["await_ms"].to_list() == [137.8, 5.6]
    assert ssd2["util_pct"].to_list() == [100.0, 7.0]
    assert any("measured interval" in n and "ssd2 is 100 % busy" in n for n in src.notes)
    # the user can say otherwise
    df, src = parse(EXCERPT, first_report=FirstReport.SINCE_BOOT)
    assert df.filter(pl.col("since_boot"))["ts"].unique().to_list() == [
        timeline.RELATIVE_EPOCH + timedelta(seconds=60)]
    assert any("--first-report since-boot" in n for n in src.notes)


def test_a_whole_capture_keeps_its_since_boot_report_unless_told_otherwise() -> None:
    df, src = parse(XTC)  # iostat -xtc -T u: starts at its first stamp, sd0 at 1 %b
    first = df["ts"].min()
    assert df.filter(pl.col("ts") == first)["since_boot"].all()
    assert any("since-boot average (iostat(8)" in n for n in src.notes)
    df, src = parse(XTC, first_report=FirstReport.MEASURED)
    assert not df["since_boot"].any()
    assert any("--first-report measured" in n for n in src.notes)


def test_a_file_that_starts_at_the_column_header_is_mid_capture() -> None:
    text = SEED_X.read_text()
    cut = text[text.index("\ndevice") + 1:]  # no title line: copied from a longer log
    df, src = parse(SEED_X, data=cut.encode())
    assert not df["since_boot"].any()
    assert any("starts mid-capture" in n for n in src.notes)


def test_seed_iostat_x_since_boot() -> None:
    df, src = parse(SEED_X, start=START, interval_s=5.0, host="svrdb1")
    assert df["device"].to_list() == ["fd0", "sd0", "sd1", "sd6", "ssd0"]
    # "sd0 0.9 0.1 7.2 0.4 0.0 0.0 11.9 0 0"
    r = one(df, "sd0")
    assert (r["r_iops"], r["w_iops"], r["r_kBps"], r["w_kBps"]) == (0.9, 0.1, 7.2, 0.4)
    assert r["iops"] == pytest.approx(1.0) and r["kBps"] == pytest.approx(7.6)
    assert r["await_ms"] == 11.9  # svc_t is the response time (iostat(8))
    assert r["svctm_ms"] is None  # -x does not split it
    assert (r["queue_wait_len"], r["active_len"], r["aqu_sz"]) == (0.0, 0.0, 0.0)
    assert (r["queue_wait_pct"], r["util_pct"]) == (0.0, 0.0)
    assert r["since_boot"] is True and r["interval_s"] == 5.0
    assert r["ts"] == utc(2008, 2, 21, 10, 0)
    assert r["host"] == "svrdb1" and r["source"] == "solaris-iostat"
    assert (r["device_kind"], one(df, "fd0")["device_kind"]) == ("disk", "other")
    assert any("since boot" in n for n in src.notes)


def test_seed_cp_with_maxcontig_6() -> None:
    df, _ = parse(SEED_CP, start=START, interval_s=5.0)
    # "ssd2 13.0 31.0 120.5 20650.3 0.0 6.0 137.8 2 100": 137.8 ms at 100 % busy
    r = one(df, "ssd2")
    assert (r["r_iops"], r["w_iops"], r["r_kBps"], r["w_kBps"]) == (13.0, 31.0, 120.5, 20650.3)
    assert (r["await_ms"], r["util_pct"], r["queue_wait_pct"]) == (137.8, 100.0, 2.0)
    assert (r["queue_wait_len"], r["active_len"], r["aqu_sz"]) == (0.0, 6.0, 6.0)
    # "sd0 492.4 0.0 10543.8 0.0 0.0 0.5 1.1 1 48"
    r = one(df, "sd0")
    assert (r["r_iops"], r["r_kBps"], r["await_ms"], r["util_pct"]) == (492.4, 10543.8, 1.1,
                                                                       48.0)
    # idle disks are zeros, not nulls
    r = one(df, "ssd1")
    assert (r["iops"], r["await_ms"], r["util_pct"]) == (0.0, 0.0, 0.0)


def test_seed_mkfile_with_maxcontig_6() -> None:
    df, _ = parse(SEED_MKFILE, start=START, interval_s=2.0)
    # "sd0 0.0 141.0 0.0 6743.3 7.5 168.2 1246.4 33 100"
    r = one(df, "sd0")
    assert (r["w_iops"], r["w_kBps"], r["await_ms"]) == (141.0, 6743.3, 1246.4)
    assert (r["queue_wait_len"], r["active_len"]) == (7.5, 168.2)
    assert r["aqu_sz"] == pytest.approx(175.7)
    assert (r["queue_wait_pct"], r["util_pct"]) == (33.0, 100.0)
    r = one(df, "ssd2")
    assert (r["r_iops"], r["w_iops"], r["await_ms"], r["util_pct"]) == (8.0, 4.0, 5.6, 7.0)


# ---------------------------------------------------------------------------------------------
# -xcnpz -T d: device last, cpu block, state change, zone abbreviation
# ---------------------------------------------------------------------------------------------
def test_xn_with_date_stamps() -> None:
    df, src = parse(XN, tz=ZoneInfo("Asia/Tokyo"))
    assert sorted(df["ts"].unique().to_list()) == [utc(2026, 11, 22, 1, 0, s)
                                                   for s in (0, 5, 10, 15)]
    t2 = utc(2026, 11, 22, 1, 0, 5)
    # "   13.0   31.0  120.5 20650.3  0.0  6.0    0.0  137.8   2 100 c1t2d0"
    r = one(df, "c1t2d0", t2)
    assert (r["queue_wait_ms"], r["svctm_ms"]) == (0.0, 137.8)
    assert r["await_ms"] == pytest.approx(137.8)  # wsvc_t + asvc_t
    assert (r["util_pct"], r["queue_wait_pct"], r["aqu_sz"]) == (100.0, 2.0, 6.0)
    assert r["since_boot"] is False and r["interval_s"] == 5.0
    # the cpu block before the report: " 4 21  0 75"
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_idle_pct"]) == (4.0, 21.0, 75.0)
    assert r["cpu_iowait_pct"] is None  # every wt is 0 (Solaris 10+)
    assert any("'wt'" in n for n in src.notes)
    # report 1 since boot; report 3 follows "<<device added: c1t3d0>>": since boot again
    flags = df.group_by("ts").agg(pl.col("since_boot").first()).sort("ts")["since_boot"]
    assert flags.to_list() == [True, False, True, False]
    assert set(df.filter(pl.col("since_boot"))["interval_s"]) == {5.0}
    # "    0.0  141.0    0.0 6743.3  7.5 168.2   53.2 1193.2  33 100 c1t2d0s0"
    r = one(df, "c1t2d0s0")
    assert (r["device_kind"], r["parent"]) == ("partition", "c1t2d0")
    assert (r["queue_wait_ms"], r["svctm_ms"]) == (53.2, 1193.2)
    assert r["await_ms"] == pytest.approx(1246.4)
    assert one(df, "fuji:/export/home")["device_kind"] == "other"
    assert one(df, "c1t3d0")["device_kind"] == "disk"
    # -z: idle devices are absent, not zero rows
    assert df.filter(pl.col("ts") == utc(2026, 11, 22, 1, 0, 15))["device"].to_list() == [
        "c1t2d0", "c1t2d0s0"]
    assert not any("abbreviation" in n for n in src.notes)


def test_zone_abbreviation_without_tz_is_noted() -> None:
    df, src = parse(XN)
    assert df["ts"].min() == utc(2026, 11, 22, 10, 0)
    assert any("'JST'" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# -xtc -T u: epoch stamps, tty+cpu on the first device line, measured wt
# ---------------------------------------------------------------------------------------------
def test_x_with_epoch_stamps_and_cpu_columns() -> None:
    df, src = parse(XTC)
    assert df.height == 9
    t2 = utc(2007, 11, 22, 1, 0, 10)  # 1195693210
    r = one(df, "sd0", t2)
    assert (r["await_ms"], r["queue_wait_pct"], r["util_pct"]) == (1246.4, 33.0, 100.0)
    assert r["interval_s"] == 10.0
    # "... 0  155   2  9  7 82" on sd0's line applies to the whole report
    for dev in ("sd0", "sd1", "nfs1"):
        r = one(df, dev, t2)
        assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
                r["cpu_idle_pct"]) == (2.0, 9.0, 7.0, 82.0)
    first = df.filter(pl.col("ts") == utc(2007, 11, 22, 1, 0, 0))
    assert first["since_boot"].all() and set(first["interval_s"]) == {10.0}
    assert not any("taken as UTC" in n for n in src.notes)  # epoch seconds are UTC


# ---------------------------------------------------------------------------------------------
# other layouts
# ---------------------------------------------------------------------------------------------
def test_megabytes_and_raw_comma_form() -> None:
    mb = ("1700000000\n                    extended device statistics\n"
          "    r/s    w/s   Mr/s   Mw/s wait actv wsvc_t asvc_t  %w  %b device\n"
          "   10.0    2.0    1.5    0.5  0.0  0.1    0.0    8.0   0   9 c0t0d0\n"
          "1700000005\n                    extended device statistics\n"
          "    r/s    w/s   Mr/s   Mw/s wait actv wsvc_t asvc_t  %w  %b device\n"
          "   20.0    4.0    2.0    0.25 0.0  0.2    0.0    9.0   0  19 c0t0d0\n")
    df, _ = parse(Path("mb.txt"), mb.encode())
    r = one(df, "c0t0d0", utc(2023, 11, 14, 22, 13, 25))
    assert (r["r_kBps"], r["w_kBps"], r["kBps"]) == (2048.0, 256.0, 2304.0)
    raw = ("extended device statistics\n"
           "device,r/s,w/s,kr/s,kw/s,wait,actv,svc_t,%w,%b,\n"
           "sd0,1.0,2.0,8.0,16.0,0.0,0.1,3.5,0,4\n")
    df, _ = parse(Path("raw.txt"), raw.encode(), start=START, interval_s=5.0)
    r = one(df, "sd0")
    assert (r["r_iops"], r["w_kBps"], r["await_ms"], r["util_pct"]) == (1.0, 16.0, 3.5, 4.0)


def test_interval_counts_are_refused() -> None:
    text = ("extended device statistics\n"
            "device    r/i    w/i   kr/i   kw/i wait actv  svc_t  %w  %b\n"
            "sd0       1.0    2.0    8.0   16.0  0.0  0.1    3.5   0   4\n")
    with pytest.raises(InputFormatError, match="-I") as err:
        parse(Path("i.txt"), text.encode(), start=START, interval_s=5.0)
    assert err.value.line_no == 2


# ---------------------------------------------------------------------------------------------
# bad input and --lenient
# ---------------------------------------------------------------------------------------------
def test_bad_value_and_field_count_name_the_line() -> None:
    lines = XTC.read_text().split("\n")
    assert lines[4].startswith("sd1")
    bad = lines.copy()
    bad[4] = bad[4].replace("0.3", "n/a")
    with pytest.raises(InputFormatError) as err:
        parse(XTC, "\n".join(bad).encode())
    assert err.value.line_no == 5 and "not all numbers" in err.value.reason
    assert str(err.value).startswith(f"{XTC}:5: ")
    bad = lines.copy()
    assert lines[10].startswith("sd1")
    bad[10] = bad[10] + " 9"  # line 11: sd1 of report 2 gets an 11th field
    with pytest.raises(InputFormatError, match="has 11 fields, expected 10") as err:
        parse(XTC, "\n".join(bad).encode())
    assert err.value.line_no == 11


def test_lenient_skips_and_counts() -> None:
    lines = XTC.read_text().split("\n")
    lines[4] = lines[4].replace("0.3", "n/a")
    lines[10] = lines[10] + " 9"
    df, src = parse(XTC, "\n".join(lines).encode(), lenient=True)
    assert src.skipped == 2 and df.height == 7
    assert [e.split(":")[0] for e in src.skipped_examples] == ["line 5", "line 11"]


def test_sniff() -> None:
    for f in FIX.glob("*"):
        assert solaris_iostat.sniff(f.read_text()), f
    linux = ("Linux 5.8.0-63-generic (host) \t01/02/2021 \t_x86_64_\t(2 CPU)\n\n"
             "avg-cpu:  %user   %nice %system %iowait  %steal   %idle\n"
             "           0.31    0.00    0.22    0.04    0.00   99.43\n\n"
             "Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s"
             "   wrqm/s  %wrqm w_await wareq-sz aqu-sz  %util\n"
             "sda              1.53     50.75     0.40  20.84    0.69    33.23    1.28    "
             "26.41     1.14  47.11    1.91    20.62   0.00   0.25\n")
    assert not solaris_iostat.sniff(linux)


# ---------------------------------------------------------------------------------------------
# cut-off files keep whole reports
# ---------------------------------------------------------------------------------------------
_XTC = XTC.read_bytes()
_FULL = solaris_iostat.parse(_XTC, Source(path=str(XTC))).df


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=_XTC.index(b"1195693210") + 1, max_value=len(_XTC) - 1))
def test_cut_anywhere_keeps_whole_reports(cut: int) -> None:
    df, src = parse(XTC, _XTC[:cut])
    full = _FULL.filter(pl.col("ts").is_in(df["ts"].unique().implode()))
    # cpu_iowait_pct is judged on the whole file (all-zero 'wt' = not measured), so a cut
    # that keeps only report 1 (wt 0) turns it null; every other value is the full file's
    keep = [c for c in df.columns if c != "cpu_iowait_pct"]
    assert df.select(keep).sort("ts", "device").equals(full.select(keep).sort("ts", "device"))
    assert df["ts"].n_unique() < _FULL["ts"].n_unique()
    # a note, unless the cut fell exactly between two reports (then nothing is missing)
    assert (any("ends inside its last report" in n for n in src.notes)
            or _XTC[cut:].startswith(b"1195"))


def test_cut_at_a_line_end_inside_a_report() -> None:
    text = _XTC[:_XTC.index(b"sd1", _XTC.index(b"1195693220"))]  # report 3 has only sd0
    df, src = parse(XTC, text)
    assert df["ts"].n_unique() == 2
    assert any("ends inside its last report" in n for n in src.notes)


def test_import_file_passes_start_and_interval() -> None:
    from iogauge.importers.registry import import_file

    res = import_file(SEED_CP, start=START, interval_s=5.0)
    assert res.format == "solaris-iostat" and res.detected
    assert len(res.frame) == 6 and res.skipped == 0
    assert res.frame.df["interval_s"].to_list() == [5.0] * 6


_XN = XN.read_bytes()
_TOKYO = ZoneInfo("Asia/Tokyo")


def test_cut_after_a_cpu_header_keeps_the_reports_before() -> None:
    """The file ends on an ``-n`` cpu block's " us sy wt id" line, before its values (this
    raised a bare ValueError from a strict zip of headers and values)."""
    at = _XN.index(b" us sy wt id\n", _XN.index(b"10:00:05")) + len(b" us sy wt id\n")
    df, src = parse(XN, _XN[:at], tz=_TOKYO)
    assert df["ts"].unique().to_list() == [utc(2026, 11, 22, 1, 0, 0)]
    full, _ = parse(XN, tz=_TOKYO)
    assert df.equals(full.filter(pl.col("ts") == utc(2026, 11, 22, 1, 0, 0))
                     .with_columns(df["cpu_iowait_pct"]))
    assert any("ends inside its last report" in n for n in src.notes)


@pytest.mark.parametrize("lenient", [False, True])
def test_every_cut_of_the_n_file_imports_or_is_refused(lenient: bool) -> None:
    """Cut at every line end, one byte before it and one after: whole reports come back, or
    an input error names the file; no other exception escapes."""
    ends = [i + 1 for i, b in enumerate(_XN) if b == ord("\n")]
    for cut in sorted({c + d for c in ends for d in (-1, 0, 1)} & set(range(1, len(_XN)))):
        refused: InputFormatError | None = None
        try:
            df, _src = parse(XN, _XN[:cut], tz=_TOKYO, lenient=lenient)
        except InputFormatError as exc:
            refused = exc
        if refused is not None:
            assert str(refused).startswith(str(XN)), (cut, refused)
        else:
            assert df["ts"].n_unique() <= 4, cut


def test_output_copied_from_its_column_header_on() -> None:
    """Untimestamped output without its first 'extended device statistics' title, or with
    blank lines before it: the same rows (the report ids of the lines before the first title
    wrapped round in UInt32, and a MemoryError followed). A shell prompt line before it is
    a stray line: refused, or skipped alone. (Without its title the file starts
    mid-capture, so its first report is measured: the rows are compared with that said.)"""
    kw = {"start": START, "interval_s": 5.0, "first_report": FirstReport.MEASURED}
    for path in (SEED_X, SEED_CP):
        data = path.read_bytes()
        whole, _ = parse(path, data, **kw)
        for text in (data.split(b"\n", 1)[1], b"\n" + data, b"\n  \n" + data.split(b"\n", 1)[1]):
            df, _ = parse(path, text, **kw)
            assert df.equals(whole), (path, text[:40])
        prompt = b"$ iostat -x 5\n" + data
        with pytest.raises(InputFormatError, match="before the iostat column header") as err:
            parse(path, prompt, **kw)
        assert err.value.line_no == 1
        df, src = parse(path, prompt, lenient=True, **kw)
        assert df.equals(whole) and src.skipped == 1


def test_lines_before_the_first_time_stamp_are_refused() -> None:
    """A -T file whose first time stamp line is missing: that report has no time, so its
    lines are refused by number (a SchemaError on null times before); lenient keeps the
    rest."""
    data = _XN.split(b"\n", 1)[1]
    with pytest.raises(InputFormatError, match="before the first time stamp") as err:
        parse(XN, data, tz=_TOKYO)
    assert err.value.line_no == 1
    df, src = parse(XN, data, tz=_TOKYO, lenient=True)
    full, _ = parse(XN, tz=_TOKYO)
    first = utc(2026, 11, 22, 1, 0, 0)
    assert df["ts"].min() > first
    keep = [c for c in df.columns if c not in ("since_boot", "interval_s")]
    assert df.select(keep).equals(full.filter(pl.col("ts") > first).select(keep))
    assert src.skipped == 7  # the cpu block (3 lines), the column header, 3 device lines


# ---------------------------------------------------------------------------------------------
# a piece at a time (iter_parse): the rows, notes and refusals of the whole file
# ---------------------------------------------------------------------------------------------
_VARIANTS = reading_variants(FIX, {"start": START, "interval_s": 5.0, "tz": _TOKYO})


@pytest.mark.parametrize(("name", "data", "kw"), _VARIANTS, ids=[v[0] for v in _VARIANTS])
def test_pieces_give_what_the_whole_file_gives(name: str, data: bytes,
                                                kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a line at a time) to 700 bytes, every report is read
    whole with what the reports before it left (its number and time, since-boot after a
    <<...>> line, the device list a cut last report is compared with): the same rows,
    notes and refused lines as one read of the whole file."""
    assert_pieces_agree(solaris_iostat, data, (1, 40, 250, 700), kw, name, relax=_wt_read_so_far)


def _wt_read_so_far(got: Outcome, whole: Outcome) -> tuple[Outcome, Outcome]:
    """Both outcomes without cpu_iowait_pct and the 'wt' notes when the pieces left it null
    up to some line: the one thing decided on what has been read so far, 'wt' all 0 in the
    first pieces (see test_wt_left_null_while_every_wt_read_so_far_is_0)."""
    if not any("cpu_iowait_pct is null up to line" in n for n in got[1]):
        return got, whole
    assert whole[0]["cpu_iowait_pct"].drop_nulls().ne(0).any()
    got = (got[0].drop("cpu_iowait_pct"), [n for n in got[1] if "'wt'" not in n], *got[2:])
    whole = (whole[0].drop("cpu_iowait_pct"), *whole[1:])
    return got, whole


def test_a_since_boot_report_after_a_change_in_the_piece_before() -> None:
    """The <<device added>> line ends report 2; report 3 averages since boot again, also
    when it is the first report of the next piece, and when that piece is read on for
    want of reports (the mark was lost there)."""
    expected = [utc(2026, 11, 22, 1, 0, 0), utc(2026, 11, 22, 1, 0, 10)]
    split = 0
    for chunk in range(30, len(_XN), 37):
        src = Source(path=str(XN), tz=_TOKYO)
        frames = list(solaris_iostat.iter_parse(io.BytesIO(_XN), src, chunk_bytes=chunk))
        split += len(frames) > 1
        df = pl.concat([f.df for f in frames])
        assert df.filter(pl.col("since_boot"))["ts"].unique().sort().to_list() == expected, \
            chunk
    assert split > 5


def test_wt_left_null_while_every_wt_read_so_far_is_0() -> None:
    """'wt' all 0 in the first piece: cpu_iowait_pct null there, as for a file whose every
    wt is 0; a later piece with a measured wt keeps it, and a note says where the nulls
    end."""
    first = _XTC[:_XTC.index(b"1195693210")]  # report 1: wt 0
    second = _XTC[_XTC.index(b"1195693210"):_XTC.index(b"1195693220")]  # wt 7
    data = b"".join(first.replace(b"1195693200", str(1195693200 + 10 * k).encode())
                    for k in range(5)) + second.replace(b"1195693210", b"1195693250")
    whole_src = Source(path="x")
    whole = solaris_iostat.parse(data, whole_src).df.filter(pl.col("device") == "sd0")
    assert whole["cpu_iowait_pct"].to_list() == [0.0] * 5 + [7.0]  # one piece: measured
    src = Source(path="x")
    frames = list(solaris_iostat.iter_parse(io.BytesIO(data), src,
                                            chunk_bytes=len(first) * 3))
    assert len(frames) > 1
    df = pl.concat([f.df for f in frames], how="diagonal_relaxed").filter(
        pl.col("device") == "sd0").sort("ts")
    iowait = df["cpu_iowait_pct"].to_list()
    assert iowait[:2] == [None, None] and iowait[-1] == 7.0, iowait
    assert any("cpu_iowait_pct is null up to line" in n for n in src.notes), src.notes


def test_a_utf16_file_read_in_pieces() -> None:
    """A capture saved as UTF-16 (a Windows editor): its line breaks are two bytes, so it
    is transcoded whole before it is cut (cut as bytes, no line would be whole)."""
    want, _ = parse(XN, tz=_TOKYO)
    for text in ("\ufeff" + _XN.decode()).encode("utf-16-le"), _XN.decode().encode("utf-16"):
        src = Source(path=str(XN), tz=_TOKYO)
        frames = list(solaris_iostat.iter_parse(io.BytesIO(text), src, chunk_bytes=64))
        assert pl.concat([f.df for f in frames]).equals(want)


def test_reports_without_stamps_then_with_them_are_refused() -> None:
    """A run without -T and then one with it in one file, read in pieces: refused by the
    line of the first stamp (read whole, the lines before it are refused as lines before
    the first stamp)."""
    data = SEED_CP.read_bytes() * 3 + _XTC
    stamp_line = data[:data.index(b"1195693200")].count(b"\n") + 1
    src = Source(path=str(SEED_CP), start=START, interval_s=5.0)
    with pytest.raises(InputFormatError, match="with and without -T") as err:
        list(solaris_iostat.iter_parse(io.BytesIO(data), src, chunk_bytes=600))
    assert err.value.line_no == stamp_line
    with pytest.raises(InputFormatError, match="before the first time stamp"):
        parse(SEED_CP, data, start=START, interval_s=5.0)
