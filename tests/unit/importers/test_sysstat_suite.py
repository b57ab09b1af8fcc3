"""sysstat's own test suite as our acceptance test [sysstat].

Every iostat, sar and sadf output sysstat's tests/ expect (tests/fixtures/sysstat, MANIFEST.tsv
names the command behind each) is imported through the public library call: an output that
carries disk statistics gives every device row sysstat printed, each printed value to its
printed digits (read a second way by tests/helpers/sysstat_suite.py); one that carries none
is refused with a reason. The fake /proc trees root1..root5 its iostat reads in test mode,
saved as a snapshot capture, give the rates sysstat printed for them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from tests.helpers.sysstat_suite import (
    FOLDERS,
    SUITE,
    compare,
    import_output,
    manifest,
    printed,
)

from iogauge.errors import InputFormatError
from iogauge.importers.registry import import_file

OUTPUTS = sorted(p for folder in FOLDERS for p in (SUITE / folder).iterdir())
WITH_DISKS = [p for p in OUTPUTS if printed(p).values]
WITHOUT = [p for p in OUTPUTS if not printed(p).values]
#: what a refusal of an output without disk statistics says (format: the reason)
NO_DISK_REASONS = (
    "no device section ('DEV tps ...' header)",  # sar
    "no disk activity ('# ...;DEV;tps;...' header)",  # sadf -d
    "sadf -dh (all activities on one line) is not supported",
    "format not recognised",  # expected.sa1-rot: its banner was grep'd away by the test
    "is not 'YYYY-MM-DD HH:MM:SS [UTC]' or epoch seconds",  # sadf -d -T/-t: zone names
)


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def test_the_suite_is_vendored_with_its_commands() -> None:
    assert len(OUTPUTS) == 145
    assert len(WITH_DISKS) >= 90
    assert set(manifest()) == {p.name for p in OUTPUTS}


@pytest.mark.parametrize("path", WITH_DISKS, ids=_id)
def test_every_printed_device_row_imports_with_its_printed_values(path: Path) -> None:
    expected = printed(path)
    got = import_output(path)
    assert got.frame is not None, got.reason
    assert compare(expected, got.frame) == []
    assert got.rows == expected.total_rows


@pytest.mark.parametrize("path", WITHOUT, ids=_id)
def test_an_output_without_disk_statistics_is_refused_with_a_reason(path: Path) -> None:
    got = import_output(path)
    if got.rows is None:
        assert any(r in got.reason for r in NO_DISK_REASONS), got.reason
    else:  # iostat -c: no rows and a note saying so (the iostat importer's own choice)
        assert got.rows == 0
        assert any("no device statistics found" in n for n in got.notes), got.notes


# ---- sar: --human, since boot, colours ----------------------------------------------------


def test_sar_human_gives_the_plain_values_to_its_printed_digit() -> None:
    """`sar --human -A` and `sar -A` of the same data file: equal to the 1 decimal and the
    unit --human prints (areq-sz 32.5k, %util 0.3%)."""
    human = import_file(SUITE / "sar" / "expected.sar-human").frame.df
    plain = import_file(SUITE / "sar" / "expected2.sar-all").frame.df
    assert human.height == plain.height == 84
    for col in ("iops", "r_kBps", "w_kBps", "areq_kB", "util_pct", "cpu_user_pct",
                "cpu_idle_pct"):
        diff = (human[col] - plain[col]).abs()
        # 0.05 of the printed unit; a kB amount of 1M or more is printed in M (0.05 M)
        tol = pl.when(plain[col] >= 1024).then(0.05 * 1024).otherwise(0.05 + 1e-9)
        assert plain.select((diff <= tol).all()).item(), col


def test_sar_since_boot_rows_are_flagged() -> None:
    """`sar -q ALL -u -d -P ALL -x 0`: every line at 12:53:20, statistics since boot."""
    res = import_file(SUITE / "sar" / "expected.sar-x0")
    df = res.frame.df
    assert df["device"].to_list() == ["sda", "sdb", "sdq", "sdr", "sds"]
    assert df["since_boot"].all()
    assert df["ts"].unique().to_list() == [datetime(2020, 6, 1, 12, 53, 20, tzinfo=UTC)]
    assert df["cpu_idle_pct"].to_list() == [56.00] * 5
    assert any("since-boot statistics" in n for n in res.notes)


def test_sar_colours_are_removed() -> None:
    """S_COLORS=always colours every value; the rows are those of the same data uncoloured."""
    res = import_file(SUITE / "sar" / "expected1.sar-always")
    assert res.frame.df["device"].to_list() == ["sda"] * 4
    assert res.frame.df["util_pct"].to_list() == [0.0, 0.32, 85.36, 0.0]
    assert "colour escape sequences (S_COLORS=always) removed" in res.notes


# ---- strict where it reads, tolerant where it does not ------------------------------------


def _garble(text: str) -> tuple[str, int]:
    """sar -A text with its USB section and its network errors section damaged: a line
    without a time (the USB rows after it are then under no header), a time that is not
    one, and a header deleted; returns the text, the number of lines made unreadable and
    the first of them."""
    lines = text.splitlines()

    def rows_under(header: int) -> int:
        end = next(i for i in range(header, len(lines)) if not lines[i].strip())
        # (not 'Average:' nor 'Summary:', which the USB section prints)
        return sum(1 for x in lines[header + 1:end] if not x.split()[0].endswith(":"))

    usb = next(i for i, x in enumerate(lines) if " BUS  idvendor" in x)
    lines[usb + 1] = "HP Wireless Keyboard Mouse Kit (garbled, no time)"
    lines[usb + 2] = "99:20:29          3      174c      55aa         0 ASMT    ASM1153"
    net = next(i for i, x in enumerate(lines) if " IFACE   rxerr/s" in x)
    damaged = rows_under(usb) + rows_under(net)
    del lines[net]  # its rows are now under no header
    return "\n".join(lines) + "\n", damaged, net + 1


def test_garbled_usb_and_network_sections_do_not_fail_the_import(tmp_path: Path) -> None:
    src = SUITE / "sar" / "expected2.sar-all"
    text, damaged, first = _garble(src.read_text())
    bad = tmp_path / "sar-A-garbled.txt"
    bad.write_text(text)
    res = import_file(bad)
    clean = import_file(src).frame.df
    assert res.frame.df.equals(clean)
    assert res.skipped == 0
    note = next(n for n in res.notes if "sections iogauge does not read" in n)
    assert re.search(rf"^{damaged} malformed line\(s\) .* the first at line {first};", note)


@pytest.mark.parametrize(("section", "damage"), [
    (" DEV       tps", "sda 0.00 (garbled)"),
    ("        CPU      %usr", "all      2.1 garbled"),
])
def test_a_malformed_dev_or_cpu_line_still_fails(tmp_path: Path, section: str,
                                                  damage: str) -> None:
    lines = (SUITE / "sar" / "expected2.sar-all").read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if section in x) + 1
    lines[at] = lines[at][:11] + damage
    bad = tmp_path / "sar-A-dev-garbled.txt"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFormatError) as info:
        import_file(bad)
    assert info.value.line_no == at + 1


# ---- the /proc trees ----------------------------------------------------------------------


def _capture(tmp_path: Path, roots: range) -> Path:
    """root1.. as a pt-diskstats capture: 'TS <epoch>' (the tree's uptime after a fixed
    epoch: iostat's interval is the uptime's step) before each /proc/diskstats."""
    out = []
    for r in roots:
        proc = SUITE / f"root{r}" / "proc"
        uptime = float((proc / "uptime").read_text().split()[0])
        out.append(f"TS {1_591_012_800 + uptime:.2f}")
        out.append((proc / "diskstats").read_text().rstrip("\n"))
    path = tmp_path / "roots.diskstats"
    path.write_text("\n".join(out) + "\n")
    return path


def test_proc_trees_give_the_rates_iostat_printed(tmp_path: Path) -> None:
    """`iostat -dx ALL -p ALL 1 7` read root1, root2 ... : its reports 2, 3 and 5 (root1 ->
    root2, root2 -> root3, root4 -> root5) are what iogauge derives from the same trees,
    sds (14 counters in root1) included. A flush or discard counter that one of the two
    trees lacks (15 counters, or sds's 14 read as 11) gives no rate in iogauge, where
    sysstat counts from zero: sdc has 15 counters in root2 and 17 in root3, and sysstat
    prints f/s 1.02 (32 flushes since boot over 31.24 s) - the same deliberate difference
    as a counter that goes down (docs/analysis.md)."""
    res = import_file(_capture(tmp_path, range(1, 6)))
    assert any("sds: 12-14 or 16 counters" in n for n in res.notes)
    df = res.frame.df.with_columns(k=pl.col("ts").rank("dense").over("device").cast(pl.Int64))
    sysstat = printed(SUITE / "iostat" / "expected.iostat-x-ALL-p-ALL")
    # (sysstat prints a device only in the reports of trees that hold it: sdb is not in
    # root4 and root5, so its printed rows are not numbered by report)
    everywhere = set.intersection(*(
        {line.split()[2] for line in (SUITE / f"root{r}/proc/diskstats").read_text()
         .splitlines()} for r in range(1, 6)))
    checked = 0
    for device in sorted(everywhere):
        columns = sysstat.values[device]
        for k in (1, 2, 4):  # report k + 1 of sysstat, interval k of the capture
            row = df.filter((pl.col("device") == device) & (pl.col("k") == k))
            for target, values in columns.items():
                want, tol = values[k]
                have = row[target][0]
                if have is None:  # a counter one of the two trees lacks (see the docstring)
                    assert target.startswith(("f_", "d_")), (device, k, target, want)
                    continue
                assert abs(have - want) <= tol, (device, k, target, have, want)
                checked += 1
    assert checked > 500


def test_counters_that_go_down_give_a_reset_row_not_a_rate_from_zero(tmp_path: Path) -> None:
    """root3 -> root4: sda's counters go down (49,701 reads -> 49,601). sysstat prints the
    rate from zero (49,601 reads / 38.5 s = 1,288.34 r/s, expected.iostat-x-ALL-flush);
    iogauge gives a reset row with null measures, on purpose (docs/analysis.md)."""
    assert "sda           1288.34" in (
        SUITE / "iostat" / "expected.iostat-x-ALL-flush").read_text()
    res = import_file(_capture(tmp_path, range(3, 6)))
    sda = res.frame.df.filter(pl.col("device") == "sda").sort("ts")
    assert sda["reset"].to_list() == [True, False]
    assert sda["r_iops"][0] is None
    assert sda["r_iops"][1] == 0.0
