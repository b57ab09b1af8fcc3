"""Capacity on a real device: the max-IOPS estimate against what fio achieves unthrottled.

Issue requirement: "on the lab's emulated HDD (or any single-spindle device), recording
while a fio load steps its rate, the max-IOPS estimate is within +-15 % of what fio
achieves unthrottled."

The emulated 7,200 rpm spindle (``iogauge.lab``: a FUSE file whose replies follow the
hdd-7200 model, behind a direct-I/O loop device) serves one request at a time, as seed 004's
method assumes. The test

1. measures the device's maximum: fio random 4 kB reads, direct, queue depth 1, unthrottled;
2. records with iogauge's own collector (1 s samples) while fio steps ``rate_iops`` through
   20, 40, 60 and 75 % of that maximum -- the load never reaches saturation, so the
   estimate has to come from seed 004's proportionality (util = busy_per_iops x IOPS,
   maximum = 100 % / busy_per_iops), not from an observed plateau;
3. measures the maximum again (the two runs bracket the recording in time) and compares
   ``capacity.estimate`` on the recording with their mean.

fio runs with the lowest real-time priority when ``chrt`` is there (as in
test_lab_device.py): on a shared 2-vCPU VM an ordinary fio is woken late after each
completion, which adds idle gaps at queue depth 1 and would lower the unthrottled IOPS
(the device's busy time, and so the estimate, would not see those gaps).

Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import contextlib
import json
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
    require_lab_device,
    require_root,
)

from iogauge.analysis import capacity
from iogauge.analysis.context import AnalysisContext
from iogauge.analysis.types import CapacityEstimate
from iogauge.collector.linux import IntervalResult, LinuxCollector, frame_from_results
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
#: Random 4 kB reads, one at a time, around the page cache (as seed 004's per-IOPS busy
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


def _record_steps(loop: str, rates: list[int]) -> tuple[LinuxCollector, list[IntervalResult]]:
    """Sample the device every SAMPLE_S while one fio process runs the rate steps in turn
    (``stonewall``: each job starts when the previous one ends)."""
    name = Path(loop).name
    args = [f"--filename={loop}", "--time_based", f"--runtime={STEP_S}", *RANDREAD_QD1]
    for i, rate in enumerate(rates):
        args += [f"--name=step{i}", f"--rate_iops={rate}", "--stonewall"]
    col = LinuxCollector(devices=[name])
    results: list[IntervalResult] = []
    with _fio(args) as (proc, out):
        col.prime()
        deadline = time.monotonic() + STEP_S * len(rates) + 60
        tick = time.monotonic()
        while proc.poll() is None:
            assert time.monotonic() < deadline, "fio did not finish its steps in time"
            tick += SAMPLE_S
            time.sleep(max(0.0, tick - time.monotonic()))
            results.append(col.sample())
        assert proc.returncode == 0, out.read_text(errors="replace")[-3000:]
        doc = _fio_json(out)
    got = [round(j["read"]["iops"], 1) for j in doc["jobs"]]
    print(f"  rate steps asked {rates} IOPS, fio achieved {got}")
    return col, results


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
    the estimate from the recording, and how contended the host's CPUs were meanwhile."""

    fio_before: float
    fio_after: float
    estimate: CapacityEstimate
    peak_util_pct: float
    cpu_pressure: float | None

    @property
    def fio_max(self) -> float:
        return (self.fio_before + self.fio_after) / 2

    @property
    def error(self) -> float:
        return (self.estimate.max_iops or 0.0) / self.fio_max - 1.0


def _attempt(loop: str) -> Attempt:
    psi0, t0 = _psi_cpu_us(), time.monotonic()
    before = _unthrottled_iops(loop)
    assert 40 <= before <= 300, f"{before:.1f} IOPS: not a plausible 7,200 rpm spindle"
    rates = [max(1, round(before * s)) for s in STEPS]
    col, results = _record_steps(loop, rates)
    # Measured again after the steps: the mean of the two follows slow drifts of the
    # host (other work on a shared VM) the same way the recording in between does.
    after = _unthrottled_iops(loop)
    psi1, t1 = _psi_cpu_us(), time.monotonic()
    pressure = None if psi0 is None or psi1 is None else (psi1 - psi0) / 1e6 / (t1 - t0)
    name = Path(loop).name
    frame = frame_from_results(results, host=col.host, validate=True)
    ctx = AnalysisContext.build(frame, infos=col.device_info())
    dev = ctx.devices[name]
    # The collector reports the emulated device as kind "loop", which util_is_capacity
    # treats as parallel (a loop device usually sits on a file system of a real disk).
    # This one is the emulated single spindle itself: the lab set its queue/rotational to
    # 1, and the FUSE server serves one request at a time. So judge it as the disk it
    # emulates: kind "disk" with its sysfs facts (rotational) -- %util is then capacity.
    assert dev.info is not None and dev.info.rotational is True, dev.info
    dev.kind = "disk"
    assert dev.util_is_capacity is True
    peak = float(frame.df["util_pct"].max() or 0.0)  # type: ignore[arg-type]
    return Attempt(before, after, capacity.estimate(dev), peak, pressure)


def test_max_iops_estimate_matches_unthrottled_fio() -> None:
    """One attempt; a second only if the first misses (as test_emulated_hdd_must_show
    does): on a VM shared with other work, a burst of CPU contention stretches the
    kernel's part of every request (the loop worker is an ordinary thread) in one phase
    and not the other. A bias fails both attempts; a skip is only taken when both ran on
    a host whose CPUs were saturated by others."""
    _require_lab()
    attempts: list[Attempt] = []
    t0 = time.monotonic()
    # create_device destroys the device (loop detached, server stopped, files removed) on
    # exit, also when an assertion fails inside.
    with lab.create_device("hdd") as loop:
        assert loop.startswith("/dev/loop")
        for n in (1, 2):
            a = _attempt(loop)
            attempts.append(a)
            est = a.estimate
            print(f"\nemulated hdd-7200, 4k random reads QD1, attempt {n}: fio unthrottled "
                  f"{a.fio_before:.1f} / {a.fio_after:.1f} IOPS (before / after the steps); "
                  f"iogauge estimate {est.max_iops or float('nan'):.1f} IOPS "
                  f"({a.error * 100:+.1f} %) by {est.method}, busy_per_iops "
                  f"{est.busy_per_iops or float('nan'):.4f} %/IOPS (svctm "
                  f"{10.0 * (est.busy_per_iops or float('nan')):.2f} ms), r2 "
                  f"{est.r2 or float('nan'):.4f}, confidence {est.confidence or float('nan'):.2f}"
                  f", {est.points} points, peak util {a.peak_util_pct:.1f} %, CPU pressure "
                  f"{(a.cpu_pressure or 0.0) * 100:.0f} %; {time.monotonic() - t0:.0f} s")
            for note in est.notes:
                print(f"  - {note}")
            assert est.method == "util-linear", est
            assert est.max_iops is not None
            assert est.headroom_iops is not None and est.headroom_iops >= 0
            # Never saturated: the maximum must come from the proportionality.
            assert a.peak_util_pct < SATURATED_UTIL_PCT
            if abs(a.error) <= MAX_IOPS_REL:
                return
    pressures = [a.cpu_pressure for a in attempts if a.cpu_pressure is not None]
    if len(pressures) == len(attempts) and min(pressures) > MAX_CPU_PRESSURE:
        pytest.skip(f"estimate off by {', '.join(f'{a.error * 100:+.1f} %' for a in attempts)}"
                    f" with CPU pressure {min(pressures) * 100:.0f} % (PSI some) or more: "
                    "other work starves the kernel's loop worker, so real-time accuracy "
                    "cannot be judged here; CI runs alone")
    best = min(attempts, key=lambda a: abs(a.error))
    assert abs(best.error) <= MAX_IOPS_REL, (
        f"estimate {best.estimate.max_iops:.1f} vs fio {best.fio_max:.1f} IOPS "
        f"({best.error * 100:+.1f} %)")
