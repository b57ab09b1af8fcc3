"""I/O stall shares (/proc/pressure/io) on this machine, through the product: fio keeps the
lab's emulated HDD busy, alone and then beside CPU-bound competitors, while `iogauge record`
samples; `iogauge analyze --db --json` judges each recording.

The competitors fill every CPU, so %iowait (which counts idle CPUs only) falls to almost
nothing although fio spends its whole time waiting for the disk; by %user and %iowait
that reads as [Insight-SSD9]'s "busy, not the bottleneck". The kernel's stall share still
sees the waiting task, and the verdict must follow it.

Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.system import (
    iogauge_analyze_doc,
    iogauge_record,
    require_lab_device,
    require_root,
)

from iogauge.lab import device as lab

pytestmark = [pytest.mark.slow, pytest.mark.root]

LOAD_S = 15


def _require_psi() -> None:
    if not Path("/proc/pressure/io").exists():
        pytest.skip("no /proc/pressure/io here (kernel < 4.20 or booted with psi=0)")


@contextmanager
def _cpu_burners() -> Iterator[None]:
    """One busy loop per CPU, killed on exit."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


def _load_and_judge(loop: str, db: Path) -> tuple[dict[str, Any], dict[str, float]]:
    """fio with synchronous reads (psync): a task blocked in the read is in I/O wait, as
    PSI and %iowait count it (libaio's io_getevents sleep is not)."""
    name = Path(loop).name
    with iogauge_record(db, [name], 1.0):
        time.sleep(2.0)
        subprocess.run(["fio", f"--filename={loop}", "--rw=randread", "--bs=4k",
                        "--ioengine=psync", "--direct=1", "--time_based",
                        f"--runtime={LOAD_S}", "--name=busy", "--output-format=terse"],
                       check=True, capture_output=True, timeout=LOAD_S + 60)
        time.sleep(1.0)
    doc = iogauge_analyze_doc(db, name, "--window", "5")
    report = next(d for d in doc["devices"] if d["device"] == name)
    ev: dict[str, float] = {}
    for f in doc["findings"]:
        if f["rule"] == "busy_not_bottleneck":
            for e in f["evidence"]:
                ev.setdefault(e["metric"], float(e["value"]))
    return report, ev

def test_stall_share_sees_a_disk_that_cpu_competitors_hide(tmp_path: Path) -> None:
    require_root()
    require_lab_device()
    _require_psi()
    with lab.create_device("hdd", "4G", label_media=False) as loop:
        alone, ev_alone = _load_and_judge(loop, tmp_path / "alone.duckdb")
        with _cpu_burners():
            crowded, ev_crowded = _load_and_judge(loop, tmp_path / "crowded.duckdb")
    for label, rep, ev in (("alone", alone, ev_alone), ("with CPU competitors", crowded,
                                                        ev_crowded)):
        print(f"\n{label}: verdict {rep['verdict']} ({rep['verdict_reason']}); "
              f"busy_not_bottleneck evidence {ev}")
    for rep, ev in ((alone, ev_alone), (crowded, ev_crowded)):
        assert rep["verdict"] != "busy, not the bottleneck", rep
        assert ev.get("psi_io_some_pct", 0.0) >= 20.0, ev
    # The competitors hid the wait from %iowait, not from the stall share.
    assert ev_crowded.get("cpu_iowait_pct", 100.0) < 10.0, ev_crowded
