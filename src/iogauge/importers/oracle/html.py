"""AWR HTML reports (``awrrpt.sql`` with report type html, the default DBAs share), read as
HTML.

The parser is the standard library's :class:`html.parser.HTMLParser`: AWR HTML is
machine-written, flat (no nested tables, every cell closed), and all that is needed is the
text of each ``<table summary=...>``'s cells with the line each row starts on -- an event
parser gives that in one pass over a 2 MB report without building a tree, and adds no
dependency (lxml would, for nothing this layout needs). Character references (``&#160;``)
are decoded by the parser; cells are stripped of spaces and no-break spaces.

Each table is known by its ``summary`` attribute, which Oracle writes per section (the same
text from 10.2 to 19c for the tables read here), and mapped to the section the text report
prints under its title: the same headings (``Total Wait Time (s)``, ``Av Rd(ms)``, ...)
read by the same :class:`~iogauge.importers.oracle.rows._Ctx`, so the text and the HTML of a
report give identical rows. Header tables give the names, the snapshot times and the block
size as in the text. A table whose summary is not one of these is skipped. A RAC global
report (``<title>AWR RAC Report for DB:``) is read by :mod:`.rac`: a row per instance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.oracle.filetype import filetype_rows
from iogauge.importers.oracle.grammar import (
    _FILE_SCHEMA,
    _FILE_TEXT,
    _WAIT_TEXT,
    NO_ZONE_NOTE,
    _BadLine,
    _Col,
    _norm,
    _oracle_time,
    _Report,
    _Table,
    report_window,
)
from iogauge.importers.oracle.histogram import hist_row, lower_bounds
from iogauge.importers.oracle.osstat import CPU_SCHEMA, cpu_pcts, os_values
from iogauge.importers.oracle.rac import RAC_TITLE_RE, rac_waits
from iogauge.importers.oracle.rows import _Ctx
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WAIT_SCHEMA, WaitEventFrame

#: ``<title>AWR Report for DB: ORCL, Inst: orcl, Snaps: 21-22</title>`` (single instance)
TITLE_RE = re.compile(r"<title>\s*AWR Report for DB:", re.IGNORECASE)

#: summary (lower case, start) -> (kind, section) of the tables read; the sections are the
#: text report's titles (lower case), as the wait rule ranks them
_SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("this table displays top 10 wait events by total wait time", "top", "top timed events"),
    ("this table displays top 5 wait events by total wait time", "top", "top timed events"),
    ("this table displays top 5 timed events", "top", "top timed events"),
    ("this table displays foreground wait events", "waits", "foreground wait events"),
    ("this table displays background wait events", "waits", "background wait events"),
    ("this table displays system wait events", "waits", "wait events"),
    ("this table displays io statistics for different tablespaces", "tablespace", ""),
    ("this table displays io statistics for different files", "file", ""),
    ("this table displays io statistics for different physical files", "file", ""),  # 11.2
    ("this table displays operating systems statistics", "os", ""),
    ("this table displays wait event histogram", "hist", "wait event histogram"),
    # 11.2.0.4 gives the histogram and its Detail tables (64 ms to 2 s, ...) this summary
    (("this table displays total number of waits, and information about total wait time, "
      "for each wait event"), "hist", "wait event histogram"),
    ("this table displays io statistics for different file types", "filetype", ""),
)


@dataclass
class _HtmlTable:
    summary: str
    line: int  # where <table> starts
    rows: list[tuple[int, list[str]]] = field(default_factory=list)


class _Tables(HTMLParser):
    """The cells of every ``<table>`` of the document, row by row, with their lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[_HtmlTable] = []
        self._table: _HtmlTable | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        if tag == "table":
            self._table = _HtmlTable((dict(attrs).get("summary") or "").strip(), line)
            self.tables.append(self._table)
        elif tag == "tr" and self._table is not None:
            self._end_cell()
            self._row = []
            self._table.rows.append((line, self._row))
        elif tag in ("td", "th") and self._row is not None:
            self._end_cell()
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "tr"):
            self._end_cell()
        if tag == "tr":
            self._row = None
        elif tag == "table":
            self._end_cell()
            self._table = self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def _end_cell(self) -> None:
        if self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
        self._cell = None


def _header(tables: list[_HtmlTable]) -> _Report:
    """Names, snapshot times and block size from the header tables (as the text's)."""
    rep = _Report(start_line=1)
    for t in tables:
        if len(t.rows) < 2:
            continue
        heads = [_norm(h) for h in t.rows[0][1]]
        for _line, cells in t.rows[1:]:
            named = dict(zip(heads, cells, strict=False))
            _names(rep, named)
            _snap(rep, cells, named, t.rows[0][0])
            for k, cell in enumerate(cells[:-1]):
                if cell == "Std Block Size:" and rep.block_bytes is None:
                    m = re.fullmatch(r"([\d,]+)K", cells[k + 1])
                    if m:
                        rep.block_bytes = int(m.group(1).replace(",", "")) * 1024
    return rep


def _names(rep: _Report, named: dict[str, str]) -> None:
    if rep.db_name is None and named.get("dbname"):
        rep.db_name = named["dbname"].split()[0]
    if rep.instance is None and named.get("instance"):
        rep.instance = named["instance"].split()[0]
    if rep.host is None and named.get("hostname"):
        rep.host = named["hostname"].split()[0]


def _snap(rep: _Report, cells: list[str], named: dict[str, str], line: int) -> None:
    what = cells[0] if cells else ""
    when = named.get("snaptime", "")
    try:
        if what == "Begin Snap:" and when:
            rep.begin = _oracle_time(when)
        elif what == "End Snap:" and when:
            rep.end = _oracle_time(when)
    except ValueError:
        raise _BadLine(line, f"{when!r} is not a date and time") from None
    m = re.fullmatch(r"([\d,.]+) \(mins\)", when)
    if what == "Elapsed:" and m:
        rep.elapsed_min = Decimal(m.group(1).replace(",", ""))


def _section(summary: str) -> tuple[str, str] | None:
    low = " ".join(summary.lower().split())
    for start, kind, section in _SECTIONS:
        if low.startswith(start):
            return kind, section
    return None


def _table(t: _HtmlTable, kind: str, source: Source) -> _Table:
    """The text reader's table: the headings as columns, a record per row under them."""
    text = _WAIT_TEXT if kind in ("top", "waits") else _FILE_TEXT
    heads = t.rows[0][1]
    cols = [_Col(h, k, k, _norm(h) in text) for k, h in enumerate(heads)]
    table = _Table(title=t.summary[:60], title_line=t.line, cols=cols, cols2=None,
                   complete=True)
    for line, cells in t.rows[1:]:
        if not any(cells):
            continue
        if len(cells) != len(cols):
            source.bad_line(line, f"{table.title}: {len(cells)} cells under {len(cols)} "
                            "headings")
            continue
        table.rows.append((line, cells, None, None))
    return table


def _context(rep: _Report, source: Source, fmt: str) -> _Ctx | str:
    """The row reader for one report's (or RAC instance's) window, or why it has none."""
    window = report_window(rep, source.tz)
    if isinstance(window, str):
        return window
    ts, interval_s = window
    return _Ctx(source=source, fmt=fmt, ts=ts, interval_s=interval_s,
                host=rep.host or source.host or Path(source.path).stem, rep=rep)


def _add_waits(source: Source, rows: list[dict[str, object]]) -> None:
    if rows:
        source.waits.append(WaitEventFrame(pl.DataFrame(
            [{c: row.get(c) for c in WAIT_SCHEMA} for row in rows], schema=WAIT_SCHEMA)))


def parse_html(data: bytes, source: Source, *, fmt: str) -> SampleFrame:
    """The rows of an AWR HTML report; its wait events go to ``source.waits``."""
    text = decode(data)
    parser = _Tables()
    parser.feed(text)
    parser.close()
    if source.tz is None:
        source.note(NO_ZONE_NOTE)
    rac = RAC_TITLE_RE.search(text[:4096])
    if rac:
        _add_waits(source, rac_waits(parser.tables, source, rac.group(1),
                                     lambda rep: _context(rep, source, fmt)))
        return SampleFrame.empty()
    try:
        rep = _header(parser.tables)
    except _BadLine as exc:
        source.bad_line(exc.line_no, exc.reason)
        return SampleFrame.empty()
    ctx = _context(rep, source, fmt)
    if isinstance(ctx, str):
        source.bad_line(None, ctx)
        return SampleFrame.empty()
    cpu, extra = _read_tables(parser.tables, ctx, source)
    for note in sorted(ctx.notes):
        source.note(note)
    base = {"source": fmt, "host": ctx.host, "db_name": rep.db_name,
            "instance": rep.instance, "ts": ctx.ts, "interval_s": float(ctx.interval_s),
            "section": "wait event histogram"}
    _add_waits(source, ctx.wait_rows + [{**base, **row} for row in extra])
    if not ctx.file_rows:
        return SampleFrame.empty()
    schema = {**_FILE_SCHEMA, **CPU_SCHEMA}
    return SampleFrame(pl.DataFrame([{**{c: row.get(c) for c in _FILE_SCHEMA}, **cpu}
                                     for row in ctx.file_rows], schema=schema))


def _read_tables(tables: list[_HtmlTable], ctx: _Ctx, source: Source
                 ) -> tuple[dict[str, float], list[dict[str, object]]]:
    """Each table read into ``ctx`` by its summary; the host CPU columns and the wait rows
    of the histogram and of IOStat by Filetype are returned."""
    cpu: dict[str, float] = {}
    extra: list[dict[str, object]] = []
    for t in tables:
        found = _section(t.summary)
        if found is None or not t.rows:
            continue
        kind, section = found
        if kind == "os":
            cpu = _os_table(t)
            continue
        if kind == "hist":
            extra += _hist_table(t, source, ctx.notes)
            continue
        if kind == "filetype":
            extra += _filetype_table(t, source, ctx.notes)
            continue
        try:
            table = _table(t, kind, source)
            if kind in ("top", "waits"):
                ctx.add_waits(table, section)
            else:
                ctx.add_files(table, kind)
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
    return cpu, extra


def _os_table(t: _HtmlTable) -> dict[str, float]:
    """Operating System Statistics (Statistic, Value, End Value) -> host CPU columns."""
    heads = [_norm(h) for h in t.rows[0][1]]
    if "statistic" not in heads or "value" not in heads:
        return {}
    at, value_at = heads.index("statistic"), heads.index("value")
    return cpu_pcts(os_values([(cells[at], cells[value_at]) for _line, cells in t.rows[1:]
                               if len(cells) == len(heads)]))


def _filetype_table(t: _HtmlTable, source: Source, notes: set[str]
                    ) -> list[dict[str, object]]:
    """IOStat by Filetype summary's small and large read times (:mod:`.filetype`)."""
    heads = t.rows[0][1]
    out: list[dict[str, object]] = []
    for line, cells in t.rows[1:]:
        if len(cells) != len(heads):
            source.bad_line(line, f"IOStat by Filetype: {len(cells)} cells under "
                            f"{len(heads)} headings")
            continue
        try:
            out += filetype_rows(heads, cells, line, "IOStat by Filetype", notes)
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
    return out


#: the waits heading of a Wait Event Histogram Detail table ("Waits 64ms to 2s", "Waits 4s
#: to 2m"; 12c+ "Waits 1us - 64us"), which shares its summary with 11.2.0.4's histogram
_DETAIL_RE = re.compile(r"waits\d+\w+(?:to|-)\d+\w+")


def _hist_table(t: _HtmlTable, source: Source, notes: set[str]) -> list[dict[str, object]]:
    """The Wait Event Histogram's rows (under the row of headings that starts with Event:
    a '% of Total Waits' row may span the buckets above it)."""
    at = next((k for k, (_line, cells) in enumerate(t.rows) if cells[:1] == ["Event"]), None)
    if at is None:
        source.bad_line(t.line, "wait event histogram without an Event heading")
        return []
    heads = t.rows[at][1]
    if len(heads) > 1 and _DETAIL_RE.fullmatch(_norm(heads[1])):
        return []  # a Detail table ("Waits 64ms to 2s"): the text report's is not read either
    bounds = lower_bounds(heads)
    if isinstance(bounds, str):
        source.bad_line(t.rows[at][0], f"wait event histogram: {bounds}")
        return []
    keys = [_norm(h) for h in heads]
    waits_at = next((k for k, n in enumerate(keys) if n in ("waits", "totalwaits")), None)
    out = []
    for line, cells in t.rows[at + 1:]:
        if len(cells) != len(heads):
            source.bad_line(line, f"wait event histogram: {len(cells)} cells under "
                            f"{len(heads)} headings")
            continue
        try:
            out.append(hist_row(cells, bounds, heads, waits_at, line, "wait event histogram",
                                notes))
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
    return out
