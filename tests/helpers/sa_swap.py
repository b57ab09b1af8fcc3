"""A byte-order swapper for sysstat sa files of format 0x2175 (sysstat 11.7.1+), written
for iogauge's tests from the layout sa.h documents [sysstat]: it turns a file written on a
little-endian machine into the file a big-endian machine of the same word size would have
written, and back.

Every 0x2175 structure declares itself as counts of 8-byte values, C longs (in 8-byte
slots) and 4-byte values, in that order, followed by bytes (characters): so each structure
is swapped by its declared counts and nothing else is assumed. Deliberately independent of
``iogauge.importers.sa`` (a mistake shared by the reader and the swapper would cancel out).
"""

from __future__ import annotations

import struct

_FILE_MAGIC_SIZE = 76
_EXTRA_DESC = 24


def _swap(buf: bytearray, at: int, width: int, count: int) -> int:
    for k in range(count):
        p = at + k * width
        buf[p:p + width] = buf[p:p + width][::-1]
    return at + width * count


def _swap_struct(buf: bytearray, at: int, types: tuple[int, int, int], long_size: int) -> None:
    n_ll, n_l, n_i = types
    at = _swap(buf, at, 8, n_ll)
    for k in range(n_l):  # (a long sits in an 8-byte slot; a 4-byte long at its start)
        _swap(buf, at + 8 * k, long_size, 1)
    _swap(buf, at + 8 * n_l, 4, n_i)


def _u32(buf: bytes | bytearray, at: int, order: str) -> int:
    return int(struct.unpack_from(order + "I", buf, at)[0])


def swap_sa(data: bytes) -> bytes:
    """``data`` (an 0x2175 sa file in either order) in the other byte order."""
    return _walk(data)[0]


def record_offsets(data: bytes) -> list[int]:
    """Where each record of an 0x2175 file starts, and where the last one ends."""
    return _walk(data)[1]


def _walk(data: bytes) -> tuple[bytes, list[int]]:
    out = bytearray(data)
    order = "<" if data[:2] == b"\x96\xd5" else ">"
    if struct.unpack_from(order + "H", data, 2)[0] != 0x2175:
        raise ValueError("only format 0x2175 files are swapped")
    header_size = _u32(data, 8, order)
    hdr_types = tuple(_u32(data, 16 + 4 * i, order) for i in range(3))
    _swap(out, 0, 2, 2)
    _swap(out, 8, 4, 5)  # header_size, upgraded, hdr_types_nr[3]
    h = _FILE_MAGIC_SIZE
    ints = h + 8 * (hdr_types[0] + hdr_types[1])
    chars = ints + 4 * hdr_types[2]
    long_size = data[chars + 2]
    act_nr, act_size, rec_size = (_u32(data, ints + 4 * i, order) for i in (1, 9, 10))
    rec_types = tuple(_u32(data, ints + 24 + 4 * i, order) for i in range(3))
    extra_next = _u32(data, ints + 44, order) if hdr_types[2] >= 12 else 0
    _swap_struct(out, h, hdr_types, long_size)  # type: ignore[arg-type]
    at = h + header_size
    acts = []
    for k in range(act_nr):
        e = at + k * act_size
        vals = [_u32(data, e + 4 * i, order) for i in range(9)]
        acts.append((vals[3], vals[4], vals[5], (vals[6], vals[7], vals[8]), vals[2]))
        _swap(out, e, 4, 9)
    at += act_nr * act_size
    if extra_next:
        at = _extras(data, out, at, order)
    starts = [at]
    while at + rec_size <= len(data):
        at = _record(data, out, at, order, rec_size, rec_types, acts, long_size)  # type: ignore[arg-type]
        starts.append(at)
    return bytes(out), starts


def _extras(data: bytes, out: bytearray, at: int, order: str) -> int:
    while True:
        nr, size, more = (_u32(data, at + 4 * i, order) for i in range(3))
        types = tuple(_u32(data, at + 12 + 4 * i, order) for i in range(3))
        _swap(out, at, 4, 6)
        at += _EXTRA_DESC
        for _ in range(nr):
            _swap_struct(out, at, types, 8)  # type: ignore[arg-type]
            at += size
        if not more:
            return at


def _record(data: bytes, out: bytearray, at: int, order: str, rec_size: int,
            rec_types: tuple[int, int, int],
            acts: list[tuple[int, int, int, tuple[int, int, int], int]], long_size: int) -> int:
    n_ll, n_l, n_i = rec_types
    extra = _u32(data, at + 8 * (n_ll + n_l), order) if n_i else 0
    rtype = data[at + 8 * (n_ll + n_l) + 4 * n_i]
    _swap_struct(out, at, rec_types, long_size)
    at += rec_size
    if rtype == 4:  # COMMENT: 64 characters
        at += 64
    elif rtype == 2:  # RESTART: the CPU count
        _swap(out, at, 4, 1)
        at += 4
    elif rtype in (1, 3):
        if extra:
            at, extra = _extras(data, out, at, order), 0
        for nr2, has_nr, size, types, nr in acts:
            count = nr
            if has_nr:
                count = _u32(data, at, order)
                _swap(out, at, 4, 1)
                at += 4
            for _ in range(count * nr2):
                _swap_struct(out, at, types, long_size)
                at += size
    if extra:
        at = _extras(data, out, at, order)
    return at
