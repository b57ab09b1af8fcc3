"""AIX ``iostat -D`` (extended drive report), with ``-T`` time stamps, ``-l`` long one-line
form, ``-d``, ``-R``.

Block form (one block per disk per report; real output quoted in SaltStack's
``salt/modules/disk.py``)::

    System configuration: lcpu=8 drives=1 paths=2 vdisks=2

    hdisk6          xfer:  %tm_act      bps      tps      bread      bwrtn
                             9.6     16.4K     4.0       16.4K       0.0
                    read:      rps  avgserv  minserv  maxserv   timeouts      fails
                             4.0      4.9      0.3      9.9           0          0
                   write:      wps  avgserv  minserv  maxserv   timeouts      fails
                             0.0      0.0      0.0      0.0           0          0
                   queue:  avgtime  mintime  maxtime  avgwqsz    avgsqsz     sqfull
                             0.0      0.0      0.0      0.0        0.0         0.0
    --------------------------------------------------------------------------------

With ``-T`` a ``time`` column (HH:MM:SS) ends the xfer line. The long form (``-l``) prints
one line per disk after a ``Disks:`` header: ``name`` then the xfer, read, write and queue
values in the order above (with or without the min columns) and, with ``-T``, the time.

Meaning (IBM AIX iostat command, ``-D``: "Displays the extended tape/drive utilization
report"; values are per second over the interval, times in milliseconds):

============  ====================  ===========================================================
field         SampleFrame           meaning
============  ====================  ===========================================================
%tm_act       util_pct              percent of time the disk was active
tps           iops                  transfers per second issued to the disk
bps           kBps = bytes / 1024   data transferred per second, in bytes
bread, bwrtn  r_kBps, w_kBps        data read / written per second, in bytes (/ 1024)
rps, wps      r_iops, w_iops        read / write transfers per second
avgserv       svctm_ms              read and write average *service* time - the time the
 (read,                             disk took once the request left the driver's wait queue;
 write)                             the two are combined, weighted by rps and wps, into the
                                    mean service time per transfer
avgtime       queue_wait_ms         "average time spent by a transfer request in the wait
 (queue)                            queue"
--            await_ms              svctm_ms + avgtime: the whole time of the mean transfer
                                    (every transfer waits, then is served); split by read and
                                    write it is unknown - the wait queue time is not - so
                                    r_await_ms / w_await_ms stay null
avgwqsz       queue_wait_len        average wait queue size
avgsqsz       active_len            average service queue size (sent to the disk)
--            aqu_sz                avgwqsz + avgsqsz: all requests outstanding
============  ====================  ===========================================================

min/max times, timeouts, fails and sqfull have no SampleFrame column and are not carried.

Suffixes: AIX shortens large values. Byte and count columns take K/M/G/T as powers of 1000
- the quoted real output shows ``bps 16.4K`` for ``rps 4.0`` reads of 4 KiB (4 x 4096 =
16 384 B/s = 16.4 x 1000, not 16.0 x 1024); time columns are milliseconds unless suffixed
``S`` (seconds), ``M`` (minutes) or ``H`` (hours). IBM's page for ``-D`` could not be read
here verbatim, so these scalings rest on the quoted output and IBM's wording "different
suffixes are used to represent the unit"; any other suffix is refused.

The first report covers the time since boot (IBM: "the first set of data represents all
activity since system startup"): since_boot=True, unless a disk is 90 % busy or more in it (an
excerpt) or ``--first-report`` says otherwise (:mod:`~iogauge.importers.first_report`). A
report ends when a disk appears again (:func:`_numbered`: a disk added during the run joins
the report it is printed in). AIX prints no date: ``-T`` times of day take their date from
``Source.start``; without ``-T`` ``Source.start`` and ``Source.interval_s`` give report k the
end time start + k x interval, and without a start the reports are numbered on the relative
time line of :mod:`iogauge.model.timeline`.
A report cut off by the end of the file is dropped whole.

A file is read a piece of :data:`CHUNK_BYTES` at a time (:func:`iter_parse`), each piece's
last report read again with the next one: 100 MB of ``iostat -DT`` blocks imports to Parquet
at 0.22 GB peak, where the whole-file read peaked at 1.12-1.14 GB.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers import first_report
from iogauge.importers._lines import (
    LineCarry,
    host_fallback,
    line_frames,
    localize,
    max_int,
    refuse_rows,
    start_local,
)
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.model import timeline
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

NAME = "aix-iostat"
DESCRIPTION = "AIX iostat -D extended drive report (xfer/read/write/queue), block or -l form"
EXPECTS = ("'<disk> xfer: %tm_act bps tps bread bwrtn' blocks with read:/write:/queue: lines, "
           "or the -l 'Disks: xfers read write queue' table")

_XFER_RE = r"^\s*(\S+)\s+xfer:\s+(%tm_act\s+bps\s+tps\s+bread\s+bwrtn.*)$"
_SUB_RE = r"^\s*(read|write|queue):\s+(.*)$"
_TIME_RE = r"^\d{1,2}:\d{2}:\d{2}$"
_SNIFF = re.compile(r"^\s*\S+\s+xfer:\s+%tm_act\s+bps\s+tps\s+bread\s+bwrtn", re.MULTILINE)
_SNIFF_LONG = re.compile(r"^Disks:\s+xfers\s+read\s+write\s+queue", re.MULTILINE)

_XFER = ("%tm_act", "bps", "tps", "bread", "bwrtn")
_RW_FULL = ("avgserv", "minserv", "maxserv", "timeouts", "fails")
_RW_SHORT = ("avgserv", "maxserv", "timeouts", "fails")
_QUEUE = ("avgtime", "mintime", "maxtime", "avgwqsz", "avgsqsz", "sqfull")
_TIME_FIELDS = {"avgserv", "minserv", "maxserv", "avgtime", "mintime", "maxtime"}
#: decimal multipliers of byte and count columns; time suffixes -> milliseconds
_SIZE_SUFFIX: Mapping[str, float] = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_SUFFIX: Mapping[str, float] = {"": 1.0, "S": 1e3, "M": 60e3, "H": 3600e3}


def sniff(head: str) -> bool:
    """A ``<disk> xfer: %tm_act bps tps bread bwrtn`` line, or the ``-l`` ``Disks:`` table."""
    return bool(_SNIFF.search(head) or _SNIFF_LONG.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def _value(tok: pl.Expr, field: str) -> pl.Expr:
    """A printed AIX value in base units (bytes, counts, milliseconds); null if malformed."""
    g = tok.str.extract_groups(r"^((?:\d+\.?\d*|\.\d+))([A-Za-z]?)$")
    table = _TIME_SUFFIX if field in _TIME_FIELDS else _SIZE_SUFFIX
    factor = g.struct.field("2").replace_strict(dict(table), default=None,
                                                return_dtype=pl.Float64())
    return g.struct.field("1").cast(pl.Float64) * factor


#: Bytes read per piece by :func:`iter_parse` (a piece's working set is some 10x its size).
CHUNK_BYTES = 4 << 20

#: A line that starts a disk's row: its ``xfer:`` header (block form), or a ``-l`` line of a
#: name and numbers or times of day (the test :func:`_long_rows` makes on its fields).
_LONG_DATA_RE = (r"^\s*\S+(?:\s+(?:(?:\d+\.?\d*|\.\d+)[A-Za-z]?|\d{1,2}:\d{2}:\d{2}))+\s*$")


@dataclass
class _Carry(LineCarry):
    """What one piece of a file hands on to the next (:func:`iter_parse`), besides the
    held-back lines of :class:`~iogauge.importers._lines.LineCarry`: its last report.

    Attributes:
        first: no report has been given out yet.
        long_form: the file is ``-l`` output (None: not known yet).
        next_rid: the number of the next report (those before it were given out).
        times: ``rid`` and ``ts`` of the last report given out.
        last_sod: the ``-T`` time of day of the last report timed, s after midnight.
        day: days after the start's date of that report.
        regular_s: the sampling interval, s (the first piece's, for the since-boot rows).
        lead: 1 when the first report is measured (not printed when iostat started): on
            ``--start`` + k x interval, report k (from 0) then ends k + 1 intervals on.
        full: the disks of the first report given out, in order.
        uniform: every report given out listed exactly ``full``.
    """

    first: bool = True
    long_form: bool | None = None
    next_rid: int = 0
    times: pl.DataFrame | None = None
    last_sod: int | None = None
    day: int = 0
    regular_s: float | None = None
    lead: int = 0
    full: list[str] | None = None
    uniform: bool = True


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time, in file order.

    Each piece is cut at a line end; its last report (from the first block of the last
    report number met) is held back and read again with the next piece, so every block is
    read whole. What spans pieces is carried (:class:`_Carry`): the number of the next
    report, the time of the last one and the day a ``-T`` time of day falls on, the disk
    list a cut last report is compared with. Without ``--interval``, the interval given to
    the since-boot rows is the median spacing of the first piece's reports (of the whole
    file when it is one piece).
    """
    carry = _Carry()
    for lines, last, cut in line_frames(stream, chunk_bytes, carry, source.path):
        frame = _parse_piece(lines, source, carry, final=last, cut=cut)
        del lines
        if frame is not None and len(frame):
            yield frame


def parse(data: bytes, source: Source) -> SampleFrame:
    """One row per disk per report (block or ``-l`` form); see the module docstring. Files
    longer than :data:`CHUNK_BYTES` are read a piece at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _starts(lines: pl.DataFrame, long_form: bool, base: int) -> pl.DataFrame:
    """``line_no``, ``device`` and report number ``rid`` of every line that starts a disk's
    row, numbered as :func:`_block_rows` and :func:`_long_rows` number them."""
    if long_form:
        found = lines.filter(pl.col("line").str.contains(_LONG_DATA_RE).fill_null(False)
                             ).select("line_no", pl.col("line").str.extract(r"^\s*(\S+)", 1)
                                      .alias("device"))
    else:
        found = (lines.filter(pl.col("line").str.contains("xfer:", literal=True)
                              .fill_null(False))
                 .select("line_no", pl.col("line").str.extract(_XFER_RE, 1).alias("device"))
                 .filter(pl.col("device").is_not_null()))
    return _numbered(found, base)


def _numbered(rows: pl.DataFrame, base: int) -> pl.DataFrame:
    """``rows`` (a disk's row each, ``device``, in file order, the first starting report
    ``base``) with their report number ``rid``: a report ends where a disk appears again.

    That is the k-th row of each disk when the k-th rows follow one another (the disks
    print in the same order every interval, and a disk left out or removed changes
    nothing); where they do not (a disk added in the run, or a block's header lost in a
    damaged file), the rows are walked one by one.
    """
    k = pl.int_range(pl.len()).over("device").cast(pl.Int64)
    out = rows.with_columns((k + base).alias("rid"))
    if out.height < 2 or bool(out["rid"].diff().drop_nulls().ge(0).all()):
        return out
    rid = base
    seen: set[str | None] = set()
    numbers: list[int] = []
    for device in out["device"].to_list():
        if device in seen:
            rid += 1
            seen.clear()
        seen.add(device)
        numbers.append(rid)
    return out.with_columns(pl.Series("rid", numbers, dtype=pl.Int64))


def _parse_piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool,
                 cut: bool) -> SampleFrame | None:
    """The rows of the reports of ``lines`` (the whole file when it is one piece); of a piece
    that is not ``final``, all reports but the last, which goes to ``carry``."""
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None  # (blank lines only: a file of nothing else is "empty")
    long_form = _file_form(lines, carry, final=final)
    if long_form is None:
        return None
    if cut:
        # no final line break: the last line may be cut mid-value, so it is not read; the
        # block or report it belonged to is then incomplete and dropped below
        lines = lines.filter(pl.col("line_no") != carry.lines_read)
    base = carry.next_rid
    if not final:
        held_back = _hold_last_report(lines, carry, long_form)
        if held_back is None:
            return None
        lines = held_back
    df = lines.with_columns(pl.col("line").str.extract_all(r"\S+").alias("tok")).with_columns(
        pl.col("tok").list.len().fill_null(0).alias("n"))
    del lines
    rows = (_long_rows(df, source, base, seen_before=not carry.first) if long_form
            else _block_rows(df, source, base, final=final))
    del df
    first = carry.first
    carry.first = False
    if rows.height == 0:
        return None

    # (rid: a report ends where a disk appears again, _numbered)
    rows = rows.sort("line_no")
    if final:
        rows = _drop_cut_report(rows, source, cut, carry)
        if rows.height == 0:
            return None
    else:
        _note_lists(rows, carry)
    rows = _with_times(rows, source, carry, base,
                       max_int(rows["rid"]) + 1 if final else carry.next_rid, first=first)
    return _sample_frame(rows, source)


def _file_form(lines: pl.DataFrame, carry: _Carry, *, final: bool) -> bool | None:
    """Whether the file is the ``-l`` table (True) or ``-D`` blocks (False), decided once
    per file; None while no piece has shown it yet (``lines`` then wait in ``carry``)."""
    if carry.long_form is None:
        # the file's form: the -l table's "Disks:" header, or a block's "xfer:" line,
        # whichever comes first (read on until one does)
        heads = lines.filter(pl.col("line").str.contains(r"^Disks:|" + _XFER_RE)
                             .fill_null(False))
        if heads.height == 0 and not final:
            carry.lines = lines
            return None
        carry.long_form = heads.height > 0 and str(heads["line"][0]).startswith("Disks:")
    return carry.long_form


def _hold_last_report(lines: pl.DataFrame, carry: _Carry, long_form: bool
                      ) -> pl.DataFrame | None:
    """The lines of a piece's complete reports; the last report, which may go on in the
    next piece, waits in ``carry`` (its number in ``carry.next_rid``). None: too few
    reports so far, the whole piece waits."""
    starts = _starts(lines, long_form, carry.next_rid)
    held = max_int(starts["rid"], -1)
    from_line = -max_int(-starts.filter(pl.col("rid") == held)["line_no"].cast(pl.Int64))
    given = starts.filter(pl.col("line_no") < from_line)
    # (the first piece gives out two reports at least: their spacing is the sampling
    # interval of the since-boot report)
    if given.height == 0 or (carry.first and held < 2):
        carry.lines = lines  # too few reports so far: read on
        return None
    carry.lines = lines.filter(pl.col("line_no") >= from_line)
    carry.next_rid = held
    return lines.filter(pl.col("line_no") < from_line)


def _sample_frame(rows: pl.DataFrame, source: Source) -> SampleFrame:
    """AIX's columns as SampleFrame columns (service time: the IOPS-weighted mean of the
    read and write service times)."""
    m = pl.col
    total = m("rps") + m("wps")
    svctm = (pl.when(total > 0).then((m("rps") * m("r_avgserv") + m("wps") * m("w_avgserv"))
                                     / total).otherwise(0.0))
    out = rows.select(
        pl.lit(NAME).alias("source"),
        pl.lit(host_fallback(source)).alias("host"),
        "device",
        pl.when(m("device").str.contains(r"^(hdisk|hdiskpower|vpath|dlmfdrv)\d+$"))
        .then(pl.lit("disk")).otherwise(pl.lit("other")).alias("device_kind"),
        "ts", "interval_s", "since_boot",
        m("%tm_act").alias("util_pct"),
        m("tps").alias("iops"),
        (m("bps") / 1024.0).alias("kBps"),
        (m("bread") / 1024.0).alias("r_kBps"),
        (m("bwrtn") / 1024.0).alias("w_kBps"),
        m("rps").alias("r_iops"),
        m("wps").alias("w_iops"),
        svctm.alias("svctm_ms"),
        m("avgtime").alias("queue_wait_ms"),
        (svctm + m("avgtime")).alias("await_ms"),
        m("avgwqsz").alias("queue_wait_len"),
        m("avgsqsz").alias("active_len"),
        (m("avgwqsz") + m("avgsqsz")).alias("aqu_sz"),
    )
    return SampleFrame(out.sort("ts", maintain_order=True))


#: The header words of each section of an ``iostat -D`` block.
_SECTION_WORDS: dict[str, tuple[str, ...]] = {
    "xfer": _XFER, "read": ("rps", *_RW_FULL), "write": ("wps", *_RW_FULL), "queue": _QUEUE}


def _block_rows(df: pl.DataFrame, source: Source, base: int = 0, *, final: bool = True
                ) -> pl.DataFrame:
    """Pivot the xfer/read/write/queue header+values line pairs into one row per block (of
    a ``final`` piece, an incomplete last block is the file's end, not a bad block)."""
    kind = (pl.when(pl.col("line").str.contains(_XFER_RE)).then(pl.lit("xfer"))
            .otherwise(pl.col("line").str.extract(_SUB_RE, 1)))
    skip = (pl.col("n") == 0) | pl.col("line").str.contains(
        r"^\s*(System configuration|-{10,}\s*$)").fill_null(False)
    df = df.with_columns(kind.alias("kind"), skip.alias("skip")).with_columns(
        (pl.col("kind") == "xfer").fill_null(False).cum_sum().alias("block"),
        pl.col("kind").forward_fill().alias("under"),
        pl.col("line").str.extract(_XFER_RE, 1).alias("device"),
    )
    headers = df.filter(pl.col("kind").is_not_null())
    values = df.filter(pl.col("kind").is_null() & ~pl.col("skip"))
    # a value line belongs to the header right above it
    values = values.with_columns(
        (pl.col("under").is_null()).alias("orphan"))
    timed = _headers_checked(headers, source)
    # report numbers (_numbered) counted before any block is refused, so that a bad block
    # (--lenient) does not shift the disk's later blocks into other reports
    blocks = _numbered(headers.filter(pl.col("kind") == "xfer")
                       .select("block", "device", "line_no"), base)
    reason_orphan = values.filter(pl.col("orphan")).with_columns(
        pl.format("value line outside any xfer/read/write/queue section: '{}'", pl.col("line"))
        .alias("reason"))
    refuse_rows(source, reason_orphan)
    values = values.filter(~pl.col("orphan"))
    # exactly one value line per header
    dup = values.filter(pl.struct("block", "under").is_duplicated()
                        & (pl.col("line_no") != pl.col("line_no").min().over("block", "under")))
    refuse_rows(source, dup.with_columns(
        pl.format("second value line under one {}: header: '{}'", pl.col("under"),
                  pl.col("line")).alias("reason")))
    values = values.join(dup.select("line_no"), on="line_no", how="anti")
    wide = blocks
    reasons: list[pl.DataFrame] = []
    for k, fields in _SECTION_WORDS.items():
        keep, bad = _section_values(values.filter(pl.col("under") == k), k, fields,
                                    timed=timed)
        reasons.append(bad)
        wide = wide.join(keep, on="block", how="left")
    bad_all = pl.concat(reasons)
    refuse_rows(source, bad_all)
    return _complete_blocks(wide, bad_all, source, final=final)


def _headers_checked(headers: pl.DataFrame, source: Source) -> bool:
    """Refuse a section header whose words are not iostat -D's; whether the xfer headers
    carry a ``time`` column (``-T``).

    Checked per distinct header text, not per header line (a long log repeats four headers
    per disk per report; a Python loop over them cost seconds per 100 MB)."""
    hdr_words = headers.with_columns(
        pl.when(pl.col("kind") == "xfer").then(pl.col("line").str.extract(_XFER_RE, 2))
        .otherwise(pl.col("line").str.extract(_SUB_RE, 2)).str.extract_all(r"\S+")
        .alias("words"))
    hdr_words = hdr_words.with_columns(pl.col("words").list.join(" ").alias("text"))
    timed = False
    for k, expect in _SECTION_WORDS.items():
        allowed = [" ".join(expect)]
        if k == "xfer":
            allowed.append(" ".join((*expect, "time")))
            timed = bool(hdr_words.filter((pl.col("kind") == k)
                                          & (pl.col("text") == allowed[1])).height)
        wrong = hdr_words.filter((pl.col("kind") == k)
                                 & ~pl.col("text").is_in(allowed).fill_null(False))
        if wrong.height:
            line_no, text = wrong.sort("line_no").select("line_no", "text").row(0)
            raise InputFormatError(source.path, int(line_no), f"AIX iostat -D {k}: header "
                                   f"is '{text}', expected '{' '.join(expect)}'")
    return timed


def _section_values(part: pl.DataFrame, k: str, fields: tuple[str, ...], *, timed: bool
                    ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The value lines of one section kind ``k`` read (``block`` and the named values) and
    the ones refused (``block``, ``line_no``, ``reason``)."""
    extra = ["time"] if (k == "xfer" and timed) else []
    cols = [*fields, *extra]
    pref = {"read": "r_", "write": "w_"}.get(k, "")
    exprs = []
    for i, f in enumerate(cols):
        t = pl.col("tok").list.get(i, null_on_oob=True)
        if f == "time":
            exprs.append(t.alias("time"))
        else:
            name = f if f in ("rps", "wps") or not pref else pref + f
            exprs.append(_value(t, f).alias(name))
    part = part.with_columns(*exprs)
    numeric = [e.meta.output_name() for e in exprs if e.meta.output_name() != "time"]
    bad = (pl.when(pl.col("n") != len(cols))
           .then(pl.format("AIX iostat -D {} values: {} fields, expected {} ({}): '{}'",
                           pl.lit(k), pl.col("n"), pl.lit(len(cols)), pl.lit(" ".join(cols)),
                           pl.col("line")))
           .when(pl.any_horizontal([pl.col(c).is_null() for c in numeric]))
           .then(pl.format("AIX iostat -D {} values are not all numbers: '{}'", pl.lit(k),
                           pl.col("line")))
           .when(pl.col("time").str.contains(_TIME_RE).not_() if extra else pl.lit(False))
           .then(pl.format("AIX iostat -D time is not HH:MM:SS: '{}'", pl.col("line")))
           .otherwise(None))
    part = part.with_columns(bad.alias("reason"))
    keep = part.filter(pl.col("reason").is_null()).select(
        "block", *numeric, *(["time"] if extra else []))
    return keep, part.filter(pl.col("reason").is_not_null()).select("block", "line_no",
                                                                    "reason")


def _complete_blocks(wide: pl.DataFrame, bad_all: pl.DataFrame, source: Source, *,
                     final: bool) -> pl.DataFrame:
    """The blocks that have every section; an incomplete one is refused, but for the last
    block of a ``final`` piece (the file ends inside it: noted)."""
    needed = ["tps", "rps", "wps", "avgtime"]
    complete = wide.filter(pl.all_horizontal([pl.col(c).is_not_null() for c in needed]))
    incomplete = wide.join(complete.select("block"), on="block", how="anti").join(
        bad_all.select("block").unique(), on="block", how="anti")
    if incomplete.height:
        last_block = max_int(wide["block"])
        if final and max_int(incomplete["block"]) == last_block:
            # the file ends inside this disk's block: truncation, not a bad line
            source.note("the file ends inside the block of disk "
                        f"{incomplete['device'][-1]}: that block was dropped")
            incomplete = incomplete.filter(pl.col("block") != last_block)
        refuse_rows(source, incomplete.with_columns(
            pl.format("disk {}: the xfer/read/write/queue block is incomplete",
                      pl.col("device")).alias("reason")))
    return complete.drop("block")


def _long_rows(df: pl.DataFrame, source: Source, base: int = 0, *,
               seen_before: bool = False) -> pl.DataFrame:
    """The ``-l`` form: one line per disk per report after the ``Disks:`` header lines
    (``seen_before``: a piece after the one with the file's first header)."""
    numeric_tail = (pl.col("tok").list.slice(1).list.eval(
        pl.element().str.contains(r"^(\d+\.?\d*|\.\d+)[A-Za-z]?$|" + _TIME_RE[:-1] + "$"))
        .list.all())
    is_data = (pl.col("n") >= 2) & numeric_tail.fill_null(False)
    is_head = pl.col("line").str.contains(r"^(Disks:|[\s-]+$)").fill_null(False) | (
        (pl.col("n") > 0) & ~is_data)
    df = df.with_columns(is_data.alias("is_data"), is_head.alias("is_head"),
                         (pl.col("line").str.contains(r"^Disks:").fill_null(False).cum_sum()
                          + int(seen_before)).alias("seen"))
    stray = df.filter(pl.col("is_head") & (pl.col("seen") == 0)
                      & ~pl.col("line").str.contains(r"^\s*System configuration").fill_null(
                          False))
    refuse_rows(source, stray.with_columns(
        pl.format("line before the 'Disks:' header: '{}'", pl.col("line")).alias("reason")))
    data = _numbered(df.filter(pl.col("is_data")).with_columns(
        pl.col("tok").list.first().alias("device")), base)
    has_time = pl.col("tok").list.last().str.contains(_TIME_RE)
    nv = pl.col("n") - 1 - has_time.cast(pl.UInt32)
    data = data.with_columns(nv.alias("nv"), has_time.alias("has_time"))
    layouts = {23: ("rps", *_RW_FULL, "wps", *_RW_FULL),
               21: ("rps", *_RW_SHORT, "wps", *_RW_SHORT)}
    frames: list[pl.DataFrame] = []
    bad = data.filter(~pl.col("nv").is_in(list(layouts)))
    refuse_rows(source, bad.with_columns(pl.format(
        "AIX iostat -Dl line has {} values, expected 23 (or 21 without the min columns): "
        "'{}'", pl.col("nv"), pl.col("line")).alias("reason")))
    for nv_count, rw in layouts.items():
        part = data.filter(pl.col("nv") == nv_count)
        if part.height == 0:
            continue
        fields = [*_XFER, *rw, *_QUEUE]
        names: list[str] = []
        exprs = []
        for i, f in enumerate(fields):
            if f in ("rps", "wps") or i < len(_XFER) or i >= len(_XFER) + len(rw):
                name = f
            else:
                name = ("r_" if i < len(_XFER) + len(rw) // 2 else "w_") + f
            names.append(name)
            exprs.append(_value(pl.col("tok").list.get(i + 1), f).alias(name))
        part = part.with_columns(
            pl.col("tok").list.first().alias("device"),
            pl.when(pl.col("has_time")).then(pl.col("tok").list.last()).alias("time"),
            *exprs)
        nums = part.with_columns(pl.when(pl.any_horizontal([pl.col(c).is_null()
                                                            for c in names]))
                                 .then(pl.format("AIX iostat -Dl values are not all numbers: "
                                                 "'{}'", pl.col("line")))
                                 .otherwise(None).alias("reason"))
        refuse_rows(source, nums.filter(pl.col("reason").is_not_null()))
        keep = nums.filter(pl.col("reason").is_null())
        frames.append(keep.select("line_no", "rid", "device", "time", *names))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed").sort("line_no")


def _drop_cut_report(rows: pl.DataFrame, source: Source, cut: bool, carry: _Carry
                     ) -> pl.DataFrame:
    """Drop the last report when the file ends inside it: it lacks disks the reports before it
    all had (same list, in order), or the file's last line had no line break. ``rows`` are
    the last piece's; ``carry`` says what the reports before it listed."""
    lists = rows.group_by("rid", maintain_order=True).agg(pl.col("device")).sort("rid")
    last = int(lists["rid"][-1])
    earlier = lists["device"][:-1].to_list()
    if carry.full is not None:
        full, uniform = carry.full, carry.uniform and all(e == carry.full for e in earlier)
    elif earlier:
        full = earlier[0]
        uniform = all(e == full for e in earlier)
    else:
        return rows
    tail = lists["device"][-1].to_list()
    short = len(tail) < len(full) and full[:len(tail)] == tail and uniform
    if short or (cut and len(tail) < len(full)):
        source.note(f"the file ends inside report {last + 1} (it lists {len(tail)} of "
                    f"{len(full)} disks): that report was dropped")
        return rows.filter(pl.col("rid") != last)
    return rows


def _note_lists(rows: pl.DataFrame, carry: _Carry) -> None:
    """Keep in ``carry`` what :func:`_drop_cut_report` needs of the reports in ``rows``."""
    lists = rows.group_by("rid", maintain_order=True).agg(pl.col("device")).sort("rid")
    found = lists["device"].to_list()
    if carry.full is None:
        carry.full = found[0]
    carry.uniform = carry.uniform and all(e == carry.full for e in found)


def _with_times(rows: pl.DataFrame, source: Source, carry: _Carry, base: int,
                n_reports: int, *, first: bool) -> pl.DataFrame:
    """``ts`` (UTC), ``interval_s`` and ``since_boot`` per row, from ``-T`` times of day (dated
    by ``Source.start``) or from ``Source.start`` + k x ``Source.interval_s``.

    ``rows`` are a piece's, of reports ``base`` to ``n_reports`` - 1 (a report whose blocks
    were all refused still takes its place in time); the last report before the piece is in
    ``carry.times`` (the first one's interval starts there).
    """
    start = start_local(source)
    timed = "time" in rows.columns and rows["time"].null_count() < rows.height
    known = carry.times
    boot = first and first_report.since_boot(
        source, busiest=first_report.busiest(rows.filter(pl.col("rid") == 0).select(
            "device", pl.col("%tm_act").alias("util_pct"))),
        shown_by="IBM: the first report of a run covers all activity since system startup")
    if first and not boot:
        carry.lead = 1
    if timed:
        if start is None:
            raise InputFormatError(source.path, None, "AIX iostat -T prints times of day but "
                                   "no date: supply the date the run started (--start)")
        times = _times_of_day(rows, source, carry, start, base, n_reports)
    else:
        times = _counted_times(source, carry, start, base, n_reports, first=first)
        known = None
    zoned = (pl.col("ts_local").dt.replace_time_zone("UTC") if not timed and start is None
             else localize(pl.col("ts_local"), source))
    times = times.select("rid", zoned.cast(TS_DTYPE).alias("ts"))
    if known is not None:
        # the first report met here is timed from the last one before it
        times = pl.concat([known.select("rid", "ts").tail(1), times])
    times = times.with_columns(
        (pl.col("ts").diff().dt.total_microseconds() / 1e6).alias("interval_s")
    ).filter(pl.col("rid") >= base)
    if first:
        carry.regular_s = _regular_s(times, source, relative=not timed and start is None)
    times = times.with_columns(
        ((pl.col("rid") == 0) & boot).alias("since_boot"),
        pl.when(pl.col("rid") == 0).then(pl.lit(carry.regular_s)).otherwise(pl.col("interval_s"))
        .alias("interval_s"))
    carry.times = times.select("rid", "ts").tail(1) if times.height else known
    out = rows.drop("time", strict=False).join(
        times.select("rid", "ts", "interval_s", "since_boot"), on="rid", how="left")
    bad = out.filter(~(pl.col("interval_s") > 0))
    if bad.height:
        refuse_rows(source, bad.with_columns(pl.format(
            "time stamp does not advance (interval {} s)", pl.col("interval_s")).alias("reason")))
        out = out.filter(pl.col("interval_s") > 0)
    return out


def _times_of_day(rows: pl.DataFrame, source: Source, carry: _Carry, start: datetime,
                  base: int, n_reports: int) -> pl.DataFrame:
    """``-T`` reports: each report's ``ts_local`` from its time of day, dated from
    ``--start`` and counting the midnights passed (across pieces, in the carry)."""
    new = (rows.filter(pl.col("time").is_not_null())
           .group_by("rid").agg(pl.col("time").first()).sort("rid"))
    parts = pl.col("time").str.split(":")
    sod = (parts.list.get(0).cast(pl.Int64) * 3600 + parts.list.get(1).cast(pl.Int64) * 60
           + parts.list.get(2).cast(pl.Int64))
    times = new.with_columns(sod.alias("sod"))
    if carry.last_sod is None and times.height:
        # a first time of day before the start's means the run began just before midnight
        start_sod = start.hour * 3600 + start.minute * 60 + start.second
        carry.day = 1 if int(times["sod"][0]) < start_sod else 0
    before = carry.last_sod if carry.last_sod is not None else -1
    back = (pl.col("sod") < pl.col("sod").shift(1, fill_value=before)).cum_sum()
    day0 = pl.lit(start.date()).cast(pl.Datetime("us"))
    times = (times.with_columns((back + carry.day).alias("day"))
             .with_columns((day0 + pl.duration(seconds=pl.col("sod")
                                               + pl.col("day") * 86400)).alias("ts_local")))
    if times.height != n_reports - base:
        raise InputFormatError(source.path, None, "some AIX iostat reports lack the -T time")
    if times.height:
        carry.last_sod = int(times["sod"][-1])
        carry.day = int(times["day"][-1])
    return times


def _counted_times(source: Source, carry: _Carry, start: datetime | None, base: int,
                   n_reports: int, *, first: bool) -> pl.DataFrame:
    """Reports without times: ``--start`` + k x ``--interval``, or without ``--start`` report
    k (from 1) on the relative time line (model/timeline.py); from the report before the
    piece's first (the one its interval starts at)."""
    if start is not None and (source.interval_s is None or source.interval_s <= 0):
        raise InputFormatError(source.path, None, "these AIX iostat reports carry no time "
                               "stamps (iostat was run without -T): with --start, give "
                               "the sampling interval too (--interval)")
    relative = start is None
    if relative and first:
        source.note(timeline.placement_note(source.interval_s))
    step_us = round((source.interval_s or timeline.NOMINAL_INTERVAL_S) * 1e6)
    origin = timeline.RELATIVE_EPOCH.replace(tzinfo=None) if start is None else start
    return pl.DataFrame({"rid": pl.int_range(max(base - 1, 0), n_reports,
                                             dtype=pl.Int64, eager=True)}).with_columns(
        (pl.lit(origin).cast(pl.Datetime("us"))
         + pl.duration(microseconds=(pl.col("rid") + (1 if relative else carry.lead))
                       * step_us))
        .alias("ts_local"))


def _regular_s(times: pl.DataFrame, source: Source, *, relative: bool) -> float:
    """The file's sampling interval (for the since-boot report): ``--interval``, else the
    median step between the first piece's reports."""
    if source.interval_s is not None and source.interval_s > 0:
        return float(source.interval_s)
    diffs = times["interval_s"].drop_nulls()
    diffs = diffs.filter(diffs > 0)
    if diffs.len() == 0 and relative:
        diffs = pl.Series([timeline.NOMINAL_INTERVAL_S])
    if diffs.len() == 0:
        raise InputFormatError(source.path, None, "a single since-boot AIX iostat "
                               "report has no sampling interval: supply it with "
                               "--interval")
    return float(diffs.median())  # type: ignore[arg-type]
