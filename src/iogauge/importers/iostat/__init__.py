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

Times: see :mod:`.times` (``ts`` is the end of the report's interval, UTC). The first report
after each ``Linux …`` banner (with or without ``_arch_ (N CPU)``) is iostat's since-boot
summary: kept, with ``since_boot`` true (iostat ``-y`` omits it; a log written with ``-y`` has
its first real interval flagged too — the file cannot tell). A file that starts without a
banner (a fragment of a longer log) is read as measured intervals, with a note. Without
``-t``, a file with several reports and no ``--interval`` is refused with an error naming
``--interval``; a file holding only the since-boot summary needs neither.

Damaged input: a line that is not what its place requires (wrong number of fields for its
``Device`` header, a non-number, a line outside any block) is refused with file:line:reason
(``--lenient``: skipped and counted). Two cuts are *not* errors, because logs are routinely
copied while iostat is still writing them or trimmed with ``tail``: lines before the first
complete report, and a last report that is incomplete (its last line has no newline, or it
has fewer lines than the report before it and no closing blank line) are dropped with a note.

The modules, in the order a piece goes through them:

* :mod:`.columns` — the printed columns and each ``Device`` header's layout;
* :mod:`.lines` and :mod:`.fixed` — a piece as byte offsets, the kind of each line, and
  fixed-width values and device names decoded in numpy or C (:mod:`.native`,
  ``kernels.c``; the numpy routines are the reference, and the tests run every case both
  ways);
* :mod:`.scan` — phase A: what a piece holds, without any state;
* :mod:`.link` — phase B: runs, report boundaries across pieces, a leading fragment and a
  cut last report;
* :mod:`.times` — the date order, each run's interval, every report's time;
* :mod:`.assemble` — rows + reports -> SampleFrame, validated per report and per device;
* :mod:`.steady` — whole reports of a ``-t`` log in its steady state, linked in one pass
  and assembled by the same :mod:`.assemble`.

Speed and memory: the file is read in pieces of :data:`CHUNK_BYTES` cut just after a blank
line (iostat never breaks a table with one, so each piece is self-contained); Python loops
run over report blocks, headers, runs, pieces and blocks of lines, never over device lines.
:func:`iter_parse` yields a SampleFrame per batch of pieces (:data:`LINK_BYTES`), so memory
is bounded by the pieces, not the file (``iogauge import --parquet`` streams it to Parquet;
``benchmarks/import_speed.py``); :func:`parse` is the same over an in-memory buffer.
"""

from __future__ import annotations

import io
import re
from collections.abc import Generator, Iterator
from typing import BinaryIO

import numpy as np

from iogauge.importers._lines import pieces
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.iostat import native, steady
from iogauge.importers.iostat.assemble import NAME
from iogauge.importers.iostat.columns import COLUMNS, ColumnSpec, human_value
from iogauge.importers.iostat.lines import TS, Lines, classify
from iogauge.importers.iostat.link import Parser
from iogauge.importers.iostat.scan import Scan, merge, scan_piece, shift
from iogauge.importers.iostat.times import UNKNOWN_INTERVAL_S
from iogauge.model.sampleframe import SampleFrame

__all__ = ["COLUMNS", "DESCRIPTION", "EXPECTS", "NAME", "UNKNOWN_INTERVAL_S", "ColumnSpec",
           "human_value", "iter_parse", "parse", "sniff", "sniff_bytes"]

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
#: less than their text, and the per-batch fixed costs are paid less often; 8 MiB batches of
#: 4 MiB pieces keep the streaming import's peak below 3x the log (the measurements are in
#: benchmarks/README.md).
LINK_BYTES = 8 << 20

_SNIFF_AVGCPU = re.compile(r"^avg-cpu:\s+%user", re.MULTILINE)
_SNIFF_DEVICE = re.compile(
    r"^(?:Device:?\s+(?:r/s|rrqm/s|tps|w/s)\s.*"
    r"|\s*(?:r/s|w/s|d/s|f/s|tps|rrqm/s)\s+.*\S\s+Device)\s*$", re.MULTILINE)


def sniff(head: str) -> bool:
    """An iostat text report: an ``avg-cpu:`` block or a ``Device`` header of iostat columns.

    The ``Linux … (host) date _arch_ (n CPU)`` banner alone is not enough: sar prints it too.
    """
    return bool(_SNIFF_AVGCPU.search(head) or _SNIFF_DEVICE.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES,
               link_bytes: int = LINK_BYTES) -> Iterator[SampleFrame]:
    """Parse an iostat text stream piece by piece, yielding SampleFrames in file order.

    Pieces of about ``chunk_bytes`` (cut after a blank line) are scanned, then linked
    (reports and times) in batches of about ``link_bytes``; pieces of a ``-t`` log in its
    steady state take the steady path (:mod:`.steady`). Memory is bounded by the piece and
    the batch, plus the rows of reports whose times cannot be decided yet (a file whose
    dates are all ambiguous between day/month and month/day is held until its end, and so
    is a run without -t until its interval is known). Notes and skipped lines go to
    ``source`` as with :func:`parse`.
    """
    reader = _Reader(Parser(source), chunk_bytes, link_bytes)
    carry: bytes | bytearray = b""  # the last report of a steady piece: the next one's
    first = min(chunk_bytes, FIRST_BYTES) if steady.ENABLED else None
    for buf, last in pieces(stream, chunk_bytes, blank_line=True, first_size=first,
                            cut_last=True):
        if carry:
            buf[0:0] = carry
            carry = b""
        rest: bytes | bytearray = buf
        if not last and not reader.batch and buf.isascii() \
                and steady.steady_run(reader.parser) is not None:
            linked, rest = yield from reader.steady(buf)
            if linked:
                carry = rest
                continue
        # the file's first piece is linked at once: its reports fix the run's interval
        # and date order (it is short: FIRST_BYTES), after which the steady path can
        # take the next piece
        yield from reader.take(rest, last,
                               force=steady.ENABLED and not reader.parser.started)
    if reader.parser.reports_out == 0 and not reader.parser.dropped_tail:
        source.note("no device statistics found in the file (iostat -c prints CPU only)")


def parse(data: bytes, source: Source) -> SampleFrame:
    """All rows of an iostat text report (see the module docstring)."""
    frames = list(iter_parse(io.BytesIO(data), source))
    if not frames:
        return SampleFrame.empty()
    if len(frames) == 1:
        return frames[0]
    return SampleFrame.concat(frames)


class _Reader:
    """Pieces in file order -> scans, batches of scans -> the parser -> SampleFrames."""

    def __init__(self, parser: Parser, chunk_bytes: int, link_bytes: int) -> None:
        self.parser = parser
        self.chunk_bytes, self.link_bytes = chunk_bytes, link_bytes
        self.batch: list[Scan] = []
        self.batch_bytes = 0
        self.lines_above = 0  # lines of the file before the next piece

    def take(self, buf: bytes | bytearray, final: bool, *, force: bool = False
             ) -> Iterator[SampleFrame]:
        """Scan a piece; link the batch when it holds ``link_bytes``, at the end, or now."""
        scan = scan_piece(buf, final, self.parser.layouts)
        self.batch.append(shift(scan, self.lines_above))
        self.lines_above += scan.n_lines  # a piece but the last ends with a newline
        self.batch_bytes += len(buf)
        if not (final or force) and self.batch_bytes < max(self.link_bytes, self.chunk_bytes):
            return
        self.parser.add(merge(self.batch), final=final)
        self.batch.clear()
        self.batch_bytes = 0
        frame = self.parser.flush(final=final)
        if frame is not None and len(frame):
            yield frame

    def steady(self, buf: bytearray
               ) -> Generator[SampleFrame, None, tuple[bool, bytes | bytearray]]:
        """The piece's whole reports by the steady path, up to its last stamp (that report
        waits for the next piece); returns (True, the text from the last stamp on) when
        they were linked, else (False, what the general path is to take)."""
        lines = Lines(buf if native.kernels() is not None else bytes(buf))
        kind = classify(lines)
        ts = np.flatnonzero(kind == TS)
        if ts.size <= 1:
            return False, buf
        lo, hi = int(ts[0]), int(ts[-1])
        at_lo, at_hi = int(lines.starts[lo]), int(lines.starts[hi])
        if lo:  # the rest of the open report: the general path, on its own
            yield from self.take(buf[:at_lo], False, force=True)
        frames = steady.link(self.parser, lines, kind, lo, hi)
        if frames is None:
            return False, buf[at_lo:]  # (a copy: ``lines`` still views the piece)
        self.lines_above += hi - lo
        yield from (f for f in frames if len(f))
        return True, buf[at_hi:]
