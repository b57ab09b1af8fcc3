"""The lines of a piece of ``iostat`` text as byte offsets, and the kind of each line.

A piece stays bytes: its lines are byte offsets found with numpy (:class:`Lines`),
classified by their first byte, with exact tests only on the few lines that can be banners,
stamps, avg-cpu blocks or headers; strings are made only for those. The byte-level passes run
in C when ``kernels.c`` is built (:mod:`.native`); the numpy routines here are its reference.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.lib.stride_tricks import as_strided

from iogauge.importers import timestamps as tsx
from iogauge.importers.io import decode
from iogauge.importers.iostat import native

# ---- line kinds ----------------------------------------------------------------------------
# (the candidates are the native first pass's: kernels.c has the same numbers)
BLANK, BANNER, TS, CPUH, CPUV, DEVH, ROW, BANNER_CAND, TS_CAND, WS_CAND = range(10)
STRUCTURAL = (BANNER, TS, CPUH, CPUV, DEVH)

# sysstat 8.1.x and later end the banner with "_arch_ (N CPU)"; sysstat 5.x-8.0 print only
# "Linux REL (host) <TAB>date" ([Insight-SSD9]'s captures, sysstat 5.0.5 on RHEL 4).
BANNER_RE = (r"^Linux\s+(?P<kernel>\S+)\s+\((?P<host>[^)]*)\)\s+(?P<date>\S.*?)"
             r"(?:\s+_(?P<arch>\S+)_\s+\((?P<ncpu>\d+)\s+CPU\))?\s*$")


def utf8(buf: bytes | bytearray) -> bytes | bytearray:
    """``buf`` as UTF-8 text: a piece that is not (a Latin-1 host name, an EUC-JP time stamp,
    a byte-order mark) is decoded as :func:`.io.decode` reads it and encoded once."""
    if buf.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) or \
            (len(buf) >= 4 and buf[1:2] == b"\x00" and buf[3:4] == b"\x00"):
        return decode(bytes(buf)).encode("utf-8")
    if buf.isascii():
        return buf
    try:
        buf.decode("utf-8")
    except UnicodeDecodeError:
        return decode(bytes(buf)).encode("utf-8")
    return buf


class Lines:
    """The lines of a piece as byte offsets into it: no object per line.

    A line ends before its ``\\n``; one ``\\r`` before it (CRLF) is not part of the line,
    and a last line without a newline is a line. Strings are made only for the lines that
    need them (:meth:`text`); fixed-width lines are read as rows of a byte matrix
    (:meth:`matrix`).

    Attributes:
        buf: the piece (UTF-8).
        arr: ``buf`` as a uint8 array (no copy).
        starts, ends: byte offset of each line's first byte and just past its last.
        lens: length in bytes of each line.
        n: number of lines.
    """

    def __init__(self, buf: bytes | bytearray) -> None:
        self.buf = buf
        self.arr = np.frombuffer(buf, dtype=np.uint8)
        kern = native.kernels()
        if kern is not None:
            self.starts, self.ends = kern.lines(buf, self.arr)
            self.n = int(self.starts.size)
            self.lens = self.ends - self.starts
            return
        nl = np.flatnonzero(self.arr == 10)
        ends = nl if not buf or buf.endswith(b"\n") else np.append(nl, len(buf))
        self.n = int(ends.size)
        starts = np.zeros(self.n, dtype=np.int64)
        if self.n > 1:
            starts[1:] = nl[:self.n - 1] + 1
        if self.n:
            cr = (ends > starts) & (self.arr[np.maximum(ends - 1, 0)] == 13)
            ends = ends - cr
        self.starts = starts
        self.ends = ends.astype(np.int64, copy=False)
        self.lens = self.ends - self.starts

    def text(self, idx: np.ndarray) -> pl.Series:
        """The lines ``idx`` as strings (with the native kernels: copied one after another
        by C, then cut by ``bytes.split``, faster than slicing each line)."""
        kern = native.kernels()
        if kern is not None and idx.size > 64:
            joined = kern.gather_lines(self.arr, self.starts, self.ends, idx)
            return pl.Series("line", joined.split(b"\n")[:-1], dtype=pl.Binary).cast(pl.String)
        buf = self.buf
        parts = [bytes(buf[s:e]) for s, e in zip(self.starts[idx].tolist(),
                                                 self.ends[idx].tolist(), strict=True)]
        return pl.Series("line", parts, dtype=pl.Binary).cast(pl.String)

    def matrix(self, idx: np.ndarray, width: int) -> np.ndarray:
        """Lines ``idx``, each exactly ``width`` bytes long, as a (len(idx), width) array."""
        view = as_strided(self.arr, shape=(self.arr.size - width + 1, width),
                          strides=(1, 1), writeable=False)
        out: np.ndarray = view[self.starts[idx]]
        return out

    def has_prefix(self, idx: np.ndarray, prefix: bytes) -> np.ndarray:
        """Whether each line of ``idx`` starts with ``prefix``."""
        ok: np.ndarray = self.lens[idx] >= len(prefix)
        top = max(self.arr.size - 1, 0)
        at = self.starts[idx]
        for k, byte in enumerate(prefix):
            ok &= self.arr[np.minimum(at + k, top)] == byte
        return ok

    def has_suffix(self, idx: np.ndarray, suffix: bytes) -> np.ndarray:
        """Whether each line of ``idx`` ends with ``suffix``."""
        ok: np.ndarray = self.lens[idx] >= len(suffix)
        top = max(self.arr.size - 1, 0)
        at = self.ends[idx] - len(suffix)
        for k, byte in enumerate(suffix):
            ok &= self.arr[np.clip(at + k, 0, top)] == byte
        return ok


#: First bytes of lines that may be a banner, stamp, avg-cpu block, Device header or blank.
_LOOK = np.zeros(256, dtype=bool)
_LOOK[list(b"LaD \t0123456789")] = True
_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[list(b"0123456789")] = True
#: Last bytes a whitespace-only line can have (regex ``\s`` is Unicode: bytes >= 0x80 too).
_WS_END = np.zeros(256, dtype=bool)
_WS_END[[9, 10, 11, 12, 13, 32, *range(0x80, 0x100)]] = True
STRUCT_KIND = np.zeros(256, dtype=bool)
STRUCT_KIND[list(STRUCTURAL)] = True


def is_stamp(text: pl.Series) -> np.ndarray:
    """Whether each line (starting with a digit) is a -t time stamp."""
    return ((text.str.contains(tsx.NUMERIC_PATTERN) | text.str.contains(tsx.CJK_PATTERN))
            & text.str.contains(r"[:時时시]")).to_numpy()


#: Verdicts of :func:`is_stamp` per line shape (digits read as 0), kept across pieces and
#: files: testing one line costs compiling the patterns (~1 ms), more than the piece's
#: other classification work. Bounded: cleared when it holds :data:`_SHAPES_KEPT`.
_STAMP_SHAPES: dict[str, bool] = {}
_SHAPES_KEPT = 4096
_ZERO_DIGITS = str.maketrans("123456789", "000000000")


def stamp_shapes(text: pl.Series) -> np.ndarray:
    """:func:`is_stamp` of lines of distinct shapes, remembered by shape."""
    shapes = [t.translate(_ZERO_DIGITS) for t in text.to_list()]
    known = {sh: _STAMP_SHAPES.get(sh) for sh in shapes}  # (a dict read once per piece)
    todo = [k for k, sh in enumerate(shapes) if known[sh] is None]
    if todo:
        verdicts = is_stamp(text.gather(todo)).tolist()
        found = {shapes[k]: bool(v) for k, v in zip(todo, verdicts, strict=True)}
        known.update(found)
        if len(_STAMP_SHAPES) + len(found) > _SHAPES_KEPT:
            _STAMP_SHAPES.clear()
        _STAMP_SHAPES.update(found)
    return np.array([known[sh] for sh in shapes], dtype=bool)


def classify(lines: Lines) -> np.ndarray:
    """Kind of every line: the first byte decides for most lines (device lines start with
    a name); exact tests run only on lines whose first byte allows a banner, stamp,
    avg-cpu block, Device header or blank, and strings are made only for the few that need
    a regular expression (banners, stamps, whitespace-only lines).

    With the native kernels, one C pass does every test but the regular expressions
    (``ig_classify``), which then run on its candidates; else :func:`classify_numpy`."""
    kern = native.kernels()
    if kern is None:
        return classify_numpy(lines)
    kind = kern.classify(lines.arr, lines.starts, lines.ends)
    ws = np.flatnonzero(kind == WS_CAND)
    if ws.size:
        blank = lines.text(ws).str.contains(r"^\s*$").to_numpy()
        kind[ws] = np.where(blank, BLANK, ROW)
    digit = np.flatnonzero(kind == TS_CAND)
    if digit.size:
        # The stamp patterns treat every ASCII digit alike (\d, no digit literals): a line
        # is a stamp when its shape's first line is. A piece's thousands of stamps have a
        # handful of shapes.
        shapes = kern.group_shapes(lines.arr, lines.starts, lines.ends, digit)
        if shapes is None:
            kind[digit] = np.where(is_stamp(lines.text(digit)), TS, ROW)
        else:
            code, first = shapes
            stamp = stamp_shapes(lines.text(digit[first]))
            kind[digit] = np.where(stamp[code], TS, ROW)
    el = np.flatnonzero(kind == BANNER_CAND)
    if el.size:
        banner = lines.text(el).str.contains(BANNER_RE).to_numpy()
        # not a banner: what it would be without the "Linux " test (a Device header or not)
        other = np.where(lines.has_suffix(el, b" Device"), DEVH, ROW)
        kind[el] = np.where(banner, BANNER, other)
    _mark_cpu_values(kind, np.flatnonzero(kind == CPUH))
    return kind


def _mark_cpu_values(kind: np.ndarray, cpu_headers: np.ndarray) -> None:
    """The line after an avg-cpu header (unless blank) holds its values."""
    after = cpu_headers + 1
    after = after[after < kind.size]
    kind[after[kind[after] != BLANK]] = CPUV


def classify_numpy(lines: Lines) -> np.ndarray:
    """:func:`classify` in numpy (the reference of ``ig_classify``)."""
    arr, n = lines.arr, lines.n
    kind = np.full(n, ROW, dtype=np.uint8)
    nonempty = np.flatnonzero(lines.lens > 0)
    kind[lines.lens == 0] = BLANK
    first = arr[lines.starts[nonempty]]
    pick = _LOOK[first]
    cand, first = nonempty[pick], first[pick]
    if cand.size == 0:
        return kind
    out = np.full(cand.size, ROW, dtype=np.uint8)
    # lowest priority first: each later test overrides (banner > avg-cpu > Device > stamp >
    # blank > device line)
    ws = np.flatnonzero(((first == 32) | (first == 9)) & _WS_END[arr[lines.ends[cand] - 1]])
    if ws.size:
        blank = lines.text(cand[ws]).str.contains(r"^\s*$").to_numpy()
        out[ws[blank]] = BLANK
    digit = np.flatnonzero(_IS_DIGIT[first])
    if digit.size:
        out[digit[is_stamp(lines.text(cand[digit]))]] = TS
    ends_e = np.flatnonzero(arr[lines.ends[cand] - 1] == ord("e"))
    devh = ends_e[lines.has_suffix(cand[ends_e], b" Device")]
    out[devh] = DEVH
    d = np.flatnonzero(first == ord("D"))
    out[d[lines.has_prefix(cand[d], b"Device")]] = DEVH
    a = np.flatnonzero(first == ord("a"))
    out[a[lines.has_prefix(cand[a], b"avg-cpu")]] = CPUH
    el = np.flatnonzero(first == ord("L"))
    el = el[lines.has_prefix(cand[el], b"Linux ")]
    if el.size:
        banner = lines.text(cand[el]).str.contains(BANNER_RE).to_numpy()
        out[el[banner]] = BANNER
    kind[cand] = out
    _mark_cpu_values(kind, cand[out == CPUH])
    return kind


def frame_of(lines: Lines, idx: np.ndarray) -> pl.DataFrame:
    """Lines ``idx`` as a frame of (``i`` line index, ``line`` text)."""
    return pl.DataFrame({"i": pl.Series("i", idx, dtype=pl.Int64), "line": lines.text(idx)})


def same_lines(lines: Lines, idx: np.ndarray) -> str | None:
    """The text of the lines ``idx`` when they are all the same bytes, else None."""
    width = int(lines.lens[idx[0]])
    if not bool((lines.lens[idx] == width).all()):
        return None
    mat = lines.matrix(idx, width)
    if not bool((mat == mat[0]).all()):
        return None
    text: str = lines.text(idx[:1])[0]
    return text
