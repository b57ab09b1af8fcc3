"""Importers against live captures on this machine: fio's own JSON, and /proc/diskstats
snapshots taken while fio runs, checked against fio and against `iogauge iostat --json`.

* fio: a two-job run (random 4 KiB reads, random 64 KiB writes; then a trim-free second
  group) on a direct-I/O loop device, ``--output-format=json``; every imported value must
  equal the JSON's own fields converted as documented.
* diskstats: ``TS <epoch>`` + ``cat /proc/diskstats`` every 0.5 s (pt-stalk's format) while
  fio does a fixed number of I/Os on the loop device, with `iogauge iostat --json` running
  over the same window. The I/O happens strictly inside both windows, so counts are
  conserved: sum(r/s x interval) of the import = the counters' difference = fio's count =
  the same sum over iostat's reports.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.helpers.system import LoopDevice

from iogauge.importers.registry import import_file

pytestmark = [pytest.mark.slow, pytest.mark.root]

READS, WRITES = 1500, 400


def _fio(args: list[str], out: Path, timeout_s: float = 120) -> dict[str, Any]:
    res = subprocess.run(["fio", "--output-format=json", f"--output={out}", *args],
                         capture_output=True, text=True, timeout=timeout_s, check=False)
    assert res.returncode == 0, f"fio failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    doc: dict[str, Any] = json.loads(out.read_text()[out.read_text().index("{"):])
    return doc


def test_fio_json_import_equals_fio(loop_dev: LoopDevice, tmp_path: Path) -> None:
    out = tmp_path / "fio.json"
    doc = _fio([f"--filename={loop_dev.path}", "--direct=1", "--ioengine=libaio",
                "--time_based", "--runtime=2", "--norandommap", "--randrepeat=0",
                "--name=reads", "--rw=randread", "--bs=4k", "--iodepth=4",
                "--name=writes", "--rw=randwrite", "--bs=64k", "--iodepth=2",
                "--name=later", "--stonewall", "--rw=read", "--bs=128k", "--iodepth=1"], out)
    res = import_file(out)
    assert res.format == "fio"
    df = res.frame.df
    res.frame.validate()
    end_ms = doc["timestamp_ms"]
    for job in doc["jobs"]:
        row = df.filter(pl.col("device") == f"fio:{job['jobname']}").to_dicts()
        assert len(row) == 1, job["jobname"]
        r = row[0]
        assert r["ts"].timestamp() == pytest.approx(end_ms / 1000, abs=1e-6)
        assert r["parent"] == loop_dev.name  # /dev/loopN, measured in disk_util
        runtime = max(job[d]["runtime"] for d in ("read", "write", "trim"))
        assert r["interval_s"] == runtime / 1000
        for d, p in (("read", "r"), ("write", "w"), ("trim", "d")):
            sec = job[d]
            assert r[f"{p}_iops"] == sec["iops"]
            assert r[f"{p}_kBps"] == sec["bw_bytes"] / 1024
            assert r[f"{p}_await_ms"] == sec["lat_ns"]["mean"] / 1e6
            n = sec["total_ios"]
            assert r[f"{p}_areq_kB"] == (sec["io_bytes"] / 1024 / n if n else 0.0)
            if p != "d":
                pct = sec["clat_ns"].get("percentile", {})
                for col, key in (("p50", "50.000000"), ("p99", "99.000000"),
                                 ("p999", "99.900000")):
                    want = pct[key] / 1e6 if n else None
                    assert r[f"{p}_lat_{col}_ms"] == want, (job["jobname"], d, col)
        ios = [job[d]["total_ios"] for d in ("read", "write", "trim")]
        lats = [job[d]["lat_ns"]["mean"] / 1e6 for d in ("read", "write", "trim")]
        assert r["await_ms"] == pytest.approx(
            sum(n * lat for n, lat in zip(ios, lats, strict=True)) / sum(ios), rel=1e-12)
    disk = next(d for d in doc["disk_util"] if d["name"] == loop_dev.name)
    row = df.filter(pl.col("device") == loop_dev.name).to_dicts()[0]
    groups: dict[int, float] = {}
    for job in doc["jobs"]:
        rt = max(job[d]["runtime"] for d in ("read", "write", "trim"))
        groups[job["groupid"]] = max(groups.get(job["groupid"], 0), rt)
    run_s = sum(groups.values()) / 1000
    assert row["device_kind"] == "loop" and row["interval_s"] == pytest.approx(run_s)
    assert row["r_iops"] == pytest.approx(disk["read_ios"] / run_s, rel=1e-12)
    assert row["w_iops"] == pytest.approx(disk["write_ios"] / run_s, rel=1e-12)
    assert row["r_await_ms"] == pytest.approx(
        disk["read_ticks"] / disk["read_ios"] if disk["read_ios"] else 0.0, rel=1e-12)
    assert row["util_pct"] == disk["util"]


class _Capture(threading.Thread):
    """pt-stalk's diskstats capture: ``TS <epoch.us> <date>`` + /proc/diskstats, every 0.5 s,
    one last snapshot after stop()."""

    def __init__(self, path: Path, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.interval_s = interval_s
        self._done = threading.Event()

    def run(self) -> None:
        with self.path.open("w") as fh:
            while True:
                now = time.time()
                text = Path("/proc/diskstats").read_text()
                fh.write(f"TS {now:.6f} {time.strftime('%Y-%m-%d %H:%M:%S')}\n{text}")
                fh.flush()
                if self._done.wait(self.interval_s):
                    break
            now = time.time()
            fh.write(f"TS {now:.6f}\n{Path('/proc/diskstats').read_text()}")

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)


def test_live_diskstats_capture_conserves_counts(loop_dev: LoopDevice, tmp_path: Path,
                                                 iogauge_bin: Path) -> None:
    cap_path = tmp_path / "diskstats-capture.txt"
    cap = _Capture(cap_path)
    iostat = subprocess.Popen([str(iogauge_bin), "iostat", "--json", "--interval", "0.5",
                               "--count", "1000", loop_dev.name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reporting = threading.Event()

    def read_stdout() -> None:
        assert iostat.stdout is not None
        for line in iostat.stdout:
            lines.append(line)
            reporting.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    cap.start()
    try:
        # both windows open before the first I/O: iostat has printed a report (it is
        # primed), the capture has taken snapshots
        assert reporting.wait(60), "iogauge iostat printed nothing within 60 s"
        time.sleep(0.6)
        doc = _fio([f"--filename={loop_dev.path}", "--direct=1", "--ioengine=libaio",
                    "--norandommap", "--randrepeat=0", "--iodepth=2",
                    "--name=r", "--rw=randread", "--bs=4k", f"--number_ios={READS}",
                    "--name=w", "--rw=randwrite", "--bs=64k", f"--number_ios={WRITES}"],
                   tmp_path / "fio.json")
        # and still open after the last: two more reports from each
        seen = len(lines)
        deadline = time.monotonic() + 30
        while len(lines) < seen + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.6)
    finally:
        try:
            cap.stop()
        finally:
            # the window is over: stop iostat as a user would (it prints what it has)
            iostat.send_signal(signal.SIGINT)
            try:
                iostat.wait(timeout=30)
            except subprocess.TimeoutExpired:
                iostat.kill()
                iostat.wait()
            reader.join(timeout=10)
    err = iostat.stderr.read() if iostat.stderr else ""
    out = "".join(lines)
    fio_reads = sum(j["read"]["total_ios"] for j in doc["jobs"])
    fio_writes = sum(j["write"]["total_ios"] for j in doc["jobs"])
    assert (fio_reads, fio_writes) == (READS, WRITES)

    res = import_file(cap_path)
    assert res.format == "diskstats"
    df = res.frame.df.filter(pl.col("device") == loop_dev.name).sort("ts")
    assert df.height >= 6 and not df["reset"].any()
    # 0.5 s apart (give or take scheduling), the last one cut short by stop()
    assert (df["interval_s"] > 0).all() and (df["interval_s"] < 2.0).all()
    assert (df["interval_s"][:-1] > 0.3).all()
    reads = float((df["r_iops"] * df["interval_s"]).sum())
    writes = float((df["w_iops"] * df["interval_s"]).sum())
    kb_written = float((df["w_kBps"] * df["interval_s"]).sum())
    # conservation against the raw counters of the first and last snapshot
    blocks = cap_path.read_text().split("TS ")[1:]
    first, last = (next(ln.split() for ln in b.splitlines()
                        if len(ln.split()) > 3 and ln.split()[2] == loop_dev.name)
                   for b in (blocks[0], blocks[-1]))
    assert reads == pytest.approx(int(last[3]) - int(first[3]), abs=1e-6)
    assert writes == pytest.approx(int(last[7]) - int(first[7]), abs=1e-6)
    # ... and against fio, which did all the device's I/O in the window
    assert reads == pytest.approx(READS, abs=1e-6)
    assert writes == pytest.approx(WRITES, abs=1e-6)
    assert kb_written == pytest.approx(WRITES * 64, abs=1e-6)

    # `iogauge iostat --json` over the same window: the same totals
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rows = [r for r in rows if r.get("device") == loop_dev.name and not r.get("reset")]
    assert rows, f"no iostat --json rows for {loop_dev.name}: {err}"
    live_reads = sum(r.get("r_iops", 0.0) * r["interval_s"] for r in rows)
    live_writes = sum(r.get("w_iops", 0.0) * r["interval_s"] for r in rows)
    assert live_reads == pytest.approx(READS, abs=1e-6)
    assert live_writes == pytest.approx(WRITES, abs=1e-6)
