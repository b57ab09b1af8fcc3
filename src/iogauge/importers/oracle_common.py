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
reports become one SampleFrame (a frame a report made a file of small reports slow): 100 MB
of AWR reports (``benchmarks/import_memory.py``: 24,373 copies of the 19c excerpt) import to
Parquet at 0.22 GB peak in 31-33 s, where reading the whole file took 2.89 GB in 237 s (same
rows and wait events).
A file cut off inside a section keeps the sections that were complete (a table is complete
when its closing rule, the next title or -- for wait lists -- the blank line after it was
read) and drops the cut one, with a note.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of
from iogauge.model.sampleframe import SampleFrame
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
@dataclass
class _Col:
    name: str  # heading words joined by one space
    start: int
    end: int  # inclusive
    text: bool = False


def _is_rule(line: str) -> bool:
    """A column rule: dashes (or Statspack's ``~``) from column 1, runs split by spaces."""
    return bool(line) and line[0] in "-~" and "-" in line and set(line.rstrip()) <= {"-", "~", " "}


def _is_footer(line: str) -> bool:
    """The indented rule SQL*Plus prints after each section (repfooter)."""
    s = line.strip()
    return bool(s) and not line[:1].strip() and len(s) >= 20 and set(s) == {"-"}


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
    cols = [_Col(" ".join(w), a, b) for w, (a, b) in zip(words, spans, strict=True)]
    for c in cols:
        c.text = _norm(c.name) in text_names or _norm(c.name).endswith(("event", "tablespace"))
    return cols


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


def _header_block(lines: list[tuple[int, str]], i_title: int, title_end: int,
                  limit: int) -> tuple[list[str], int]:
    """Heading lines above the first rule after the title, and the rule's index."""
    header: list[str] = []
    first = lines[i_title][1]
    rest = " " * title_end + first[title_end:]  # words beside the title are headings (Top 5)
    header.append(rest.replace("~", " "))
    for j in range(i_title + 1, min(len(lines), i_title + limit)):
        line = lines[j][1]
        if _is_rule(line):
            return header, j
        cleaned = line.replace("~", " ")
        if not cleaned.strip() or line.lstrip().startswith("->"):
            header = []
            continue
        header.append(cleaned)
    if i_title + limit >= len(lines):
        raise _Cut
    raise _BadLine(lines[i_title][0], "section title without a rule of dashes under its "
                   "column headings within the next lines")


def _read_table(lines: list[tuple[int, str]], i_title: int, title: str, title_end: int,
                text_names: set[str], two_level_allowed: bool,
                bad: Callable[[int | None, str], None]) -> tuple[_Table, int]:
    header, i_rule = _header_block(lines, i_title, title_end, 25)
    cols = _columns(header, lines[i_rule][1], text_names)
    cols2: list[_Col] | None = None
    i = i_rule + 1
    if two_level_allowed:
        # Statspack/AWR file and tablespace I/O: "Tablespace  Filename" over one rule, the
        # numbers (NEWLINE columns) under a second one, each record printed on two lines.
        for j in range(i, min(len(lines), i + 5)):
            line = lines[j][1]
            if not line.strip():
                break
            if _is_rule(line):
                cols2 = _columns([x.replace("~", " ") for _, x in lines[i:j]], line, text_names)
                i = j + 1
                break
    table = _Table(title, lines[i_title][0], cols, cols2)
    pending: tuple[int, list[str]] | None = None
    while i < len(lines):
        line_no, line = lines[i]
        if _is_footer(line) or line.startswith("End of Report") or _is_title(line):
            if pending is not None:
                bad(pending[0], f"{title}: no line of numbers under this one")
            table.complete = True
            return table, i
        if not line.strip():
            if cols2 is None and table.rows:
                table.complete = True
                return table, i + 1
            i += 1
            continue
        if cols2 is None:
            table.rows.append((line_no, _cells(line, cols), None, None))
        elif pending is None:
            if _numeric_line(line):
                bad(line_no, f"{title}: numbers without the tablespace/file line before them")
            else:
                pending = (line_no, _cells(line, cols))
        elif (len(cols) > 1 and not _numeric_line(line)
              and not line[:cols[-1].start].strip()):
            pending[1][-1] += line[cols[-1].start:].strip()  # a file name continued
        else:
            # the numbers of the pending record; a value that is not a number is refused
            # with its line when the record is turned into a row
            table.rows.append((pending[0], pending[1], line_no, _cells(line, cols2)))
            pending = None
        i += 1
    table.complete = False  # end of file inside the table
    return table, i


def _numeric_line(line: str) -> bool:
    toks = line.split()
    return bool(toks) and all(_NUM_RE.fullmatch(t) or _SUFFIXED_RE.fullmatch(t)
                              or set(t) == {"#"} for t in toks)


def _is_title(line: str) -> bool:
    return bool(_TOP_RE.match(line) or _WAITS_RE.match(line) or _FILE_RE.match(line)
                or _TS_RE.match(line) or _ANY_TITLE_RE.match(line))


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
    lines: list[tuple[int, str]]
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
    text = decode(data)
    # split on \n only (str.splitlines() also breaks at form feeds and would shift line
    # numbers); a form feed at a page start is dropped from the line
    lines = [(i, raw.rstrip("\r").lstrip("\x0c"))
             for i, raw in enumerate(text.split("\n"), line_base + 1)]
    del text
    if lines and lines[-1][1] == "":
        lines.pop()
    if final and data and not data.endswith(b"\n") and lines:
        n, _ = lines.pop()  # a partial last line: the section holding it counts as cut
        source.note(f"line {n} is cut off (no line end); it was not read")
    starts = [k for k, (_, line) in enumerate(lines) if start_re.match(line)]
    if not starts:
        source.bad_line(None, f"no '{title}' line: not a report of this kind")
        return None
    if first:
        before = next(((n, line) for n, line in lines[:starts[0]] if line.strip()), None)
        if before is not None:
            source.bad_line(before[0], "text before the first report title")
    file_rows: list[dict[str, Any]] = []
    wait_rows: list[dict[str, Any]] = []
    bounds = [*starts, len(lines)]
    for a, b in itertools.pairwise(bounds):
        report = _Report(start_line=lines[a][0], lines=lines[a:b])
        _parse_one(report, source, fmt, file_rows, wait_rows, last=final and b == len(lines))
    if wait_rows:
        source.waits.append(WaitEventFrame(pl.DataFrame(wait_rows, schema=WAIT_SCHEMA)))
    return SampleFrame.from_records(file_rows) if file_rows else None


def _parse_one(rep: _Report, source: Source, fmt: str, file_rows: list[dict[str, Any]],
               wait_rows: list[dict[str, Any]], *, last: bool) -> None:
    """Read one report: its file rows and wait events are added to the lists."""
    lines = rep.lines
    _read_header(rep)
    if rep.end is None or (rep.begin is None and rep.elapsed_min is None):
        reached_sections = any(_TOP_RE.match(x) or _WAITS_RE.match(x) or _FILE_RE.match(x)
                               for _, x in lines)
        if last and not reached_sections:
            source.note(f"the report from line {rep.start_line} is cut off before its snapshot "
                        "times; nothing of it was read")
        else:
            source.bad_line(rep.start_line, "report without its Begin Snap / End Snap times")
        return
    interval_s: Decimal
    if rep.begin is not None and rep.end > rep.begin:
        interval_s = Decimal((rep.end - rep.begin).total_seconds())
    elif rep.elapsed_min is not None and rep.elapsed_min > 0:
        interval_s = rep.elapsed_min * 60
    else:
        source.bad_line(rep.start_line, "End Snap is not after Begin Snap")
        return
    tz = source.tz
    if tz is None:
        source.note("Statspack/AWR snapshot times carry no zone; assumed UTC (use --tz to give "
                    "the database host's zone)")
        ts = rep.end.replace(tzinfo=UTC)
    else:
        ts = rep.end.replace(tzinfo=tz).astimezone(UTC)
    host = rep.host or source.host or Path(source.path).stem
    ctx = _Ctx(source=source, fmt=fmt, ts=ts, interval_s=interval_s, host=host, rep=rep)
    i = 0
    while i < len(lines):
        line = lines[i][1]
        m_top, m_w = _TOP_RE.match(line), _WAITS_RE.match(line)
        m_f, m_t = _FILE_RE.match(line), _TS_RE.match(line)
        m = m_top or m_w or m_f or m_t
        if m is None:
            i += 1
            continue
        kind = "top" if m_top else "waits" if m_w else "file" if m_f else "tablespace"
        text_names = _WAIT_TEXT if kind in ("top", "waits") else _FILE_TEXT
        try:
            table, i = _read_table(lines, i, m.group(1), m.end(1) if kind == "top" else len(line),
                                   text_names, two_level_allowed=kind in ("file", "tablespace"),
                                   bad=source.bad_line)
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
            i += 1
            continue
        except _Cut:
            source.note(f"'{m.group(1)}' (line {lines[i][0]}) is cut off by the end of the file "
                        "before its column headings; nothing of it was read")
            break
        if not table.complete:
            source.note(f"'{table.title}' (line {table.title_line}) is cut off by the end of the "
                        f"file; its {len(table.rows)} rows were dropped so that only complete "
                        "sections are kept")
            continue
        try:
            if kind in ("top", "waits"):
                ctx.add_waits(table, "top timed events" if kind == "top" else m.group(1).lower())
            else:
                ctx.add_files(table, kind)
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
    for note in sorted(ctx.notes):
        source.note(note)
    wait_rows += ctx.wait_rows
    file_rows += ctx.file_rows


def _read_header(rep: _Report) -> None:
    """Snapshot times, names and block size, from the lines before the first section."""
    lines = rep.lines
    for k, (_, line) in enumerate(lines):
        if rep.end is None or rep.block_bytes is None:
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
        if _is_rule(line) and k > 0 and k + 1 < len(lines):
            names = _columns([lines[k - 1][1].replace("~", " ")], line, set())
            values = _cells(lines[k + 1][1], [_Col(c.name, c.start, c.end, True) for c in names])
            for col, value in zip(names, values, strict=True):
                key = _norm(col.name)
                if not value:
                    continue
                if key in ("dbname", "database") and rep.db_name is None:
                    rep.db_name = value.split()[0]
                elif key == "instance" and rep.instance is None:
                    rep.instance = value.split()[0]
                elif key in ("host", "hostname") and rep.host is None:
                    rep.host = value.split()[0]
        if _TOP_RE.match(line) or _WAITS_RE.match(line):
            break


def _oracle_time(text: str) -> datetime:
    for fmt in ("%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise ValueError(text)  # pragma: no cover - the regex admits only these shapes


@dataclass
class _Ctx:
    source: Source
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
        mapping: list[tuple[str, Decimal | str] | None] = []
        for col in table.cols:
            key = _norm(col.name)
            if key.endswith("event"):
                mapping.append(("event", "text"))
            elif key == "waitclass":
                mapping.append(("wait_class", "text"))
            else:
                mapping.append(_WAIT_COLUMNS.get(key))
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
        keys = [_norm(c.name) for c in cols]
        if "tablespace" not in keys or (kind == "file" and "filename" not in keys):
            raise _BadLine(table.title_line, f"{table.title}: no Tablespace"
                           f"{' / Filename' if kind == 'file' else ''} column")
        stats = {_FILE_COLUMNS[k]: idx for idx, k in enumerate(keys) if k in _FILE_COLUMNS}
        if "reads_ps" not in stats and "reads" not in stats:
            raise _BadLine(table.title_line, f"{table.title}: no Reads or Av Reads/s column")
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
