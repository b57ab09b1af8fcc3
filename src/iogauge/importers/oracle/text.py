"""Oracle text reports (Statspack, AWR): whole reports a piece at a time, their header and
tables found by section title.
"""


from __future__ import annotations

import functools
import io
import itertools
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import BinaryIO

import numpy as np

from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of
from iogauge.importers.oracle.filetype import FILETYPE_RE, filetype_rows
from iogauge.importers.oracle.filetype import TEXT_NAMES as _FILETYPE_TEXT
from iogauge.importers.oracle.grammar import (
    _BLOCK_B_RE,
    _BLOCK_K_RE,
    _ELAPSED_RE,
    _FILE_RE,
    _FILE_SCHEMA,
    _FILE_TEXT,
    _HOST_RE,
    _SNAP8_RE,
    _SNAP_RE,
    _TOP_RE,
    _TS_RE,
    _WAIT_TEXT,
    _WAITS_RE,
    NO_ZONE_NOTE,
    _BadLine,
    _cells,
    _Col,
    _columns,
    _Cut,
    _is_rule,
    _norm,
    _oracle_time,
    _Report,
    report_window,
)
from iogauge.importers.oracle.histogram import HIST_RE, hist_row, lower_bounds
from iogauge.importers.oracle.osstat import OS_RE, cpu_pcts, os_values, with_cpu
from iogauge.importers.oracle.pieces import (
    _C,
    _J,
    _NAME_START_RE,
    _RECORD_RE,
    _T,
    _X,
    _clean,
    _Meta,
    _Out,
    _Piece,
    _Spec,
)
from iogauge.importers.oracle.vector import _fallback, _file_frame, _wait_frame, _with_rows
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WAIT_SCHEMA, WaitEventFrame

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
    if files is not None and out.cpu:
        files = with_cpu(files, [(out.meta[r].host, out.meta[r].ts, vals)
                                 for r, vals in out.cpu.items()])
    if waits is not None and waits.height:
        source.waits.append(WaitEventFrame(waits))
    return SampleFrame(files) if files is not None and files.height else None



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
    window = report_window(rep, source.tz)
    if isinstance(window, str):
        out.bad(r, -1, rep.start_line, window)
        return
    ts, interval_s = window
    if source.tz is None:
        out.note(r, -1, NO_ZONE_NOTE)
    host = rep.host or source.host or Path(source.path).stem
    r_meta = len(out.meta)
    out.meta.append(_Meta(r=r, rep=rep, ts=ts, interval_s=interval_s, host=host))
    out.notes[r_meta] = set()
    i = a
    for seq, t in enumerate(pc.between("interest", a, b)):
        if t < i:
            continue  # (inside the table read last)
        line = pc.line(t)
        found = _kind_of(line)
        if found is None:  # pragma: no cover - the polars classes match as these patterns do
            continue
        kind, m = found
        text_names = (_WAIT_TEXT if kind in ("top", "waits", "hist") else
                      _OS_TEXT if kind == "os" else
                      _FILETYPE_TEXT if kind == "filetype" else _FILE_TEXT)
        try:
            spec, i = _read_table(out, r, seq, t, b, m.group(1),
                                  m.end(1) if kind == "top" else len(line), text_names,
                                  two_level_allowed=kind in ("file", "tablespace"),
                                  heading_lines=2 if kind == "hist" else None)
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
        if kind == "os":
            out.cpu[r_meta] = _os_cpu(out, spec)
            continue
        spec.order, spec.rep, spec.seq, spec.kind = len(out.specs), r_meta, seq, kind
        spec.section = "top timed events" if kind == "top" else m.group(1).lower()
        out.specs.append(spec)
        if kind == "hist":
            _hist_rows(out, r, spec)
        elif kind == "filetype":
            _filetype_rows(out, r, spec)


#: the sections read, by title: (kind, pattern)
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("top", _TOP_RE), ("waits", _WAITS_RE), ("file", _FILE_RE), ("tablespace", _TS_RE),
    ("os", OS_RE), ("hist", HIST_RE), ("filetype", FILETYPE_RE))


def _kind_of(line: str) -> tuple[str, re.Match[str]] | None:
    for kind, pattern in _KINDS:
        m = pattern.match(line)
        if m:
            return kind, m
    return None


def _hist_rows(out: _Out, r: int, spec: _Spec) -> None:
    """The Wait Event Histogram's rows (a small table, read row by row): each event's
    waits and its shares of waits >= 32 ms and >= 1 s, after the report's wait rows."""
    names = [c.name for c in spec.cols]
    bounds = lower_bounds(names)
    if isinstance(bounds, str):
        out.bad(r, spec.seq, spec.title_line, f"{spec.title}: {bounds}")
        return
    meta = out.meta[spec.rep]
    keys = [_norm(n) for n in names]
    waits_at = next((k for k, n in enumerate(keys) if n in ("waits", "totalwaits")), None)
    for pos, k in enumerate(spec.first):
        cells = _cells(out.pc.line(k), spec.cols)
        try:
            row = hist_row(cells, bounds, names, waits_at, out.pc.no(k), spec.title,
                           out.notes[spec.rep])
        except _BadLine as exc:
            out.bad(r, spec.seq, exc.line_no, exc.reason)
            continue
        out.fallback_waits.append((spec.order, pos, {
            **row, "source": out.fmt, "host": meta.host, "db_name": meta.rep.db_name,
            "instance": meta.rep.instance, "ts": meta.ts,
            "interval_s": float(meta.interval_s), "section": "wait event histogram"}))


def _filetype_rows(out: _Out, r: int, spec: _Spec) -> None:
    """IOStat by Filetype summary's small and large read times (a small table, read row by
    row), after the report's wait rows."""
    names = [c.name for c in spec.cols]
    meta = out.meta[spec.rep]
    base = {"source": out.fmt, "host": meta.host, "db_name": meta.rep.db_name,
            "instance": meta.rep.instance, "ts": meta.ts, "interval_s": float(meta.interval_s)}
    pos = 0
    for k in spec.first:
        try:
            rows = filetype_rows(names, _cells(out.pc.line(k), spec.cols), out.pc.no(k),
                                 spec.title, out.notes[spec.rep])
        except _BadLine as exc:
            out.bad(r, spec.seq, exc.line_no, exc.reason)
            continue
        for row in rows:
            out.fallback_waits.append((spec.order, pos, {**base, **row}))
            pos += 1


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
            if rep.block_bytes is None:
                rep.block_bytes = _block_bytes(line)
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
    if rep.block_bytes is None:  # (11.2.0.4+: Cache Sizes comes after the Top 10 events)
        rep.block_bytes = next(filter(None, (_block_bytes(pc.line(k))
                                             for k in pc.between("head", hi, b))), None)


def _block_bytes(line: str) -> int | None:
    """The block size a line gives (``Std Block Size: 8K``, ``db_block_size: 8192``)."""
    mb = _BLOCK_K_RE.search(line)
    if mb:
        return int(mb.group(1).replace(",", "")) * 1024
    mb = _BLOCK_B_RE.search(line)
    return int(mb.group(1)) if mb else None


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
                title_end: int, text_names: set[str], *, two_level_allowed: bool,
                heading_lines: int | None = None) -> tuple[_Spec | None, int]:
    """The table whose title is on line ``i_title`` (the report ends before ``b``): its
    columns and the lines of its records, and where reading goes on. None for a table cut
    off by the end of the file (a note says so)."""
    pc = out.pc
    rule = pc.first("rule", i_title + 1, min(b, i_title + _HEADING_LINES))
    empty = _no_data(pc, i_title, b if rule is None else rule)
    if empty is not None:  # "No data exists for this section of the report." (12c+)
        return None, empty + 1
    if rule is None:
        if i_title + _HEADING_LINES >= b:
            raise _Cut
        raise _BadLine(pc.no(i_title), "section title without a rule of dashes under its "
                       "column headings within the next lines")
    other = pc.first("section", i_title + 1, rule)
    if other is not None:  # (the rule found is another section's: its rows are not ours)
        raise _BadLine(pc.no(i_title), f"section title without a rule of dashes under its "
                       f"column headings before the next section (line {pc.no(other)})")
    # the headings: the lines above the rule, from the last blank or '->' line on (the words
    # beside the title count when there is none: Top 5)
    reset = pc.last("reset", i_title + 1, rule)
    if reset is None:
        first = pc.line(i_title)
        header = [(" " * title_end + first[title_end:]).replace("~", " ")]
        header += [pc.line(k).replace("~", " ") for k in range(i_title + 1, rule)]
    else:
        header = [pc.line(k).replace("~", " ") for k in range(reset + 1, rule)]
    if heading_lines is not None:  # (the histogram's '% of Waits' over its buckets)
        # Statspack 12.1 prints the label on the "Total" line: "Total ---- % of Waits ----"
        header = [_GROUP_LABEL_RE.sub(lambda m: " " * len(m.group()), h)
                  for h in header[-heading_lines:]]
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
        return _one_line_records(out, r, seq, spec, i, end, term)
    return _two_line_records(out, r, seq, spec, i, end, term)


def _two_line_records(out: _Out, r: int, seq: int, spec: _Spec, i: int, end: int,
                      term: int | None) -> tuple[_Spec | None, int]:
    """A two-lines-a-record table's records: each line's class, then the records as
    _RECORD_RE finds them. A text line that can start no record (not a name from the first
    character, not indented to the file name) is refused alone: taken as a record's start,
    it would take the next name line for its numbers and lose that record."""
    pc, cols, title = out.pc, spec.cols, spec.title
    code = pc.code[i:end].copy()
    lead = pc.lead[i:end]
    text = code == _X
    if len(cols) > 1:
        code[text & (lead >= cols[-1].start)] = _C
    for k in np.flatnonzero(code == _X).tolist():
        code[k] = _T if _may_start_record(pc.line(i + k)) else _J
    p_last = cols[-1].start
    letters = code.tobytes().decode("ascii")
    for m in _RECORD_RE.finditer(letters):
        found = m.group()
        k0 = i + m.start()
        for d in (d for d, letter in enumerate(found) if letter == "J"):
            out.bad(r, seq, pc.no(k0 + d), f"{title}: neither a tablespace/file line nor "
                    "numbers (a line of another block?)")
        if found in ("B", "J"):
            continue
        if found == "N":
            out.bad(r, seq, pc.no(k0), f"{title}: numbers without the tablespace/file line "
                    "before them")
        elif found[-1] == "N" and letters[m.end():].lstrip("BJ")[:1] == "N":
            # two lines of numbers under one name line: either may be a line of another
            # block, so neither is taken as the record's numbers (the second is refused next)
            out.bad(r, seq, pc.no(k0), f"{title}: two lines of numbers under this line (a "
                    "line of another block?)")
        elif len(found.rstrip("J")) > 1 and found.rstrip("J")[-1] in "TN":
            conts = [k0 + d for d, letter in enumerate(found) if letter == "C" and d > 0]
            if conts:
                spec.more[len(spec.first)] = "".join(pc.line(k)[p_last:].strip()
                                                     for k in conts)
            spec.first.append(k0)
            spec.second.append(i + len(found.rstrip("J")) - 1 + m.start())
        elif term is not None:  # a text line whose numbers never came
            out.bad(r, seq, pc.no(k0), f"{title}: no line of numbers under this one")
    return _cut(out, r, seq, spec) if term is None else (spec, term)


def _may_start_record(line: str) -> bool:
    """A text line of a two-line table that is a name line (a tablespace name from the
    first character) or a line of numbers with a value that is not one (mostly numbers:
    taken as the record's numbers and refused by the value, naming it)."""
    if _NAME_START_RE.match(line):
        return True
    words = line.split()
    return bool(line[:1].isspace() and words
                and 2 * sum(bool(_NUMBERISH_RE.match(w)) for w in words) >= len(words))


#: a word that starts as a number ("15,1x": a printed number with a character changed)
_NUMBERISH_RE = re.compile(r"[\d.,]*\d")

_OS_TEXT = {"statistic"}


def _os_cpu(out: _Out, spec: _Spec) -> dict[str, float]:
    """The host CPU columns of an Operating System Statistics table (Statistic, Value)."""
    keys = [_norm(c.name) for c in spec.cols]
    if "statistic" not in keys or "value" not in keys:
        return {}
    name_at, value_at = keys.index("statistic"), keys.index("value")
    rows = []
    for k in spec.first:
        cells = _cells(out.pc.line(k), spec.cols)
        rows.append((cells[name_at], cells[value_at]))
    return cpu_pcts(os_values(rows))


def _one_line_records(out: _Out, r: int, seq: int, spec: _Spec, i: int, end: int,
                      term: int | None) -> tuple[_Spec | None, int]:
    """A one-line-a-record table's records, from its first line to the first blank line
    after one (or its end), and where reading goes on."""
    pc = out.pc
    top = pc.first("text", i, end)
    if top is not None:
        blank = pc.first("blank", top, end)
        if blank is not None:
            spec.first = _named_records(out, r, seq, spec, range(top, blank))
            return spec, blank + 1
        if term is None:  # (cut by the file's end: dropped whole, refusing nothing)
            spec.first = list(range(top, end))
            return _cut(out, r, seq, spec)
        spec.first = _named_records(out, r, seq, spec, range(top, end))
    return _cut(out, r, seq, spec) if term is None else (spec, term)


def _named_records(out: _Out, r: int, seq: int, spec: _Spec, lines: range) -> list[int]:
    """The lines of a one-line-a-record table that can be records: its first column is a
    name printed from the line's first character (an event, a tablespace), so an indented
    line -- a value or heading of another block, a load average -- is refused, never read
    as a row."""
    if not spec.cols or not spec.cols[0].text or spec.cols[0].start != 0:
        return list(lines)
    ks = np.arange(lines.start, lines.stop)
    indented = out.pc.lead[ks] > 0
    for k in ks[indented].tolist():
        out.bad(r, seq, out.pc.no(k), f"{spec.title}: an indented line where a record "
                "starts with its name (a line of another block?)")
    kept: list[int] = ks[~indented].tolist()
    return kept


def _cut(out: _Out, r: int, seq: int, spec: _Spec) -> tuple[None, int]:
    """A table the end of the file cut off: dropped, with a note."""
    out.note(r, seq, f"'{spec.title}' (line {spec.title_line}) is cut off by the end of the "
             f"file; its {len(spec.first)} rows were dropped so that only complete sections "
             "are kept")
    return None, out.pc.n


#: lines after a section title within which its rule of dashes must come
_HEADING_LINES = 25
#: a histogram's group label on a heading line: "---- % of Waits ----"
_GROUP_LABEL_RE = re.compile(r"-+\s*% of (?:Total )?Waits\s*-+")
#: what AWR 12c+ prints under the title of a section without rows
_NO_DATA = "No data exists for this section of the report."


def _no_data(pc: _Piece, i_title: int, stop: int) -> int | None:
    """The line saying a section has no rows, if it comes after the title ``i_title``
    before its rule (or the next section title), else None."""
    nxt = pc.first("section", i_title + 1, stop)
    hi = min(stop if nxt is None else nxt, i_title + _HEADING_LINES)
    for k in pc.between("text", i_title + 1, hi):
        if pc.line(k).strip() == _NO_DATA:
            return k
    return None


