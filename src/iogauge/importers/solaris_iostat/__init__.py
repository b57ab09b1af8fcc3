"""Solaris / illumos ``iostat -x``, ``-xn``, ``-xnz`` (optionally ``-T d|u``, ``-c``, ``-t``,
``-M``, ``-e``, ``-p``, ``-C``, ``-r``): the extended device statistics.

Layout, as illumos ``usr/src/cmd/stat/iostat/iostat.c`` (``do_format``, ``show_disk``) prints
it and iostat(8) (Sun's iostat(1M)) documents it::

    Fri Nov 22 10:00:00 JST 2026                <- -T d (date(1) format) or -T u (epoch s)
                        extended device statistics
    device    r/s    w/s   kr/s   kw/s wait actv  svc_t  %w  %b      <- -x: device first
    sd0       0.9    0.1    7.2    0.4  0.0  0.0   11.9   0   0
        r/s    w/s   kr/s   kw/s wait actv wsvc_t asvc_t  %w  %b device   <- -xn: device last
       13.0   31.0  120.5 20650.3  0.0  6.0    0.0  137.8   2 100 c1t2d0

Every report starts with ``extended device statistics`` (preceded by its time stamp with
``-T``). The first report averages since boot (iostat(8): "The first line of output is for all
time since boot") when the file is a whole capture, and so does the report after a
configuration change, which iostat announces with ``<<device added: sd3>>``-style lines
(iostat.c forgets the previous snapshot when ``snapshot_has_changed``): those rows get
``since_boot=True``. A file that starts at a column header, or whose first report has a device
at 90 %b or more, is an excerpt: its first report is measured (see
:mod:`~iogauge.importers.first_report`; ``--first-report`` decides instead). ``-z`` omits idle
devices, so the device set varies. Linux sysstat ``iostat -x`` (``Device r/s rkB/s ...``) is
another format.

Column mapping (iostat(8) "Output" and iostat.c):

=============  =================  ===========================================================
column         SampleFrame        meaning
=============  =================  ===========================================================
r/s, w/s       r_iops, w_iops     reads / writes per second
kr/s, kw/s     r_kBps, w_kBps     kilobytes per second (iostat.c divides bytes by 1024);
                                  ``-M`` prints Mr/s, Mw/s (bytes / 1048576): x 1024
wait           queue_wait_len     mean transactions waiting for service (driver queue)
actv           active_len         mean transactions being serviced (accepted by the device)
svc_t          await_ms           "average response time of transactions": iostat(8) says it
                                  "reports the overall response time, rather than the service
                                  time ... includes the time that transactions are in queue"
wsvc_t         queue_wait_ms      average time in the wait queue
asvc_t         svctm_ms           "average service time of active transactions" - the true
                                  service time
%w             queue_wait_pct     percent of time the wait queue is non-empty
%b             util_pct           percent of time the disk is busy
=============  =================  ===========================================================

Derived exactly as iostat.c does: ``iops = r/s + w/s`` (``tps = rps + wps``), ``kBps = kr/s
+ kw/s``, ``aqu_sz = wait + actv`` (the ``avw + avr`` sar prints as avque), and with ``-n``
``await_ms = wsvc_t + asvc_t`` (``serv = rserv + wserv``). CPU columns (``-c``: us sy wt id;
on the first device line without ``-n``, in a ``cpu`` block before the report with it) go to
cpu_user/system/iowait/idle_pct; ``wt`` is always 0 since Solaris 10 (mpstat(1M): "no longer
calculated"), so when every ``wt`` of the file is 0 it is left null. ``-I`` (counts per
interval) is refused.

Time stamps: ``-T u`` is epoch seconds (UTC); ``-T d`` is local time (its zone abbreviation is
not trusted unless UTC/GMT - use ``--tz``); without ``-T`` the reports carry no time at all:
with ``Source.start`` and ``Source.interval_s`` report k ends at start + k x interval, without
a start they are numbered on the relative time line of :mod:`iogauge.model.timeline`. A report
cut off by the end of the file is dropped whole (see :func:`parse`).

A file is read a piece of :data:`CHUNK_BYTES` at a time (:func:`iter_parse`), each piece's
last report read again with the next one, so a long capture imports in bounded memory: 100 MB
of ``iostat -x`` to Parquet peaked at 0.23 GB, where the whole-file read peaked at 1.10 GB.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers import first_report
from iogauge.importers._lines import (
    LineCarry,
    host_fallback,
    line_frames,
    max_int,
    numbers,
    refuse_rows,
)
from iogauge.importers.base import Source
from iogauge.importers.first_report import busiest
from iogauge.importers.io import decode
from iogauge.importers.solaris_iostat.times import TS_D_RE as _TS_D_RE
from iogauge.importers.solaris_iostat.times import regular_interval as _regular_interval
from iogauge.importers.solaris_iostat.times import report_times as _report_times
from iogauge.model.sampleframe import SampleFrame

NAME = "solaris-iostat"
DESCRIPTION = ("Solaris/illumos iostat -x / -xn / -xnz extended device statistics "
               "(wait actv svc_t | wsvc_t asvc_t %w %b), with -T d|u time stamps")
EXPECTS = ("'extended device statistics' followed by a header with 'r/s w/s kr/s kw/s wait "
           "actv svc_t %w %b' (-x) or '... wait actv wsvc_t asvc_t %w %b device' (-xn)")

_EXT_RE = r"extended (device|disk) statistics"
_HEADER_SNIFF = re.compile(r"(^|[\s,])wait[\s,]+actv[\s,]+(svc_t|wsvc_t)([\s,]|$)", re.MULTILINE)
_TS_U_RE = r"^\s*\d{9,12}\s*$"
_STATE_RE = r"^\s*<<.*>>\s*$"
_CPU_WORDS = {"tin", "tout", "us", "sy", "wt", "id", "dt"}

#: per-row column -> (SampleFrame column, factor)
_COLUMNS: Mapping[str, tuple[str, float]] = {
    "r/s": ("r_iops", 1.0), "w/s": ("w_iops", 1.0),
    "kr/s": ("r_kBps", 1.0), "Kr/s": ("r_kBps", 1.0),
    "kw/s": ("w_kBps", 1.0), "Kw/s": ("w_kBps", 1.0),
    "kw": ("w_kBps", 1.0),  # iostat(8) Example 1 prints this header as "kw"
    "Mr/s": ("r_kBps", 1024.0), "Mw/s": ("w_kBps", 1024.0),  # -M: MB/s -> kB/s
    "wait": ("queue_wait_len", 1.0), "actv": ("active_len", 1.0),
    "svc_t": ("await_ms", 1.0), "wsvc_t": ("queue_wait_ms", 1.0),
    "asvc_t": ("svctm_ms", 1.0), "%w": ("queue_wait_pct", 1.0), "%b": ("util_pct", 1.0),
}
_ERROR_COLUMNS = {"s/w", "h/w", "trn", "tot"}  # -e: error counts, not carried
_CPU_MAP: Mapping[str, str] = {"us": "cpu_user_pct", "sy": "cpu_system_pct",
                               "wt": "cpu_iowait_pct", "id": "cpu_idle_pct"}


def sniff(head: str) -> bool:
    """``extended device statistics`` plus a header with ``wait actv svc_t|wsvc_t``."""
    return bool(re.search(_EXT_RE, head)) and bool(_HEADER_SNIFF.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def _kind_parent() -> tuple[pl.Expr, pl.Expr]:
    """(device_kind, parent) from Solaris instance names (``sd0``, ``sd0,a``, ``nfs1``,
    ``ssd22.t2.fp0``) and ``-n`` descriptive names (``c0t0d0``, ``c0t0d0s0``, ``c0``,
    ``server:/export``, ``rmt/0``)."""
    dev = pl.col("device")
    ctd = r"^c\d+(t[0-9A-Za-z]+)?d\d+"
    inst = r"^(sd|ssd|dad|cmdk|vdc|blkdev|xdf|nvme|zvblk)\d+"
    kind = (pl.when(dev.str.contains(ctd + "$")).then(pl.lit("disk"))
            .when(dev.str.contains(ctd + r"[sp]\d+$")).then(pl.lit("partition"))
            .when(dev.str.contains(r"^c\d+$")).then(pl.lit("port"))  # -C controller
            .when(dev.str.contains(inst + "$")).then(pl.lit("disk"))
            .when(dev.str.contains(inst + r",[a-z]+$")).then(pl.lit("partition"))
            .when(dev.str.contains(r"^(md\d+|d\d+|md/.+)$")).then(pl.lit("md"))
            .when(dev.str.contains(
                r"^(mpt_sas|mpt|mr_sas|fp|fcp|iscsi|scsi_vhci|ahci|nv_sata|si3124|pmcs|glm|"
                r"isp|qlc|emlxs|lsimega|aac|ata)\d*$")).then(pl.lit("port"))
            .otherwise(pl.lit("other")))
    parent = (pl.when(kind == "partition")
              .then(pl.coalesce(dev.str.extract(r"^(c\d+(?:t[0-9A-Za-z]+)?d\d+)[sp]\d+$"),
                                dev.str.extract(r"^([^,]+),")))
              .when(dev.str.contains(inst + r"\.")).then(dev.str.extract(r"^([^.]+)\."))
              .otherwise(None))
    return kind, parent


#: Bytes read per piece by :func:`iter_parse`. A piece's working set is some 10x its size (the
#: line column, its classification, the fields of its device lines, its rows), so the pieces
#: are kept small; the time per byte is the same as one whole-file pass.
CHUNK_BYTES = 4 << 20


@dataclass
class _Carry(LineCarry):
    """What one piece of a file hands on to the next (:func:`iter_parse`), besides the
    held-back lines of :class:`~iogauge.importers._lines.LineCarry`: its last report.

    Attributes:
        first: no report has been given out yet (the next one is the file's first, since
            boot).
        timestamped: the file's reports carry ``-T`` stamps (None: not known yet).
        raw: the file is ``-r`` comma-separated output (None: not known yet).
        rid_base: reports given out so far (report k of a file without stamps ends at
            start + k x interval).
        since_boot_next: a ``<<...>>`` line ended the reports given out: the next report
            averages since boot again.
        last_ts: time of the last report given out (the next one's interval starts there).
        regular_s: the file's sampling interval, s (from the first piece; for since-boot rows).
        prev_devices: devices of the last report given out, None if it had no device line.
        zero_row: some device row given out is all zeros (the file is not ``-z``).
        wt_nonzero: some ``wt`` given out is not 0 (it is measured: kept from then on).
        wt_null_to: cpu_iowait_pct was left null up to this line (every ``wt`` was 0).
        mid_capture: the file starts at a column header, not at iostat's first title or
            time stamp: an excerpt, whose first report is not the since-boot one.
        lead: 1 when the first report is measured (not printed when iostat started): on
            ``--start`` + k x interval, report k (from 0) then ends k + 1 intervals on.
    """

    first: bool = True
    timestamped: bool | None = None
    raw: bool | None = None
    rid_base: int = 0
    since_boot_next: bool = False
    last_ts: datetime | None = None
    regular_s: float | None = None
    prev_devices: list[str] | None = None
    zero_row: bool = False
    wt_nonzero: bool = False
    wt_null_to: int | None = None
    mid_capture: bool = False
    lead: int = 0


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time, in file order.

    Each piece is cut at a line end; its last report is held back and read again with the
    next piece (the piece may have ended inside it), so every report is read whole, and
    memory is bounded by a piece and a report. What spans pieces is carried
    (:class:`_Carry`): report numbers and the time of the last report, the since-boot mark
    after a ``<<...>>`` line, the device list a cut last report is compared with. Two things
    are decided on what has been read so far rather than on the whole file, which matters
    only for files longer than one piece: the sampling interval given to since-boot rows is
    the median spacing of the first piece's reports, and ``wt`` is left null while every
    ``wt`` so far is 0 (a note says up to which line, should a later one not be).
    """
    carry = _Carry()
    for lines, last, cut in line_frames(stream, chunk_bytes, carry, source.path):
        frame = _parse_piece(lines, source, carry, final=last, cut=cut)
        del lines
        if frame is not None and len(frame):
            yield frame


def parse(data: bytes, source: Source) -> SampleFrame:
    """Rows of every report; the first (and any after a ``<<...>>`` change) is since-boot.

    A report is dropped whole, with a note, when the file ends inside it: when the file does
    not end with a line break (its last line may be cut mid-number), when the report never
    got its column header, or when every earlier report listed the same devices and this one
    lists only the first few of them. Files longer than :data:`CHUNK_BYTES` are read a piece
    at a time (:func:`iter_parse`).
    """
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _parse_piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool,
                 cut: bool) -> SampleFrame | None:
    """The rows of the reports of ``lines`` (the whole file when it is one piece); of a piece
    that is not ``final``, all reports but the last, which goes to ``carry``."""
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None  # (blank lines only: a file of nothing else is "empty")
    if cut:
        # no final line break: the last line may be cut mid-number (or mid-time-stamp), so it
        # is not read at all, and the report it ends is dropped below
        lines = lines.filter(pl.col("line_no") != carry.lines_read)
    raw = _raw_of(lines, source, carry, final=final)
    if raw is None:
        carry.lines = lines.select("line_no", "line")  # read on until a header comes
        return None
    carry.raw = raw
    df = _classified(lines, raw, source, carry)
    held = _hold_last(df, lines, carry, final=final)
    if held is None:
        return None
    df, n_reports, changed = held
    del lines
    piece = _Piece(df, n_reports, changed, _fields(raw), final=final)
    rows = _device_rows(piece, source, carry, cut=cut)
    if rows is None:
        return None
    return _frame_of(piece, rows, source, carry)


@dataclass
class _Piece:
    """A piece's lines classified (``df``: report ``rid`` and the flags of each line), its
    number of reports, the reports after a ``<<...>>`` line (``changed``: they average since
    boot again), its field splitter, and what was read of it."""

    df: pl.DataFrame
    n_reports: int
    changed: set[int]
    tok: pl.Expr
    final: bool
    drop: set[int] = field(default_factory=set)
    cpu_parts: list[pl.DataFrame] = field(default_factory=list)
    first: bool = False  # the file's first reports (carry.first when it was read)
    base: int = 0  # reports given out before this piece

    @property
    def last(self) -> int:
        return self.n_reports - 1


def _raw_of(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool) -> bool | None:
    """Whether the file is ``-r`` comma-separated output (from its first column header);
    None while a piece that is not the last has no header yet."""
    header_rows = lines.filter(pl.col("line").str.contains(r"(^|[\s,])r/[si]([\s,]|$)")
                               & pl.col("line").str.contains(r"%b"))
    if header_rows.height:
        return "," in str(header_rows["line"][0]) if carry.raw is None else carry.raw
    if carry.raw is not None:
        return carry.raw
    if not final:
        return None
    raise InputFormatError(source.path, None, "no 'r/s w/s kr/s kw/s wait actv ...' "
                           "header of iostat -x")


def _cpu_block() -> pl.Expr:
    return pl.col("is_cpu_title") | pl.col("is_cpu_sub") | pl.col("is_cpu_val")


def _classified(lines: pl.DataFrame, raw: bool, source: Source, carry: _Carry
                ) -> pl.DataFrame:
    """``lines`` with the kind of each line and its report ``rid``.

    Lines are split into fields only where the fields are read (headers, cpu blocks, the
    device rows a batch of reports at a time: _rows_in_batches); the other tests are
    regexes on the line, as the fields would answer them (the lists of every line of a
    file cost some 10x its size)."""
    sep = r"\s*,[\s,]*" if raw else r"\s+"
    edge = r"[\s,]*" if raw else r"\s*"

    def only(words: list[str]) -> pl.Expr:
        """Every field is one of ``words`` (at least one field)."""
        w = "(?:" + "|".join(re.escape(x) for x in words) + ")"
        return pl.col("line").str.contains(f"^{edge}{w}(?:{sep}{w})*{edge}$").fill_null(False)

    has_field = pl.col("line").str.contains(r"[^\s,]" if raw else r"\S").fill_null(False)
    df = lines.with_columns(has_field.alias("has_field"))
    df = df.with_columns(
        pl.col("line").str.contains(_EXT_RE).fill_null(False).alias("is_ext"),
        pl.col("line").str.contains(_TS_U_RE).fill_null(False).alias("is_ts_u"),
        pl.col("line").str.contains(_TS_D_RE).fill_null(False).alias("is_ts_d"),
        pl.col("line").str.contains(_STATE_RE).fill_null(False).alias("is_state"),
        (pl.col("line").str.contains(r"(^|[\s,])r/[si]([\s,]|$)")
         & pl.col("line").str.contains("%b")).fill_null(False).alias("is_hdr"),
        only(["tty", "cpu"]).alias("is_cpu_title"),
        only(sorted(_CPU_WORDS)).alias("is_cpu_sub"),
    ).with_columns(
        # the numbers line right after a "us sy wt id" block header (-n with -c)
        pl.col("is_cpu_sub").shift(1, fill_value=False).alias("is_cpu_val"),
        (pl.col("is_ts_u") | pl.col("is_ts_d")).alias("is_ts"),
    )
    timestamped = bool(df["is_ts"].any())
    if carry.timestamped is not None and timestamped != carry.timestamped:
        stamp = df.filter(pl.col("is_ts"))
        raise InputFormatError(source.path, int(stamp["line_no"][0]) if stamp.height else None,
                               "time stamps begin after reports without any: the file joins "
                               "iostat runs with and without -T; import them separately")
    # (cum_sum counts in UInt32: cast before the "- 1", or the lines before the first title
    # wrap round to report 4294967295, and the times of 4 billion reports were allocated)
    if timestamped:
        rid = pl.col("is_ts").cum_sum().cast(pl.Int64) - 1
    else:
        rid = pl.col("is_ext").cum_sum().cast(pl.Int64) - 1 + _cpu_block().cast(pl.Int64)
    df = df.with_columns(rid.alias("rid"))
    if (carry.first and not timestamped
            and df.filter((pl.col("rid") < 0) & pl.col("is_hdr")).height):
        # output copied from its column header on (the first "extended device statistics"
        # title left out): the lines before the first title are the first report. (Other
        # lines before it - blank, a shell prompt - stay in report -1, which holds no header:
        # the stray ones are refused below as lines before the column header.)
        df = df.with_columns(pl.col("rid") + 1)
        carry.mid_capture = True
    return df


def _hold_last(df: pl.DataFrame, lines: pl.DataFrame, carry: _Carry, *, final: bool
               ) -> tuple[pl.DataFrame, int, set[int]] | None:
    """A piece that is not the file's last: its last report waits for the next piece (None:
    too few reports so far, read on). Returns the lines given out, their number of reports
    and the reports after a ``<<...>>`` line."""
    n_reports = max_int(df["rid"]) + 1
    changed = {int(r) + 1 for r in df.filter(pl.col("is_state"))["rid"].to_list()}
    if carry.since_boot_next or carry.first:
        changed.add(0)
    if not final:
        held = n_reports - 1
        # (the file's first piece gives out two reports at least: their spacing is the
        # sampling interval of its since-boot report)
        if held < (2 if carry.first else 1):
            carry.lines = lines.select("line_no", "line")  # too few reports so far: read on
            return None
        from_line = _first_line(df, held)
        carry.lines = lines.filter(pl.col("line_no") >= from_line).select("line_no", "line")
        df = df.filter(pl.col("line_no") < from_line)
        n_reports = held
    carry.since_boot_next = not final and n_reports in changed
    return df, n_reports, changed


def _device_rows(piece: _Piece, source: Source, carry: _Carry, *, cut: bool
                 ) -> pl.DataFrame | None:
    """The device rows of the piece's reports under their column layouts (and its CPU parts
    into ``piece.cpu_parts``); None when none is left."""
    timestamped = bool(piece.df["is_ts"].any())
    carry.timestamped = timestamped
    df = piece.df
    if timestamped:
        # lines before the first time stamp belong to a report whose time is unknown
        early = df.filter((pl.col("rid") < 0) & pl.col("has_field") & ~pl.col("is_ext"))
        refuse_rows(source, early.with_columns(pl.format(
            "line before the first time stamp of a file of time-stamped (-T) reports: '{}'",
            pl.col("line")).alias("reason")))
        df = df.filter(pl.col("rid") >= 0)
    df = piece.df = df.with_columns(pl.col("is_hdr").cum_sum().over("rid").alias("hdr_seen"))
    data_rows, layouts = _data_rows(piece, source)
    if timestamped:
        twice = df.filter(pl.col("is_ext")).filter(pl.col("rid").is_duplicated())
        if twice.height:
            raise InputFormatError(source.path, int(twice["line_no"][1]), "a report without "
                                   "its time stamp in a file of time-stamped (-T) reports")
    last = piece.last
    if piece.final and (last not in set(layouts["rid"].to_list()) or cut):
        # cut inside the last report: its last line may be cut mid-number
        piece.drop.add(last)
        data_rows = data_rows.filter(pl.col("rid") != last)
        source.note(f"the file ends inside its last report (report {carry.rid_base + last + 1}"
                    f", from line {_first_line(df, last)}): that report was dropped")
    parts: list[pl.DataFrame] = []
    for key in layouts["key"].unique(maintain_order=True).to_list():
        cols = key.split(" ")
        line_no = int(layouts.filter(pl.col("key") == key)["line_no"][0])
        rows = data_rows.filter(pl.col("key") == key)
        for frame, cpu in _rows_in_batches(rows, piece.tok, cols, line_no, source):
            parts.append(frame)
            if cpu is not None:
                piece.cpu_parts.append(cpu)
    # the -n "cpu" blocks
    block = _cpu_blocks(df, piece.tok, source)
    if block is not None:
        piece.cpu_parts.append(block)
    del data_rows
    return _given_out(piece, parts, source, carry)


def _data_rows(piece: _Piece, source: Source) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The device lines of the piece (with the ``key`` of their report's column layout) and
    the layouts (``rid``, ``line_no``, ``key``); lines before a header are refused."""
    df = piece.df
    hdrs = df.filter(pl.col("is_hdr")).select("rid", "line_no", piece.tok.alias("tok"))
    layouts = hdrs.with_columns(pl.col("tok").list.join(" ").alias("key"))
    data_rows = df.filter(~(pl.col("is_ext") | pl.col("is_ts") | pl.col("is_state")
                            | pl.col("is_hdr") | _cpu_block()) & pl.col("has_field"))
    before_hdr = data_rows.filter(pl.col("hdr_seen") == 0)
    refuse_rows(source, before_hdr.with_columns(
        pl.format("line before the iostat column header: '{}'", pl.col("line"))
        .alias("reason")))
    data_rows = data_rows.filter(pl.col("hdr_seen") > 0).join(
        layouts.select("rid", "key"), on="rid", how="left")
    return data_rows, layouts


def _given_out(piece: _Piece, parts: list[pl.DataFrame], source: Source, carry: _Carry
               ) -> pl.DataFrame | None:
    """The rows the piece gives out, once the carry knows what the next piece needs; a last
    report cut inside its device list is dropped; None when no row is left."""
    piece.first, piece.base = carry.first, carry.rid_base
    # what the next piece needs (a piece without rows still advances the file)
    carry.first = False
    carry.rid_base += piece.n_reports
    rows = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
    prev_devices, zero_before = carry.prev_devices, carry.zero_row
    carry.zero_row = zero_before or (rows.height > 0 and _has_zero_row(rows))
    last = piece.last
    in_last = rows.filter(pl.col("rid") == last) if rows.height else rows
    carry.prev_devices = in_last["device"].to_list() if in_last.height else None
    if rows.height == 0:
        if not piece.final and carry.timestamped:
            times = _report_times(piece.df, piece.n_reports, True, source, piece.base,
                                  carry.last_ts, lead=carry.lead)
            carry.last_ts = times["ts"][-1] if times.height else carry.last_ts
        return None
    if (piece.final and last not in piece.drop and last not in piece.changed
            and _cut_by_device_list(rows, last, prev_devices, zero_before)):
        source.note(f"the file ends inside its last report (report {piece.base + last + 1}, "
                    f"from line {_first_line(piece.df, last)}): it lists only the first "
                    "devices of the earlier reports, so it was dropped")
        rows = rows.filter(pl.col("rid") != last)
        if rows.height == 0:
            return None
    return rows


def _frame_of(piece: _Piece, rows: pl.DataFrame, source: Source, carry: _Carry
              ) -> SampleFrame:
    """The SampleFrame of the piece's device ``rows``: report times, intervals, the
    since-boot flag, the CPU columns, host and kinds."""
    timestamped = bool(carry.timestamped)
    since = piece.changed & set(range(piece.n_reports))
    if piece.changed - {0} or (0 in piece.changed and not piece.first):
        source.note("iostat reported a configuration change (<<...>> lines): the report after "
                    "it averages since boot again and is flagged since_boot")
    if piece.first and not first_report.since_boot(
            source, busiest=busiest(rows.filter(pl.col("rid") == 0)),
            shown_by=None if carry.mid_capture else
            "iostat(8): a run's first report covers the time since boot, and the file starts "
            "where iostat's output starts"):
        since.discard(0)
        carry.lead = 1
    times = _report_times(piece.df, piece.n_reports, timestamped, source, piece.base,
                          carry.last_ts, lead=carry.lead)
    carry.last_ts = times["ts"][-1] if times.height else carry.last_ts
    if piece.first or carry.regular_s is None:
        carry.regular_s = _regular_interval(times, source, relative=not timestamped
                                            and source.start is None)
    regular = carry.regular_s
    rows = rows.join(times, on="rid", how="left").with_columns(
        pl.col("rid").is_in(sorted(since)).alias("since_boot"))
    # (a measured first report has no report before it: it covers the regular interval)
    rows = rows.with_columns(
        pl.when(pl.col("since_boot") | pl.col("interval_s").is_null()).then(pl.lit(regular))
        .otherwise(pl.col("interval_s")).alias("interval_s"))
    bad_iv = rows.filter(~(pl.col("interval_s") > 0))
    if bad_iv.height:
        refuse_rows(source, bad_iv.with_columns(
            pl.format("time stamp does not advance (interval {} s)", pl.col("interval_s"))
            .alias("reason")))
        rows = rows.filter(pl.col("interval_s") > 0)
    if piece.cpu_parts:
        cpu = (pl.concat(piece.cpu_parts, how="diagonal_relaxed")
               .unique(subset=["rid"], keep="first"))
        if "cpu_iowait_pct" in cpu.columns:
            cpu = _iowait(cpu, piece.df, source, carry)
        rows = rows.join(cpu, on="rid", how="left")
    kind, parent = _kind_parent()
    out = rows.with_columns(kind.alias("device_kind"), parent.alias("parent"),
                            pl.lit(host_fallback(source)).alias("host"),
                            pl.lit(NAME).alias("source"))
    return SampleFrame(out.drop("rid", "line_no", "ts_local", "zone", strict=False)
                       .sort("ts", maintain_order=True))


def _iowait(cpu: pl.DataFrame, df: pl.DataFrame, source: Source, carry: _Carry
            ) -> pl.DataFrame:
    """``cpu`` without its cpu_iowait_pct while every ``wt`` of the file so far is 0 (Solaris
    10 and later no longer measure it); with it once one is not."""
    if not carry.wt_nonzero and bool((cpu["cpu_iowait_pct"].fill_null(0.0) == 0.0).all()):
        carry.wt_null_to = max_int(df["line_no"])
        source.note("every 'wt' (CPU I/O wait) value is 0, as on Solaris 10 and later "
                    "where it is no longer measured: cpu_iowait_pct left null")
        return cpu.drop("cpu_iowait_pct")
    if not carry.wt_nonzero and carry.wt_null_to is not None:
        source.note(f"cpu_iowait_pct is null up to line {carry.wt_null_to}, where every 'wt' "
                    "was 0, and read from there on, where some are not")
    carry.wt_nonzero = True
    return cpu


def _has_zero_row(rows: pl.DataFrame) -> bool:
    """Some device row has every measure 0 (``-z`` omits exactly those, iostat.c
    ``suppress_zero``)."""
    measures = [c for c in rows.columns if c not in ("rid", "line_no", "device")]
    if not measures:
        return False
    return bool(rows.select(pl.all_horizontal([(pl.col(c) == 0).fill_null(True)
                                               for c in measures]).any()).item())


def _first_line(df: pl.DataFrame, rid: int) -> int:
    r = df.filter(pl.col("rid") == rid)
    return -max_int(-r["line_no"].cast(pl.Int64)) if r.height else 0


def _fields(raw: bool) -> pl.Expr:
    """A line's fields: whitespace-separated, or for ``-r`` (``raw``) comma-separated and
    stripped, empty ones left out."""
    if raw:
        return (pl.col("line").str.split(",").list.eval(pl.element().str.strip_chars())
                .list.eval(pl.element().filter(pl.element().str.len_chars() > 0)))
    return pl.col("line").str.extract_all(r"\S+")


#: Device rows split into fields at a time, in whole reports (see _rows_in_batches).
BATCH_ROWS = 200_000


def _rows_in_batches(rows: pl.DataFrame, tok: pl.Expr, cols: list[str], hdr_line: int,
                     source: Source) -> Iterator[tuple[pl.DataFrame, pl.DataFrame | None]]:
    """:func:`_rows_of_layout` of ``rows`` (file order) in batches of whole reports of about
    :data:`BATCH_ROWS` rows, each split into ``tok`` fields and their count ``n``."""
    if rows.height == 0:
        yield _rows_of_layout(rows.with_columns(tok.alias("tok"), pl.lit(0, pl.UInt32)
                                                .alias("n")), cols, hdr_line, source)
        return
    # where each report's rows start; a batch ends at the first report start past its size
    starts = (rows.select(pl.arg_where(pl.col("rid") != pl.col("rid").shift(1)))
              .to_series().to_list())
    bounds = [0]
    for at in starts[1:]:
        if at - bounds[-1] >= BATCH_ROWS:
            bounds.append(at)
    bounds.append(rows.height)
    for a, b in itertools.pairwise(bounds):
        # one chunk per column (see unix_sar._read_sections: a polars 2.1 panic)
        batch = rows.slice(a, b - a).rechunk().with_columns(tok.alias("tok")).with_columns(
            pl.col("tok").list.len().fill_null(0).alias("n"))
        yield _rows_of_layout(batch, cols, hdr_line, source)


def _rows_of_layout(rows: pl.DataFrame, cols: list[str], hdr_line: int, source: Source
                    ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Device rows of the reports whose header is ``cols``: values and the first row's
    tty/cpu extras (without -n)."""
    if any(c in ("r/i", "w/i", "kr/i", "kw/i", "Mr/i", "Mw/i") for c in cols):
        raise InputFormatError(source.path, hdr_line, "iostat -I prints counts per interval "
                               "(r/i, kr/i ...), not rates: rerun without -I")
    device_last = cols[-1] == "device"
    if device_last:
        per_row = cols[:-1]
        extras: list[str] = []
    else:
        if cols[0] not in ("device", "disk"):
            raise InputFormatError(source.path, hdr_line, f"iostat header starts with "
                                   f"{cols[0]!r}, expected 'device' (-x) or ending in "
                                   f"'device' (-xn)")
        body = cols[1:]
        first_extra = next((i for i, c in enumerate(body) if c in _CPU_WORDS), len(body))
        per_row, extras = body[:first_extra], body[first_extra:]
    unknown = [c for c in per_row if c not in _COLUMNS and c not in _ERROR_COLUMNS]
    if unknown:
        raise InputFormatError(source.path, hdr_line, f"unknown iostat column(s) "
                               f"{', '.join(unknown)}")
    nv = len(per_row)
    t = pl.col("tok")
    if device_last:
        # "-m" adds " (/mount)" after the device name
        mount = t.list.last().str.contains(r"^\(.*\)$")
        dev = pl.when(mount).then(t.list.get(-2, null_on_oob=True)).otherwise(t.list.last())
        n_expected = pl.when(mount).then(pl.lit(nv + 2)).otherwise(pl.lit(nv + 1))
        vals = [t.list.get(i, null_on_oob=True) for i in range(nv)]
        extra_vals: list[pl.Expr] = []
    else:
        dev = t.list.first()
        first_in_report = pl.col("line_no") == pl.col("line_no").min().over("rid")
        has_extra = first_in_report & (pl.col("n") == nv + 1 + len(extras)) & (len(extras) > 0)
        n_expected = pl.when(has_extra).then(pl.lit(nv + 1 + len(extras))).otherwise(
            pl.lit(nv + 1))
        vals = [t.list.get(i + 1, null_on_oob=True) for i in range(nv)]
        extra_vals = [pl.when(has_extra).then(t.list.get(nv + 1 + j, null_on_oob=True))
                      for j in range(len(extras))]
    rows = rows.with_columns(
        dev.str.replace(r"\(.*\)$", "").alias("device"),
        n_expected.alias("n_expected"),
        *[numbers(v).alias(f"v{i}") for i, v in enumerate(vals)],
        *[numbers(v).alias(f"x{j}") for j, v in enumerate(extra_vals)],
    )
    reason = (pl.when(pl.col("n") != pl.col("n_expected"))
              .then(pl.format("iostat line has {} fields, expected {} ({}): '{}'", pl.col("n"),
                              pl.col("n_expected"), pl.lit(" ".join(cols)), pl.col("line")))
              .when(pl.any_horizontal([pl.col(f"v{i}").is_null() for i in range(nv)]))
              .then(pl.format("iostat values are not all numbers: '{}'", pl.col("line")))
              .otherwise(None))
    rows = rows.with_columns(reason.alias("reason"))
    refuse_rows(source, rows.filter(pl.col("reason").is_not_null()))
    rows = rows.filter(pl.col("reason").is_null())

    idx = {c: i for i, c in enumerate(per_row)}
    measures: dict[str, pl.Expr] = {}
    for c, i in idx.items():
        if c in _COLUMNS:
            target, factor = _COLUMNS[c]
            measures[target] = pl.col(f"v{i}") * factor if factor != 1.0 else pl.col(f"v{i}")
    if "r_iops" in measures and "w_iops" in measures:
        measures["iops"] = measures["r_iops"] + measures["w_iops"]  # iostat.c: tps = rps + wps
    if "r_kBps" in measures and "w_kBps" in measures:
        measures["kBps"] = measures["r_kBps"] + measures["w_kBps"]  # kps = krps + kwps
    if "queue_wait_len" in measures and "active_len" in measures:
        measures["aqu_sz"] = measures["queue_wait_len"] + measures["active_len"]  # avw + avr
    if "await_ms" not in measures and "queue_wait_ms" in measures and "svctm_ms" in measures:
        measures["await_ms"] = measures["queue_wait_ms"] + measures["svctm_ms"]  # wserv+rserv
    frame = rows.select("rid", "line_no", "device", *[e.alias(k) for k, e in measures.items()])
    cpu: pl.DataFrame | None = None
    picked = [(j, _CPU_MAP[c]) for j, c in enumerate(extras) if c in _CPU_MAP]
    if picked:
        cpu = rows.filter(pl.col(f"x{picked[0][0]}").is_not_null()).select(
            "rid", *[pl.col(f"x{j}").alias(name) for j, name in picked])
    return frame, cpu


def _cpu_blocks(df: pl.DataFrame, tok: pl.Expr, source: Source) -> pl.DataFrame | None:
    """The ``cpu`` / ``us sy wt id`` / values blocks that ``-n`` prints before a report
    (``tok``: a line's fields, :func:`_fields`)."""
    subs = df.filter(pl.col("is_cpu_sub")).select("rid", "line_no", tok.alias("tok"))
    if subs.height == 0:
        return None
    # Each values line is the line after its "us sy wt id" line; a file that ends on that
    # line has none (its last report is dropped as cut off), so the pairs are joined by line.
    vals = df.filter(pl.col("is_cpu_val")).select(
        (pl.col("line_no") - 1).alias("line_no"), pl.col("line_no").alias("vln"), "line",
        tok.alias("vtok"))
    pairs = subs.join(vals, on="line_no", how="inner", maintain_order="left")
    out: list[dict[str, object]] = []
    for rid, _ln, hdr_names, vln, vline, vtok in pairs.iter_rows():
        names = list(hdr_names)
        toks = list(vtok or [])
        if len(toks) != len(names) or not all(re.fullmatch(r"\d+(\.\d+)?", x) for x in toks):
            source.bad_line(int(vln), f"cpu line does not match its header "
                            f"'{' '.join(names)}': '{vline}'")
            continue
        rec: dict[str, object] = {"rid": int(rid)}
        for name, value in zip(names, toks, strict=True):
            if name in _CPU_MAP:
                rec[_CPU_MAP[name]] = float(value)
        out.append(rec)
    if not out:
        return None
    return pl.DataFrame(out).with_columns(pl.col("rid").cast(pl.Int64))


def _cut_by_device_list(rows: pl.DataFrame, last: int, prev_devices: list[str] | None,
                        zero_before: bool) -> bool:
    """True if the last report lists only the first devices of the report before it, in a
    file that is not ``-z``: then the file was cut at a line end inside the last report.

    A file is known not to be ``-z`` when some row is all zeros (``-z`` omits exactly those
    lines, iostat.c ``suppress_zero``); without ``-z`` every report lists the same devices
    unless iostat announced a change (``<<...>>``). In a ``-z`` file a shorter last report is
    normal, so a cut at a line end there cannot be told apart and the report is kept.
    ``rows`` are a piece's; ``prev_devices`` lists the report before its first (None: none,
    or it had no device line) and ``zero_before`` says whether a row before it was all
    zeros."""
    if not (zero_before or _has_zero_row(rows)):
        return False
    lists = rows.group_by("rid", maintain_order=True).agg(pl.col("device")).sort("rid")
    if prev_devices is not None:
        before_piece = pl.DataFrame({"rid": [-1], "device": [prev_devices]},
                                    schema={"rid": lists.schema["rid"],
                                            "device": lists.schema["device"]})
        lists = pl.concat([before_piece, lists])
    if lists.height >= 1 and int(lists["rid"][-1]) == last - 1:
        # the last report got its header lines but not one device line: cut right there
        return True
    if lists.height < 2 or int(lists["rid"][-1]) != last:
        return False
    before = lists["device"][-2].to_list()
    tail = lists["device"][-1].to_list()
    return len(tail) < len(before) and before[:len(tail)] == tail
