"""Import what this machine's real sysstat iostat prints, and check every printed value.

Each test runs iostat (text in kB and MB with -p ALL, -o JSON, --human, --pretty) while a
``dd oflag=direct`` writes and reads a temporary file, so the reports hold real, non-zero
numbers; one test partitions a loop device so that ``-p ALL`` prints partitions. The
printed text is read here by a deliberately simple line-by-line reader (the reference), and
every device-interval it finds must be a row of the import with the value it printed,
converted by the documented unit rule (MB x 1024, human k/M/G x 1024 per letter, % dropped).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from tests.helpers.system import require_loop_support, require_root, require_tools

from iogauge.importers import iostat, iostat_json, registry
from iogauge.importers.base import Source
from iogauge.model.sampleframe import SampleFrame

pytestmark = [pytest.mark.slow]

#: printed column -> (SampleFrame column, factor for plain numbers)
COLUMN: dict[str, tuple[str, float]] = {
    "r/s": ("r_iops", 1), "w/s": ("w_iops", 1), "d/s": ("d_iops", 1), "f/s": ("f_iops", 1),
    "rkB/s": ("r_kBps", 1), "wkB/s": ("w_kBps", 1), "dkB/s": ("d_kBps", 1),
    "rMB/s": ("r_kBps", 1024), "wMB/s": ("w_kBps", 1024), "dMB/s": ("d_kBps", 1024),
    "rrqm/s": ("r_merged_ps", 1), "wrqm/s": ("w_merged_ps", 1), "drqm/s": ("d_merged_ps", 1),
    "%rrqm": ("r_rqm_pct", 1), "%wrqm": ("w_rqm_pct", 1), "%drqm": ("d_rqm_pct", 1),
    "r_await": ("r_await_ms", 1), "w_await": ("w_await_ms", 1), "d_await": ("d_await_ms", 1),
    "f_await": ("f_await_ms", 1), "rareq-sz": ("r_areq_kB", 1), "wareq-sz": ("w_areq_kB", 1),
    "dareq-sz": ("d_areq_kB", 1), "aqu-sz": ("aqu_sz", 1), "%util": ("util_pct", 1),
    "util": ("util_pct", 1), "rrqm": ("r_rqm_pct", 1), "wrqm": ("w_rqm_pct", 1),
    "drqm": ("d_rqm_pct", 1),
}
SUFFIX = {"k": 1.0, "M": 1024.0, "G": 1024.0**2, "T": 1024.0**3}
STAMP = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d\s*$")


def value(token: str, factor: float) -> float:
    """A printed token in SampleFrame units (the reference conversion)."""
    token = token.rstrip("%")
    if token[-1] in SUFFIX:
        return float(token[:-1]) * SUFFIX[token[-1]]
    return float(token) * factor


def printed_rows(text: str) -> list[dict[str, Any]]:
    """(report number, device, {column: value}) of every device line iostat printed."""
    out: dict[tuple[int, str], dict[str, Any]] = {}
    report = 0
    header: list[str] | None = None
    lines = text.splitlines()
    stamped = any(STAMP.match(x) for x in lines)
    for line in lines:
        if STAMP.match(line) or line.startswith("avg-cpu"):
            if bool(STAMP.match(line)) == stamped:  # a report starts at its stamp or CPU
                report += 1
            header = None
        elif line.startswith("Device") or line.rstrip().endswith(" Device"):
            header = line.split()
        elif not line.strip():
            header = None
        elif header is not None:
            tokens = line.split()
            assert len(tokens) == len(header), line
            device = tokens[0] if header[0].startswith("Device") else tokens[-1]
            row = out.setdefault((report, device), {"report": report, "device": device})
            for name, tok in zip(header, tokens, strict=True):
                if name in COLUMN:
                    col, factor = COLUMN[name]
                    row[col] = value(tok, factor)
    return list(out.values())


def assert_matches(frame: SampleFrame, printed: list[dict[str, Any]]) -> None:
    """Every printed device-interval is a row with equal values, and nothing more."""
    times = frame.df["ts"].unique().sort().to_list()
    by_key = {(times.index(r["ts"]) + 1, r["device"]): r
              for r in frame.df.iter_rows(named=True)}
    assert len(by_key) == len(frame) == len(printed)
    for p in printed:
        got = by_key[(p["report"], p["device"])]
        for col, v in p.items():
            if col not in ("report", "device"):
                assert got[col] == v, (p["report"], p["device"], col)


@pytest.fixture(scope="module")
def iostat_bin() -> str:
    return require_tools("iostat")["iostat"]


@contextlib.contextmanager
def disk_load(target: str | None = None) -> Iterator[None]:
    """dd writing then reading with O_DIRECT until the block ends (real device I/O)."""
    base = os.environ.get("IOGAUGE_E2E_BACKING_DIR") or "/var/tmp"
    with tempfile.TemporaryDirectory(dir=base if Path(base).is_dir() else None) as tmp:
        path = target or str(Path(tmp) / "load.bin")
        script = (f"while :; do dd if=/dev/zero of={path} bs=64k count=256 oflag=direct "
                  f"conv=notrunc status=none; dd if={path} of=/dev/null bs=4k count=2048 "
                  "iflag=direct status=none; done")
        proc = subprocess.Popen(["sh", "-c", script], start_new_session=True)
        try:
            time.sleep(0.3)
            yield
        finally:
            os.killpg(proc.pid, 9)
            proc.wait()


def run(cmd: list[str], **env: str) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "LC_ALL": "C", **env})
    return res.stdout


def import_text(tmp_path: Path, text: str, name: str, **kw: Any) -> SampleFrame:
    path = tmp_path / name
    path.write_text(text)
    result = registry.import_file(path, **kw)
    assert result.format == "iostat"
    return result.frame


@pytest.mark.parametrize("unit", ["-k", "-m"])
def test_extended_with_stamps_and_partitions(iostat_bin: str, tmp_path: Path,
                                             unit: str) -> None:
    with disk_load():
        text = run([iostat_bin, "-x", "-t", unit, "-p", "ALL", "1", "3"])
    frame = import_text(tmp_path, text, f"x-t{unit}.txt")
    printed = printed_rows(text)
    assert len(printed) >= 3
    assert_matches(frame, printed)
    assert frame.df["ts"].n_unique() == 3
    assert int(frame.df["since_boot"].sum()) == len([p for p in printed if p["report"] == 1])
    assert (frame.df.filter(~pl.col("since_boot"))["interval_s"] == 1.0).all()
    assert frame.df.filter(~pl.col("since_boot"))["w_kBps"].max() > 0  # dd's writes


def test_json(iostat_bin: str, tmp_path: Path) -> None:
    with disk_load():
        text = run([iostat_bin, "-x", "-o", "JSON", "1", "3"])
    path = tmp_path / "x.json"
    path.write_text(text)
    result = registry.import_file(path, interval_s=1.0)  # no -t: the interval is needed
    assert result.format == "iostat-json"
    stats = json.loads(text)["sysstat"]["hosts"][0]["statistics"]
    frame = result.frame
    times = frame.df["ts"].unique().sort().to_list()
    assert len(times) == len(stats) == 3
    n = 0
    for t, st in zip(times, stats, strict=True):
        for disk in st["disk"]:
            row = frame.df.filter((pl.col("ts") == t) & (pl.col("device") == disk["disk_device"]))
            got = row.row(0, named=True)
            for key, v in disk.items():
                if key in COLUMN:
                    col, factor = COLUMN[key]
                    assert got[col] == v * factor, (key, disk["disk_device"])
            assert got["cpu_user_pct"] == st["avg-cpu"]["user"]
            n += 1
    assert len(frame) == n


@pytest.mark.parametrize("options", [["-x", "-t", "-p", "ALL"], ["-d", "-t", "-z"],
                                     ["-x", "-t", "-m", "-g", "grp", "ALL"], ["-c", "-t"]],
                         ids=["x-p-ALL", "d-z", "x-m-group", "cpu-only"])
def test_json_in_iostats_layout_read_in_pieces(iostat_bin: str, options: list[str]) -> None:
    """What this sysstat writes is in the layout read a piece at a time (iostat_json
    .own_layout); read in pieces of 300 bytes to 64 kB it gives the rows of one read of
    the whole, and every disk object is a row with its printed values."""
    with disk_load():
        text = run([iostat_bin, "-o", "JSON", *options, "1", "3"])
    data = text.encode()
    assert iostat_json.own_layout(data[:64])
    whole_src = Source(path="live.json")
    whole = iostat_json.parse(data, whole_src)
    for chunk in (300, 4096, 65536):
        src = Source(path="live.json")
        frames = list(iostat_json.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk))
        got = SampleFrame.concat(frames).df if frames else SampleFrame.empty().df
        assert_frame_equal(got, whole.df)
        assert src.notes == whole_src.notes
    stats = json.loads(text)["sysstat"]["hosts"][0]["statistics"]
    df = whole.df
    times = df["ts"].unique(maintain_order=True).to_list()
    if "-c" in options:
        assert len(df) == 0 and len(stats) == 3
        assert any("no device statistics" in n for n in whole_src.notes)
        return
    with_disks = [st for st in stats if st.get("disk")]  # (-z: an idle interval has none)
    printed = [(t, d) for t, st in zip(times, with_disks, strict=True) for d in st["disk"]]
    assert len(df) == len(printed)
    assert len(stats) == 3 and len(with_disks) >= 2
    for t, disk in printed:
        row = df.filter((pl.col("ts") == t) & (pl.col("device") == disk["disk_device"]))
        got_row = row.row(0, named=True)
        for key, v in disk.items():
            if key in COLUMN:
                col, factor = COLUMN[key]
                assert got_row[col] == v * factor, (key, disk["disk_device"])


def test_json_cut_while_running(iostat_bin: str, tmp_path: Path) -> None:
    """iostat killed mid-run leaves a document without its closing brackets. Its output
    goes to a file, as a log does: a pipe nobody reads holds 64 kB, less than one report on
    a machine with a thousand disks (iostat would wait on it until killed, and the test saw
    no complete report)."""
    out = tmp_path / "cut.json"
    with disk_load(), out.open("w") as fh:
        proc = subprocess.Popen([iostat_bin, "-x", "-t", "-o", "JSON", "1", "10"],
                                stdout=fh, env={**os.environ, "LC_ALL": "C"})
        time.sleep(2.5)
        proc.kill()
        proc.wait()
    text = out.read_text()
    src = Source(path="cut.json")
    frame = iostat_json.parse(text.encode(), src)
    complete = text.count('"timestamp"') - (0 if text.rstrip().endswith("}") else 1)
    assert frame.df["ts"].n_unique() >= 2
    assert frame.df["ts"].n_unique() in (complete, complete + 1)


@pytest.mark.parametrize("options", [["-x", "-h"], ["-x", "--pretty"], ["-x", "--human"]],
                         ids=["h", "pretty", "human"])
def test_human_and_pretty(iostat_bin: str, tmp_path: Path, options: list[str]) -> None:
    with disk_load():
        text = run([iostat_bin, *options, "1", "2"])
    frame = import_text(tmp_path, text, "h.txt", interval_s=1.0)
    printed = printed_rows(text)
    assert_matches(frame, printed)
    assert frame.df.filter(~pl.col("since_boot")).height == len(
        [p for p in printed if p["report"] == 2])


def _mbr(path: Path, size: int, parts: list[tuple[int, int]]) -> None:
    """A DOS partition table (Linux type 0x83) with (first LBA, sectors) entries."""
    with path.open("r+b") as f:
        f.truncate(size)
        table = b""
        for start, count in parts:
            table += struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0", start, count)
        f.seek(446)
        f.write(table.ljust(64, b"\0") + b"\x55\xaa")


@contextlib.contextmanager
def partitioned_loop(directory: Path) -> Iterator[str]:
    """A loop device over a 48 MiB file with two partitions; yields 'loopN'."""
    require_root()
    require_loop_support()
    require_tools("losetup")
    img = directory / "parts.img"
    img.touch()
    _mbr(img, 48 << 20, [(2048, 32768), (34816, 40960)])
    res = subprocess.run(["losetup", "--find", "--show", "--partscan", "--direct-io=on",
                          str(img)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"losetup --partscan failed: {res.stderr.strip()}")
    dev = res.stdout.strip()
    try:
        for _ in range(50):
            if Path(f"{dev}p1").exists():
                break
            time.sleep(0.1)
        else:
            pytest.skip(f"the kernel made no partitions of {dev} (no DOS partition table "
                        "support: CONFIG_MSDOS_PARTITION off?); -p ALL partitions are covered "
                        "by the unit tests' fixtures")
        yield Path(dev).name
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True, check=False)


@pytest.mark.root
def test_partitions_of_a_loop_device(iostat_bin: str, tmp_path: Path) -> None:
    base = Path(os.environ.get("IOGAUGE_E2E_BACKING_DIR") or "/var/tmp")
    with tempfile.TemporaryDirectory(dir=base if base.is_dir() else None) as d, \
            partitioned_loop(Path(d)) as loop, disk_load(f"/dev/{loop}p1"):
        text = run([iostat_bin, "-x", "-t", "-p", "ALL", "1", "3"])
    frame = import_text(tmp_path, text, "parts.txt")
    assert_matches(frame, printed_rows(text))
    p1 = frame.df.filter(pl.col("device") == f"{loop}p1")
    assert p1.height == 3
    assert set(p1["device_kind"]) == {"partition"} and set(p1["parent"]) == {loop}
    assert p1.filter(~pl.col("since_boot"))["w_iops"].max() > 0
    whole = frame.df.filter(pl.col("device") == loop)
    assert set(whole["device_kind"]) == {"loop"} and whole["parent"].null_count() == 3


def test_streamed_import_of_a_live_log_equals_whole(iostat_bin: str, tmp_path: Path) -> None:
    with disk_load():
        text = run([iostat_bin, "-x", "-t", "-p", "ALL", "1", "4"])
    data = text.encode()
    whole = iostat.parse(data, Source(path="x"))
    parts = list(iostat.iter_parse(io.BytesIO(data), Source(path="x"), chunk_bytes=700))
    assert_frame_equal(SampleFrame.concat(parts).df, whole.df)
