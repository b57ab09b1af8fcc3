"""sysstat ``iostat`` text reports -> SampleFrame (format id ``iostat``).

Every generation of sysstat's ``iostat`` is read, with the layout taken from each ``Device``
header rather than from a version guess:

* 5.x-8.x ``-x``: ``Device: rrqm/s wrqm/s r/s w/s rsec/s wsec/s rkB/s wkB/s avgrq-sz
  avgqu-sz await svctm %util`` (sectors and kB both printed: kB is taken), under a banner
  without the ``_arch_ (N CPU)`` that 8.1 added (``Linux REL (host) <TAB>date``).
* 9.x/10.x/11.0-11.5 ``-x``: ``Device: rrqm/s wrqm/s r/s w/s rkB/s wkB/s avgrq-sz avgqu-sz
  await r_await w_await svctm %util`` in sectors (``rsec/s``, the default), kB (``-k``) or MB
  (``-m``). ``avgrq-sz`` is always in 512-byte sectors, whatever the unit option (sysstat
  computes it as sectors per request in ``compute_ext_disk_stats`` and prints it unconverted).
* 11.5.x-12.0 transitional ``-x``: ``r/s w/s rkB/s wkB/s rrqm/s wrqm/s %rrqm %wrqm r_await
  w_await aqu-sz rareq-sz wareq-sz svctm %util`` (request sizes now in kB, no total await).
* 12.x ``-x``: read, write, discard and flush groups (``d/s dkB/s drqm/s %drqm d_await
  dareq-sz f/s f_await``), ``svctm`` gone since 12.1.2; ``-s`` short layout (``tps kB/s rqm/s
  await areq-sz aqu-sz %util``).
* The basic report (no ``-x``): ``tps kB_read/s kB_wrtn/s [kB_dscd/s] kB_read kB_wrtn
  [kB_dscd]`` (``Blk_`` = 512-byte blocks, ``MB_``), and its ``-s`` form (``kB_w+d/s``).
* ``--human`` values (``33.7M``, ``359.1k``, ``4.4%``: sysstat ``cprintf_unit`` scales a kB
  value by 1024 per letter, so ``M`` = 1024 kB exactly); ``--pretty`` (and ``-h``, which
  implies both) puts the device name last and splits ``-x`` into four tables per report
  (read, write, discard, flush) that are joined back by device; sysstat 10/11 ``-h`` printed a
  long device name on a line of its own, values on the next.
* ``-t`` report times in every ``%x %X`` locale spelling (see :mod:`.timestamps`),
  ``-p ALL`` partitions (``device_kind`` partition, ``parent`` from the kernel naming rule),
  ``-z`` (idle devices omitted from some reports: those rows are simply absent), ``-y``,
  ``-N``/``-j`` names, decimal commas (sysstat follows LC_NUMERIC), CRLF line ends.

Column mapping (printed column -> SampleFrame column, unit conversion):

===========================================  ===============  ==========================
iostat column                                SampleFrame      conversion
===========================================  ===============  ==========================
r/s w/s d/s f/s                              r/w/d/f_iops
tps                                          iops             (reads+writes+discards)
rkB/s wkB/s dkB/s, kB_read/s kB_wrtn/s       r/w/d_kBps       x1
kB_dscd/s
rMB/s wMB/s dMB/s, MB_read/s …               r/w/d_kBps       x1024
rsec/s wsec/s dsec/s, Blk_read/s …           r/w/d_kBps       /2 (512-byte units)
kB/s MB/s sec/s (``-s``)                     kBps             x1, x1024, /2
kB_w+d/s (basic ``-s``)                      kBps             read + (write+discard)
rrqm/s wrqm/s drqm/s                         r/w/d_merged_ps
%rrqm %wrqm %drqm                            r/w/d_rqm_pct
r_await w_await d_await f_await, await       *_await_ms
rareq-sz wareq-sz dareq-sz, areq-sz          r/w/d_areq_kB,   x1 (kB)
                                             areq_kB
avgrq-sz                                     areq_kB          /2 (sectors, every version)
avgqu-sz aqu-sz                              aqu_sz
svctm                                        svctm_ms
%util                                        util_pct
avg-cpu %user %nice %system %iowait          cpu_*_pct        (that report's rows)
%steal %idle
kB_read kB_wrtn kB_dscd (totals)             —                rate x interval, redundant
rqm/s (``-s``)                               —                reads+writes merged: no
                                                              column; a note says so
===========================================  ===============  ==========================

Times (``ts`` = end of the report's interval, UTC):

* ``-t``: the printed time, read in the offset it states (``S_TIME_FORMAT=ISO``), else in
  ``--tz``, else as UTC with a note. Day/month order is decided from all dates of the file
  (:func:`.timestamps.infer_date_order`). ``interval_s`` is the run's sampling interval (the
  most frequent step between report times, or ``--interval``); a step more than one second
  longer is a real gap (iostat stopped, host suspended) and is kept as the interval.
* no ``-t``: report times are not in the file. With ``--interval`` (and ``--start`` if
  known) reports are placed at ``start + k * interval``; without ``--start`` at midnight of the
  banner date in the file's zone, and a note says that only the spacing is real. A file with
  several reports and no interval is refused with an error naming ``--interval``. A file
  holding only iostat's since-boot summary needs neither (its one report is stamped at the
  banner date's midnight, ``interval_s`` 1 s nominal, flagged ``since_boot``).
* The first report after each ``Linux …`` banner (with or without ``_arch_ (N CPU)``) is
  iostat's since-boot summary: kept, with ``since_boot`` true (iostat ``-y`` omits it; a log
  written with ``-y`` has its first real interval flagged too — the file cannot tell). A file
  that starts without a banner (a fragment of a longer log) is read as measured intervals,
  with a note.

Damaged input: a line that is not what its place requires (wrong number of fields for its
``Device`` header, a non-number, a line outside any block) is refused with file:line:reason
(``--lenient``: skipped and counted). Two cuts are *not* errors, because logs are routinely
copied while iostat is still writing them or trimmed with ``tail``: lines before the first
complete report, and a last report that is incomplete (its last line has no newline, or it
has fewer lines than the report before it and no closing blank line) are dropped with a note.

Speed and memory: the file is read in pieces of :data:`CHUNK_BYTES` cut just after a blank
line (iostat never breaks a table with one, so each piece is self-contained). A piece stays
bytes: its lines are byte offsets found with numpy (:class:`_Lines`), classified by their
first byte, with exact tests only on the few lines that can be banners, stamps, avg-cpu
blocks or headers; strings are made only for those (one per report block). Device and
avg-cpu lines as long as their header (sysstat pads every field to a fixed width, so
nothing overflowed) are rows of a byte matrix decoded at the header's column boundaries by
:func:`_decode_fixed` — digits combined pairwise in narrow integers over a transposed block,
exact like ``strtod`` — and device names are decoded once per distinct name
(:func:`_device_names`); only lines that differ (long names, overflowing values, human
units, signs, decimal commas) go through a per-layout regular expression, whose values are
then checked for NaN and negatives (the digit decoder's cannot be either). Report
boundaries, runs and times are linked across pieces by counting the starts above each line
in the sorted indices of the few structural lines, and each batch is turned into a
SampleFrame whose rules are checked per report and per device, not per row
(:func:`_trusted`). Once a ``-t`` log is in its steady state (the date order and the run's
interval decided, nothing pending or unreadable), a piece made of whole reports exactly as
``iostat -x -t`` prints them is linked by ``_Parser.steady`` in one pass over its reports,
its stamps read by a byte kernel; anything else goes through the general path, which the
tests hold it to. Python loops run over report blocks, headers, runs, pieces and blocks of
lines, never over device lines. :func:`iter_parse` yields a SampleFrame per batch of pieces
(:data:`LINK_BYTES`), so memory is bounded by the pieces, not the file (``iogauge import
--parquet`` streams it to Parquet; ``benchmarks/import_speed.py``); :func:`parse` is the
same over an in-memory buffer.

The byte-level passes — splitting lines, the first pass of classification, the fixed-width
decoder, grouping device names, copying out structural lines — run in C when
``iostat_kernels.c`` is built (:mod:`.native`; ``make install`` builds it): the numpy
routines here are its reference, and the tests run every case both ways.
"""

from __future__ import annotations

import io
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import polars as pl
from numpy.lib.stride_tricks import as_strided

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers import first_report, native
from iogauge.importers import timestamps as tsx
from iogauge.importers.base import MAX_LISTED_SKIPS, Source
from iogauge.importers.first_report import FirstReport
from iogauge.importers.io import decode
from iogauge.model import timeline
from iogauge.model.sampleframe import DEVICE_KINDS, SampleFrame

if TYPE_CHECKING:
    from concurrent.futures import Future

NAME = "iostat"
DESCRIPTION = ("sysstat iostat text, 5.x to 12.x (-x or basic, -t, -p ALL, -z, -k/-m/sectors, "
               "--human/--pretty)")
EXPECTS = ("an 'avg-cpu:  %user …' block or a 'Device' header with iostat columns (r/s, "
           "rkB/s, tps, %util …), as printed by sysstat iostat")

#: Bytes read and scanned per piece by :func:`iter_parse` (and :func:`parse`): the working
#: memory of a scan is a few times this.
CHUNK_BYTES = 4 << 20

#: Bytes of the first piece when the steady path is on: it goes through the general path
#: (which decides the date order and the interval), so it is kept short, and the next
#: piece can be steady.
FIRST_BYTES = 256 << 10

#: Pieces are linked (reports, times) and turned into SampleFrames in batches of about this
#: many bytes of text: the batch holds only the pieces' numbers and structural lines, far
#: less than their text, and the per-batch fixed costs are paid less often. Measured on the
#: 100 MB benchmark log (2 CPUs): the peak resident set grows by ~10 MB per MB of batch
#: (frames being built), while every piece and batch pays fixed costs (a few hundred polars
#: and numpy calls): parse-only time for the log with pieces / batches of 2/4 MiB 2.0-2.2 s,
#: 4/8 MiB 1.6-1.8 s, 8/16 MiB 1.25-1.55 s; peak in ``benchmarks/import_speed.py``'s
#: streaming row 1.9x, 2.4x and 3.3x the log. So 4 MiB pieces in 8 MiB batches: below 3x
#: with the CLI around them.
LINK_BYTES = 8 << 20

#: interval_s given to a since-boot-only report when the file has no interval at all.
UNKNOWN_INTERVAL_S = 1.0

#: sysstat prints the device name as "%-13s" (iostat.c write_plain_ext_stat and
#: write_plain_basic_stat, every version since 9.x).
_DEVICE_WIDTH = 13

#: Lines decoded per block by the fixed-width reader (a block of character columns stays
#: in the CPU cache while it is transposed and read).
_DECODE_BLOCK = 8192

#: Pieces scanned in worker threads while this thread links reports (polars and numpy
#: release the GIL), by default none: the steady path (below) runs in this thread, and on
#: a 2-CPU host a scanning thread saved no time (not measured on more CPUs; ``workers=``
#: of :func:`iter_parse` still takes them).
_WORKERS = 0

#: Pieces that are whole reports of a ``-t`` log in its steady state are linked by
#: ``_Parser.steady`` (in this thread) instead of the general path; False sends every piece
#: through the general path (the tests compare the two).
_STEADY = True

#: Multiplier of the device-name hash (:func:`_device_names`): 2^64 / golden ratio, odd, so
#: that the 8-byte words it mixes spread over all 64 bits.
_NAME_HASH = np.uint64(0x9E3779B97F4A7C15)

#: Steps between report times needed before a streamed run's interval is fixed.
_MIN_STEPS = 8

# ---- line kinds ----------------------------------------------------------------------------
# (the candidates are the native first pass's: iostat_kernels.c has the same numbers)
_BLANK, _BANNER, _TS, _CPUH, _CPUV, _DEVH, _ROW, _BANNER_CAND, _TS_CAND, _WS_CAND = range(10)
_STRUCTURAL = (_BANNER, _TS, _CPUH, _CPUV, _DEVH)

# sysstat 8.1.x and later end the banner with "_arch_ (N CPU)"; sysstat 5.x-8.0 print only
# "Linux REL (host) <TAB>date" (seed 003's captures, sysstat 5.0.5 on RHEL 4).
_BANNER_RE = (r"^Linux\s+(?P<kernel>\S+)\s+\((?P<host>[^)]*)\)\s+(?P<date>\S.*?)"
              r"(?:\s+_(?P<arch>\S+)_\s+\((?P<ncpu>\d+)\s+CPU\))?\s*$")
# Pretty (device-last) tables after the first of a report: write, discard, flush parts.
_PART_RE = r"^\s*(?:w/s|d/s|f/s)\s"

_NOT_A_NUMBER = ("a value is not a number (as iostat prints them: 12.34, 1,5, 33.7M or "
                 "4.4%)")
_NOT_UNDERSTOOD = ("line not understood: not a device line of a 'Device' table, a time "
                   "stamp, an avg-cpu block or a banner")

_SNIFF_AVGCPU = re.compile(r"^avg-cpu:\s+%user", re.MULTILINE)
_SNIFF_DEVICE = re.compile(
    r"^(?:Device:?\s+(?:r/s|rrqm/s|tps|w/s)\s.*"
    r"|\s*(?:r/s|w/s|d/s|f/s|tps|rrqm/s)\s+.*\S\s+Device)\s*$", re.MULTILINE)


def sniff(head: str) -> bool:
    """An iostat text report: an ``avg-cpu:`` block or a ``Device`` header of iostat columns.

    The ``Linux … (host) date _arch_ (n CPU)`` banner alone is not enough: sar prints it too.
    """
    return bool(_SNIFF_AVGCPU.search(head) or _SNIFF_DEVICE.search(head))


# ---- columns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnSpec:
    """How one printed column becomes a SampleFrame column.

    Attributes:
        target: SampleFrame column, or None when the column is not imported.
        factor: multiplier from the printed unit to the SampleFrame unit (exact: powers of 2).
        size: the value is a kB amount that ``--human`` prints with a k/M/G… suffix.
        rank: when two printed columns give one target (sysstat 7 printed sectors and kB),
            the lower rank wins.
        note: told to the user when the column is present but not imported.
    """

    target: str | None
    factor: float = 1.0
    size: bool = False
    rank: int = 0
    note: str | None = None


def _rate_cols() -> dict[str, ColumnSpec]:
    cols: dict[str, ColumnSpec] = {}
    for p in ("r", "w", "d"):
        cols[f"{p}kB/s"] = ColumnSpec(f"{p}_kBps", 1.0, True, 0)
        cols[f"{p}MB/s"] = ColumnSpec(f"{p}_kBps", 1024.0, True, 2)
        cols[f"{p}sec/s"] = ColumnSpec(f"{p}_kBps", 0.5, True, 1)
        cols[f"{p}rqm/s"] = ColumnSpec(f"{p}_merged_ps")
        cols[f"%{p}rqm"] = ColumnSpec(f"{p}_rqm_pct")
        cols[f"{p}_await"] = ColumnSpec(f"{p}_await_ms")
        cols[f"{p}areq-sz"] = ColumnSpec(f"{p}_areq_kB", 1.0, True)
        cols[f"{p}/s"] = ColumnSpec(f"{p}_iops")
    for word, p in (("read", "r"), ("wrtn", "w"), ("dscd", "d")):
        cols[f"kB_{word}/s"] = ColumnSpec(f"{p}_kBps", 1.0, True, 0)
        cols[f"MB_{word}/s"] = ColumnSpec(f"{p}_kBps", 1024.0, True, 2)
        cols[f"Blk_{word}/s"] = ColumnSpec(f"{p}_kBps", 0.5, True, 1)
        for unit in ("kB", "MB", "Blk"):
            cols[f"{unit}_{word}"] = ColumnSpec(None, size=True)  # interval total = rate x interval
    for unit, factor, rank in (("kB", 1.0, 0), ("MB", 1024.0, 2), ("Blk", 0.5, 1)):
        # basic -s: writes and discards together; kBps = read + w+d (see _assemble)
        cols[f"{unit}_w+d/s"] = ColumnSpec("_wd_kBps", factor, True, rank)
        cols[f"{unit}_w+d"] = ColumnSpec(None, size=True)
    return cols


#: Printed iostat device column -> how it is imported (the table in the module docstring).
COLUMNS: dict[str, ColumnSpec] = {
    **_rate_cols(),
    "f/s": ColumnSpec("f_iops"),
    "f_await": ColumnSpec("f_await_ms"),
    "tps": ColumnSpec("iops"),
    "kB/s": ColumnSpec("kBps", 1.0, True, 0),
    "MB/s": ColumnSpec("kBps", 1024.0, True, 2),
    "sec/s": ColumnSpec("kBps", 0.5, True, 1),
    "await": ColumnSpec("await_ms"),
    "areq-sz": ColumnSpec("areq_kB", 1.0, True),
    "avgrq-sz": ColumnSpec("areq_kB", 0.5),  # sectors in every sysstat that printed it
    "avgqu-sz": ColumnSpec("aqu_sz"),
    "aqu-sz": ColumnSpec("aqu_sz"),
    "svctm": ColumnSpec("svctm_ms"),
    "%util": ColumnSpec("util_pct"),
    "rqm/s": ColumnSpec(None, note="column rqm/s (read+write+discard requests merged per second, "
                  "iostat -s) has no SampleFrame column and was not imported"),
}

#: avg-cpu column -> SampleFrame host CPU column.
CPU_COLUMNS: dict[str, str] = {
    "%user": "cpu_user_pct", "%nice": "cpu_nice_pct", "%system": "cpu_system_pct",
    "%sys": "cpu_system_pct", "%iowait": "cpu_iowait_pct", "%steal": "cpu_steal_pct",
    "%idle": "cpu_idle_pct",
}
_CPU_TARGETS: tuple[str, ...] = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct",
                                 "cpu_iowait_pct", "cpu_steal_pct", "cpu_idle_pct")

# --human suffixes: sysstat cprintf_unit divides a kB value by 1024 per step through
# "B k M G T P E Z Y" (B is bytes); '%' marks percentages.
_SUFFIX_FACTOR: dict[str, float] = {
    "B": 1.0 / 1024, "k": 1.0, "K": 1.0, "M": 1024.0, "G": 1024.0**2, "T": 1024.0**3,
    "P": 1024.0**4, "E": 1024.0**5, "Z": 1024.0**6, "Y": 1024.0**7,
}


@dataclass
class _Layout:
    """One distinct ``Device`` header of the file.

    Attributes:
        text: the header line as printed.
        tokens: its column names.
        ends: byte offset just past each name (values are right-aligned to it).
        device_last: ``--pretty``: the device name is the last field.
        part: a ``--pretty`` table after the first of a report (w/s, d/s, f/s first).
        cols: (field index, printed name, mapping) of every imported column.
        notes: what the user should know about this header (unknown columns …).
    """

    text: str
    tokens: list[str]
    ends: list[int]
    device_last: bool
    part: bool
    cols: list[tuple[int, str, ColumnSpec]]
    notes: list[str]

    def fixed_fields(self) -> list[tuple[int, int]]:
        """Byte range of each imported value in a fixed-width device line (right-aligned
        between the ends of two header names; the first after the ``%-13s`` name)."""
        return [(self.ends[idx - 1] if idx > 1 else _DEVICE_WIDTH, self.ends[idx])
                for idx, _tok, _spec in self.cols]

    def columns(self, values: list[np.ndarray]) -> dict[str, pl.Series]:
        """The decoded ``values`` of :meth:`fixed_fields` as SampleFrame columns."""
        return {(spec.target or ""): pl.Series(spec.target or "", v * spec.factor
                                               if spec.factor != 1.0 else v)
                for (_idx, _tok, spec), v in zip(self.cols, values, strict=True)}

    @property
    def n_fields(self) -> int:
        return len(self.tokens)


def _layout(text: str) -> _Layout:
    stripped = text.rstrip()
    spans = [(m.group(0), m.end()) for m in re.finditer(r"\S+", stripped)]
    tokens = [s[0] for s in spans]
    device_last = not tokens[0].startswith("Device")
    part = bool(re.match(_PART_RE, stripped))
    chosen: dict[str, tuple[int, str, ColumnSpec]] = {}
    notes: list[str] = []
    for idx, tok in enumerate(tokens):
        if tok.startswith("Device"):
            continue
        spec = COLUMNS.get(tok)
        if spec is None:
            notes.append(f"column {tok!r} of the Device header is not a known iostat column; "
                         "it was not imported")
            continue
        if spec.target is None:
            if spec.note:
                notes.append(spec.note)
            continue
        prev = chosen.get(spec.target)
        if prev is None or spec.rank < prev[2].rank:
            chosen[spec.target] = (idx, tok, spec)
    return _Layout(text=text, tokens=tokens, ends=[s[1] for s in spans],
                   device_last=device_last, part=part,
                   cols=sorted(chosen.values(), key=lambda c: c[0]), notes=notes)


# ---- reading -------------------------------------------------------------------------------


def _utf8(buf: bytes | bytearray) -> bytes | bytearray:
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


class _Lines:
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
        kern = _kernels()
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
        kern = _kernels()
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


def _chunks(stream: BinaryIO, chunk_bytes: int, first_bytes: int | None = None
            ) -> Iterator[tuple[bytearray, bool]]:
    """(piece, last) for pieces of ``stream`` cut just after a blank line, the first of
    about ``first_bytes`` (default: ``chunk_bytes``).

    iostat never puts a blank line inside a device table, so every device line of a piece
    has its ``Device`` header in the same piece: pieces can be scanned independently (and
    in parallel). A piece without any blank line grows until one comes.

    Each piece is a new buffer that the stream is read into (``readinto``: the text after
    the last blank line is the only copy), so a piece is never copied whole.
    """
    first = stream.read(4)
    if first.startswith((b"\xff\xfe", b"\xfe\xff")) or \
            (len(first) >= 4 and first[1:2] == b"\x00" and first[3:4] == b"\x00"):
        # UTF-16 (a log saved by a Windows editor): newline bytes are not b"\n" alone; such
        # files are small, so transcode the whole stream once.
        stream = io.BytesIO(decode(first + stream.read()).encode("utf-8"))
        first = b""
    elif first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    carry: bytes | bytearray = first
    size = chunk_bytes if first_bytes is None else first_bytes
    while True:
        buf, got = _read_after(stream, carry, size)
        size = chunk_bytes
        if not got:
            yield buf, True  # possibly empty: it closes the last report
            return
        cut = buf.rfind(b"\n\n")
        # a CRLF blank line after it (searching only the tail: a LF file has none, and a
        # search of the whole piece for it costs as much as the scan of the piece)
        cut = max(cut, buf.rfind(b"\n\r\n", max(cut, 0)))
        if cut < 0:
            carry = buf
            continue
        cut = buf.index(b"\n", cut + 1) + 1  # just after the blank line
        carry = bytes(buf[cut:])
        del buf[cut:]
        yield buf, False


def _read_after(stream: BinaryIO, carry: bytes | bytearray, size: int) -> tuple[bytearray, int]:
    """``carry`` then up to ``size`` bytes of ``stream`` (fewer only at its end) in one new
    buffer; returns it and the number of bytes read."""
    buf = bytearray(len(carry) + size)
    buf[:len(carry)] = carry
    got = 0
    readinto = getattr(stream, "readinto", None)
    with memoryview(buf) as view:
        while got < size:
            at = len(carry) + got
            if readinto is not None:
                n = readinto(view[at:]) or 0
            else:  # a stream without readinto (rare): read and place
                block = stream.read(size - got)
                n = len(block)
                view[at:at + n] = block
            if not n:
                break
            got += n
    del buf[len(carry) + got:]
    return buf, got


@dataclass
class _Scan:
    """What one piece holds, found without any state (phase A; may run in a thread).

    Line indices are the file's 0-based line numbers.

    Attributes:
        n_lines: lines in the piece.
        struct: banner, stamp, avg-cpu, avg-cpu values and Device header lines
            (``i``, ``line``, ``kind``; the avg-cpu values are read here, into ``cpu``).
        rows: parsed device lines (``i``, ``device``, ``part`` flag, measures).
        cpu: avg-cpu values (``i`` of the values line, cpu_* columns).
        orphans: indices of lines that are not in any table.
        bad: (line number, reason) of device lines that could not be read.
        notes: notes of the layouts met (unknown columns …).
        last_kind: kind of the piece's last line; ``newline``: it ends with one.
        last_row: index of the last device line (orphans included), or -1.
        unclean: some value may be NaN, infinite or negative (read as text by polars, not
            by the digit decoder, which reads digits only): see ``_Parser._clean_values``.
    """

    n_lines: int
    struct: pl.DataFrame
    rows: pl.DataFrame
    cpu: pl.DataFrame
    orphans: pl.Series
    bad: list[tuple[int, str]]
    notes: list[str]
    last_kind: int
    newline: bool
    last_row: int
    unclean: bool = False


#: First bytes of lines that may be a banner, stamp, avg-cpu block, Device header or blank.
_LOOK = np.zeros(256, dtype=bool)
_LOOK[list(b"LaD \t0123456789")] = True
_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[list(b"0123456789")] = True
#: Last bytes a whitespace-only line can have (regex ``\s`` is Unicode: bytes >= 0x80 too).
_WS_END = np.zeros(256, dtype=bool)
_WS_END[[9, 10, 11, 12, 13, 32, *range(0x80, 0x100)]] = True
_STRUCT_KIND = np.zeros(256, dtype=bool)
_STRUCT_KIND[list(_STRUCTURAL)] = True


def _kernels() -> native.Kernels | None:
    """The native kernels when built and fresh (:mod:`.native`), else None: numpy."""
    return native.kernels()


def _is_stamp(text: pl.Series) -> np.ndarray:
    """Whether each line (starting with a digit) is a -t time stamp."""
    return ((text.str.contains(tsx.NUMERIC_PATTERN) | text.str.contains(tsx.CJK_PATTERN))
            & text.str.contains(r"[:時时시]")).to_numpy()


#: Verdicts of :func:`_is_stamp` per line shape (digits read as 0), kept across pieces and
#: files: testing one line costs compiling the patterns (~1 ms), more than the piece's
#: other classification work. Bounded: cleared when it holds :data:`_SHAPES_KEPT`.
_STAMP_SHAPES: dict[str, bool] = {}
_SHAPES_KEPT = 4096
_ZERO_DIGITS = str.maketrans("123456789", "000000000")


def _stamp_shapes(text: pl.Series) -> np.ndarray:
    """:func:`_is_stamp` of lines of distinct shapes, remembered by shape."""
    shapes = [t.translate(_ZERO_DIGITS) for t in text.to_list()]
    known = {sh: _STAMP_SHAPES.get(sh) for sh in shapes}  # (scans may run in threads)
    todo = [k for k, sh in enumerate(shapes) if known[sh] is None]
    if todo:
        verdicts = _is_stamp(text.gather(todo)).tolist()
        found = {shapes[k]: bool(v) for k, v in zip(todo, verdicts, strict=True)}
        known.update(found)
        if len(_STAMP_SHAPES) + len(found) > _SHAPES_KEPT:
            _STAMP_SHAPES.clear()
        _STAMP_SHAPES.update(found)
    return np.array([known[sh] for sh in shapes], dtype=bool)


def _classify(lines: _Lines) -> np.ndarray:
    """Kind of every line: the first byte decides for most lines (device lines start with
    a name); exact tests run only on lines whose first byte allows a banner, stamp,
    avg-cpu block, Device header or blank, and strings are made only for the few that need
    a regular expression (banners, stamps, whitespace-only lines).

    With the native kernels, one C pass does every test but the regular expressions
    (``ig_classify``), which then run on its candidates; else :func:`_classify_numpy`."""
    kern = _kernels()
    if kern is None:
        return _classify_numpy(lines)
    kind = kern.classify(lines.arr, lines.starts, lines.ends)
    ws = np.flatnonzero(kind == _WS_CAND)
    if ws.size:
        blank = lines.text(ws).str.contains(r"^\s*$").to_numpy()
        kind[ws] = np.where(blank, _BLANK, _ROW)
    digit = np.flatnonzero(kind == _TS_CAND)
    if digit.size:
        # The stamp patterns treat every ASCII digit alike (\d, no digit literals): a line
        # is a stamp when its shape's first line is. A piece's thousands of stamps have a
        # handful of shapes.
        shapes = kern.group_shapes(lines.arr, lines.starts, lines.ends, digit)
        if shapes is None:
            kind[digit] = np.where(_is_stamp(lines.text(digit)), _TS, _ROW)
        else:
            code, first = shapes
            stamp = _stamp_shapes(lines.text(digit[first]))
            kind[digit] = np.where(stamp[code], _TS, _ROW)
    el = np.flatnonzero(kind == _BANNER_CAND)
    if el.size:
        banner = lines.text(el).str.contains(_BANNER_RE).to_numpy()
        # not a banner: what it would be without the "Linux " test (a Device header or not)
        other = np.where(lines.has_suffix(el, b" Device"), _DEVH, _ROW)
        kind[el] = np.where(banner, _BANNER, other)
    _mark_cpu_values(kind, np.flatnonzero(kind == _CPUH))
    return kind


def _mark_cpu_values(kind: np.ndarray, cpu_headers: np.ndarray) -> None:
    """The line after an avg-cpu header (unless blank) holds its values."""
    after = cpu_headers + 1
    after = after[after < kind.size]
    kind[after[kind[after] != _BLANK]] = _CPUV


def _classify_numpy(lines: _Lines) -> np.ndarray:
    """:func:`_classify` in numpy (the reference of ``ig_classify``)."""
    arr, n = lines.arr, lines.n
    kind = np.full(n, _ROW, dtype=np.uint8)
    nonempty = np.flatnonzero(lines.lens > 0)
    kind[lines.lens == 0] = _BLANK
    first = arr[lines.starts[nonempty]]
    pick = _LOOK[first]
    cand, first = nonempty[pick], first[pick]
    if cand.size == 0:
        return kind
    out = np.full(cand.size, _ROW, dtype=np.uint8)
    # lowest priority first: each later test overrides (banner > avg-cpu > Device > stamp >
    # blank > device line)
    ws = np.flatnonzero(((first == 32) | (first == 9)) & _WS_END[arr[lines.ends[cand] - 1]])
    if ws.size:
        blank = lines.text(cand[ws]).str.contains(r"^\s*$").to_numpy()
        out[ws[blank]] = _BLANK
    digit = np.flatnonzero(_IS_DIGIT[first])
    if digit.size:
        out[digit[_is_stamp(lines.text(cand[digit]))]] = _TS
    ends_e = np.flatnonzero(arr[lines.ends[cand] - 1] == ord("e"))
    devh = ends_e[lines.has_suffix(cand[ends_e], b" Device")]
    out[devh] = _DEVH
    d = np.flatnonzero(first == ord("D"))
    out[d[lines.has_prefix(cand[d], b"Device")]] = _DEVH
    a = np.flatnonzero(first == ord("a"))
    out[a[lines.has_prefix(cand[a], b"avg-cpu")]] = _CPUH
    el = np.flatnonzero(first == ord("L"))
    el = el[lines.has_prefix(cand[el], b"Linux ")]
    if el.size:
        banner = lines.text(cand[el]).str.contains(_BANNER_RE).to_numpy()
        out[el[banner]] = _BANNER
    kind[cand] = out
    _mark_cpu_values(kind, cand[out == _CPUH])
    return kind


def _frame_of(lines: _Lines, idx: np.ndarray) -> pl.DataFrame:
    """Lines ``idx`` as a frame of (``i`` line index, ``line`` text)."""
    return pl.DataFrame({"i": pl.Series("i", idx, dtype=pl.Int64), "line": lines.text(idx)})


def _scan(buf: bytes | bytearray, final: bool, layouts: dict[str, _Layout]) -> _Scan:
    """Phase A: classify the lines of a piece and read its device and avg-cpu lines.

    Line indices are the piece's own (0 = its first line): the pieces' scans may run in
    parallel, before the number of lines above a piece is known (:func:`_shift`)."""
    buf = _utf8(buf)
    if _kernels() is None:
        buf = bytes(buf)  # the numpy routines slice lines out of it as bytes
    lines = _Lines(buf)
    n = lines.n
    newline = not buf or buf.endswith(b"\n")
    kind = _classify(lines)
    struct_idx = np.flatnonzero(_STRUCT_KIND[kind])
    struct_kind = kind[struct_idx]
    text = lines.text(struct_idx)
    struct = pl.DataFrame({"i": pl.Series("i", struct_idx, dtype=pl.Int64), "line": text,
                           "kind": pl.Series("kind", struct_kind, dtype=pl.UInt8)})
    rows = np.flatnonzero(kind == _ROW)
    notes: list[str] = []
    bad: list[tuple[int, str]] = []
    last_kind = int(kind[-1]) if n else _BLANK
    last_row = int(rows[-1]) if rows.size else -1
    # a device line belongs to the table whose header is the last non-device line above it
    # (a piece starts after a blank line: nothing above counts)
    above = np.maximum.accumulate(np.where(kind != _ROW, np.arange(n), -1))[rows]
    in_table = (above >= 0) & (kind[np.maximum(above, 0)] == _DEVH)
    orphans = pl.Series("i", rows[~in_table], dtype=pl.Int64)
    header_of = above[in_table]
    unclean = [False]
    parsed = _parse_rows(lines, struct, rows[in_table], header_of, layouts, notes, bad, unclean)
    cpu = _parse_cpu(lines, kind, struct, bad, unclean)
    return _Scan(n, struct, parsed, cpu, orphans, bad, notes, last_kind, newline, last_row,
                 unclean[0])


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames one under the other: their chunks appended when the columns agree (no copy),
    else matched by name, missing columns null."""
    if len(frames) == 1:
        return frames[0]
    first = frames[0].schema
    if all(f.schema == first for f in frames[1:]):
        return pl.concat(frames, how="vertical")
    return pl.concat(frames, how="diagonal_relaxed")


def _merge(scans: list[_Scan]) -> _Scan:
    """Consecutive pieces' scans as one (phase B's fixed costs are paid once per batch)."""
    if len(scans) == 1:
        return scans[0]
    last = scans[-1]
    return _Scan(
        n_lines=sum(x.n_lines for x in scans),
        struct=_stack([x.struct for x in scans]),
        rows=_stack([x.rows for x in scans]),
        cpu=_stack([x.cpu for x in scans]),
        orphans=pl.concat([x.orphans for x in scans]),
        bad=[b for x in scans for b in x.bad],
        notes=[n for x in scans for n in x.notes],
        last_kind=last.last_kind, newline=last.newline,
        last_row=max(x.last_row for x in scans),
        unclean=any(x.unclean for x in scans))


def _shift(scan: _Scan, line0: int) -> _Scan:
    """``scan`` with line indices counted from the file's start (``line0`` lines above)."""
    if line0 == 0:
        return scan
    i = pl.col("i") + line0
    return replace(scan, struct=scan.struct.with_columns(i), rows=scan.rows.with_columns(i),
                   cpu=scan.cpu.with_columns(i), orphans=scan.orphans + line0,
                   bad=[(ln + line0, reason) for ln, reason in scan.bad],
                   last_row=scan.last_row + line0 if scan.last_row >= 0 else -1)


def _parse_rows(lines: _Lines, struct: pl.DataFrame, rows: np.ndarray, header_of: np.ndarray,
                layouts: dict[str, _Layout], notes: list[str],
                bad: list[tuple[int, str]], unclean: list[bool]) -> pl.DataFrame:
    """Device lines ``rows`` (under the Device headers ``header_of``) -> numbers, per
    distinct Device header (a few per file)."""
    if rows.size == 0:
        return pl.DataFrame(schema={"i": pl.Int64, "device": pl.String, "part": pl.Boolean})
    headers = struct.filter(pl.col("kind") == _DEVH)
    texts = headers["line"].unique(maintain_order=True).to_list()
    for text in texts:
        lay = layouts.get(text)
        if lay is None:
            lay = layouts[text] = _layout(text)
        notes.extend(lay.notes)
    groups = [(texts[0], rows)]
    if len(texts) > 1:
        code = headers["line"].replace_strict({t: k for k, t in enumerate(texts)},
                                              return_dtype=pl.Int64).to_numpy()
        row_code = code[np.searchsorted(headers["i"].to_numpy(), header_of)]
        groups = [(t, rows[row_code == k]) for k, t in enumerate(texts)]
    frames: list[pl.DataFrame] = []
    for text, sel in groups:
        if sel.size:
            lay = layouts[text]
            part = lay.part or lay.device_last
            frames.append(_parse_layout(lay, lines, sel, bad, unclean)
                          .with_columns(pl.lit(part).alias("part")))
    out = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    return out.sort("i") if len(frames) > 1 else out


def _decode_fixed(mat: np.ndarray, fields: list[tuple[int, int]]
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


def _decode_lines(lines: _Lines, idx: np.ndarray, line_len: int,
                  fields: list[tuple[int, int]]) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`_decode_fixed` of the lines ``idx`` (each ``line_len`` bytes long): by the
    native kernel ``ig_decode_fixed`` when it is built, else by numpy."""
    kern = _kernels()
    if kern is None:
        return _decode_fixed(lines.matrix(idx, line_len), fields)
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


def _line_names(lines: _Lines, idx: np.ndarray, line_len: int, width: int
                ) -> tuple[pl.Series, np.ndarray]:
    """:func:`_device_names` of the lines ``idx`` (each ``line_len`` bytes long): grouped
    by the native kernel ``ig_group_names`` when it is built, else by numpy."""
    grouped = _name_groups(lines, idx, width)
    if grouped is None:
        return _device_names(lines.matrix(idx, line_len), width)
    names, valid, code = grouped
    device = pl.Series("device", names, dtype=pl.String).gather(pl.Series("code", code))
    return device, np.array(valid, dtype=bool)[code]


def _name_groups(lines: _Lines, idx: np.ndarray, width: int
                 ) -> tuple[list[str], list[bool], np.ndarray] | None:
    """The distinct name fields (the first ``width`` bytes) of the lines ``idx``, trailing
    spaces stripped, whether each is a name (not empty, no space inside, UTF-8), and the
    group of each line (uint32): by the native kernel ``ig_group_names``; None without it
    (or beyond its number of groups)."""
    kern = _kernels()
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


def _device_names(mat: np.ndarray, width: int) -> tuple[pl.Series, np.ndarray]:
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


def _parse_layout(lay: _Layout, lines: _Lines, sel: np.ndarray, bad: list[tuple[int, str]],
                  unclean: list[bool]) -> pl.DataFrame:
    """Numbers of the device lines ``sel`` under one header: fixed-width fast path, then
    regex.

    sysstat prints the name as ``%-13s`` and each value right-aligned in a fixed width
    (``" %*.2f"``), so a line exactly as long as its header has no overflowed field and
    each value lies between the ends of two header names (:func:`_decode_fixed`). Lines
    that differ (long names, overflowing values, human units, signs, decimal commas) take
    the regex path (:func:`_parse_slow`), whose values may be NaN or negative (``unclean``).
    """
    width = _DEVICE_WIDTH
    header_len = len(lay.text.encode("utf-8"))
    fixed = lines.lens[sel] == header_len
    if lay.device_last or not lay.cols or lay.ends[1] - width < 2 or not fixed.any():
        unclean[0] = True
        return _parse_slow(lay, _frame_of(lines, sel), bad)
    cand = sel[fixed]
    values, ok = _decode_lines(lines, cand, header_len, lay.fixed_fields())
    device, named = _line_names(lines, cand, header_len, width)
    ok &= named
    cols: dict[str, pl.Series] = {"i": pl.Series("i", cand, dtype=pl.Int64),
                                  "device": device, **lay.columns(values)}
    fast = pl.DataFrame(cols)
    slow = sel[~fixed]
    if not ok.all():
        fast = fast.filter(pl.Series("ok", ok))
        slow = np.sort(np.concatenate([slow, cand[~ok]]))
    if slow.size == 0:
        return fast
    unclean[0] = True
    # file order: lines that took the regex path go back between their neighbours
    return pl.concat([fast, _parse_slow(lay, _frame_of(lines, slow), bad)],
                     how="vertical_relaxed").sort("i")


def _parse_slow(lay: _Layout, rows: pl.DataFrame, bad: list[tuple[int, str]]) -> pl.DataFrame:
    """Whitespace-split lines (any width), --human suffixes, decimal commas."""
    rows = _merge_name_lines(lay, rows)
    n = lay.n_fields
    pattern = r"^\s*(\S+)" + r"\s+(\S+)" * (n - 1) + r"\s*$"
    groups = rows.select("i", pl.col("line").str.extract_groups(pattern).alias("g"),
                         pl.col("line").str.count_matches(r"\S+").alias("nf"))
    matched = groups.filter(pl.col("g").struct.field("1").is_not_null())
    for i, nf in groups.filter(pl.col("g").struct.field("1").is_null()).select(
            "i", "nf").iter_rows():
        bad.append((int(i) + 1, (f"expected {n} fields as in the Device header "
                                 f"'{' '.join(lay.tokens[:4])} …', found {nf}")))
    dev_idx = n - 1 if lay.device_last else 0
    exprs: list[pl.Expr] = [pl.col("i"),
                            pl.col("g").struct.field(str(dev_idx + 1)).alias("device")]
    for idx, _tok, spec in lay.cols:
        tok = pl.col("g").struct.field(str(idx + 1))
        exprs.append(human_value(tok, spec).alias(spec.target or ""))
    out = matched.select(exprs)
    if lay.cols:
        failed = out.filter(pl.any_horizontal([pl.col(spec.target or "").is_null()
                                               for _, _, spec in lay.cols]))
        if failed.height:
            for i in failed["i"].to_list():
                bad.append((int(i) + 1, _NOT_A_NUMBER))
            out = out.filter(~pl.col("i").is_in(failed["i"].implode()))
    return out


def _merge_name_lines(lay: _Layout, rows: pl.DataFrame) -> pl.DataFrame:
    """sysstat 10/11 ``-h``: a device name alone on a line, its values on the next."""
    if lay.device_last:
        return rows
    single = ~pl.col("line").str.strip_chars().str.contains(r"\s")
    nxt_i = pl.col("i").shift(-1)
    nxt_line = pl.col("line").shift(-1)
    flagged = rows.with_columns(
        (single & (nxt_i == pl.col("i") + 1)
         & nxt_line.str.contains(r"^\s")).fill_null(False).alias("name_only"))
    if not flagged["name_only"].any():
        return rows
    merged = flagged.with_columns(
        pl.when(pl.col("name_only"))
        .then(pl.col("line").str.strip_chars() + pl.lit(" ") + nxt_line)
        .otherwise(pl.col("line")).alias("line"),
        pl.col("name_only").shift(1).fill_null(False).alias("consumed"))
    return merged.filter(~pl.col("consumed")).drop("name_only", "consumed")


def _cpu_columns(header: str) -> tuple[list[str], list[tuple[str, int, int, int]], int]:
    """An avg-cpu header's column names, the (target, field index, start, end) of each
    imported one (values are right-aligned under their names), and the width of a values
    line printed under it."""
    spans = [(m.group(0), m.end()) for m in re.finditer(r"\S+", header.rstrip())]
    names = [s[0] for s in spans[1:]]
    cols = [(CPU_COLUMNS[nm], j, spans[j][1], spans[j + 1][1])
            for j, nm in enumerate(names) if nm in CPU_COLUMNS]
    return names, cols, len(header.rstrip().encode())


def _parse_cpu(lines: _Lines, kind: np.ndarray, struct: pl.DataFrame,
               bad: list[tuple[int, str]], unclean: list[bool]) -> pl.DataFrame:
    """avg-cpu values (the line after each avg-cpu header); fixed width like device lines,
    read by :func:`_decode_fixed`; other lines split at blanks."""
    def empty() -> pl.DataFrame:
        return pl.DataFrame(schema={"i": pl.Int64, **dict.fromkeys(_CPU_TARGETS, pl.Float64)})

    vals = np.flatnonzero(kind == _CPUV)
    if vals.size == 0:
        return empty()
    has_header = kind[vals - 1] == _CPUH
    for i in vals[~has_header].tolist():
        bad.append((i + 1, "avg-cpu values without their header"))
    vals = vals[has_header]
    if vals.size == 0:
        return empty()
    # the header of each values line, as a code into its few distinct texts
    heads = np.flatnonzero(struct["kind"].to_numpy() == _CPUH)
    htext = struct["line"].gather(heads)
    texts = htext.unique(maintain_order=True).to_list()
    code = np.zeros(vals.size, dtype=np.int64)
    if len(texts) > 1:
        head_code = htext.replace_strict({t: k for k, t in enumerate(texts)},
                                         return_dtype=pl.Int64).to_numpy()
        code = head_code[np.searchsorted(struct["i"].to_numpy()[heads], vals - 1)]
    out: list[pl.DataFrame] = []
    for c, text in enumerate(texts):
        grp = vals[code == c]
        names, cols, width = _cpu_columns(text)
        fixed = lines.lens[grp] == width
        retry = grp[~fixed]
        if fixed.any():
            cand = grp[fixed]
            ok = np.ones(cand.size, dtype=bool)
            values: list[np.ndarray] = []
            if cols:
                values, ok = _decode_lines(lines, cand, width,
                                           [(a, b) for _t, _j, a, b in cols])
            out.append(pl.DataFrame({"i": pl.Series("i", cand[ok], dtype=pl.Int64),
                                     **{t: v[ok] for (t, _j, _a, _b), v in zip(cols, values,
                                                                              strict=True)}}))
            retry = np.sort(np.concatenate([retry, cand[~ok]]))
        if retry.size:
            unclean[0] = True
            slow = _frame_of(lines, retry)
            toks = slow["line"].str.extract_all(r"\S+")
            fits = toks.list.len() == len(names)
            for i in slow.filter(~fits)["i"].to_list():
                bad.append((int(i) + 1, (f"avg-cpu values: expected {len(names)} fields "
                                         f"under '{text.strip()}'")))
            frame = slow.filter(fits).with_columns(toks.filter(fits).alias("t")).select(
                "i", *[_number(pl.col("t").list.get(j)).alias(t) for t, j, _a, _b in cols])
            if cols:
                good = pl.all_horizontal([pl.col(t).is_not_null() for t, _j, _a, _b in cols])
                for i in frame.filter(~good)["i"].to_list():
                    bad.append((int(i) + 1, "avg-cpu values: not a number"))
                frame = frame.filter(good)
            out.append(frame)
    if not out:
        return empty()
    if len(out) == 1 and len(texts) == 1 and out[0].height == vals.size:
        return out[0]  # every line read by the fixed-width decoder: already in file order
    return pl.concat(out, how="diagonal_relaxed").sort("i")


@dataclass
class _Run:
    """One iostat invocation: the lines after a ``Linux …`` banner (or the file's start)."""

    run_id: int
    host: str | None = None
    banner_date: str | None = None
    banner_line: int | None = None
    reports: int = 0  # reports of this run seen so far
    has_ts: bool = False
    has_cpu: bool = False
    nominal_s: float | None = None
    nominal_fixed: bool = False
    last_utc: datetime | None = None
    anchor: datetime | None = None  # start of a run without -t stamps
    closed: bool = False


@dataclass
class _Pending:
    rows: list[pl.DataFrame] = field(default_factory=list)
    reports: list[pl.DataFrame] = field(default_factory=list)


class _Parser:
    """Phase B: the state that crosses pieces — runs, report boundaries, times — and the
    assembly of SampleFrames from the pieces' scans, in file order."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.next_report = 1
        self.open_report: int | None = None  # report whose end has not been seen yet
        self.open_start = -1  # its first line
        self.runs: dict[int, _Run] = {0: _Run(0)}
        self.banner_i: list[int] = []  # line index of each banner, in order
        self.banner_run: list[int] = []
        self.current_run = 0
        self.started = False  # a report start has been seen
        self.layouts: dict[str, _Layout] = {}
        self.pending = _Pending()
        # parts of the open report, carried to the next piece
        self.carry_struct: list[pl.DataFrame] = []
        self.carry_rows: list[pl.DataFrame] = []
        self.carry_cpu: list[pl.DataFrame] = []
        self.dates: list[pl.DataFrame] = []  # distinct dates seen (date order)
        self.order: tsx.DateOrder | None = None
        self.bad: list[tuple[int, str]] = []
        self.lead_lines = 0
        self.first_start: int | None = None  # first line of the file's first report
        self.dropped_tail = False
        self.last_size: tuple[int, int] | None = None  # (run, body lines) of the last report
        self.reports_out = 0
        self.unclean = False  # a value read as text may be NaN, infinite or negative
        self.host_default = source.host or Path(source.path).stem

    # ---- runs and report boundaries -------------------------------------------------------
    def add(self, scan: _Scan, *, final: bool) -> None:
        """Take a piece's scan (pieces in file order); complete reports go to pending."""
        for note in scan.notes:
            self.source.note(note)
        self.unclean |= scan.unclean
        self.bad.extend(scan.bad)
        self.bad.extend((int(i) + 1, _NOT_UNDERSTOOD) for i in scan.orphans.to_list())
        struct = scan.struct
        for row in struct.filter(pl.col("kind") == _BANNER).iter_rows(named=True):
            m = re.match(_BANNER_RE, row["line"])
            if m is None:  # pragma: no cover - classified with the same pattern
                continue
            self.runs[self.current_run].closed = True
            rid = max(self.runs) + 1
            self.runs[rid] = _Run(rid, host=m.group("host").strip() or None,
                                  banner_date=m.group("date").strip(),
                                  banner_line=int(row["i"]) + 1)
            self.banner_i.append(int(row["i"]))
            self.banner_run.append(rid)
            self.current_run = rid
        run_of = self._run_of(struct["i"])
        struct = struct.with_columns(run_of.alias("run"))
        run_id, kind = run_of.to_numpy(), struct["kind"].to_numpy()
        for rid in np.unique(run_id[kind == _TS]).tolist():
            self.runs[int(rid)].has_ts = True
        for rid in np.unique(run_id[kind == _CPUH]).tolist():
            self.runs[int(rid)].has_cpu = True
        # a report starts at its -t stamp, else its avg-cpu header, else its first table
        # (not a -p ALL partition table's header, which follows its disks' table)
        ts_runs = [r for r, run in self.runs.items() if run.has_ts]
        cpu_runs = [r for r, run in self.runs.items() if run.has_cpu]
        start = (kind == _TS) | ((kind == _CPUH) & ~np.isin(run_id, ts_runs))
        devh = np.flatnonzero((kind == _DEVH) & ~np.isin(run_id, ts_runs + cpu_runs))
        if devh.size:
            part = struct["line"].gather(devh).str.contains(_PART_RE).to_numpy()
            start[devh[~part]] = True
        starts = struct["i"].to_numpy()[start]
        first_id = self.next_report
        open_id = self.open_report

        # number of report starts at or above each line, for the lines from the first start
        count = np.zeros(0, dtype=np.int64)
        if starts.size:
            top = max(int(f["i"][-1]) for f in (struct, scan.rows, scan.cpu) if f.height)
            marks = np.zeros(top - int(starts[0]) + 1, dtype=np.int64)
            marks[starts - starts[0]] = 1
            count = np.cumsum(marks)

        def report_of(frame: pl.DataFrame) -> pl.DataFrame:
            """The report of each line: the open one before the piece's first start.

            Frames are in file order and report ids consecutive, so the report of a line is
            the number of starts at or above it, offset; the lines before the first start
            are a prefix (null before the file's first report: a fragment's lead)."""
            i = frame["i"].to_numpy()
            before = int(np.searchsorted(i, starts[0])) if starts.size else i.size
            rep = np.empty(i.size, dtype=np.int64)
            if before < i.size:
                rep[before:] = count[i[before:] - starts[0]] + (first_id - 1)
            out = pl.Series("report", rep)
            if before:
                out = pl.concat([pl.Series("report", [open_id] * before, dtype=pl.Int64),
                                 out.slice(before)])
            return frame.with_columns(out)

        struct = report_of(struct)
        rows = report_of(scan.rows)
        cpu = report_of(scan.cpu)
        if starts.size:
            if self.first_start is None:
                self.first_start = int(starts[0])
            self.next_report += int(starts.size)
            self.open_report = self.next_report - 1
            self.open_start = int(starts[-1])
        # lines before the file's first report start: a fragment's leading partial report
        # (a prefix of each frame, whose report is null)
        lead_struct = struct["report"].null_count()
        lead_rows = rows["report"].null_count()
        lead_cpu = cpu["report"].null_count()
        orphans = scan.orphans
        lead_orphans = (orphans.len() if self.first_start is None
                        else int((orphans < self.first_start).sum()))
        n_lead = (struct.head(lead_struct).filter(pl.col("kind") != _BANNER).height
                  + lead_rows + lead_orphans)
        if n_lead:
            self.lead_lines += n_lead
        if not self.started and self.first_start is not None:
            self.started = True
            self._leading(self.first_start)
        self.carry_struct.append(struct.slice(lead_struct))
        self.carry_rows.append(rows.slice(lead_rows))
        self.carry_cpu.append(cpu.slice(lead_cpu))
        all_struct = _stack(self.carry_struct)
        all_rows = _stack(self.carry_rows)
        all_cpu = _stack(self.carry_cpu)
        self.carry_struct, self.carry_rows, self.carry_cpu = [], [], []
        keep_open = not final
        if self.open_report is not None and (keep_open or (
                final and self._cut(all_struct, all_rows, scan))):
            # the open report (the last one: a suffix of each frame) waits for the next
            # piece; at the end it is a cut report, dropped with what could not be read of it
            if final:
                cut_from = self.open_start
                self.bad = [(ln, r) for ln, r in self.bad if ln - 1 < cut_from]
            split = [int(f["report"].search_sorted(self.open_report, side="left"))
                     for f in (all_struct, all_rows, all_cpu)]
            if keep_open:
                self.carry_struct = [all_struct.slice(split[0])]
                self.carry_rows = [all_rows.slice(split[1])]
                self.carry_cpu = [all_cpu.slice(split[2])]
            all_struct, all_rows, all_cpu = (all_struct.head(split[0]),
                                             all_rows.head(split[1]), all_cpu.head(split[2]))
        self._collect(all_struct, all_rows, all_cpu)

    def _run_of(self, idx: pl.Series) -> pl.Series:
        """Run id of lines ``idx`` (the run of the last banner at or above, else run 0)."""
        if not self.banner_i:
            return pl.Series("run", np.zeros(idx.len(), dtype=np.int64))
        runs = np.array([0, *self.banner_run], dtype=np.int64)
        at = np.searchsorted(np.array(self.banner_i, dtype=np.int64), idx.to_numpy(),
                             side="right")
        return pl.Series("run", runs[at])

    def _leading(self, first_start: int) -> None:
        """Notes about the lines before the file's first complete report."""
        if self.lead_lines:
            self.source.note(f"the file starts in the middle of a report: {self.lead_lines} "
                             f"line(s) before line {first_start + 1}, the first complete "
                             "report, were not imported")
        run = self._run_of(pl.Series([first_start], dtype=pl.Int64))[0]
        if (self.runs[int(run)].banner_line is None
                and self.source.first_report is FirstReport.AUTO):
            self.source.note("no 'Linux … (host) date' banner before the first report: the "
                             "file looks like a fragment of a longer log, so no report is "
                             "taken as iostat's since-boot summary")

    def _cut(self, struct: pl.DataFrame, rows: pl.DataFrame, scan: _Scan) -> bool:
        """Whether the file's last report was cut (see the module docstring); notes it."""
        rep = self.open_report
        if rep is None:
            return False
        body = struct.filter((pl.col("report") == rep) & (pl.col("kind") != _BANNER))
        last_rows = rows.filter(pl.col("report") == rep)
        if body.height == 0:
            return False
        size = body.height + last_rows.height
        cut = False
        if not scan.newline and scan.last_row >= 0 and \
                scan.last_row >= int(body["i"].max()):  # type: ignore[arg-type]
            cut = True  # the last line has no newline: written while iostat was printing it
        elif scan.last_kind != _BLANK:
            # no closing blank line: a cut if it has fewer lines than the report before
            # (in this batch, or the last one of the previous batch)
            prev_body = struct.filter((pl.col("report") == rep - 1)
                                      & (pl.col("kind") != _BANNER))
            prev = self.last_size
            if prev_body.height:
                prev = (int(prev_body["run"][0]), prev_body.height
                        + rows.filter(pl.col("report") == rep - 1).height)
            cut = prev is not None and prev[0] == int(body["run"][0]) and size < prev[1]
        if cut:
            self.source.note(f"the last report (from line {self.open_start + 1}) is "
                             "incomplete — the file was probably copied while iostat was "
                             "still writing it — and was not imported "
                             f"({last_rows.height} device line(s) dropped)")
            self.dropped_tail = True
        return cut

    # ---- the steady state of a -t log -------------------------------------------------------
    def steady_run(self) -> _Run | None:
        """The run a piece may continue by :meth:`steady`, or None.

        The steady state: the date order is decided, nothing is pending or unreadable, no
        value was read as text, and the current run's reports start at their stamps, carry
        avg-cpu values, and have a known interval and a previous time."""
        if (not _STEADY or not self.started or self.order is None or not self.order.certain
                or self.pending.reports or self.bad or self.unclean):
            return None
        run = self.runs[self.current_run]
        if not (run.has_ts and run.has_cpu and run.nominal_fixed and run.reports
                and run.nominal_s is not None and run.last_utc is not None):
            return None
        return run

    def steady(self, lines: _Lines, kind: np.ndarray, lo: int, hi: int, line0: int
               ) -> list[SampleFrame] | None:
        """Lines ``lo`` .. ``hi - 1`` of a piece (``line0`` lines above its line ``lo``) as
        whole reports of the steady state, linked without the general path; None, with
        nothing done, when they are not.

        Whole reports of the steady state are exactly what ``iostat -x -t`` prints: stamp,
        avg-cpu header, values, blank, the Device header the run had, fixed-width device
        lines whose every value is read by the fixed-width decoder, blank. Their rows are
        then the device lines as read, and each report's time, interval, host and CPU
        values are one pass over the reports (the general path stacks, joins and filters
        frames of every line kind). The open report of the general path, if any, is
        complete (the piece starts with a report) and is linked first. The result is the
        same as the general path's: :meth:`_assemble` builds the frame, the stamps are read
        by :meth:`_steady_stamps` (the byte kernel, else ``parse_local``), and the tests
        run every fixture, damaged logs and a daylight-saving change both ways.
        """
        run = self.steady_run()
        if run is None or run.last_utc is None or run.nominal_s is None or hi <= lo:
            return None  # (steady_run checks the two, but the type checker cannot see it)
        nominal_s = float(run.nominal_s)
        k = kind[lo:hi]
        ts = np.flatnonzero(k == _TS)
        if ts.size == 0 or ts[0] != 0:
            return None
        ends = np.append(ts[1:], hi - lo)  # report r is lines ts[r] .. ends[r] - 1
        n_rows = ends - ts - 6
        if (n_rows < 1).any():
            return None
        expect = np.full(hi - lo, _ROW, dtype=np.uint8)
        for off, kd in ((0, _TS), (1, _CPUH), (2, _CPUV), (3, _BLANK), (4, _DEVH)):
            expect[ts + off] = kd
        expect[ends - 1] = _BLANK
        if not np.array_equal(k, expect):
            return None
        ts += lo  # indices into the piece from here on
        dev_text = _same_lines(lines, ts + 4)
        cpu_text = _same_lines(lines, ts + 1)
        lay = self.layouts.get(dev_text) if dev_text is not None else None
        if (cpu_text is None or lay is None or lay.device_last or lay.part or not lay.cols
                or lay.ends[1] - _DEVICE_WIDTH < 2):
            return None
        rows = np.flatnonzero(k == _ROW) + lo
        header_len = len(lay.text.encode("utf-8"))
        if not bool((lines.lens[rows] == header_len).all()):
            return None
        values, ok = _decode_lines(lines, rows, header_len, lay.fixed_fields())
        grouped = _name_groups(lines, rows, _DEVICE_WIDTH)
        if grouped is not None:
            names, valid, code = grouped
            named = all(valid)
            device = pl.Series("device", names, dtype=pl.String).gather(
                pl.Series("code", code))
        else:
            device, named_rows = _device_names(lines.matrix(rows, header_len), _DEVICE_WIDTH)
            named = bool(named_rows.all())
            names = device.unique().to_list()
        _names, cpu_cols, cpu_width = _cpu_columns(cpu_text)
        cpu_at = ts + 2
        if not (ok.all() and named and (lines.lens[cpu_at] == cpu_width).all()):
            return None
        cpu_values: list[np.ndarray] = []
        if cpu_cols:
            cpu_values, cpu_ok = _decode_lines(lines, cpu_at, cpu_width,
                                               [(a, b) for _t, _j, a, b in cpu_cols])
            if not cpu_ok.all():
                return None
        read = self._steady_stamps(lines, ts)
        if read is None:
            return None
        stamps = read.alias("ts")
        # every test passed: from here on the parser's state changes
        frames: list[SampleFrame] = []
        opened = self.close_open()
        if opened is not None and len(opened):
            frames.append(opened)
        # (read after the general path's open report is linked: its time is the previous
        # one of this piece's first report; read before, the time of the report before it
        # was used and the first interval came out a report too long - the damaged-log
        # property test found it, with a stamp line lost)
        last_utc = run.last_utc
        if last_utc is None:  # pragma: no cover - steady_run checked it; close_open keeps it
            raise AssertionError("a steady run without a previous time")
        n_rep = ts.size
        host = run.host or self.host_default
        # each report's interval: _interval's rule on the microseconds (one report per
        # stamp, the first one's step from the run's last time)
        us = stamps.to_physical().to_numpy()
        prev = np.empty_like(us)
        prev[0] = _utc_us(last_utc)
        prev[1:] = us[:-1]
        step_s = (us - prev).astype(np.float64) / 1e6
        interval_s = np.where((step_s <= 0) | (np.abs(step_s - nominal_s) <= 1.0), nominal_s,
                              step_s)
        # the frame is built whole: a report's values repeated over its rows, the names'
        # kinds from the few distinct names (what _assemble does with joins and a unique)
        at = np.repeat(np.arange(n_rep), n_rows)
        cols: dict[str, pl.Series] = {"device": device, **lay.columns(values)}
        for (target, _j, _a, _b), v in zip(cpu_cols, cpu_values, strict=True):
            cols[target] = pl.Series(target, np.repeat(v, n_rows))
        cols["ts"] = stamps.gather(at)
        cols["interval_s"] = pl.Series("interval_s", np.repeat(interval_s, n_rows))
        frame = _with_total_kbps(pl.DataFrame(cols))
        info = _device_info(names)
        frame = frame.with_columns(
            pl.lit(NAME).alias("source"), pl.lit(host, dtype=pl.String).alias("host"),
            pl.lit(False).alias("since_boot"),  # not a run's first report
            _per_device(info, "parent").alias("parent"),
            _per_device(info, "device_kind").alias("device_kind"))
        # _trusted's rules, on the reports and the distinct names
        trusted = bool(host is not None and np.isfinite(interval_s).all()
                       and (interval_s > 0).all()
                       and info["device_kind"].is_in(sorted(DEVICE_KINDS)).all()
                       and info["device_kind"].null_count() == 0)
        run.last_utc = stamps[-1]
        self.next_report += n_rep
        run.reports += n_rep
        self.reports_out += n_rep
        self.last_size = (run.run_id, 4 + int(n_rows[-1]))  # stamp, avg-cpu x2, Device
        frames.append(SampleFrame(frame, validate=not trusted))
        return frames

    def _steady_stamps(self, lines: _Lines, ts: np.ndarray) -> pl.Series | None:
        """UTC times of the stamp lines ``ts`` of a steady piece, read by the byte kernel
        ``ig_stamps`` when every stamp has the first one's shape, else (and without the
        kernels) by :func:`timestamps.parse_local`; None when any of them is not a possible
        time (impossible date, daylight-saving gap ...): the piece then takes the general
        path, which names the line (or, as it reads dates, judges the date order again)."""
        kern = _kernels()
        order = self.order.order if self.order is not None else "MDY"
        shape = None if kern is None else tsx.fixed_shape(lines.text(ts[:1])[0], order)
        local: pl.Series | None = None
        offset: pl.Series | None = None
        if kern is not None and shape is not None:
            us, ok = kern.stamps(lines.arr, lines.starts, lines.ends, ts, shape.template,
                                 shape.classes, list(shape.at), shape.ampm)
            if ok.all():
                local = pl.Series("local", us).cast(pl.Datetime("us"))
        if local is None:
            parsed = tsx.parse_local(lines.text(ts), order)
            local, offset = parsed["local"], parsed["offset_min"]
            if local.null_count():
                return None
        utc, note = tsx.to_utc(local, offset, self.source.tz)
        if utc.null_count():
            return None
        if note:
            self.source.note(note)
        return utc

    def close_open(self) -> SampleFrame | None:
        """Link the open report as complete (the next piece starts with a report)."""
        if self.open_report is None:
            return None
        struct, rows, cpu = (_stack(x) for x in (self.carry_struct, self.carry_rows,
                                                 self.carry_cpu))
        self.carry_struct, self.carry_rows, self.carry_cpu = [], [], []
        self.open_report = None
        self._collect(struct, rows, cpu)
        return self.flush(final=False)

    # ---- complete reports ------------------------------------------------------------------
    def _collect(self, struct: pl.DataFrame, rows: pl.DataFrame, cpu: pl.DataFrame) -> None:
        if struct.height == 0 and rows.height == 0:
            return
        reports = self._reports(struct, cpu)
        if reports.height == 0:
            return
        # size of the last complete report (to judge a cut last report against)
        last = int(reports["report"][-1])
        tail = struct.slice(int(struct["report"].search_sorted(last, side="left")))
        body = tail.height - int((tail["kind"] == _BANNER).sum())
        n_rows = rows.height - int(rows["report"].search_sorted(last, side="left"))
        self.last_size = (int(reports["run"][-1]), body + n_rows)
        self.pending.reports.append(reports)
        if rows.height:
            if rows["part"].any():
                measures = [c for c in rows.columns if c not in ("i", "report", "device",
                                                                  "part")]
                rows = (rows.group_by(["report", "device"], maintain_order=True)
                        .agg(pl.col("i").min(), *[pl.col(c).drop_nulls().first()
                                                  for c in measures]).sort("i"))
            self.pending.rows.append(rows.drop("part", strict=False))

    def _reports(self, struct: pl.DataFrame, cpu: pl.DataFrame) -> pl.DataFrame:
        # Frames are in file order, so report (and run) ids never decrease: a report's
        # first line is where its id first appears.
        # (positions found with numpy: a filter and a join per column cost more here than
        # the arithmetic)
        srep = struct["report"].to_numpy()
        firsts = _first_of_each(srep)
        ids = srep[firsts]
        rep = struct.select(pl.col("report", "run").gather(firsts),
                            (pl.col("i").gather(firsts) + 1).alias("start_line"))
        # the first -t stamp line of each report, and the first avg-cpu values
        tsp = np.flatnonzero(struct["kind"].to_numpy() == _TS)
        tsp = tsp[_first_of_each(srep[tsp])]
        at = np.searchsorted(ids, srep[tsp])
        line, i = struct["line"].gather(tsp), struct["i"].gather(tsp) + 1
        cols = [_spread(line.alias("ts_text"), at, ids.size),
                _spread(i.alias("ts_line"), at, ids.size)]
        cpu_cols = [c for c in _CPU_TARGETS if c in cpu.columns]
        crep = cpu["report"].to_numpy()
        cfirst = _first_of_each(crep)
        at = np.searchsorted(ids, crep[cfirst])
        mine = at < ids.size
        mine[mine] = ids[at[mine]] == crep[cfirst][mine]  # reports of this frame only
        cols += [_spread(cpu[c].gather(cfirst[mine]), at[mine], ids.size) for c in cpu_cols]
        rep = rep.with_columns(cols)
        # ordinal of each report in its run (runs continue across pieces)
        run = rep["run"].to_numpy()
        at = np.arange(run.size)
        new_run = np.ones(run.size, dtype=bool)
        new_run[1:] = run[1:] != run[:-1]
        run_start = np.maximum.accumulate(np.where(new_run, at, 0))
        offsets = np.array([self.runs[int(r)].reports for r in run[new_run]], dtype=np.int64)
        ordinal = at - run_start + offsets[np.cumsum(new_run) - 1]
        rep = rep.with_columns(pl.Series("ordinal", ordinal, dtype=pl.Int64))
        for r, cnt in zip(run[new_run].tolist(), np.diff(np.append(at[new_run], run.size))
                          .tolist(), strict=True):
            self.runs[int(r)].reports += int(cnt)
        if self.order is None or not self.order.certain:  # dates matter until decided
            texts = rep["ts_text"].drop_nulls()
            if texts.len():
                self.dates.append(tsx.stamp_dates(texts))
        return rep

    # ---- resolution: times, intervals, since-boot ------------------------------------------
    def flush(self, *, final: bool) -> SampleFrame | None:
        """Rows whose times can be decided now as a SampleFrame (None if nothing yet)."""
        self._report_bad(final=final)
        if not self.pending.reports:
            return None
        if self.order is None or not self.order.certain:
            dates = [*self.dates]
            banner = self._banner_dates()
            if banner is not None:
                dates.append(banner)
            found = pl.concat(dates, how="vertical_relaxed") if dates else None
            if found is not None and found.height:
                try:
                    order = tsx.infer_date_order(found, self.source_date_order())
                except ValueError as exc:
                    raise InputFormatError(self.source.path, None, str(exc)) from exc
                if not order.certain and not final:
                    return None
                self.order = order
            elif final:
                self.order = tsx.DateOrder(self.source_date_order() or "MDY", True)
        reports = _stack(self.pending.reports).sort("report")
        if not final and not self._intervals_known(reports):
            return None
        if self.order is not None and self.order.note:
            self.source.note(self.order.note)
        resolved = self._resolve(reports)
        rows = (_stack(self.pending.rows)
                if self.pending.rows else None)
        self.pending = _Pending()
        if rows is None or rows.height == 0:
            return None
        return self._assemble(rows, resolved)

    def _report_bad(self, *, final: bool) -> None:
        """Refuse (or count) the unreadable lines of complete reports, in file order.

        Lines of the open report wait (it may turn out to be a cut last report, whose
        damage is not an error); lines before the file's first report belong to a leading
        fragment (noted, not an error).
        """
        if not self.bad:
            return
        limit = None if final or self.open_report is None else self.open_start
        ready = sorted(b for b in self.bad if limit is None or b[0] - 1 < limit)
        self.bad = [b for b in self.bad if not (limit is None or b[0] - 1 < limit)]
        fs = self.first_start
        ready = [b for b in ready if fs is not None and b[0] - 1 >= fs]
        listed = 0
        for ln, reason in ready:
            if listed >= MAX_LISTED_SKIPS and self.source.lenient:
                break
            self.source.bad_line(ln, reason)
            listed += 1
        rest = len(ready) - listed
        if rest > 0:
            self.source.skip(None, "further unreadable lines", count=rest)

    def _banner_dates(self) -> pl.DataFrame | None:
        dates = [r.banner_date for r in self.runs.values() if r.banner_date]
        if not dates:
            return None
        return tsx.stamp_dates(pl.Series(dates, dtype=pl.String), kind="date")

    def source_date_order(self) -> str | None:
        return self.source.date_order

    def _intervals_known(self, reports: pl.DataFrame) -> bool:
        """Whether the interval of every run of ``reports`` can be decided now: a run with
        -t stamps waits for enough of them (the step they show decides, and --interval only
        when they cannot: however the file is cut into pieces, the same reports decide), a
        run without stamps for --interval or its end."""
        for rid in reports["run"].unique().to_list():
            run = self.runs[rid]
            if run.nominal_fixed or run.closed:
                continue
            if not run.has_ts:
                if self.source.interval_s is not None:
                    continue
                return False
            n = int(reports.filter(pl.col("run") == rid).height)
            if n < _MIN_STEPS + 1:
                return False
        return True

    def _resolve(self, reports: pl.DataFrame) -> pl.DataFrame:
        """ts, interval_s, since_boot, host and CPU columns of every pending report."""
        rep = reports
        runs = [int(r) for r in rep["run"].unique(maintain_order=True).to_list()]
        stamped = [r for r in runs if self.runs[r].has_ts]
        plain = [r for r in runs if not self.runs[r].has_ts]
        banner_runs = [r for r in runs if self.runs[r].banner_line is not None]
        hosts = {r: self.runs[r].host or self.host_default for r in runs}
        frames: list[pl.DataFrame] = []
        if stamped:
            frames.append(self._resolve_stamped(rep.filter(pl.col("run").is_in(stamped)),
                                                stamped))
        if plain:
            frames.append(self._resolve_plain(rep.filter(pl.col("run").is_in(plain)), plain))
        times = pl.concat(frames, how="vertical_relaxed")
        cpu_cols = [c for c in _CPU_TARGETS if c in rep.columns]
        # a run's first report: since boot after a banner (checked for plausibility in
        # _assemble), unless --first-report decides (importers/first_report.py)
        choice = self.source.first_report
        if choice is not FirstReport.AUTO:
            first_report.since_boot(self.source, shown_by=None, busiest=None)  # (its note)
        first = pl.col("ordinal") == 0
        boot = (first if choice is FirstReport.SINCE_BOOT else pl.lit(False)
                if choice is FirstReport.MEASURED else first & pl.col("run").is_in(banner_runs))
        out = rep.select(
            "report", "run", boot.alias("since_boot"),
            pl.col("run").replace_strict(hosts, return_dtype=pl.String).alias("host"),
            *cpu_cols)
        return out.join(times, on="report", how="left")

    def _resolve_stamped(self, rep: pl.DataFrame, runs: list[int]) -> pl.DataFrame:
        """Reports with -t stamps: printed times; intervals from successive stamps."""
        utc = self._stamps_utc(rep)
        frame = rep.select("report", "run").with_columns(utc.alias("ts"))
        hint = self.source.interval_s
        open_runs = [r for r in runs if not self.runs[r].nominal_fixed]
        if open_runs:
            steps = (frame.filter(pl.col("run").is_in(open_runs))
                     .with_columns(pl.col("ts").diff().over("run").dt.total_microseconds()
                                   .alias("step"))
                     .filter(pl.col("step") > 0))
            counts = steps.group_by("run", "step").len()
            best = (counts.sort(["run", "len", "step"], descending=[False, True, False])
                    .group_by("run", maintain_order=True).first())
            found = {int(r): float(st) / 1e6 for r, st, _ in best.iter_rows()}
            for r in open_runs:
                run = self.runs[r]
                known = found.get(r)
                if hint is not None and known is not None and abs(known - hint) > 1.0:
                    self.source.note(f"--interval {hint:g} s differs from the {known:g} s "
                                     "between the report times; the report times are used")
                if known is None:
                    known = hint  # one report: only the hint can tell
                if known is not None:
                    run.nominal_s = known
                    run.nominal_fixed = True
        for r in runs:
            if self.runs[r].nominal_s is None:
                self.runs[r].nominal_s = self._no_interval(
                    self.runs[r], rep.filter(pl.col("run") == r))
        nominal = {r: float(self.runs[r].nominal_s or UNKNOWN_INTERVAL_S) for r in runs}
        utc_us = pl.Datetime("us", "UTC")
        if len(runs) == 1:  # the usual batch: one run, no window over runs needed
            prev0 = pl.lit(self.runs[runs[0]].last_utc, dtype=utc_us)
            prev = pl.when(pl.int_range(pl.len()) == 0).then(prev0).otherwise(
                pl.col("ts").shift(1))
            nom = pl.lit(nominal[runs[0]], dtype=pl.Float64)
        else:
            last = {r: self.runs[r].last_utc for r in runs if self.runs[r].last_utc is not None}
            prev_state = pl.DataFrame({"run": list(last), "prev0": list(last.values())},
                                      schema={"run": pl.Int64, "prev0": utc_us})
            frame = frame.join(prev_state, on="run", how="left", maintain_order="left")
            first = pl.int_range(pl.len()).over("run") == 0
            prev = pl.when(first).then(pl.col("prev0")).otherwise(
                pl.col("ts").shift(1).over("run"))
            nom = pl.col("run").replace_strict(nominal, return_dtype=pl.Float64)
        out = frame.select("report", "ts", _interval(prev, nom, first=False).alias("interval_s"),
                           "run")
        # each run's last time (the next batch's first step is measured from it)
        stamped = out.filter(pl.col("ts").is_not_null())
        ends = _first_of_each(stamped["run"].to_numpy()[::-1])  # runs never decrease
        for r, t in stamped.select("run", "ts").reverse()[ends].iter_rows():
            self.runs[int(r)].last_utc = t
        return out.drop("run")

    def _stamps_utc(self, rep: pl.DataFrame) -> pl.Series:
        order = self.order or tsx.DateOrder("MDY", True)  # decided before any stamp is read
        parsed = tsx.parse_local(rep["ts_text"], order.order)
        local = parsed["local"]
        if local.null_count() > rep["ts_text"].null_count():
            bad = rep.with_columns(local.alias("_l")).filter(
                pl.col("ts_text").is_not_null() & pl.col("_l").is_null())
            for ln, text in bad.select("ts_line", "ts_text").iter_rows():
                self.source.bad_line(int(ln), f"time stamp {text.strip()!r} is not a valid "
                                              f"date and time read as {order.order}")
        utc, note = tsx.to_utc(local, parsed["offset_min"], self.source.tz)
        if note:
            self.source.note(note)
        if utc.null_count() == local.null_count():
            return utc
        gap = rep.with_columns(local.alias("_l"), utc.alias("_u")).filter(
            pl.col("_l").is_not_null() & pl.col("_u").is_null())
        for ln, text in gap.select("ts_line", "ts_text").iter_rows():
            self.source.bad_line(int(ln), f"time stamp {text.strip()!r} does not exist in "
                                          f"zone {self.source.tz} (daylight-saving gap): is "
                                          "--tz the zone the log was written in?")
        return utc

    def _resolve_plain(self, rep: pl.DataFrame, runs: list[int]) -> pl.DataFrame:
        """Reports without -t stamps: start (or banner midnight) + k * interval.

        The since-boot report is printed when iostat starts (k = 0); report k ends k
        intervals later. A run without a banner has no since-boot report: its first report
        ends one interval after the start.
        """
        anchors: dict[int, datetime] = {}
        steps: dict[int, int] = {}
        shifts: dict[int, int] = {}
        nominal: dict[int, float] = {}
        for r in runs:
            run = self.runs[r]
            sub = rep.filter(pl.col("run") == r)
            relative = self._relative(run, sub)
            value = self.source.interval_s
            if value is None:
                value = timeline.NOMINAL_INTERVAL_S if relative else self._no_interval(run, sub)
            run.nominal_s = value
            if run.anchor is None:
                run.anchor = self._relative_anchor(run) if relative else self._anchor(run, value)
            anchors[r] = run.anchor
            steps[r] = round(value * 1e6)
            # (on the relative line report k of the file ends k intervals after its start)
            shifts[r] = 0 if run.banner_line is not None and not relative else 1
            nominal[r] = value
            last_ord = int(sub["ordinal"].max())  # type: ignore[arg-type]
            run.last_utc = run.anchor + timedelta(microseconds=(last_ord + shifts[r]) * steps[r])
        run_c = pl.col("run")
        offset = ((pl.col("ordinal") + run_c.replace_strict(shifts, return_dtype=pl.Int64))
                  * run_c.replace_strict(steps, return_dtype=pl.Int64))
        anchor = run_c.replace_strict(anchors, return_dtype=pl.Datetime("us", "UTC"))
        return rep.select("report", (anchor + pl.duration(microseconds=offset)).alias("ts"),
                          run_c.replace_strict(nominal, return_dtype=pl.Float64)
                          .alias("interval_s"))

    def _relative(self, run: _Run, rep: pl.DataFrame) -> bool:
        """Whether a run without time stamps goes on the relative time line
        (``model.timeline``): no --start, and no interval, or no banner date to count from;
        a file holding only the since-boot summary keeps its banner date."""
        if self.source.start is not None or run.anchor is not None:
            return run.anchor is not None and timeline.is_relative(run.anchor)
        if self.source.interval_s is not None:
            return run.banner_date is None
        measured = rep.filter(~((pl.col("ordinal") == 0) & pl.lit(run.banner_line is not None)))
        return measured.height > 0 or run.banner_date is None

    def _relative_anchor(self, run: _Run) -> datetime:
        """Start of a run on the relative line: the epoch, or where the run before ended."""
        self.source.note(timeline.placement_note(self.source.interval_s))
        prev_end = max((r.last_utc for r in self.runs.values()
                        if r.last_utc is not None and r.run_id < run.run_id), default=None)
        return prev_end if prev_end is not None else timeline.RELATIVE_EPOCH

    def _no_interval(self, run: _Run, rep: pl.DataFrame) -> float:
        measured = rep.filter(~((pl.col("ordinal") == 0)
                                & pl.lit(run.banner_line is not None)))
        if measured.height:
            raise InputFormatError(
                self.source.path, int(measured["start_line"][0]),
                "the sampling interval of these iostat reports is not in the file (a single "
                "measured report, or reports without -t time stamps): give it with "
                "--interval SECONDS — the number after the options on the iostat command "
                "line, e.g. 5 for 'iostat -x 5'")
        if self.source.interval_s is None:
            self.source.note("the file holds only iostat's since-boot summary (no interval "
                             "on the command line): its rows are flagged since_boot with a "
                             f"nominal interval_s of {UNKNOWN_INTERVAL_S:g} s")
        return self.source.interval_s or UNKNOWN_INTERVAL_S

    def _anchor(self, run: _Run, step_s: float) -> datetime:
        """Start of a run without time stamps: --start, else midnight of its banner date,
        but one interval after the previous run's last report when that is later (runs
        placed end to end, so no two reports share a time)."""
        prev_end = max((r.last_utc for r in self.runs.values()
                        if r.last_utc is not None and r.run_id < run.run_id), default=None)
        if self.source.start is not None and prev_end is None:
            start = self.source.start
            if start.tzinfo is None:
                utc, _ = tsx.to_utc(pl.Series([start], dtype=pl.Datetime("us")), None,
                                    self.source.tz)
                start = utc[0]
            return start.astimezone(UTC)
        if run.banner_date is None:
            raise InputFormatError(
                self.source.path, None,
                "the iostat reports carry no time stamps (iostat was run without -t) and the "
                "file has no 'Linux … (host) date' banner: give the start time with --start "
                "and the interval with --interval")
        order = self.order.order if self.order is not None else "MDY"
        parsed = tsx.parse_local(pl.Series([run.banner_date], dtype=pl.String), order,
                                 kind="date")
        utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], self.source.tz)
        if utc[0] is None:
            raise InputFormatError(self.source.path, run.banner_line,
                                   f"banner date {run.banner_date!r} is not a date")
        if note:
            self.source.note(note)
        anchor: datetime = utc[0]
        if self.source.start is None:
            self.source.note(
                "the log has no time stamps (iostat was run without -t): report times are "
                f"counted from midnight of the banner date ({run.banner_date}) in steps of the "
                "interval; only their spacing is real (give --start for the real start time)")
        if prev_end is not None and prev_end + timedelta(seconds=step_s) > anchor:
            anchor = prev_end + timedelta(seconds=step_s)
        return anchor

    def _assemble(self, rows: pl.DataFrame, reports: pl.DataFrame) -> SampleFrame:
        """Device rows + their report's time, interval, flags, host and CPU -> SampleFrame."""
        reports = reports.sort("report")
        ids = reports["report"]
        first, last = ids[0], ids[-1]
        if last - first + 1 == ids.len():  # consecutive ids (always, but for a cut report)
            pos = (rows["report"] - first).cast(pl.UInt32)
        else:
            pos = ids.search_sorted(rows["report"]).cast(pl.UInt32)
        per_report = [c for c in reports.columns if c not in ("report", "run")]
        joined = rows.with_columns(reports.select(per_report)[pos])
        if joined["ts"].null_count():
            # rows of a report whose time stamp was refused (--lenient) have no time
            joined = joined.filter(pl.col("ts").is_not_null())
        joined = self._since_boot_on_evidence(joined)
        joined = _with_total_kbps(joined)
        info = _device_info(joined["device"].unique().to_list())
        # a mapping of the few names, not a join (which would copy every column); a
        # constant when all devices agree (no partitions, one kind: the usual log)
        joined = joined.with_columns(
            _per_device(info, "parent").alias("parent"),
            _per_device(info, "device_kind").alias("device_kind"))
        measures = [c for c in joined.columns if c not in (
            "i", "report", "device", "parent", "device_kind", "ts", "interval_s",
            "since_boot", "host")]
        if self.unclean:
            joined = self._clean_values(joined, measures)
        self.reports_out += int(reports.height)
        frame = joined.select(
            pl.lit(NAME).alias("source"), "host", "device", "device_kind", "parent", "ts",
            "interval_s", "since_boot", *measures)
        return SampleFrame(frame, validate=not _trusted(reports, info, rows))

    def _since_boot_on_evidence(self, rows: pl.DataFrame) -> pl.DataFrame:
        """A banner's first report stays since-boot only when it is plausible as an average
        since boot (importers/first_report.py): else it is measured, with a note."""
        if self.source.first_report is not FirstReport.AUTO or not rows["since_boot"].any():
            return rows
        boot = rows.filter(pl.col("since_boot"))
        measured: list[int] = []
        for (report,), part in boot.group_by("report", maintain_order=True):
            if not first_report.since_boot(
                    self.source, busiest=first_report.busiest(part),
                    shown_by="the 'Linux … (host) date' banner before it: iostat prints its "
                    "since-boot summary first ([sysstat] iostat(1))"):
                measured.append(int(report))
        if not measured:
            return rows
        return rows.with_columns(pl.col("since_boot") & ~pl.col("report").is_in(measured))

    def _clean_values(self, df: pl.DataFrame, measures: list[str]) -> pl.DataFrame:
        """NaN/inf (old sysstat prints nan) and negative values (counter bugs) -> null."""
        def bad(m: str) -> pl.Expr:
            return pl.col(m).is_nan() | pl.col(m).is_infinite() | (pl.col(m) < 0)
        if not measures or not df.select(pl.any_horizontal([bad(m) for m in measures])
                                         .any()).item():
            return df
        checks = df.select([(pl.col(m).is_nan() | pl.col(m).is_infinite()).sum().alias(m)
                            for m in measures] + [(pl.col(m) < 0).sum().alias(f"neg_{m}")
                                                  for m in measures])
        nan = {m: int(checks[m][0]) for m in measures if int(checks[m][0])}
        neg = {m: int(checks[f"neg_{m}"][0]) for m in measures if int(checks[f"neg_{m}"][0])}
        if nan:
            self.source.note("values printed as nan/inf were read as not measured (null): "
                             + ", ".join(f"{m} x{c}" for m, c in nan.items()))
        if neg:
            self.source.note("negative values (a kernel or sysstat counter glitch) were read "
                             "as not measured (null): "
                             + ", ".join(f"{m} x{c}" for m, c in neg.items()))
        return df.with_columns([pl.when(bad(m)).then(None).otherwise(pl.col(m)).alias(m)
                                for m in {*nan, *neg}])


def _interval(prev: pl.Expr, nominal: pl.Expr, *, first: bool = True) -> pl.Expr:
    """interval_s of stamped reports (column ``ts``): the step from the time before, unless
    it is within 1 s of the run's ``nominal`` interval (iostat's stamps have one-second
    resolution), not positive or unknown. ``prev``: the time before each report, or with
    ``first`` the time before the first one (the others follow ``ts``)."""
    if first:
        prev = pl.when(pl.int_range(pl.len()) == 0).then(prev).otherwise(pl.col("ts").shift(1))
    step = (pl.col("ts") - prev).dt.total_microseconds().cast(pl.Float64) / 1e6
    return (pl.when(step.is_null() | (step <= 0) | ((step - nominal).abs() <= 1.0))
            .then(nominal).otherwise(step))


def _with_total_kbps(df: pl.DataFrame) -> pl.DataFrame:
    """kBps = read + (write + discard) when a layout printed the latter together (the
    basic ``-s`` report's ``kB_w+d/s``)."""
    if "_wd_kBps" not in df.columns:
        return df
    read = pl.col("r_kBps") if "r_kBps" in df.columns else pl.lit(None)
    return df.with_columns((read + pl.col("_wd_kBps")).alias("kBps")).drop("_wd_kBps")


def _utc_us(t: datetime) -> int:
    """Microseconds since 1970 of ``t`` (UTC when naive), exactly."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return (t - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _same_lines(lines: _Lines, idx: np.ndarray) -> str | None:
    """The text of the lines ``idx`` when they are all the same bytes, else None."""
    width = int(lines.lens[idx[0]])
    if not bool((lines.lens[idx] == width).all()):
        return None
    mat = lines.matrix(idx, width)
    if not bool((mat == mat[0]).all()):
        return None
    text: str = lines.text(idx[:1])[0]
    return text


def _device_info(names: list[str]) -> pl.DataFrame:
    """One row per device name: its ``parent`` (a partition's disk, else null) and its
    ``device_kind`` (``partition`` or the kind its name tells)."""
    parents = [guess_parent(d) for d in names]
    return pl.DataFrame({
        "device": names, "parent": parents,
        "device_kind": ["partition" if p is not None else kind_from_name(d)
                        for d, p in zip(names, parents, strict=True)],
    }, schema={"device": pl.String, "parent": pl.String, "device_kind": pl.String})


def _per_device(info: pl.DataFrame, column: str) -> pl.Expr:
    """``info[column]`` (one row per device) for every row, by its ``device``."""
    values = info[column]
    if values.n_unique() == 1:
        return pl.lit(values[0], dtype=pl.String)
    return pl.col("device").replace_strict(info["device"], values, return_dtype=pl.String)


def _first_of_each(ids: np.ndarray) -> np.ndarray:
    """Positions where each value of the non-decreasing ``ids`` first appears."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.empty(ids.size, dtype=bool)
    change[0] = True
    np.not_equal(ids[1:], ids[:-1], out=change[1:])
    return np.flatnonzero(change)


def _spread(values: pl.Series, at: np.ndarray, n: int) -> pl.Series:
    """``values`` placed at positions ``at`` of a series of ``n`` nulls (a left join on
    positions already found)."""
    if at.size == n:  # every position filled: ``at`` is 0..n-1 (sorted, distinct)
        return values
    out = pl.Series(values.name, [None] * n, dtype=values.dtype)
    return out.scatter(at, values) if at.size else out


def _trusted(reports: pl.DataFrame, devices: pl.DataFrame, rows: pl.DataFrame) -> bool:
    """Whether the SampleFrame assembled from ``rows`` needs no row-by-row validation.

    Every column of it comes from a report (time, interval, flag, host, CPU), a device
    (name, kind, parent) or a value of the device line. :meth:`SampleFrame.validate`'s
    rules are checked here on the few reports and devices instead of the many rows; the
    values need no check when every one was read by :func:`_decode_fixed` (digits only:
    finite and >= 0) or went through :meth:`_Parser._clean_values`, which the parser runs
    whenever one was read as text (``_Parser.unclean``). Anything else (a zone gap left a time
    null, an impossible interval) returns False and the frame is validated in full, which
    names the offending row.
    """
    stamped = reports.filter(pl.col("ts").is_not_null())
    iv = stamped["interval_s"]
    return bool(
        rows["device"].null_count() == 0
        and stamped["host"].null_count() == 0 and stamped["since_boot"].null_count() == 0
        and iv.null_count() == 0
        and (iv.len() == 0 or bool(((iv > 0) & iv.is_finite()).all()))
        and devices["device_kind"].is_in(sorted(DEVICE_KINDS)).all()
        and devices["device_kind"].null_count() == 0)


def _number(tok: pl.Expr) -> pl.Expr:
    """A printed number: decimal comma accepted, a trailing % dropped."""
    return (tok.str.strip_chars_end("%").str.replace(",", ".", literal=True)
            .cast(pl.Float64, strict=False))


def human_value(tok: pl.Expr, spec: ColumnSpec) -> pl.Expr:
    """A value as iostat printed it, in SampleFrame units (see :data:`_SUFFIX_FACTOR`).

    A size with a --human suffix is absolute (k = 1 kB, M = 1024 kB), so the column's own
    unit factor (MB, sectors) applies only to unsuffixed values.
    """
    last = tok.str.slice(-1, 1)
    num = _number(tok.str.strip_chars_end("BkKMGTPEZY"))
    if not spec.size:
        value = _number(tok)
        return value * spec.factor if spec.factor != 1.0 else value
    suffix = pl.lit(None, pl.Float64)
    for letter, mult in _SUFFIX_FACTOR.items():
        suffix = pl.when(last == letter).then(pl.lit(mult)).otherwise(suffix)
    return pl.when(suffix.is_not_null()).then(num * suffix).otherwise(
        _number(tok) * spec.factor)


# ---- public entry points -------------------------------------------------------------------


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES,
               link_bytes: int = LINK_BYTES,
               workers: int | None = None) -> Iterator[SampleFrame]:
    """Parse an iostat text stream piece by piece, yielding SampleFrames in file order.

    Pieces of about ``chunk_bytes`` (cut after a blank line) are scanned by ``workers``
    threads (0: in this thread; default: see :data:`_WORKERS`) while this one links reports
    and times in batches of about ``link_bytes``; with no worker threads, pieces of a ``-t``
    log in its steady state take the steady path (``_Parser.steady``). Memory is bounded by
    the pieces in flight and the batch, plus the rows of reports whose times cannot be
    decided yet (a file whose dates are all ambiguous between day/month and month/day is
    held until its end, and so is a run without -t until its interval is known). Notes and
    skipped lines go to ``source`` as with :func:`parse`.
    """
    parser = _Parser(source)
    if workers is None:
        workers = _WORKERS
    batch: list[_Scan] = []
    batch_bytes = 0
    lines_above = 0

    def take(scan: _Scan, size: int, final: bool, *, force: bool = False
             ) -> Iterator[SampleFrame]:
        """Phase B on batches of about ``link_bytes`` of pieces, at the end, or now."""
        nonlocal batch_bytes, lines_above
        batch.append(_shift(scan, lines_above))
        lines_above += scan.n_lines  # a piece but the last ends with a newline
        batch_bytes += size
        if not (final or force) and batch_bytes < max(link_bytes, chunk_bytes):
            return
        parser.add(_merge(batch), final=final)
        batch.clear()
        batch_bytes = 0
        frame = parser.flush(final=final)
        if frame is not None and len(frame):
            yield frame

    if workers <= 0:  # everything in this thread
        carry = b""  # the last report of a piece linked by the steady path: the next one's
        for piece, last in _chunks(stream, chunk_bytes,
                                   min(chunk_bytes, FIRST_BYTES) if _STEADY else None):
            buf = piece
            if carry:
                buf[0:0] = carry
                carry = b""
            if not last and not batch and buf.isascii() and parser.steady_run() is not None:
                lines = _Lines(buf if _kernels() is not None else bytes(buf))
                kind = _classify(lines)
                ts = np.flatnonzero(kind == _TS)
                if ts.size > 1:
                    lo, hi = int(ts[0]), int(ts[-1])
                    at_lo, at_hi = int(lines.starts[lo]), int(lines.starts[hi])
                    if lo:  # the rest of the open report: the general path, on its own
                        head = buf[:at_lo]
                        yield from take(_scan(head, False, parser.layouts), len(head), False,
                                        force=True)
                    # whole reports, up to the piece's last stamp (it waits for the next)
                    frames = parser.steady(lines, kind, lo, hi, lines_above)
                    if frames is not None:
                        lines_above += hi - lo
                        carry = bytes(buf[at_hi:])
                        yield from (f for f in frames if len(f))
                        continue
                    buf = buf[at_lo:]  # (a copy: ``lines`` still views the piece)
            # the file's first piece is linked at once: its reports fix the run's interval
            # and date order (it is short: FIRST_BYTES), after which the steady path can
            # take the next piece
            yield from take(_scan(buf, last, parser.layouts), len(buf), last,
                            force=_STEADY and not parser.started)
    else:
        # imported here: only machines with more than two CPUs scan in threads, and the
        # module costs ~15 ms of every start-up
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        queue: deque[tuple[Future[_Scan], int, bool]] = deque()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for buf, last in _chunks(stream, chunk_bytes):
                queue.append((pool.submit(_scan, buf, last, parser.layouts), len(buf), last))
                while len(queue) > workers or (queue[0][0].done() and len(queue) > 1):
                    fut, size, final = queue.popleft()
                    yield from take(fut.result(), size, final)
            while queue:
                fut, size, final = queue.popleft()
                yield from take(fut.result(), size, final)
    if parser.reports_out == 0 and not parser.dropped_tail:
        source.note("no device statistics found in the file (iostat -c prints CPU only)")


def parse(data: bytes, source: Source) -> SampleFrame:
    """All rows of an iostat text report (see the module docstring)."""
    frames = list(iter_parse(io.BytesIO(data), source))
    if not frames:
        return SampleFrame.empty()
    if len(frames) == 1:
        return frames[0]
    return SampleFrame.concat(frames)
