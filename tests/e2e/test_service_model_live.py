"""The service model decided from real samples, through the product: `iogauge record` while
fio sweeps the queue depth, then `iogauge analyze --db --json`, nothing about the device
told to iogauge.

* This machine's root disk (a file on it, queue depths 1 to 128): a virtio disk says
  queue/rotational = 1 over flash; the samples must say parallel, and the latency-knee
  maximum must be within +-25 % of fio's best IOPS. Skipped where the root disk is a real
  spindle (fio's queue-depth-1 random reads then stay under a spindle's ~200 IOPS).
* The lab's ``ssd`` model as a plain loop device: what the kernel sees of it (the
  emulator's limits make it one server on this machine), and never a spindle.
* The lab's ``raid`` model ([Oe]'s RAID-5 of six spindles) as a plain loop device: the
  decision follows what the samples show, checked against fio's own figures (IOPS that grow
  with the queue depth are parallel service; flat ones are one at a time).

Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.system import (
    iogauge_analyze_json,
    iogauge_record,
    require_lab_device,
    require_root,
    require_tools,
)

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators import resolve_device
from iogauge.lab import device as lab

pytestmark = [pytest.mark.slow, pytest.mark.root]

#: Queue depths of the sweep and seconds each. 128 beyond the issue's 1/4/16/64: at 64 this
#: VM's disk still gained (fio 124,501 IOPS in one CI-like run, where the latency curve's
#: asymptote said 156,258: +25.5 %); at 128 fio's best comes near the device's limit
#: (132,285 and 146,429 against estimates of 142,546 and 154,585 here).
DEPTHS = (1, 4, 16, 64, 128)
STEP_S = 8
#: The issue's tolerance on the latency-knee maximum against fio's best.
ROOT_MAX_REL = 0.25
#: fio's queue-depth-1 random 4 kB reads below this: the root disk is a real spindle.
SPINDLE_QD1_IOPS = 1000.0


def _fio_sweep(target: str, depths: tuple[int, ...], step_s: int, extra: list[str],
               bs: str = "4k") -> list[float]:
    """One fio run, a random read job per queue depth in turn; the IOPS of each."""
    args = ["fio", f"--filename={target}", "--rw=randread", f"--bs={bs}", "--ioengine=libaio",
            "--direct=1", "--time_based", f"--runtime={step_s}", "--norandommap",
            "--randrepeat=0", "--output-format=json", *extra]
    for d in depths:
        args += [f"--name=qd{d}", f"--iodepth={d}", "--stonewall"]
    res = subprocess.run(args, capture_output=True, text=True, check=False,
                         timeout=len(depths) * step_s + 120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    doc = json.loads(res.stdout[res.stdout.find("{"):])
    return [float(j["read"]["iops"]) for j in doc["jobs"]]


def _recorded_sweep(db: Path, device: str, target: str, depths: tuple[int, ...],
                    step_s: int, bs: str = "4k") -> list[float]:
    with iogauge_record(db, [device], 1.0):
        time.sleep(2.0)
        iops = _fio_sweep(target, depths, step_s, [], bs)
        time.sleep(2.0)
    print(f"  fio random {bs} reads on {device}, queue depths {list(depths)}: "
          f"{[round(x) for x in iops]} IOPS")
    return iops


def _show(report: dict[str, Any]) -> None:
    svc, cap = report["service_model"], report.get("capacity") or {}
    print(f"  verdict {report['verdict']}: {report['verdict_reason']}\n"
          f"  service model {svc['model']} by {svc['decided_by']}: {svc['summary']}\n"
          f"  capacity {cap.get('method')}: max {cap.get('max_iops')}, r2 {cap.get('r2')}")
    for s in svc["signals"]:
        print(f"    {s['signal']} -> {s['points_to']} ({s['strength']}): {s['text']}")


def _block_device_of(path: Path) -> str | None:
    """The whole disk under ``path``'s file system (the guarantee's own resolution:
    partition -> disk; a dm device over one disk -> that disk), or None (tmpfs, overlay,
    an array)."""
    st = path.stat()  # st_dev: the file system's device
    try:
        dev = resolve_device(f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
        if len(dev.info.slaves) > 1:
            return None
        if dev.info.slaves:
            dev = resolve_device(dev.info.slaves[0])
    except GuaranteeError:
        return None
    return dev.disk


@contextmanager
def _file_on_root(size_mb: int) -> Iterator[tuple[str, Path]]:
    """A file of ``size_mb`` written on the root file system's disk (written, so reads
    reach the device); removed on exit."""
    d = Path(tempfile.mkdtemp(prefix="iogauge-svc-", dir="/var/tmp"))
    try:
        disk = _block_device_of(d)
        if disk is None:
            pytest.skip("/var/tmp is not on a single block device here (tmpfs, overlay or "
                        "an array): no root disk to sweep")
        f = d / "sweep.dat"
        subprocess.run(["fio", f"--filename={f}", f"--size={size_mb}M", "--rw=write",
                        "--bs=1M", "--ioengine=libaio", "--direct=1", "--iodepth=8",
                        "--name=fill", "--output-format=terse"], check=True,
                       capture_output=True, timeout=300)
        yield disk, f
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_root_disk_queue_depth_sweep_is_parallel(tmp_path: Path) -> None:
    require_root()
    require_tools("fio")
    with _file_on_root(1024) as (disk, f):
        qd1 = _fio_sweep(str(f), (1,), 3, [])[0]
        if qd1 < SPINDLE_QD1_IOPS:
            pytest.skip(f"the root disk {disk} gave {qd1:.0f} random 4 kB reads/s at queue "
                        "depth 1: a real spindle, whose samples must not say parallel")
        db = tmp_path / "root.duckdb"
        iops = _recorded_sweep(db, disk, str(f), DEPTHS, STEP_S)
        report = iogauge_analyze_json(db, disk)
    print(f"\nroot disk {disk}:")
    _show(report)
    svc, cap = report["service_model"], report["capacity"]
    assert svc["model"] == "parallel" and svc["decided_by"] == "data", svc
    assert cap["method"] == "latency-knee", cap
    best = max(iops)
    assert cap["max_iops"] is not None, cap
    assert abs(cap["max_iops"] / best - 1.0) <= ROOT_MAX_REL, (cap["max_iops"], best)


def test_lab_ssd_decision_follows_the_samples(tmp_path: Path) -> None:
    """The lab's ``ssd`` model behind the emulator, 128 KiB random reads.

    The emulator cannot show this model's ten channels on a 2-vCPU machine: at 4 kB its
    FUSE round trip (~0.1-0.2 ms of Python a request) outweighs the model's service and its
    IOPS fall as the queue grows (11,626 / 7,131 / 6,210 at queue depths 1 / 4 / 16,
    measured here); at 128 KiB the model's 540 MB/s host link serialises the transfers
    (3,108 / 4,112 / 4,120 in one CI run, 2,765 / 4,110 / 4,118 in another). What the
    kernel sees is then one server, and the samples must say what fio saw (as for the
    raid model below); the simulator, which has neither limit, shows the same model
    parallel (tests/unit/analysis/test_service_model.py). Either way the spindle bound must
    fire: 500 MB/s is no spindle's."""
    require_root()
    require_lab_device()
    with lab.create_device("ssd", "1G", label_media=False) as loop:
        name = Path(loop).name
        iops = _recorded_sweep(tmp_path / "ssd.duckdb", name, loop, (1, 4, 16), STEP_S,
                               "128k")
        report = iogauge_analyze_json(tmp_path / "ssd.duckdb", name)
    print("\nlab ssd on a plain loop device:")
    _show(report)
    svc = report["service_model"]
    assert svc["decided_by"] == "data", svc
    assert any(s["signal"] == "physical" and s["points_to"] == "parallel"
               for s in svc["signals"]), svc
    gain = max(iops) / iops[0]
    if gain >= 2.5:
        assert svc["model"] == "parallel", (gain, svc)
    elif gain <= 1.2:
        # fio's gain over whole runs and the samples' I/O per busy second are measured
        # differently: near the 1.3 line (1.296 in one CI run) either decision is honest
        assert svc["model"] == "one-at-a-time", (gain, svc)
        cap = report["capacity"]
        assert cap["method"] == "util-linear" and cap["max_iops"] is not None, cap
        assert abs(cap["max_iops"] / max(iops) - 1.0) <= 0.15, (cap["max_iops"], iops)


def test_lab_raid_decision_follows_the_samples(tmp_path: Path) -> None:
    """What fio sees decides what the samples must say: IOPS growing 2.5x or more from
    queue depth 1 to 16 is parallel service; at most 1.5x (a spindle's command
    reordering) is one at a time; in between the test asks only for a data decision."""
    require_root()
    require_lab_device()
    with lab.create_device("raid", "8G", label_media=False) as loop:
        name = Path(loop).name
        iops = _recorded_sweep(tmp_path / "raid.duckdb", name, loop, (1, 4, 16), 10)
        report = iogauge_analyze_json(tmp_path / "raid.duckdb", name)
    print("\nlab raid (RAID-5 of six spindles) on a plain loop device:")
    _show(report)
    svc = report["service_model"]
    gain = iops[-1] / iops[0]
    assert svc["decided_by"] == "data", svc
    if gain >= 2.5:
        assert svc["model"] == "parallel", (gain, svc)
    elif gain <= 1.5:
        assert svc["model"] == "one-at-a-time", (gain, svc)
