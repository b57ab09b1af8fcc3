"""The /proc/diskstats parser: every layout, every refusal, and a real kernel-5 snapshot."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.collector.diskstats import (
    FIELDS,
    IDX,
    N_FIELDS,
    OLD_PARTITION_MAP,
    parse_line,
    parse_text,
    read_diskstats,
)
from iogauge.errors import InputFormatError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
JC = FIXTURES / "diskstats" / "jc-kernel5-diskstats.txt"

C17 = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"


def test_field_order_is_the_kernels() -> None:
    assert N_FIELDS == 17
    assert FIELDS[:4] == ("rd_ios", "rd_merges", "rd_sectors", "rd_ticks_ms")
    assert FIELDS[8:11] == ("in_flight", "io_ticks_ms", "time_in_queue_ms")
    assert FIELDS[15:] == ("fl_ios", "fl_ticks_ms")
    assert OLD_PARTITION_MAP == (0, 2, 4, 6)


# ---------------------------------------------------------------------------------------------
# the real snapshot (kellyjonbrazil/jc, MIT; see tests/fixtures/NOTICE)
# ---------------------------------------------------------------------------------------------
def test_jc_kernel5_snapshot() -> None:
    snap = parse_text(JC.read_text().splitlines(), path=str(JC))
    assert len(snap) == 15
    assert snap.problems == []
    assert snap.bad_names == set()
    assert snap.names == ["loop0", "loop1", "loop2", "loop3", "loop4", "loop5", "loop6", "loop7",
                          "sda", "sda1", "sda2", "sda3", "sr0", "dm-0", "loop8"]
    # every line has the 17-value layout (kernel 5.5+)
    assert snap.present.all()
    assert not snap.old_layout.any()
    assert snap.values.dtype == np.int64
    assert snap.values.shape == (15, 17)
    idx = snap.index()
    # "   8       0 sda 14200 3361 892828 5058 18736 13416 715384 12604 0 24940 17663 0 0 0 0 0 0"
    assert snap.values[idx["sda"]].tolist() == [14200, 3361, 892828, 5058, 18736, 13416, 715384,
                                                12604, 0, 24940, 17663, 0, 0, 0, 0, 0, 0]
    assert (snap.major[idx["sda"]], snap.minor[idx["sda"]]) == (8, 0)
    # " 253       0 dm-0 10298 0 873914 7596 31994 0 715168 13140 0 18220 20736 0 0 0 0 0 0"
    dm = snap.values[idx["dm-0"]]
    assert (snap.major[idx["dm-0"]], snap.minor[idx["dm-0"]]) == (253, 0)
    assert (dm[IDX["rd_ios"]], dm[IDX["wr_ios"]], dm[IDX["time_in_queue_ms"]]) == (10298, 31994,
                                                                                  20736)
    # "   7       8 loop8 250 0 4496 16 0 0 0 0 0 180 16 0 0 0 0 0 0" (last line)
    assert snap.values[idx["loop8"], IDX["rd_sectors"]] == 4496
    assert snap.values[idx["loop8"], IDX["io_ticks_ms"]] == 180
    assert (snap.major[idx["sr0"]], snap.minor[idx["sr0"]]) == (11, 0)
    # column sums, as a check that no value landed in the wrong column
    assert int(snap.values[:, IDX["rd_ios"]].sum()) == (
        48 + 41 + 119 + 220 + 59 + 810 + 41 + 64 + 14200 + 171 + 153 + 6983 + 283 + 10298 + 250)
    assert int(snap.values[:, IDX["dc_ios"]].sum()) == 0


def test_read_diskstats_from_a_procfs_root(tmp_path: Path) -> None:
    shutil.copyfile(JC, tmp_path / "diskstats")
    snap = read_diskstats(tmp_path)
    assert len(snap) == 15
    assert snap.names[8] == "sda"


def test_read_diskstats_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_diskstats(tmp_path)


# ---------------------------------------------------------------------------------------------
# layouts
# ---------------------------------------------------------------------------------------------
def test_parse_line_17() -> None:
    major, minor, name, vals, n = parse_line(f"   8       0 sda {C17}")
    assert (major, minor, name, n) == (8, 0, "sda", 17)
    assert vals == list(range(1, 18))


def test_parse_line_11_and_15_zero_fill() -> None:
    *_, vals, n = parse_line("8 0 sda 1 2 3 4 5 6 7 8 9 10 11")
    assert n == 11
    assert vals == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0]
    *_, vals, n = parse_line("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15")
    assert n == 15
    assert vals[11:] == [12, 13, 14, 15, 0, 0]


def test_parse_line_future_18_plus_fields_ignored() -> None:
    *_, vals, n = parse_line(f"8 0 sda {C17} 18 19 20")
    assert n == 17
    assert vals == list(range(1, 18))
    # unknown extra fields need not even be numbers
    *_, vals, n = parse_line(f"8 0 sda {C17} future")
    assert n == 17


def test_parse_line_old_4_field_partition() -> None:
    major, minor, name, vals, n = parse_line("   3    1 hda1 1500 120000 600 48000")
    assert (major, minor, name, n) == (3, 1, "hda1", 4)
    expected = [0] * 17
    expected[IDX["rd_ios"]] = 1500
    expected[IDX["rd_sectors"]] = 120000
    expected[IDX["wr_ios"]] = 600
    expected[IDX["wr_sectors"]] = 48000
    assert vals == expected


def test_parse_text_presence_masks_per_layout() -> None:
    snap = parse_text([
        "3 1 hda1 1 2 3 4",
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 11",
        "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
        f"259 0 nvme0n1 {C17}",
        f"8 32 sdc {C17} 18",
    ])
    assert snap.names == ["hda1", "sda", "sdb", "nvme0n1", "sdc"]
    assert snap.old_layout.tolist() == [True, False, False, False, False]
    assert snap.present.sum(axis=1).tolist() == [4, 11, 15, 17, 17]
    assert np.flatnonzero(snap.present[0]).tolist() == [0, 2, 4, 6]
    assert not snap.present[1, 11:].any()
    assert snap.present[1, :11].all()
    assert not snap.present[2, 15:].any()
    assert snap.present[2, :15].all()
    assert snap.values[0].tolist() == [1, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert snap.major.tolist() == [3, 8, 8, 259, 8]
    assert snap.minor.tolist() == [1, 0, 16, 0, 32]


def test_parse_text_empty_and_blank_lines() -> None:
    snap = parse_text([])
    assert len(snap) == 0
    assert snap.values.shape == (0, 17)
    assert snap.present.shape == (0, 17)
    snap = parse_text(["", "   ", f"8 0 sda {C17}", ""])
    assert snap.names == ["sda"]
    assert snap.problems == []


def test_64_bit_counts_and_32_bit_ms_values() -> None:
    big = 2**40 + 7
    *_, vals, _ = parse_line(f"8 0 sda {big} 0 0 4294967295 0 0 0 0 0 0 0 0 0 0 0 0 0")
    assert vals[0] == big
    assert vals[3] == 4294967295


# ---------------------------------------------------------------------------------------------
# refusals: file:line: reason
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("line", "reason"), [
    ("8 0", "expected 'major minor name counters...', got 2 field(s)"),
    ("garbage", "expected 'major minor name counters...', got 1 field(s)"),
    ("x 0 sda 1 2 3 4", "major/minor are not integers: 'x' '0'"),
    ("8 0 sda", "device sda: 0 counters; known layouts have 4, 11, 15 or 17+"),
    ("8 0 sda 1 2 3", "device sda: 3 counters; known layouts have 4, 11, 15 or 17+"),
    ("8 0 sda 1 2 3 4 5 6", "device sda: 6 counters; known layouts have 4, 11, 15 or 17+"),
    ("8 0 sda 1 2 3 4 5 6 7 8 9 10", ("device sda: 10 counters; known layouts have 4, "
     "11, 15 or 17+")),
    ("8 0 sda 1 2 x3 4", "device sda: counter 'x3' is not a non-negative integer"),
    ("8 0 sda 1 2 3 4 5 6 7 8 9 10 1.5", ("device sda: counter '1.5' is not a non-negative "
     "integer")),
    ("8 0 sda 1 2 3 -4", "device sda: counter '-4' is not a non-negative integer"),
    ("8 0 sda 1 2 3 1_000", "device sda: counter '1_000' is not a non-negative integer"),
    ("8 0 sda 1 2 3 +4", "device sda: counter '+4' is not a non-negative integer"),
    # isdigit() but not int(): used to escape as StopIteration
    ("8 0 sda 1 2 3 \u00b2", "device sda: counter '\u00b2' is not a non-negative integer"),
    # non-ASCII decimal digits that int() would take
    ("8 0 sda 1 2 3 \u0663", "device sda: counter '\u0663' is not a non-negative integer"),
    ("8 0 sda 1 2 3 \uff14", "device sda: counter '\uff14' is not a non-negative integer"),
    (f"8 0 sda 1 2 3 {2**64}", f"device sda: counter {2**64} out of range"),
    (f"8 0 sda 1 2 3 {2**63}", f"device sda: counter {2**63} exceeds 2**63"),
])
def test_parse_line_refusals(line: str, reason: str) -> None:
    with pytest.raises(InputFormatError) as info:
        parse_line(line, path="/proc/diskstats", line_no=7)
    err = info.value
    assert (err.path, err.line_no, err.reason) == ("/proc/diskstats", 7, reason)
    assert str(err) == f"/proc/diskstats:7: {reason}"


@pytest.mark.parametrize(("n", "used"), [(12, 11), (13, 11), (14, 11), (16, 15)])
def test_counts_of_no_kernel_layout_are_read_as_sysstat_reads_them(n: int, used: int) -> None:
    """sysstat's root1 tree has ``sds`` with 14 counters; sysstat's read_diskstats_disk
    reads the first 11 of 12-14 (discards only from 15 on) and 15 of 16 [sysstat]."""
    counters = " ".join(str(10 + k) for k in range(n))
    snap = parse_text([f"8 0 sda {C17}", f"65 32 sds {counters}"], path="/x/diskstats")
    assert snap.names == ["sda", "sds"]
    assert snap.problems == []
    assert snap.values[1].tolist() == [10 + k for k in range(used)] + [0] * (17 - used)
    assert snap.present[1].tolist() == [True] * used + [False] * (17 - used)
    assert snap.notes == [("diskstats: sds: 12-14 or 16 counters, which no kernel layout has; "
                           "read as sysstat reads them, the first 11 (or 15 of 16) [sysstat]")]


def test_bad_lines_are_reported_and_the_rest_kept() -> None:
    lines = [
        f"8 0 sda {C17}",
        "8 16 sdb 1 2 3 4 5 6 7 8 9 1O 11",  # letter O in a counter
        "8 32 sdc 1 2 3",
        "nonsense",
        f"8 0 sda {C17}",
        f"8 48 sdd {C17}",
    ]
    snap = parse_text(lines, path="/x/diskstats")
    assert snap.names == ["sda", "sdd"]
    assert snap.problems == [
        "/x/diskstats:2: device sdb: counter '1O' is not a non-negative integer",
        "/x/diskstats:3: device sdc: 3 counters; known layouts have 4, 11, 15 or 17+",
        "/x/diskstats:4: expected 'major minor name counters...', got 1 field(s)",
        "/x/diskstats:5: device sda listed twice; keeping the first line",
    ]
    assert snap.bad_names == {"sdb", "sdc"}
    assert snap.values.shape == (2, 17)


def test_strict_mode_raises_on_the_first_bad_line() -> None:
    with pytest.raises(InputFormatError, match=r"^/x/diskstats:2: device sdb: 3 counters"):
        parse_text([f"8 0 sda {C17}", "8 16 sdb 1 2 3"], path="/x/diskstats", strict=True)
    with pytest.raises(InputFormatError, match=r"^/x/diskstats:2: device sda listed twice$"):
        parse_text([f"8 0 sda {C17}", f"8 0 sda {C17}"], path="/x/diskstats", strict=True)


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------
def try_parse(line: str) -> tuple[int, int, str, list[int], int] | InputFormatError:
    """parse_line's result, or the InputFormatError it raised (anything else propagates)."""
    try:
        return parse_line(line)
    except InputFormatError as exc:
        return exc


counter = st.integers(min_value=0, max_value=2**63 - 1)
name_st = st.from_regex(r"[a-z][a-z0-9!\-]{0,11}", fullmatch=True)


@settings(max_examples=150, deadline=None)
@given(major=st.integers(0, 4095), minor=st.integers(0, 2**20), name=name_st,
       layout=st.sampled_from([4, 11, 15, 17, 18, 20]),
       data=st.lists(counter, min_size=20, max_size=20))
def test_round_trip_of_any_valid_line(major: int, minor: int, name: str, layout: int,
                                      data: list[int]) -> None:
    counters = data[:layout]
    line = f"{major:4d} {minor:7d} {name} " + " ".join(map(str, counters))
    got_major, got_minor, got_name, vals, n = parse_line(line)
    assert (got_major, got_minor, got_name) == (major, minor, name)
    assert n == min(layout, 17)
    if layout == 4:
        assert [vals[i] for i in OLD_PARTITION_MAP] == counters
        assert sum(vals) == sum(counters)
    else:
        assert vals[:n] == counters[:n]
        assert vals[n:] == [0] * (17 - n)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_parsed_or_refused_with_input_format_error(text: str) -> None:
    got = try_parse(text)
    if isinstance(got, InputFormatError):
        assert got.reason
        return
    _major, _minor, _name, vals, n = got
    assert n in (4, 11, 15, 17)
    assert len(vals) == 17
    assert all(0 <= v < 2**63 for v in vals)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789+-_. x\u00b2\u0663", min_size=1, max_size=6),
                min_size=4, max_size=4))
def test_any_counter_token_is_digits_or_refused(tokens: list[str]) -> None:
    """Counters are ASCII digits; any other token is refused with InputFormatError."""
    line = "8 0 sda " + " ".join(tokens)
    got = try_parse(line)
    if isinstance(got, InputFormatError):
        assert "device sda" in got.reason
        return
    *_, vals, n = got
    assert n == 4
    assert all(t.isascii() and t.isdigit() for t in line.split()[3:])
    assert [vals[i] for i in OLD_PARTITION_MAP] == [int(t) for t in line.split()[3:]]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="0123456789 abcsd-x\t\u00b2", max_size=60), max_size=8))
def test_parse_text_never_raises_when_not_strict(lines: list[str]) -> None:
    snap = parse_text(lines)
    assert len(snap.names) == len(set(snap.names))
    assert snap.values.shape == (len(snap), 17)
    assert len(snap.problems) <= len(lines)
