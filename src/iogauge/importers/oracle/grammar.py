"""What the Oracle report readers share: section titles, column headings and their
meaning, cells, printed numbers and times (see :mod:`iogauge.importers.oracle`).
"""


from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from iogauge.model.sampleframe import SCHEMA

DEFAULT_BLOCK_BYTES = 8192
#: what AWR prints where a value does not exist (an average read time over no reads)
NOT_AVAILABLE = "N/A"

_TOP_RE = re.compile(r"^(Top \d+ (?:Wait|Timed) Events|Top \d+ Timed Foreground Events|"
                     r"Top \d+ Foreground Events by Total Wait Time)\b")
_TAIL = r"(?=\s+for DB:|\s{2,}DB/Inst:|\s*$)"
_WAITS_RE = re.compile(r"^((?:Foreground |Background )?Wait Events(?: \(fg and bg\))?)" + _TAIL)
_FILE_RE = re.compile(r"^(File IO Stats|File IO Statistics)" + _TAIL)
_TS_RE = re.compile(r"^(Tablespace IO Stats|Tablespace IO Summary)" + _TAIL)
#: the titles of AWR/Statspack summary blocks, which may follow a table with no blank line
#: or rule between them (AWR 11.2: Host CPU right under the Top 5 Timed Foreground Events)
_BLOCK_TITLE_RE = re.compile(r"^(?:Host CPU|Instance CPU|Memory Statistics|Cache Sizes|"
                             r"Load Profile|Instance Efficiency|Shared Pool Statistics|"
                             r"Time Model Statistics|Operating System Statistics|IO Profile|"
                             r"Wait Classes by Total Wait Time|Top ADDM Findings|"
                             r"Report Summary|Main Report|Global Cache Load Profile)\b")
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
    "%timout": ("timeouts_pct", Decimal(1)),  # Statspack 12.1: "%Tim" over "out"
    "time(s)": ("time_waited_s", Decimal(1)),
    "time(sec)": ("time_waited_s", Decimal(1)),
    "waittime(s)": ("time_waited_s", Decimal(1)),
    "totalwaittime(s)": ("time_waited_s", Decimal(1)),
    "totalwaittime(sec)": ("time_waited_s", Decimal(1)),
    # 11.2.0.4 prints "Total Wait Time (sec)" in a column 4 wide: "Tota" over "Time"
    "totatime": ("time_waited_s", Decimal(1)),
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
#: an event name starts with a letter ("db file sequential read", "SQL*Net ...", "enq: TX")
_EVENT_RE = re.compile(r"^[A-Za-z]")
#: what no event name holds: a date (21-Aug-07), a clock time (11:00:02) -- the snapshot
#: lines of a report header ("Begin Snap:  11 21-Aug-07 11:00:02  215  3.4")
_NOT_EVENT_RE = re.compile(r"\b\d{1,2}-[A-Za-z]{3}-\d{2,4}\b|\b\d{1,2}:\d{2}:\d{2}\b")
#: a tablespace name: an Oracle identifier (letters, digits, _ $ #; the first a letter)
_TABLESPACE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]*")
#: what no data file name holds: a '%' or a run of spaces (a column heading such as
#: "Begin       End     %User   %System" pasted into File IO Stats is no file)
_NOT_FILENAME_RE = re.compile(r"%|\s{2,}")
#: a wait row carries at least one of these (CPU rows only a time)
WAIT_FIGURES = ("waits", "time_waited_s", "avg_wait_ms", "pct_db_time")

#: heading -> file statistic
_FILE_COLUMNS: dict[str, str] = {
    "reads": "reads",
    "avreads/s": "reads_ps", "reads/s": "reads_ps", "avrds/s": "reads_ps", "rds/s": "reads_ps",
    "avrd(ms)": "rd_ms", "avgrd(ms)": "rd_ms", "rd(ms)": "rd_ms", "avgread(ms)": "rd_ms",
    "avblks/rd": "blks_rd", "avgblksrd": "blks_rd", "blks/rd": "blks_rd",
    "writes": "writes",
    "avwrites/s": "writes_ps", "writes/s": "writes_ps", "writesavg/s": "writes_ps",
}
_FILE_TEXT = {"tablespace", "filename", "pdbname"}
#: headings of file and wait tables that are Oracle's but have no column here (buffer waits
#: are waits for a buffer, not for the file; 12c+ single-block columns; 8i/9i timeouts)
_FILE_IGNORED = frozenset({"bufferwaits", "avbufwt(ms)", "av1-bkrds/s", "av1-bkrd(ms)", "%optreads",
                           "1-bkrds/s", "1-bkrd(ms)", "avbufwt", "avgbufwt(ms)",
                           "avwrites(ms)", "avwt(ms)", "tablespacefilename",
                           "totalwaits", "totwaits", "avgwait(ms)",  # 8i: buffer waits
                           "mxrdbkt"})  # Statspack 12.1: max bucket of single-block reads
_WAIT_IGNORED = frozenset({"timeouts", "%totalwttime", "%bgtime", "avgwaitms", "%dbwait",
                           "%timeouts", "waitclass"})


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
    """A printed Oracle number: ``20,004``, ``7.3``, ``.37``, AWR's ``12.3K`` (x 1000);
    ``N/A`` (AWR 11.2.0.4: an average over no reads) is no value, as a blank cell."""
    if cell in ("", NOT_AVAILABLE):
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


_FILE_SCHEMA = {c: SCHEMA[c] for c in SCHEMA if c in {
    "source", "host", "device", "device_kind", "parent", "ts", "interval_s", "r_iops",
    "w_iops", "r_await_ms", "r_areq_kB"}}


def _power_of_two(value: Fraction) -> bool:
    n, d = value.numerator, value.denominator
    return n > 0 and n & (n - 1) == 0 and d & (d - 1) == 0


#: AWR 11.2.0.4's Tablespace IO Stats headings (text and HTML). Under "1-bk Rds/s" to
#: "Writes avg/s" stand other values than these headings name: in both real 11.2.0.4
#: reports of tests/fixtures/awr, where every tablespace has one file, each tablespace's
#: Writes (as File IO Stats of the same report prints them) stand under "1-bk Rds/s". The
#: read columns before them agree with File IO Stats and are read; the writes are not.
_SHIFTED_TS_KEYS = ("tablespace", "reads", "avrds/s", "avrd(ms)", "avblks/rd", "1-bkrds/s",
                    "av1-bkrd(ms)", "writes", "writesavg/s", "bufferwaits", "avbufwt(ms)")
SHIFTED_WRITES_NOTE = ("Tablespace IO Stats (AWR 11.2.0.4 layout): the values after Av Blks/Rd "
                       "are not under their headings (each tablespace's writes stand under "
                       "'1-bk Rds/s'); its writes were not read (File IO Stats holds them)")


def layout_note(cols: list[_Col], kind: str) -> str | None:
    """What a reader must say of a file or tablespace table's layout, or None."""
    if kind == "tablespace" and tuple(_norm(c.name) for c in cols) == _SHIFTED_TS_KEYS:
        return SHIFTED_WRITES_NOTE
    return None


def _file_layout(cols: list[_Col], kind: str) -> tuple[list[str], dict[str, int], str | None]:
    """A file or tablespace table's headings (lower case, no spaces), the statistic each
    column holds (_FILE_COLUMNS -> column index), and why the table cannot be read, or None.
    The write columns of AWR 11.2.0.4's Tablespace IO Stats hold no statistic (see
    _SHIFTED_TS_KEYS)."""
    keys = [_norm(c.name) for c in cols]
    stats = {_FILE_COLUMNS[k]: idx for idx, k in enumerate(keys) if k in _FILE_COLUMNS}
    if layout_note(cols, kind) is not None:
        stats = {k: v for k, v in stats.items() if k not in ("writes", "writes_ps")}
    if "tablespace" not in keys or (kind == "file" and "filename" not in keys):
        return keys, stats, f"no Tablespace{' / Filename' if kind == 'file' else ''} column"
    if "reads_ps" not in stats and "reads" not in stats:
        return keys, stats, "no Reads or Av Reads/s column"
    unknown = [c.name for c, k in zip(cols, keys, strict=True)
               if k not in _FILE_COLUMNS and k not in _FILE_TEXT and k not in _FILE_IGNORED]
    if unknown:
        return keys, stats, _unknown_headings(unknown)
    return keys, stats, None


def _unknown_headings(names: list[str]) -> str:
    return (f"column headings not recognised ({', '.join(repr(n) for n in names)}): a line "
            "of another block among the headings, or a layout iogauge does not know")


def wait_refusal(cols: list[_Col]) -> str | None:
    """Why a wait table's headings cannot be read, or None. Every heading must be one of
    Oracle's (read or known and dropped): a heading line of another block pasted among them
    would shift the columns, and values would land under the wrong names."""
    mapping = _wait_mapping(cols)
    fields = {m[0] for m in mapping if m is not None}
    if "event" not in fields or not fields & {"waits", "time_waited_s"}:
        return f"column headings not recognised ({', '.join(c.name for c in cols)})"
    unknown = [c.name for c, m in zip(cols, mapping, strict=True)
               if m is None and _norm(c.name) not in _WAIT_IGNORED]
    return _unknown_headings(unknown) if unknown else None




NO_ZONE_NOTE = ("Statspack/AWR snapshot times carry no zone; assumed UTC (use --tz to give the "
                "database host's zone)")


def report_window(rep: _Report, tz: tzinfo | None) -> tuple[datetime, Decimal] | str:
    """(end snapshot time in UTC, interval in seconds) of a report whose End Snap was read,
    or why there is none: the interval is End - Begin exact to the second, the printed
    Elapsed (rounded) only when the Begin time is missing; naive times are in ``tz``, else
    UTC."""
    if rep.end is None:
        return "report without its Begin Snap / End Snap times"
    interval_s: Decimal
    if rep.begin is not None and rep.end > rep.begin:
        interval_s = Decimal((rep.end - rep.begin).total_seconds())
    elif rep.elapsed_min is not None and rep.elapsed_min > 0:
        interval_s = rep.elapsed_min * 60
    else:
        return "End Snap is not after Begin Snap"
    ts = (rep.end.replace(tzinfo=UTC) if tz is None
          else rep.end.replace(tzinfo=tz).astimezone(UTC))
    return ts, interval_s
