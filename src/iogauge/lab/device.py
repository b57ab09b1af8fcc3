"""Create and destroy emulated block devices: a FUSE file (the model's timings) + a loop device.

``create()`` builds, in order, recording each step in a state directory
``/run/iogauge/lab/<id>/`` (``state.json``) so that another process can undo it::

    state dir + lock -> backing dir (sparse disk.img) -> FUSE daemon (python -m
    iogauge.lab.emulated, its own session) -> mount ready -> losetup --direct-io=on ->
    direct I/O verified -> queue tuned -> calibration -> ready

Any failure undoes every step already done, in reverse order (detach the loop device, stop
the daemon, unmount, remove the directories), so a failed ``create`` leaves no loop device,
mount, process or file behind. ``destroy()`` does the same for a ready device from any
process; ``list_devices()`` reports every device and cleans up stale ones (daemon dead, loop
device gone). A ``create`` in progress holds ``flock`` on its entry's lock file; the others
leave such an entry alone (the kernel releases the lock if the creating process dies).

Needs root (mount, losetup), /dev/fuse, libfuse3 (package fuse3) and losetup
(util-linux); ``scripts/ensure-system-tools.sh`` installs them.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import fcntl
import json
import mmap
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iogauge.errors import IogaugeError
from iogauge.lab import emulated

#: Where device records live (tmpfs: a reboot forgets them, as it forgets loop devices).
STATE_ROOT = Path("/run/iogauge/lab")
#: Where sparse backing files go by default (a disk, not tmpfs: written data survives
#: memory pressure).
DEFAULT_BACKING_DIR = Path("/var/tmp")  # noqa: S108 (a fresh mkdtemp dir is made in it)
#: Default model (the issue: "--model hdd, a 7,200 rpm single spindle, is the default").
DEFAULT_MODEL = "hdd"

#: Largest request the FUSE connection carries in one piece: libfuse 3 negotiates
#: max_write = max_pages = 1 MiB. The loop queue's max_sectors_kb is lowered to it so one
#: block request is one model request (loop's default 1280 KiB would be cut in two).
FUSE_MAX_IO_KIB = 1024

#: Calibration probe: constant service times (s) and reads per level (after a warm-up).
CALIBRATION_LEVELS_S = (0.25e-3, 0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3, 16e-3)
CALIBRATION_READS = 9

_READY_TIMEOUT_S = 15.0
_STOP_TIMEOUT_S = 10.0

#: Daemons started by this process (reaped on destroy so none is left a zombie).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LabError(IogaugeError):
    """The emulated device cannot be created, found or destroyed (message says why)."""


# ---- state ------------------------------------------------------------------------------


@dataclass
class LabDevice:
    """One emulated device's record (``state.json``).

    Attributes:
        id: entry name under the state root.
        model: model spec (profile name or ``constant:<duration>``).
        size_bytes: device size.
        state_dir: ``<state root>/<id>``; holds ``mnt/``, ``control.sock``, ``server.log``.
        mountpoint: where the FUSE file system is mounted.
        backing_dir: directory holding the sparse backing file (removed on destroy).
        backing_file: the backing file.
        pid: FUSE server process id (None before it was started).
        loop: ``/dev/loopN`` (None before it was attached).
        back_dev, back_ino: device number and inode of the FUSE image, and
        loop_diskseq: the loop device's diskseq after attaching -- how the loop device is
            recognised as still ours (see :func:`_owns_loop`).
        status: ``creating`` or ``ready``.
        created_utc: ISO-8601 creation time.
        compensation: calibration table ``[[service_s, lead_s], ...]``.
        notes: what create could not do exactly as wished (e.g. queue tuning refused).
        server_exit_status: the server's exit status once destroyed by the process that
            started it (0 = clean exit on SIGTERM); None otherwise.
    """

    id: str
    model: str
    size_bytes: int
    state_dir: str
    mountpoint: str
    backing_dir: str
    backing_file: str
    pid: int | None = None
    loop: str | None = None
    back_dev: int | None = None
    back_ino: int | None = None
    loop_diskseq: int | None = None
    status: str = "creating"
    created_utc: str = ""
    compensation: list[list[float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    server_exit_status: int | None = None

    @property
    def image(self) -> Path:
        return Path(self.mountpoint) / emulated.IMAGE_NAME

    @property
    def control_path(self) -> Path:
        return Path(self.state_dir) / "control.sock"

    @property
    def log_path(self) -> Path:
        return Path(self.state_dir) / "server.log"

    @property
    def state_file(self) -> Path:
        return Path(self.state_dir) / "state.json"

    @property
    def lock_file(self) -> Path:
        return Path(self.state_dir) / "lock"

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1) + "\n")
        tmp.replace(self.state_file)  # atomic: a reader sees the old or the new record

    @classmethod
    def load(cls, state_file: Path) -> LabDevice:
        raw = json.loads(state_file.read_text())
        if not isinstance(raw, dict):
            raise TypeError(f"{state_file}: not a JSON object")
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass
class DeviceStatus:
    """What ``list_devices`` found for one entry.

    Attributes:
        device: the record.
        state: ``ready``, ``creating`` (a create holds it), ``busy`` (destroy refused:
            in use) or ``stale`` (cleaned up: daemon dead or loop device gone).
        problems: why it is stale (or what looks wrong).
        stats: the server's statistics (``stats`` control command) when it answered.
    """

    device: LabDevice
    state: str
    problems: list[str] = field(default_factory=list)
    stats: dict[str, Any] | None = None


# ---- small system helpers ---------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.I)


def parse_size(size: str | int) -> int:
    """Bytes from ``268435456``, ``"256M"``, ``"1T"``, ``"10GiB"`` (binary units, as
    losetup and truncate read them); must be a positive multiple of 512."""
    if isinstance(size, bool):
        raise LabError(f"bad size {size!r}")
    if isinstance(size, int):
        n = size
    else:
        m = _SIZE.match(size)
        if m is None or (m.group(3) and not m.group(2)):
            raise LabError(f"bad size {size!r}: expected bytes or a number with K, M, G, T "
                           "or P (binary units), e.g. 256M or 1T")
        mult = 1024 ** " kmgtp".index(m.group(2).lower() or " ")
        value = float(m.group(1)) * mult
        n = int(value)
        if n != value:
            raise LabError(f"bad size {size!r}: not a whole number of bytes")
    if n <= 0 or n % 512:
        raise LabError(f"bad size {size!r} ({n} bytes): an emulated disk needs a positive "
                       "multiple of 512 bytes (its sector size)")
    return n


def preflight() -> None:
    """Refuse clearly unless root, /dev/fuse, libfuse3 and losetup are all there."""
    if os.geteuid() != 0:
        raise LabError(f"needs root (running as uid {os.geteuid()}): it mounts a FUSE file "
                       "system and attaches a loop device; run with sudo")
    fuse_dev = Path("/dev/fuse")
    if not fuse_dev.exists():
        raise LabError("/dev/fuse is missing: load the fuse module (modprobe fuse) or, in a "
                       "container, pass the device through (--device /dev/fuse)")
    if not (os.environ.get("FUSE_LIBRARY_PATH") or ctypes.util.find_library("fuse3")):
        raise LabError("libfuse3 not found: install package fuse3 "
                       "(scripts/ensure-system-tools.sh does)")
    if shutil.which("losetup") is None:
        raise LabError("losetup not found on PATH: install util-linux "
                       "(scripts/ensure-system-tools.sh does)")
    if not Path("/dev/loop-control").exists():
        raise LabError("no loop device support: /dev/loop-control is missing "
                       "(modprobe loop)")


def _mounted(mountpoint: str) -> bool:
    """Whether ``mountpoint`` is in this namespace's mount table (/proc/self/mountinfo)."""
    target = mountpoint.replace("\\", "\\134").replace(" ", "\\040")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    return any(len(p := line.split()) > 4 and p[4] == target for line in lines)


def _pid_alive(pid: int | None, marker: str) -> bool:
    """``pid`` runs (not a zombie) and its command line contains ``marker``."""
    if not pid:
        return False
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat_line.rsplit(")", 1)[-1].split()[0] if ")" in stat_line else "?"
    return state not in ("Z", "X") and marker in cmdline


def _loop_devices() -> list[dict[str, Any]]:
    res = subprocess.run(["losetup", "--list", "--json", "--output",
                          "NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN,DIO"],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    try:
        devs = json.loads(res.stdout).get("loopdevices", [])
    except ValueError:
        return []
    return [d for d in devs if isinstance(d, dict)]


def _diskseq(loop: str) -> int | None:
    """The kernel's sequence number of the medium in ``loop`` (bumped by every attach and
    detach, so it identifies one attachment; kernel 5.15+), None when unknown."""
    try:
        return int((Path("/sys/block") / Path(loop).name / "diskseq").read_text())
    except (OSError, ValueError):
        return None


def _owns_loop(dev: LabDevice) -> bool:
    """Whether ``dev.loop`` is still the attachment create() made (not detached, not reused).

    By diskseq where the kernel has it: the backing path alone is not enough (after a lazy
    unmount of a dead server the kernel shows it as ``/disk.img``); else by the image's
    device number and inode as losetup reports them.
    """
    if not dev.loop or not (Path("/sys/block") / Path(dev.loop).name / "loop").is_dir():
        return False
    if dev.loop_diskseq is not None:
        return _diskseq(dev.loop) == dev.loop_diskseq
    if dev.back_dev is None:
        return False
    want = f"{os.major(dev.back_dev)}:{os.minor(dev.back_dev)}"
    for d in _loop_devices():
        if d.get("name") == dev.loop:
            return (str(d.get("back-maj:min", "")).strip() == want
                    and str(d.get("back-ino", "")).strip() == str(dev.back_ino))
    return False


def _log_tail(dev: LabDevice, lines: int = 15) -> str:
    try:
        text = dev.log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    return "\n".join(text[-lines:]) or "(server log empty)"


def _sysfs_write(path: Path, value: str) -> str | None:
    """Write a sysfs attribute; the reason on failure (None on success)."""
    try:
        with path.open("w") as f:
            f.write(value)
    except OSError as exc:
        return f"{path} <- {value!r}: {exc.strerror or exc}"
    return None


# ---- the steps and their undo -----------------------------------------------------------


def _spawn_server(dev: LabDevice, *, realtime: bool = True) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "iogauge.lab.emulated", "--mountpoint", dev.mountpoint,
           "--backing", dev.backing_file, "--size", str(dev.size_bytes), "--model",
           dev.model, "--control", str(dev.control_path), "--fsname",
           f"iogauge-lab-{dev.id}", *([] if realtime else ["--no-realtime"])]
    env = dict(os.environ)
    # mfusepy prefers libfuse 2 when both are installed; the server is written for 3.
    if not env.get("FUSE_LIBRARY_PATH"):
        env["FUSE_LIBRARY_NAME"] = "fuse3"
    with dev.log_path.open("ab") as logf:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                cwd="/", env=env, start_new_session=True)
    _CHILDREN[proc.pid] = proc
    return proc


def _wait_ready(dev: LabDevice, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise LabError(f"the FUSE server exited with status {proc.returncode} before "
                           f"serving; its log ({dev.log_path}):\n{_log_tail(dev)}")
        if _mounted(dev.mountpoint):
            try:
                size = dev.image.stat().st_size
                reply = emulated.control(dev.control_path, {"cmd": "stats"})
            except OSError:
                size, reply = -1, {}
            if size == dev.size_bytes and reply.get("ok"):
                return
        if time.monotonic() > deadline:
            raise LabError(f"the FUSE server did not serve {dev.image} within "
                           f"{_READY_TIMEOUT_S:.0f} s; its log:\n{_log_tail(dev)}")
        time.sleep(0.05)


def _attach(dev: LabDevice) -> str:
    res = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(dev.image)],
                         capture_output=True, text=True, check=False)
    path = res.stdout.strip()
    if res.returncode != 0 or not path.startswith("/dev/"):
        raise LabError(f"losetup --find --show --direct-io=on {dev.image} failed (exit "
                       f"{res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
    return path


def _check_direct_io(loop: str) -> None:
    dio = Path("/sys/block") / Path(loop).name / "loop" / "dio"
    try:
        on = dio.read_text().strip() == "1"
    except OSError as exc:
        raise LabError(f"cannot read {dio}: {exc.strerror or exc}") from exc
    if not on:
        raise LabError(f"the kernel did not enable direct I/O on {loop} (over FUSE); "
                       "buffered, its requests would be served from the page cache and "
                       "the emulated timings would be fake")


def _tune_queue(loop: str, rotational: bool | None) -> list[str]:
    """Make the loop queue pass requests through unchanged; returns what could not be set."""
    q = Path("/sys/block") / Path(loop).name / "queue"
    notes: list[str] = []
    # No I/O scheduler: requests reach the dispatcher in submission order and the queue
    # forms there, under the model's FIFO discipline (an elevator would reorder them and a
    # BFQ/CFQ-style idler would delay them).
    if (n := _sysfs_write(q / "scheduler", "none")) is not None:
        notes.append(n)
    try:
        hw = int((q / "max_hw_sectors_kb").read_text())
    except (OSError, ValueError):
        hw = FUSE_MAX_IO_KIB
    if (n := _sysfs_write(q / "max_sectors_kb", str(min(hw, FUSE_MAX_IO_KIB)))) is not None:
        notes.append(n)
    if rotational is not None and (
            n := _sysfs_write(q / "rotational", "1" if rotational else "0")) is not None:
        notes.append(n)
    return notes


def _detach(dev: LabDevice, *, wait_s: float = 2.0) -> bool:
    """Detach our loop device; False if it is still attached (held open: autoclear set)."""
    if not _owns_loop(dev) or dev.loop is None:
        return True
    subprocess.run(["losetup", "--detach", dev.loop], capture_output=True, text=True,
                   check=False)
    deadline = time.monotonic() + wait_s
    while _owns_loop(dev):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _stop_server(dev: LabDevice) -> None:
    """SIGTERM the server (libfuse unmounts and it exits), SIGKILL after a grace period;
    records its exit status when this process started it."""
    pid = dev.pid
    marker = str(dev.control_path)
    if pid and _pid_alive(pid, marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while _pid_alive(pid, marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid_alive(pid, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _pid_alive(pid, marker) and time.monotonic() < deadline + 5:
                time.sleep(0.05)
    proc = _CHILDREN.pop(pid, None) if pid else None
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            dev.server_exit_status = proc.wait(timeout=5)


def _unmount(dev: LabDevice) -> None:
    if _mounted(dev.mountpoint):
        # Lazy: a dead server's mount answers ENOTCONN to everything, a plain umount too.
        subprocess.run(["umount", "--lazy", dev.mountpoint], capture_output=True,
                       check=False)


def _remove_dirs(dev: LabDevice) -> None:
    backing = Path(dev.backing_dir)
    # Only ever a directory create() made itself (name checked: never rm -rf a user path).
    if backing.name.startswith("iogauge-lab-") and backing.is_dir():
        shutil.rmtree(backing, ignore_errors=True)
    state = Path(dev.state_dir)
    if state.parent.is_dir() and state.is_dir():
        with contextlib.suppress(OSError):
            Path(dev.mountpoint).rmdir()  # never rmtree through a mount point
        if not _mounted(dev.mountpoint):
            shutil.rmtree(state, ignore_errors=True)


def _teardown(dev: LabDevice, *, force: bool = False) -> None:
    """Undo everything a device consists of, in reverse order of creation."""
    if not _detach(dev) and not force:
        raise LabError(f"{dev.loop} is in use (mounted or held open); unmount or close it "
                       "and retry (it is set to detach itself at its last close), or "
                       "destroy with --force")
    _stop_server(dev)
    _unmount(dev)
    _remove_dirs(dev)


@contextlib.contextmanager
def _locked(dev: LabDevice, *, blocking: bool) -> Iterator[bool]:
    """flock the entry's lock file; yields False when not blocking and someone holds it."""
    try:
        fd = os.open(dev.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        yield True  # entry already removed
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


# ---- calibration ------------------------------------------------------------------------


def calibrate(dev: LabDevice, levels_s: tuple[float, ...] = CALIBRATION_LEVELS_S,
              reads: int = CALIBRATION_READS) -> list[list[float]]:
    """Measure the path overhead outside the dispatcher; returns ``[[service_s, lead_s]]``.

    For each level the server serves every request in exactly that time (probe mode: the
    model is not touched); 4 KiB O_DIRECT reads at queue depth 1 on the loop device are
    timed from user space like fio's completion latency, and the median excess over the
    level is the lead for that service time. Replies are then sent that much earlier than
    the modelled completion, so an application sees the model's service time (the block
    layer's await is a few tens of microseconds less: the application's own wake-up).
    """
    if dev.loop is None:
        raise LabError(f"{dev.id}: no loop device to calibrate")
    nblocks = max(1, dev.size_bytes // 4096)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    fd = os.open(dev.loop, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    points: list[list[float]] = []
    try:
        for level in levels_s:
            reply = emulated.control(dev.control_path, {"cmd": "probe", "service_s": level})
            if not reply.get("ok"):
                raise LabError(f"calibration probe refused: {reply.get('error')}")
            lat: list[float] = []
            for i in range(reads + 1):
                off = (i * 7919 % nblocks) * 4096
                t = time.perf_counter()
                os.preadv(fd, [buf], off)
                lat.append(time.perf_counter() - t)
            points.append([level, max(0.0, statistics.median(lat[1:]) - level)])
    except OSError as exc:
        raise LabError(f"calibration read on {dev.loop} failed: {exc}") from exc
    finally:
        os.close(fd)
        buf.close()
    return points


def _resume(dev: LabDevice) -> None:
    reply = emulated.control(dev.control_path,
                             {"cmd": "resume", "compensation": dev.compensation})
    if not reply.get("ok"):
        raise LabError(f"the FUSE server refused the calibration: {reply.get('error')}")


# ---- public API -------------------------------------------------------------------------


def _model_facts(model: str, size_bytes: int | None) -> tuple[int, bool | None]:
    """Validate the model spec in this process (fail before creating anything); returns the
    device size (the model's capacity when ``size_bytes`` is None) and whether the device
    rotates (queue/rotational: hdd and raid profiles yes, ssd no; None for constant)."""
    try:
        m = emulated.load_model(model, size_bytes)
        kind = emulated.model_kind(model)
    except (IogaugeError, ValueError, KeyError, LookupError, OSError) as exc:
        raise LabError(f"unknown or bad model {model!r}: {exc}") from exc
    rotational = {"hdd": True, "raid": True, "ssd": False}.get(kind)
    # The profile's capacity rounded down to whole sectors when no size was given.
    return (size_bytes if size_bytes is not None
            else int(m.capacity_bytes) // 512 * 512), rotational


def create(model: str = DEFAULT_MODEL, size: str | int | None = None, *,
           backing_dir: str | Path = DEFAULT_BACKING_DIR, calibrate_timing: bool = True,
           realtime: bool = True, state_root: str | Path = STATE_ROOT,
           progress: Callable[[str], None] | None = None,
           label_media: bool = True) -> LabDevice:
    """Create an emulated device; returns its record (``.loop`` is the ``/dev/loopN`` path).

    Args:
        model: a disk profile name (``hdd``, the default: a 7,200 rpm spindle) or
            ``constant:<duration>[:<channels>]``.
        size: device size (``256M``, ``1T``, bytes); None: the model's capacity.
        backing_dir: where the sparse backing file goes (a directory
            ``iogauge-lab-<id>-*`` is made there and removed on destroy).
        calibrate_timing: measure and compensate the FUSE path overhead (~0.3 s).
        realtime: run the server with SCHED_RR priority 1 (see
            :func:`iogauge.lab.emulated.raise_priority`); False: an ordinary process.
        state_root: where device records live.
        progress: called with one line per step (the CLI prints them to stderr).
        label_media: set the loop device's ``queue/rotational`` to the model's media; False
            leaves a plain loop device's 0, as over any storage (the analysis must then
            tell the media from the samples).

    Raises:
        LabError: preconditions missing or any step failed; everything already done has
            been undone.
    """
    say = progress or (lambda _m: None)
    preflight()
    size_bytes, rotational = _model_facts(model, parse_size(size) if size is not None
                                          else None)
    backing_parent = Path(backing_dir)
    if not backing_parent.is_dir():
        raise LabError(f"backing directory {backing_parent} does not exist")
    dev = _new_record(model, size_bytes, Path(state_root))
    stack = contextlib.ExitStack()
    lock_fd = os.open(dev.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        try:
            stack.enter_context(_sigterm_raises())
            _build(dev, backing_parent, realtime=realtime,
                   rotational=rotational if label_media else None,
                   calibrate_timing=calibrate_timing, say=say)
        except BaseException as exc:
            # Undo whatever was done, whatever went wrong (KeyboardInterrupt included).
            say(f"create failed ({exc.__class__.__name__}); undoing")
            with contextlib.suppress(Exception):
                _teardown(dev, force=True)
            if isinstance(exc, OSError):
                raise LabError(f"creating the emulated device failed: {exc}") from exc
            raise
    finally:
        stack.close()
        os.close(lock_fd)
    return dev


def _new_record(model: str, size_bytes: int, root: Path) -> LabDevice:
    """The device's record in a new state directory under ``root`` (not saved yet: the
    record is saved only once its lock is held, so no other process takes it for stale)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    dev_id = f"{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
    state_dir = root / dev_id
    state_dir.mkdir(mode=0o700)
    return LabDevice(id=dev_id, model=model, size_bytes=size_bytes,
                     state_dir=str(state_dir), mountpoint=str(state_dir / "mnt"),
                     backing_dir="", backing_file="",
                     created_utc=datetime.now(UTC).isoformat(timespec="seconds"))


def _build(dev: LabDevice, backing_parent: Path, *, realtime: bool, rotational: bool | None,
           calibrate_timing: bool, say: Callable[[str], None]) -> None:
    """``create``'s steps in order, each saved to the record before the next, so that an
    undo (here or from another process) finds everything already done."""
    dev.save()
    _make_backing(dev, backing_parent)
    _start_server(dev, realtime=realtime, say=say)
    _attach_loop(dev, rotational, say)
    if calibrate_timing:
        dev.compensation = calibrate(dev)
        say("calibrated: reply lead " + ", ".join(
            f"{s * 1e3:g} ms -> {lead * 1e6:.0f} us" for s, lead in dev.compensation))
    _resume(dev)
    dev.status = "ready"
    dev.save()


def _make_backing(dev: LabDevice, backing_parent: Path) -> None:
    """The backing directory (the sparse image goes there) and the FUSE mount point."""
    bdir = Path(tempfile.mkdtemp(prefix=f"iogauge-lab-{dev.id}-", dir=backing_parent))
    dev.backing_dir = str(bdir)
    dev.backing_file = str(bdir / emulated.IMAGE_NAME)
    Path(dev.mountpoint).mkdir(mode=0o700)
    dev.save()


def _start_server(dev: LabDevice, *, realtime: bool, say: Callable[[str], None]) -> None:
    """The FUSE server, its pid recorded before waiting for its mount."""
    say(f"starting the FUSE server (model {dev.model}, {dev.size_bytes} bytes)")
    proc = _spawn_server(dev, realtime=realtime)
    dev.pid = proc.pid
    dev.save()
    _wait_ready(dev, proc)


def _attach_loop(dev: LabDevice, rotational: bool | None, say: Callable[[str], None]) -> None:
    """The loop device over the image (direct I/O, checked) with its queue tuned;
    ``rotational`` None leaves queue/rotational as the loop driver sets it."""
    st = dev.image.stat()
    dev.back_dev, dev.back_ino = st.st_dev, st.st_ino
    dev.loop = _attach(dev)
    dev.loop_diskseq = _diskseq(dev.loop)
    dev.save()
    say(f"attached {dev.loop} (direct I/O)")
    _check_direct_io(dev.loop)
    dev.notes = _tune_queue(dev.loop, rotational)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While creating, SIGTERM raises (so the undo runs) instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise LabError(f"interrupted by signal {signum} while creating")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _entries(state_root: Path) -> list[LabDevice]:
    out: list[LabDevice] = []
    if not state_root.is_dir():
        return out
    for state_file in sorted(state_root.glob("*/state.json")):
        try:
            out.append(LabDevice.load(state_file))
        except (OSError, ValueError, TypeError):
            continue
    return out


def find(dev: str, state_root: str | Path = STATE_ROOT) -> LabDevice:
    """The record of ``/dev/loopN``, ``loopN`` or an entry id."""
    want = dev if dev.startswith("/dev/") else f"/dev/{dev}"
    for d in _entries(Path(state_root)):
        if d.loop == want or d.id == dev:
            return d
    raise LabError(f"{dev} is not an emulated device of iogauge (see `iogauge lab device "
                   "list`)")


def destroy(dev: str, *, force: bool = False,
            state_root: str | Path = STATE_ROOT) -> LabDevice:
    """Detach the loop device, stop the server, unmount, remove the files; from any process.

    Refuses (LabError) while the loop device is in use (mounted or open) unless ``force``:
    then the server is stopped anyway and the loop device detaches at its last close.
    """
    preflight()
    d = find(dev, state_root)
    with _locked(d, blocking=False) as got:
        if not got:
            raise LabError(f"{dev} is being created or destroyed by another process")
        _teardown(d, force=force)
    return d


def status(d: LabDevice) -> DeviceStatus:
    """Check one device without changing anything."""
    problems: list[str] = []
    if not _pid_alive(d.pid, str(d.control_path)):
        problems.append(f"FUSE server (pid {d.pid}) is not running")
    if not _mounted(d.mountpoint):
        problems.append(f"{d.mountpoint} is not mounted")
    if not _owns_loop(d):
        problems.append(f"{d.loop} is not attached to {d.image}")
    stats: dict[str, Any] | None = None
    if not problems:
        with contextlib.suppress(OSError, ValueError):
            reply = emulated.control(d.control_path, {"cmd": "stats"}, timeout_s=2.0)
            stats = reply.get("stats") if reply.get("ok") else None
    return DeviceStatus(d, "stale" if problems else "ready", problems, stats)


def list_devices(*, cleanup: bool = True,
                 state_root: str | Path = STATE_ROOT) -> list[DeviceStatus]:
    """Every recorded device with its state; stale ones are torn down when ``cleanup``."""
    out: list[DeviceStatus] = []
    for d in _entries(Path(state_root)):
        with _locked(d, blocking=False) as got:
            if not got:
                out.append(DeviceStatus(d, "creating"))
                continue
            st = status(d)
            if st.state == "stale" and cleanup:
                try:
                    _teardown(d)
                    st.problems.append("cleaned up")
                except LabError as exc:
                    st.state = "busy"
                    st.problems.append(str(exc))
            out.append(st)
    return out


def device_stats(dev: str, state_root: str | Path = STATE_ROOT) -> dict[str, Any]:
    """The server's statistics for ``dev`` (requests, bytes, timing errors, CPU seconds)."""
    d = find(dev, state_root)
    try:
        reply = emulated.control(d.control_path, {"cmd": "stats"})
    except OSError as exc:
        raise LabError(f"the FUSE server of {dev} does not answer: {exc}") from exc
    stats = reply.get("stats")
    if not reply.get("ok") or not isinstance(stats, dict):
        raise LabError(f"the FUSE server of {dev} refused: {reply.get('error')}")
    return stats


@contextlib.contextmanager
def create_device(model: str = DEFAULT_MODEL, size: str | int | None = None,
                  **kwargs: Any) -> Iterator[str]:
    """``with create_device("hdd", "64G") as dev:`` -- ``dev`` is ``/dev/loopN``; destroyed
    (force) on exit, on any exception included. Keyword arguments go to :func:`create`."""
    d = create(model, size, **kwargs)
    try:
        yield d.loop or ""
    finally:
        with _locked(d, blocking=True):
            _teardown(d, force=True)
