"""Fixed-width device and avg-cpu lines -> numbers and device names, in numpy or by the
native kernels (:mod:`.native`), exactly as ``strtod`` reads them."""

from __future__ import annotations

import numpy as np
import polars as pl

from iogauge.importers.iostat import native
from iogauge.importers.iostat.lines import Lines

#: Lines decoded per block by the fixed-width reader (a block of character columns stays
#: in the CPU cache while it is transposed and read).
_DECODE_BLOCK = 8192


#: Multiplier of the device-name hash (:func:`device_names`): 2^64 / golden ratio, odd, so
#: that the 8-byte words it mixes spread over all 64 bits.
_NAME_HASH = np.uint64(0x9E3779B97F4A7C15)


def decode_fixed(mat: np.ndarray, fields: list[tuple[int, int]]
                  ) -> tuple[list[np.ndarray], np.ndarray]:
    """Numbers at fixed byte ranges of the rows of ``mat`` (equal-length lines), as
    ``strtod`` reads them.

    Each range must hold spaces, then digits, then — at the same place as in the first
    line — a '.' and digits (sysstat's right-aligned ``" %*.2f"``). The digits are read as
    one integer (exact) and divided by the power of ten of the decimals (one correctly
    rounded division: the same double as parsing the text). Lines shaped otherwise (a sign,
    nan, a human suffix, a decimal comma) are flagged, not read: the caller parses them on
    the regex path.

    Vectorised with numpy over blocks of lines transposed to one row per character column,
    so that every test is one pass over the block: character classes, the dot, the
    digits' places, no space after a digit. The digits of each range are gathered
    right-aligned into groups of eight (a space counts as a leading zero) and combined
    pairwise — 10 x digit + digit in uint8, 100 x pair + pair in uint16, 10,000 x quad +
    quad in uint32 — so a value costs three operations, not two per digit. A value of more
    than 15 digits (never printed by sysstat) is left to the regex path, as its digits may
    not fit a double exactly.

    Returns the values per range and a per-line ``ok`` mask.
    """
    k = mat.shape[0]
    n_fields = len(fields)
    a0, b0 = fields[0][0], fields[-1][1]
    span = b0 - a0
    dots = []
    for a, b in fields:
        d = bytes(mat[0, a:b]).rfind(b".") if k else -1
        dots.append(a + d if d >= 0 else b)
    if k == 0 or any(d <= a for (a, _b), d in zip(fields, dots, strict=True)):
        # no digit before a dot: nothing is read here (the regex path reads or refuses)
        return [np.zeros(k) for _ in fields], np.zeros(k, dtype=bool)
    digits = [[c - a0 for c in range(a, b) if c != d]
              for (a, b), d in zip(fields, dots, strict=True)]
    groups = -(-max(len(p) for p in digits) // 8)
    slots = 8 * groups
    sel = np.full((n_fields, slots), span, dtype=np.intp)  # row ``span`` is all zeros
    need_digit = np.zeros(span, dtype=bool)  # the decimals and the digit before the dot
    dot_rows: list[int] = []
    inner = np.zeros(span, dtype=bool)  # not the first byte of a range
    in_range = np.zeros(span, dtype=bool)  # columns between ranges are not read
    scale = np.empty((n_fields, 1))
    for j, ((a, b), d) in enumerate(zip(fields, dots, strict=True)):
        sel[j, slots - len(digits[j]):] = digits[j]
        need_digit[d - a0 - 1] = True
        if d < b:
            dot_rows.append(d - a0)
            need_digit[d - a0 + 1:b - a0] = True
        inner[a - a0 + 1:b - a0] = True
        in_range[a - a0:b - a0] = True
        scale[j] = float(10 ** max(b - d - 1, 0))
    sel_flat = sel.ravel()
    need = np.flatnonzero(need_digit)
    after = np.flatnonzero(inner[1:])  # (c - 1, c) pairs inside a range
    gaps = None if in_range.all() else np.flatnonzero(~in_range)
    ok = np.ones(k, dtype=bool)
    out = np.empty((n_fields, k), dtype=np.float64)
    block = np.zeros((span + 1, min(k, _DECODE_BLOCK)), dtype=np.uint8)
    for r0 in range(0, k, _DECODE_BLOCK):
        r1 = min(k, r0 + _DECODE_BLOCK)
        cols = block[:, :r1 - r0]
        body = cols[:span]
        body[...] = mat[r0:r1, a0:b0].T
        sp = body == 32
        dg = (body - 48) < 10  # uint8 arithmetic: below '0' wraps high
        good = sp | dg
        if dot_rows:
            good[dot_rows] = body[dot_rows] == 46
        if gaps is not None:
            good[gaps] = True
        okb = good.all(axis=0)
        okb &= dg[need].all(axis=0)
        okb &= ~(sp[1:][after] & ~sp[:-1][after]).any(axis=0)  # no space after a digit
        g = cols[sel_flat] & np.uint8(15)  # a digit's value; a space (and a pad) is 0
        pairs = g[0::2] * np.uint8(10) + g[1::2]
        quads = pairs[0::2].astype(np.uint16) * np.uint16(100) + pairs[1::2]
        eights = quads[0::2].astype(np.uint32) * np.uint32(10_000) + quads[1::2]
        if groups == 1:
            np.divide(eights, scale, out=out[:, r0:r1])
        else:  # more than 8 digits: exact in int64, then one division as above
            parts = eights.reshape(n_fields, groups, r1 - r0).astype(np.int64)
            whole = parts[:, -2] * 100_000_000 + parts[:, -1]
            # beyond 2**53 the integer is not a double: the regex path parses such a line
            okb &= ((whole < 2**53) & (parts[:, :-2] == 0).all(axis=1)).all(axis=0)
            np.divide(whole, scale, out=out[:, r0:r1])
        ok[r0:r1] = okb
    return list(out), ok


def decode_lines(lines: Lines, idx: np.ndarray, line_len: int,
                  fields: list[tuple[int, int]]) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`decode_fixed` of the lines ``idx`` (each ``line_len`` bytes long): by the
    native kernel ``ig_decode_fixed`` when it is built, else by numpy."""
    kern = native.kernels()
    if kern is None:
        return decode_fixed(lines.matrix(idx, line_len), fields)
    k = idx.size
    dots = []
    if k:
        s0 = int(lines.starts[idx[0]])
        for a, b in fields:
            d = lines.buf.rfind(b".", s0 + a, s0 + b)
            dots.append(d - s0 if d >= 0 else b)
    if k == 0 or any(d <= a for (a, _b), d in zip(fields, dots, strict=True)):
        return [np.zeros(k) for _ in fields], np.zeros(k, dtype=bool)
    out, ok = kern.decode_fixed(lines.arr, lines.starts[idx], fields, dots)
    return list(out), ok


def line_names(lines: Lines, idx: np.ndarray, line_len: int, width: int
                ) -> tuple[pl.Series, np.ndarray]:
    """:func:`device_names` of the lines ``idx`` (each ``line_len`` bytes long): grouped
    by the native kernel ``ig_group_names`` when it is built, else by numpy."""
    grouped = name_groups(lines, idx, width)
    if grouped is None:
        return device_names(lines.matrix(idx, line_len), width)
    names, valid, code = grouped
    device = pl.Series("device", names, dtype=pl.String).gather(pl.Series("code", code))
    return device, np.array(valid, dtype=bool)[code]


def name_groups(lines: Lines, idx: np.ndarray, width: int
                 ) -> tuple[list[str], list[bool], np.ndarray] | None:
    """The distinct name fields (the first ``width`` bytes) of the lines ``idx``, trailing
    spaces stripped, whether each is a name (not empty, no space inside, UTF-8), and the
    group of each line (uint32): by the native kernel ``ig_group_names``; None without it
    (or beyond its number of groups)."""
    kern = native.kernels()
    grouped = None if kern is None else kern.group_names(lines.arr, lines.starts[idx], width)
    if grouped is None:
        return None
    code, first = grouped
    buf = lines.buf
    names: list[str] = []
    valid: list[bool] = []
    for s in lines.starts[idx[first]].tolist():
        try:
            name = buf[s:s + width].rstrip(b" ").decode("utf-8")
        except UnicodeDecodeError:
            name = ""
        names.append(name)
        valid.append(bool(name) and " " not in name)
    return names, valid, code


def device_names(mat: np.ndarray, width: int) -> tuple[pl.Series, np.ndarray]:
    """Device names from the name field (``%-13s``: the first ``width`` bytes) of the
    fixed-width lines ``mat`` (C-contiguous): trailing spaces stripped; and whether each is
    a name (not empty, no space inside, UTF-8).

    The same few names repeat in every report, so each distinct field is decoded once. A
    field is two overlapping 8-byte words (bytes 0-7 and width-8 .. width-1, read in place),
    which together are the field; rows are grouped by a hash of the pair (hash grouping in
    polars), and the grouping is checked word for word, so a hash collision cannot merge
    two names (it falls back to grouping by the bytes themselves).
    """
    k, stride = mat.shape
    lo = np.ndarray((k,), dtype="<u8", buffer=mat, offset=0, strides=(stride,)).copy()
    hi = np.ndarray((k,), dtype="<u8", buffer=mat, offset=width - 8, strides=(stride,)).copy()
    hashed = lo * _NAME_HASH
    hashed ^= hi
    first = np.flatnonzero(pl.Series("h", hashed).is_first_distinct().to_numpy())
    first = first[np.argsort(hashed[first])]
    inv = np.searchsorted(hashed[first], hashed)
    if not (np.array_equal(lo, lo[first][inv]) and np.array_equal(hi, hi[first][inv])):
        _, first, inv = np.unique(mat[:, :width], axis=0, return_index=True,
                                  return_inverse=True)
        inv = inv.ravel()
    names: list[str] = []
    valid: list[bool] = []
    for r in first.tolist():
        try:
            name = bytes(mat[r, :width]).rstrip(b" ").decode("utf-8")
        except UnicodeDecodeError:
            name = ""
        names.append(name)
        valid.append(bool(name) and " " not in name)
    device = pl.Series("device", names, dtype=pl.String).gather(
        pl.Series("inv", inv.astype(np.uint32, copy=False)))
    return device, np.array(valid, dtype=bool)[inv]
