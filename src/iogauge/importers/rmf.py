"""z/OS RMF Postprocessor reports: DASD activity, cache subsystem activity, ESS rank statistics.

[Yuge] reads three RMF Postprocessor reports together: the DIRECT ACCESS
DEVICE ACTIVITY report (per-volume response time and its IOSQ/PEND/DISC/CONN breakdown), the
CACHE SUBSYSTEM ACTIVITY report (the "application attributes": read/write mix, sequential vs
"normal" (random) requests, hit ratios, destage) and the ESS RANK STATISTICS report (throughput
and response time per DS8000 RAID rank). This importer turns the text of those reports -- as
the Postprocessor writes them to SYSOUT (132 columns, ASA carriage control in column 1, a page
title whose letters are spaced out, e.g. ``D I R E C T   A C C E S S   D E V I C E   A C T I V I
T Y``) -- into SampleFrame rows. Other reports in the same output (CPU, CHANNEL PATH, I/O
QUEUING, ...) are skipped page by page and listed in a note.

Layouts follow IBM, *z/OS RMF Report Analysis* (SC34-2665): the V2R1/V2R4 figures "Cache
Subsystem Activity Report - Status and Overview" and "Cache Device Activity" give the cache
pages line by line; the DASD column headings (STORAGE GROUP, DEV NUM, DEVICE TYPE, NUMBER OF
CYL, VOLUME SERIAL, PAV, LCU, DEVICE ACTIVITY RATE, AVG RESP/IOSQ/CMR/DB/INT/PEND/DISC/CONN
TIME, % DEV CONN/UTIL/RESV, ...) and the ESS rank columns (EXTENT POOL ID/TYPE, RRID, ADAPT ID,
READ and WRITE OPS/SEC, BYTES/OP, BYTES/SEC, RTIME/OP, ARRAY ..., RAID TYPE) come from the report
descriptions, not from a sample page, so the parser does not depend on column positions: DASD
values are named by pairing the second and third heading lines word by word and taken from the
right end of each line, ESS values by their order. Every page carries the header::

    z/OS V2R4   SYSTEM ID SYS1   DATE 05/11/2019   INTERVAL 10.00.010
                RPT VERSION V2R4 RMF   TIME 08.50.00

TIME is the *start* of the RMF interval in z/OS local time, INTERVAL is ``mm.ss.ttt``. A row's
``ts`` is start + INTERVAL (the interval end), converted to UTC with ``--tz`` (RMF reports state
no zone; without ``--tz`` UTC is assumed and a note says so); ``interval_s`` is INTERVAL.

Rows and mappings (one row per device per interval; the sections of one interval -- same
SYSTEM ID and start time -- are merged, so a volume met in the DASD report and in the cache
report is one row, with ``ts``/``interval_s`` taken from the DASD report's header):

=======================  ==========  ==================================================
device                   kind        columns (report field)
=======================  ==========  ==================================================
VOLSER (``DB2D01``)      volume      DASD: iops (DEVICE ACTIVITY RATE), await_ms (AVG RESP
                                     TIME), iosq_ms/pend_ms/disc_ms/conn_ms (AVG IOSQ/PEND/
                                     DISC/CONN TIME), util_pct (% DEV UTIL).
                                     Cache device overview: cache_hit_pct (TOTAL H/R x 100).
                                     Cache device activity (device-level reporting):
                                     r_iops/w_iops (TOTAL read/write RATE), seq_read_ps/
                                     seq_write_ps (SEQUENTIAL read/write RATE),
                                     cache_hit_pct (TOTAL H/R x 100).
``LCU:0040``             lcu         the DASD report's LCU summary line, same columns as
                                     a volume.
``SG:SGDB2``             lcu         a storage group (the DASD lines' STORAGE GROUP
                                     column), computed from its volumes' DASD lines:
                                     iops summed, the times weighted by activity, util_pct
                                     the volumes' mean (:func:`_storage_groups`).
``SSID:4000``            lcu         the cache subsystem overview of one SSID: r_iops,
                                     w_iops, seq_read_ps, seq_write_ps, cache_hit_pct.
``RANK:0004@ABCD1``      rank        ESS rank statistics: r_iops/w_iops (OPS/SEC),
                                     r_kBps/w_kBps (BYTES/SEC / 1024), r_areq_kB/w_areq_kB
                                     (BYTES/OP / 1024), r_await_ms/w_await_ms (RTIME/OP).
``POOL:0000@ABCD1``      other       the ESS POOL summary line of an extent pool, same
                                     columns as a rank.
=======================  ==========  ==================================================

``ABCD1`` is the storage facility serial with its leading zeros dropped (the cache report
prints it in 12 digits, the ESS report in 10). ``parent``: a rank's parent is its extent pool;
a volume's parent is its rank when the report links them -- the cache device page's ``RRID``
(IBM's 2105 figure; for a 2107 the page's ``XTNT POOL nnnn`` form is our reading), or the
device overview's XTNT POOL column when the ESS report of the same file shows that pool
holding exactly one rank -- else its extent pool (a pool of several ranks stripes volumes over
all of them), else its LCU (DASD report). Analyses that aggregate by parent must look at the
parent's kind.

Deliberate choices, because the reports say less than a SampleFrame could hold:

* RMF prints K/M/G after large byte figures; they are taken as binary multiples, as RMF
  Report Analysis describes its size suffixes ("followed by a K (... kilobytes) ... M (...
  megabytes)"), so ``203.8M`` bytes/s is ``203.8 x 1024`` kB/s. Hit ratios (H/R, 0..1)
  become percentages (x 100). Conversions are done in decimal so that the printed digits
  survive (0.998 -> 99.8, not 99.80000000000001).
* The cache counts *requests seen by the control unit* and the DASD report counts *start
  subchannels*, so a volume's ``r_iops + w_iops`` (cache) need not equal its ``iops`` (DASD).
* Not mapped (no SampleFrame column): CMR/DB/INT delays, % DEV CONN/RESV, allocation counts,
  cache miss and destage (ASYNC) rates, DFW/CFW/ICL/bypass counts, ESS array attributes. ESS
  EXTENT POOL (capacity) and LINK statistics pages are skipped.
* Storage groups: a volume's group is the STORAGE GROUP column of its DASD line (blank: in
  none), and each group's row is computed from those lines, as RMF makes its LCU summary
  line from its device lines. A report sorted by storage group prints a total line per
  group, whose layout IBM does not document (no sample of one was available): a DASD line
  that names the group of the device lines above it just before the values, with at most
  two fields before the name (``SG  SGDB2 ...``, ``SGDB2 ...``), is taken for that total,
  left out (a note counts them) and closes the table as an LCU line does. Any other summary
  line is refused with its line number rather than guessed.
* A file cut off inside a report page (no final newline, or a DASD page not closed by its LCU
  summary, an ESS page not closed by POOL, a cache page without its TOTAL row or device
  overview) loses the whole last interval, not only the cut line, and a note says so: half an
  interval would show a rank without its volumes. A cut at a line end between two complete
  pages or lines is found by comparing the last interval with the earlier ones (every report
  and device line they all have must be there); a file of one interval cut that cleanly keeps
  the pages it has.

Reading: each piece of text (:data:`CHUNK_BYTES`) is one polars Series of lines, classified
at once by expressions: the page titles (a regex pre-filter, so that :func:`_title_of` sees only
lines starting with the ASA '1' or with no two printable characters side by side), the page
each line is on (lines of skipped reports are never looked at again), and per page type the
lines that carry structure -- page headers, DASD column headings, cache rules and the
sub-section titles after them, SUBSYSTEM/TYPE-MODEL/VOLSER/SERIAL lines, the request table's
heading, TOTAL H/R, ESS SERIAL NUMBER and rank lines. Only those go through the line functions
(the state machine) one by one. Between two of them the state cannot change, so the data lines
there -- DASD device and LCU lines, cache device overview rows, request table rows -- are
checked, split and converted by one regex per line type for the whole piece; lines there that
change nothing (status, cache misses) are not read at all. A run of DASD or device overview
lines between two structure lines joins its interval at once (:func:`_bulk`): set operations
check that no device of the run is in its section twice or of two kinds, and its rows stay in
the parsed table, gathered once a piece (State.parts). A line the expressions cannot vouch
for (a character outside printable ASCII, a field that is not a plain number, a wrong field
count), and every line of a run that fails a check, is read by the line function, so it is
refused with the same line number and reason as before. On the benchmark input below 23 % of
the lines still go through the line functions one by one (page headers 6.6 %, cache
structure 12.4 %, ESS 2.5 %, DASD headings 1.7 %) and 4 % are page titles; of the rows,
those of the DASD and device overview lines (86 % in a 10 MB slice: 18,086 of 21,098) are
never touched one by one in Python, those of the request tables (SSID and cache device
pages) and ESS rank lines are; the rest of the lines is never touched in Python.

Memory: the text is read a piece at a time, and RMF prints the reports of an interval
together, so a host's earlier intervals are complete when a later one begins: once
``_ROWS_PER_TABLE`` rows of closed intervals are waiting, those read a line at a time leave
Python dicts (some 1.4 kB a row) and, with those read a run at a time, make a table of a
row per device and interval (:func:`_merged`), with their volume links, LCU and the
sections each device was read in; of their lines only what the cut checks need (the lines
every one of them had) is kept. A page of an interval thought complete opens it again, and
a device line it had read already is refused as before. The rows are handed on at the end
(a volume's parent comes from the whole file's ESS pages), sorted, in SampleFrames of
``_ROWS_OUT`` rows: 100 MB of report (``benchmarks/import_memory.py``) import to Parquet
at 0.25-0.28 GB peak in 11.1-11.5 s, where merging every row one by one took 0.25-0.26 GB
and 12.1-12.4 s (two runs each, in alternation, same rows; the line-by-line reading before
the vectorised one took 0.24 GB and 13.7-16.0 s in an earlier hour, and reading the whole
file 0.94 GB).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache, partial
from itertools import repeat
from typing import Any, BinaryIO

import numpy as np
import polars as pl

from iogauge.importers._lines import pieces
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.model.sampleframe import SCHEMA, SampleFrame

NAME = "rmf"
DESCRIPTION = ("z/OS RMF Postprocessor reports: Direct Access Device Activity, Cache Subsystem "
               "Activity, ESS Rank Statistics")
EXPECTS = ("RMF Postprocessor report text: a 'z/OS Vn Rn SYSTEM ID' page header and a DIRECT "
           "ACCESS DEVICE ACTIVITY, CACHE SUBSYSTEM ACTIVITY or ESS RANK STATISTICS page title")

# Titles as they read once the letter spacing is removed.
_DASD = "DIRECT ACCESS DEVICE ACTIVITY"
_CACHE = "CACHE SUBSYSTEM ACTIVITY"
_CACHE_DEV = "CACHE DEVICE ACTIVITY"
_ESS_RANK = "ESS RANK STATISTICS"
_KNOWN = (_DASD, _CACHE, _CACHE_DEV, _ESS_RANK)
_SNIFF_TITLES = tuple(t.replace(" ", "") for t in (*_KNOWN, "ESS EXTENT POOL STATISTICS"))

_SYS_RE = re.compile(r"z/OS\s+(V\d+R\d+)\s+SYSTEM ID\s+(\S+)\s+DATE\s+(\d{2}/\d{2}/\d{4})\s+"
                     r"INTERVAL\s+(\d{1,3})\.(\d{2})\.(\d{3})\b")
_TIME_RE = re.compile(r"(?:RPT VERSION|CONVERTED TO)\s.*?\bRMF\s+TIME\s+"
                      r"(\d{2})\.(\d{2})\.(\d{2})\b")
_NA = "N/A"
_HEX4 = re.compile(r"[0-9A-F]{4}")
_DEVNUM = re.compile(r"[0-9A-F]{4,5}")
_PAV = re.compile(r"\d+(?:\.\d+)?H?\*?")
_SUBSYS_RE = re.compile(r"^SUBSYSTEM\s+\S+\s+CU-ID\s+(\S+)\s+SSID\s+([0-9A-F]{4})\b")
_SERIAL_RE = re.compile(r"^TYPE-MODEL\s.*\bSERIAL\s+([0-9A-Z]+)\s*$")
_VOLSER_RE = re.compile(r"^VOLSER\s+(\S+)\s+NUM\s+([0-9A-F]{4,5})"
                        r"(?:\s+(RRID|XTNT POOL|EXTENT POOL)\s+([0-9A-F]{4}))?\s*$")
_ESS_SERIAL_RE = re.compile(r"^SERIAL NUMBER\s+([0-9A-Z]+)\s")
_HR_RE = re.compile(r"^TOTAL H/R\s+(\S+)")
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)([KMGT]?)")
_BINARY = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_REQ_ROWS = ("NORMAL", "SEQUENTIAL", "CFW DATA", "TOTAL")
#: CACHE SUBSYSTEM DEVICE OVERVIEW value columns after VOLSER, DEV NUM [, XTNT POOL]
#: (RMF Report Analysis, "Cache Subsystem Device Overview"); TOTAL H/R is the 12th.
_OVERVIEW_NVALUES = 15
_OVERVIEW_TOTAL_HR = 11
#: ESS RANK STATISTICS: READ OPS/SEC BYTES/OP BYTES/SEC RTIME/OP, then the same for WRITE.
_RANK_NVALUES = 8


def sniff(head: str) -> bool:
    """RMF report text: a z/OS page header and one of the I/O report titles (spaced or not)."""
    if "z/OS" not in head or "RMF" not in head:
        return False
    collapsed = re.sub(r"\s+", "", head)
    return any(t in collapsed for t in _SNIFF_TITLES)


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------
def _dec(token: str) -> Decimal | None:
    """A printed RMF number (``.000``, ``1.50``, ``1294.126``); None for N/A or not a number."""
    if token in (_NA, "-", ""):
        return None
    try:
        value = Decimal(token)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _num(token: str, line_no: int, what: str) -> float | None:
    """A float from an RMF number; N/A -> None; anything else refuses the line, a negative
    number too (RMF's rates, times and percentages are never below zero; taken, it failed the
    SampleFrame's checks with no line named)."""
    if token == _NA:
        return None
    value = _dec(token)
    if value is None:
        raise _BadLine(line_no, f"{what}: {token!r} is not a number")
    if value < 0:
        raise _BadLine(line_no, f"{what}: {token!r} is negative")
    return float(value)


def _bytes(token: str, line_no: int, what: str) -> Decimal:
    """An ESS byte figure with RMF's K/M/G/T suffix (binary multiples), in bytes."""
    m = _SIZE_RE.fullmatch(token)
    if m is None:
        raise _BadLine(line_no, f"{what}: {token!r} is not a byte count (e.g. 56.0K, 203.8M)")
    return Decimal(m.group(1)) * _BINARY[m.group(2)]


def _kb(value: Decimal) -> float:
    return float(value / 1024)


def _pct_of_ratio(token: str, line_no: int, what: str) -> float | None:
    """A hit ratio printed as 0.998 -> 99.8 (percent); N/A -> None."""
    if token == _NA:
        return None
    value = _dec(token)
    if value is None or value > 1:
        raise _BadLine(line_no, f"{what}: {token!r} is not a hit ratio between 0 and 1")
    return float(value * 100)


def _serial(text: str) -> str:
    return text.lstrip("0") or "0"


def _spaced_title(text: str) -> str | None:
    """``C A C H E   S U B S Y S T E M`` -> ``CACHE SUBSYSTEM``; None if not letter-spaced."""
    s = text.strip()
    words = s.split("   ")
    if len(s) < 5 or not any(len(w) > 1 for w in words):
        return None
    if not all(re.fullmatch(r"\S(?: \S)*", w) for w in words):
        return None
    return " ".join(w.replace(" ", "") for w in words)


class _BadLine(Exception):  # noqa: N818 - internal control flow, converted to source.bad_line
    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(reason)
        self.line_no = line_no
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# parse state
# ---------------------------------------------------------------------------------------------
@dataclass
class _Interval:
    """Everything read for one (SYSTEM ID, interval start)."""

    host: str
    start: datetime  # naive, z/OS local time
    interval_s: Decimal
    from_dasd: bool
    #: rows read one line at a time: device -> column -> value (the rows read a run of
    #: lines at a time are in State.parts)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: device_kind -> the devices of that kind (in ``rows`` or State.parts)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)
    sections: set[str] = field(default_factory=set)
    closed: bool = False  # a later interval of its host began (see _close_older)
    in_table: bool = False  # its rows were moved to State.tables
    folded: bool = False  # its ``seen`` went into State.common_seen (and was let go)

    def kind_of(self, device: str) -> str | None:
        return next((k for k, devices in self.kinds.items() if device in devices), None)

    def devices(self) -> int:
        return sum(len(devices) for devices in self.kinds.values())


@dataclass
class _Page:
    """The report page being read: its section and header, and where its tables stand."""

    title: str
    line_no: int
    asa: bool
    header_sys: tuple[str, str, Decimal] | None = None  # (system id, date, interval seconds)
    key: tuple[str, datetime] | None = None
    # DASD
    dasd_cols: list[str] | None = None
    dasd_line2: list[str] | None = None
    dasd_last_lcu: bool = False  # the last line read closes the table (LCU or SG summary)
    dasd_rows: int = 0
    dasd_last_sg: str | None = None  # the storage group of the last device line read
    # cache
    ssid: str | None = None
    serial: str | None = None
    volser: str | None = None
    vol_link: tuple[str, str] | None = None  # ("RRID"|"POOL", id)
    subsection: str = ""
    table: str = ""
    req: dict[str, list[str]] = field(default_factory=dict)
    req_done: bool = False
    overview_rows: int = 0
    total_hr: str | None = None
    after_rule: bool = False
    overview_pool: bool = False
    # ESS
    ess_serial: str | None = None
    ess_pool: str | None = None
    ess_last_pool: bool = True
    ess_rows: int = 0


@dataclass
class _State:
    source: Source
    intervals: dict[tuple[str, datetime], _Interval] = field(default_factory=dict)
    last_key: tuple[str, datetime] | None = None
    skipped_titles: list[str] = field(default_factory=list)
    #: (serial, pool) -> ranks seen in the ESS report, over the whole file (configuration)
    pool_ranks: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: (host, start, volser) -> ("RRID"|"POOL", id, serial)
    vol_links: dict[tuple[str, datetime, str], tuple[str, str, str]] = field(default_factory=dict)
    vol_lcu: dict[tuple[str, datetime, str], str] = field(default_factory=dict)
    #: (host, start, volser) -> the STORAGE GROUP column of the volume's DASD line
    vol_sg: dict[tuple[str, datetime, str], str] = field(default_factory=dict)
    #: storage-group summary lines recognised and not read (:func:`_dasd_line`)
    sg_summaries: int = 0
    rank_pool: dict[str, str] = field(default_factory=dict)
    #: the rows of closed intervals as tables, a row per device and interval (see
    #: :func:`_close_older`, :func:`_merged`)
    tables: list[pl.DataFrame] = field(default_factory=list)
    #: the rows read a run of lines at a time (:func:`_bulk`) of intervals not yet tabled,
    #: a table per piece and line type: host, _start, device, device_kind, the columns they
    #: set, _lcu, _sg, _link (and _has_hit for the device overview's)
    parts: list[pl.DataFrame] = field(default_factory=list)
    #: the piece being read (whose runs :func:`_tables_of_closed` takes first)
    piece: _Piece | None = None
    #: closed intervals not yet tabled, and how many rows they hold (dicts and runs)
    closed: list[tuple[str, datetime]] = field(default_factory=list)
    closed_rows: int = 0
    #: host -> its intervals not closed
    open_keys: dict[str, list[tuple[str, datetime]]] = field(default_factory=dict)
    #: host -> the (device, section) lines every folded interval of it had
    common_seen: dict[str, set[tuple[str, str]]] = field(default_factory=dict)


#: Bytes read per piece by :func:`iter_parse`.
CHUNK_BYTES = 4 << 20


def _pieces(stream: BinaryIO, chunk_bytes: int) -> Iterator[tuple[int, list[str], str | None]]:
    """``(number of the first line, lines, cut line)`` of each piece of the input: the lines
    as split (``\\r`` not yet removed), and the last line of a file cut off inside it (no
    line end) apart, or None."""
    first = 1
    for data, last in pieces(stream, chunk_bytes):
        cut = last and bool(data) and not data.endswith(b"\n")
        # split on \n only: str.splitlines() would also break at form feeds and shift line
        # numbers
        raw_lines = decode(data).split("\n")
        del data
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()  # the empty string after the final newline
        tail = raw_lines.pop() if cut and raw_lines else None
        yield first, raw_lines, tail
        first += len(raw_lines)


# ---------------------------------------------------------------------------------------------
# parse
# ---------------------------------------------------------------------------------------------
def parse(data: bytes, source: Source) -> SampleFrame:
    """Parse RMF Postprocessor report text (see the module docstring for the mapping)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, given at the end (an interval's reports may be anywhere
    in the file, and a volume's parent comes from the whole file's ESS pages) in
    SampleFrames of :data:`_ROWS_OUT` rows; the text is read a piece at a time, so it is
    never held whole."""
    st = _State(source=source)
    page: _Page | None = None
    cut_line = False
    partial: tuple[int, str] | None = None
    for first, raw_lines, tail in _pieces(stream, chunk_bytes):
        page = _read_piece(st, page, first, raw_lines)
        if tail is not None:
            cut_line = True
            partial = (first + len(raw_lines), tail.rstrip("\r"))
    if partial is not None and (partial[1].startswith("1")
                                or _spaced_title(partial[1]) is not None):
        # the cut fell in the title line of a new page: nothing of that page was read and
        # the pages before it are whole
        cut_line = False
        source.note(f"line {partial[0]} (a page title) is cut off; not read")
    if page is not None and page.title in _KNOWN and (cut_line or not _page_complete(page)):
        _drop_cut_interval(st, page, cut_line)
    _drop_short_last_intervals(st)
    if st.sg_summaries:
        source.note(f"{st.sg_summaries} storage-group summary line"
                    f"{'s' if st.sg_summaries != 1 else ''} (a report sorted by storage "
                    "group) not read: IBM documents no layout for them; each group's row is "
                    "computed from its volumes' lines instead")
    if st.skipped_titles:
        source.note("RMF report pages not imported (no device I/O statistics): "
                    + ", ".join(st.skipped_titles))
    rows = _frame(st)
    for offset in range(0, rows.height, _ROWS_OUT):
        yield SampleFrame(rows.slice(offset, _ROWS_OUT))


# ---- vectorised reading ---------------------------------------------------------------------
# A piece of text is read as a polars Series of lines. Expressions find the page titles, the
# lines that carry structure (headings, rules, SUBSYSTEM/SERIAL/VOLSER lines, table labels)
# and the data lines; the structure lines go one by one through the line functions below
# (the state machine), and the data lines between two of them are split, checked and
# converted together; a run of DASD or device overview rows joins its interval at once
# (_bulk), request table rows are merged one by one (_row, a few a page). Anything
# the expressions cannot vouch for -- a character other than printable ASCII (Python's
# str.split() and the regex engine disagree on what is white space), a field that is not a
# plain number, a wrong field count -- goes through the line functions instead, so that it
# is refused with the same line number and reason.

#: Printable ASCII and spaces only: lines whose split() the expressions reproduce.
_CLEAN_RE = r"^[ -~]*$"
#: Two printable, non-blank ASCII characters side by side: not a letter-spaced title.
_NOT_SPACED_RE = r"[!-~]{2}"
#: A value read without Python: N/A or an unsigned decimal number as RMF prints it.
_FAST_NUM = r"N/A|[0-9]+(?:\.[0-9]*)?|\.[0-9]+"
_FAST_NUM_RE = f"^(?:{_FAST_NUM})$"
#: A hit ratio not above 1 (N/A apart), decided on the digits as _pct_of_ratio's Decimal does.
_RATIO_OK_RE = r"^(?:0*(?:\.[0-9]*)?|0*1(?:\.0*)?)$"


def _title_candidates(lines: pl.Series) -> pl.Series:
    """Lines that may be a page title (a superset, checked by :func:`_title_of`): an ASA '1'
    in column 1, or at least 5 characters of which no two printable ones are adjacent
    (letter-spaced text, blanks, ...)."""
    return lines.str.starts_with("1") | ((lines.str.len_chars() >= 5)
                                         & ~lines.str.contains(_NOT_SPACED_RE))


def _fast_floats(tokens: pl.Expr) -> pl.Expr:
    """Tokens that match :data:`_FAST_NUM_RE` as floats (N/A -> null), as :func:`_num`
    reads them (the decimal string correctly rounded)."""
    return pl.when(tokens == _NA).then(None).otherwise(tokens.cast(pl.Float64, strict=False))


def _ratio_pct(tokens: pl.Expr) -> pl.Expr:
    """Hit ratios (tokens matching :data:`_RATIO_OK_RE` or N/A) x 100 as
    :func:`_pct_of_ratio` gives them: the decimal point moved two places to the right in
    the text, so that the float is the decimal product correctly rounded (0.998 -> 99.8)."""
    parts = tokens.str.extract_groups(r"^([0-9]*)(?:\.([0-9]*))?$")
    whole = parts.struct.field("1")
    frac = parts.struct.field("2").fill_null("")
    shifted = pl.concat_str([pl.lit("0"), whole, frac.str.slice(0, 2).str.pad_end(2, "0"),
                             pl.lit("."), frac.str.slice(2), pl.lit("0")])
    return pl.when(tokens == _NA).then(None).otherwise(shifted.cast(pl.Float64, strict=False))


def _runs(events: np.ndarray, data: np.ndarray, offset: int) -> list[tuple[bool, np.ndarray]]:
    """Positions (+ ``offset``) of the lines to read, in order, as (is a run of data lines,
    positions): each event line alone, and the data lines between two events together."""
    idx = np.flatnonzero(events | data)
    if idx.size == 0:
        return []
    is_data = data[idx]
    # a new run at every event, and at every data line that follows an event
    starts = np.flatnonzero(~is_data | np.concatenate(([True], ~is_data[:-1])))
    idx += offset
    return [(bool(is_data[a]), idx[a:b])
            for a, b in zip(starts.tolist(), [*starts[1:].tolist(), idx.size], strict=True)]


@dataclass
class _Piece:
    """One piece of the input as the vectorised reading sees it: line ``first + k`` is
    ``raw[k]``; ``body`` is the line without its ASA column (on the pages that have one);
    the other arrays classify the lines for the page types (see :func:`_classify`)."""

    first: int
    raw: list[str]
    body: pl.Series
    dasd_events: np.ndarray
    dasd_data: np.ndarray
    cache_events: np.ndarray
    cache_data: np.ndarray
    #: full-width rules (40 dashes or more) on cache pages
    rules: np.ndarray
    #: cache data lines that begin as a request table row or its REQUESTS heading does
    request_rows: np.ndarray
    #: lines an ESS page's line function passes over
    ess_ignored: np.ndarray
    #: blank and PAGE lines without z/OS or RMF: passed over while a page header is read
    header_blank: np.ndarray
    #: lines that cannot be a cache sub-section title (a digit or "--", or not plain ASCII)
    not_title: np.ndarray
    stripped: pl.Series
    #: parsed data lines, made when first needed (see :func:`_parsed`)
    parsed: dict[Any, _Parsed] = field(default_factory=dict)

    def line(self, k: int) -> str:
        return self.raw[k].rstrip("\r")

    def stripped_line(self, k: int) -> str:
        """Line k as the cache line functions get it (ASA column removed, stripped)."""
        s = self.stripped[k]
        return s if isinstance(s, str) else ""


def _read_piece(st: _State, page: _Page | None, first: int, raw_lines: list[str]
                ) -> _Page | None:
    """Read the lines of one piece (line ``first`` onwards); returns the page it ends on."""
    if not raw_lines:
        return page
    lines = pl.Series("l", raw_lines, dtype=pl.String()).str.strip_chars_end("\r")
    titles: list[tuple[int, str, bool]] = []
    for i in _title_candidates(lines).arg_true().to_list():
        raw = raw_lines[i].rstrip("\r")
        title = _title_of(raw)
        if title is not None:
            titles.append((i, title, raw.startswith("1")))
    piece = _classify(lines, raw_lines, first, page, titles)
    st.piece = piece
    start = 0
    for i, title, asa in titles:
        page = _read_page_lines(st, page, piece, start, i)
        # (a storage group's total line may open the next page of the DASD report)
        last_sg = page.dasd_last_sg if page is not None and page.title == title else None
        page = _Page(title=title, line_no=first + i, asa=asa, dasd_last_sg=last_sg)
        if title not in _KNOWN and title not in st.skipped_titles:
            st.skipped_titles.append(title)
        start = i + 1
    page = _read_page_lines(st, page, piece, start, len(raw_lines))
    _keep_runs(st, piece)
    st.piece = None
    return page


def _keep_runs(st: _State, piece: _Piece) -> None:
    """The rows of the runs of data lines read at once (:func:`_bulk`) into State.parts: one
    gather from each parsed table of the piece, with each row's interval (host, _start).
    Called at the end of a piece, and before its intervals' rows are tabled."""
    for key, parsed in piece.parsed.items():
        if not parsed.runs:
            continue
        rows = np.concatenate([r for r, _ in parsed.runs])
        run = np.repeat(np.arange(len(parsed.runs)), [r.size for r, _ in parsed.runs])
        info = pl.DataFrame([(k, *meta) for k, (_, meta) in enumerate(parsed.runs)],
                            schema={"_run": pl.Int64(), "host": pl.String(),
                                    "_start": pl.Datetime("us"), "_serial": pl.String()},
                            orient="row")
        df = parsed.frame[rows].with_columns(pl.Series("_run", run, dtype=pl.Int64())).join(
            info, on="_run", how="left", maintain_order="left")
        none = pl.lit(None, pl.String())
        if key[0] == "dasd":
            kind = pl.col("kind")
            st.parts.append(df.select(
                "host", "_start", "device", kind.alias("device_kind"),
                *parsed.frame.columns[6:],  # (the mapped values: see _dasd_parsed)
                pl.when(kind == "volume").then(pl.col("lcu")).otherwise(none).alias("_lcu"),
                pl.when(kind == "volume").then(pl.col("sg")).otherwise(none).alias("_sg"),
                none.alias("_link"),
                pl.lit(_SECTION_BITS["DASD"], pl.UInt8()).alias("_sections")))
        else:  # the device overview: its TOTAL H/R, and its XTNT POOL column
            serial = pl.col("_serial")
            st.parts.append(df.select(
                "host", "_start", pl.col("volser").alias("device"),
                pl.lit("volume", pl.String()).alias("device_kind"),
                pl.col("hit").alias("cache_hit_pct"), none.alias("_lcu"), none.alias("_sg"),
                pl.when(serial.is_not_null())
                .then(pl.concat_str([pl.lit("POOL"), pl.col("pool"), serial], separator="\t"))
                .otherwise(none).alias("_link"),
                pl.lit(value=True).alias("_has_hit"),  # (as its setdefault set the key)
                pl.lit(_SECTION_BITS["cache device overview"], pl.UInt8()).alias("_sections")))
        parsed.runs = []


def _classify(lines: pl.Series, raw_lines: list[str], first: int, page: _Page | None,
              titles: list[tuple[int, str, bool]]) -> _Piece:
    """Classify every line of a piece at once, for DASD, cache and ESS pages (a line is
    looked at as the page type it is on needs: the arrays for the other types are unused).
    Every classification errs towards reading a line one by one: that is always exact."""
    n = len(raw_lines)
    is_title = np.zeros(n, dtype=bool)
    asa = np.zeros(n, dtype=bool)
    # the lines of DASD and of cache pages (lines of other pages are not looked at)
    on_dasd = np.zeros(n, dtype=bool)
    on_cache = np.zeros(n, dtype=bool)
    cur, title, start = page is not None and page.asa, page.title if page else None, 0
    for i, next_title, title_asa in [*titles, (n, None, False)]:
        asa[start:i] = cur
        on_dasd[start:i] = title == _DASD
        on_cache[start:i] = title in (_CACHE, _CACHE_DEV)
        if i < n:
            is_title[i] = True
        cur, title, start = title_asa, next_title, i + 1
    df = pl.DataFrame({"l": lines, "asa": asa, "title": is_title, "on_dasd": on_dasd,
                       "on_cache": on_cache})
    body = pl.when(pl.col("asa") & pl.col("l").str.contains(r"^[ 0\-+]")) \
        .then(pl.col("l").str.slice(1)).otherwise(pl.col("l"))
    df = df.with_columns(body.alias("b"))
    b = pl.col("b")
    clean = b.str.contains(_CLEAN_RE)
    s = b.str.strip_chars(" ")
    df = df.with_columns(clean.alias("clean"), s.alias("s"))
    clean, s = pl.col("clean"), pl.col("s")
    # DASD: headings and unreadable lines one by one; blanks, TOTAL SAMPLES, PAGE and the
    # first and last heading lines are ignored (as _dasd_line does); the rest is data
    ignored = clean & (b.str.contains(r"^ *$")
                       | b.str.contains(r"^ *(?:TOTAL SAMPLES|PAGE)")
                       | b.str.contains(r"^ *DEVICE(?: |$)")
                       | (b.str.contains(r"^ *%(?: |$)") & b.str.contains(r" AVG(?: |$)")))
    headings = b.str.contains(r"^ *(?:STORAGE|GROUP)")
    # cache: see _cache_lines
    blank = clean & ((s.str.len_chars() == 0) | s.str.starts_with("PAGE"))
    rule = s.str.contains(r"^-+$")
    mark = pl.when(pl.col("title")).then(True).when(blank).then(None).otherwise(rule | ~clean)
    after_rule = mark.shift(1).forward_fill().fill_null(value=page is not None
                                                        and page.after_rule)
    cache_events = ~blank & (~clean | rule | after_rule
                             | s.str.contains(r"^(?:SUBSYSTEM|TYPE-MODEL|VOLSER|SERIAL|TOTAL "
                                              r"H/R|CACHE I/O)")
                             | s.str.contains("CACHE MISSES", literal=True))
    rule40 = clean & rule & (s.str.len_chars() >= 40)
    dasd, cache = pl.col("on_dasd"), pl.col("on_cache")
    flags = df.select((~clean | headings).alias("de"),
                      (dasd & clean & ~ignored & ~headings).alias("dd"),
                      cache_events.alias("ce"), (cache & ~blank & ~cache_events).alias("cd"),
                      (cache & rule40).alias("r40"),
                      (cache & ~blank & ~cache_events
                       & s.str.contains(f"^(?:REQUESTS|{'|'.join(_REQ_ROWS)})")).alias("rq"),
                      # page headers: blank and PAGE lines that cannot hold a header field
                      (blank & ~s.str.contains("z/OS", literal=True)
                       & ~s.str.contains("RMF", literal=True)).alias("hb"),
                      # cache: a line that cannot be a sub-section title (see _cache_line)
                      (~clean | s.str.contains(r"[0-9]|--")).alias("nt"),
                      # ESS: what _ess_line passes over (blanks, PAGE, the column headings)
                      (blank | (clean & ~s.str.starts_with("SERIAL NUMBER")
                                & (s.str.contains("OPERATIONS", literal=True)
                                   | s.str.contains(r"^(?:--|ID(?: |$))")))).alias("ei"))
    return _Piece(first=first, raw=raw_lines, body=df["b"],
                  dasd_events=flags["de"].to_numpy(), dasd_data=flags["dd"].to_numpy(),
                  cache_events=flags["ce"].to_numpy(), cache_data=flags["cd"].to_numpy(),
                  rules=flags["r40"].to_numpy(), request_rows=flags["rq"].to_numpy(),
                  ess_ignored=flags["ei"].to_numpy(), header_blank=flags["hb"].to_numpy(),
                  not_title=flags["nt"].to_numpy(),
                  stripped=df["s"])


@dataclass
class _Parsed:
    """Data lines of a piece parsed together: ``row_of[k]`` is piece line k's row of
    ``frame`` (for the lines parsed), ``cols`` the frame's columns as lists, ``ok`` and
    ``skip`` its ok and skip columns as arrays (skip: all False when it has none)."""

    row_of: np.ndarray
    frame: pl.DataFrame
    cols: dict[str, list[Any]]
    ok: np.ndarray
    skip: np.ndarray
    #: the device column (object array), and for DASD lines the LCU summary lines
    devices: np.ndarray
    is_lcu: np.ndarray
    #: runs read at once (:func:`_bulk`): their rows, and (host, start, link serial)
    runs: list[tuple[np.ndarray, tuple[str, datetime, str | None]]] = field(
        default_factory=list)


def _parsed(piece: _Piece, key: Any, mask: np.ndarray, lines: pl.Series,
            parse: Callable[[pl.Series], pl.DataFrame]) -> _Parsed:
    """The lines of ``mask`` parsed by ``parse`` (one call for the whole piece, kept under
    ``key``)."""
    got = piece.parsed.get(key)
    if got is None:
        frame = parse(lines.filter(pl.Series(mask)))
        no = np.zeros(frame.height, dtype=bool)
        cols = {c: frame[c].to_list() for c in frame.columns}
        device = next((c for c in ("device", "volser") if c in cols), None)
        got = _Parsed(np.cumsum(mask) - 1, frame, cols, frame["ok"].to_numpy(),
                      frame["skip"].to_numpy() if "skip" in cols else no,
                      np.array(cols[device] if device else [], dtype=object),
                      frame["kind"].eq("lcu").fill_null(value=False).to_numpy()
                      if "kind" in cols else no)
        piece.parsed[key] = got
    return got


def _read_page_lines(st: _State, page: _Page | None, piece: _Piece, a: int, b: int
                     ) -> _Page | None:
    """Lines ``a`` to ``b - 1`` of a piece, all on ``page`` (none is a title)."""
    if a >= b:
        return page
    if page is None:
        for i in range(a, b):
            if piece.line(i).strip():
                st.source.bad_line(piece.first + i, "text before the first RMF report page "
                                   "title")
        return None
    if page.title not in _KNOWN:
        return page  # a skipped report: its lines need no reading
    i = a
    while i < b and page.key is None:  # the page header, a few lines
        if not piece.header_blank[i]:  # (what _page_line does with those: nothing)
            _one_line(st, page, piece.first + i, piece.line(i))
        i += 1
    if i >= b:
        return page
    if page.title == _DASD:
        _dasd_lines(st, page, piece, i, b)
    elif page.title == _ESS_RANK:
        for k in (np.flatnonzero(~piece.ess_ignored[i:b]) + i).tolist():
            _one_line(st, page, piece.first + k, piece.line(k))
    else:
        _cache_lines(st, page, piece, i, b)
    return page


def _one_line(st: _State, page: _Page, line_no: int, raw: str) -> None:
    """Read one line of a page of a known report through the line functions."""
    line = raw[1:] if page.asa and raw[:1] in (" ", "0", "-", "+") else raw
    try:
        _page_line(st, page, line_no, line)
    except _BadLine as exc:
        st.source.bad_line(exc.line_no, exc.reason)


def _dasd_lines(st: _State, page: _Page, piece: _Piece, a: int, b: int) -> None:
    """Lines ``a`` to ``b - 1`` of a piece on a DASD page, after its header."""
    for is_data, pos in _runs(piece.dasd_events[a:b], piece.dasd_data[a:b], a):
        if not is_data or not page.dasd_cols:  # (no value columns: _dasd_line decides)
            for k in pos.tolist():
                _one_line(st, page, piece.first + k, piece.line(k))
            continue
        cols = page.dasd_cols
        parsed = _parsed(piece, ("dasd", tuple(cols)), piece.dasd_data, piece.body,
                         partial(_dasd_parsed, cols=cols))
        row_of, table = parsed.row_of, parsed.cols
        names = list(table)[6:]
        rows = row_of[pos]
        if parsed.ok[rows].all():
            devices, is_lcu = parsed.devices[rows], parsed.is_lcu[rows]
            if _bulk(st, page, "DASD", devices, {"volume": set(devices[~is_lcu]),
                                                 "lcu": set(devices[is_lcu])}):
                parsed.runs.append((rows, (*page.key, None)))  # type: ignore[misc]
                page.dasd_rows += rows.size
                page.dasd_last_lcu = bool(is_lcu[-1])
                if not is_lcu[-1]:
                    page.dasd_last_sg = table["sg"][int(rows[-1])]
                continue
        for k in pos.tolist():
            r = int(row_of[k])
            line_no = piece.first + k
            if not table["ok"][r]:
                _one_line(st, page, line_no, piece.line(k))
                continue
            kind_r = table["kind"][r]
            try:
                row = _row(st, page, table["device"][r], kind_r, "DASD", line_no)
            except _BadLine as exc:
                st.source.bad_line(exc.line_no, exc.reason)
                continue
            for name in names:
                row[name] = table[name][r]
            volser = table["volser"][r]
            if volser is not None:
                sg = table["sg"][r]
                page.dasd_last_sg = sg
                if page.key is not None:
                    st.vol_lcu[(*page.key, volser)] = table["lcu"][r]
                    if sg is not None:
                        st.vol_sg[(*page.key, volser)] = sg
            page.dasd_rows += 1
            page.dasd_last_lcu = kind_r == "lcu"


def _values_re(n: int) -> str:
    """``n`` values (named v0, v1, ...) that :func:`_num` reads, to the end of the line."""
    return "".join(f" +(?P<v{j}>{_FAST_NUM})" for j in range(n)) + " *$"


def _dasd_parsed(lines: pl.Series, cols: list[str]) -> pl.DataFrame:
    """DASD device and LCU lines checked and split by one regex each: ok (else read by
    :func:`_dasd_line`), device, kind, lcu, volser, sg (the storage group) and the mapped
    values. A device line is [STORAGE GROUP (from column 1)] DEV NUM, DEVICE TYPE, ...,
    VOLUME SERIAL, PAV, LCU and the values; a summary line LCU nnnn and the values."""
    values = _values_re(len(cols))
    where = {name: max(j for j, c in enumerate(cols) if c == col)
             for col, name in _DASD_MAP.items() if col in cols}
    line = pl.col("l")
    df = pl.DataFrame({"l": lines}).select(
        line.str.contains(r"^ *LCU(?: |$)").alias("is_lcu"),
        line.str.extract_groups(r"^(?P<sg>[^ ]+)? +(?P<devnum>[0-9A-F]{4,5}) +[^ ]+ +(?:[^ ]+ +)*?"
                                r"(?P<volser>[^ ]+) +[0-9]+(?:\.[0-9]+)?H?\*? +"
                                r"(?P<lcu>[0-9A-F]{4})" + values).alias("d"),
        line.str.extract_groups(r"^ *LCU +(?P<lcu>[0-9A-F]{4})" + values).alias("c"))
    is_lcu, dev, lcu = pl.col("is_lcu"), pl.col("d").struct, pl.col("c").struct
    return df.select(
        pl.when(is_lcu).then(lcu.field("lcu").is_not_null())
        .otherwise(dev.field("devnum").is_not_null()).alias("ok"),
        pl.when(is_lcu).then(pl.lit("LCU:") + lcu.field("lcu")).otherwise(dev.field("volser"))
        .alias("device"),
        pl.when(is_lcu).then(pl.lit("lcu")).otherwise(pl.lit("volume")).alias("kind"),
        pl.when(is_lcu).then(lcu.field("lcu")).otherwise(dev.field("lcu")).alias("lcu"),
        pl.when(is_lcu).then(None).otherwise(dev.field("volser")).alias("volser"),
        pl.when(is_lcu).then(None).otherwise(dev.field("sg")).alias("sg"),
        *(_fast_floats(pl.when(is_lcu).then(lcu.field(f"v{j}")).otherwise(dev.field(f"v{j}")))
          .alias(name) for name, j in where.items()))


def _cache_lines(st: _State, page: _Page, piece: _Piece, a: int, b: int) -> None:
    """Lines ``a`` to ``b - 1`` of a piece on a cache page, after its header. The lines that
    can change what the page is reading -- rules and what follows them (a sub-section
    title), SUBSYSTEM/TYPE-MODEL/VOLSER/SERIAL lines, the request table's heading and end,
    TOTAL H/R -- are read one by one; between two of them the state cannot change, so the
    lines there are read as a run: device overview rows together, request table rows one
    by one (a few per page), and in any other sub-section not at all."""
    for is_data, pos in _runs(piece.cache_events[a:b], piece.cache_data[a:b], a):
        if not is_data:
            k = int(pos[0])
            if piece.rules[k]:
                page.after_rule = True  # (what _cache_line does with a rule)
            elif page.after_rule and not piece.not_title[k]:
                # a sub-section title (what _cache_line does with it)
                page.after_rule = False
                try:
                    _finish_requests(st, page, piece.first + k)
                except _BadLine as exc:
                    st.source.bad_line(exc.line_no, exc.reason)
                    continue
                page.subsection, page.table = piece.stripped_line(k), ""
            else:
                _one_line(st, page, piece.first + k, piece.line(k))
            continue
        if page.ssid is not None and page.serial is not None:
            if page.subsection == "CACHE SUBSYSTEM DEVICE OVERVIEW":
                _overview_rows(st, page, piece, pos)
                continue
            if (page.subsection not in ("CACHE SUBSYSTEM OVERVIEW", "CACHE DEVICE ACTIVITY")
                    or page.table != "requests"):
                continue  # (lines that change nothing: status, cache misses, ...)
            _request_rows(st, page, piece, pos)
            continue
        for k in pos.tolist():
            _one_line(st, page, piece.first + k, piece.line(k))


def _requests_parsed(lines: pl.Series) -> pl.DataFrame:
    """READ/WRITE I/O REQUESTS table lines split and checked: skip (the REQUESTS heading),
    ok (else read by :func:`_requests_line`), the row label and its 13 values."""
    labels = "|".join(_REQ_ROWS)  # (none is the start of another: the first to match wins)
    tokens = " *(?P<t0>[^ ]+)" + "".join(f" +(?P<t{j}>[^ ]+)" for j in range(1, 13)) + " *$"
    df = pl.DataFrame({"l": lines}).select(
        pl.col("l").str.starts_with("REQUESTS").alias("skip"),
        pl.col("l").str.extract_groups(f"^(?P<label>{labels}){tokens}").alias("m"))
    m = pl.col("m").struct
    return df.select(
        "skip",
        (m.field("t1").str.contains(_FAST_NUM_RE) & m.field("t8").str.contains(_FAST_NUM_RE))
        .fill_null(value=False).alias("ok"),
        m.field("label").alias("label"),
        pl.concat_list([m.field(f"t{j}") for j in range(13)]).alias("v"))


def _request_rows(st: _State, page: _Page, piece: _Piece, pos: np.ndarray) -> None:
    """A run of lines of a READ/WRITE I/O REQUESTS table (as :func:`_requests_line`)."""
    parsed = _parsed(piece, "requests", piece.request_rows, piece.stripped, _requests_parsed)
    row_of, table = parsed.row_of, parsed.cols
    for k in pos.tolist():
        r = int(row_of[k])
        line_no = piece.first + k
        if piece.request_rows[k] and table["skip"][r]:
            continue
        try:
            if not piece.request_rows[k] or not table["ok"][r]:
                _requests_line(st, page, line_no, piece.stripped_line(k))
                continue
            label = table["label"][r]
            page.req[label] = [*table["v"][r], str(line_no)]
            if label == "TOTAL":
                _finish_requests(st, page, line_no)
        except _BadLine as exc:
            st.source.bad_line(exc.line_no, exc.reason)


def _overview_parsed(lines: pl.Series, pool: bool) -> pl.DataFrame:
    """CACHE SUBSYSTEM DEVICE OVERVIEW lines checked and split by one regex: skip (a heading
    or an SSID total), ok (else read by :func:`_overview_line`), volser, pool, the hit
    percentage. A device line is VOLUME SERIAL, DEV NUM [, XTNT POOL] and 15 values."""
    pattern = (r"^(?P<volser>[^ ]+) +[0-9A-F]{4,5}"
               + (r" +(?P<pool>[0-9A-F]{4})" if pool else r"(?P<pool>)")
               + _values_re(_OVERVIEW_NVALUES))
    first = pl.col("l").str.extract(r"^([^ ]+)")
    df = pl.DataFrame({"l": lines}).select(
        ((first == "VOLUME") | first.str.starts_with("*")).fill_null(value=False)
        .alias("skip"), pl.col("l").str.extract_groups(pattern).alias("m"))
    m = pl.col("m").struct
    hit = m.field(f"v{_OVERVIEW_TOTAL_HR}")
    return df.select(
        "skip",
        (m.field("volser").is_not_null() & ((hit == _NA) | hit.str.contains(_RATIO_OK_RE)))
        .fill_null(value=False).alias("ok"),
        m.field("volser"), m.field("pool"), _ratio_pct(hit).alias("hit"))


def _overview_rows(st: _State, page: _Page, piece: _Piece, pos: np.ndarray) -> None:
    """A run of device overview lines: split and converted together; the run joins its
    interval at once (:func:`_bulk`), or line by line when a check fails."""
    pool = page.overview_pool
    parsed = _parsed(piece, ("overview", pool), piece.cache_data, piece.stripped,
                     partial(_overview_parsed, pool=pool))
    row_of, table = parsed.row_of, parsed.cols
    rows = row_of[pos]
    if (parsed.ok[rows] | parsed.skip[rows]).all():
        rows = rows[~parsed.skip[rows]]
        devices = parsed.devices[rows]
        if _bulk(st, page, "cache device overview", devices, {"volume": set(devices)}):
            serial = page.serial if pool else None  # (the link: the XTNT POOL column's)
            parsed.runs.append((rows, (*page.key, serial)))  # type: ignore[misc]
            page.overview_rows += rows.size
            return
    for k in pos.tolist():
        r = int(row_of[k])
        line_no = piece.first + k
        if table["skip"][r]:
            continue
        if not table["ok"][r]:
            _one_line(st, page, line_no, piece.line(k))
            continue
        volser = table["volser"][r]
        try:
            row = _row(st, page, volser, "volume", "cache device overview", line_no)
        except _BadLine as exc:
            st.source.bad_line(exc.line_no, exc.reason)
            continue
        page.overview_rows += 1
        row.setdefault("cache_hit_pct", table["hit"][r])
        if page.overview_pool and page.key is not None and page.serial is not None:
            st.vol_links.setdefault((*page.key, volser), ("POOL", table["pool"][r],
                                                          page.serial))


def _title_of(raw: str) -> str | None:
    """The page title of a page's first line, or None for any other line."""
    if raw.startswith("1"):
        text = raw[1:]
        return _spaced_title(text) or " ".join(text.split()) or "(untitled page)"
    return _spaced_title(raw)


def _page_complete(page: _Page) -> bool:
    """Whether the last page of the file holds its whole table: RMF closes a DASD page's device
    list with the LCU summary, an ESS page's ranks with the POOL line and the cache request
    table with TOTAL, and ends a cache subsystem page with its device overview. (A file cut
    exactly after a complete page, or after any line of the device overview, cannot be told
    from a whole one; with two intervals or more the last one is still checked for missing
    reports.)"""
    if page.key is None:
        return False
    if page.title == _DASD:
        return page.dasd_rows > 0 and page.dasd_last_lcu
    if page.title == _ESS_RANK:
        return page.ess_rows > 0 and page.ess_last_pool
    if page.title == _CACHE:
        return not page.req and page.overview_rows > 0
    if page.title == _CACHE_DEV:
        return not page.req and page.req_done
    return True


def _drop_cut_interval(st: _State, page: _Page, cut_line: bool) -> None:
    why = "the file ends inside a line" if cut_line else "the file ends inside a report page"
    key = page.key
    if key is None:
        # The header was cut before its TIME line, so the page's interval is unknown. A report
        # type the last interval does not have yet belongs to it (RMF prints the reports of an
        # interval together); one it already has may as well open the next interval.
        last = st.intervals.get(st.last_key) if st.last_key is not None else None
        if last is None or page.title in last.sections:
            st.source.note(f"{why} (page '{page.title}' from line {page.line_no}, before its "
                           "header was complete); nothing of that page was read")
            return
        key = st.last_key
    if key not in st.intervals:  # pragma: no cover - keys are only set with their interval
        return
    iv = st.intervals.pop(key)
    st.source.note(f"{why} (RMF page '{page.title}' from line {page.line_no}): dropped the "
                   f"whole interval starting {iv.start:%m/%d/%Y %H.%M.%S} on {iv.host} "
                   f"({iv.devices()} devices) so that only complete intervals are kept")


def _drop_short_last_intervals(st: _State) -> None:
    """Drop a host's last interval when it lacks a report, or a device line of a report,
    that every earlier interval had: the file was cut between two pages or two lines (a clean
    cut leaves no half line to show it), and half an interval would show a rank without its
    volumes or a pool without one of its ranks."""
    by_host: dict[str, list[_Interval]] = {}
    for iv in st.intervals.values():
        by_host.setdefault(iv.host, []).append(iv)
    for ivs in by_host.values():
        if len(ivs) < 2:
            continue
        ivs.sort(key=lambda iv: iv.start)
        last = ivs[-1]
        missing_sections = set.intersection(*(iv.sections for iv in ivs[:-1])) - last.sections
        # (the intervals whose rows went into a table gave their lines to common_seen; the
        # last one's, if tabled, are read back from its rows' sections)
        seens = [iv.seen for iv in ivs[:-1] if not iv.folded]
        if any(iv.folded for iv in ivs[:-1]):
            seens.append(st.common_seen.get(last.host, set()))
        last_seen = last.seen | _tabled_seen(st, last) if last.folded else last.seen
        missing_lines = set.intersection(*seens) - last_seen
        if not missing_sections and not missing_lines:
            continue
        del st.intervals[(last.host, last.start)]
        if missing_sections:
            what = f"the {', '.join(sorted(missing_sections))} report(s)"
        else:
            device, section = sorted(missing_lines)[0]
            what = f"{len(missing_lines)} device line(s) (e.g. {device} in the {section} report)"
        st.source.note(f"the last interval (starting {last.start:%m/%d/%Y %H.%M.%S} on "
                       f"{last.host}) lacks {what} that every earlier one has: the file was cut "
                       "off; dropped that interval so that only complete intervals are kept")


def _page_line(st: _State, page: _Page, line_no: int, line: str) -> None:
    stripped = line.strip()
    if page.header_sys is None or page.key is None:
        m = _SYS_RE.search(line)
        if m:
            minutes, secs, ms = int(m.group(4)), int(m.group(5)), int(m.group(6))
            iv = Decimal(minutes * 60 + secs) + Decimal(ms) / 1000
            if iv <= 0:
                raise _BadLine(line_no, f"INTERVAL {m.group(4)}.{m.group(5)}.{m.group(6)} is 0")
            page.header_sys = (m.group(2), m.group(3), iv)
            return
        m = _TIME_RE.search(line)
        if m and page.header_sys is not None:
            sysid, date, iv = page.header_sys
            try:
                start = _start_time(f"{date} {m.group(1)}.{m.group(2)}.{m.group(3)}")
            except ValueError as exc:
                raise _BadLine(line_no, f"bad report date/time {date} "
                               f"{m.group(1)}.{m.group(2)}.{m.group(3)}: {exc}") from exc
            page.key = (sysid, start)
            cur = st.intervals.get(page.key)
            if cur is None:
                cur = st.intervals[page.key] = _Interval(sysid, start, iv, page.title == _DASD)
                _close_older(st, cur)
            elif cur.closed:  # (a page of an interval thought complete: open it again)
                _reopen(st, cur)
            if page.title == _DASD and not cur.from_dasd:
                cur.interval_s, cur.from_dasd = iv, True
            cur.sections.add(page.title)
            st.last_key = page.key
            return
        if stripped.startswith("PAGE") or not stripped:
            return
        raise _BadLine(line_no, f"'{page.title}' page without its 'z/OS ... SYSTEM ID ... "
                       "DATE ... INTERVAL' and 'RPT VERSION ... RMF TIME' header lines")
    if page.title == _DASD:
        _dasd_line(st, page, line_no, line)
    elif page.title == _ESS_RANK:
        _ess_line(st, page, line_no, stripped)
    else:
        _cache_line(st, page, line_no, stripped)


@lru_cache(maxsize=256)
def _start_time(text: str) -> datetime:
    """A page header's DATE and TIME (``mm/dd/yyyy hh.mm.ss``), parsed once per interval,
    not once per page (strptime took 7 % of the reading time of the benchmark input)."""
    return datetime.strptime(text, "%m/%d/%Y %H.%M.%S")


#: The sections a device line is in (:func:`_row`), as bits: a tabled row keeps those of its
#: device (_sections), so that an interval opened again (:func:`_reopen`) still refuses a
#: device line it had already read.
_SECTION_BITS = {section: 1 << k for k, section in enumerate(
    ("DASD", "cache device overview", "cache device activity", "cache subsystem overview",
     "ESS rank statistics"))}


def _row(st: _State, page: _Page, device: str, kind: str, section: str,
         line_no: int) -> dict[str, Any]:
    if page.key is None:  # pragma: no cover - _page_line reads the header first
        raise _BadLine(line_no, "report line before the page header")
    iv = st.intervals[page.key]
    if (device, section) in iv.seen:
        raise _BadLine(line_no, f"{device} appears twice in the {section} report of the interval "
                       f"starting {iv.start:%m/%d/%Y %H.%M.%S}")
    iv.seen.add((device, section))
    other = iv.kind_of(device)
    if other is not None and other != kind:
        raise _BadLine(line_no, f"{device} is a {other} elsewhere in this interval")
    iv.kinds.setdefault(kind, set()).add(device)
    row = iv.rows.get(device)
    if row is None:
        row = {"device": device, "device_kind": kind}
        iv.rows[device] = row
    return row


def _bulk(st: _State, page: _Page, section: str, devices: np.ndarray,
          by_kind: dict[str, set[str]]) -> bool:
    """Whether a run of data lines, parsed and checked (their ``devices``, and the devices
    of each kind), can go into the page's interval at once: :func:`_row` would find
    nothing wrong with any of them -- no device twice in the section, none of another kind
    -- and it notes them as :func:`_row` does (the caller keeps their rows). Else False:
    the caller reads them one by one, so that the first of them that is wrong is refused
    with its line."""
    if page.key is None:  # pragma: no cover - _page_line reads the header first
        return False
    iv = st.intervals[page.key]
    new = set(zip(devices.tolist(), repeat(section), strict=False))
    if len(new) < devices.size or not new.isdisjoint(iv.seen):
        return False
    for kind, mine in by_kind.items():
        if any(not mine.isdisjoint(theirs) for k, theirs in (*iv.kinds.items(),
                                                             *by_kind.items()) if k != kind):
            return False
    iv.seen |= new
    for kind, mine in by_kind.items():
        iv.kinds.setdefault(kind, set()).update(mine)
    return True


# ---- DIRECT ACCESS DEVICE ACTIVITY ----------------------------------------------------------
_DASD_MAP = {
    "ACTIVITY RATE": "iops",
    "RESP TIME": "await_ms",
    "IOSQ TIME": "iosq_ms",
    "PEND TIME": "pend_ms",
    "DISC TIME": "disc_ms",
    "CONN TIME": "conn_ms",
    "DEV UTIL": "util_pct",
}


def _sg_summary(page: _Page, tokens: list[str], n: int) -> bool:
    """Whether a DASD line is the total of the storage group of the device lines above it (a
    report sorted by storage group): the group's name just before ``n`` numbers, and at most
    two fields before the name, not an ``LCU nnnn`` line (the device lines above may be on
    the page before). IBM documents no layout for that line, so its values are not read;
    the group's row is computed from its volumes' lines (:func:`_storage_groups`)."""
    sg = page.dasd_last_sg
    if (sg is None or not n + 1 <= len(tokens) <= n + 3 or tokens[-n - 1] != sg
            or tokens[0] == "LCU"):
        return False
    try:
        for value in tokens[-n:]:
            _num(value, 0, "")
    except _BadLine:
        return False
    return True


def _dasd_line(st: _State, page: _Page, line_no: int, line: str) -> None:
    stripped = line.strip()
    tokens = stripped.split()
    if not tokens or stripped.startswith(("TOTAL SAMPLES", "PAGE")):
        return
    # The three column-heading lines; values are named by pairing line 2 with line 3
    # (ACTIVITY+RATE, RESP+TIME, ..., DEV+UTIL), which holds across RMF releases that add or
    # drop delay columns (CMR/DB/INT).
    if tokens[0] == "DEVICE" or (tokens[0] == "%" and "AVG" in tokens):
        return
    if tokens[0] == "STORAGE" and "LCU" in tokens:
        page.dasd_line2 = tokens[tokens.index("LCU") + 1:]
        return
    if tokens[0] == "GROUP" and "SERIAL" in tokens:
        line3 = tokens[tokens.index("SERIAL") + 1:]
        if not line3:  # (the data lines would then have no values to take from the right)
            raise _BadLine(line_no, "DASD column headings name no value columns after "
                           "VOLUME SERIAL")
        if page.dasd_line2 is None or len(line3) != len(page.dasd_line2):
            raise _BadLine(line_no, "DASD column headings do not pair up (STORAGE ... LCU line "
                           "and GROUP ... SERIAL line differ in length)")
        page.dasd_cols = [f"{a} {b}" for a, b in zip(page.dasd_line2, line3, strict=True)]
        return
    cols = page.dasd_cols
    if cols is None:
        raise _BadLine(line_no, "DASD data line before the column headings")
    n = len(cols)
    if _sg_summary(page, tokens, n):
        st.sg_summaries += 1
        page.dasd_rows += 1  # (a line of the table, as an LCU line is)
        page.dasd_last_lcu = True
        return
    if n + 1 <= len(tokens) <= n + 2 and tokens[0] != "LCU":
        raise _BadLine(line_no, f"DASD summary line {' '.join(tokens[:-n])!r}: only 'LCU nnnn' "
                       "lines and the totals of the storage group of the lines above them "
                       "are known (storage groups are computed from their volumes' lines, "
                       "as rows SG:name); --lenient skips the line")
    if len(tokens) < n + 2:
        raise _BadLine(line_no, f"DASD line has {len(tokens)} fields, expected at least {n + 2}")
    values = tokens[-n:]
    head = tokens[:-n]
    if head[0] == "LCU":
        if len(head) != 2 or not _HEX4.fullmatch(head[1]):
            raise _BadLine(line_no, "LCU summary line: expected 'LCU nnnn', got "
                           f"{' '.join(head)!r}")
        device, kind, lcu, volser, sg = f"LCU:{head[1]}", "lcu", head[1], None, None
    else:
        # [STORAGE GROUP] DEV NUM  DEVICE TYPE  [NUMBER OF CYL]  VOLUME SERIAL  PAV  LCU
        sg = None
        if line[:1] != " ":
            sg, head = head[0], head[1:]  # the storage group (column 1): see _storage_groups
        if len(head) < 4 or not _DEVNUM.fullmatch(head[0]) or not _HEX4.fullmatch(head[-1]):
            raise _BadLine(line_no, "DASD device line: expected DEV NUM, DEVICE TYPE, VOLUME "
                           f"SERIAL, PAV and LCU before {n} values, got {' '.join(head)!r}")
        lcu = head[-1]
        mid = head[2:-1]  # [NUMBER OF CYL] VOLUME SERIAL PAV
        if len(mid) < 2 or not _PAV.fullmatch(mid[-1]):
            raise _BadLine(line_no, f"DASD device {head[0]}: expected VOLUME SERIAL and PAV "
                           f"before LCU {lcu}, got {' '.join(mid)!r}")
        volser = mid[-2]
        device, kind = volser, "volume"
    parsed = {c: _num(v, line_no, c) for c, v in zip(cols, values, strict=True)}
    row = _row(st, page, device, kind, "DASD", line_no)
    for col, name in _DASD_MAP.items():
        if col in parsed:
            row[name] = parsed[col]
    if volser is not None:
        page.dasd_last_sg = sg
        if page.key is not None:
            st.vol_lcu[(*page.key, volser)] = lcu
            if sg is not None:
                st.vol_sg[(*page.key, volser)] = sg
    page.dasd_rows += 1
    page.dasd_last_lcu = kind == "lcu"


# ---- CACHE SUBSYSTEM ACTIVITY / CACHE DEVICE ACTIVITY -----------------------------------------
def _cache_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    if not s or s.startswith("PAGE"):
        return
    if len(s) >= 40 and set(s) == {"-"}:
        page.after_rule = True
        return
    after_rule, page.after_rule = page.after_rule, False
    if after_rule and not any(map(str.isdigit, s)) and "--" not in s:
        # a sub-section title, printed between two full-width rules
        _finish_requests(st, page, line_no)
        page.subsection, page.table = s, ""
        return
    if page.ssid is None:
        m = _SUBSYS_RE.match(s)
        if m:
            page.ssid = m.group(2)
            return
    m = _SERIAL_RE.match(s)
    if m:
        page.serial = _serial(m.group(1))
        return
    m = _VOLSER_RE.match(s)
    if m and page.title == _CACHE_DEV:
        page.volser = m.group(1)
        if m.group(3):
            page.vol_link = ("RRID" if m.group(3) == "RRID" else "POOL", m.group(4))
        return
    if page.ssid is None or page.serial is None:
        raise _BadLine(line_no, "cache report line before the SUBSYSTEM ... SSID and "
                       "TYPE-MODEL ... SERIAL lines")
    if page.subsection in ("CACHE SUBSYSTEM OVERVIEW", "CACHE DEVICE ACTIVITY"):
        _requests_line(st, page, line_no, s)
    elif page.subsection == "CACHE SUBSYSTEM DEVICE OVERVIEW":
        _overview_line(st, page, line_no, s)


def _requests_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    m = _HR_RE.match(s)
    if m:
        page.total_hr = m.group(1)
        return
    if s.startswith("CACHE I/O") and "READ I/O REQUESTS" in s:
        page.table = "requests"
        return
    if "CACHE MISSES" in s:
        if page.req and "TOTAL" not in page.req:
            raise _BadLine(line_no, "cache READ/WRITE I/O REQUESTS table ends without its TOTAL "
                           "row")
        page.table = "other"
        return
    if page.table != "requests" or s.startswith("REQUESTS"):
        return
    if s.startswith("CACHE I/O"):
        return
    label = next((r for r in _REQ_ROWS if s.startswith(r)), None)
    if label is None:
        raise _BadLine(line_no, "cache READ/WRITE I/O REQUESTS table: expected a NORMAL, "
                       f"SEQUENTIAL, CFW DATA or TOTAL row, got {s.split(maxsplit=1)[0]!r}")
    values = s[len(label):].split()
    if len(values) != 13:
        raise _BadLine(line_no, f"cache {label} row has {len(values)} values, expected 13 "
                       "(read COUNT RATE HITS RATE H/R, write COUNT RATE FAST RATE HITS RATE "
                       "H/R, % READ)")
    for i in (1, 8):  # the read and write RATE
        _num(values[i], line_no, f"{label} RATE")
    page.req[label] = [*values, str(line_no)]
    if label == "TOTAL":
        _finish_requests(st, page, line_no)


def _finish_requests(st: _State, page: _Page, line_no: int) -> None:
    """Turn a complete READ/WRITE I/O REQUESTS table into the SSID or the volume row."""
    if not page.req or "TOTAL" not in page.req or page.key is None:
        return
    tot, seq = page.req["TOTAL"], page.req.get("SEQUENTIAL")
    row_line = int(tot[-1])
    if page.title == _CACHE_DEV:
        if page.volser is None:
            raise _BadLine(row_line, "cache device page without its VOLSER ... NUM line")
        row = _row(st, page, page.volser, "volume", "cache device activity", row_line)
        if page.vol_link is not None and page.serial is not None:
            st.vol_links[(*page.key, page.volser)] = (*page.vol_link, page.serial)
    else:
        row = _row(st, page, f"SSID:{page.ssid}", "lcu", "cache subsystem overview", row_line)
    row["r_iops"] = _num(tot[1], row_line, "TOTAL read RATE")
    row["w_iops"] = _num(tot[8], row_line, "TOTAL write RATE")
    if seq is not None:
        seq_line = int(seq[-1])
        row["seq_read_ps"] = _num(seq[1], seq_line, "SEQUENTIAL read RATE")
        row["seq_write_ps"] = _num(seq[8], seq_line, "SEQUENTIAL write RATE")
    if page.total_hr is not None:
        row["cache_hit_pct"] = _pct_of_ratio(page.total_hr, row_line, "TOTAL H/R")
    page.req = {}
    page.req_done = True
    page.total_hr = None


def _overview_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    tokens = s.split()
    if tokens[0] == "VOLUME":
        return
    if tokens[0] == "SERIAL":
        page.overview_pool = len(tokens) > 2 and tokens[2] == "POOL"
        return
    if tokens[0].startswith("*"):
        return  # *ALL, *CACHE, *CACHE-OFF: the SSID totals, already read from the overview
    lead = 3 if page.overview_pool else 2
    if len(tokens) != lead + _OVERVIEW_NVALUES:
        raise _BadLine(line_no, f"cache device overview line has {len(tokens)} fields, expected "
                       f"{lead + _OVERVIEW_NVALUES} (VOLUME SERIAL, DEV NUM"
                       f"{', XTNT POOL' if page.overview_pool else ''} and 15 values)")
    volser, devnum = tokens[0], tokens[1]
    if not _DEVNUM.fullmatch(devnum):
        raise _BadLine(line_no, f"cache device overview: {devnum!r} is not a device number")
    for tok in tokens[lead:]:
        _num(tok, line_no, "cache device overview value")
    row = _row(st, page, volser, "volume", "cache device overview", line_no)
    page.overview_rows += 1
    hit = _pct_of_ratio(tokens[lead + _OVERVIEW_TOTAL_HR], line_no, "TOTAL H/R")
    row.setdefault("cache_hit_pct", hit)
    if page.overview_pool and page.key is not None and page.serial is not None:
        if not _HEX4.fullmatch(tokens[2]):
            raise _BadLine(line_no, f"cache device overview: XTNT POOL {tokens[2]!r} is not a "
                           "4-digit pool id")
        st.vol_links.setdefault((*page.key, volser), ("POOL", tokens[2], page.serial))


# ---- ESS RANK STATISTICS --------------------------------------------------------------------
def _ess_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    if not s or s.startswith("PAGE"):
        return
    m = _ESS_SERIAL_RE.match(s)
    if m:
        page.ess_serial, page.ess_pool = _serial(m.group(1)), None
        return
    tokens = s.split()
    if "OPERATIONS" in s or tokens[0].startswith("--") or tokens[0] == "ID":
        return  # column headings
    if page.ess_serial is None:
        raise _BadLine(line_no, "ESS rank line before the SERIAL NUMBER line")
    serial = page.ess_serial
    if tokens[0] == "POOL":
        if page.ess_pool is None:
            raise _BadLine(line_no, "ESS POOL summary line before any rank of the pool")
        values, device, kind, parent = tokens[1:1 + _RANK_NVALUES], \
            f"POOL:{page.ess_pool}@{serial}", "other", None
    else:
        # first rank of a pool: POOL-ID TYPE [EXTENT SIZE] RRID ADAPT-ID ...; later ranks of
        # the same pool leave the pool columns blank.
        if len(tokens) > 2 and tokens[1] in ("CKD", "FB"):
            page.ess_pool = tokens[0]
            rest = tokens[3:] if re.fullmatch(r"\d+[KMG]b", tokens[2]) else tokens[2:]
        else:
            rest = tokens
        if page.ess_pool is None or len(rest) < 2 + _RANK_NVALUES:
            raise _BadLine(line_no, "ESS rank line: expected [EXTENT POOL ID TYPE] RRID ADAPT ID "
                           f"and {_RANK_NVALUES} READ/WRITE values")
        rrid, adapt = rest[0], rest[1]
        if not _HEX4.fullmatch(rrid) or not _HEX4.fullmatch(adapt):
            raise _BadLine(line_no, f"ESS rank line: RRID {rrid!r} / ADAPT ID {adapt!r} are not "
                           "4-digit hex ids")
        values = rest[2:2 + _RANK_NVALUES]
        device, kind = f"RANK:{rrid}@{serial}", "rank"
        parent = f"POOL:{page.ess_pool}@{serial}"
        st.pool_ranks.setdefault((serial, page.ess_pool), set()).add(device)
    if len(values) != _RANK_NVALUES:
        raise _BadLine(line_no, f"ESS line has {len(values)} READ/WRITE values, expected "
                       f"{_RANK_NVALUES}")
    r_ops = _num(values[0], line_no, "READ OPS/SEC")
    w_ops = _num(values[4], line_no, "WRITE OPS/SEC")
    r_rt = _num(values[3], line_no, "READ RTIME/OP")
    w_rt = _num(values[7], line_no, "WRITE RTIME/OP")
    r_bop, r_bsec = (_bytes(values[1], line_no, "READ BYTES/OP"),
                     _bytes(values[2], line_no, "READ BYTES/SEC"))
    w_bop, w_bsec = (_bytes(values[5], line_no, "WRITE BYTES/OP"),
                     _bytes(values[6], line_no, "WRITE BYTES/SEC"))
    row = _row(st, page, device, kind, "ESS rank statistics", line_no)
    row.update(r_iops=r_ops, w_iops=w_ops, r_await_ms=r_rt, w_await_ms=w_rt,
               r_areq_kB=_kb(r_bop), w_areq_kB=_kb(w_bop), r_kBps=_kb(r_bsec),
               w_kBps=_kb(w_bsec))
    if parent is not None:
        st.rank_pool[device] = parent
    page.ess_rows += 1
    page.ess_last_pool = kind == "other"


# ---------------------------------------------------------------------------------------------
# frame
# ---------------------------------------------------------------------------------------------
#: Rows of closed intervals made into one table at a time (see :func:`_close_older`).
_ROWS_PER_TABLE = 10_000


def _close_older(st: _State, new: _Interval) -> None:
    """A new interval of a host began: its earlier ones are closed. RMF prints the reports of
    an interval together, so their rows are complete; they are moved from Python dicts (the
    bulk of what a long report holds, some 1.4 kB a row) into a table of the columns present
    once :data:`_ROWS_PER_TABLE` rows are closed. A page of a closed interval that comes
    after all opens it again (:func:`_reopen`)."""
    still: list[tuple[str, datetime]] = []
    open_keys = st.open_keys.setdefault(new.host, [])
    for key in open_keys:
        iv = st.intervals.get(key)
        if iv is None or iv.closed:
            continue
        if iv.start < new.start:
            iv.closed = True
            st.closed.append(key)
            st.closed_rows += iv.devices()
        else:
            still.append(key)
    still.append((new.host, new.start))
    st.open_keys[new.host] = still
    if st.closed_rows >= _ROWS_PER_TABLE:
        _tables_of_closed(st)


def _ts_of(st: _State, iv: _Interval) -> datetime:
    """An interval's ``ts``: its end, in UTC."""
    end_local = iv.start + timedelta(seconds=float(iv.interval_s))
    tz = st.source.tz
    return (end_local.replace(tzinfo=tz).astimezone(UTC) if tz is not None
            else end_local.replace(tzinfo=UTC))


def _tables_of_closed(st: _State) -> None:
    """The rows of the closed intervals into a table (see :func:`_close_older`): those read
    one line at a time (each with whether it set cache_hit_pct) and those read a run at a
    time (State.parts, the current piece's first), merged into a row a device
    (:func:`_merged`)."""
    if st.piece is not None:
        _keep_runs(st, st.piece)
    batch: list[dict[str, Any]] = []
    extra: dict[str, list[Any]] = {"host": [], "_start": [], "ts": [], "interval_s": [],
                                   "_link": [], "_lcu": [], "_sg": [], "_has_hit": [],
                                   "_sections": []}
    tabled: list[_Interval] = []
    for key in st.closed:
        iv = st.intervals.get(key)
        if iv is None or iv.in_table:
            continue
        tabled.append(iv)
        ts = _ts_of(st, iv)
        for device, row in iv.rows.items():
            batch.append(row)
            extra["host"].append(iv.host)
            extra["_start"].append(iv.start)
            extra["ts"].append(ts)
            extra["interval_s"].append(float(iv.interval_s))
            link = st.vol_links.pop((iv.host, iv.start, device), None)
            extra["_link"].append("\t".join(link) if link is not None else None)
            extra["_lcu"].append(st.vol_lcu.pop((iv.host, iv.start, device), None))
            extra["_sg"].append(st.vol_sg.pop((iv.host, iv.start, device), None))
            extra["_has_hit"].append("cache_hit_pct" in row)
            extra["_sections"].append(sum(bit for section, bit in _SECTION_BITS.items()
                                          if (device, section) in iv.seen))
        iv.rows, iv.kinds = {}, {}
        iv.in_table = True
        if not iv.folded:  # (what _drop_short_last_intervals needs of it: the intersection)
            common = st.common_seen.get(iv.host)
            st.common_seen[iv.host] = iv.seen if common is None else common & iv.seen
        iv.seen, iv.folded = set(), True
    st.closed.clear()
    st.closed_rows = 0
    frames: list[pl.DataFrame] = []
    if batch:
        keys: set[str] = set().union(*batch)  # (one pass over the rows, not one a column)
        present = [c for c in SCHEMA if c in keys]
        table = pl.DataFrame(batch, schema={c: SCHEMA[c] for c in present})
        frames.append(table.with_columns(
            pl.Series("host", extra["host"], dtype=pl.String()),
            pl.Series("_start", extra["_start"], dtype=pl.Datetime("us")),
            pl.Series("ts", extra["ts"], dtype=SCHEMA["ts"]),
            pl.Series("interval_s", extra["interval_s"], dtype=pl.Float64()),
            pl.Series("_link", extra["_link"], dtype=pl.String()),
            pl.Series("_lcu", extra["_lcu"], dtype=pl.String()),
            pl.Series("_sg", extra["_sg"], dtype=pl.String()),
            pl.Series("_has_hit", extra["_has_hit"], dtype=pl.Boolean()),
            pl.Series("_sections", extra["_sections"], dtype=pl.UInt8())))
        del batch, table
    if tabled and st.parts:  # (their rows read a run at a time, with ts; the rest stay)
        when = _when(st, tabled)
        keep: list[pl.DataFrame] = []
        for part in st.parts:
            mine = part.join(when, on=["host", "_start"], how="inner", maintain_order="left")
            if mine.height:
                frames.append(mine)
                part = part.join(when, on=["host", "_start"], how="anti",  # noqa: PLW2901
                                 maintain_order="left")
            if part.height:
                keep.append(part)
        st.parts = keep
    if frames:
        st.tables.append(_merged(frames))


def _seen_of(rows: pl.DataFrame) -> set[tuple[str, str]]:
    """The (device, section) lines that tabled ``rows`` were read from (their _sections)."""
    if "_sections" not in rows.columns:
        return set()
    return {(device, section) for device, bits in rows.select("device", "_sections").iter_rows()
            for section, bit in _SECTION_BITS.items() if (bits or 0) & bit}


def _tabled_seen(st: _State, iv: _Interval) -> set[tuple[str, str]]:
    """The lines of a tabled interval (as :func:`_seen_of`)."""
    mine = (pl.col("host") == iv.host) & (pl.col("_start") == iv.start)
    return set().union(*(_seen_of(table.filter(mine)) for table in st.tables))


def _when(st: _State, ivs: list[_Interval]) -> pl.DataFrame:
    """The intervals ``ivs`` (host, _start) with their ts and interval_s."""
    return pl.DataFrame({"host": [iv.host for iv in ivs], "_start": [iv.start for iv in ivs],
                         "ts": [_ts_of(st, iv) for iv in ivs],
                         "interval_s": [float(iv.interval_s) for iv in ivs]},
                        schema={"host": pl.String(), "_start": pl.Datetime("us"),
                                "ts": SCHEMA["ts"], "interval_s": pl.Float64()})


def _reopen(st: _State, iv: _Interval) -> None:
    """Open a closed interval again: its rows back to dicts (rare: a page out of order)."""
    iv.closed = False
    st.open_keys.setdefault(iv.host, []).append((iv.host, iv.start))
    if (iv.host, iv.start) in st.closed:
        st.closed.remove((iv.host, iv.start))
        st.closed_rows -= iv.devices()
    if not iv.in_table:
        return
    mine = (pl.col("host") == iv.host) & (pl.col("_start") == iv.start)
    for k, table in enumerate(st.tables):
        rows = table.filter(mine)
        if rows.height:
            st.tables[k] = table.filter(~mine)
            # (a cache_hit_pct set to N/A stays set: see _merged)
            iv.rows = {r["device"]: {c: v for c, v in r.items() if v is not None
                                     or (c == "cache_hit_pct" and r.get("_has_hit"))}
                       for r in rows.drop("host", "_start", "ts", "interval_s", "_link",
                                          "_lcu", "_sg").to_dicts()}
            for row in iv.rows.values():
                row.pop("_has_hit", None)
                row.pop("_sections", None)
            iv.seen |= _seen_of(rows)
            for device, link_text, lcu, sg in rows.select("device", "_link", "_lcu",
                                                          "_sg").iter_rows():
                link = _link_of(link_text)
                if link is not None:
                    st.vol_links[(iv.host, iv.start, device)] = link
                if lcu is not None:
                    st.vol_lcu[(iv.host, iv.start, device)] = lcu
                if sg is not None:
                    st.vol_sg[(iv.host, iv.start, device)] = sg
    # (a tabled interval's rows are all in its table: those of its runs went in with them)
    for device, row in iv.rows.items():
        iv.kinds.setdefault(row["device_kind"], set()).add(device)
    iv.in_table = False


def _frame(st: _State) -> pl.DataFrame:
    """Every row, sorted (time, host, kind, device), with its parent."""
    if st.source.tz is None and st.intervals:
        st.source.note("RMF reports print z/OS local time without a zone; assumed UTC (use --tz "
                       "to give the system's zone)")
    for key, iv in st.intervals.items():
        if not iv.closed:
            iv.closed = True
            st.closed.append(key)
    _tables_of_closed(st)
    st.parts = []  # (what is left is of intervals dropped as cut off)
    # (and the tables of intervals dropped after their rows were tabled go)
    kept = _when(st, list(st.intervals.values())).select("host", "_start")
    tables = [t.join(kept, on=["host", "_start"], how="semi", maintain_order="left")
              for t in st.tables if t.height]
    st.tables = []
    tables = [t for t in tables if t.height]
    if not tables:
        return pl.DataFrame()
    df = (pl.concat(tables, how="diagonal_relaxed", rechunk=False) if len(tables) > 1
          else tables[0])
    del tables
    groups = _storage_groups(st, df)
    df = df.with_columns(pl.lit(NAME, pl.String()).alias("source"),
                         _parents(st, df).alias("parent")).drop(
        "_start", "_link", "_lcu", "_sg", "_has_hit", "_sections", strict=False)
    if groups is not None:
        df = pl.concat([df, groups], how="diagonal_relaxed", rechunk=False)
    # sorted a column at a time, each let go once gathered: a frame of tables sorted whole
    # is copied into one piece first and then gathered (the peak twice the frame, 48 MB
    # more on the benchmark input, against the one piece the reading had left before)
    order = df.select(pl.arg_sort_by("ts", "host", "device_kind", "device")).to_series()
    out: list[pl.Series] = []
    for c in df.columns:
        out.append(df[c].gather(order))
        df = df.drop(c)
    return pl.DataFrame(out)


def _merged(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """One row per (host, interval start, device) of ``frames``, the first of which holds the
    rows read a line at a time. Each column is taken from the first row that sets it: a
    section sets its own columns, and a device is in a section once (:func:`_row`,
    :func:`_bulk`). Two sections set the same columns: the cache device page and the device
    overview set cache_hit_pct and the volume's link. The page's wins, whichever came first,
    as its assignment won over the overview's ``setdefault`` -- even with no value (H/R
    N/A): cache_hit_pct is taken from the first row that set it (_has_hit: the rows read a
    line at a time say whether they did, the overview's runs did), not the first with a
    value. A row keeps _has_hit, for :func:`_reopen`.

    The groups are numbered with numpy from the key columns' codes, each group's first row
    found with ``minimum.at`` of row numbers, and each column gathered by it: a polars
    group_by took some 0.5 kB a row (85 MB on the benchmark input in one go)."""
    df = (pl.concat(frames, how="diagonal_relaxed", rechunk=False) if len(frames) > 1
          else frames[0])
    frames.clear()
    n = df.height
    _, group = _groups(df, "device")
    groups = int(group.max()) + 1 if n else 0
    if groups == n:
        return df
    rows = np.arange(n, dtype=np.int64)

    def gather(col: pl.Series, mask: np.ndarray | None) -> pl.Series:
        """``col`` at each group's first row where ``mask`` holds (null where none does)."""
        first = np.full(groups, n, dtype=np.int64)
        if mask is None:
            np.minimum.at(first, group, rows)
        else:
            np.minimum.at(first, group[mask], rows[mask])
        missing = np.flatnonzero(first == n)
        out = col.gather(np.minimum(first, n - 1))
        return out.scatter(missing, None) if missing.size else out

    has_hit = (df["_has_hit"].fill_null(value=False).to_numpy() if "_has_hit" in df.columns
               else np.zeros(n, dtype=bool))
    out = []
    for c in df.columns:
        col = df[c]
        if c == "_sections":  # (every section a device of the group was read in)
            bits = np.zeros(groups, dtype=np.uint8)
            np.bitwise_or.at(bits, group, col.fill_null(0).to_numpy())
            out.append(pl.Series(c, bits, dtype=pl.UInt8()))
        elif c in ("host", "_start", "device"):
            out.append(gather(col, None))
        elif c in ("cache_hit_pct", "_has_hit"):
            out.append(gather(col, has_hit))
        else:
            out.append(gather(col, col.is_not_null().to_numpy()))
    return pl.DataFrame(out)


#: The DASD times of a storage group's row: means over the group's I/Os (see
#: :func:`_storage_groups`).
_SG_TIMES = ("await_ms", "iosq_ms", "pend_ms", "disc_ms", "conn_ms")
#: Storage groups named one by one in the import's note, then counted.
_SG_LISTED = 10


def _storage_groups(st: _State, df: pl.DataFrame) -> pl.DataFrame | None:
    """A row per storage group and interval -- device ``SG:name``, kind ``lcu``, no parent --
    computed from the DASD lines of the volumes that name it in the STORAGE GROUP column:
    ``iops`` is their DEVICE ACTIVITY RATEs summed; AVG RESP/IOSQ/PEND/DISC/CONN TIME the mean
    over the group's I/Os (each volume's time weighted by its activity rate, over the volumes
    that print it; the plain mean when none had any I/O); % DEV UTIL the volumes' mean. That
    is how RMF's LCU summary line is made from its device lines (LCU 0040 of the fixtures
    checks it to the printed digits), and how RMF's overview conditions for a storage group
    (``SG(name)``: DART = SSC / INT, DCTAVG = CNN / SSC, ...; z/OS RMF User's Guide,
    "Device Activity - SMF record type 74-1") sum the counters of its devices."""
    if "_sg" not in df.columns:
        return None
    present = [c for c in (*_SG_TIMES, "util_pct") if c in df.columns]
    rate = pl.col("iops") if "iops" in df.columns else pl.lit(None, pl.Float64())
    vols = df.select("host", "_start", "ts", "interval_s", "_sg", rate.alias("iops"),
                     *present).filter(pl.col("_sg").is_not_null())
    if vols.height == 0:
        return None
    # Groups numbered and summed with numpy (bincount): a polars group_by of these rows
    # took 22 MB more on the benchmark input (100 MB of report), this some 11 MB.
    first, group = _groups(vols, "_sg")

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=first.size)

    def column(name: str) -> np.ndarray:
        return vols[name].cast(pl.Float64()).fill_null(np.nan).to_numpy()

    iops = column("iops")
    has_rate = ~np.isnan(iops)
    values: dict[str, np.ndarray] = {
        "iops": np.where(total(has_rate) > 0, total(np.where(has_rate, iops, 0.0)), np.nan)}
    for name in present:
        x = column(name)
        has = ~np.isnan(x)
        mean = total(np.where(has, x, 0.0)) / np.maximum(total(has), 1)
        mean[total(has) == 0] = np.nan
        if name == "util_pct":
            values[name] = mean
            continue
        both = has & has_rate
        weight = total(np.where(both, iops, 0.0))
        values[name] = np.where(weight > 0, total(np.where(both, x * iops, 0.0))
                                / np.where(weight > 0, weight, 1.0), mean)
    heads: pl.DataFrame = vols.select("host", "ts", "interval_s", "_sg")[first]
    # A sum's last digits depend on the order of the lines (read a run at a time or one by
    # one): rounded to 1e-9, far below the 0.001 RMF prints, they do not.
    groups = heads.with_columns(
        *(pl.Series(name, np.round(v, 9), dtype=pl.Float64()).fill_nan(None)
          for name, v in values.items()),
        pl.Series("_volumes", np.bincount(group, minlength=first.size), dtype=pl.Int64()))
    sizes = groups.group_by("_sg").agg(pl.col("_volumes").max()).sort("_sg")
    named = [f"{sg} ({n} volume{'s' if n != 1 else ''})"
             for sg, n in sizes.head(_SG_LISTED).iter_rows()]
    more = f" and {sizes.height - _SG_LISTED} more" if sizes.height > _SG_LISTED else ""
    st.source.note(f"storage groups computed from their volumes' DASD lines (rows SG:name): "
                   f"{', '.join(named)}{more}")
    return groups.select(
        pl.lit(NAME, pl.String()).alias("source"), "host",
        (pl.lit("SG:") + pl.col("_sg")).alias("device"),
        pl.lit("lcu", pl.String()).alias("device_kind"),
        pl.lit(None, pl.String()).alias("parent"), "ts", "interval_s",
        *(c for c in groups.columns if c in SCHEMA and c not in ("host", "ts", "interval_s")))


def _groups(df: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``df`` grouped by (host, ``name``, _start): each group's first row, and
    each row's group number (groups in key order). Numbered with numpy from the key columns'
    codes (fewer than 2**31 of each: the product fits in int64)."""
    key = np.zeros(df.height, dtype=np.int64)
    for c in ("host", name):
        codes = df[c].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
        key = key * (int(codes.max()) + 1) + codes
    starts, start_code = np.unique(df["_start"].to_physical().to_numpy(), return_inverse=True)
    _, first, group = np.unique(key * starts.size + start_code, return_index=True,
                                return_inverse=True)
    return first, group


def _parents(st: _State, df: pl.DataFrame) -> pl.Series:
    """Every row's parent: a rank's pool; a volume's rank (its link from the cache report:
    RRID, or an extent pool of one rank), else its extent pool, else its LCU (DASD
    report); none for the other kinds. The parent of each link is worked out once (a
    volume's link is its rank's or its pool's, shared), and looked up by the rows:
    expressions over every row took 40 MB on the benchmark input."""
    links: dict[str, str] = {}
    for text in df["_link"].drop_nulls().unique().to_list():
        what, ident, serial = text.split("\t")
        ranks = st.pool_ranks.get((serial, ident), set()) if what != "RRID" else set()
        links[text] = (f"RANK:{ident}@{serial}" if what == "RRID"
                       else next(iter(ranks)) if len(ranks) == 1 else f"POOL:{ident}@{serial}")
    kind = pl.col("device_kind")
    none = pl.lit(None, pl.String())
    return df.select(
        pl.when(kind == "volume").then(pl.coalesce(
            pl.col("_link").replace_strict(links, default=none, return_dtype=pl.String()),
            pl.lit("LCU:") + pl.col("_lcu")))
        .when(kind == "rank").then(pl.col("device").replace_strict(
            st.rank_pool, default=none, return_dtype=pl.String()))
        .otherwise(none).alias("parent")).to_series()


#: Rows per SampleFrame handed on by :func:`iter_parse`.
_ROWS_OUT = 50_000


def _link_of(text: str | None) -> tuple[str, str, str] | None:
    """A volume's link as the table holds it (``what<TAB>id<TAB>serial``)."""
    if not text:
        return None
    what, ident, serial = text.split("\t")
    return what, ident, serial
