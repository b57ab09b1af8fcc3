"""Parse ``/proc/diskstats`` in every layout the kernel has used.

Each line is ``major minor name`` followed by counters (Documentation/admin-guide/iostats.rst
and block/genhd.c ``diskstats_show``):

==========  ===========================================================================
fields      layout
==========  ===========================================================================
4           2.6-era partition lines: reads, sectors read, writes, sectors written
            (``struct hd_struct`` counters, 32-bit)
11          up to 4.17: reads, merges, sectors, ms; writes, merges, sectors, ms;
            in flight, io_ticks, weighted ms
15          4.18+: the 11 plus discards completed, merged, sectors, ms
17          5.5+: the 15 plus flushes completed, ms flushing
18+         a future kernel: the first 17 are used, the rest ignored
12-14, 16   no kernel's layout, but read as sysstat reads them: the first 11 (12-14) or
            15 (16) [sysstat] (rd_stats.c read_diskstats_disk: discards only from 15
            counters on, flushes from 17), with a note
==========  ===========================================================================

:func:`used_counters` is the one place that says which counts are read, and how many of
their counters: the collector, the snapshot importer and its sniffer all ask it.

Counts are ``unsigned long`` (64-bit on 64-bit kernels). The millisecond fields (4, 8, 10,
11, 15, 17) are printed with ``%u`` from 32-bit values and wrap at 2**32 ms (~49.7 days of
busy time), which :mod:`iogauge.collector.derive` undoes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from iogauge.errors import InputFormatError

#: The 17 counters after ``major minor name``, in kernel order (1-based field numbers in
#: iostats.rst are the index + 1).
FIELDS: tuple[str, ...] = (
    "rd_ios", "rd_merges", "rd_sectors", "rd_ticks_ms",
    "wr_ios", "wr_merges", "wr_sectors", "wr_ticks_ms",
    "in_flight", "io_ticks_ms", "time_in_queue_ms",
    "dc_ios", "dc_merges", "dc_sectors", "dc_ticks_ms",
    "fl_ios", "fl_ticks_ms",
)
N_FIELDS = len(FIELDS)
IDX = {name: i for i, name in enumerate(FIELDS)}

#: Positions of the 4 values of the old partition layout within the 17.
OLD_PARTITION_MAP: tuple[int, ...] = (IDX["rd_ios"], IDX["rd_sectors"], IDX["wr_ios"],
                                      IDX["wr_sectors"])


@dataclass
class DiskstatsSnapshot:
    """One read of /proc/diskstats.

    Attributes:
        names: kernel device names, one per row.
        major, minor: device numbers per row.
        values: int64 array (rows x 17) of counters; absent fields hold 0.
        present: bool array (rows x 17): which fields the kernel printed for the row.
        old_layout: bool per row, True for 4-field partition lines (32-bit counts).
        problems: one message per line that could not be used (file:line: reason).
        bad_names: device names of malformed lines, where the name could be read; the
            collector keeps their previous state rather than calling them vanished.
        notes: facts about lines that were read (12-14 or 16 counters read as sysstat does).
    """

    names: list[str]
    major: npt.NDArray[np.int64]
    minor: npt.NDArray[np.int64]
    values: npt.NDArray[np.int64]
    present: npt.NDArray[np.bool_]
    old_layout: npt.NDArray[np.bool_]
    problems: list[str] = field(default_factory=list)
    bad_names: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)


#: Counter counts that are no kernel's layout -> how many of them sysstat reads [sysstat].
_SYSSTAT_READS: dict[int, int] = {12: 11, 13: 11, 14: 11, 16: 15}


def used_counters(n: int) -> int | None:
    """How many of a line's ``n`` counters are read (see the module table), or None when
    ``n`` is no layout (the line is refused)."""
    if n in (4, 11, 15) or n >= N_FIELDS:
        return min(n, N_FIELDS)
    return _SYSSTAT_READS.get(n)


def partial_layout_note(names: Iterable[str]) -> str:
    """The note for devices whose lines had 12-14 or 16 counters."""
    return (f"diskstats: {', '.join(sorted(set(names)))}: 12-14 or 16 counters, which no "
            "kernel layout has; read as sysstat reads them, the first 11 (or 15 of 16) "
            "[sysstat]")


_U64_MAX = (1 << 64) - 1
_I64_MAX = (1 << 63) - 1


def parse_line(line: str, *, path: str = "/proc/diskstats",
               line_no: int | None = None) -> tuple[int, int, str, list[int], int]:
    """Parse one diskstats line into (major, minor, name, 17 values, number of fields read:
    :func:`used_counters`).

    Raises :class:`InputFormatError` naming path, line and reason when the line is not a
    diskstats line.
    """
    parts = line.split()
    if len(parts) < 3:
        raise InputFormatError(path, line_no, f"expected 'major minor name counters...', got "
                               f"{len(parts)} field(s)")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except ValueError:
        raise InputFormatError(path, line_no, f"major/minor are not integers: "
                               f"{parts[0]!r} {parts[1]!r}") from None
    name = parts[2]
    raw = parts[3:]
    n = len(raw)
    used = used_counters(n)
    if used is None:
        raise InputFormatError(path, line_no, f"device {name}: {n} counters; known layouts "
                               "have 4, 11, 15 or 17+")
    # ASCII digits only: int() would also take '+4', '1_000' and non-ASCII digits, and a
    # character such as '²' (isdigit() but not int()) made the old lookup raise StopIteration.
    bad = next((x for x in raw[:N_FIELDS] if not (x.isascii() and x.isdigit())), None)
    if bad is not None:
        raise InputFormatError(path, line_no, f"device {name}: counter {bad!r} is not a "
                               "non-negative integer")
    nums = [int(x) for x in raw[:N_FIELDS]]
    for x in nums:
        if x < 0 or x > _U64_MAX:
            raise InputFormatError(path, line_no, f"device {name}: counter {x} out of range")
        if x > _I64_MAX:
            # Not reachable by a real kernel in practice (2**63 sectors = 4 ZiB); refusing is
            # better than a silently wrong delta.
            raise InputFormatError(path, line_no, f"device {name}: counter {x} exceeds 2**63")
    if n == 4:
        vals = [0] * N_FIELDS
        for pos, x in zip(OLD_PARTITION_MAP, nums, strict=True):
            vals[pos] = x
        return major, minor, name, vals, 4
    vals = nums[:used] + [0] * (N_FIELDS - used)
    return major, minor, name, vals, used


def parse_text(lines: Iterable[str], *, path: str = "/proc/diskstats",
               strict: bool = False) -> DiskstatsSnapshot:
    """Parse diskstats text. Bad lines are reported in ``problems`` (or raised if strict).

    A malformed line never stops the other devices from being read: the collector must keep
    collecting every device it can (a kernel bug or a truncated read affects one line).
    """
    names: list[str] = []
    majors: list[int] = []
    minors: list[int] = []
    rows: list[list[int]] = []
    nfields: list[int] = []
    problems: list[str] = []
    bad_names: set[str] = set()
    seen: set[str] = set()
    partial: list[str] = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            major, minor, name, vals, n = parse_line(line, path=path, line_no=line_no)
        except InputFormatError as exc:
            if strict:
                raise
            problems.append(str(exc))
            parts = line.split()
            if len(parts) >= 3:
                bad_names.add(parts[2])
            continue
        if name in seen:
            msg = f"{path}:{line_no}: device {name} listed twice; keeping the first line"
            if strict:
                raise InputFormatError(path, line_no, f"device {name} listed twice")
            problems.append(msg)
            continue
        seen.add(name)
        if n < len(line.split()) - 3 < N_FIELDS:
            partial.append(name)
        names.append(name)
        majors.append(major)
        minors.append(minor)
        rows.append(vals)
        nfields.append(n)
    count = len(names)
    values = np.array(rows, dtype=np.int64).reshape(count, N_FIELDS)
    nf = np.array(nfields, dtype=np.int64)
    present = np.zeros((count, N_FIELDS), dtype=np.bool_)
    old = nf == 4
    if count:
        cols = np.arange(N_FIELDS)
        present[:] = cols[None, :] < nf[:, None]
        present[old] = False
        for pos in OLD_PARTITION_MAP:
            present[old, pos] = True
    return DiskstatsSnapshot(names, np.array(majors, dtype=np.int64),
                             np.array(minors, dtype=np.int64), values, present, old, problems,
                             bad_names, [partial_layout_note(partial)] if partial else [])


def read_diskstats(procfs_root: str | Path = "/proc", *, strict: bool = False
                   ) -> DiskstatsSnapshot:
    """Read and parse ``<procfs_root>/diskstats``. OSError propagates to the caller."""
    path = Path(procfs_root) / "diskstats"
    text = path.read_text(encoding="ascii", errors="replace")
    return parse_text(text.splitlines(), path=str(path), strict=strict)
