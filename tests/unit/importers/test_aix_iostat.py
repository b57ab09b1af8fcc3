"""aix-iostat: the real iostat -dD output quoted in SaltStack (Apache-2.0), the documented -DT
and -DlT layouts, suffix scaling, refusals with file:line, --lenient and cut-off files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers.importing import assert_pieces_agree, read_outcome, reading_variants

from iogauge.errors import InputFormatError
from iogauge.importers import aix_iostat
from iogauge.importers.base import Source
from iogauge.importers.first_report import FirstReport
from iogauge.model import timeline

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "aix-iostat"
SALT = FIX / "salt-aix-iostat-dD.txt"
DT = FIX / "doc-aix-iostat-DT.txt"
DLT = FIX / "doc-aix-iostat-DlT.txt"
MEASURES = ["util_pct", "iops", "kBps", "r_kBps", "w_kBps", "r_iops", "w_iops", "svctm_ms",
            "queue_wait_ms", "await_ms", "queue_wait_len", "active_len", "aqu_sz"]


def parse(path: Path, data: bytes | None = None, **kw: object) -> tuple[pl.DataFrame, Source]:
    src = Source(path=str(path), **kw)  # type: ignore[arg-type]
    frame = aix_iostat.parse(path.read_bytes() if data is None else data, src)
    return frame.df, src


def one(df: pl.DataFrame, device: str, ts: datetime) -> dict[str, object]:
    hit = df.filter((pl.col("device") == device) & (pl.col("ts") == ts))
    assert hit.height == 1, (device, ts, hit.height)
    return hit.to_dicts()[0]


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_salt_real_output() -> None:
    df, src = parse(SALT, start=datetime(2021, 6, 1, 12, 0, 0), interval_s=1.0, host="l490vp031")
    assert df.height == 3
    assert df["since_boot"].to_list() == [True, False, False]
    assert df["ts"].to_list() == [utc(2021, 6, 1, 12, 0, s) for s in (0, 1, 2)]
    assert set(df["interval_s"]) == {1.0}
    # "9.6     16.4K     4.0       16.4K       0.0" / "4.0      4.9      0.3      9.9 ..."
    r = one(df, "hdisk6", utc(2021, 6, 1, 12, 0, 1))
    assert r["util_pct"] == 9.6
    assert r["iops"] == 4.0
    assert r["kBps"] == 16400 / 1024  # 16.4K bytes/s, K = 1000
    assert r["r_kBps"] == 16400 / 1024 and r["w_kBps"] == 0.0
    assert (r["r_iops"], r["w_iops"]) == (4.0, 0.0)
    assert r["svctm_ms"] == 4.9  # only reads: their avgserv
    assert r["queue_wait_ms"] == 0.0 and r["await_ms"] == 4.9
    assert (r["queue_wait_len"], r["active_len"], r["aqu_sz"]) == (0.0, 0.0, 0.0)
    assert r["r_await_ms"] is None and r["w_await_ms"] is None
    assert (r["device_kind"], r["host"], r["source"]) == ("disk", "l490vp031", "aix-iostat")
    assert any("since-boot average (IBM" in n for n in src.notes)


def test_untimed_without_options_is_numbered_on_the_relative_line() -> None:
    df, src = parse(SALT)
    step = timedelta(seconds=timeline.NOMINAL_INTERVAL_S)
    assert df["ts"].to_list() == [timeline.RELATIVE_EPOCH + k * step for k in (1, 2, 3)]
    assert df["since_boot"].to_list() == [True, False, False]
    assert any("relative time line" in n for n in src.notes)
    df, src = parse(SALT, first_report=FirstReport.MEASURED)
    assert not df["since_boot"].any()
    with pytest.raises(InputFormatError, match="--interval"):
        parse(SALT, start=datetime(2021, 6, 1, 12))


def test_block_form_with_times_and_suffixes() -> None:
    df, _ = parse(DT, start=datetime(2024, 3, 4))
    assert sorted(df["ts"].unique().to_list()) == [utc(2024, 3, 4, 9, 59), utc(2024, 3, 4, 10, 0),
                                                   utc(2024, 3, 4, 10, 1)]
    r = one(df, "hdisk0", utc(2024, 3, 4, 10, 0))
    # the line reads "96.3      65.5M   2000.0      65.5M       0.0  10:00:00"
    assert (r["util_pct"], r["iops"], r["r_iops"]) == (96.3, 2000.0, 2000.0)
    assert r["kBps"] == 65.5e6 / 1024 and r["r_kBps"] == 65.5e6 / 1024
    # read avgserv 0.4 (maxserv "1.2S" = 1.2 s parses), queue avgtime 12.6, wqsz 25.2, sqsz 0.8
    assert r["svctm_ms"] == 0.4 and r["queue_wait_ms"] == 12.6
    assert r["await_ms"] == pytest.approx(13.0)
    assert (r["queue_wait_len"], r["active_len"]) == (25.2, 0.8)
    assert r["aqu_sz"] == pytest.approx(26.0)
    assert r["interval_s"] == 60.0 and r["since_boot"] is False
    # mixed: (50 x 2.0 + 50 x 4.0) / 100 = 3.0 ms service, + 1.0 ms wait
    r = one(df, "hdisk1", utc(2024, 3, 4, 10, 0))
    assert r["svctm_ms"] == 3.0 and r["await_ms"] == 4.0
    assert (r["r_kBps"], r["w_kBps"]) == (204800 / 1024, 204800 / 1024)
    first = df.filter(pl.col("since_boot"))
    assert first["device"].to_list() == ["hdisk0", "hdisk1"]
    assert set(first["interval_s"]) == {60.0}
    # idle disk: zeros, service time 0.0 as sysstat prints for no requests
    r = one(df, "hdisk1", utc(2024, 3, 4, 10, 1))
    assert (r["iops"], r["svctm_ms"], r["await_ms"]) == (0.0, 0.0, 0.0)


def test_long_form_matches_block_form_and_rolls_over_midnight() -> None:
    block, _ = parse(DT, start=datetime(2024, 3, 4))
    long_, _ = parse(DLT, start=datetime(2024, 3, 4, 23, 59))
    assert long_["ts"].unique().sort().to_list() == [utc(2024, 3, 4, 23, 59, 30),
                                                     utc(2024, 3, 5, 0, 0, 30),
                                                     utc(2024, 3, 5, 0, 1, 30)]
    assert long_.select("device", *MEASURES).equals(block.select("device", *MEASURES))
    assert long_["since_boot"].to_list() == block["since_boot"].to_list()


def test_times_of_day_need_a_date() -> None:
    with pytest.raises(InputFormatError, match="no date"):
        parse(DT)


def test_bad_suffix_and_count_name_the_line() -> None:
    lines = DT.read_text().split("\n")
    assert lines[24].strip().startswith("2000.0")
    bad = lines.copy()
    bad[24] = bad[24].replace("1.2S", "1.2X")
    with pytest.raises(InputFormatError) as err:
        parse(DT, "\n".join(bad).encode(), start=datetime(2024, 3, 4))
    assert err.value.line_no == 25 and "not all numbers" in err.value.reason
    assert str(err.value).startswith(f"{DT}:25: ")
    bad = lines.copy()
    assert lines[28].strip().startswith("12.6")
    bad[28] = bad[28] + "   7"
    with pytest.raises(InputFormatError, match="7 fields, expected 6") as err:
        parse(DT, "\n".join(bad).encode(), start=datetime(2024, 3, 4))
    assert err.value.line_no == 29


def test_lenient_skips_and_counts() -> None:
    lines = DT.read_text().split("\n")
    lines[24] = lines[24].replace("1.2S", "1.2X")
    df, src = parse(DT, "\n".join(lines).encode(), start=datetime(2024, 3, 4), lenient=True)
    assert src.skipped == 1 and src.skipped_examples[0].startswith("line 25")
    assert df.height == 5  # hdisk0's report-2 block is incomplete without its read line
    assert df.filter(pl.col("ts") == utc(2024, 3, 4, 10, 0))["device"].to_list() == ["hdisk1"]


def test_bad_header_is_refused() -> None:
    text = DT.read_text().replace("avgwqsz    avgsqsz", "avgwqsz    bogus", 1)
    with pytest.raises(InputFormatError, match="expected 'avgtime") as err:
        parse(DT, text.encode(), start=datetime(2024, 3, 4))
    assert err.value.line_no == 10


def test_sniff() -> None:
    for f in FIX.glob("*"):
        assert aix_iostat.sniff(f.read_text()), f
    assert not aix_iostat.sniff("Disks:        % tm_act     Kbps      tps    Kb_read   Kb_wrtn\n"
                                "hdisk0           0.8      11.1      0.8    3926601    822579\n")


_DT = DT.read_bytes()
_FULL = aix_iostat.parse(_DT, Source(path=str(DT), start=datetime(2024, 3, 4))).df


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=_DT.index(b"hdisk0", _DT.index(b"10:00:00")) + 1,
                   max_value=_DT.rindex(b"\n-----")))
def test_cut_anywhere_keeps_whole_reports(cut: int) -> None:
    df, src = parse(DT, _DT[:cut], start=datetime(2024, 3, 4))
    full = _FULL.filter(pl.col("ts").is_in(df["ts"].unique().implode()))
    assert df.sort("ts", "device").equals(full.sort("ts", "device"))
    assert df["ts"].n_unique() in (1, 2)
    assert set(df.group_by("ts").len()["len"]) == {2}
    assert any("dropped" in n for n in src.notes) or df["ts"].n_unique() == 2


# ---------------------------------------------------------------------------------------------
# a piece at a time (iter_parse); reports end where a disk appears again
# ---------------------------------------------------------------------------------------------
_VARIANTS = reading_variants(FIX, {"start": datetime(2024, 3, 4, 9), "interval_s": 60.0})


@pytest.mark.parametrize(("name", "data", "kw"), _VARIANTS, ids=[v[0] for v in _VARIANTS])
def test_pieces_give_what_the_whole_file_gives(name: str, data: bytes,
                                                kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a line at a time) to 700 bytes, every block is read whole
    and numbered on from the reports before it: the same rows, notes and refused lines as
    one read of the whole file."""
    assert_pieces_agree(aix_iostat, data, (1, 40, 250, 700), kw, name)


def _disk_added(long_form: bool) -> bytes:
    """The -DT (or -DlT) fixture with hdisk2 added from its second report on, as AIX
    prints a disk configured during the run."""
    if long_form:
        lines = _DLT.split(b"\n")
        out: list[bytes] = []
        seen = 0
        for line in lines:
            out.append(line)
            if line.startswith(b"hdisk1"):
                seen += 1
                if seen >= 2:
                    out.append(line.replace(b"hdisk1", b"hdisk2"))
        return b"\n".join(out)
    blocks = _DT.split(b"--------------------------------------------------------------------"
                       b"------------\n")
    out_blocks: list[bytes] = []
    for k, block in enumerate(blocks):
        out_blocks.append(block)
        if k >= 3 and k % 2 == 1 and b"hdisk1" in block:
            out_blocks.append(block.replace(b"hdisk1", b"hdisk2"))
    return (b"-" * 80 + b"\n").join(out_blocks)


_DLT = DLT.read_bytes()


@pytest.mark.parametrize("long_form", [False, True])
def test_a_disk_added_during_the_run_gets_the_reports_it_is_in(long_form: bool) -> None:
    """A report ends where a disk appears again: a disk added in the second report has its
    rows at the second and third reports' times (counted as the k-th block of each disk,
    its first block was put at the first report's time, a minute early, and with -T the
    run looked as if it lacked times)."""
    data = _disk_added(long_form)
    start = datetime(2024, 3, 4, 23, 0) if long_form else datetime(2024, 3, 4)
    for chunk in (None, 300):
        df = read_outcome(aix_iostat, data, chunk, start=start)[0]
        assert isinstance(df, pl.DataFrame), df
        times = df.sort("ts").group_by("device", maintain_order=True).agg(pl.col("ts"))
        by_disk = dict(zip(times["device"].to_list(), times["ts"].to_list(), strict=True))
        assert by_disk["hdisk2"] == by_disk["hdisk1"][1:], (chunk, by_disk)
        assert len(by_disk["hdisk0"]) == len(by_disk["hdisk1"]) == 3
        for row in df.filter(pl.col("device") == "hdisk2").iter_rows(named=True):
            twin = one(df, "hdisk1", row["ts"])
            assert all(row[m] == twin[m] for m in MEASURES), row["ts"]


def test_a_lost_block_header_moves_no_later_block() -> None:
    """A block whose xfer: line is lost (a damaged copy): its value lines are refused, and
    the disk's later blocks stay in their own reports (counted as the k-th block of the
    disk, each moved one report early)."""
    second = _DT.index(b"hdisk1", _DT.index(b"10:00:00"))
    data = _DT[:second] + _DT[_DT.index(b"\n", second) + 1:]
    df, src = parse(DT, data, start=datetime(2024, 3, 4), lenient=True)
    assert src.skipped >= 1
    h1 = df.filter(pl.col("device") == "hdisk1").sort("ts")
    full = _FULL.filter(pl.col("device") == "hdisk1").sort("ts")
    assert h1["ts"].to_list() == [full["ts"][0], full["ts"][2]]
    assert h1["util_pct"].to_list() == [full["util_pct"][0], full["util_pct"][2]]
