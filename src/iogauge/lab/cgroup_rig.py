"""The lab's cgroup rig: blkio groups, fio in them, and the guarantee controller in-process.

Shared by the guarantee evaluations (:mod:`iogauge.lab.guarantee_eval`, [Oe] §5's three
evaluations; :mod:`iogauge.lab.idle_eval`, A idle and waking). Everything made here is
removed on every exit path: fio's process groups are killed, the cgroups
(``/sys/fs/cgroup/blkio/iogauge-eval-<pid>-<tag>-{a,b}``) are emptied and removed, and the
controller restores every limit it wrote.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iogauge.errors import IogaugeError
from iogauge.guarantee.actuators import DevNum
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.lab.workloads import IoSize, Workload, fio_job

if TYPE_CHECKING:
    from iogauge.guarantee.config import CapacityModel

#: The cgroup v1 blkio hierarchy the groups are created in.
BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
#: Prefix of every cgroup this module creates (what a leftover check looks for).
CGROUP_PREFIX = "iogauge-eval-"


class EvalError(IogaugeError):
    """The evaluation cannot run (no root, no blkio throttling, fio missing, fio failed)."""



def _write(path: Path, text: str) -> None:
    with path.open("w") as f:  # one write(2): cgroup files reject partial writes
        f.write(text)


def preflight() -> None:
    """Refuse clearly unless root, blkio throttling and fio are there."""
    if os.geteuid() != 0:
        raise EvalError(f"needs root (running as uid {os.geteuid()}): it creates an emulated "
                        "block device and cgroups")
    if not (BLKIO_ROOT / "blkio.throttle.read_iops_device").exists():
        raise EvalError(f"needs the cgroup v1 blkio hierarchy with throttling at {BLKIO_ROOT} "
                        "(blkio.throttle.read_iops_device is missing)")
    import shutil  # noqa: PLC0415 - only here

    if shutil.which("fio") is None:
        raise EvalError("needs fio on PATH (apt-get install fio)")


def remove_cgroup(cg: Path, root: Path = BLKIO_ROOT, wait_s: float = 10.0) -> bool:
    """Move ``cg``'s processes to ``root`` and remove it; False if it is still there."""
    deadline = time.monotonic() + wait_s
    while cg.exists():
        with contextlib.suppress(OSError):
            for pid in (cg / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    _write(root / "cgroup.procs", pid + "\n")
        with contextlib.suppress(OSError):
            cg.rmdir()
        if not cg.exists():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def leftover_cgroups(root: Path = BLKIO_ROOT, pid: int | None = None) -> list[Path]:
    """cgroups of this module still under ``root`` (of process ``pid``, or of anyone)."""
    prefix = CGROUP_PREFIX + (f"{pid}-" if pid is not None else "")
    return sorted(p for p in root.glob(prefix + "*") if p.is_dir())


@contextlib.contextmanager
def cgroup_pair(tag: str, root: Path = BLKIO_ROOT) -> Iterator[tuple[Path, Path]]:
    """``(A, B)`` fresh blkio cgroups, emptied and removed on exit whatever happens."""
    made: list[Path] = []
    try:
        for side in ("a", "b"):
            cg = root / f"{CGROUP_PREFIX}{os.getpid()}-{tag}-{side}"
            cg.mkdir()
            made.append(cg)
        yield made[0], made[1]
    finally:
        left = [cg for cg in reversed(made) if not remove_cgroup(cg, root)]
        if left:
            raise EvalError(f"could not remove {', '.join(map(str, left))} (processes still "
                            "in it?)")


@dataclass
class FioProc:
    """A fio process in its own session, output in a temporary file."""

    proc: subprocess.Popen[bytes]
    job: Path
    output: Path

    def output_text(self) -> str:
        try:
            return self.output.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def check(self) -> None:
        if self.proc.poll() is not None and self.proc.returncode != 0:
            raise EvalError(f"fio exited with status {self.proc.returncode}:\n"
                            f"{self.output_text()}")

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=grace_s)


@contextlib.contextmanager
def start_fio(job_text: str, workdir: Path, name: str,
              cgroup: Path | None = None) -> Iterator[FioProc]:
    """Run fio on ``job_text`` (in ``cgroup`` from its first I/O); always killed on exit."""
    job = workdir / f"{name}.fio"
    job.write_text(job_text)
    output = workdir / f"{name}.out"
    cmd = ["fio", "--output-format=terse", str(job)]
    if cgroup is not None:
        # Join the cgroup before exec, so every fio thread is in it from its first I/O.
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *cmd]
    with output.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    fp = FioProc(proc, job, output)
    try:
        yield fp
    finally:
        fp.stop()


def paced(w: Workload) -> Workload:
    """``w`` with one I/O size -- its most frequent -- so fio's ``rate_iops`` counts I/Os
    (module docstring, *Load*); a single-size workload is returned unchanged."""
    if len(w.sizes) == 1:
        return w
    top = max(w.sizes, key=lambda s: s.share)
    note = f"sizes: {top.size_bytes} B only (fio paces rate_iops in bytes)"
    return replace(w, sizes=(IoSize(top.size_bytes, 1.0),), notes=(*w.notes, note))


@dataclass(frozen=True)
class FioJob:
    """One fio job section: a workload, when it runs and its caps (None: uncapped)."""

    name: str
    workload: Workload
    start_s: float
    duration_s: float
    riops: int | None = None
    wiops: int | None = None


def fio_text(jobs: Sequence[FioJob], filename: str, device_bytes: int, depth: int) -> str:
    """A fio job file: :func:`iogauge.lab.workloads.fio_job`'s placement of each workload
    (offsets, zones, sizes, read share), with libaio at ``depth`` I/Os in flight instead of
    threads, ``startdelay``/``runtime`` per job and exact ``rate_iops=reads,writes``."""
    base = fio_job([replace(j.workload, name=j.name, threads=1, rate_iops=None,
                            rate_schedule=()) for j in jobs], filename,
                   device_bytes=device_bytes)
    sections = base.rstrip("\n").split("\n\n")
    glob = ["ioengine=libaio" if ln == "ioengine=psync" else
            f"iodepth={depth}" if ln == "iodepth=1" else ln
            for ln in sections[0].splitlines()]
    glob += ["thread", "norandommap", "time_based=1"]
    out = ["\n".join(glob)]
    for j, sec in zip(jobs, sections[1:], strict=True):
        lines = sec.splitlines()
        extra = [f"startdelay={j.start_s:g}", f"runtime={j.duration_s:g}"]
        if j.riops is not None and j.wiops is not None:
            total = j.riops + j.wiops
            # The mix follows the caps (rounding moved it a little): fio picks each I/O's
            # direction by rwmixread, then waits for that direction's rate.
            lines = [f"rwmixread={round(100 * j.riops / total)}" if ln.startswith("rwmixread=")
                     else ln for ln in lines]
            extra.append(f"rate_iops={j.riops},{j.wiops}")
        out.append("\n".join(lines + extra))
    return "\n\n".join(out) + "\n"


def controller_capacity_model(model: str) -> CapacityModel:
    """The controller's capacity model for an emulated device of ``model``: what ``auto``
    picks on the real device it stands for -- the latency knee on an SSD or a RAID set
    (``ssd``/``raid`` profiles), %util on a disk. The emulated device is a loop device, which
    ``auto`` takes for one spindle ([sysstat] iostat(1): %util is a capacity only there),
    so left to ``auto`` the ``ssd`` would be run as a disk."""
    from iogauge.lab.emu.models import model_kind  # noqa: PLC0415 - loads profiles

    return "latency" if model_kind(model) in ("ssd", "raid") else "auto"


def loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


def read_stat(name: str) -> tuple[int, int, int]:
    """(reads, writes, io_ticks ms) of block device ``name`` (/sys/block/NAME/stat)."""
    f = (Path("/sys/block") / name / "stat").read_text().split()
    return int(f[0]), int(f[4]), int(f[9])



class ControllerThread:
    """The guarantee controller, in-process, on its own thread (stopped and joined on exit;
    its run() restores every limit it wrote). ``options``: more
    :class:`~iogauge.guarantee.config.GuaranteeConfig` fields (``reserve_idle``, ...)."""

    def __init__(self, policy: str, dev: str, a: Path, b: Path, floor: float,
                 interval_s: float, state_dir: Path, say: Callable[[str], None],
                 **options: Any) -> None:
        from iogauge.guarantee.config import GuaranteeConfig, ProtectSpec  # noqa: PLC0415
        from iogauge.guarantee.controller import Controller  # noqa: PLC0415

        cfg = GuaranteeConfig(device=dev, protect=(ProtectSpec(a, float(floor)),),
                              throttle=(b,), interval_s=interval_s,
                              policy="paper" if policy == "paper" else "adaptive",
                              state=state_dir / "guarantee.state.json", record=False,
                              **options)
        self.a = a
        self.controller = Controller(cfg, say=say)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"guarantee-{policy}",
                                       daemon=True)

    def _run(self) -> None:
        try:
            self.controller.run(self.stop_event)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            self.error = exc

    def start(self) -> None:
        self.thread.start()

    def set_floor(self, floor: float) -> None:
        self.controller.set_floors({str(self.a): float(floor)})

    def check(self) -> None:
        if self.error is not None:
            raise EvalError(f"the controller stopped: {self.error}") from self.error

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(60)
        if self.thread.is_alive():
            raise EvalError("the controller did not stop within 60 s; run `iogauge guarantee "
                            "release` with its state file")


def first_io(hier: CgroupV1, cg: Path, devnum: DevNum, fio: FioProc,
              timeout_s: float = 10.0) -> float:
    """Monotonic time of the first completed I/O of cgroup ``cg`` (polled every 2 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(hier.read_counts(cg, devnum)) > 0:
            return time.monotonic()
        fio.check()
        time.sleep(0.002)
    raise EvalError(f"fio did no I/O in {cg} within {timeout_s:g} s:\n{fio.output_text()}")




__all__ = ["BLKIO_ROOT", "CGROUP_PREFIX", "ControllerThread", "EvalError", "FioJob", "FioProc",
           "cgroup_pair", "controller_capacity_model", "fio_text", "first_io", "leftover_cgroups",
           "loadavg", "paced", "preflight", "read_stat", "remove_cgroup", "start_fio"]
