"""The cells and values of a piece's tables, one layout at a time (polars), and the tables
set aside for :mod:`iogauge.importers.oracle.rows`.
"""


from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from iogauge.importers.oracle.grammar import (
    _EVENT_RE,
    _FILE_SCHEMA,
    _NOT_EVENT_RE,
    _NOT_FILENAME_RE,
    _TABLESPACE_RE,
    DEFAULT_BLOCK_BYTES,
    NOT_AVAILABLE,
    WAIT_FIGURES,
    _BadLine,
    _cells,
    _Col,
    _file_layout,
    _power_of_two,
    _Table,
    _wait_mapping,
    layout_note,
    wait_refusal,
)
from iogauge.importers.oracle.pieces import _LAST, _Out, _Piece, _Sink, _Spec
from iogauge.importers.oracle.rows import _Ctx
from iogauge.model.sampleframe import TS_DTYPE
from iogauge.model.waitevents import WAIT_SCHEMA


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
    odd = (cell != "") & (cell != NOT_AVAILABLE) & value.is_null()
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



def _wait_frame(out: _Out) -> pl.DataFrame | None:
    """The wait events of the piece's top-event and wait tables, a layout at a time
    (_Ctx.add_waits row by row gives the same; tables it must read are set aside)."""
    frames: list[pl.DataFrame] = []
    for specs in _groups(out.specs, ("top", "waits")):
        cols = specs[0].cols
        mapping = _wait_mapping(cols)
        refusal = wait_refusal(cols)
        if refusal is not None:
            for s in specs:
                out.events.bad((out.meta[s.rep].r, s.seq, 1), s.title_line,
                               f"{s.title}: {refusal}")
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
        # the row grammar of rows._Ctx._wait_row: such rows are refused there, with their line
        odd.append(~values["event"].str.contains(_EVENT_RE.pattern).fill_null(False))
        odd.append(values["event"].str.contains(_NOT_EVENT_RE.pattern).fill_null(False))
        figures = [values[k] for k in WAIT_FIGURES if k in values]
        if figures:
            odd.append(pl.all_horizontal([f.is_null() for f in figures]))
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



#: one layout's file tables: (specs, cells, rows, table of each row, statistic -> column)
_FileGroup = tuple[list[_Spec], pl.DataFrame, pl.DataFrame, np.ndarray, dict[str, int]]


def _file_frame(out: _Out) -> pl.DataFrame | None:
    """The datafile and tablespace rows of the piece's file tables, a layout at a time, as
    _Ctx.add_files makes them row by row; a table with anything it would refuse or note
    (a value that is not a number, a name missing, a file listed twice) is set aside for
    it."""
    frames = [group for specs in _groups(out.specs, ("file", "tablespace"))
              if (group := _file_group(out, specs)) is not None]
    return _file_rows_kept(out, frames) if frames else None


def _file_group(out: _Out, specs: list[_Spec]) -> _FileGroup | None:
    """One layout's rows (with ``_odd`` where _Ctx would refuse or note), or None when the
    layout's headings are refused."""
    s0 = specs[0]
    kind = s0.kind
    keys, stats, refusal = _file_layout(s0.cols + (s0.cols2 or []), kind)
    if refusal is not None:
        for s in specs:
            out.events.bad((out.meta[s.rep].r, s.seq, 1), s.title_line, f"{s.title}: {refusal}")
        return None
    note = layout_note(s0.cols + (s0.cols2 or []), kind)
    for s in specs:
        if out.meta[s.rep].rep.block_bytes is None:
            out.notes[s.rep].add("no 'Std Block Size' / 'db_block_size' in the report: "
                                 "Av Blks/Rd converted with 8 KB blocks")
        if note is not None:
            out.notes[s.rep].add(note)
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
    odd: list[pl.Expr] = [tsname.is_null(), device.is_null() | (device == ""),
                          device.str.contains(_NOT_FILENAME_RE.pattern).fill_null(False)
                          & pl.lit(kind == "file"),
                          ~tsname.str.contains(_TABLESPACE_RE.pattern + "$").fill_null(True),
                          pl.lit("pdbname" in keys)]  # (container names: rows._Ctx)
    figures = _file_figures(stats, odd)
    rows = frame.select(
        "_order", "_pos", "_tid", "host", "ts", "interval_s",
        source=pl.lit(out.fmt), device=device,
        device_kind=pl.lit("datafile" if kind == "file" else "tablespace"),
        parent=tsname if kind == "file" else pl.lit(None, dtype=pl.String), **figures,
        _odd=pl.any_horizontal(odd), _rep=pl.Series([s.rep for s in specs])[tids])
    return specs, cells, rows, tids, stats


def _file_figures(stats: dict[str, int], odd: list[pl.Expr]) -> dict[str, pl.Expr]:
    """r_iops, w_iops, r_await_ms and r_areq_kB from the statistic columns, as _Ctx reads
    them; what _Ctx would refuse or note is appended to ``odd``."""
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
    return {"r_iops": r_iops, "w_iops": w_iops, "r_await_ms": rd_ms, "r_areq_kB": areq}


def _file_rows_kept(out: _Out, frames: list[_FileGroup]) -> pl.DataFrame:
    """The rows of the groups, but for the tables set aside for _Ctx."""
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

