"""`iogauge guarantee` on the real kernel with cgroup v1 blkio: fio in real cgroups on a loop
device, limits appearing in ``blkio.throttle.read_iops_device``, SIGTERM restoring the previous
values, ``kill -9`` then restart restoring the stale limit before anything else, and
``iogauge guarantee release`` restoring by hand. cgroup v2 is exercised when its io controller
is available (not on machines where blkio is bound to v1, like CI).

The disk is the lab's emulated device with a constant service time (a real loop block device
over a FUSE file, :func:`iogauge.lab.device.create_device`), not a loop device over a file on
the host's disk: the controller's limit is B's share of the device's capacity, and a plain loop
device's capacity is whatever the host gives that second. Measured on the dev VM (4k random
reads, iodepth 8, 0.5 s intervals): 45,000-86,000 IOPS at a %util of 42-99 % (the kernel's
jiffy-granular io_ticks undercount a device that fast), so the first limit written, 0.9 x 0.9 x
IOPS / %util, fell anywhere between ~40,000 and ~120,000 -- above the administrator's 100,000
whenever the host was quick, which is what made the SIGTERM test fail after other tests. With
``constant:2ms`` the capacity is exactly 500 IOPS at 100 % busy, wherever the tests run.

Every cgroup created here is ``/sys/fs/cgroup/blkio/iogauge-test-<pid>-{a,b}`` and is removed
after the test, on failure too (processes are moved out first); every controller started is
stopped and its limits released.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.helpers.system import (
    FioLoad,
    require_lab_device,
    require_root,
    run_fio,
)

pytestmark = [pytest.mark.slow, pytest.mark.root]

BLKIO = Path("/sys/fs/cgroup/blkio")
READ_IOPS = "blkio.throttle.read_iops_device"
WRITE_IOPS = "blkio.throttle.write_iops_device"
#: An administrator's own limit on B before the controller starts: restored exactly.
ADMIN_LIMIT = 100000
#: The disk: one request at a time, each served in exactly 2 ms (iogauge.lab.emulated's
#: constant model), so its capacity is 1 / 2 ms = 500 IOPS whatever the host's disk does.
DISK_MODEL = "constant:2ms"
DISK_CAPACITY_IOPS = 500

#: B: a closed-loop random reader that takes all the loop device gives.
B_LOAD = FioLoad("b-flood", ("--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                             "--iodepth=8", "--thread", "--norandommap", "--randrepeat=0"))
#: A: a steady 60 reads/s (above its floor of 40 when served).
A_LOAD = FioLoad("a-steady", ("--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
                              "--iodepth=1", "--rate_iops=60", "--thread", "--norandommap",
                              "--randrepeat=0"))

#: Runs the CLI with the guarantee sub-app registered (main.py may not have it yet).
LAUNCH = (
    "from iogauge.cli import main as m\n"
    "from iogauge.cli.guarantee_cmd import guarantee_app\n"
    "if not any(g.name == 'guarantee' or getattr(g.typer_instance.info, 'name', None) == "
    "'guarantee' for g in m.app.registered_groups):\n"
    "    m.app.add_typer(guarantee_app, name='guarantee')\n"
    "m.main()\n")


def _iogauge(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


def _require_blkio_throttle() -> None:
    require_root()
    if not (BLKIO / READ_IOPS).exists():
        pytest.skip(f"needs the cgroup v1 blkio hierarchy with throttling at {BLKIO} "
                    f"({BLKIO / READ_IOPS} is missing)")


def _write(path: Path, text: str) -> None:
    with path.open("w") as f:
        f.write(text)


def _remove_cgroup(cg: Path) -> None:
    if not cg.exists():
        return
    for _ in range(50):
        with contextlib.suppress(OSError):
            for pid in (cg / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    _write(BLKIO / "cgroup.procs", pid + "\n")
        with contextlib.suppress(OSError):
            cg.rmdir()
        if not cg.exists():
            return
        time.sleep(0.1)
    print(f"warning: could not remove {cg}", file=sys.stderr)


@dataclass
class Rig:
    dev: str  # /dev/loopN of the emulated disk
    majmin: str
    a: Path
    b: Path
    state: Path
    db: Path

    def args(self, *extra: str) -> list[str]:
        return _iogauge("guarantee", "--device", self.dev, "--protect", f"{self.a}:40",
                        "--throttle", str(self.b), "--state", str(self.state),
                        "--db", str(self.db), *extra)

    def read_rule(self, group: Path, name: str = READ_IOPS) -> int | None:
        for line in (group / name).read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == self.majmin:
                return int(v)
        return None


@pytest.fixture
def rig(tmp_path: Path, backing_dir: Path) -> Iterator[Rig]:
    _require_blkio_throttle()
    require_lab_device()
    from iogauge.lab.device import create_device
    a = BLKIO / f"iogauge-test-{os.getpid()}-a"
    b = BLKIO / f"iogauge-test-{os.getpid()}-b"
    try:
        a.mkdir()
        b.mkdir()
        with create_device(DISK_MODEL, "64M", backing_dir=backing_dir) as dev:
            majmin = (Path("/sys/block") / Path(dev).name / "dev").read_text().strip()
            _write(b / READ_IOPS, f"{majmin} {ADMIN_LIMIT}\n")
            r = Rig(dev, majmin, a, b, tmp_path / "run" / "g.state.json", tmp_path / "g.duckdb")
            try:
                yield r
            finally:
                # Whatever happened: no limit of ours may outlive the test.
                subprocess.run(_iogauge("guarantee", "release", "--state", str(r.state)),
                               capture_output=True, check=False, timeout=60)
    finally:
        _remove_cgroup(a)
        _remove_cgroup(b)


class Controller:
    """A running `iogauge guarantee`, its stdout and stderr collected line by line."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, "COLUMNS": "300"})
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read, args=(s,), daemon=True)
                         for s in (self.proc.stdout, self.proc.stderr)]
        for t in self._threads:
            t.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, pred: object, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():  # type: ignore[operator]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"condition not met (controller exit {self.proc.poll()}):\n"
                             + self.text())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return rc

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _limited(rig: Rig) -> bool:
    v = rig.read_rule(rig.b)
    return v is not None and v != ADMIN_LIMIT


def test_dry_run_prints_and_writes_nothing(rig: Rig) -> None:
    with run_fio(rig.dev, B_LOAD, cgroup=rig.b, settle_s=0.5), \
            run_fio(rig.dev, A_LOAD, cgroup=rig.a, settle_s=0.5):
        res = subprocess.run(rig.args("--dry-run", "--interval", "0.5", "--duration", "3"),
                             capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert f"dry run: would write '{rig.majmin} " in res.stderr
    assert str(rig.b / READ_IOPS) in res.stderr
    assert rig.read_rule(rig.b) == ADMIN_LIMIT
    assert rig.read_rule(rig.b, WRITE_IOPS) is None
    assert not rig.state.exists()


def test_limits_appear_and_sigterm_restores_them(rig: Rig) -> None:
    with run_fio(rig.dev, B_LOAD, cgroup=rig.b, settle_s=0.5), \
            run_fio(rig.dev, A_LOAD, cgroup=rig.a, settle_s=0.5), \
            Controller(rig.args("--interval", "0.5")) as ctl:
        # (both rules: the actuator writes B's read limit, then its write limit - two files
        # - and a look between the two writes saw the first only, in a CI run)
        ctl.wait_for(lambda: _limited(rig) and rig.read_rule(rig.b, WRITE_IOPS) is not None)
        limit = rig.read_rule(rig.b)
        # B's reads get its share of a 500 IOPS disk: (X 0.9 - A's 40 x 2 ms) / 2 ms x B's
        # read share 0.9 (min_share keeps 0.1 for writes) = 369 at the first engagement, less
        # as X comes down at the knee. Never more than the disk's capacity.
        assert limit is not None and 1 <= limit < DISK_CAPACITY_IOPS
        assert rig.read_rule(rig.b, WRITE_IOPS) is not None
        assert rig.read_rule(rig.a) is None and rig.read_rule(rig.a, WRITE_IOPS) is None
        assert rig.state.exists() and f'"original": {ADMIN_LIMIT}' in rig.state.read_text()
        rc = ctl.stop(signal.SIGTERM)
    assert rc == 0, ctl.text()
    assert rig.read_rule(rig.b) == ADMIN_LIMIT
    assert rig.read_rule(rig.b, WRITE_IOPS) is None
    assert not rig.state.exists()
    assert "every limit restored" in ctl.text()
    # The decisions were recorded.
    from iogauge.store import Store
    with Store.open(rig.db, read_only=True) as store:
        df = store.read_guarantee().df
    assert df.height >= 2 and set(df["actuator"]) == {"cgroup-v1"}
    b_max = df["b_iops"].max()
    assert df["a_floor_iops"][0] == 40.0 and isinstance(b_max, float) and b_max > 0


def test_kill_9_then_restart_restores_the_stale_limit_first(rig: Rig) -> None:
    with run_fio(rig.dev, B_LOAD, cgroup=rig.b, settle_s=0.5):
        with Controller(rig.args("--interval", "0.5")) as ctl:
            ctl.wait_for(lambda: _limited(rig))
            ctl.stop(signal.SIGKILL)
        stale = rig.read_rule(rig.b)
        assert stale is not None and stale != ADMIN_LIMIT, "kill -9 restored? impossible"
        assert rig.state.exists()
        # Restart with a long interval: the restore must be visible before any decision.
        with Controller(rig.args("--interval", "3")) as again:
            again.wait_for(lambda: "stale state: restored" in again.text())
            assert rig.read_rule(rig.b) == ADMIN_LIMIT
            assert rig.read_rule(rig.b, WRITE_IOPS) is None
            again.wait_for(lambda: "guaranteeing" in again.text())
            out = again.text()
            assert out.index("stale state: restored") < out.index("guaranteeing")
            assert again.stop(signal.SIGTERM) == 0
    assert rig.read_rule(rig.b) == ADMIN_LIMIT and not rig.state.exists()


def test_kill_9_then_release_restores_by_hand(rig: Rig) -> None:
    with run_fio(rig.dev, B_LOAD, cgroup=rig.b, settle_s=0.5):
        with Controller(rig.args("--interval", "0.5", "--policy", "paper")) as ctl:
            ctl.wait_for(lambda: _limited(rig))
            ctl.stop(signal.SIGKILL)
        assert _limited(rig)
        res = subprocess.run(_iogauge("guarantee", "release", "--state", str(rig.state)),
                             capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert f"restored {rig.b} {rig.majmin} riops" in res.stderr
    assert rig.read_rule(rig.b) == ADMIN_LIMIT
    assert rig.read_rule(rig.b, WRITE_IOPS) is None
    assert not rig.state.exists()


def test_cgroup_v2_live_when_available() -> None:
    require_root()
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    roots = [Path(p.split()[1]) for p in mounts if p.split()[2:3] == ["cgroup2"]]
    if not roots:
        pytest.skip("no cgroup2 mount on this machine")
    controllers = (roots[0] / "cgroup.controllers").read_text().split()
    if "io" not in controllers:
        pytest.skip(f"the cgroup v2 io controller is not available at {roots[0]} (it is bound "
                    "to the v1 blkio hierarchy here); v2 is covered by the fixture-tree unit "
                    "tests")
    # Where io is available, the same controller runs against io.max: check the detection
    # and the group checks end to end on a real child cgroup.
    from iogauge.guarantee.actuators import detect, read_mounts
    cg = roots[0] / f"iogauge-test-{os.getpid()}-v2"
    cg.mkdir()
    try:
        h = detect(cg, read_mounts())
        assert h.kind == "cgroup-v2"
        if "io" in (roots[0] / "cgroup.subtree_control").read_text().split():
            h.check_group(cg)
            assert (cg / "io.max").exists()
    finally:
        _remove_cgroup_v2(cg)


def _remove_cgroup_v2(cg: Path) -> None:
    for _ in range(50):
        with contextlib.suppress(OSError):
            cg.rmdir()
        if not cg.exists():
            return
        time.sleep(0.1)


def test_oe_evaluation_3_quick_with_the_adaptive_policy() -> None:
    """benchmarks/guarantee_eval.py --quick --evals 3 --controllers adaptive, in-process: the
    controller keeps A at its floor on the emulated HDD once converged, and nothing it
    created (cgroups, limits, the device) outlives the run."""
    _require_blkio_throttle()
    require_lab_device()
    from dataclasses import replace

    from iogauge.lab import guarantee_eval as ge
    from iogauge.lab.device import STATE_ROOT

    cfg = replace(ge.QUICK, evaluations=(3,), controllers=("adaptive",))
    res = ge.run_evaluations(cfg)
    run = res.run(3, "adaptive")
    assert run is not None and run.metrics is not None
    m = run.metrics
    cal = res.calibrations[3]
    # Every limit was restored and every cgroup removed; the device is gone.
    assert any("restored" in line for line in run.controller_lines)
    assert ge.leftover_cgroups(pid=os.getpid()) == []
    # (Only this run's device: other users of the machine may create their own meanwhile.)
    assert not (STATE_ROOT / res.device["lab_id"]).exists()
    assert res.device["lab_id"] not in Path("/proc/self/mountinfo").read_text()
    # Evaluation 3 raises A's floor in phase 2 to ~2/3 of the device, where unthrottled A
    # falls short (the calibration's phase 2); the controller must throttle B to make room.
    # The emulated HDD runs in real time: when this run's calibration found A at its floor
    # unthrottled (the device served A and B's whole demand), there was nothing to judge
    # (CI on 2026-11-23: A 44.0 IOPS against a floor of 44, device 88.6 IOPS at 99.5 %).
    if cal[1].a_iops >= 0.95 * cal[1].a_floor_iops:
        pytest.skip(f"phase 2 was not contended in this run: unthrottled A got "
                    f"{cal[1].a_iops:.1f} IOPS against its floor of {cal[1].a_floor_iops} "
                    f"(device {cal[1].iops:.1f} IOPS at {cal[1].util_pct:.1f} % util), so "
                    "the controller had nothing to correct")
    assert m.phases[1].b_iops < cal[1].b_iops
    assert m.limit_changes_per_min > 0
    # A converges after the step up and then stays at its floor in most intervals.
    x = run.samples.arrays()
    phase2 = ge.phase_of(x["t_end_s"], x["dt_s"], run.phases) == 1
    a_ios_phase2 = x["a_ios"][phase2].astype(int).tolist()
    assert m.settle_s[1] is not None and m.settle_s[1] <= ge.CONVERGENCE_GOAL_S, (
        f"A did not settle at its floor of {run.phases[1].a_floor_iops} IOPS in phase 2: "
        f"A's I/Os per interval {a_ios_phase2}")
    assert m.a_met_after_share >= 0.8, m
