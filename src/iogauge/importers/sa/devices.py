"""Device names for the major:minor numbers an sa file stores (it stores no names).

As sar and sadf do ([sysstat] sa_common.c get_device_name, ioconf.c): on the host that
wrote the file, the kernel's name from ``/sys/dev/block/M:m`` (else ``/proc/partitions``);
else the fixed numbering every Linux uses, which sysstat's ioconf table also gives: SCSI
disks (majors 8, 65-71, 128-135: 16 minors per disk, ``sda``, ``sda1``, ... ``sdaa``) and
the majors of one device per minor (``loop7``, ``md0``, ``ram1``...); else ``devM-m``,
sar's own name for a device it cannot name.
"""

from __future__ import annotations

import socket
from functools import cache
from pathlib import Path

#: SCSI disk majors in disk-number order (Documentation/admin-guide/devices.txt).
_SD_MAJORS = (8, *range(65, 72), *range(128, 136))
#: Fixed majors of one device per minor, named prefix + minor (ioconf: ram, loop, md,
#: scd, nb), as sysstat's ioconf table names them.
_NUMBERED = {1: "ram", 7: "loop", 9: "md", 11: "scd", 43: "nb"}


def same_host(nodename: str) -> bool:
    """Whether the file was written on this machine (its ``nodename``)."""
    return bool(nodename) and nodename == socket.gethostname()


def _sd_letters(disk: int) -> str:
    """sda..sdz, sdaa..sdzz, ... (the kernel's sd_format_disk_name)."""
    letters = ""
    disk += 1
    while disk > 0:
        disk, rest = divmod(disk - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def fixed_name(major: int, minor: int) -> str | None:
    """The name the fixed numbering gives, None for a dynamic major."""
    if major in _SD_MAJORS:
        disk = _SD_MAJORS.index(major) * 16 + minor // 16
        part = minor % 16
        return "sd" + _sd_letters(disk) + (str(part) if part else "")
    if major in _NUMBERED:
        return f"{_NUMBERED[major]}{minor}"
    return None


@cache
def _proc_partitions() -> dict[tuple[int, int], str]:
    names: dict[tuple[int, int], str] = {}
    try:
        text = Path("/proc/partitions").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return names
    for line in text.splitlines()[2:]:
        parts = line.split()
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            names[int(parts[0]), int(parts[1])] = parts[3]
    return names


@cache
def host_name(major: int, minor: int) -> str | None:
    """This machine's name for the device, None if it has none."""
    try:
        for line in Path(f"/sys/dev/block/{major}:{minor}/uevent").read_text(
                encoding="utf-8", errors="replace").splitlines():
            if line.startswith("DEVNAME="):
                return line.split("=", 1)[1].strip() or None
    except OSError:
        pass
    return _proc_partitions().get((major, minor))


def device_name(major: int, minor: int, *, local: bool) -> str:
    """The name a row gets (see the module docstring)."""
    return ((host_name(major, minor) if local else None) or fixed_name(major, minor)
            or f"dev{major}-{minor}")
