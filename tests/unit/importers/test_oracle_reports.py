"""statspack / awr: Oracle text reports of several releases built from the documented layouts and
[Insight-SSD9]'s numbers -- wait events and file I/O golden values, release differences (cs vs s,
unit-suffixed averages, 8i counts), refusals with file:line, --lenient, cut-off files that keep
whole sections, several reports in one file, and sniffing."""

from __future__ import annotations

import gzip
import io
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iogauge.errors import InputFormatError
from iogauge.importers import awr, rmf, statspack
from iogauge.importers.base import Source
from iogauge.importers.oracle import grammar, pieces, vector
from iogauge.importers.registry import detect, import_file
from iogauge.model.waitevents import WaitEventFrame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SP8_HDD = FIXTURES / "statspack" / "sp_817_config5-1-1_hdd_cache1024m.txt"
SP8_SSD = FIXTURES / "statspack" / "sp_817_config5-2-1_ssd_cache1024m.txt"
SP10_HDD = FIXTURES / "statspack" / "sp_102_config5-1-2_hdd_cache128m.txt"
SP10_SSD = FIXTURES / "statspack" / "sp_102_config5-2-2_ssd_cache128m.txt"
AWR11_HDD = FIXTURES / "awr" / "awr_112_config5-1-1_hdd_cache1024m.txt"
AWR19_SSD = FIXTURES / "awr" / "awr_19c_config5-2-1_ssd_cache1024m.txt"
SCATTERED = "db file scattered read"


def parse(path: Path, data: bytes | None = None,
          **kw: object) -> tuple[pl.DataFrame, pl.DataFrame, Source]:
    module = awr if path.parent.name == "awr" else statspack
    src = Source(path=str(path), **kw)  # type: ignore[arg-type]
    frame = module.parse(path.read_bytes() if data is None else data, src)
    return frame.df, WaitEventFrame.concat(src.waits).df, src


def wait(waits: pl.DataFrame, section: str, event: str) -> dict[str, object]:
    hit = waits.filter((pl.col("section") == section) & (pl.col("event") == event))
    assert hit.height == 1, (section, event, hit.height)
    return hit.to_dicts()[0]


def dev(df: pl.DataFrame, device: str) -> dict[str, object]:
    hit = df.filter(pl.col("device") == device)
    assert hit.height == 1, (device, hit.height)
    return hit.to_dicts()[0]


def line_no(path: Path, text: str, nth: int = 0) -> int:
    return [i for i, line in enumerate(path.read_text().split("\n"), 1) if text in line][nth]


def avg_cs(row: dict[str, object]) -> float:
    """[Insight-SSD9]'s figure: Time Waited (1/100 s) / Waits."""
    time_s, waits = row["time_waited_s"], row["waits"]
    assert isinstance(time_s, float) and isinstance(waits, float)
    return time_s * 100 / waits


# ---------------------------------------------------------------------------------------------
# Statspack 8.1.7: centiseconds, counts, single-line file records
# ---------------------------------------------------------------------------------------------
def test_statspack_8i_waits_in_centiseconds() -> None:
    _, waits, src = parse(SP8_HDD)
    assert len(waits) == 15
    end = datetime(2007, 8, 21, 10, 1, 3, tzinfo=UTC)
    assert set(waits["ts"]) == {end} and set(waits["interval_s"]) == {61.0}
    assert set(waits["source"]) == {"statspack"} and set(waits["host"]) == {"dbsrv01"}
    assert set(waits["db_name"]) == {"ORCL"} and set(waits["instance"]) == {"orcl"}
    # "db file scattered read   20,004   0   14,773   7 ######"  (Total Wait Time (cs))
    r = wait(waits, "wait events", SCATTERED)
    assert (r["waits"], r["time_waited_s"], r["avg_wait_ms"]) == (20004.0, 147.73, 7.0)
    assert r["waits_per_txn"] is None  # '######': did not fit its column
    assert r["timeouts_pct"] is None  # 8i prints a Timeouts count, not a share
    # "Top 5 Wait Events": "db file scattered read   20004   14773 29.9" (% Total Wt Time is
    # a share of wait time, not of DB time: not mapped)
    top = wait(waits, "top timed events", SCATTERED)
    assert (top["waits"], top["time_waited_s"], top["pct_db_time"]) == (20004.0, 147.73, None)
    assert wait(waits, "background wait events", "log file parallel write")["waits"] == 32.0
    # idle events are kept as printed
    assert wait(waits, "wait events", "SQL*Net message from client")["time_waited_s"] == 312.45
    assert any("'#' shown" in n for n in src.notes)


def test_statspack_8i_file_io_from_counts() -> None:
    df, _, src = parse(SP8_HDD)
    assert df.height == 6  # 3 tablespaces + 3 files (no SYSAUX before 10g)
    # "USER_DATA  /u02/oradata/ORCL/user_data01.dbf  20,421  15.2  18.2  2  195  618.9"
    f = dev(df, "/u02/oradata/ORCL/user_data01.dbf")
    assert (f["device_kind"], f["parent"], f["host"]) == ("datafile", "USER_DATA", "dbsrv01")
    assert f["r_iops"] == 20421 / 61 and f["w_iops"] == 2 / 61  # no Reads/s column in 8i
    assert f["r_await_ms"] == 18.2
    assert f["r_areq_kB"] == 15.2 * 8  # Avg Blks Rd x db_block_size 8192
    assert f["w_await_ms"] is None and f["iops"] is None
    # nothing read from UNDOTBS1: blank Avg Rd / Avg Blks Rd become the 0.0 of "no request"
    u = dev(df.filter(pl.col("device_kind") == "datafile"), "/u01/oradata/ORCL/undotbs01.dbf")
    assert (u["r_iops"], u["r_await_ms"], u["r_areq_kB"]) == (0.0, 0.0, 0.0)
    t = dev(df, "USER_DATA")
    assert (t["device_kind"], t["r_await_ms"], t["r_areq_kB"]) == ("tablespace", 18.2, None)
    assert any("no Reads/s column (8i)" in n for n in src.notes)


def test_insight_ssd9_hdd_vs_ssd_average_wait_per_scattered_read() -> None:
    """[Insight-SSD9]'s table: (A)/(B) = 0.74 cs on HDD vs 0.37 cs on SSD (1 GB cache)."""
    _, hdd, _ = parse(SP8_HDD)
    _, ssd, _ = parse(SP8_SSD)
    assert round(avg_cs(wait(hdd, "wait events", SCATTERED)), 2) == 0.74
    assert round(avg_cs(wait(ssd, "wait events", SCATTERED)), 2) == 0.37
    # ... and with the 10.2 layout, whose seconds are printed whole (128 MB cache: 1.11 vs
    # 0.25 cs in [Insight-SSD9]), the ordering and the magnitude survive
    _, hdd10, _ = parse(SP10_HDD)
    _, ssd10, _ = parse(SP10_SSD)
    assert round(avg_cs(wait(hdd10, "wait events", SCATTERED)), 2) == 1.12  # 224 s / 20,078
    assert round(avg_cs(wait(ssd10, "wait events", SCATTERED)), 2) == 0.24  # 49 s / 20,128
    # the single-block reads suffer from the full scans on HDD ([Insight-SSD9]: "db file sequential
    # read" larger than "scattered" on the magnetic disk)
    seq = wait(hdd, "wait events", "db file sequential read")
    assert seq["avg_wait_ms"] == 538.0 and seq["time_waited_s"] == 224.32


# ---------------------------------------------------------------------------------------------
# Statspack 10.2: seconds, %Time -outs, per-second rates, two-line file records
# ---------------------------------------------------------------------------------------------
def test_statspack_10g_waits_and_top_events() -> None:
    _, waits, _ = parse(SP10_HDD)
    # "db file scattered read   20,078   0   224   11  1,673.2"
    r = wait(waits, "wait events", SCATTERED)
    assert (r["waits"], r["timeouts_pct"], r["time_waited_s"], r["avg_wait_ms"],
            r["waits_per_txn"]) == (20078.0, 0.0, 224.0, 11.0, 1673.2)
    # "Top 5 Timed Events": "CPU time   230   18.2" -- no waits, no average
    cpu = wait(waits, "top timed events", "CPU time")
    assert (cpu["waits"], cpu["time_waited_s"], cpu["avg_wait_ms"], cpu["pct_db_time"]) == (
        None, 230.0, None, 18.2)
    top = wait(waits, "top timed events", "read by other session")
    assert (top["waits"], top["time_waited_s"], top["avg_wait_ms"], top["pct_db_time"]) == (
        514.0, 468.0, 911.0, 37.0)
    assert waits.filter(pl.col("section") == "top timed events").height == 5
    assert set(waits["db_name"]) == {None} and set(waits["instance"]) == {"orcl"}
    assert set(waits["host"]) == {"dbsrv01"}  # "Host  Name:   dbsrv01"


def test_statspack_10g_file_and_tablespace_io() -> None:
    df, _, _ = parse(SP10_HDD)
    assert df.height == 8
    # "USER_DATA   /u02/oradata/ORCL/user_data01.dbf" /
    # "  20,737     340   27.3    15.1            2        0        514  911.1"
    f = dev(df, "/u02/oradata/ORCL/user_data01.dbf")
    assert (f["r_iops"], f["r_await_ms"], f["r_areq_kB"], f["w_iops"]) == (
        340.0, 27.3, 15.1 * 8, 0.0)
    assert f["parent"] == "USER_DATA"
    assert f["ts"] == datetime(2007, 8, 21, 11, 1, 3, tzinfo=UTC) and f["interval_s"] == 61.0
    # break on tablespace: the file lines name their tablespace once; the parent is still right
    parents = dict(df.filter(pl.col("device_kind") == "datafile")
                   .select("device", "parent").iter_rows())
    assert parents["/u01/oradata/ORCL/undotbs01.dbf"] == "UNDOTBS1"
    # Tablespace IO Stats prints 0.0 for Av Rd(ms) and nothing for Av Blks/Rd without reads
    undo = df.filter(pl.col("device") == "UNDOTBS1").to_dicts()[0]
    assert (undo["r_await_ms"], undo["r_areq_kB"], undo["w_iops"]) == (0.0, 0.0, 0.0)


def test_block_size_from_report_or_default() -> None:
    text = SP10_HDD.read_text()
    df16, _, _ = parse(SP10_HDD, text.replace("Std Block Size:         8K",
                                              "Std Block Size:        16K").encode())
    assert dev(df16, "/u02/oradata/ORCL/user_data01.dbf")["r_areq_kB"] == 15.1 * 16
    df0, _, src = parse(SP10_HDD, text.replace("Std Block Size:         8K", "").encode())
    assert dev(df0, "/u02/oradata/ORCL/user_data01.dbf")["r_areq_kB"] == 15.1 * 8
    assert any("converted with 8 KB blocks" in n for n in src.notes)


SP9 = """
STATSPACK report for

DB Name         DB Id    Instance     Inst Num Release     Cluster Host
------------ ----------- ------------ -------- ----------- ------- ------------
ORCL          1190380436 orcl                1 9.2.0.8.0   NO      dbsrv09

              Snap Id     Snap Time      Sessions Curs/Sess Comment
            --------- ------------------ -------- --------- -------------------
Begin Snap:         5 21-Aug-07 09:00:00      215       3.4
  End Snap:         6 21-Aug-07 09:15:00      215       3.6
   Elapsed:               15.00 (mins)

Top 5 Timed Events
~~~~~~~~~~~~~~~~~~                                                     % Total
Event                                               Waits    Time (s) Ela Time
-------------------------------------------- ------------ ----------- --------
db file scattered read                             20,004         148    39.12
CPU time                                                          123    32.51
          -------------------------------------------------------------
Wait Events for DB: ORCL  Instance: orcl  Snaps: 5 -6
-> s  - second
-> ordered by wait time desc, waits desc (idle events last)

                                                                   Avg
                                                     Total Wait   wait    Waits
Event                               Waits   Timeouts   Time (s)   (ms)     /txn
---------------------------- ------------ ---------- ---------- ------ --------
db file scattered read             20,004          0        148      7  1,667.0
          -------------------------------------------------------------
"""


def test_statspack_9i_layout() -> None:
    """9.2 (sprepins.sql): '% Total Ela Time' is a share of DB time, Timeouts a count."""
    df, waits, _ = parse(SP10_HDD, SP9.encode())
    assert df.height == 0  # no file I/O sections in this excerpt
    assert set(waits["host"]) == {"dbsrv09"} and set(waits["db_name"]) == {"ORCL"}
    assert set(waits["interval_s"]) == {900.0}
    assert set(waits["ts"]) == {datetime(2007, 8, 21, 9, 15, tzinfo=UTC)}
    top = wait(waits, "top timed events", SCATTERED)
    assert (top["waits"], top["time_waited_s"], top["pct_db_time"]) == (20004.0, 148.0, 39.12)
    assert wait(waits, "top timed events", "CPU time")["waits"] is None
    r = wait(waits, "wait events", SCATTERED)
    assert (r["time_waited_s"], r["avg_wait_ms"], r["waits_per_txn"], r["timeouts_pct"]) == (
        148.0, 7.0, 1667.0, None)


# ---------------------------------------------------------------------------------------------
# AWR 11.2 and 19c
# ---------------------------------------------------------------------------------------------
def test_awr_11g_foreground_background_and_classes() -> None:
    df, waits, _ = parse(AWR11_HDD)
    assert set(waits["source"]) == {"awr"} and set(waits["db_name"]) == {"ORCL"}
    # "Top 5 Timed Foreground Events": "db file scattered read  20,004  148  7  20.4 User I/O"
    top = wait(waits, "top timed events", SCATTERED)
    assert (top["waits"], top["time_waited_s"], top["avg_wait_ms"], top["pct_db_time"],
            top["wait_class"]) == (20004.0, 148.0, 7.0, 20.4, "User I/O")
    assert wait(waits, "top timed events", "DB CPU")["time_waited_s"] == 232.0
    fg = wait(waits, "foreground wait events", SCATTERED)
    assert (fg["waits_per_txn"], fg["pct_db_time"], fg["timeouts_pct"]) == (1667.0, 20.4, 0.0)
    # event names are kept as printed, truncated by the report's a26 column
    assert "control file sequential re" in waits["event"].to_list()
    bg = wait(waits, "background wait events", "log file parallel write")
    assert (bg["waits"], bg["avg_wait_ms"], bg["pct_db_time"]) == (32.0, 7.0, None)  # % bg time
    f = dev(df, "/u02/oradata/ORCL/user_data01.dbf")
    assert (f["r_iops"], f["r_await_ms"], f["r_areq_kB"]) == (335.0, 18.2, 121.6)


def test_awr_19c_unit_suffixed_averages() -> None:
    df, waits, _ = parse(AWR19_SSD)
    # "Top 10 Foreground Events by Total Wait Time":
    # "db file scattered read   20,013   73.9   3.69ms   22.3 User I/O"
    top = wait(waits, "top timed events", SCATTERED)
    assert (top["waits"], top["time_waited_s"], top["avg_wait_ms"], top["pct_db_time"]) == (
        20013.0, 73.9, 3.69, 22.3)
    # "control file sequential read  71  0.0  281.69us  .0 System I"
    cf = wait(waits, "top timed events", "control file sequential read")
    assert cf["avg_wait_ms"] == 0.28169 and cf["pct_db_time"] == 0.0
    assert cf["wait_class"] == "System I"  # as printed in the 8-wide column
    assert wait(waits, "top timed events", "read by other session")["avg_wait_ms"] == 217.86
    # "Foreground Wait Events": 2-decimal averages
    fg = wait(waits, "foreground wait events", SCATTERED)
    assert (fg["time_waited_s"], fg["avg_wait_ms"]) == (74.0, 3.69)
    # 12c+ File IO Stats: the single-block columns are not mapped
    assert df.height == 4 and set(df["device_kind"]) == {"datafile"}
    f = dev(df, "/ssd/oradata/ORCL/user_data01.dbf")
    assert (f["r_iops"], f["r_await_ms"], f["r_areq_kB"], f["w_iops"]) == (
        335.0, 4.9, 121.6, 0.0)
    # [Insight-SSD9] (1 GB cache): scattered reads wait 7 ms on HDD (AWR 11g) vs 3.69 ms on SSD
    _, hdd, _ = parse(AWR11_HDD)
    assert wait(hdd, "foreground wait events", SCATTERED)["avg_wait_ms"] == 7.0


def test_zone_from_tz_option() -> None:
    df, waits, src = parse(AWR11_HDD, tz=ZoneInfo("Asia/Tokyo"))
    end = datetime(2007, 8, 21, 1, 1, 3, tzinfo=UTC)  # 10:01:03 JST
    assert set(df["ts"]) == {end} and set(waits["ts"]) == {end}
    assert not any("assumed UTC" in n for n in src.notes)


def test_registry_import_returns_waits() -> None:
    result = import_file(SP10_SSD)
    assert result.format == "statspack" and result.detected
    assert len(result.frame) == 8 and len(result.waits) == 14
    assert import_file(AWR19_SSD).format == "awr"


def test_form_feed_page_starts_are_read() -> None:
    data = SP10_HDD.read_bytes().replace(b"\nWait Events  DB/Inst", b"\n\x0cWait Events  DB/Inst")
    _, waits, _ = parse(SP10_HDD, data)
    _, full, _ = parse(SP10_HDD)
    assert waits.equals(full)


def test_several_reports_in_one_file() -> None:
    data = SP10_HDD.read_bytes() + b"\n\n" + SP10_SSD.read_bytes()
    df, waits, _ = parse(SP10_HDD, data)
    assert sorted(set(df["ts"])) == [datetime(2007, 8, 21, 11, 1, 3, tzinfo=UTC),
                                     datetime(2007, 8, 21, 11, 31, 3, tzinfo=UTC)]
    assert df.height == 16 and len(waits) == 28
    ssd = waits.filter(pl.col("ts") == datetime(2007, 8, 21, 11, 31, 3, tzinfo=UTC))
    assert wait(ssd, "wait events", SCATTERED)["time_waited_s"] == 49.0


# ---------------------------------------------------------------------------------------------
# sniffing
# ---------------------------------------------------------------------------------------------
def test_sniffers_accept_only_their_own_fixtures() -> None:
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.name == "NOTICE" or path.suffix in (".py", ".json", ".md"):
            continue
        raw = path.read_bytes()
        raw = gzip.decompress(raw) if path.suffix == ".gz" else raw
        head = raw[:65536].decode("utf-8", errors="replace")
        assert statspack.sniff(head) == (path.parent.name == "statspack"), path
        assert awr.sniff(head) == (path.parent.name == "awr"), path
        if path.parent.name in ("statspack", "awr"):
            assert not rmf.sniff(head)
            assert detect(raw[:65536], str(path)) == path.parent.name


def test_sniff_rejects_other_awr_reports() -> None:
    assert awr.sniff("\nWORKLOAD REPOSITORY report for\n\nDB Name ...\n")
    assert not awr.sniff("WORKLOAD REPOSITORY COMPARE PERIOD REPORT\n")
    assert not awr.sniff("WORKLOAD REPOSITORY RAC REPORT for\n")
    assert not statspack.sniff("a note mentioning the STATSPACK report for last night\n")


# ---------------------------------------------------------------------------------------------
# refusals and --lenient
# ---------------------------------------------------------------------------------------------
def test_bad_value_names_file_line_and_column() -> None:
    data = SP10_HDD.read_bytes().replace(b"20,078      0", b"20,0x8      0")
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, data)
    assert exc.value.line_no == line_no(SP10_HDD, "db file scattered read             20,078")
    assert exc.value.reason == "Waits: '20,0x8' is not a number"


def test_bad_number_line_of_a_file_record() -> None:
    data = SP10_HDD.read_bytes().replace(b"  27.3    15.1 ", b"  27.3    15,1x", 2)
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, data)
    # the first occurrence is the tablespace record's number line
    assert exc.value.line_no == line_no(SP10_HDD, "20,737     340   27.3    15.1")
    assert "Av Blks/Rd" in exc.value.reason


def test_lenient_skips_bad_rows_only() -> None:
    data = SP10_HDD.read_bytes().replace(b"20,078      0", b"20,0x8      0")
    data = data.replace(b"  27.3    15.1 ", b"  27.3    15,1x", 2)
    df, waits, src = parse(SP10_HDD, data, lenient=True)
    assert src.skipped == 3
    assert src.skipped_examples[0].startswith(
        f"line {line_no(SP10_HDD, 'db file scattered read             20,078')}:")
    # the other rows of both tables are kept
    assert waits.filter(pl.col("section") == "wait events").height == 6
    assert wait(waits, "wait events", "db file sequential read")["waits"] == 659.0
    assert df.height == 6
    assert "USER_DATA" not in df["device"].to_list()
    assert dev(df, "/u01/oradata/ORCL/system01.dbf")["r_await_ms"] == 6.7


def test_refusals() -> None:
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, b"hello\n" + SP10_HDD.read_bytes())
    assert exc.value.line_no == 1 and "before the first report" in exc.value.reason
    # a report (not the last) without snapshot times
    broken = SP10_HDD.read_bytes().replace(b"  End Snap:", b"  End Spam:")
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, broken + SP10_SSD.read_bytes())
    assert exc.value.line_no == 1 and "Begin Snap / End Snap" in exc.value.reason
    # a section whose headings have no rule
    nodash = SP10_HDD.read_text().replace(
        "--------------------------- ------------ ------ ---------- ------ --------",
        "", 1).encode()
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, nodash)
    assert exc.value.line_no == line_no(SP10_HDD, "Wait Events  DB/Inst")
    with pytest.raises(InputFormatError, match="no 'STATSPACK report for' line"):
        parse(SP10_HDD, AWR11_HDD.read_bytes())


# ---------------------------------------------------------------------------------------------
# cut-off files keep whole sections
# ---------------------------------------------------------------------------------------------
def test_cut_inside_file_io_keeps_the_sections_before() -> None:
    raw = SP10_HDD.read_bytes()
    cut = raw.index(b"/u01/oradata/ORCL/undotbs01.dbf", raw.index(b"File IO Stats"))
    df, waits, src = parse(SP10_HDD, raw[:cut])
    _, full_waits, _ = parse(SP10_HDD)
    assert waits.equals(full_waits)
    assert set(df["device_kind"]) == {"tablespace"} and df.height == 4
    assert any("'File IO Stats'" in n and "cut off" in n for n in src.notes)


def test_cut_in_the_header_keeps_nothing_without_error() -> None:
    raw = SP10_HDD.read_bytes()
    df, waits, src = parse(SP10_HDD, raw[:raw.index(b"  End Snap:")])
    assert df.height == 0 and waits.height == 0
    assert any("cut off before its snapshot times" in n for n in src.notes)


def test_cut_second_report_keeps_the_first_whole() -> None:
    data = SP10_HDD.read_bytes() + SP10_SSD.read_bytes()
    cut = data.rindex(b"read by other session")  # inside the second report's wait events
    df, waits, _ = parse(SP10_HDD, data[:cut])
    full_df, full_waits, _ = parse(SP10_HDD)
    first = datetime(2007, 8, 21, 11, 1, 3, tzinfo=UTC)
    assert df.filter(pl.col("ts") == first).equals(full_df)
    assert waits.filter(pl.col("ts") == first).equals(full_waits)
    second = waits.filter(pl.col("ts") != first)
    assert set(second["section"]) == {"top timed events"}  # the only complete section


CASES = [SP8_HDD, SP10_HDD, AWR11_HDD, AWR19_SSD]
FULL = {p: parse(p) for p in CASES}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.floats(min_value=0.0, max_value=1.0))
def test_any_cut_keeps_whole_sections(path: Path, where: float) -> None:
    """Wherever a report is cut after its title, parsing does not fail and every section it
    returns is the whole section of the uncut report."""
    raw = path.read_bytes()
    title_end = raw.index(b"report for") + len(b"report for\n")
    k = title_end + int(where * (len(raw) - title_end))
    df, waits, _ = parse(path, raw[:k])
    full_df, full_waits, _ = FULL[path]
    for section in set(waits["section"]):
        got = waits.filter(pl.col("section") == section)
        assert got.equals(full_waits.filter(pl.col("section") == section)), (k, section)
    for kind in set(df["device_kind"]):
        got = df.filter(pl.col("device_kind") == kind)
        assert got.equals(full_df.filter(pl.col("device_kind") == kind)), (k, kind)


# ---- read a piece of whole reports at a time ------------------------------------------------


def _pieces(path: Path, data: bytes, chunk: int, **kw: object
            ) -> tuple[pl.DataFrame, pl.DataFrame, Source]:
    module = awr if path.parent.name == "awr" else statspack
    src = Source(path=str(path), **kw)  # type: ignore[arg-type]
    frames = list(module.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk))
    df = pl.concat([f.df for f in frames], how="diagonal_relaxed") if frames else pl.DataFrame()
    return df, WaitEventFrame.concat(src.waits).df, src


@pytest.mark.parametrize("path", [SP8_HDD, SP10_SSD, AWR11_HDD, AWR19_SSD])
@pytest.mark.parametrize("how", ["x3", "x3-cut", "crlf-formfeed"])
def test_pieces_of_whole_reports_give_what_the_whole_file_gives(path: Path, how: str) -> None:
    """Each piece is cut before a report's title line (a title cut by a block's end too)."""
    one = path.read_bytes()
    data = one * 3
    if how == "x3-cut":
        data = data[:len(one) * 2 + len(one) // 2]
    elif how == "crlf-formfeed":
        title = b"STATSPACK report for" if path.parent.name != "awr" else \
            b"WORKLOAD REPOSITORY report for"
        data = data.replace(b"\n", b"\r\n").replace(title, b"\x0c" + title)
    want_df, want_waits, want_src = parse(path, data)
    for chunk in (1, 37, 1000, 1 << 20):
        df, waits, src = _pieces(path, data, chunk)
        assert df.equals(want_df.select(df.columns)) and df.columns == want_df.columns, chunk
        assert waits.equals(want_waits), chunk
        assert (sorted(src.notes), src.skipped) == (sorted(want_src.notes), want_src.skipped)
    assert want_df.height > 0 and want_df["ts"].n_unique() == 1  # (3 copies of one report)
    assert want_waits.height >= 3


# ---- the line-class reading: its table records, cells and values -----------------------------
# (tables are read a layout at a time with polars; a table holding anything to refuse or
# note is read row by row instead: both must give what the reports say)

FILE_IO_TAIL = SP10_HDD.read_bytes().split(b"File IO Stats")[1]
SYSAUX = (b"SYSAUX                   /u01/oradata/ORCL/sysaux01.dbf\n"
          b"             5       0    4.0     1.0           18        0          0\n")


def test_a_long_file_name_continued_on_the_next_line() -> None:
    long = FILE_IO_TAIL.replace(
        SYSAUX, b"SYSAUX                   /u01/oradata/ORCL/a_very_long_directory_name/\n"
                b"                         sysaux01.dbf\n"
                b"             5       0    4.0     1.0           18        0          0\n")
    df, _, _ = parse(SP10_HDD, SP10_HDD.read_bytes().replace(FILE_IO_TAIL, long))
    row = dev(df, "/u01/oradata/ORCL/a_very_long_directory_name/sysaux01.dbf")
    assert (row["parent"], row["r_iops"], row["r_await_ms"]) == ("SYSAUX", 0.0, 4.0)


def test_a_file_listed_twice_is_refused_and_the_rest_kept_in_order() -> None:
    twice = FILE_IO_TAIL.replace(SYSAUX, SYSAUX + b"\n" + SYSAUX)
    data = SP10_HDD.read_bytes().replace(FILE_IO_TAIL, twice)
    with pytest.raises(InputFormatError) as exc:
        parse(SP10_HDD, data)
    assert "/u01/oradata/ORCL/sysaux01.dbf listed twice" in exc.value.reason
    assert exc.value.line_no == line_no(SP10_HDD, "/u01/oradata/ORCL/sysaux01.dbf") + 3
    df, _, src = parse(SP10_HDD, data, lenient=True)
    want, _, _ = parse(SP10_HDD)
    assert src.skipped == 1 and df.equals(want)


def test_numbers_without_their_file_line_and_a_file_line_without_numbers() -> None:
    lone = FILE_IO_TAIL.replace(SYSAUX, SYSAUX.split(b"\n")[1] + b"\n")
    data = SP10_HDD.read_bytes().replace(FILE_IO_TAIL, lone)
    df, _, src = parse(SP10_HDD, data, lenient=True)
    assert src.skipped == 1 and "numbers without the tablespace/file line" in \
        src.skipped_examples[0]
    assert "/u01/oradata/ORCL/sysaux01.dbf" not in df["device"].to_list()
    assert df.filter(pl.col("device_kind") == "datafile").height == 3
    last = b"USER_DATA                /u02/oradata/ORCL/user_data01.dbf\n"
    cut = FILE_IO_TAIL[:FILE_IO_TAIL.index(last) + len(last)] + \
        b"          -------------------------------------------------------------\n"
    df, _, src = parse(SP10_HDD, SP10_HDD.read_bytes().replace(FILE_IO_TAIL, cut),
                       lenient=True)
    assert src.skipped == 1 and "no line of numbers under this one" in src.skipped_examples[0]
    assert df.filter(pl.col("device_kind") == "datafile").height == 3


def test_a_snapshot_date_that_does_not_exist_is_refused_with_its_line() -> None:
    raw = SP10_HDD.read_text()
    end = next(x for x in raw.split("\n") if "End Snap:" in x)
    day = re.search(r"\d{1,2}-[A-Za-z]{3}-\d{2}", end)
    assert day is not None
    data = raw.replace(end, end.replace(day.group(), "31-Feb-07")).encode()
    with pytest.raises(InputFormatError) as exc:  # (it was a ValueError from strptime)
        parse(SP10_HDD, data)
    assert exc.value.line_no == line_no(SP10_HDD, "End Snap:")
    assert "is not a date and time" in exc.value.reason


@pytest.mark.parametrize("text", ["21-Aug-07 10:01:03", "1-jan-69 0:00:00", "31-DEC-68 23:59:59",
                                  "01-Sep-2019 08:05:09", "29-Feb-2000 12:00:00"])
def test_snapshot_times_read_as_strptime_reads_them(text: str) -> None:
    want = next(d for f in ("%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S")
                for d in [_strptime_or_none(text, f)] if d is not None)
    assert grammar._oracle_time(text) == want


def _strptime_or_none(text: str, fmt: str) -> datetime | None:
    try:
        return datetime.strptime(text, fmt)
    except ValueError:
        return None


@pytest.mark.parametrize("text", ["29-Feb-07 12:00:00", "32-Jan-07 10:00:00", "1-Foo-07 1:00:00",
                                  "1-Jan-07 24:00:00", "1-Jan-007 10:00:00"])
def test_snapshot_times_that_are_not_dates(text: str) -> None:
    with pytest.raises(ValueError, match="07"):
        grammar._oracle_time(text)


_CELL = st.one_of(st.just(""), st.from_regex(r"[0-9][0-9,]{0,6}(\.[0-9]{1,3})?", fullmatch=True),
                  st.from_regex(r"[a-z/_. ]{1,14}", fullmatch=True), st.just("#####"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.booleans()), min_size=1, max_size=6),
       st.lists(st.lists(st.tuples(_CELL, st.integers(-2, 2)), min_size=6, max_size=6),
                min_size=1, max_size=8))
def test_cells_of_a_layout_are_those_read_one_line_at_a_time(
        widths: list[tuple[int, bool]], rows: list[list[tuple[str, int]]]) -> None:
    """Whatever the line (a value wider than its column, one shifted into the gap, text
    running past its rule), the polars cells are :func:`_cells`'s."""
    cols, pos = [], 0
    for width, text in widths:
        cols.append(grammar._Col(f"c{len(cols)}", pos, pos + width - 1, text))
        pos += width + 1
    lines = []
    for row in rows:
        line = ""
        for col, (value, shift) in zip(cols, row, strict=False):
            at = max(len(line), col.start + shift) if col.text else \
                max(len(line), col.end + 1 - len(value) + shift)
            line = line.ljust(at) + value
        lines.append(line)
    piece = pieces._Piece.of(lines, 0, re.compile("^$"))
    frame = vector._cell_frame(piece, list(range(len(lines))), cols, "c")
    assert [list(r) for r in frame.iter_rows()] == \
        [grammar._cells(line, cols) for line in lines]


_NUMBER = st.one_of(st.from_regex(r"[0-9]{1,3}(,[0-9]{3}){0,2}(\.[0-9]{1,4})?[KMGTP]?",
                                  fullmatch=True),
                    st.from_regex(r"\.[0-9]{1,5}", fullmatch=True),
                    st.sampled_from(["", "###", "1e3", "x1", "1.2.3", "١٢"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(_NUMBER, min_size=1, max_size=12), st.sampled_from(["1", "0.01"]))
def test_numbers_read_by_polars_are_those_decimal_reads(cells: list[str], how: str) -> None:
    """A value polars reads is float(Decimal(text) x multiplier), rounded once; one it does
    not read (a '#' run, an exponent, digits it does not know, no number) is left to the
    row-by-row reading."""
    value, odd = vector._number_expr(pl.col("c"), int(Decimal(how).adjusted()))
    got = pl.DataFrame({"c": cells}).select(v=value, odd=odd)
    for cell, (v, is_odd) in zip(cells, got.iter_rows(), strict=True):
        try:
            want = grammar._number(cell, 1, "c", set())
        except grammar._BadLine:
            assert is_odd, cell
            continue
        if is_odd:
            assert cell in ("###", "1e3", "١٢"), cell
            continue
        assert v == (None if want is None else float(want * Decimal(how))), cell


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(
    st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,3})? ?(ns|us|ms|s|sec)", fullmatch=True),
    st.sampled_from(["", "7.38", "ms", "1.2 min"])), min_size=1, max_size=10))
def test_times_with_units_read_by_polars_are_those_decimal_reads(cells: list[str]) -> None:
    value, odd = vector._unit_expr(pl.col("c"))
    got = pl.DataFrame({"c": cells}).select(v=value, odd=odd)
    for cell, (v, is_odd) in zip(cells, got.iter_rows(), strict=True):
        try:
            want = grammar._with_unit_ms(cell, 1, "c")
        except grammar._BadLine:
            assert is_odd, cell
            continue
        assert not is_odd and v == (None if want is None else float(want)), cell
