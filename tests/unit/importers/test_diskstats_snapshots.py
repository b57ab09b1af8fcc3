"""diskstats: snapshot sequences (pt-diskstats TS-before, aspersa TS-after, date +%s.%N) with
hand-computed goldens, the real lone snapshot of kellyjonbrazil/jc, refusals with file:line,
and equality with the live collector fed the same counters (fixed scenarios and hypothesis).
"""

from __future__ import annotations

import io
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers.importing import assert_pieces_agree, reading_variants

from iogauge.collector.derive import DERIVED_COLUMNS
from iogauge.collector.linux import LinuxCollector, frame_from_results
from iogauge.errors import InputFormatError
from iogauge.importers import diskstats_snapshots as ds
from iogauge.importers.base import Source
from iogauge.importers.io import HEAD_BYTES
from iogauge.importers.registry import detect
from iogauge.model.sampleframe import SampleFrame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIX = FIXTURES / "diskstats-snapshots"
PT = FIX / "pt-diskstats-ts-before-kernel5.txt"
ASPERSA = FIX / "aspersa-ts-after-kernel26.txt"
DATE = FIX / "date-epoch-kernel418.txt"
JC = FIXTURES / "diskstats" / "jc-kernel5-diskstats.txt"
REL = 1e-12


def parse(data: bytes, path: str = "cap.txt", **kw: Any) -> tuple[pl.DataFrame, Source]:
    src = Source(path=path, **kw)
    return ds.parse(data, src).df, src


def at(df: pl.DataFrame, device: str, ts_us: int) -> dict[str, Any]:
    ts = datetime.fromtimestamp(ts_us / 1e6, tz=UTC)
    hit = df.filter((pl.col("device") == device) & (pl.col("ts") == ts))
    assert hit.height == 1, (device, ts, hit.height)
    return hit.to_dicts()[0]


def check(r: dict[str, Any], **want: float | None) -> None:
    for k, v in want.items():
        if v is None:
            assert r[k] is None, (k, r[k])
        else:
            assert r[k] is not None and math.isclose(r[k], v, rel_tol=REL, abs_tol=1e-12), \
                (k, r[k], v)


# ---------------------------------------------------------------------------------------------
# sniffing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [*sorted(FIX.iterdir()), JC], ids=lambda p: p.name)
def test_snapshot_files_are_detected(path: Path) -> None:
    assert detect(path.read_bytes()[:HEAD_BYTES], str(path)) == "diskstats"


@pytest.mark.parametrize("text", [
    '"(PDH-CSV 4.0) (UTC)(0)","\\\\H\\LogicalDisk(C:)\\Disk Reads/sec"\n',
    '{"fio version": "fio-3.33"}',
    "Linux 6.1.0 (host) \t04/15/2024 \t_x86_64_\t(2 CPU)\n\nDevice  r/s\nsda 1.0\n",
    "TS 1700000000.5\n",  # timestamps only
    "   8       0 sda 1 2 3 4 5\n",  # 2 counters: no kernel layout
    "",
])
def test_sniff_refuses(text: str) -> None:
    assert not ds.sniff(text)


# ---------------------------------------------------------------------------------------------
# pt-diskstats --save-samples: TS before each snapshot, 17-field lines
# ---------------------------------------------------------------------------------------------
T0 = 1_700_000_000_000_000  # TS lines at +0, +1, +2.5, +3.5 s


def test_pt_diskstats_sda_golden() -> None:
    df, src = parse(PT.read_bytes(), str(PT))
    SampleFrame(df).validate()
    # 1 s: reads +100, merges +10, sectors +8000, ms +400; writes +200 +50 +16000 +1000;
    # io_ticks +500, weighted +700, flushes +10 / +20 ms, no discards
    check(at(df, "sda", T0 + 1_000_000), interval_s=1.0, r_iops=100.0, r_kBps=4000.0,
          r_merged_ps=10.0, r_rqm_pct=10 / 110 * 100, r_await_ms=4.0, r_areq_kB=40.0,
          w_iops=200.0, w_kBps=8000.0, w_await_ms=5.0, w_rqm_pct=50 / 250 * 100,
          d_iops=0.0, d_await_ms=0.0, f_iops=10.0, f_await_ms=2.0, iops=300.0,
          await_ms=1400 / 300, aqu_sz=0.7, util_pct=50.0, inflight=2.0)
    # 1.5 s: io_ticks 4294966500 -> 104 wrapped at 2**32 (+900 ms), discards +2 / 1024
    # sectors / +6 ms
    check(at(df, "sda", T0 + 2_500_000), interval_s=1.5, r_iops=100.0, r_await_ms=3.0,
          w_iops=200.0, w_await_ms=4.0, d_iops=2 / 1.5, d_kBps=512 / 1.5, d_await_ms=3.0,
          d_areq_kB=256.0, f_iops=10.0, f_await_ms=2.0, util_pct=60.0, aqu_sz=0.6,
          await_ms=(450 + 1200 + 6) / (150 + 300 + 2), inflight=1.0)
    check(at(df, "sda", T0 + 3_500_000), r_iops=0.0, r_await_ms=0.0, r_areq_kB=0.0,
          w_iops=100.0, w_await_ms=5.0, util_pct=40.0, aqu_sz=0.5)
    assert any("wrapped at 2**32" in n for n in src.notes)


def test_pt_diskstats_devices_kinds_and_resets() -> None:
    df, src = parse(PT.read_bytes(), str(PT))
    kinds = dict(df.select("device", "device_kind").unique().rows())
    assert kinds == {"sda": "disk", "sda1": "partition", "sdb": "disk", "md0": "md",
                     "dm-1": "dm", "nvme0n1": "disk", "nvme0n1p1": "partition",
                     "loop1": "loop"}
    parents = dict(df.select("device", "parent").unique().rows())
    assert parents["sda1"] == "sda" and parents["nvme0n1p1"] == "nvme0n1"
    # dm-1 re-created: counts went back -> reset row, no values; then derived again
    r = at(df, "dm-1", T0 + 2_500_000)
    assert r["reset"] and r["interval_s"] == 1.5
    assert all(r[m] is None for m in DERIVED_COLUMNS)
    check(at(df, "dm-1", T0 + 3_500_000), r_iops=100.0, r_await_ms=1.0, w_iops=50.0,
          w_await_ms=3.0, util_pct=20.0)
    # loop1 absent at +2.5 s, back at +3.5 s: reset over the time since the last snapshot
    assert [d["ts"] for d in df.filter(pl.col("device") == "loop1").to_dicts()] == [
        datetime.fromtimestamp((T0 + 1_000_000) / 1e6, tz=UTC),
        datetime.fromtimestamp((T0 + 3_500_000) / 1e6, tz=UTC)]
    lp = at(df, "loop1", T0 + 3_500_000)
    assert lp["reset"] and lp["interval_s"] == 1.0
    # sdb first seen at +2.5 s: baselined there, first row at +3.5 s
    check(at(df, "sdb", T0 + 3_500_000), interval_s=1.0, r_iops=100.0, r_kBps=3200.0,
          r_await_ms=2.0, inflight=1.0)
    assert df.filter(pl.col("device") == "sdb").height == 1
    # md arrays account no time: sysstat prints 0.00, so do we
    check(at(df, "md0", T0 + 1_000_000), r_iops=100.0, r_await_ms=0.0, util_pct=0.0)
    assert df.height == 7 + 6 + 8  # rows per interval: 7, then 6 (loop1 gone), then 8
    notes = " | ".join(src.notes)
    assert "counters went backwards" in notes and "came back" in notes


# ---------------------------------------------------------------------------------------------
# aspersa: TS after each snapshot; 11-field disks, 4-field (32-bit) partition lines
# ---------------------------------------------------------------------------------------------
def test_aspersa_ts_after_old_layout() -> None:
    df, _ = parse(ASPERSA.read_bytes(), str(ASPERSA))
    t1, t2 = 1_281_367_521_000_000, 1_281_367_523_000_000
    check(at(df, "cciss/c0d0", t1), interval_s=2.0, r_iops=50.0, r_kBps=200.0,
          r_await_ms=6.0, w_iops=100.0, w_kBps=600.0, w_await_ms=6.0, util_pct=60.0,
          aqu_sz=0.9, inflight=3.0, d_iops=None, f_iops=None)  # no discard fields: null
    p1 = at(df, "cciss/c0d0p1", t1)
    assert (p1["device_kind"], p1["parent"]) == ("partition", "cciss/c0d0")
    # 4-field counts are 32-bit: writes 4294966900 -> 4294967200 (+300), sectors wrapped
    check(p1, w_iops=150.0, w_kBps=2400 / 2 / 2, r_iops=0.0, r_await_ms=None,
          util_pct=None, aqu_sz=None, inflight=None)
    check(at(df, "cciss/c0d0p1", t2), w_iops=100.0, w_kBps=1600 / 2 / 2)
    check(at(df, "cciss/c0d0p2", t2), r_iops=100.0, r_kBps=400.0, w_iops=0.0)
    assert at(df, "dm-0", t2)["device_kind"] == "dm"


def test_ts_after_with_a_cut_off_last_snapshot() -> None:
    data = ASPERSA.read_bytes() + b" 104       0 cciss/c0d0 1 2 3 4 5 6 7 8 0 9 10\n"
    df, src = parse(data)
    assert df.height == 8
    assert any("without a usable timestamp" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# date +%s.%N loop: bare epoch lines, 15-field (discard) lines, nanoseconds
# ---------------------------------------------------------------------------------------------
def test_date_epoch_discards_and_nanoseconds() -> None:
    df, _ = parse(DATE.read_bytes(), str(DATE))
    # 1700000100.623456999 rounds to .623457 (the collector rounds its clock too)
    t1, t2 = 1_700_000_100_623_457, 1_700_000_101_123_457
    check(at(df, "sdc", t1), interval_s=0.5, r_iops=100.0, r_await_ms=0.6, w_iops=40.0,
          w_rqm_pct=4 / 24 * 100, w_await_ms=4.0, d_iops=10.0, d_kBps=10240.0,
          d_merged_ps=2.0, d_areq_kB=1024.0, d_await_ms=1.0, f_iops=None, f_await_ms=None,
          util_pct=20.0, aqu_sz=0.22, await_ms=(30 + 80 + 5) / (50 + 20 + 5))
    check(at(df, "sdc", t2), interval_s=0.5, w_iops=200.0, w_kBps=800.0, d_iops=0.0,
          util_pct=50.0)
    assert at(df, "sdc1", t1)["parent"] == "sdc"


# ---------------------------------------------------------------------------------------------
# a lone snapshot (the real kernel 5.x capture of kellyjonbrazil/jc): since boot
# ---------------------------------------------------------------------------------------------
def test_lone_snapshot_since_boot_golden() -> None:
    start = datetime(2020, 5, 1, 12, 0, tzinfo=UTC)
    df, src = parse(JC.read_bytes(), str(JC), start=start)
    SampleFrame(df).validate()
    assert df.height == 15 and df["since_boot"].all() and (df["ts"] == start).all()
    assert set(df["interval_s"]) == {ds.LONE_SNAPSHOT_INTERVAL_S}
    # "8 0 sda 14200 3361 892828 5058 18736 13416 715384 12604 0 24940 17663 0 0 0 0 0 0"
    sda = df.filter(pl.col("device") == "sda").to_dicts()[0]
    check(sda, r_await_ms=5058 / 14200, w_await_ms=12604 / 18736,
          await_ms=(5058 + 12604) / (14200 + 18736), r_areq_kB=892828 / 2 / 14200,
          w_areq_kB=715384 / 2 / 18736, r_rqm_pct=3361 / (3361 + 14200) * 100,
          w_rqm_pct=13416 / (13416 + 18736) * 100, inflight=0.0, f_await_ms=0.0,
          r_iops=None, w_kBps=None, util_pct=None, aqu_sz=None)
    assert dict(df.select("device", "parent").rows())["sda3"] == "sda"
    assert any("since boot" in n for n in src.notes)


def test_lone_snapshot_time_from_ts_line_or_file(tmp_path: Path) -> None:
    df, _ = parse(b"TS 1600000000.25\n" + JC.read_bytes())
    assert set(df["ts"]) == {datetime.fromtimestamp(1600000000.25, tz=UTC)}
    copy = tmp_path / "diskstats"
    copy.write_bytes(JC.read_bytes())
    os.utime(copy, ns=(1_600_000_000_123_456_000, 1_600_000_000_123_456_000))
    df, src = parse(copy.read_bytes(), str(copy))
    assert set(df["ts"]) == {datetime.fromtimestamp(1_600_000_000.123456, tz=UTC)}
    assert any("modification time" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------------
_SNAP = "   8       0 sda 1 0 8 1 1 0 8 1 0 2 2\n"


def test_bad_counter_names_line_and_collector_reason() -> None:
    data = ("TS 100\n" + _SNAP + "TS 101\n   8       0 sda 2 0 16 2 x 0 8 1 0 3 3\n"
            "TS 102\n   8       0 sda 3 0 24 3 2 0 16 2 0 4 4\n").encode()
    with pytest.raises(InputFormatError) as err:
        parse(data, path="c.txt")
    assert err.value.line_no == 4
    assert str(err.value).startswith("c.txt:4:")
    # lenient: the device keeps its state, the next line covers both intervals (2 s)
    df, src = parse(data, lenient=True)
    assert src.skipped == 1
    r = df.to_dicts()
    assert len(r) == 1 and r[0]["interval_s"] == 2.0 and r[0]["r_iops"] == 1.0
    assert not r[0]["reset"]


@pytest.mark.parametrize(("text", "line", "match"), [
    ("TS 100\n" + _SNAP + "TS 101\n   8 0 sda 1 2 3 4 5\n", 4, "5 counters"),
    ("TS 100\n" + _SNAP + "garbage here\nTS 101\n" + _SNAP, 3, "major/minor|field"),
    (_SNAP + _SNAP, 2, "listed twice"),
    ("TS 100\n" + _SNAP + "TS 100\n" + _SNAP, 3, "not after the previous"),
    ("TS 100\n" + _SNAP + "TS 101\n   8 0 sda 1 0 8 1 1 0 8 1 0 2 "
     "99999999999999999999999\n", 4, "out of range|exceeds"),
])
def test_refusals(text: str, line: int, match: str) -> None:
    with pytest.raises(InputFormatError, match=match) as err:
        parse(text.encode())
    assert err.value.line_no == line


def test_empty_input_is_refused() -> None:
    with pytest.raises(InputFormatError, match="empty"):
        parse(b"\n\n")


# ---------------------------------------------------------------------------------------------
# equality with the live collector fed the same counters
# ---------------------------------------------------------------------------------------------
def _sysfs(root: Path, disks: dict[str, list[str]]) -> Path:
    """A minimal /sys: block/<disk>/ and block/<disk>/<part>/partition."""
    sys_root = root / "sys"
    for disk, parts in disks.items():
        d = sys_root / "block" / disk
        d.mkdir(parents=True)
        for p in parts:
            (d / p).mkdir()
            (d / p / "partition").write_text("1\n")
    return sys_root


def _snapshots(text: str) -> list[tuple[int, str]]:
    """(ts_us, diskstats text) per TS-before snapshot."""
    out: list[tuple[int, str]] = []
    for block in text.split("TS ")[1:]:
        head, _, body = block.partition("\n")
        sec, _, frac = head.split()[0].partition(".")
        out.append((int(sec) * 1_000_000 + int((frac + "000000")[:6]), body))
    return out


def _collector_frame(snaps: list[tuple[int, str]], tmp: Path,
                     disks: dict[str, list[str]]) -> pl.DataFrame:
    proc = tmp / "proc"
    proc.mkdir()
    clock = {"mono": 0.0, "wall": 0.0}
    col = LinuxCollector(proc, _sysfs(tmp, disks), partitions=True, include_idle=True,
                         monotonic=lambda: clock["mono"], wall=lambda: clock["wall"])
    t0 = snaps[0][0]
    results = []
    for k, (ts_us, body) in enumerate(snaps):
        (proc / "diskstats").write_text(body)
        # A monotonic clock from 0 keeps float rounding of the differences below 1e-14 s.
        clock["mono"] = (ts_us - t0) / 1e6
        clock["wall"] = ts_us / 1e6
        if k == 0:
            col.prime()
        else:
            results.append(col.sample())
    return frame_from_results(results, host="h", source="diskstats").df


def _assert_same(imported: pl.DataFrame, live: pl.DataFrame) -> None:
    key = ["ts", "device"]
    a = imported.sort(key)
    b = live.sort(key)
    assert a["device"].to_list() == b["device"].to_list()
    assert a["ts"].to_list() == b["ts"].to_list()
    for name in ("device_kind", "parent", "reset", "since_boot"):
        assert a[name].to_list() == b[name].to_list(), name
    assert np.allclose(a["interval_s"].to_numpy(), b["interval_s"].to_numpy(), rtol=1e-9)
    for name in DERIVED_COLUMNS:
        x = a[name].to_numpy().astype(np.float64)
        y = b[name].to_numpy().astype(np.float64)
        assert np.array_equal(np.isnan(x), np.isnan(y)), name
        assert np.allclose(x, y, rtol=1e-9, equal_nan=True), name


def test_equals_live_collector_on_the_pt_capture(tmp_path: Path) -> None:
    text = PT.read_text()
    imported, _ = parse(text.encode(), host="h")
    live = _collector_frame(_snapshots(text), tmp_path,
                            {"sda": ["sda1"], "nvme0n1": ["nvme0n1p1"], "sdb": [],
                             "md0": [], "dm-1": [], "loop1": []})
    assert live.height == imported.height == 21
    _assert_same(imported, live)


_DEVICES = [("sda", 8, 0), ("sda1", 8, 1), ("nvme0n1", 259, 0), ("dm-0", 253, 0)]


@st.composite
def _capture(draw: st.DrawFn) -> list[tuple[int, str]]:
    """3-6 snapshots of up to 4 devices: random increments, in-flight gauges, 32-bit ms wraps,
    statistics resets, devices that go away and come back, 11/15/17-field layouts."""
    n_fields = draw(st.sampled_from([11, 15, 17]))
    n = draw(st.integers(min_value=3, max_value=6))
    ts = 1_700_000_000_000_000
    state = {name: [draw(st.integers(0, 1 << 20)) for _ in range(17)] for name, _a, _b in
             _DEVICES}
    for vals in state.values():
        for f in (3, 7, 9, 10, 14, 16):  # ms fields start near the 32-bit wrap sometimes
            if draw(st.booleans()):
                vals[f] = (1 << 32) - draw(st.integers(1, 5000))
    snaps = []
    for _k in range(n):
        ts += draw(st.integers(min_value=10_000, max_value=5_000_000))  # 10 ms .. 5 s
        lines = []
        for name, major, minor in _DEVICES:
            if name != "sda" and draw(st.integers(0, 9)) == 0:
                continue  # absent from this snapshot (sda stays, so none is empty)
            vals = state[name]
            if draw(st.integers(0, 14)) == 0:
                vals = [draw(st.integers(0, 50)) for _ in range(17)]  # statistics reset
            else:
                vals = [v + draw(st.integers(0, 3000)) for v in vals]
                vals = [v % (1 << 32) if f in (3, 7, 9, 10, 14, 16) else v
                        for f, v in enumerate(vals)]
                vals[8] = draw(st.integers(0, 64))  # in flight is a gauge
            state[name] = vals
            lines.append(f"{major:4d} {minor:7d} {name} "
                         + " ".join(str(v) for v in vals[:n_fields]))
        snaps.append((ts, "\n".join(lines) + "\n"))
    return snaps


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_capture())
def test_equals_live_collector_property(tmp_path_factory: pytest.TempPathFactory,
                                        snaps: list[tuple[int, str]]) -> None:
    text = "".join(f"TS {ts // 1_000_000}.{ts % 1_000_000:06d}\n{body}" for ts, body in snaps)
    imported, _ = parse(text.encode(), host="h")
    live = _collector_frame(snaps, tmp_path_factory.mktemp("cap"),
                            {"sda": ["sda1"], "nvme0n1": [], "dm-0": []})
    _assert_same(imported, live)


# ---- a piece at a time ----------------------------------------------------------------------


def test_a_line_cut_short_at_the_end_is_not_read() -> None:
    """'md0 2650 0 212000 0' cut from a 17-counter line reads as a 4-field (2.6 partition)
    line, and a counter cut to fewer digits as a counter gone backwards: a last line without
    its line break is left out, with a note."""
    data = PT.read_bytes()
    whole, _ = parse(data)
    last_ts = data.rindex(b"\nTS ")
    cut = data.index(b" md0 ", last_ts) + len(b" md0 2650 0 212000 0")
    df, src = parse(data[:cut])
    n_line = data[:cut].count(b"\n") + 1
    assert any(f"ends inside line {n_line}" in n for n in src.notes)
    assert df.filter(pl.col("device") == "md0")["device_kind"].unique().to_list() == ["md"]
    assert df.filter(pl.col("device") == "md0").height == \
        whole.filter(pl.col("device") == "md0").height - 1
    with pytest.raises(InputFormatError, match="only line is cut short"):
        parse(b"   8       0 sda 1000 100 8")


def test_a_long_capture_read_in_pieces_equals_one_read() -> None:
    """400 snapshots (the pt capture's 4, their times one second on each round) in pieces
    of 3 kB: one frame a piece, each device's line derived against the same line as in
    one read (across the cuts), the same notes."""
    text = PT.read_text()
    blocks = [b for b in text.split("TS ") if b.strip()]
    out = []
    for i in range(400):
        head, rest = blocks[i % len(blocks)].split("\n", 1)
        out.append(f"TS {1700000000 + i}.{head.split('.')[1]}\n{rest}")
    data = "".join(out).encode()
    src = Source(path="cap.txt")
    frames = list(ds.iter_parse(io.BytesIO(data), src, chunk_bytes=3000))
    whole, whole_src = parse(data)
    assert len(frames) > 50
    assert SampleFrame.concat(frames).df.equals(whole)
    assert src.notes == whole_src.notes
    assert whole.height > 2500


_VARIANTS = reading_variants(FIX, {})


@pytest.mark.parametrize(("name", "data", "kw"), _VARIANTS, ids=[v[0] for v in _VARIANTS])
def test_pieces_give_what_the_whole_file_gives(name: str, data: bytes,
                                                kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a line at a time) and 250 bytes, every snapshot is derived
    against each device's last line before it, wherever the pieces were cut: the same rows,
    notes and refused lines as one read of the whole file."""
    assert_pieces_agree(ds, data, (1, 250), {**kw, "start": datetime(2026, 1, 1)}, name)
