"""cgroup v2 ``io`` controller (Documentation/admin-guide/cgroup-v2.rst, "IO Interface Files").

* ``io.max`` (non-root cgroups) — lines ``MAJ:MIN rbps=N wbps=N riops=N wiops=N`` with
  ``max`` for "no limit"; a device with every key at ``max`` has no line. Writing
  ``MAJ:MIN riops=120`` changes only that key; ``riops=max`` removes it. We only ever write
  ``riops``/``wiops``, so byte limits set by someone else are left exactly as they were.
* ``io.stat`` — ``MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N`` (more keys with
  some controllers), hierarchical: the cgroup and its descendants.
* ``io.pressure`` — PSI: ``some avg10=… total=µs``: time some task of the cgroup stalled on
  I/O. Used as A's demand signal (a task waiting on I/O wants more of it).
* The controller must be enabled for a cgroup by its parent: ``io`` in the parent's
  ``cgroup.subtree_control`` (and so in every ancestor's); it is available at all only if
  ``io`` is in the root's ``cgroup.controllers`` — not when the blkio controller is bound
  to a v1 hierarchy.
"""

from __future__ import annotations

from pathlib import Path

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators.base import DevNum, IoKey, parse_int_value, read_text, write_text
from iogauge.guarantee.policy import MAX_LIMIT_IOPS, GroupLimit


def parse_nested(text: str) -> dict[DevNum, dict[str, str]]:
    """A nested-keyed file (``MAJ:MIN k=v k=v``) -> {device: {key: value}}."""
    out: dict[DevNum, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            dev = DevNum.parse(parts[0])
        except ValueError:
            continue
        kv: dict[str, str] = {}
        for tok in parts[1:]:
            k, sep, v = tok.partition("=")
            if sep:
                kv[k] = v
        out[dev] = kv
    return out


def parse_stall_total(text: str) -> int | None:
    """``total=`` of the ``some`` line of a PSI file, in µs."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "some":
            for tok in parts[1:]:
                if tok.startswith("total="):
                    value = tok.removeprefix("total=")
                    return int(value) if value.isdigit() else None
    return None


class CgroupV2:
    """The unified (v2) hierarchy mounted at ``root``."""

    kind = "cgroup-v2"

    def __init__(self, root: Path) -> None:
        self.root = root

    def io_available(self) -> bool:
        """``io`` is listed in the root's cgroup.controllers."""
        try:
            return "io" in read_text(self.root / "cgroup.controllers").split()
        except GuaranteeError:
            return False

    def check_group(self, group: Path) -> None:
        if not group.is_dir():
            raise GuaranteeError(f"unknown cgroup {group}: no such directory (create it with "
                                 "mkdir and move the workload's processes into its "
                                 "cgroup.procs)")
        if group == self.root:
            raise GuaranteeError(f"{group} is the root cgroup, which has no io.max; use a "
                                 "child cgroup")
        if not self.io_available():
            raise GuaranteeError(f"no io controller in the cgroup2 hierarchy at {self.root}: "
                                 f"'io' is not in {self.root / 'cgroup.controllers'} (it is "
                                 "probably bound to a cgroup v1 blkio hierarchy; give a "
                                 "directory under that one, e.g. /sys/fs/cgroup/blkio/NAME)")
        if not (group / "io.max").exists():
            missing = [p for p in (group, *group.parents)
                       if self.root in p.parents and not _has_io(p.parent)]
            top = missing[-1].parent if missing else group.parent
            raise GuaranteeError(f"the io controller is not enabled for {group}: run "
                                 f"`echo +io > {top}/cgroup.subtree_control` (for every "
                                 f"ancestor from {top} down to {group.parent})")
        if not (group / "io.stat").exists():
            raise GuaranteeError(f"{group} has io.max but no io.stat")

    def read_limit(self, group: Path, dev: DevNum) -> GroupLimit:
        kv = parse_nested(read_text(group / "io.max")).get(dev, {})
        try:
            r = parse_int_value(kv.get("riops", "max"))
            w = parse_int_value(kv.get("wiops", "max"))
        except ValueError as exc:
            raise GuaranteeError(f"{group / 'io.max'}: unexpected value for {dev}: {kv}"
                                 ) from exc
        return GroupLimit(r, w)

    def write_limit(self, group: Path, dev: DevNum, key: IoKey, value: int | None) -> None:
        v = "max" if value is None else str(min(max(int(value), 1), MAX_LIMIT_IOPS))
        write_text(group / "io.max", f"{dev} {key}={v}\n", dev)

    def read_counts(self, group: Path, dev: DevNum) -> tuple[int, int]:
        kv = parse_nested(read_text(group / "io.stat")).get(dev, {})
        try:
            return int(kv.get("rios", "0")), int(kv.get("wios", "0"))
        except ValueError as exc:
            raise GuaranteeError(f"{group / 'io.stat'}: unexpected counters for {dev}: {kv}"
                                 ) from exc

    def read_stall_us(self, group: Path) -> int | None:
        p = group / "io.pressure"
        if not p.exists():
            return None
        return parse_stall_total(read_text(p))


def _has_io(directory: Path) -> bool:
    try:
        return "io" in (directory / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


__all__ = ["CgroupV2", "parse_nested", "parse_stall_total"]
