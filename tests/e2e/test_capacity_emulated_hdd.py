"""Capacity on a real device: the max-IOPS estimate against what fio achieves unthrottled.

The lab's emulated HDD left as a plain loop device, recorded with `iogauge record` and
judged with `iogauge analyze --db --json` (nothing about the device told to it): the
service model must be decided from the samples, and the max-IOPS estimate must be within
+-15 % of what fio achieves unthrottled.

The emulated 7,200 rpm spindle (``iogauge.lab``: a FUSE file whose replies follow the
hdd-7200 model, behind a direct-I/O loop device) serves one request at a time, as [Oe]'s
method assumes. The test

1. measures the device's maximum: fio random 4 kB reads, direct, queue depth 1, unthrottled;
2. records with `iogauge record` (1 s samples) while fio steps ``rate_iops`` through
   20, 40, 60 and 75 % of that maximum -- the load never reaches saturation, so the
   estimate has to come from [Oe]'s proportionality (util = busy_per_iops x IOPS,
   maximum = 100 % / busy_per_iops), not from an observed plateau;
3. measures the maximum again (the two runs bracket the recording in time) and compares
   the estimate of `iogauge analyze` on the recording with their mean.

fio runs with the lowest real-time priority when ``chrt`` is there (as in
test_lab_device.py): on a shared 2-vCPU VM an ordinary fio is woken late after each
completion, which adds idle gaps at queue depth 1 and would lower the unthrottled IOPS
(the device's busy time, and so the estimate, would not see those gaps).

Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.system import (
    iogauge_analyze_json,
    iogauge_record,
    require_lab_device,
    require_root,
)

from iogauge.lab import device as lab

pytestmark = [pytest.mark.slow, pytest.mark.root]

#: The issue's tolerance on the max-IOPS estimate.
MAX_IOPS_REL = 0.15
#: No interval of the recording may reach this %util: the estimate must be extrapolated.
SATURATED_UTIL_PCT = 99.0
#: Above this CPU pressure (PSI "some") the host is too contended to judge real-time
#: accuracy (the threshold of test_lab_device.py).
MAX_CPU_PRESSURE = 0.25
#: Rate steps as shares of the unthrottled maximum.
STEPS = (0.2, 0.4, 0.6, 0.75)
#: Seconds per rate step and for each unthrottled run: ~9 samples a step; at ~75 IOPS a
#: 20 % step completes ~135 requests, enough that the random seek times average out.
STEP_S = 9
MAX_RUN_S = 6
SAMPLE_S = 1.0
#: Random 4 kB reads, one at a time, around the page cache (as [Oe]'s per-IOPS busy
#: rate assumes one request in service at a time).
RANDREAD_QD1 = ["--rw=randread", "--bs=4k", "--ioengine=libaio", "--direct=1", "--iodepth=1",
                "--norandommap", "--randrepeat=0"]


def _require_lab() -> None:
    require_root()
    require_lab_device()


@contextlib.contextmanager
def _fio(args: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """fio in its own session at real-time priority 1 when chrt exists; output to a file;
    its whole process group is killed on exit, whatever happened."""
    cmd = ["fio", *args, "--output-format=json"]
    if (chrt := shutil.which("chrt")) is not None:
        cmd = [chrt, "--rr", "1", *cmd]
    fd, name = tempfile.mkstemp(prefix="iogauge-capacity-fio-", suffix=".json")
    os.close(fd)
    out = Path(name)
    try:
        with out.open("wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield proc, out
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    finally:
        out.unlink(missing_ok=True)


def _fio_json(out: Path) -> dict[str, Any]:
    text = out.read_text(errors="replace")
    start = text.find("{")
    assert start >= 0, f"no JSON in fio output:\n{text[-2000:]}"
    doc = json.loads(text[start:])
    assert isinstance(doc, dict)
    return doc


def _unthrottled_iops(loop: str) -> float:
    with _fio([f"--filename={loop}", "--name=max", "--time_based",
               f"--runtime={MAX_RUN_S}", *RANDREAD_QD1]) as (proc, out):
        assert proc.wait(timeout=MAX_RUN_S + 60) == 0, out.read_text(errors="replace")[-3000:]
        doc = _fio_json(out)
    return float(sum(j["read"]["iops"] for j in doc["jobs"]))


def _record_steps(loop: str, rates: list[int], db: Path) -> None:
    """``iogauge record`` samples the device every SAMPLE_S while one fio process runs the
    rate steps in turn (``stonewall``: each job starts when the previous one ends)."""
    name = Path(loop).name
    args = [f"--filename={loop}", "--time_based", f"--runtime={STEP_S}", *RANDREAD_QD1]
    for i, rate in enumerate(rates):
        args += [f"--name=step{i}", f"--rate_iops={rate}", "--stonewall"]
    with iogauge_record(db, [name], SAMPLE_S):
        time.sleep(2 * SAMPLE_S)       # the recorder's first interval before the load
        with _fio(args) as (proc, out):
            assert proc.wait(timeout=STEP_S * len(rates) + 60) == 0, \
                out.read_text(errors="replace")[-3000:]
            doc = _fio_json(out)
        time.sleep(2 * SAMPLE_S)
    got = [round(j["read"]["iops"], 1) for j in doc["jobs"]]
    print(f"  rate steps asked {rates} IOPS, fio achieved {got}")


def _psi_cpu_us() -> int | None:
    """Total microseconds some task waited for a CPU (/proc/pressure/cpu), None if absent."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return int(first.rsplit("total=", 1)[1])


@dataclass
class Attempt:
    """One measurement: fio's unthrottled IOPS before and after the recorded rate steps,
    the device's report from `iogauge analyze --db --json`, and how contended the host's
    CPUs were meanwhile."""

    fio_before: float
    fio_after: float
    report: dict[str, Any]
    cpu_pressure: float | None

    @property
    def fio_max(self) -> float:
        return (self.fio_before + self.fio_after) / 2

    @property
    def capacity(self) -> dict[str, Any]:
        cap = self.report.get("capacity") or {}
        assert isinstance(cap, dict)
        return cap

    @property
    def error(self) -> float:
        return float(self.capacity.get("max_iops") or 0.0) / self.fio_max - 1.0

    def problems(self) -> list[str]:
        """What this attempt got wrong against the issue's requirements (empty: none)."""
        svc, est = self.report["service_model"], self.capacity
        out = []
        if svc["model"] != "one-at-a-time" or svc["decided_by"] != "data":
            out.append(f"service model {svc['model']} by {svc['decided_by']}: {svc['summary']}")
        if est.get("method") != "util-linear" or est.get("max_iops") is None:
            out.append(f"capacity {est.get('method')} gave no maximum: {est.get('notes')}")
        elif abs(self.error) > MAX_IOPS_REL:
            out.append(f"estimate {est['max_iops']:.1f} vs fio {self.fio_max:.1f} IOPS "
                       f"({self.error * 100:+.1f} %)")
        if (est.get("headroom_iops") or 0.0) < 0:
            out.append("negative headroom")
        # Never saturated: the maximum must come from the proportionality.
        peak = float(self.report["attributes"]["util_peak_pct"])
        if peak >= SATURATED_UTIL_PCT:
            out.append(f"the steps saturated the device ({peak:.1f} % busy)")
        return out


def _attempt(loop: str, db: Path) -> Attempt:
    psi0, t0 = _psi_cpu_us(), time.monotonic()
    before = _unthrottled_iops(loop)
    assert 40 <= before <= 300, f"{before:.1f} IOPS: not a plausible 7,200 rpm spindle"
    rates = [max(1, round(before * s)) for s in STEPS]
    _record_steps(loop, rates, db)
    # Measured again after the steps: the mean of the two follows slow drifts of the
    # host (other work on a shared VM) the same way the recording in between does.
    after = _unthrottled_iops(loop)
    psi1, t1 = _psi_cpu_us(), time.monotonic()
    pressure = None if psi0 is None or psi1 is None else (psi1 - psi0) / 1e6 / (t1 - t0)
    # The product, as a user runs it: nothing about the device is told to it. A plain loop
    # device (kind loop, its own queue/rotational) must be judged from its samples.
    report = iogauge_analyze_json(db, Path(loop).name)
    return Attempt(before, after, report, pressure)


def test_max_iops_estimate_matches_unthrottled_fio(tmp_path: Path) -> None:
    """One attempt; a second only if the first misses (as test_emulated_hdd_must_show
    does): on a VM shared with other work, a burst of CPU contention stretches the
    kernel's part of every request (the loop worker is an ordinary thread) in one phase
    and not the other. A bias fails both attempts; a skip is only taken when both ran on
    a host whose CPUs were saturated by others.

    The device is a plain loop device (``label_media=False``: its queue/rotational left as
    the loop driver sets it), recorded with `iogauge record` and judged by `iogauge analyze
    --db --json` with no option about it: the service model must come from its samples."""
    _require_lab()
    attempts: list[Attempt] = []
    t0 = time.monotonic()
    # create_device destroys the device (loop detached, server stopped, files removed) on
    # exit, also when an assertion fails inside.
    with lab.create_device("hdd", label_media=False) as loop:
        assert loop.startswith("/dev/loop")
        for n in (1, 2):
            a = _attempt(loop, tmp_path / f"attempt{n}.duckdb")
            attempts.append(a)
            est, svc = a.capacity, a.report["service_model"]
            peak = float(a.report["attributes"]["util_peak_pct"])
            print(f"\nemulated hdd-7200 on a plain loop device, 4k random reads QD1, attempt "
                  f"{n}: fio unthrottled {a.fio_before:.1f} / {a.fio_after:.1f} IOPS (before "
                  f"/ after the steps); iogauge estimate {est.get('max_iops') or math.nan:.1f}"
                  f" IOPS ({a.error * 100:+.1f} %) by {est.get('method')}, busy_per_iops "
                  f"{est.get('busy_per_iops') or math.nan:.4f} %/IOPS, r2 "
                  f"{est.get('r2') or math.nan:.4f}, confidence "
                  f"{est.get('confidence') or math.nan:.2f}, peak util {peak:.1f} %, CPU "
                  f"pressure {(a.cpu_pressure or 0.0) * 100:.0f} %; "
                  f"{time.monotonic() - t0:.0f} s\n  service model: {svc['summary']}")
            for note in est.get("notes", []):
                print(f"  - {note}")
            if not a.problems():
                return
            print(f"  attempt {n} missed: {'; '.join(a.problems())}")
    pressures = [a.cpu_pressure for a in attempts if a.cpu_pressure is not None]
    if len(pressures) == len(attempts) and min(pressures) > MAX_CPU_PRESSURE:
        pytest.skip(f"estimate off by {', '.join(f'{a.error * 100:+.1f} %' for a in attempts)}"
                    f" with CPU pressure {min(pressures) * 100:.0f} % (PSI some) or more: "
                    "other work starves the kernel's loop worker, so real-time accuracy "
                    "cannot be judged here; CI runs alone")
    best = min(attempts, key=lambda a: (len(a.problems()), abs(a.error)))
    assert not best.problems(), "; ".join(best.problems())
