"""Capture a large binary sysstat sa file, for ``import_memory.py --sa FILE``.

``import_memory.py`` builds its text and JSON inputs from fixtures in seconds; a binary sa file
cannot be built that way (its layout is sadc's, per sysstat version), and sadc writes at most
one record a second. So this captures a real one on this machine, with many disks so that
each record is large: ``--disks`` loop devices are attached read-only to one sparse 1 MiB
file and each is read once (sadc leaves out a disk with no I/O since boot), then
``sadc -S DISK 1`` runs until the file reaches ``--size-mb``. With 1,000 loop devices a record
is about 83 kB (sysstat 12.6.1), so 100 MB takes about 1,210 records, some 20 minutes. sadc is
stopped and the loop devices detached whatever happens, and those the script created are
removed (``LOOP_CTL_REMOVE``): a detached loop device stays in /proc/diskstats with its
counters, so iostat and sar on the machine would go on listing a thousand of them. Needs root
and sysstat's sadc.

Usage::

    sudo .venv/bin/python benchmarks/make_sa_file.py /var/tmp/sa100 --size-mb 100
    .venv/bin/python benchmarks/import_memory.py --sa /var/tmp/sa100 --only-sa
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from iogauge.importers.sa_binary import find_sadc

#: ioctl of /dev/loop-control that deletes a loop device (linux/loop.h).
LOOP_CTL_REMOVE = 0x4C81

def _loop_numbers() -> set[int]:
    return {int(m.group(1)) for path in Path("/sys/block").iterdir()
            if (m := re.fullmatch(r"loop(\d+)", path.name))}


def _remove_loops(numbers: set[int]) -> None:
    """Delete these (detached) loop devices."""
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        for n in sorted(numbers):
            with contextlib.suppress(OSError):  # (one still busy stays)
                fcntl.ioctl(fd, LOOP_CTL_REMOVE, n)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the sa file to write (replaced)")
    ap.add_argument("--size-mb", type=float, default=100.0, help="stop once it is this large")
    ap.add_argument("--disks", type=int, default=1000, help="loop devices to attach")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root (loop devices)")
    sadc = find_sadc()
    if sadc is None:
        raise SystemExit("sadc not found (install sysstat: scripts/ensure-system-tools.sh)")
    target = int(args.size_mb * 1e6)
    args.out.unlink(missing_ok=True)
    loops: list[str] = []
    proc: subprocess.Popen[bytes] | None = None
    before = _loop_numbers()
    with tempfile.TemporaryDirectory(prefix="iogauge-sa-capture-") as tmp:
        back = Path(tmp) / "back"
        with back.open("wb") as fh:
            fh.truncate(1 << 20)
        try:
            for _ in range(args.disks):
                loops.append(subprocess.run(["losetup", "-f", "--show", "-r", str(back)],
                                            check=True, capture_output=True, text=True
                                            ).stdout.strip())
            for dev in loops:
                with Path(dev).open("rb") as fh:  # one read: the disk has I/O since boot
                    fh.read(4096)
            proc = subprocess.Popen([sadc, "-S", "DISK", "1", str(args.out)])
            t0 = time.monotonic()
            last = -1
            while proc.poll() is None:
                time.sleep(0.2)
                size = args.out.stat().st_size if args.out.exists() else 0
                if size != last:  # (a record was just written: sadc sleeps until the next)
                    last = size
                    print(f"\r{size / 1e6:7.1f} MB  {time.monotonic() - t0:6.0f} s",
                          end="", flush=True)
                    if size >= target:
                        proc.send_signal(signal.SIGTERM)
                        proc.wait()
            print()
            if last < target:
                raise SystemExit(f"sadc stopped (exit status {proc.returncode}) at {last:,} "
                                 "bytes")
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            for dev in loops:
                subprocess.run(["losetup", "-d", dev], check=False)
            # (only the devices this run brought into being: losetup -f may have reused
            # one that existed before)
            _remove_loops({int(d.removeprefix("/dev/loop")) for d in loops} - before)
    print(f"{args.out}: {args.out.stat().st_size:,} bytes, {len(loops)} loop disks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
