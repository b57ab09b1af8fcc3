"""Fixture cgroup trees (v1 blkio, v2 io) in a temporary directory, and a stand-in for the
kernel's handling of writes to their limit files.

A regular file replaces its content on every write; a cgroup limit file *merges* the written
line into its table (v1: ``MAJ:MIN N`` sets, ``MAJ:MIN 0`` removes; v2: ``MAJ:MIN key=v``
changes that key, and a device whose keys are all ``max`` disappears). :class:`KernelEmu`
patches the one function the actuators write through so fixture files behave like that, and
records every line written exactly as the actuator sent it.

The trees are built by the fixtures below (nothing copied from a host), laid out as the
kernel shows them (Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/blkio-controller.rst).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

import iogauge.guarantee.actuators.cgroup_v1 as v1mod
import iogauge.guarantee.actuators.cgroup_v2 as v2mod
from iogauge.guarantee.actuators import DevNum

V1_LIMIT_FILES = ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device",
                  "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")
V2_KEYS = ("rbps", "wbps", "riops", "wiops")


@dataclass
class KernelEmu:
    writes: list[tuple[Path, str]] = field(default_factory=list)

    def v1(self, path: Path, text: str, dev: DevNum | None = None) -> None:
        self.writes.append((path, text))
        majmin, value = text.split()
        table = dict(line.split() for line in path.read_text().splitlines() if line.strip())
        if int(value) == 0:
            table.pop(majmin, None)
        else:
            table[majmin] = str(int(value) % 2**32)
        path.write_text("".join(f"{k} {v}\n" for k, v in sorted(table.items())))

    def v2(self, path: Path, text: str, dev: DevNum | None = None) -> None:
        self.writes.append((path, text))
        parts = text.split()
        majmin = parts[0]
        table: dict[str, dict[str, str]] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                f = line.split()
                table[f[0]] = dict(kv.split("=") for kv in f[1:])
        row = table.get(majmin, dict.fromkeys(V2_KEYS, "max"))
        for kv in parts[1:]:
            k, v = kv.split("=")
            assert k in V2_KEYS, f"unknown io.max key {k}"
            row[k] = v
        table[majmin] = row
        lines = [f"{d} " + " ".join(f"{k}={r[k]}" for k in V2_KEYS)
                 for d, r in sorted(table.items()) if any(r[k] != "max" for k in V2_KEYS)]
        path.write_text("".join(x + "\n" for x in lines))


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> KernelEmu:
    emu = KernelEmu()
    monkeypatch.setattr(v1mod, "write_text", emu.v1)
    monkeypatch.setattr(v2mod, "write_text", emu.v2)
    return emu


def make_v1_group(root: Path, name: str, *, serviced: str = "Total 0\n") -> Path:
    g = root / name
    g.mkdir(parents=True)
    for f in V1_LIMIT_FILES:
        (g / f).write_text("")
    (g / "blkio.throttle.io_serviced_recursive").write_text(serviced)
    (g / "blkio.throttle.io_serviced").write_text(serviced)
    (g / "cgroup.procs").write_text("")
    return g


@pytest.fixture
def v1_root(tmp_path: Path) -> Path:
    """A v1 blkio hierarchy: the root and groups ``a`` (protected) and ``b`` (throttled)."""
    root = tmp_path / "cgroup" / "blkio"
    root.mkdir(parents=True)
    for f in V1_LIMIT_FILES:
        (root / f).write_text("")
    (root / "cgroup.procs").write_text("")
    make_v1_group(root, "a")
    make_v1_group(root, "b")
    return root


def make_v2_group(root: Path, name: str, *, io_max: str = "", io_stat: str = "",
                  pressure: str | None = None) -> Path:
    g = root / name
    g.mkdir(parents=True)
    (g / "io.max").write_text(io_max)
    (g / "io.stat").write_text(io_stat)
    (g / "cgroup.procs").write_text("")
    (g / "cgroup.controllers").write_text("io memory\n")
    (g / "cgroup.subtree_control").write_text("")
    if pressure is not None:
        (g / "io.pressure").write_text(pressure)
    return g


@pytest.fixture
def v2_root(tmp_path: Path) -> Path:
    """A cgroup2 hierarchy with io available and enabled for the root's children."""
    root = tmp_path / "cgroup2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("io memory\n")
    make_v2_group(root, "a", pressure="some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    make_v2_group(root, "b")
    return root


@pytest.fixture
def mounts_file(tmp_path: Path, v1_root: Path, v2_root: Path) -> Path:
    """A /proc/self/mounts naming the two fixture hierarchies (and a non-blkio v1 one)."""
    cpu = tmp_path / "cgroup" / "cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "mounts"
    p.write_text(
        "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
        f"tmpfs {tmp_path / 'cgroup'} tmpfs rw,relatime,mode=755 0 0\n"
        f"cgroup {cpu} cgroup rw,relatime,cpu 0 0\n"
        f"cgroup {v1_root} cgroup rw,nosuid,nodev,noexec,relatime,blkio 0 0\n"
        f"cgroup2 {v2_root} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    return p


#: sysfs tree with disks, partitions, dm, md and loop devices (see proc_trees/README.md).
SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "proc_trees" / "steady_17" / "sys"


# ---- a running "kernel": counters that advance with the monotonic clock --------------------
def _diskstats_line(major: int, minor: int, name: str, reads: int, writes: int,
                    io_ticks_ms: int, queue_ms: int, r_ticks_ms: int, w_ticks_ms: int) -> str:
    return (f"{major:4d} {minor:7d} {name} {reads} 0 {reads * 8} {r_ticks_ms} {writes} 0 "
            f"{writes * 8} {w_ticks_ms} 0 {io_ticks_ms} {queue_ms} 0 0 0 0 0 0\n")


class FakeKernel:
    """Rewrites ``<procfs>/diskstats`` and the groups' counter files every few ms, as if
    the device did ``r_iops``/``w_iops`` at ``util_pct`` with ``await_ms`` latency and
    each group its own rates. Counters are a function of the monotonic clock, so any
    interval the controller measures sees exactly these rates (up to rounding)."""

    def __init__(self, procfs: Path, *, r_iops: float, w_iops: float, util_pct: float,
                 await_ms: float, groups: dict[Path, tuple[float, float]],
                 hierarchy: str = "v1", device: tuple[int, int, str] = (8, 0, "sda")) -> None:
        import threading
        import time

        self.procfs = procfs
        self.r, self.w, self.util, self.await_ms = r_iops, w_iops, util_pct, await_ms
        self.groups = groups
        self.hierarchy = hierarchy
        self.device = device
        self._time = time
        self._t0 = time.monotonic() - 100.0  # nonzero counters from the start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        procfs.mkdir(parents=True, exist_ok=True)
        self.write_once()

    def _atomic(self, path: Path, text: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)

    def write_once(self) -> None:
        t = self._time.monotonic() - self._t0
        maj, mnr, name = self.device
        reads, writes = int(self.r * t), int(self.w * t)
        self._atomic(self.procfs / "diskstats", _diskstats_line(
            maj, mnr, name, reads, writes, int(self.util * 10 * t),
            int((reads + writes) * self.await_ms), int(reads * self.await_ms),
            int(writes * self.await_ms)))
        for g, (gr, gw) in self.groups.items():
            r, w = int(gr * t), int(gw * t)
            if self.hierarchy == "v1":
                text = (f"{maj}:{mnr} Read {r}\n{maj}:{mnr} Write {w}\n{maj}:{mnr} Sync {r + w}\n"
                        f"{maj}:{mnr} Async 0\n{maj}:{mnr} Discard 0\n{maj}:{mnr} Total {r + w}\n"
                        f"Total {r + w}\n")
                self._atomic(g / "blkio.throttle.io_serviced_recursive", text)
            else:
                self._atomic(g / "io.stat", f"{maj}:{mnr} rbytes={r * 4096} wbytes={w * 4096} "
                             f"rios={r} wios={w} dbytes=0 dios=0\n")

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.write_once()

    def __enter__(self) -> FakeKernel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
