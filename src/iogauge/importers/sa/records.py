"""The records of an sa file, one after the other: statistics (with the disk and CPU
counters decoded), RESTART and COMMENT records, and where a file cut short ends
([sysstat] sa.h record_header, sa_common.c read_file_stat_bunch, sa_conv.c).

A statistics record is its header, then every activity of the list in order: its item
count first when it has one (``has_nr``, 0x2175), then ``nr x nr2`` items of its declared
size. Activities other than disk and CPU are passed over by those sizes. In 0x2171/0x2173
files the counts are the header's, changed by the activity entries a 0x2173 RESTART record
carries; disk slots with major and minor 0 are unused (sadc pre-allocated them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from iogauge.errors import BinaryFormatError
from iogauge.importers.sa import codecs
from iogauge.importers.sa.layout import (
    A_CPU,
    A_DISK,
    A_IRQ,
    MAGIC_BASE,
    NR_MAX,
    OLD_ACTIVITY_SIZE,
    Activity,
    Buffer,
    Generation,
    Layout,
    skip_extras,
)

#: Record types (sa.h).
R_STATS, R_RESTART, R_LAST_STATS, R_COMMENT = 1, 2, 3, 4
R_EXTRA_MIN, R_EXTRA_MAX = 5, 15
MAX_COMMENT_LEN = 64
#: The last second of the year 9999 (a time stamp past it is damage, not a date).
MAX_EPOCH_S = 253_402_300_799
#: HZ assumed for files that do not store it (before 0x2175), as sadf -c does on Linux.
DEFAULT_HZ = 100


@dataclass(frozen=True)
class Stats:
    """A statistics record: its end time (UTC epoch s), uptime (1/100 s) and counters."""

    offset: int
    ust_time: int
    uptime_cs: int
    disks: codecs.DiskCounters | None
    cpus: np.ndarray | None  # (CPUs + 1, 10) counters in stats_cpu order; row 0: "all"


@dataclass(frozen=True)
class Restart:
    offset: int
    ust_time: int


@dataclass(frozen=True)
class Comment:
    offset: int
    ust_time: int
    text: str


@dataclass(frozen=True)
class Cut:
    """The file ends inside the record that starts at ``offset``."""

    offset: int
    size: int


Event = Stats | Restart | Comment | Cut


class _TruncatedError(Exception):
    """A read ran past the end of the file (the record holding it is incomplete)."""


def iter_records(buf: Buffer, layout: Layout, path: str) -> Iterator[Event]:
    """Every record of the file in order; a last, incomplete one gives :class:`Cut`.
    Anything that cannot be a record raises :class:`BinaryFormatError` at its offset."""
    reader = _Records(buf, layout, path)
    at = layout.data_offset
    while at < len(buf):
        try:
            event, at = reader.record(at)
        except _TruncatedError:
            yield Cut(offset=at, size=len(buf))
            return
        if event is not None:
            yield event


class _Records:
    def __init__(self, buf: Buffer, layout: Layout, path: str) -> None:
        self.buf, self.layout, self.path = buf, layout, path
        self.o = layout.order
        self.nr = {a.offset: a.nr for a in layout.activities}  # (old formats' counts)
        self.disk_codec = {a.offset: codecs.disk_codec(layout, a, path)
                           for a in layout.activities if a.id == A_DISK}
        self.cpu_codec = {a.offset: codecs.cpu_codec(layout, a, path)
                          for a in layout.activities if a.id == A_CPU}

    def take(self, at: int, size: int) -> int:
        if at + size > len(self.buf):
            raise _TruncatedError
        return at + size

    def unpack(self, fmt: str, at: int) -> tuple[int, ...]:
        self.take(at, struct.calcsize(fmt))
        return struct.unpack_from(self.o + fmt, self.buf, at)

    def header(self, at: int) -> tuple[int, int, int, int, int]:
        """(record type, uptime in 1/100 s, UTC epoch s, extra_next, offset after it)."""
        lay = self.layout
        if lay.generation is not Generation.V2175:
            uptime, uptime0 = self.unpack("Q", at)[0], self.unpack("Q", at + 16)[0]
            ust = self.unpack("Q" if lay.sizeof_long == 8 else "I", at + 32)[0]
            rtype = self.unpack("B", at + 40)[0]
            # sadf -c: uptime_cs = uptime0 * 100 / HZ (uptime0: one CPU's jiffies)
            cs = (uptime0 or uptime) * 100 // DEFAULT_HZ
            return rtype, cs, ust, 0, self.take(at, lay.rec_size)
        n_ll, n_l, n_i = lay.rec_types
        cs, ust = self.unpack("QQ", at)
        extra = self.unpack("I", at + 8 * (n_ll + n_l))[0] if n_i else 0
        rtype = self.unpack("B", at + 8 * (n_ll + n_l) + 4 * n_i)[0]
        return rtype, cs, ust, extra, self.take(at, lay.rec_size)

    def record(self, at: int) -> tuple[Event | None, int]:
        rtype, cs, ust, extra, pos = self.header(at)
        if ust > MAX_EPOCH_S:
            raise BinaryFormatError(self.path, at, f"record time {ust} s after 1970 is past "
                                    "the year 9999: the file is damaged here")
        if R_EXTRA_MIN <= rtype <= R_EXTRA_MAX:
            return None, self.extras(pos, extra)
        if rtype == R_COMMENT:
            self.take(pos, MAX_COMMENT_LEN)
            text = bytes(self.buf[pos:pos + MAX_COMMENT_LEN]).split(b"\0", 1)[0]
            end = self.extras(pos + MAX_COMMENT_LEN, extra)
            return Comment(at, ust, text.decode("utf-8", errors="replace")), end
        if rtype == R_RESTART:
            return Restart(at, ust), self.extras(self.restart(pos), extra)
        if rtype not in (R_STATS, R_LAST_STATS):
            raise BinaryFormatError(self.path, at, f"record type {rtype} is not one sysstat "
                                    "writes (1-15): the file is damaged here")
        pos = self.extras(pos, extra)
        disks: codecs.DiskCounters | None = None
        cpu: np.ndarray | None = None
        for act in self.layout.activities:
            count_at = pos
            n_items, pos = self.count(act, pos)
            if n_items * act.size > len(self.buf):  # (damage, not a file cut short)
                raise BinaryFormatError(self.path, count_at if act.has_nr else act.offset,
                                        f"activity {act.id} has {n_items} items of "
                                        f"{act.size} bytes in the record at offset {at}: "
                                        "more than the whole file holds")
            end = self.take(pos, n_items * act.size)
            if act.offset in self.disk_codec:
                disks = self.disk_codec[act.offset](self.buf, pos, n_items)
            elif act.offset in self.cpu_codec and n_items:
                cpu = self.cpu_codec[act.offset](self.buf, pos, n_items)
            pos = end
        return Stats(at, ust, cs, disks, cpu), pos

    def count(self, act: Activity, pos: int) -> tuple[int, int]:
        """(items x sub-items in this record, offset of the first)."""
        if act.has_nr:
            nr = self.unpack("i", pos)[0]
            if not 0 <= nr <= NR_MAX:
                raise BinaryFormatError(self.path, pos, f"activity {act.id} gives {nr} "
                                        f"items in this record (0-{NR_MAX})")
            return nr * act.nr2, pos + 4
        nr = self.nr[act.offset]
        if (self.layout.generation is not Generation.V2175 and act.id == A_IRQ
                and act.magic < MAGIC_BASE + 2):
            return nr, pos  # (sadf reads old interrupt lists as nr items of one CPU)
        return nr * act.nr2, pos

    def restart(self, pos: int) -> int:
        """Past a RESTART record's body: the CPU count (0x2175) or, in 0x2173, the
        activity entries with the item counts after the restart."""
        lay = self.layout
        if lay.generation is Generation.V2175:
            return self.take(pos, 4)
        if lay.generation is Generation.V2171:
            return pos
        by_id = {a.id: a.offset for a in lay.activities}
        for k in range(lay.vol_act_nr):
            entry = pos + k * OLD_ACTIVITY_SIZE
            act_id, _magic, nr = self.unpack("IIi", entry)
            if act_id and nr > 0 and act_id in by_id:
                if nr > NR_MAX:
                    raise BinaryFormatError(self.path, entry, f"activity {act_id} has {nr} "
                                            f"items after the restart (at most {NR_MAX})")
                self.nr[by_id[act_id]] = nr
        return self.take(pos, lay.vol_act_nr * OLD_ACTIVITY_SIZE)

    def extras(self, pos: int, extra_next: int) -> int:
        if not extra_next:
            return pos
        try:
            return skip_extras(self.buf, pos, self.o, self.path)
        except BinaryFormatError as exc:
            if "ends inside" in exc.reason:
                raise _TruncatedError from exc
            raise
