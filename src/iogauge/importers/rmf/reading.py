"""Vectorised reading of a piece of RMF report text: page titles, structure lines and table
rows found by polars expressions, each page's lines handed to its section."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from iogauge.importers.rmf.sections import (
    _DASD_MAP,
    _bulk,
    _cache_line,
    _dasd_line,
    _ess_line,
    _finish_requests,
    _requests_line,
    _row,
    _start_time,
)
from iogauge.importers.rmf.state import _Interval, _Page, _Parsed, _Piece, _State
from iogauge.importers.rmf.tables import _close_older, _keep_runs, _reopen, _tabled_seen
from iogauge.importers.rmf.tokens import (
    _CACHE,
    _CACHE_DEV,
    _DASD,
    _ESS_RANK,
    _KNOWN,
    _NA,
    _OVERVIEW_NVALUES,
    _OVERVIEW_TOTAL_HR,
    _REQ_ROWS,
    _SYS_RE,
    _TIME_RE,
    _BadLine,
    _spaced_title,
)

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
