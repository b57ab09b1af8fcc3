"""Never leave a stale throttle: the state file, guarded writes, and restore.

Every limit the controller writes goes through :class:`LimitGuard`, which first records in
the state file *which* limit (hierarchy, cgroup, device, riops/wiops), *the value it
replaces* (read from the kernel before the first write) and the value about to be written —
durably (temporary file, fsync, rename, fsync of the directory) — and only then writes the
kernel file. So at any instant, including a ``kill -9`` between the two steps, the state file
names every limit that may be ours.

Restoring an entry (:func:`restore_entries`) reads the kernel's current value and:

* equal to what we wrote -> writes the original back (``restored``);
* equal to the original already -> nothing to do (we crashed before our write landed);
* anything else -> someone changed it after us: left alone and reported (``left``);
* cgroup directory gone -> its limits went with it (``gone``).

Only when every entry is settled is the state file removed; entries whose restore failed
stay in it for ``iogauge guarantee release``.

Restore happens on SIGTERM/SIGINT (the controller's ``finally``), at the next start before
anything else (:func:`restore_state`), and by hand (``iogauge guarantee release``). A lock
file beside the state file (``flock``, released by the kernel when the process dies, even by
SIGKILL) keeps two controllers off one state file and tells a restarted controller whether
the previous one is really dead.

The default state path is under ``/run`` (tmpfs): cgroup limits do not survive a reboot and
neither should their record. A state file from an earlier boot (``boot_id`` differs) is
discarded with a note, never replayed onto re-created cgroups.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from iogauge.fsutil import fsync_dir, lock_with_pid
from iogauge.guarantee import GuaranteeError, ProtectedWriteError
from iogauge.guarantee.actuators import IO_KEYS, DevNum, Hierarchy, IoKey
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.guarantee.actuators.cgroup_v2 import CgroupV2

STATE_VERSION = 1
#: /run is tmpfs: the record of limits lives exactly as long as the limits can.
DEFAULT_STATE_PATH = Path("/run/iogauge/guarantee.state.json")


def read_boot_id(procfs_root: str | Path = "/proc") -> str | None:
    """``/proc/sys/kernel/random/boot_id``: a new UUID at every boot."""
    try:
        return (Path(procfs_root) / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@dataclass
class LimitEntry:
    """One limit that the controller (may have) written.

    Attributes:
        hierarchy: ``cgroup-v1`` or ``cgroup-v2``.
        root: the hierarchy's mount point.
        group: the cgroup directory.
        device: ``major:minor`` of the disk.
        key: ``riops`` or ``wiops``.
        original: the value in force before our first write (None = no limit).
        written: the value we wrote last (None = we removed the limit).
    """

    hierarchy: str
    root: str
    group: str
    device: str
    key: str
    original: int | None
    written: int | None

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.group, self.device, self.key)

    def describe(self) -> str:
        return f"{self.group} {self.device} {self.key}"


@dataclass
class StateDoc:
    """The state file's content (JSON)."""

    version: int
    pid: int
    boot_id: str | None
    started: str
    entries: list[LimitEntry] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, path: Path) -> StateDoc:
        try:
            return cls._parse(json.loads(text), path)
        except (ValueError, TypeError, KeyError) as exc:
            raise GuaranteeError(f"{path}: unreadable state file ({exc}); inspect it, restore "
                                 "the limits it names by hand, then delete it") from exc

    @classmethod
    def _parse(cls, raw: object, path: Path) -> StateDoc:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        version = int(raw["version"])
        if version > STATE_VERSION:
            raise GuaranteeError(f"{path}: state file version {version} is newer than this "
                                 f"iogauge understands ({STATE_VERSION})")
        entries = [LimitEntry(**cast(dict[str, Any], e)) for e in raw.get("entries", [])]
        for e in entries:
            if e.key not in IO_KEYS or e.hierarchy not in ("cgroup-v1", "cgroup-v2"):
                raise ValueError(f"bad entry {e}")
            DevNum.parse(e.device)
        return cls(version, int(raw["pid"]), raw.get("boot_id"), str(raw["started"]), entries)


class StateFile:
    """The state file at ``path`` and its lock file ``path.lock``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock_fd: int | None = None

    # -- locking -------------------------------------------------------------------------
    def lock(self) -> None:
        """Take the lock (non-blocking); GuaranteeError naming the holder's pid otherwise."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise GuaranteeError(f"cannot create {self.lock_path}: {exc.strerror or exc}"
                                 " (iogauge guarantee needs root, or pass --state PATH)"
                                 ) from exc
        holder = lock_with_pid(fd)
        if holder is not None:
            raise GuaranteeError(f"{self.path} is in use by a running iogauge guarantee (pid "
                                 f"{holder}); stop it with SIGTERM (it restores its limits) "
                                 "or use another --state")
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._lock_fd, 0)
        os.close(self._lock_fd)  # closing drops the flock
        self._lock_fd = None
        with contextlib.suppress(OSError):
            self.lock_path.unlink()

    @property
    def locked(self) -> bool:
        return self._lock_fd is not None

    # -- content -------------------------------------------------------------------------
    def load(self) -> StateDoc | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise GuaranteeError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        return StateDoc.from_json(text, self.path)

    def save(self, doc: StateDoc) -> None:
        """Replace the file atomically and durably (tmp, fsync, rename, fsync dir)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, doc.to_json().encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            tmp.replace(self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise GuaranteeError(f"cannot write state file {self.path}: "
                                 f"{exc.strerror or exc}") from exc

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        fsync_dir(self.path.parent)


# ---- restore -------------------------------------------------------------------------------
@dataclass
class RestoreReport:
    """What restoring did, entry by entry (each a one-line description)."""

    restored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def count(self) -> int:
        return len(self.restored)

    def lines(self) -> list[str]:
        out = list(self.notes)
        out += [f"restored {x}" for x in self.restored]
        out += [f"already at its original value: {x}" for x in self.unchanged]
        out += [f"left as is (changed by someone else since): {x}" for x in self.left]
        out += [f"cgroup gone, nothing to restore: {x}" for x in self.gone]
        out += [f"FAILED to restore {x}" for x in self.failed]
        return out


def hierarchy_of(entry: LimitEntry) -> Hierarchy:
    root = Path(entry.root)
    return CgroupV1(root) if entry.hierarchy == "cgroup-v1" else CgroupV2(root)


def _fmt(v: int | None) -> str:
    return "unlimited" if v is None else str(v)


def restore_entries(entries: Sequence[LimitEntry],
                    hierarchy: Hierarchy | None = None) -> tuple[RestoreReport,
                                                                 list[LimitEntry]]:
    """Restore each entry (see the module docstring); returns the report and the entries
    that still need restoring (failures)."""
    rep = RestoreReport()
    remaining: list[LimitEntry] = []
    for e in entries:
        h = hierarchy or hierarchy_of(e)
        group = Path(e.group)
        dev = DevNum.parse(e.device)
        key = cast(IoKey, e.key)
        what = f"{e.describe()}"
        if not group.is_dir():
            rep.gone.append(what)
            continue
        try:
            cur = getattr(h.read_limit(group, dev), key)
            if cur == e.written:
                h.write_limit(group, dev, key, e.original)
                rep.restored.append(f"{what}: {_fmt(e.written)} -> {_fmt(e.original)}")
            elif cur == e.original:
                rep.unchanged.append(f"{what} = {_fmt(cur)}")
            else:
                rep.left.append(f"{what}: now {_fmt(cur)}, we wrote {_fmt(e.written)}, it was "
                                f"{_fmt(e.original)}")
        except GuaranteeError as exc:
            if not group.is_dir():  # removed while we were restoring it
                rep.gone.append(what)
                continue
            rep.failed.append(f"{what}: {exc}")
            remaining.append(e)
    return rep, remaining


def restore_state(state: StateFile, *, procfs_root: str | Path = "/proc",
                  hierarchy: Hierarchy | None = None) -> RestoreReport:
    """Restore everything the state file names, then remove it (keep the failures).

    The caller holds the lock. A file from an earlier boot is discarded unread.
    """
    doc = state.load()
    if doc is None:
        return RestoreReport(notes=[f"no state file at {state.path}: nothing to restore"])
    now = read_boot_id(procfs_root)
    if doc.boot_id and now and doc.boot_id != now:
        state.remove()
        return RestoreReport(notes=[(f"{state.path} is from an earlier boot (pid {doc.pid}, "
                                     f"started {doc.started}); cgroup limits do not survive a "
                                     "reboot: discarded")])
    rep, remaining = restore_entries(doc.entries, hierarchy)
    rep.notes.insert(0, f"{state.path}: {len(doc.entries)} limit(s) of pid {doc.pid} "
                     f"(started {doc.started})")
    if remaining:
        doc.entries = remaining
        state.save(doc)
    else:
        state.remove()
    return rep


# ---- the guard every write goes through --------------------------------------------------
class LimitGuard:
    """Records, then writes; restores everything it wrote.

    Args:
        state: the (locked) state file; None in dry-run, where nothing is written.
        hierarchy: where limits are written.
        protected: the protected cgroup directories: a write to one of them or to an
            ancestor of one is refused (A is never throttled).
        procfs_root: for ``boot_id``.
    """

    def __init__(self, state: StateFile | None, hierarchy: Hierarchy,
                 protected: Sequence[Path], *, procfs_root: str | Path = "/proc") -> None:
        self.state = state
        self.hierarchy = hierarchy
        self.protected = tuple(protected)
        self.doc = StateDoc(STATE_VERSION, os.getpid(), read_boot_id(procfs_root),
                            datetime.now(UTC).isoformat(timespec="seconds"))
        self._index: dict[tuple[str, str, str], LimitEntry] = {}
        self.writes = 0

    def set(self, group: Path, dev: DevNum, key: IoKey, value: int | None) -> None:
        """Make ``key`` of ``group`` on ``dev`` equal ``value`` (recorded first)."""
        for a in self.protected:
            if group == a or group in a.parents:
                raise ProtectedWriteError(f"refusing to write a limit to {group}: it is (or "
                                     f"contains) the protected cgroup {a}")
        if self.state is None or self.hierarchy.kind == "dry-run":
            self.hierarchy.write_limit(group, dev, key, value)
            self.writes += 1
            return
        ident = (str(group), str(dev), key)
        entry = self._index.get(ident)
        if entry is None:
            original = getattr(self.hierarchy.read_limit(group, dev), key)
            entry = LimitEntry(self.hierarchy.kind, str(self.hierarchy.root), str(group),
                               str(dev), key, original, value)
            self.doc.entries.append(entry)
            self._index[ident] = entry
            previous: int | None = original
        else:
            previous = entry.written
            entry.written = value
        self.state.save(self.doc)  # durable before the kernel sees the new value
        try:
            self.hierarchy.write_limit(group, dev, key, value)
        except GuaranteeError:
            entry.written = previous
            self.state.save(self.doc)
            raise
        self.writes += 1

    def restore(self) -> RestoreReport:
        """Put back every original value this guard replaced; remove the state file."""
        if self.state is None or not self.doc.entries:
            if self.state is not None:
                self.state.remove()
            return RestoreReport()
        rep, remaining = restore_entries(self.doc.entries, self.hierarchy)
        self.doc.entries = remaining
        self._index = {e.ident: e for e in remaining}
        if remaining:
            self.state.save(self.doc)
        else:
            self.state.remove()
        return rep


__all__ = [
    "DEFAULT_STATE_PATH", "STATE_VERSION", "LimitEntry", "LimitGuard", "RestoreReport",
    "StateDoc", "StateFile", "read_boot_id", "restore_entries", "restore_state",
]
