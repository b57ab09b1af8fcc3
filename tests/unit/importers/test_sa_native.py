"""The native sa reader (format ``sa``) against sysstat's own numbers: the ``sar -A``
output sysstat's test suite expects of its 9.1.6, 11.6.5 and 12.0.0 files, and this
machine's ``sadf -d`` (12.6.1) on the 12.6.1 files and on byte-swapped (big-endian) copies
made by tests/helpers/sa_swap.py. Then files cut at every record boundary and inside
records, and damaged files: always rows or a clear error naming the file and offset."""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
from tests.helpers.sa_swap import record_offsets, swap_sa

from iogauge.errors import BinaryFormatError, InputFormatError
from iogauge.importers.registry import import_file
from iogauge.importers.sa_binary import find_sadf

SA = Path(__file__).parents[2] / "fixtures" / "sa"
V12 = ("sysstat12.6.1-disk-restart.sa", "sysstat12.6.1-rotation-day1.sa",
       "sysstat12.6.1-rotation-day2.sa")
OLD = ("9.1.6", "11.6.5", "12.0.0")
COLS = ("iops", "r_kBps", "w_kBps", "d_kBps", "areq_kB", "aqu_sz", "await_ms", "util_pct")
needs_sadf = pytest.mark.skipif(find_sadf() is None, reason="sysstat's sadf is not installed")
_ROW = re.compile(r"^(\d\d:\d\d:\d\d)\s+(\S+)" + r"\s+(-?\d+\.\d\d)" * 8 + r"$")


def printed(path: Path, fmt: str | None = None) -> list[tuple[str, ...]]:
    """The file's disk rows as sar prints them: time of day (UTC), device, 8 values."""
    df = import_file(path, fmt=fmt).frame.df
    return [(ts.strftime("%H:%M:%S"), dev, *(f"{0.0 if v is None else v:.2f}"
                                             for v in vals))
            for ts, dev, *vals in df.select("ts", "device", *COLS).iter_rows()]


def sar_a_disk_rows(path: Path) -> list[tuple[str, ...]]:
    """The DEV section's rows of a ``sar -A`` output (Average lines left out)."""
    rows: list[tuple[str, ...]] = []
    in_dev = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\d\d:\d\d:\d\d\s+DEV\s+tps", line):
            in_dev = True
        elif not line.strip():
            in_dev = False
        elif in_dev and (m := _ROW.match(line)):
            rows.append(m.groups())
    return rows


@pytest.mark.parametrize("version", OLD)
def test_every_disk_row_equals_sysstats_expected_sar_output(version: str) -> None:
    """Every DEV row sysstat's test suite expects of its file, to the printed digits, and
    no other row (the names: the fixed SCSI numbering, as sar's ioconf table gives)."""
    expected = sar_a_disk_rows(SA / f"sysstat-data-{version}.sar-A.txt")
    assert len(expected) >= 10
    assert printed(SA / f"sysstat-data-{version}.sa") == expected


def test_old_formats_say_what_they_assumed() -> None:
    result = import_file(SA / "sysstat-data-9.1.6.sa")
    assert result.format == "sa"
    notes = " ".join(result.notes)
    assert "0x2171" in notes and "100 assumed" in notes
    assert "comment in the sa file at offset 976: 'Test sysstat 9.1.6'" in notes
    assert "1 restart record(s)" in notes


def test_big_endian_ppc64_file_is_walked_to_its_end() -> None:
    """The real big-endian file (no disk activity): its header and every record are read
    in its byte order, and the error says what the file holds."""
    with pytest.raises(InputFormatError) as exc:
        import_file(SA / "sysstat-data-ppc-11.7.2.sa")
    message = str(exc.value)
    assert ("(sysstat 11.5.5, big-endian, ppc) holds 3 statistics records but no disk "
            "statistics") in message
    assert "-S DISK" in message


def sadf_rows(path: Path) -> list[tuple[str, ...]]:
    """``sadf -d FILE -- -d`` of this machine, as (time, device, 8 values)."""
    out = subprocess.run(["sadf", "-d", str(path), "--", "-d"], capture_output=True,
                         text=True, check=True, env={**os.environ, "LC_ALL": "C", "TZ": "UTC"})
    rows = []
    for line in out.stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = line.split(";")
        if len(f) < 12:
            continue  # (a LINUX-RESTART or COM line)
        rows.append((f[2].split()[1], f[3], *f[4:12]))
    return rows


@needs_sadf
@pytest.mark.parametrize("name", V12)
def test_equals_live_sadf_in_both_byte_orders(name: str, tmp_path: Path) -> None:
    data = (SA / name).read_bytes()
    swapped = tmp_path / name
    swapped.write_bytes(swap_sa(data))
    assert swapped.read_bytes()[:4] == b"\xd5\x96\x21\x75"  # (written as a big-endian host)
    oracle = sadf_rows(SA / name)
    assert len(oracle) >= 12
    assert printed(SA / name) == oracle
    assert sadf_rows(swapped) == oracle  # (sadf agrees that the swapped copy is the same)
    assert printed(swapped) == oracle
    native = import_file(SA / name).frame.df
    assert import_file(swapped).frame.df.equals(native)


@needs_sadf
def test_sadf_path_kept_as_sa_sadf() -> None:
    result = import_file(SA / V12[0], fmt="sa-sadf")
    assert result.format == "sa-sadf"
    assert printed(SA / V12[0], fmt="sa-sadf") == printed(SA / V12[0])


def test_needs_no_sadf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IOGAUGE_SADF", str(tmp_path / "no-such-sadf"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert len(import_file(SA / V12[0]).frame) == 32


def _cut_rows(data: bytes, at: int, tmp_path: Path) -> tuple[list[tuple[str, ...]], list[str]]:
    cut = tmp_path / "sa01"
    cut.write_bytes(data[:at])
    error = ""
    try:
        result = import_file(cut)
    except InputFormatError as exc:
        error = str(exc)
    if error:
        assert error.startswith(f"{cut}: ") and "failed unexpectedly" not in error
        return [], [error]
    return printed(cut), result.notes


@pytest.mark.parametrize("name", [V12[0], "sysstat-data-12.0.0.sa"])
def test_cut_at_every_record_boundary_and_inside_every_record(name: str,
                                                              tmp_path: Path) -> None:
    data = (SA / name).read_bytes()
    full = printed(SA / name)
    starts = record_offsets(data)
    assert starts[-1] == len(data) and len(starts) > 4
    for i, at in enumerate(starts):
        rows, notes = _cut_rows(data, at, tmp_path)
        assert rows == full[:len(rows)]
        assert not any("cut off" in n for n in notes)  # (whole records only)
        if i + 1 < len(starts):
            mid = (at + starts[i + 1]) // 2
            rows_mid, notes_mid = _cut_rows(data, mid, tmp_path)
            assert rows_mid == rows, mid  # (the partial record gives nothing)
            assert any(f"inside the record that starts at offset {at}" in n
                       for n in notes_mid), (mid, notes_mid)
    assert _cut_rows(data, len(data), tmp_path)[0] == full


@pytest.mark.parametrize("version", ["9.1.6", "11.6.5"])
def test_old_formats_cut_anywhere(version: str, tmp_path: Path) -> None:
    data = (SA / f"sysstat-data-{version}.sa").read_bytes()
    full = printed(SA / f"sysstat-data-{version}.sa")
    for at in range(2, len(data), 61):
        rows, _ = _cut_rows(data, at, tmp_path)
        assert rows == full[:len(rows)]


def _outcome(path: Path) -> str:
    """'rows' or the error's text; anything but an InputFormatError fails the test."""
    error, prefix = "", f"{path}: "
    try:
        import_file(path)
    except BinaryFormatError as exc:
        error, prefix = str(exc), f"{path}: offset {exc.offset}: "
    except InputFormatError as exc:
        error = str(exc)
    if not error:
        return "rows"
    assert error.startswith(prefix) and "failed unexpectedly" not in error
    return error


@pytest.mark.parametrize(("name", "big_endian"), [
    (V12[0], False), (V12[0], True), ("sysstat-data-9.1.6.sa", False),
    ("sysstat-data-11.6.5.sa", False), ("sysstat-data-ppc-11.7.2.sa", False)])
def test_damaged_files_give_a_clear_error(name: str, big_endian: bool,
                                          tmp_path: Path) -> None:
    """Random bytes after the magic, header words set to 0xffffffff or 0x7fffff7f in turn
    (absurd counts and sizes), random flips: rows or an error naming file and offset."""
    rng = random.Random(36)  # noqa: S311 - reproducible damage, not secrets
    data = (SA / name).read_bytes()
    if big_endian:
        data = swap_sa(data)
    path = tmp_path / "sa01"
    cases = [data[:2] + rng.randbytes(n) for n in (0, 1, 7, 300, 5000)]
    head = len(data) if len(data) < 400 else 400
    cases += [data[:i] + b"\xff" * 4 + data[i + 4:] for i in range(2, head, 3)]
    cases += [data[:i] + b"\x7f\xff\xff\x7f" + data[i + 4:] for i in range(2, head, 5)]
    for _ in range(150):
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(2, len(b))] = rng.randrange(256)  # (not the magic)
        cases.append(bytes(b))
    outcomes = []
    for case in cases:
        path.write_bytes(case)
        outcomes.append(_outcome(path))
    assert sum(o != "rows" for o in outcomes) > 20
    assert any("offset" in o for o in outcomes)


def test_unknown_format_magic_is_refused_with_advice(tmp_path: Path) -> None:
    data = bytearray((SA / V12[0]).read_bytes())
    data[2:4] = b"\x77\x21"
    path = tmp_path / "sa01"
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=r"offset 2: sa format 0x2177 is not one this "
                       r"reader knows .*--format sa-sadf"):
        import_file(path)


def test_frames_of_a_bigger_file_come_in_pieces() -> None:
    """The rows of a file come a piece at a time with the same result as one piece."""
    from iogauge.importers import sa

    src = (SA / V12[0])
    with src.open("rb") as fh:
        frames = list(sa.iter_parse(fh, sa.Source(path=str(src)), rows_per_frame=4))
    assert len(frames) >= 8
    whole = import_file(src).frame.df
    assert pl.concat([f.df for f in frames]).equals(whole)


def _disk_entry(data: bytes) -> int:
    """Offset of the disk activity's entry in an 0x2175 little-endian file (id 11)."""
    header_size = int.from_bytes(data[8:12], "little")
    at = 76 + header_size
    for k in range(64):
        if int.from_bytes(data[at + 36 * k:at + 36 * k + 4], "little") == 11:
            return at + 36 * k
    raise AssertionError("no disk activity")


def test_layout_is_read_from_the_file_not_from_a_version_table(tmp_path: Path) -> None:
    """An activity magic this reader has never seen, with a layout the file describes
    (types and size), is read by its layout; one that lacks sar -d's counters, or does
    not fit its items, is refused at the entry's offset."""
    data = (SA / V12[0]).read_bytes()
    entry = _disk_entry(data)
    path = tmp_path / "sa01"
    newer = bytearray(data)
    newer[entry + 4:entry + 8] = (0x8F).to_bytes(4, "little")  # (magic of a future layout)
    path.write_bytes(bytes(newer))
    assert import_file(path).frame.df.equals(import_file(SA / V12[0]).frame.df)
    lacking = bytearray(data)
    lacking[entry + 24:entry + 36] = b"\x01\x00\x00\x00" + b"\x00" * 4 + b"\x01\x00\x00\x00"
    path.write_bytes(bytes(lacking))
    with pytest.raises(BinaryFormatError, match=rf"offset {entry}: disk activity layout "
                       r"\(1, 0, 1\) lacks the counters sar -d needs"):
        import_file(path)
    too_big = bytearray(data)
    too_big[entry + 24:entry + 28] = (200).to_bytes(4, "little")
    path.write_bytes(bytes(too_big))
    with pytest.raises(BinaryFormatError, match=rf"offset {entry}: activity 11's layout"):
        import_file(path)


def test_lenient_keeps_the_records_before_damage(tmp_path: Path) -> None:
    data = bytearray((SA / V12[0]).read_bytes())
    starts = record_offsets(bytes(data))
    last = starts[-2]
    data[last + 20] = 99  # (the last record's type: not one sysstat writes)
    path = tmp_path / "sa01"
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=rf"offset {last}: record type 99"):
        import_file(path)
    result = import_file(path, lenient=True)
    assert result.skipped == 1 and "record type 99" in result.skipped_examples[0]
    full = import_file(SA / V12[0]).frame.df
    assert 0 < len(result.frame) < len(full)
    assert result.frame.df.equals(full.head(len(result.frame)))


@needs_sadf
@pytest.mark.parametrize("version", OLD)
def test_old_formats_equal_this_machines_sadf_c_conversion(version: str) -> None:
    """Where this machine's sadf can convert the file (sadf -c, as --format sa-sadf does),
    it is a second oracle: the same rows to the printed digits."""
    path = SA / f"sysstat-data-{version}.sa"
    try:
        oracle = printed(path, fmt="sa-sadf")
    except InputFormatError as exc:  # (this sadf cannot convert it: nothing to compare)
        pytest.skip(f"this machine's sadf cannot read it: {exc}")
    assert printed(path) == oracle


def test_devices_of_another_host_keep_sars_numbered_names(tmp_path: Path) -> None:
    """A file from another host: no name from this machine's /sys; the fixed numbering
    where it applies (loop devices here, SCSI disks in the 9.1.6 to 12.0.0 files), else
    sar's devM-m (a virtio disk's major is dynamic), and a note."""
    data = bytearray((SA / V12[0]).read_bytes())
    host = data.index(b"vm\0")  # (the header's nodename)
    data[host:host + 3] = b"db\0"
    path = tmp_path / "sa01"
    path.write_bytes(bytes(data))
    result = import_file(path)
    assert set(result.frame.df["device"]) == {"loop0", "loop1", "loop2", "dev254-0"}
    assert set(result.frame.df["host"]) == {"db"}
    assert any("written on db, not here" in n for n in result.notes)


def test_compressed_and_empty_files(tmp_path: Path) -> None:
    import gzip

    data = (SA / "sysstat-data-9.1.6.sa").read_bytes()
    packed = tmp_path / "sa21.gz"
    packed.write_bytes(gzip.compress(data))
    result = import_file(packed)
    assert result.compression == "gzip" and result.input_bytes == len(data)
    assert printed(packed) == printed(SA / "sysstat-data-9.1.6.sa")
    empty = tmp_path / "sa22"
    empty.write_bytes(b"")
    with pytest.raises(InputFormatError, match="sa22: offset 0: the file is empty"):
        import_file(empty, fmt="sa")


#: sar -d column -> (SampleFrame column, factor): 10.x printed sectors, 12.x kB.
_SAR_D = {"tps": ("iops", 1.0), "rd_sec/s": ("r_kBps", 2.0), "wr_sec/s": ("w_kBps", 2.0),
          "avgrq-sz": ("areq_kB", 2.0), "avgqu-sz": ("aqu_sz", 1.0), "await": ("await_ms", 1.0),
          "%util": ("util_pct", 1.0), "rkB/s": ("r_kBps", 1.0), "wkB/s": ("w_kBps", 1.0),
          "dkB/s": ("d_kBps", 1.0), "areq-sz": ("areq_kB", 1.0), "aqu-sz": ("aqu_sz", 1.0)}


def sar_dp_rows(path: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    """(columns, rows) of ``sar -d -p`` text of any version: DEV second (10.x) or last
    (12.x); svctm (10.x) is left out, as sysstat 12 no longer computes it."""
    cols: list[str] = []
    rows: list[tuple[str, ...]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) < 3 or not re.match(r"\d\d:\d\d:\d\d$", parts[0]):
            continue
        if "DEV" in parts:
            dev_at = parts.index("DEV")
            cols = [c for c in parts[1:] if c != "DEV"]
            continue
        if "RESTART" in line or not cols:
            continue
        dev = parts[dev_at]
        values = [v for i, v in enumerate(parts[1:], 1) if i != dev_at]
        rows.append((parts[0], dev, *(v for c, v in zip(cols, values, strict=True)
                                      if c != "svctm")))
    return [c for c in cols if c != "svctm"], rows


@pytest.mark.parametrize("version", ["10.3.1", "12.7.9", "12.7.9-i386"])
def test_files_of_sadc_built_from_sysstats_tags_equal_their_own_sar(version: str) -> None:
    """sa files recorded here by sadc built from sysstat's v10.3.1 and v12.7.9 tags (a
    restart in each, a comment in the first two; i386: built with -m32, so C longs of 4
    bytes), against the sar -d -p of the same build, to the printed digits. This
    machine's sadf 12.6.1 prints no disk row of the 12.7.9 files."""
    name = f"sysstat{version}-disk-restart"
    cols, expected = sar_dp_rows(SA / f"{name}.sar-d-p.txt")
    assert len(expected) >= 40
    df = import_file(SA / f"{name}.sa").frame.df
    got = [(ts.strftime("%H:%M:%S"), r["device"],
            *(f"{(r[_SAR_D[c][0]] or 0.0) * _SAR_D[c][1]:.2f}" for c in cols))
           for ts, r in zip(df["ts"], df.iter_rows(named=True), strict=True)]
    assert got == expected


def test_big_endian_copy_of_a_32_bit_file(tmp_path: Path) -> None:
    """A 32-bit little-endian file swapped to what a 32-bit big-endian machine writes
    (4-byte C longs swapped in their 8-byte slots) reads the same."""
    name = "sysstat12.7.9-i386-disk-restart.sa"
    swapped = tmp_path / name
    swapped.write_bytes(swap_sa((SA / name).read_bytes()))
    assert import_file(swapped).frame.df.equals(import_file(SA / name).frame.df)


def test_absurd_counts_are_damage_not_a_cut(tmp_path: Path) -> None:
    """An item count that no file could hold is refused where it is declared; one beyond
    sadf's own limits already in the activity list."""
    data = bytearray((SA / "sysstat-data-9.1.6.sa").read_bytes())
    entries = 8 + 280  # (0x2171: 8-byte file_magic, 280-byte header, 20-byte entries)
    disk = next(entries + 20 * k for k in range(40)
                if int.from_bytes(data[entries + 20 * k:entries + 20 * k + 4], "little") == 11)
    path = tmp_path / "sa01"
    data[disk + 8:disk + 12] = (1_000_000).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=rf"offset {disk}: activity 11 has 1000000 "
                       r"items of 80 bytes in the record at offset \d+: more than the whole "
                       "file holds"):
        import_file(path)
    data[disk + 8:disk + 12] = (0x7FFF_FFFF).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=rf"offset {disk}: activity 11 declares "
                       r"2147483647 x 1 items of 80 bytes, outside sadf's limits"):
        import_file(path)
