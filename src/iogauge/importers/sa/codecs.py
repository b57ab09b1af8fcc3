"""Decoding of the two activities iogauge reads: ``stats_disk`` (A_DISK) and ``stats_cpu``
(A_CPU), by layout generation and activity magic ([sysstat] rd_stats.h, sa_conv.h).

* disk 0x8a (0x2171 files, sysstat 9.x-10.2): sectors as 64-bit values 16-aligned, ticks
  and ``nr_ios`` as C longs 8-aligned, then major and minor;
* disk 0x8b (0x2173 files, 10.3.1-11.6): ``nr_ios`` 64-bit, sectors as C longs, ticks,
  major and minor as 32-bit values;
* 0x2175 files (11.7.1+): read by the activity's own value counts: its 64-bit values are
  ``nr_ios`` (then 12.x's WWN), its longs the read, write (and 12.x discard) sectors, its
  32-bit values the read, write, busy and queue ticks, major, minor (and 12.x discard
  ticks): so sadf itself maps a layout of another minor version (sa_common.c remap_struct).
* CPU: ten 64-bit counters (user, nice, sys, idle, iowait, steal, hardirq, softirq,
  guest, guest_nice), 16-aligned before 0x2175; item 0 is CPU "all".

Kernel tick counters are 32-bit in sysstat (``unsigned int``), so their differences wrap
as sysstat's do; read from a C long they are cut to 32 bits as sadf -c does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from iogauge.errors import BinaryFormatError
from iogauge.importers.sa.layout import MAGIC_BASE, Activity, Buffer, Layout

#: The disk counters of one record, one value per device (native byte order).
DISK_FIELDS_64 = ("nr_ios", "rd_sect", "wr_sect", "dc_sect")
DISK_FIELDS_32 = ("rd_ticks", "wr_ticks", "dc_ticks", "tot_ticks", "rq_ticks", "major",
                  "minor")
CPU_FIELDS = ("user", "nice", "sys", "idle", "iowait", "steal", "hardirq", "softirq",
              "guest", "guest_nice")


@dataclass(frozen=True)
class DiskCounters:
    """One record's disks: uint64 ``nr_ios``, ``rd_sect``, ``wr_sect``, ``dc_sect`` and
    uint32 ticks, ``major``, ``minor``; ``discards`` False when the layout has none."""

    cols: dict[str, np.ndarray]
    discards: bool

    def __len__(self) -> int:
        return len(self.cols["major"])


DiskCodec = Callable[[Buffer, int, int], DiskCounters]
CpuCodec = Callable[[Buffer, int, int], np.ndarray]


def _long(layout: Layout) -> str:
    return "u8" if layout.sizeof_long == 8 else "u4"


def _disk_fields(layout: Layout, act: Activity, path: str
                 ) -> dict[str, tuple[str, int]]:
    """field -> (numpy base type, offset in an item)."""
    lng = _long(layout)
    if act.types is not None:  # (0x2175: the activity describes its layout)
        n_ll, n_l, n_i = act.types
        if n_ll < 1 or n_l < 2 or n_i < 6:
            raise BinaryFormatError(path, act.offset, f"disk activity layout {act.types} "
                                    "lacks the counters sar -d needs (1, 2, 6 at least)")
        ul = 8 * n_ll
        ui = ul + 8 * n_l
        fields = {"nr_ios": ("u8", 0), "rd_sect": (lng, ul), "wr_sect": (lng, ul + 8),
                  "rd_ticks": ("u4", ui), "wr_ticks": ("u4", ui + 4),
                  "tot_ticks": ("u4", ui + 8), "rq_ticks": ("u4", ui + 12),
                  "major": ("u4", ui + 16), "minor": ("u4", ui + 20)}
        if n_l >= 3 and n_i >= 7:
            fields |= {"dc_sect": (lng, ul + 16), "dc_ticks": ("u4", ui + 24)}
        need = ui + 4 * n_i
    elif act.magic == MAGIC_BASE:
        fields = {"rd_sect": ("u8", 0), "wr_sect": ("u8", 16), "rd_ticks": (lng, 32),
                  "wr_ticks": (lng, 40), "tot_ticks": (lng, 48), "rq_ticks": (lng, 56),
                  "nr_ios": (lng, 64), "major": ("u4", 72), "minor": ("u4", 76)}
        need = 80
    elif act.magic == MAGIC_BASE + 1:
        fields = {"nr_ios": ("u8", 0), "rd_sect": (lng, 16), "wr_sect": (lng, 24),
                  "rd_ticks": ("u4", 32), "wr_ticks": ("u4", 36), "tot_ticks": ("u4", 40),
                  "rq_ticks": ("u4", 44), "major": ("u4", 48), "minor": ("u4", 52)}
        need = 56
    else:
        raise BinaryFormatError(path, act.offset, f"disk activity magic 0x{act.magic:x} "
                                f"is not one a {layout.generation.writers} file has "
                                "(0x8a, 0x8b)")
    if need > act.size:
        raise BinaryFormatError(path, act.offset, f"disk items of {act.size} bytes are "
                                f"too small for their layout ({need} bytes)")
    return fields


def disk_codec(layout: Layout, act: Activity, path: str) -> DiskCodec:
    """A function (buffer, offset, items) -> :class:`DiskCounters` for this activity."""
    fields = _disk_fields(layout, act, path)
    names = list(fields)
    dtype = np.dtype({"names": names,
                      "formats": [layout.order + fields[n][0] for n in names],
                      "offsets": [fields[n][1] for n in names], "itemsize": act.size})
    discards = "dc_sect" in fields

    def decode(buf: Buffer, pos: int, n: int) -> DiskCounters:
        raw = np.frombuffer(buf, dtype=dtype, count=n, offset=pos)
        used = (raw["major"] != 0) | (raw["minor"] != 0)  # (unused pre-allocated slots)
        if not bool(used.all()):
            raw = raw[used]
        cols: dict[str, np.ndarray] = {}
        for name in DISK_FIELDS_64:
            cols[name] = (raw[name].astype(np.uint64) if name in fields
                          else np.zeros(len(raw), np.uint64))
        for name in DISK_FIELDS_32:
            cols[name] = (raw[name].astype(np.uint64).astype(np.uint32) if name in fields
                          else np.zeros(len(raw), np.uint32))
        return DiskCounters(cols, discards)

    return decode


def cpu_codec(layout: Layout, act: Activity, path: str) -> CpuCodec:
    """A function (buffer, offset, items) -> every CPU's ten counters (item 0: "all";
    counters a layout lacks are 0), as an (items, 10) uint64 array."""
    if act.types is not None:
        offsets = [8 * i for i in range(min(10, act.types[0]))]
    elif act.magic == MAGIC_BASE:
        offsets = [16 * i for i in range(10) if 16 * i + 8 <= act.size]
    else:
        raise BinaryFormatError(path, act.offset, f"CPU activity magic 0x{act.magic:x} is "
                                f"not one a {layout.generation.writers} file has (0x8a)")
    if len(offsets) < 8:  # (user to softirq: what sar -u needs)
        raise BinaryFormatError(path, act.offset, f"CPU items of {act.size} bytes "
                                f"({act.types or 'old layout'}) lack the counters sar -u "
                                "needs")
    dtype = np.dtype({"names": [f"c{i}" for i in range(len(offsets))],
                      "formats": [layout.order + "u8"] * len(offsets),
                      "offsets": offsets, "itemsize": act.size})

    def decode(buf: Buffer, pos: int, n: int) -> np.ndarray:
        raw = np.frombuffer(buf, dtype=dtype, count=n, offset=pos)
        out = np.zeros((n, 10), np.uint64)
        for i in range(len(offsets)):
            out[:, i] = raw[f"c{i}"]
        return out

    return decode
