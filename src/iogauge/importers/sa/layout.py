"""The head of a sysstat sa file: ``file_magic``, ``file_header`` and the activity list, for
every format generation sadc has written, in either byte order ([sysstat] sa.h, sa_conv.h).

Generations (``format_magic``):

* 0x2171 -- sysstat 9.1.6 to 10.2.1: an 8-byte ``file_magic`` (two magics, four version
  bytes), a 280-byte ``file_header`` (``sa_ust_time`` as a C long, ``sa_act_nr``, day,
  month, year - 1900, ``sizeof(long)``, four 65-byte utsname strings), 20-byte activity
  entries (id, magic, nr, nr2, size) and 48-byte record headers (uptime and uptime0 in
  jiffies, ``ust_time`` as a C long, type, h, m, s).
* 0x2173 -- sysstat 10.3.1 to 11.6.x: a 76-byte ``file_magic`` that gives the header's
  size; the header adds ``sa_last_cpu_nr`` and ``sa_vol_act_nr`` (activity entries that
  follow each RESTART record with the item counts after the restart). Entries and record
  headers as in 0x2171.
* 0x2175 -- sysstat 11.7.1 to 12.7.x: every structure describes itself as counts of
  64-bit, C-long and 32-bit values (``hdr_types_nr``, ``act_types_nr``, ``rec_types_nr``,
  each activity's ``types_nr``), laid out in that order, so a newer minor layout (12.2
  added ``extra_next`` and ``sa_tzname``) is read from the counts and sizes the file
  declares. Each activity says whether a record gives its item count (``has_nr``).

The byte order is that of ``sysstat_magic`` (0xd596): read as 0x96d5 the file came from a
machine of the other order and every number is read in that order.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from enum import Enum

from iogauge.errors import BinaryFormatError

SYSSTAT_MAGIC = 0xD596
#: Activity ids ([sysstat] sa.h): CPU and disk are decoded, the others skipped by size.
A_CPU = 1
A_IRQ = 3
A_DISK = 11
#: ACTIVITY_MAGIC_BASE: an activity's layout version starts here.
MAGIC_BASE = 0x8A
#: sadf's own sanity limits (sa.h): activities, items, sub-items, sizes.
MAX_ACTIVITIES = 256
NR_MAX = 65536 * 4096
NR2_MAX = 4096
MAX_ITEM_SIZE = 1024
MAX_HEADER_SIZE = 8192
MAX_ACTIVITY_ENTRY_SIZE = 1024
MAX_RECORD_HEADER_SIZE = 512
MAX_EXTRA_NR = 8192
MAX_EXTRA_SIZE = 1024
#: sizeof(struct file_magic) in 0x2173 and 0x2175 files; 0x2171 had only the first 8 bytes.
FILE_MAGIC_SIZE = 76
OLD_MAGIC_SIZE = 8
OLD_HEADER_SIZE = 280
OLD_ACTIVITY_SIZE = 20
OLD_RECORD_SIZE = 48
UTSNAME_LEN = 65
#: sizeof(struct extra_desc): six 32-bit values.
EXTRA_DESC_SIZE = 24


#: What the readers read from: the file's bytes, or the file mapped.
Buffer = bytes | memoryview | mmap.mmap


class Generation(Enum):
    """The file format generations (``format_magic``) this reader knows."""

    V2171 = 0x2171
    V2173 = 0x2173
    V2175 = 0x2175

    @property
    def writers(self) -> str:
        """The sysstat versions that wrote it."""
        return {0x2171: "sysstat 9.1.6-10.2.1", 0x2173: "sysstat 10.3.1-11.6.x",
                0x2175: "sysstat 11.7.1-12.7.x"}[self.value]


@dataclass(frozen=True)
class Activity:
    """One entry of the file's activity list (``struct file_activity``)."""

    id: int
    magic: int
    nr: int
    nr2: int
    size: int
    has_nr: bool
    #: counts of 64-bit, C-long and 32-bit values (0x2175); None in older files
    types: tuple[int, int, int] | None
    offset: int


@dataclass(frozen=True)
class Layout:
    """What the head of a file says about the rest of it."""

    order: str  # "<" or ">"
    generation: Generation
    version: str
    sizeof_long: int
    hz: int | None  # None: not stored (before 0x2175); sadf -c assumes this machine's HZ
    nodename: str
    sysname: str
    release: str
    machine: str
    activities: tuple[Activity, ...]
    vol_act_nr: int  # 0x2173: activity entries after each RESTART record
    rec_size: int
    rec_types: tuple[int, int, int]  # 0x2175 record header layout
    data_offset: int

    @property
    def big_endian(self) -> bool:
        return self.order == ">"


class _Reader:
    """Bounds-checked reads of numbers in the file's byte order; running past the end of
    the head is an error at that offset (a head cut short is not a file)."""

    def __init__(self, buf: Buffer, path: str, order: str) -> None:
        self.buf, self.path, self.order = buf, path, order

    def need(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or offset + size > len(self.buf):
            raise BinaryFormatError(self.path, offset, f"the file ends inside its {what} "
                                    f"({len(self.buf)} bytes; {offset + size} needed)")

    def u(self, fmt: str, offset: int, what: str) -> int:
        self.need(offset, struct.calcsize(fmt), what)
        return int(struct.unpack_from(self.order + fmt, self.buf, offset)[0])

    def ulong(self, offset: int, sizeof_long: int, what: str) -> int:
        return self.u("Q" if sizeof_long == 8 else "I", offset, what)

    def text(self, offset: int, size: int, what: str) -> str:
        self.need(offset, size, what)
        raw = bytes(self.buf[offset:offset + size]).split(b"\0", 1)[0]
        return raw.decode("utf-8", errors="replace")


def byte_order(head: bytes) -> str | None:
    """``<`` or ``>`` from ``sysstat_magic``, None when the head is not an sa file."""
    if head[:2] == b"\x96\xd5":
        return "<"
    if head[:2] == b"\xd5\x96":
        return ">"
    return None


def read_layout(buf: Buffer, path: str) -> Layout:
    """The head of an sa file; :class:`BinaryFormatError` at the offset of what is wrong."""
    order = byte_order(bytes(buf[:2]))
    if order is None:
        raise BinaryFormatError(path, 0, "not a sysstat sa file (no magic 0xd596)")
    r = _Reader(buf, path, order)
    magic = r.u("H", 2, "file magic")
    try:
        generation = Generation(magic)
    except ValueError:
        raise BinaryFormatError(path, 2, f"sa format 0x{magic:04x} is not one this reader "
                                "knows (0x2171, 0x2173, 0x2175: sysstat 9.1.6 to 12.7.x); "
                                "a newer sysstat's sadf may read it (--format sa-sadf)"
                                ) from None
    r.need(4, 4, "file magic")
    version = ".".join(str(b) for b in bytes(buf[4:7]))
    if generation is Generation.V2175:
        return _head_2175(r, generation, version)
    return _head_old(r, generation, version)


def _strings(r: _Reader, at: int) -> tuple[str, str, str, str]:
    sysname, nodename, release, machine = (
        r.text(at + i * UTSNAME_LEN, UTSNAME_LEN, "file header") for i in range(4))
    return sysname, nodename, release, machine


def _head_old(r: _Reader, generation: Generation, version: str) -> Layout:
    """0x2171 / 0x2173: fixed C layouts (sa_conv.h file_header_2171/2173)."""
    if generation is Generation.V2171:
        start, size = OLD_MAGIC_SIZE, OLD_HEADER_SIZE
        act_nr_at, vol_at, tail_at = 8, None, 12
    else:
        start = FILE_MAGIC_SIZE
        size = r.u("I", 8, "file magic")
        act_nr_at, vol_at, tail_at = 12, 16, 20
        if not 284 <= size <= MAX_HEADER_SIZE:
            raise BinaryFormatError(r.path, 8, f"header size {size} is not that of a "
                                    "0x2173 file header (284-8192 bytes)")
    r.need(start, size, "file header")
    sizeof_long = r.u("B", start + tail_at + 3, "file header")
    if sizeof_long not in (4, 8):
        raise BinaryFormatError(r.path, start + tail_at + 3,
                                f"sizeof(long) {sizeof_long} is neither 4 nor 8")
    act_nr = r.u("I", start + act_nr_at, "file header")
    vol_act_nr = r.u("I", start + vol_at, "file header") if vol_at is not None else 0
    sysname, nodename, release, machine = _strings(r, start + tail_at + 4)
    activities = _activities(r, start + size, act_nr, OLD_ACTIVITY_SIZE, start + act_nr_at,
                             old=True)
    if vol_act_nr > MAX_ACTIVITIES:
        raise BinaryFormatError(r.path, start + vol_at if vol_at else 0,
                                f"{vol_act_nr} volatile activities (at most "
                                f"{MAX_ACTIVITIES})")
    return Layout(order=r.order, generation=generation, version=version,
                  sizeof_long=sizeof_long, hz=None, nodename=nodename, sysname=sysname,
                  release=release, machine=machine, activities=activities,
                  vol_act_nr=vol_act_nr, rec_size=OLD_RECORD_SIZE, rec_types=(2, 1, 0),
                  data_offset=start + size + act_nr * OLD_ACTIVITY_SIZE)


def _types(r: _Reader, at: int, what: str) -> tuple[int, int, int]:
    a, b, c = (r.u("I", at + 4 * i, what) for i in range(3))
    if max(a, b, c) > 1024:
        raise BinaryFormatError(r.path, at, f"{what} describes {a}, {b} and {c} values "
                                "of 8, long and 4 bytes: not a real structure")
    return a, b, c


def _head_2175(r: _Reader, generation: Generation, version: str) -> Layout:
    """0x2175: the header read by the value counts it declares (``hdr_types_nr``)."""
    size = r.u("I", 8, "file magic")
    n_ll, n_l, n_i = _types(r, 16, "file magic's hdr_types_nr")
    start = FILE_MAGIC_SIZE
    if not 0 < size <= MAX_HEADER_SIZE:
        raise BinaryFormatError(r.path, 8, f"header size {size} is out of range "
                                f"(1-{MAX_HEADER_SIZE})")
    chars = 8 * n_ll + 8 * n_l + 4 * n_i  # (a C long field is 8-aligned in these layouts)
    if n_ll < 1 or n_l < 1 or n_i < 11 or chars + 3 + 2 * UTSNAME_LEN > size:
        raise BinaryFormatError(r.path, 16, f"the file header's layout ({n_ll}, {n_l}, "
                                f"{n_i} values in {size} bytes) lacks fields every "
                                "0x2175 header has")
    r.need(start, size, "file header")
    ints = [r.u("I", start + 8 * (n_ll + n_l) + 4 * i, "file header") for i in range(12)]
    act_nr, act_size, rec_size = ints[1], ints[9], ints[10]
    extra_next = ints[11] if n_i >= 12 else 0
    sizeof_long = r.u("B", start + chars + 2, "file header")
    if sizeof_long not in (4, 8):
        raise BinaryFormatError(r.path, start + chars + 2,
                                f"sizeof(long) {sizeof_long} is neither 4 nor 8")
    hz = r.ulong(start + 8 * n_ll, sizeof_long, "file header")
    rec_types = _types(r, start + 8 * (n_ll + n_l) + 24, "file header's rec_types_nr")
    rec_min = 8 * rec_types[0] + 8 * rec_types[1] + 4 * rec_types[2] + 4
    if rec_types[0] < 2 or not rec_min <= rec_size <= MAX_RECORD_HEADER_SIZE:
        raise BinaryFormatError(r.path, start + 8 * (n_ll + n_l) + 40,
                                f"record header size {rec_size} does not fit its layout "
                                f"{rec_types} (at most {MAX_RECORD_HEADER_SIZE} bytes)")
    if not 36 <= act_size <= MAX_ACTIVITY_ENTRY_SIZE:
        raise BinaryFormatError(r.path, start + 8 * (n_ll + n_l) + 36,
                                f"activity entry size {act_size} is out of range "
                                f"(36-{MAX_ACTIVITY_ENTRY_SIZE})")
    sysname, nodename, release, machine = _strings(r, start + chars + 3)
    at = start + size
    activities = _activities(r, at, act_nr, act_size, start + 8 * (n_ll + n_l) + 4,
                             old=False)
    data = at + act_nr * act_size
    if extra_next:
        data = skip_extras(r.buf, data, r.order, r.path)
    return Layout(order=r.order, generation=generation, version=version,
                  sizeof_long=sizeof_long, hz=hz, nodename=nodename, sysname=sysname,
                  release=release, machine=machine, activities=activities, vol_act_nr=0,
                  rec_size=rec_size, rec_types=rec_types, data_offset=data)


def _activities(r: _Reader, at: int, count: int, entry: int, count_at: int, *,
                old: bool) -> tuple[Activity, ...]:
    if count > MAX_ACTIVITIES:
        raise BinaryFormatError(r.path, count_at, f"{count} activities declared (at most "
                                f"{MAX_ACTIVITIES})")
    r.need(at, count * entry, "activity list")
    out = []
    for k in range(count):
        off = at + k * entry
        vals = [r.u("i" if i in (2, 3) else "I", off + 4 * i, "activity list")
                for i in range(5 if old else 9)]
        if old:
            act_id, magic, nr, nr2, size = vals
            has_nr, types = False, None
        else:
            act_id, magic, nr, nr2, has_nr_v, size = vals[:6]
            has_nr, types = bool(has_nr_v), (vals[6], vals[7], vals[8])
        if not (1 <= nr <= NR_MAX and 1 <= nr2 <= NR2_MAX and 0 < size <= MAX_ITEM_SIZE):
            raise BinaryFormatError(r.path, off, f"activity {act_id} declares {nr} x {nr2} "
                                    f"items of {size} bytes, outside sadf's limits")
        if types is not None and 8 * types[0] + 4 * types[1] + 4 * types[2] > size:
            raise BinaryFormatError(r.path, off, f"activity {act_id}'s layout {types} does "
                                    f"not fit its {size}-byte items")
        out.append(Activity(id=act_id, magic=magic, nr=nr, nr2=nr2, size=size,
                            has_nr=has_nr, types=types, offset=off))
    return tuple(out)


def skip_extras(buf: Buffer, at: int, order: str, path: str) -> int:
    """The offset after a chain of ``extra_desc`` structures and the extra structures they
    announce (0x2175, sysstat 12.2+): no sysstat version writes any yet, and sadf skips
    them; so does this reader."""
    r = _Reader(buf, path, order)
    while True:
        nr, size, more = (r.u("I", at + 4 * i, "extra structure list") for i in range(3))
        if nr > MAX_EXTRA_NR or size > MAX_EXTRA_SIZE:
            raise BinaryFormatError(path, at, f"{nr} extra structures of {size} bytes "
                                    "announced: outside sadf's limits")
        at += EXTRA_DESC_SIZE + nr * size
        r.need(at, 0, "extra structures")
        if not more:
            return at
