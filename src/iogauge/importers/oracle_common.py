"""Shared reading of Oracle Statspack and AWR text reports: wait events and file I/O.

Statspack (``spreport.sql``, Oracle 8i-11g and later) and AWR (``awrrpt.sql``, 10g and later)
text reports are SQL*Plus listings: a section title, optional ``->`` notes, column headings,
a rule of dashes under every column, and rows. The rule is what makes them readable: each dash
run is one column, so a heading word or a value belongs to the run it stands in. That is how
this module names and slices columns, whatever the release. The layouts handled are those
of ``sprepins.sql`` 8.1.x and 9.2 (read from the script's COLUMN/TTITLE definitions), Statspack
10.2, and AWR 10.2/11.2 text reports as public reports show them; the 12c/19c Top 10 table
(unit-suffixed ``Avg Wait``) and File IO Stats (extra single-block read columns) were
reconstructed from descriptions, which the heading-driven reading tolerates.

Sections read (all others are skipped):

* top events: ``Top 5 Wait Events`` (8i), ``Top 5 Timed Events`` (9i/10g, AWR 10g),
  ``Top 5 Timed Foreground Events`` (AWR 11g), ``Top 10 Foreground Events by Total Wait
  Time`` (AWR 11.2.0.4+/12c/19c);
* the full lists: ``Wait Events`` (Statspack, AWR 10g), ``Foreground Wait Events`` /
  ``Background Wait Events`` (AWR 11g+, Statspack 11g+);
* ``File IO Stats`` (``File IO Statistics`` in 8i) and ``Tablespace IO Stats``
  (``Tablespace IO Summary`` in 8i).

Wait events go to a :class:`WaitEventFrame` (``source.waits``); one row per event per section,
``ts`` = the end snapshot time, ``interval_s`` = end - begin snapshot time (exact to the second;
the printed ``Elapsed: n.nn (mins)`` is the same figure rounded, used only when the snapshot
times are missing). Column headings map as follows (spaces ignored, case ignored):

=====================================================  =============================
heading                                                WaitEventFrame column
=====================================================  =============================
Waits                                                  waits
%Time -outs                                            timeouts_pct
Time (s), Time(s), Total Wait Time (s) / (sec)         time_waited_s
Time (cs), Wait Time (cs), Total Wait Time (cs) (8i)   time_waited_s (/ 100)
Avg wait (ms), Avg Wait(ms), Wait Avg(ms)              avg_wait_ms
Avg Wait (12c+: value carries its unit, 7.38ms/540us)  avg_wait_ms (converted)
Waits /txn                                             waits_per_txn
% DB time, %Total Call Time, % Total Ela Time          pct_db_time
Wait Class                                             wait_class
=====================================================  =============================

``Timeouts`` (a count, 9i) and ``% Total Wt Time`` (8i: share of *wait* time, not of DB time)
have no column and are dropped. ``CPU time`` / ``DB CPU`` rows of the top-events tables are
kept as printed (no waits, no wait class).

File IO Stats rows become SampleFrame rows (device = the file name, ``device_kind``
``datafile``, ``parent`` = its tablespace); Tablespace IO Stats rows become ``tablespace`` rows.
``Av Reads/s`` -> r_iops, ``Av Rd(ms)`` -> r_await_ms, ``Av Blks/Rd`` x block size / 1024 ->
r_areq_kB (the block size from ``Std Block Size: 8K`` or ``db_block_size: 8192``, else 8 KB
and a note; tablespaces of another block size are not told apart by the report),
``Av Writes/s`` (``Writes avg/s``) -> w_iops. 8i prints counts only: r_iops/w_iops are then
Reads/Writes divided by ``interval_s`` (a note says so). Buffer Waits and Av Buf Wt(ms) (waits
for a *buffer*, not for the file) and the 12c single-block columns have no column here. A
blank Av Rd(ms) or Av Blks/Rd where Reads is 0 becomes 0.0, the SampleFrame convention for "no
request completed" (Oracle prints nothing there).

A file may hold several reports one after another (one per snapshot pair); each is an interval.
Such a file is read a piece of whole reports at a time (:func:`iter_reports`: cut before a
report's title line), so memory holds one piece, not the file, and the rows of a piece's
reports become one SampleFrame and one WaitEventFrame.
A file cut off inside a section keeps the sections that were complete (a table is complete
when its closing rule, the next title or -- for wait lists -- the blank line after it was
read) and drops the cut one, with a note.

How a piece is read (Python reads only the lines that carry structure -- section titles,
column headings, the header lines that can hold snapshot times or names, a few a table --
never the rows of a table one by one):

* its lines are classified at once by polars (section titles, rules of dashes, footers, blank
  lines, lines of numbers only, the header lines that can hold a snapshot time, block size or
  host), each class kept as a sorted list of line numbers;
* Python then walks the reports and their tables, a few binary searches in those lists a
  table (where its rule is, where it ends, which lines are its records -- a two-line table's
  records are found by a regular expression over one letter a line);
* the records are cut into cells and converted by polars a layout at a time (the reports of
  a file repeat the same layouts): a line with nothing but spaces outside its columns' rules
  is sliced by column, any other one (a value wider than its column) is cut word by word as
  before; a number is read from its text with the multiplier's power of ten written into
  its exponent, so it is rounded once, as ``float(Decimal(text) * multiplier)`` rounds it;
* a table holding anything to refuse or to note (a value that is not a number, ``#``, a name
  missing, a file listed twice) is read row by row as before, which names each refused line;
  the notes and refusals of a piece reach the Source in the order of the file.

100 MB of AWR reports (``benchmarks/import_memory.py``: 24,373 copies of the 19c excerpt, each a
day later) import to Parquet in 9.8-12.0 s at 0.24 GB peak, where reading each line in Python
took 31.0-34.0 s at 0.22 GB, and reading the whole file at once (before pieces) 237 s at
2.89 GB; rows and wait events are the same.
"""

from __future__ import annotations

import bisect
import functools
import io
import itertools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of
from iogauge.model.sampleframe import SCHEMA, TS_DTYPE, SampleFrame
from iogauge.model.waitevents import WAIT_SCHEMA, WaitEventFrame

DEFAULT_BLOCK_BYTES = 8192

_TOP_RE = re.compile(r"^(Top \d+ (?:Wait|Timed) Events|Top \d+ Timed Foreground Events|"
                     r"Top \d+ Foreground Events by Total Wait Time)\b")
_TAIL = r"(?=\s+for DB:|\s{2,}DB/Inst:|\s*$)"
_WAITS_RE = re.compile(r"^((?:Foreground |Background )?Wait Events(?: \(fg and bg\))?)" + _TAIL)
_FILE_RE = re.compile(r"^(File IO Stats|File IO Statistics)" + _TAIL)
_TS_RE = re.compile(r"^(Tablespace IO Stats|Tablespace IO Summary)" + _TAIL)
#: any Statspack/AWR section title: ends the table being read
_ANY_TITLE_RE = re.compile(r"^\S.*?(?:\sfor DB: \S+|\s{2,}DB/Inst: \S+)")
_SNAP_RE = re.compile(r"^\s*(Begin|End) Snap:\s+(\d+)\s+(\d{1,2}-[A-Za-z]{3}-\d{2,4} "
                      r"\d{1,2}:\d{2}:\d{2})")
_SNAP8_RE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d{1,2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2})\s+"
                       r"(\d{1,2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2})\s+([\d,.]+)\s*$")
_ELAPSED_RE = re.compile(r"^\s*Elapsed:\s+([\d,.]+)\s+\(mins\)")
_BLOCK_K_RE = re.compile(r"Std Block Size:\s+([\d,]+)\s*K\b")
_BLOCK_B_RE = re.compile(r"db_block_size:\s+(\d+)\b")
_HOST_RE = re.compile(r"^\s*Host\s+Name:\s+(\S+)")
_NUM_RE = re.compile(r"[\d,]*\.?\d+(?:[eE][-+]?\d+)?")
_SUFFIXED_RE = re.compile(r"([\d,]*\.?\d+)([KMGTP])")
_UNIT_RE = re.compile(r"([\d,]*\.?\d+)\s*(ns|us|ms|s|sec)")
_UNIT_MS = {"ns": Decimal("0.000001"), "us": Decimal("0.001"), "ms": Decimal(1),
            "s": Decimal(1000), "sec": Decimal(1000)}
_DECIMAL_SUFFIX = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}

#: heading (lower case, no spaces) -> (WaitEventFrame column, multiplier or "unit")
_WAIT_COLUMNS: dict[str, tuple[str, Decimal | str]] = {
    "waits": ("waits", Decimal(1)),
    "%time-outs": ("timeouts_pct", Decimal(1)),
    "%timeouts": ("timeouts_pct", Decimal(1)),
    "time(s)": ("time_waited_s", Decimal(1)),
    "time(sec)": ("time_waited_s", Decimal(1)),
    "waittime(s)": ("time_waited_s", Decimal(1)),
    "totalwaittime(s)": ("time_waited_s", Decimal(1)),
    "totalwaittime(sec)": ("time_waited_s", Decimal(1)),
    "time(cs)": ("time_waited_s", Decimal("0.01")),
    "waittime(cs)": ("time_waited_s", Decimal("0.01")),
    "totalwaittime(cs)": ("time_waited_s", Decimal("0.01")),
    "avgwait(ms)": ("avg_wait_ms", Decimal(1)),
    "waitavg(ms)": ("avg_wait_ms", Decimal(1)),
    "avgwaitms": ("avg_wait_ms", Decimal(1)),
    "avgwait": ("avg_wait_ms", "unit"),
    "waits/txn": ("waits_per_txn", Decimal(1)),
    "%dbtime": ("pct_db_time", Decimal(1)),
    "%totalcalltime": ("pct_db_time", Decimal(1)),
    "%totalelatime": ("pct_db_time", Decimal(1)),
}
_WAIT_TEXT = {"event", "waitclass"}

#: heading -> file statistic
_FILE_COLUMNS: dict[str, str] = {
    "reads": "reads",
    "avreads/s": "reads_ps", "reads/s": "reads_ps", "avrds/s": "reads_ps", "rds/s": "reads_ps",
    "avrd(ms)": "rd_ms", "avgrd(ms)": "rd_ms", "rd(ms)": "rd_ms", "avgread(ms)": "rd_ms",
    "avblks/rd": "blks_rd", "avgblksrd": "blks_rd", "blks/rd": "blks_rd",
    "writes": "writes",
    "avwrites/s": "writes_ps", "writes/s": "writes_ps", "writesavg/s": "writes_ps",
}
_FILE_TEXT = {"tablespace", "filename"}


class _BadLine(Exception):  # noqa: N818 - internal control flow, turned into source.bad_line
    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(reason)
        self.line_no = line_no
        self.reason = reason


class _Cut(Exception):  # noqa: N818 - the file ends before a section's column headings
    pass


def _norm(heading: str) -> str:
    return "".join(heading.split()).lower()


# ---------------------------------------------------------------------------------------------
# column-ruled tables
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Col:
    name: str  # heading words joined by one space
    start: int
    end: int  # inclusive
    text: bool = False


def _is_rule(line: str) -> bool:
    """A column rule: dashes (or Statspack's ``~``) from column 1, runs split by spaces."""
    return bool(line) and line[0] in "-~" and "-" in line and set(line.rstrip()) <= {"-", "~", " "}


def _spans(rule: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end() - 1) for m in re.finditer(r"[-~]+", rule)]


def _tokens(line: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end() - 1, m.group()) for m in re.finditer(r"\S+", line)]


def _span_of(start: int, end: int, spans: list[tuple[int, int]], *,
             right_aligned: bool = False) -> int:
    """The span a token at [start, end] belongs to: the one holding its start (headings, text)
    or its end (right-aligned numbers) first, then the other end, else the nearest (a value too
    wide for its column spills into the gap or the column to its left)."""
    ends = (end, start) if right_aligned else (start, end)
    for pos in ends:
        for i, (a, b) in enumerate(spans):
            if a <= pos <= b:
                return i
    return min(range(len(spans)), key=lambda i: min(abs(start - spans[i][1]),
                                                    abs(end - spans[i][0])))


def _columns(header: list[str], rule: str, text_names: set[str]) -> list[_Col]:
    spans = _spans(rule)
    words: list[list[str]] = [[] for _ in spans]
    for line in header:
        for start, end, tok in _tokens(line):
            words[_span_of(start, end, spans)].append(tok)
    names = [" ".join(w) for w in words]
    return [_Col(name, a, b, _norm(name) in text_names
                 or _norm(name).endswith(("event", "tablespace")))
            for name, (a, b) in zip(names, spans, strict=True)]


def _cells(line: str, cols: list[_Col]) -> list[str]:
    """Values of a data line, one per column (empty string where blank)."""
    out = [""] * len(cols)
    spans = [(c.start, c.end) for c in cols]
    for i, c in enumerate(cols):
        if c.text:  # free text (event names hold spaces): slice the column, to EOL if last
            nxt = cols[i + 1].start if i + 1 < len(cols) else len(line)
            out[i] = line[c.start:nxt].strip()
    for start, end, tok in _tokens(line):
        i = _span_of(start, end, spans, right_aligned=True)
        if not cols[i].text:
            out[i] = f"{out[i]} {tok}".strip()
    return out


@dataclass
class _Table:
    title: str
    title_line: int
    cols: list[_Col]
    cols2: list[_Col] | None  # second-level columns (two-line records)
    #: (line, cells) of each record; two-line records add the numbers' (line, cells)
    rows: list[tuple[int, list[str], int | None, list[str] | None]] = field(
        default_factory=list)
    complete: bool = False


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------
def _number(cell: str, line_no: int, what: str, notes: set[str]) -> Decimal | None:
    """A printed Oracle number: ``20,004``, ``7.3``, ``.37``, AWR's ``12.3K`` (x 1000)."""
    if cell == "":
        return None
    if set(cell) == {"#"}:
        notes.add(f"{what}: '#' shown where the value did not fit its column; left empty")
        return None
    m = _SUFFIXED_RE.fullmatch(cell)
    try:
        if m:
            return Decimal(m.group(1).replace(",", "")) * _DECIMAL_SUFFIX[m.group(2)]
        if _NUM_RE.fullmatch(cell):
            return Decimal(cell.replace(",", ""))
    except InvalidOperation:
        pass
    raise _BadLine(line_no, f"{what}: {cell!r} is not a number")


def _with_unit_ms(cell: str, line_no: int, what: str) -> Decimal | None:
    """``7.38ms``, ``540.12us``, ``1.02 s`` -> milliseconds."""
    if cell == "":
        return None
    m = _UNIT_RE.fullmatch(cell)
    if m is None:
        raise _BadLine(line_no, f"{what}: {cell!r} is not a time with its unit (ns, us, ms, s)")
    return Decimal(m.group(1).replace(",", "")) * _UNIT_MS[m.group(2)]


def _f(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------
@dataclass
class _Report:
    start_line: int
    db_name: str | None = None
    instance: str | None = None
    host: str | None = None
    begin: datetime | None = None
    end: datetime | None = None
    elapsed_min: Decimal | None = None
    block_bytes: int | None = None


#: Bytes read per piece by :func:`iter_reports` (each piece is cut before a report's title).
CHUNK_BYTES = 4 << 20


def parse_reports(data: bytes, source: Source, *, fmt: str, start_re: re.Pattern[str],
                  title: str) -> SampleFrame:
    """Parse every report in ``data`` (each starts at a line matching ``start_re``)."""
    frames = list(iter_reports(io.BytesIO(data), source, fmt=fmt, start_re=start_re,
                               title=title))
    return SampleFrame.concat(frames) if frames else SampleFrame.empty()


def iter_reports(stream: BinaryIO, source: Source, *, fmt: str, start_re: re.Pattern[str],
                 title: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[SampleFrame]:
    """The rows of the reports in ``stream``, a piece of about ``chunk_bytes`` at a time.

    A piece is cut before the last line in it that is a report's title (``title`` alone on
    its line, as ``start_re`` matches it), so every piece holds whole reports and memory
    holds one piece (a report of Statspack or AWR is some 100 kB to a few MB). The rows of
    all reports of a piece are made into one SampleFrame, and their wait events into one
    WaitEventFrame."""
    head_re = re.compile(rb"(?m)^[ \t\f\v]*" + re.escape(title.encode())
                         + rb"[ \t\r\f\v]*$")
    buf = stream.read(chunk_bytes)
    if encoding_of(buf[:4]) in ("utf-16", "utf-16-le"):  # (from Windows tools: small, whole)
        buf = decode(buf + stream.read()).encode("utf-8")
    line_base = 0  # lines of the file before ``buf``
    first = True
    scan_from = 1  # (a title at the start of ``buf`` is the one the last cut was made at)
    while True:
        block = stream.read(chunk_bytes)
        if not block:
            break
        scan_from = max(1, len(buf) - 1024)  # (a title line cut by the block's end)
        buf += block
        del block
        cut = 0
        for m in head_re.finditer(buf, scan_from):
            cut = m.start()
        if cut == 0 or (first and head_re.search(buf, 0, cut) is None):
            continue  # no report ends in ``buf`` yet: read on
        piece, buf = buf[:cut], buf[cut:]
        frame = _parse_piece(piece, source, fmt, start_re, title, line_base, first=first,
                             final=False)
        line_base += piece.count(b"\n")
        first = False
        del piece
        if frame is not None:
            yield frame
    frame = _parse_piece(buf, source, fmt, start_re, title, line_base, first=first, final=True)
    if frame is not None:
        yield frame


def _parse_piece(data: bytes, source: Source, fmt: str, start_re: re.Pattern[str],
                 title: str, line_base: int, *, first: bool, final: bool
                 ) -> SampleFrame | None:
    """The rows of the whole reports in ``data`` (lines ``line_base + 1`` on; ``first``:
    the file's start, ``final``: its end)."""
    # split on \n only (str.splitlines() also breaks at form feeds and would shift line
    # numbers); a form feed at a page start is dropped from the line
    raw = decode(data).split("\n")
    if raw and _clean(raw[-1]) == "":
        raw.pop()
    if final and data and not data.endswith(b"\n") and raw:
        raw.pop()  # a partial last line: the section holding it counts as cut
        source.note(f"line {line_base + len(raw) + 1} is cut off (no line end); it was not read")
    pc = _Piece.of(raw, line_base, start_re)
    starts = pc.idx["start"]
    if not starts:
        source.bad_line(None, f"no '{title}' line: not a report of this kind")
        return None
    if first:
        before = pc.first("text", 0, starts[0])
        if before is not None:
            source.bad_line(pc.no(before), "text before the first report title")
    out = _Out(pc=pc, fmt=fmt)
    bounds = [*starts, pc.n]
    for r, (a, b) in enumerate(itertools.pairwise(bounds)):
        _scan_report(out, source, r, a, b, last=final and b == pc.n)
    waits = _wait_frame(out)
    files = _file_frame(out)
    _fallback(out)
    out.events.replay(source)
    waits = _with_rows(waits, out.fallback_waits, WAIT_SCHEMA)
    files = _with_rows(files, out.fallback_files, _FILE_SCHEMA)
    if waits is not None and waits.height:
        source.waits.append(WaitEventFrame(waits))
    return SampleFrame(files) if files is not None and files.height else None


# ---------------------------------------------------------------------------------------------
# a piece of reports: its lines classified at once
# ---------------------------------------------------------------------------------------------
def _clean(line: str) -> str:
    return line.rstrip("\r").lstrip("\x0c")


#: The line classes a piece is read by, as polars (Rust) regexes: Rust's regex has no
#: look-ahead, so a title's tail is matched rather than looked at (only whether a line
#: matches is asked here; the Python patterns then read the few title lines).
_V_TAIL = r"(?:\s+for DB:|\s{2,}DB/Inst:|\s*$)"
_V_WORD = r"(?:[\d,]*\.?\d+(?:[eE][-+]?\d+)?|[\d,]*\.?\d+[KMGTP]|#+)"
_V_CLASSES = {
    "top": _TOP_RE.pattern,
    "waits": r"^(?:Foreground |Background )?Wait Events(?: \(fg and bg\))?" + _V_TAIL,
    "file": r"^(?:File IO Stats|File IO Statistics)" + _V_TAIL,
    "ts": r"^(?:Tablespace IO Stats|Tablespace IO Summary)" + _V_TAIL,
    "title": _ANY_TITLE_RE.pattern,
    "footer": r"^\s+-{20,}\s*$",  # the indented rule SQL*Plus prints after a section
    "blank": r"^\s*$",
    "reset": r"^[\s~]*$|^\s*->",  # a line after which column headings start anew
    "numeric": rf"^\s*{_V_WORD}(?:\s+{_V_WORD})*\s*$",  # numbers (or '#' runs) only
    "head": "|".join(f"(?:{p.pattern})" for p in (_SNAP_RE, _SNAP8_RE, _ELAPSED_RE, _BLOCK_K_RE,
                                                   _BLOCK_B_RE, _HOST_RE)),
}
#: the letters of a two-line table's lines (see _RECORD_RE); X: not yet told T from C
_B, _N, _X, _C, _T = (ord(c) for c in "BNXCT")
#: a two-line table's lines, one letter each (B blank, N numbers only, T text, C a text line
#: indented to the last column: a long file name continued) -> its records, as reading it
#: line by line with one record pending finds them: N alone is numbers without their text
#: line, T/C ... T/N a record (blank lines and continuations between; a text line where the
#: numbers should be is taken as the numbers, and refused when converted), T/C ... at the
#: end a record without numbers
_RECORD_RE = re.compile(r"B|N|[TC][BC]*[TN]|[TC][BC]*$")


@dataclass
class _Piece:
    """The lines of a piece (index k is line ``base + 1 + k`` of the file) and, for each line
    class, the sorted indices of its lines; ``series`` holds the lines cleaned of CR and
    form feeds, ``code`` B/N/X per line (blank, numbers only, other) and ``lead`` the
    width of each line's indent."""

    raw: list[str]
    base: int
    n: int
    series: pl.Series
    idx: dict[str, list[int]]
    code: np.ndarray
    lead: np.ndarray

    @classmethod
    def of(cls, raw: list[str], base: int, start_re: re.Pattern[str]) -> _Piece:
        series = (pl.Series("l", raw, dtype=pl.String)
                  .str.strip_chars_end("\r").str.strip_chars_start("\x0c"))
        col = pl.col("l")
        classes = {name: col.str.contains(p) for name, p in _V_CLASSES.items()}
        masks = pl.DataFrame([series]).select(
            start=col.str.contains(start_re.pattern),
            rule=col.str.contains(r"^[-~][-~ ]*\s*$") & col.str.contains("-", literal=True),
            end=col.str.starts_with("End of Report"),
            lead=col.str.len_chars() - col.str.strip_chars_start().str.len_chars(),
            **classes)
        arr = {name: masks[name].to_numpy() for name in masks.columns}
        interest = arr["top"] | arr["waits"] | arr["file"] | arr["ts"]
        idx = {name: np.flatnonzero(arr[name]).tolist()
               for name in ("start", "rule", "blank", "reset", "head")}
        idx["text"] = np.flatnonzero(~arr["blank"]).tolist()
        idx["interest"] = np.flatnonzero(interest).tolist()
        idx["waits_top"] = np.flatnonzero(arr["top"] | arr["waits"]).tolist()
        # what ends a table (_read_table): a footer rule, End of Report, any section title
        idx["term"] = np.flatnonzero(interest | arr["title"] | arr["footer"] | arr["end"]).tolist()
        code = np.full(len(raw), _X, dtype=np.uint8)
        code[arr["numeric"]] = _N
        code[arr["blank"]] = _B
        return cls(raw=raw, base=base, n=len(raw), series=series, idx=idx, code=code,
                   lead=arr["lead"])

    def line(self, k: int) -> str:
        return _clean(self.raw[k])

    def no(self, k: int) -> int:
        return self.base + 1 + k

    def first(self, name: str, lo: int, hi: int) -> int | None:
        """The first line of class ``name`` in [lo, hi), or None."""
        ks = self.idx[name]
        j = bisect.bisect_left(ks, lo)
        return ks[j] if j < len(ks) and ks[j] < hi else None

    def last(self, name: str, lo: int, hi: int) -> int | None:
        """The last line of class ``name`` in [lo, hi), or None."""
        ks = self.idx[name]
        j = bisect.bisect_left(ks, hi) - 1
        return ks[j] if j >= 0 and ks[j] >= lo else None

    def between(self, name: str, lo: int, hi: int) -> list[int]:
        ks = self.idx[name]
        return ks[bisect.bisect_left(ks, lo):bisect.bisect_left(ks, hi)]


@dataclass
class _Spec:
    """A complete table of a report, as found: its columns and the lines of its records."""

    order: int  # place in the piece (document order)
    rep: int  # the report (index into _Out.meta)
    seq: int  # place in the report (of its section titles)
    kind: str  # top | waits | file | tablespace
    section: str  # the wait section's name (wait tables)
    title: str
    title_line: int
    cols: list[_Col]
    cols2: list[_Col] | None
    first: list[int]  # line index of each record (of its first line in two-line tables)
    second: list[int]  # line index of each record's numbers (two-line tables)
    more: dict[int, str]  # record -> the file name's continuation lines, joined


@dataclass
class _Meta:
    """What every row of a report carries."""

    r: int  # the report's place in the piece
    rep: _Report
    ts: datetime
    interval_s: Decimal
    host: str


class _Events:
    """Notes and refused lines, kept with the place where reading the piece line by line
    meets them -- (report, table, 0 while finding the table's lines / 1 while converting
    them) -- and given to the Source in that order at the piece's end: the tables are
    converted a layout at a time, not in the order of the file."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple[int, int, int, int], bool, int | None, str]] = []

    def bad(self, key: tuple[int, int, int], line_no: int | None, reason: str) -> None:
        self.items.append(((*key, len(self.items)), False, line_no, reason))

    def note(self, key: tuple[int, int, int], message: str) -> None:
        self.items.append(((*key, len(self.items)), True, None, message))

    def replay(self, source: Source) -> None:
        for _key, is_note, line_no, text in sorted(self.items, key=lambda item: item[0]):
            if is_note:
                source.note(text)
            else:
                source.bad_line(line_no, text)


class _Sink:
    """The Source of a table read the old way (:class:`_Ctx`): its refusals become events."""

    def __init__(self, events: _Events, key: tuple[int, int, int]) -> None:
        self.events = events
        self.key = key

    def bad_line(self, line_no: int | None, reason: str) -> None:
        self.events.bad(self.key, line_no, reason)


@dataclass
class _Out:
    pc: _Piece
    fmt: str
    meta: list[_Meta] = field(default_factory=list)
    specs: list[_Spec] = field(default_factory=list)
    events: _Events = field(default_factory=_Events)
    #: report -> notes of its tables (given sorted after the report, as _Ctx.notes were)
    notes: dict[int, set[str]] = field(default_factory=dict)
    #: specs whose rows are made one at a time (a value that is not a number, a '#', ...)
    fallback: list[tuple[_Spec, list[list[str]], list[list[str]] | None]] = field(
        default_factory=list)
    fallback_waits: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    fallback_files: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)

    def bad(self, r: int, seq: int, line_no: int | None, reason: str) -> None:
        self.events.bad((r, seq, 0), line_no, reason)

    def note(self, r: int, seq: int, message: str) -> None:
        self.events.note((r, seq, 0), message)


_LAST = 1 << 30  # (the place of a report's notes: after its tables)


def _scan_report(out: _Out, source: Source, r: int, a: int, b: int, *, last: bool) -> None:
    """Find the header and the tables of the report on lines [a, b): the tables' lines go
    to ``out.specs``; nothing is converted yet."""
    pc = out.pc
    rep = _Report(start_line=pc.no(a))
    _read_header(out, r, rep, a, b)
    if rep.end is None or (rep.begin is None and rep.elapsed_min is None):
        if last and pc.first("interest", a, b) is None:
            out.note(r, -1, f"the report from line {rep.start_line} is cut off before its "
                     "snapshot times; nothing of it was read")
        else:
            out.bad(r, -1, rep.start_line, "report without its Begin Snap / End Snap times")
        return
    interval_s: Decimal
    if rep.begin is not None and rep.end > rep.begin:
        interval_s = Decimal((rep.end - rep.begin).total_seconds())
    elif rep.elapsed_min is not None and rep.elapsed_min > 0:
        interval_s = rep.elapsed_min * 60
    else:
        out.bad(r, -1, rep.start_line, "End Snap is not after Begin Snap")
        return
    tz = source.tz
    if tz is None:
        out.note(r, -1, "Statspack/AWR snapshot times carry no zone; assumed UTC (use --tz to "
                 "give the database host's zone)")
        ts = rep.end.replace(tzinfo=UTC)
    else:
        ts = rep.end.replace(tzinfo=tz).astimezone(UTC)
    host = rep.host or source.host or Path(source.path).stem
    r_meta = len(out.meta)
    out.meta.append(_Meta(r=r, rep=rep, ts=ts, interval_s=interval_s, host=host))
    out.notes[r_meta] = set()
    i = a
    for seq, t in enumerate(pc.between("interest", a, b)):
        if t < i:
            continue  # (inside the table read last)
        line = pc.line(t)
        m_top, m_w = _TOP_RE.match(line), _WAITS_RE.match(line)
        m_f, m_t = _FILE_RE.match(line), _TS_RE.match(line)
        m = m_top or m_w or m_f or m_t
        if m is None:  # pragma: no cover - the polars classes match as these patterns do
            continue
        kind = "top" if m_top else "waits" if m_w else "file" if m_f else "tablespace"
        text_names = _WAIT_TEXT if kind in ("top", "waits") else _FILE_TEXT
        try:
            spec, i = _read_table(out, r, seq, t, b, m.group(1),
                                  m.end(1) if kind == "top" else len(line), text_names,
                                  two_level_allowed=kind in ("file", "tablespace"))
        except _BadLine as exc:
            out.bad(r, seq, exc.line_no, exc.reason)
            i = t + 1
            continue
        except _Cut:
            out.note(r, seq, f"'{m.group(1)}' (line {pc.no(t)}) is cut off by the end of the "
                     "file before its column headings; nothing of it was read")
            break
        if spec is None:
            continue
        spec.order, spec.rep, spec.seq, spec.kind = len(out.specs), r_meta, seq, kind
        spec.section = "top timed events" if kind == "top" else m.group(1).lower()
        out.specs.append(spec)


def _read_header(out: _Out, r: int, rep: _Report, a: int, b: int) -> None:
    """Snapshot times, names and block size, from the lines before the first wait section
    (only the lines that can hold them are looked at)."""
    pc = out.pc
    stop = pc.first("waits_top", a, b)
    hi = b if stop is None else stop + 1
    for k in sorted({*pc.between("head", a, hi), *pc.between("rule", a, hi)}):
        line = pc.line(k)
        if rep.end is None or rep.block_bytes is None:
            try:
                _read_snap(rep, line)
            except ValueError as exc:  # a date that is not one (31-Feb-07)
                out.bad(r, -1, pc.no(k), f"{exc.args[0]!r} is not a date and time")
            me = _ELAPSED_RE.match(line)
            if me:
                rep.elapsed_min = Decimal(me.group(1).replace(",", ""))
            mb = _BLOCK_K_RE.search(line)
            if mb and rep.block_bytes is None:
                rep.block_bytes = int(mb.group(1).replace(",", "")) * 1024
            mb = _BLOCK_B_RE.search(line)
            if mb and rep.block_bytes is None:
                rep.block_bytes = int(mb.group(1))
            mh = _HOST_RE.match(line)
            if mh and rep.host is None:
                rep.host = mh.group(1)
        if _is_rule(line) and a < k < b - 1:
            under = pc.line(k + 1)
            for key, start, stop in _header_names(pc.line(k - 1), line):
                value = under[start:stop].strip()
                if not value:
                    continue
                if key in ("dbname", "database") and rep.db_name is None:
                    rep.db_name = value.split()[0]
                elif key == "instance" and rep.instance is None:
                    rep.instance = value.split()[0]
                elif key in ("host", "hostname") and rep.host is None:
                    rep.host = value.split()[0]


def _read_snap(rep: _Report, line: str) -> None:
    """A Begin Snap / End Snap line, or 8i's snapshot table row."""
    m = _SNAP_RE.match(line)
    if m:
        when = _oracle_time(m.group(3))
        if m.group(1) == "Begin":
            rep.begin = when
        else:
            rep.end = when
    m8 = _SNAP8_RE.match(line)
    if m8 and rep.end is None:
        rep.begin, rep.end = _oracle_time(m8.group(3)), _oracle_time(m8.group(4))
        rep.elapsed_min = Decimal(m8.group(5).replace(",", ""))


_NAME_KEYS = frozenset({"dbname", "database", "instance", "host", "hostname"})


@functools.lru_cache(maxsize=256)
def _header_names(heading: str, rule: str) -> tuple[tuple[str, int, int], ...]:
    """The columns of a header table (one heading line over its rule) that name the database,
    instance or host: (heading, first character, end of the slice), the slice of the line
    under them as :func:`_cells` cuts a text column (to the next column, or to the end of
    the line). The reports of a file repeat the same few header tables."""
    cols = _columns([heading.replace("~", " ")], rule, set())
    stops = [c.start for c in cols[1:]] + [sys.maxsize]
    return tuple((_norm(c.name), c.start, stop) for c, stop in zip(cols, stops, strict=True)
                 if _norm(c.name) in _NAME_KEYS)


@functools.lru_cache(maxsize=4096)
def _columns_of(header: tuple[str, ...], rule: str, text_names: frozenset[str]) -> list[_Col]:
    """:func:`_columns`, once per layout: the reports of a file print the same headings over
    and over, and the tables of one layout are converted together (the list is shared: it
    must not be changed)."""
    return _columns(list(header), rule, set(text_names))


def _read_table(out: _Out, r: int, seq: int, i_title: int, b: int, title: str,
                title_end: int, text_names: set[str], *, two_level_allowed: bool
                ) -> tuple[_Spec | None, int]:
    """The table whose title is on line ``i_title`` (the report ends before ``b``): its
    columns and the lines of its records, and where reading goes on. None for a table cut
    off by the end of the file (a note says so)."""
    pc = out.pc
    rule = pc.first("rule", i_title + 1, min(b, i_title + _HEADING_LINES))
    if rule is None:
        if i_title + _HEADING_LINES >= b:
            raise _Cut
        raise _BadLine(pc.no(i_title), "section title without a rule of dashes under its "
                       "column headings within the next lines")
    # the headings: the lines above the rule, from the last blank or '->' line on (the words
    # beside the title count when there is none: Top 5)
    reset = pc.last("reset", i_title + 1, rule)
    if reset is None:
        first = pc.line(i_title)
        header = [(" " * title_end + first[title_end:]).replace("~", " ")]
        header += [pc.line(k).replace("~", " ") for k in range(i_title + 1, rule)]
    else:
        header = [pc.line(k).replace("~", " ") for k in range(reset + 1, rule)]
    names = frozenset(text_names)
    cols = _columns_of(tuple(header), pc.line(rule), names)
    cols2: list[_Col] | None = None
    i = rule + 1
    if two_level_allowed:
        # Statspack/AWR file and tablespace I/O: "Tablespace  Filename" over one rule, the
        # numbers (NEWLINE columns) under a second one, each record printed on two lines.
        hi = min(b, i + 5)
        rule2, blank = pc.first("rule", i, hi), pc.first("blank", i, hi)
        if rule2 is not None and (blank is None or rule2 < blank):
            cols2 = _columns_of(tuple(pc.line(k).replace("~", " ") for k in range(i, rule2)),
                                pc.line(rule2), names)
            i = rule2 + 1
    term = pc.first("term", i, b)
    end = b if term is None else term
    spec = _Spec(order=0, rep=0, seq=0, kind="", section="", title=title, title_line=pc.no(i_title),
                 cols=cols, cols2=cols2, first=[], second=[], more={})
    if cols2 is None:
        # one line a record, to the first blank line after one
        top = pc.first("text", i, end)
        if top is not None:
            blank = pc.first("blank", top, end)
            if blank is not None:
                spec.first = list(range(top, blank))
                return spec, blank + 1
            spec.first = list(range(top, end))
        return _cut(out, r, seq, spec) if term is None else (spec, term)
    # two lines a record: each line's class, then the records as _RECORD_RE finds them
    code = pc.code[i:end].copy()
    if len(cols) > 1:
        code[(code == _X) & (pc.lead[i:end] >= cols[-1].start)] = _C
    code[code == _X] = _T
    p_last = cols[-1].start
    letters = code.tobytes().decode("ascii")
    for m in _RECORD_RE.finditer(letters):
        found = m.group()
        k0 = i + m.start()
        if found == "B":
            continue
        if found == "N":
            out.bad(r, seq, pc.no(k0), f"{title}: numbers without the tablespace/file line "
                    "before them")
        elif len(found) > 1 and found[-1] in "TN":
            conts = [k0 + d for d, letter in enumerate(found) if letter == "C" and d > 0]
            if conts:
                spec.more[len(spec.first)] = "".join(pc.line(k)[p_last:].strip()
                                                     for k in conts)
            spec.first.append(k0)
            spec.second.append(i + m.end() - 1)
        elif term is not None:  # a text line whose numbers never came
            out.bad(r, seq, pc.no(k0), f"{title}: no line of numbers under this one")
    return _cut(out, r, seq, spec) if term is None else (spec, term)


def _cut(out: _Out, r: int, seq: int, spec: _Spec) -> tuple[None, int]:
    """A table the end of the file cut off: dropped, with a note."""
    out.note(r, seq, f"'{spec.title}' (line {spec.title_line}) is cut off by the end of the "
             f"file; its {len(spec.first)} rows were dropped so that only complete sections "
             "are kept")
    return None, out.pc.n


#: lines after a section title within which its rule of dashes must come
_HEADING_LINES = 25


_MONTHS = {name: k for k, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_TIME_RE = re.compile(r"(\d{1,2})-([A-Za-z]{3})-(\d{2}|\d{4}) (\d{1,2}):(\d{2}):(\d{2})")


@functools.lru_cache(maxsize=1024)  # (a report's end is the next one's begin)
def _oracle_time(text: str) -> datetime:
    """``21-Aug-07 10:01:03`` (or a four-digit year), as ``strptime`` reads it with
    ``%d-%b-%y %H:%M:%S`` or ``%Y`` (two-digit years 69-99 are 19xx, 00-68 20xx; month
    names in any case) -- without strptime, which took 8 % of the reading of many small
    reports (0.22 s of 2.68 s under cProfile, a 10 MB slice of 2,438 AWR reports, every
    report two new times). ValueError for anything else or a date that does not exist."""
    m = _TIME_RE.fullmatch(text)
    month = _MONTHS.get(m.group(2).lower()) if m else None
    if m is None or month is None:
        raise ValueError(text)
    day, year, hour, minute, second = (int(m.group(g)) for g in (1, 3, 4, 5, 6))
    if len(m.group(3)) == 2:
        year += 1900 if year >= 69 else 2000
    try:
        return datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise ValueError(text) from None


@dataclass
class _Ctx:
    source: _Sink
    fmt: str
    ts: datetime
    interval_s: Decimal
    host: str
    rep: _Report
    wait_rows: list[dict[str, Any]] = field(default_factory=list)
    file_rows: list[dict[str, Any]] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)
    seen: set[tuple[str, str]] = field(default_factory=set)

    # ---- wait events ----------------------------------------------------------------------
    def add_waits(self, table: _Table, section: str) -> None:
        mapping = _wait_mapping(table.cols)
        fields = {m[0] for m in mapping if m is not None}
        if "event" not in fields or not fields & {"waits", "time_waited_s"}:
            raise _BadLine(table.title_line, f"{table.title}: column headings not recognised "
                           f"({', '.join(c.name for c in table.cols)})")
        for line_no, cells, _, _ in table.rows:
            try:
                self.wait_rows.append(self._wait_row(table, section, mapping, line_no, cells))
            except _BadLine as exc:
                self.source.bad_line(exc.line_no, exc.reason)

    def _wait_row(self, table: _Table, section: str,
                  mapping: list[tuple[str, Decimal | str] | None], line_no: int,
                  cells: list[str]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "source": self.fmt, "host": self.host, "db_name": self.rep.db_name,
            "instance": self.rep.instance, "ts": self.ts, "interval_s": float(self.interval_s),
            "section": section, "wait_class": None,
        }
        for spec, cell, col in zip(mapping, cells, table.cols, strict=True):
            if spec is None:
                continue
            name, how = spec
            if how == "text":
                row[name] = cell or None
            elif how == "unit":
                row[name] = _f(_with_unit_ms(cell, line_no, col.name))
            elif isinstance(how, Decimal):
                value = _number(cell, line_no, col.name, self.notes)
                row[name] = _f(None if value is None else value * how)
        if not row.get("event"):
            raise _BadLine(line_no, f"{table.title}: row without an event name")
        return row

    # ---- file and tablespace I/O -------------------------------------------------------------
    def add_files(self, table: _Table, kind: str) -> None:
        cols = table.cols + (table.cols2 or [])
        keys, stats, refusal = _file_layout(cols, kind)
        if refusal is not None:
            raise _BadLine(table.title_line, f"{table.title}: {refusal}")
        if self.rep.block_bytes is None:
            self.notes.add("no 'Std Block Size' / 'db_block_size' in the report: Av Blks/Rd "
                           "converted with 8 KB blocks")
        last_ts: str | None = None
        for line1, cells1, line2, cells2 in table.rows:
            try:
                row = self._file_row(table, kind, cols, keys, stats, line1, cells1, line2,
                                     cells2, last_ts)
            except _BadLine as exc:
                self.source.bad_line(exc.line_no, exc.reason)
                continue
            last_ts = row["parent"] if kind == "file" else row["device"]
            self.file_rows.append(row)

    def _file_row(self, table: _Table, kind: str, cols: list[_Col], keys: list[str],
                  stats: dict[str, int], line1: int, cells1: list[str], line2: int | None,
                  cells2: list[str] | None, last_ts: str | None) -> dict[str, Any]:
        cells = cells1 + (cells2 or [])
        n1 = len(cells1)
        tsname = cells[keys.index("tablespace")] or last_ts
        if not tsname:
            raise _BadLine(line1, f"{table.title}: no tablespace name")
        device = cells[keys.index("filename")] if kind == "file" else tsname
        if not device:
            raise _BadLine(line1, f"{table.title}: no file name")
        dev_kind = "datafile" if kind == "file" else "tablespace"

        def get(stat: str) -> Decimal | None:
            idx = stats.get(stat)
            if idx is None:
                return None
            where = line1 if idx < n1 or line2 is None else line2
            return _number(cells[idx], where, cols[idx].name, self.notes)

        reads, writes = get("reads"), get("writes")
        r_iops, w_iops = get("reads_ps"), get("writes_ps")
        if "reads_ps" not in stats and reads is not None:
            r_iops = reads / self.interval_s
            self.notes.add(f"{table.title}: no Reads/s column (8i); r_iops/w_iops are "
                           "Reads/Writes divided by the snapshot interval")
        if "writes_ps" not in stats and writes is not None:
            w_iops = writes / self.interval_s
        rd_ms, blks = get("rd_ms"), get("blks_rd")
        # Oracle leaves Av Rd(ms) / Av Blks/Rd blank when nothing was read; SampleFrame's
        # convention for "no request completed" is 0.0, as iostat prints
        no_reads = reads == 0 or (reads is None and r_iops == 0)
        if rd_ms is None and no_reads and "rd_ms" in stats:
            rd_ms = Decimal(0)
        block = self.rep.block_bytes or DEFAULT_BLOCK_BYTES
        areq = None if blks is None else blks * block / 1024
        if areq is None and no_reads and "blks_rd" in stats:
            areq = Decimal(0)
        if (device, dev_kind) in self.seen:
            raise _BadLine(line1, f"{table.title}: {device} listed twice")
        self.seen.add((device, dev_kind))
        return {
            "source": self.fmt, "host": self.host, "device": device, "device_kind": dev_kind,
            "parent": tsname if kind == "file" else None, "ts": self.ts,
            "interval_s": float(self.interval_s), "r_iops": _f(r_iops), "w_iops": _f(w_iops),
            "r_await_ms": _f(rd_ms), "r_areq_kB": _f(areq),
        }


# ---------------------------------------------------------------------------------------------
# cells and values of a piece's tables, one layout at a time
# ---------------------------------------------------------------------------------------------
def _cell_frame(pc: _Piece, ks: list[int], cols: list[_Col], prefix: str) -> pl.DataFrame:
    """The cells of lines ``ks`` under ``cols`` (columns ``{prefix}0``, ``{prefix}1``, ...),
    as :func:`_cells` gives them: a text column is its slice up to the next column, a number
    column the words in its rule's span. That holds for a line with nothing but spaces
    outside the spans (what SQL*Plus prints); the other lines (a value wider than its
    column, a name running past its rule) are cut by :func:`_cells` itself."""
    col = pl.col("l")
    exprs: list[pl.Expr] = []
    clean = pl.lit(True)
    gap_from = 0
    for j, c in enumerate(cols):
        if c.start > gap_from:
            clean = clean & col.str.slice(gap_from, c.start - gap_from).str.contains(r"^\s*$")
        gap_from = c.end + 1
        if c.text:
            length = cols[j + 1].start - c.start if j + 1 < len(cols) else None
            cell = col.str.slice(c.start, length).str.strip_chars()
        else:
            cell = (col.str.slice(c.start, c.end - c.start + 1).str.strip_chars()
                    .str.replace_all(r"\s+", " "))
        exprs.append(cell.alias(f"{prefix}{j}"))
    if not cols[-1].text:
        clean = clean & col.str.slice(gap_from).str.contains(r"^\s*$")
    frame = pl.DataFrame([pc.series.gather(ks)]).select(*exprs, clean.alias("_clean"))
    odd = np.flatnonzero(~frame["_clean"].to_numpy())
    frame = frame.drop("_clean")
    if odd.size:
        fixed = [_cells(pc.line(ks[j]), cols) for j in odd]
        frame = frame.with_columns(
            frame[f"{prefix}{j}"].clone().scatter(odd, [cells[j] for cells in fixed])
            for j in range(len(cols)))
    return frame


_POWER = {"K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "ns": -6, "us": -3, "ms": 0, "s": 3,
          "sec": 3}


def _scaled(digits: pl.Expr, power: pl.Expr | int) -> pl.Expr:
    """A printed decimal (commas dropped) times 10**power, as the float nearest to it: the
    power goes into the text as an exponent, so the value is rounded once, as
    ``float(Decimal(text) * 10**power)`` rounds it (multiplying floats would round twice)."""
    digits = digits.str.replace_all(",", "", literal=True)
    if isinstance(power, int) and power == 0:
        return digits.cast(pl.Float64, strict=False)
    text = pl.concat_str(digits, pl.lit("e"), pl.lit(power).cast(pl.String)
                         if isinstance(power, int) else power.cast(pl.String))
    return text.cast(pl.Float64, strict=False)


def _number_expr(cell: pl.Expr, power: int) -> tuple[pl.Expr, pl.Expr]:
    """:func:`_number` times 10**power: the value (null for a blank cell) and whether the
    row must be read by :func:`_number` itself (not a number, a '#' run with its note, an
    exponent or digits polars does not read)."""
    plain = cell.str.contains(r"^[\d,]*\.?\d+$")
    suffix = cell.str.extract(r"^[\d,]*\.?\d+([KMGTP])$", 1)
    digits = cell.str.extract(r"^([\d,]*\.?\d+)", 1)
    value = (pl.when(plain).then(_scaled(digits, power))
             .when(suffix.is_not_null())
             .then(_scaled(digits, suffix.replace_strict(_POWER, default=0,
                                                          return_dtype=pl.Int64) + power)))
    odd = (cell != "") & value.is_null()
    return value, odd


def _unit_expr(cell: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """:func:`_with_unit_ms` (``7.38ms``, ``540us``, ``1.02 s`` -> ms) and whether the row
    must be read by it (not a time with its unit)."""
    parts = cell.str.extract_groups(r"^([\d,]*\.?\d+)\s*(ns|us|ms|s|sec)$")
    power = parts.struct.field("2").replace_strict(_POWER, default=0, return_dtype=pl.Int64)
    value = pl.when(parts.struct.field("1").is_not_null()).then(
        _scaled(parts.struct.field("1"), power))
    return value, (cell != "") & value.is_null()


def _groups(specs: list[_Spec], kinds: tuple[str, ...]) -> list[list[_Spec]]:
    """The tables of ``kinds`` by layout (their column lists are shared, see _columns_of)."""
    out: dict[tuple[str, int, int], list[_Spec]] = {}
    for s in specs:
        if s.kind in kinds:
            kind = "waits" if s.kind == "top" else s.kind
            out.setdefault((kind, id(s.cols), id(s.cols2)), []).append(s)
    return list(out.values())


def _tids(specs: list[_Spec]) -> np.ndarray:
    return np.repeat(np.arange(len(specs)), [len(s.first) for s in specs])


def _first_cells(out: _Out, specs: list[_Spec], prefix: str) -> pl.DataFrame:
    """The cells of the records' first lines, a long file name's continuation added."""
    cols = specs[0].cols
    frame = _cell_frame(out.pc, [k for s in specs for k in s.first], cols, prefix)
    rows: list[int] = []
    more: list[str] = []
    offset = 0
    for s in specs:
        for pos, text in s.more.items():
            rows.append(offset + pos)
            more.append(text)
        offset += len(s.first)
    if rows:
        last = f"{prefix}{len(cols) - 1}"
        values = frame[last].gather(rows).to_list()
        frame = frame.with_columns(frame[last].clone().scatter(
            rows, [v + m for v, m in zip(values, more, strict=True)]))
    return frame


def _to_fallback(out: _Out, specs: list[_Spec], cells: pl.DataFrame, tids: np.ndarray,
                 bad: set[int], n1: int) -> None:
    """Hand the tables ``bad`` (positions in ``specs``) to :func:`_fallback` with their cells."""
    starts = np.searchsorted(tids, np.arange(len(specs)))
    for t in sorted(bad):
        s = specs[t]
        rows = [list(r) for r in cells.slice(int(starts[t]), len(s.first)).iter_rows()]
        first = [r[:n1] for r in rows]
        second = [r[n1:] for r in rows] if s.cols2 is not None else None
        out.fallback.append((s, first, second))


def _meta_frame(out: _Out, specs: list[_Spec], tids: np.ndarray) -> pl.DataFrame:
    """Per row: its report's host, names, time and interval, and the table's place."""
    metas = [out.meta[s.rep] for s in specs]
    table = pl.DataFrame({
        "_order": [s.order for s in specs],
        "host": [m.host for m in metas],
        "db_name": [m.rep.db_name for m in metas],
        "instance": [m.rep.instance for m in metas],
        "ts": pl.Series([m.ts for m in metas], dtype=TS_DTYPE),
        "interval_s": [float(m.interval_s) for m in metas],
        "section": [s.section for s in specs],
    }, schema_overrides={"db_name": pl.String, "instance": pl.String})
    # each column gathered as a Series of its own: DataFrame row indexing may give a column
    # of one repeated value as a polars scalar column, and polars divides by a scalar as it
    # multiplies by its reciprocal (20421 / 61 came out as 334.77049180327873, one unit in
    # the last place above 334.7704918032787)
    index = pl.Series(tids)
    frame = pl.DataFrame([table[name].gather(index) for name in table.columns])
    return frame.with_columns(_pos=pl.int_range(pl.len()).over("_order"))


def _wait_mapping(cols: list[_Col]) -> list[tuple[str, Decimal | str] | None]:
    """What each column of a wait table holds: (WaitEventFrame column, how to read it)."""
    mapping: list[tuple[str, Decimal | str] | None] = []
    for col in cols:
        key = _norm(col.name)
        if key.endswith("event"):
            mapping.append(("event", "text"))
        elif key == "waitclass":
            mapping.append(("wait_class", "text"))
        else:
            mapping.append(_WAIT_COLUMNS.get(key))
    return mapping


def _wait_frame(out: _Out) -> pl.DataFrame | None:
    """The wait events of the piece's top-event and wait tables, a layout at a time
    (_Ctx.add_waits row by row gives the same; tables it must read are set aside)."""
    frames: list[pl.DataFrame] = []
    for specs in _groups(out.specs, ("top", "waits")):
        cols = specs[0].cols
        mapping = _wait_mapping(cols)
        fields = {m[0] for m in mapping if m is not None}
        if "event" not in fields or not fields & {"waits", "time_waited_s"}:
            for s in specs:
                out.events.bad((out.meta[s.rep].r, s.seq, 1), s.title_line,
                               f"{s.title}: column headings not recognised "
                               f"({', '.join(c.name for c in cols)})")
            continue
        cells = _first_cells(out, specs, "c")
        tids = _tids(specs)
        values: dict[str, pl.Expr] = {}
        odd: list[pl.Expr] = []
        for j, spec in enumerate(mapping):
            if spec is None:
                continue
            name, how = spec
            cell = pl.col(f"c{j}")
            if how == "text":
                values[name] = pl.when(cell != "").then(cell)
                continue
            if how == "unit":
                value, bad = _unit_expr(cell)
            elif isinstance(how, Decimal):  # (a power of ten: 1, or 0.01 for centiseconds)
                value, bad = _number_expr(cell, int(how.adjusted()))
            else:  # pragma: no cover - _WAIT_COLUMNS holds no other kind
                continue
            values[name] = value
            odd.append(bad)
        odd.append(values["event"].is_null())
        conv = cells.select(**values, _odd=pl.any_horizontal(odd))
        flagged = np.flatnonzero(conv["_odd"].to_numpy())
        bad_t = set(tids[flagged].tolist())
        if bad_t:
            _to_fallback(out, specs, cells, tids, bad_t, len(cols))
        meta = _meta_frame(out, specs, tids)
        rows = pl.concat([meta, conv.drop("_odd")], how="horizontal")
        if bad_t:
            rows = rows.filter(~pl.Series(np.isin(tids, list(bad_t))))
        frames.append(rows.select(
            "_order", "_pos",
            *[(pl.lit(out.fmt) if name == "source" else
               pl.col(name) if name in rows.columns else pl.lit(None)).cast(dtype).alias(name)
              for name, dtype in WAIT_SCHEMA.items()]))
    return pl.concat(frames) if frames else None


_FILE_SCHEMA = {c: SCHEMA[c] for c in SCHEMA if c in {
    "source", "host", "device", "device_kind", "parent", "ts", "interval_s", "r_iops",
    "w_iops", "r_await_ms", "r_areq_kB"}}


def _power_of_two(value: Fraction) -> bool:
    n, d = value.numerator, value.denominator
    return n > 0 and n & (n - 1) == 0 and d & (d - 1) == 0


def _file_frame(out: _Out) -> pl.DataFrame | None:
    """The datafile and tablespace rows of the piece's file tables, a layout at a time, as
    _Ctx.add_files makes them row by row; a table with anything it would refuse or note
    (a value that is not a number, a name missing, a file listed twice) is set aside for
    it."""
    frames: list[tuple[list[_Spec], pl.DataFrame, pl.DataFrame, np.ndarray,
                       dict[str, int]]] = []
    for specs in _groups(out.specs, ("file", "tablespace")):
        s0 = specs[0]
        kind = s0.kind
        keys, stats, refusal = _file_layout(s0.cols + (s0.cols2 or []), kind)
        if refusal is not None:
            for s in specs:
                out.events.bad((out.meta[s.rep].r, s.seq, 1), s.title_line,
                               f"{s.title}: {refusal}")
            continue
        for s in specs:
            if out.meta[s.rep].rep.block_bytes is None:
                out.notes[s.rep].add("no 'Std Block Size' / 'db_block_size' in the report: "
                                     "Av Blks/Rd converted with 8 KB blocks")
        n1 = len(s0.cols)
        cells = _first_cells(out, specs, "c")
        if s0.cols2 is not None:
            second = _cell_frame(out.pc, [k for s in specs for k in s.second], s0.cols2, "c")
            cells = pl.concat([cells, second.rename(
                {f"c{j}": f"c{j + n1}" for j in range(len(s0.cols2))})], how="horizontal")
        tids = _tids(specs)
        meta = _meta_frame(out, specs, tids)
        metas = [out.meta[s.rep] for s in specs]
        factors = [Fraction(m.rep.block_bytes or DEFAULT_BLOCK_BYTES, 1024) for m in metas]
        # Decimal arithmetic gives what float arithmetic gives only when the interval is whole
        # seconds (8i: Reads / interval) and the block a power of two (Av Blks/Rd x block)
        exact = pl.Series([m.interval_s == int(m.interval_s) for m in metas])[tids]
        per_block = pl.Series([float(f) if _power_of_two(f) else None for f in factors],
                              dtype=pl.Float64)[tids]
        frame = pl.concat([meta, cells], how="horizontal").with_columns(
            _tid=pl.Series(tids), _exact=exact, _per_block=per_block)
        own = pl.col(f"c{keys.index('tablespace')}")
        tsname = pl.when(own != "").then(own).forward_fill().over("_tid")
        device = pl.col(f"c{keys.index('filename')}") if kind == "file" else tsname
        odd: list[pl.Expr] = [tsname.is_null(), device.is_null() | (device == "")]
        vals: dict[str, pl.Expr] = {}
        for stat, idx in stats.items():
            vals[stat], bad = _number_expr(pl.col(f"c{idx}"), 0)
            odd.append(bad)
        interval = pl.col("interval_s")
        zero = pl.lit(0.0)
        null = pl.lit(None, dtype=pl.Float64)
        reads, writes = vals.get("reads", null), vals.get("writes", null)
        r_iops, w_iops = vals.get("reads_ps", null), vals.get("writes_ps", null)
        if "reads_ps" not in stats and "reads" in stats:
            r_iops = reads / interval
            odd.append(reads.is_not_null() & (~pl.col("_exact") | pl.col(
                f"c{stats['reads']}").str.contains(".", literal=True)))
        if "writes_ps" not in stats and "writes" in stats:
            w_iops = writes / interval
            odd.append(writes.is_not_null() & (~pl.col("_exact") | pl.col(
                f"c{stats['writes']}").str.contains(".", literal=True)))
        no_reads = ((reads == 0) | (reads.is_null() & (r_iops == 0))).fill_null(False)
        rd_ms = vals.get("rd_ms", null)
        if "rd_ms" in stats:
            rd_ms = pl.when(rd_ms.is_null() & no_reads).then(zero).otherwise(rd_ms)
        areq = null
        if "blks_rd" in stats:
            areq = vals["blks_rd"] * pl.col("_per_block")
            odd.append(vals["blks_rd"].is_not_null() & pl.col("_per_block").is_null())
            areq = pl.when(areq.is_null() & no_reads).then(zero).otherwise(areq)
        rows = frame.select(
            "_order", "_pos", "_tid", "host", "ts", "interval_s",
            source=pl.lit(out.fmt), device=device,
            device_kind=pl.lit("datafile" if kind == "file" else "tablespace"),
            parent=tsname if kind == "file" else pl.lit(None, dtype=pl.String),
            r_iops=r_iops, w_iops=w_iops, r_await_ms=rd_ms, r_areq_kB=areq,
            _odd=pl.any_horizontal(odd), _rep=pl.Series([s.rep for s in specs])[tids])
        frames.append((specs, cells, rows, tids, stats))
    if not frames:
        return None
    # A report's tables of one kind share the names they list (_Ctx.seen): a file listed
    # twice, or a table set aside, sets aside all of them, so that _Ctx reads them in order.
    everything = pl.concat([rows.select("_rep", "device_kind", "device", "_odd",
                                        _g=pl.lit(g), _tid="_tid")
                            for g, (_, _, rows, _, _) in enumerate(frames)])
    twice = everything.filter(pl.col("device").is_duplicated().over("_rep", "device_kind"))
    aside = (pl.concat([twice, everything.filter("_odd")])
             .select("_rep", "device_kind").unique())
    aside_rows = everything.join(aside, on=["_rep", "device_kind"], how="semi")
    good: list[pl.DataFrame] = []
    for g, (specs, cells, rows, tids, stats) in enumerate(frames):
        bad_t = set(aside_rows.filter(pl.col("_g") == g)["_tid"].to_list())
        kept = rows
        if bad_t:
            _to_fallback(out, specs, cells, tids, bad_t, len(specs[0].cols))
            kept = rows.filter(~pl.col("_tid").is_in(list(bad_t)))
        if "reads_ps" not in stats and "reads" in stats:
            for t in kept.filter(pl.col("r_iops").is_not_null())["_tid"].unique().to_list():
                out.notes[specs[t].rep].add(
                    f"{specs[t].title}: no Reads/s column (8i); r_iops/w_iops are "
                    "Reads/Writes divided by the snapshot interval")
        good.append(kept.select("_order", "_pos", *[pl.col(c).cast(t)
                                                    for c, t in _FILE_SCHEMA.items()]))
    return pl.concat(good)


def _file_layout(cols: list[_Col], kind: str) -> tuple[list[str], dict[str, int], str | None]:
    """A file or tablespace table's headings (lower case, no spaces), the statistic each
    column holds (_FILE_COLUMNS -> column index), and why the table cannot be read, or None."""
    keys = [_norm(c.name) for c in cols]
    stats = {_FILE_COLUMNS[k]: idx for idx, k in enumerate(keys) if k in _FILE_COLUMNS}
    if "tablespace" not in keys or (kind == "file" and "filename" not in keys):
        return keys, stats, f"no Tablespace{' / Filename' if kind == 'file' else ''} column"
    if "reads_ps" not in stats and "reads" not in stats:
        return keys, stats, "no Reads or Av Reads/s column"
    return keys, stats, None


def _fallback(out: _Out) -> None:
    """The tables set aside, read row by row by :class:`_Ctx` (which names each refused
    value's line), in document order, one context a report."""
    ctxs: dict[int, _Ctx] = {}
    for spec, first, second in sorted(out.fallback, key=lambda f: f[0].order):
        meta = out.meta[spec.rep]
        sink = _Sink(out.events, (meta.r, spec.seq, 1))
        ctx = ctxs.get(spec.rep)
        if ctx is None:
            ctx = ctxs[spec.rep] = _Ctx(source=sink, fmt=out.fmt, ts=meta.ts,
                                        interval_s=meta.interval_s, host=meta.host,
                                        rep=meta.rep)
        ctx.source = sink
        pc = out.pc
        table = _Table(spec.title, spec.title_line, spec.cols, spec.cols2, complete=True)
        for j, k in enumerate(spec.first):
            if spec.cols2 is None or second is None:
                table.rows.append((pc.no(k), first[j], None, None))
            else:
                table.rows.append((pc.no(k), first[j], pc.no(spec.second[j]), second[j]))
        n_waits, n_files = len(ctx.wait_rows), len(ctx.file_rows)
        try:
            if spec.kind in ("top", "waits"):
                ctx.add_waits(table, spec.section)
            else:
                ctx.add_files(table, spec.kind)
        except _BadLine as exc:  # pragma: no cover - the headings were checked already
            sink.bad_line(exc.line_no, exc.reason)
        out.fallback_waits += [(spec.order, p, row)
                               for p, row in enumerate(ctx.wait_rows[n_waits:])]
        out.fallback_files += [(spec.order, p, row)
                               for p, row in enumerate(ctx.file_rows[n_files:])]
        out.notes[spec.rep] |= ctx.notes
        ctx.notes = set()
    for r_meta, notes in out.notes.items():
        for note in sorted(notes):
            out.events.note((out.meta[r_meta].r, _LAST, 0), note)


def _with_rows(frame: pl.DataFrame | None, rows: list[tuple[int, int, dict[str, Any]]],
               schema: dict[str, pl.DataType]) -> pl.DataFrame | None:
    """``frame`` and the rows made one at a time, in document order."""
    parts = [] if frame is None else [frame]
    if rows:
        parts.append(pl.DataFrame(
            [{"_order": o, "_pos": p, **{c: row.get(c) for c in schema}} for o, p, row in rows],
            schema={"_order": pl.Int64, "_pos": pl.Int64, **schema}))
    if not parts:
        return None
    both = pl.concat([p.with_columns(pl.col("_order", "_pos").cast(pl.Int64)) for p in parts])
    return both.sort("_order", "_pos").drop("_order", "_pos")
