"""The sample lines of a perfmon log read as a table: the wanted columns, checked line by
line only where the fast read cannot be trusted."""

from __future__ import annotations

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.perfmon.counters import _IDLE, _KIB, _MS
from iogauge.importers.perfmon.header import _Header, _split_cells

# ---- body --------------------------------------------------------------------------------


def _data_rows(text: bytes, header_end: int, header: _Header,
               source: Source) -> int | None:
    """How many lines after the header to read: None = all. Drops typeperf's console
    trailer ("Exiting, please wait...") and a last line cut off mid-write."""
    tail_start = max(header_end, len(text) - 65536)
    lines = text[tail_start:].split(b"\n")
    if text.endswith(b"\n"):
        lines = lines[:-1]  # the empty piece after the final newline is not a line
    if tail_start > header_end:
        lines = lines[1:]  # the window may start inside a line
    k = len(lines) - 1
    while k >= 0 and not lines[k].strip().startswith(b'"'):
        k -= 1
    trailer = sum(1 for x in lines[k + 1:] if x.strip())
    cut = False
    if k >= 0 and k == len(lines) - 1 and not text.endswith(b"\n"):
        last = lines[k].decode("utf-8", errors="replace").rstrip("\r")
        cut = (len(_split_cells(last, header.separator)) != header.n_cells
               or not last.endswith('"'))
    if trailer:
        source.note(f"perfmon: {trailer} line(s) after the last sample are not samples "
                    "(typeperf console messages) and were ignored")
    if cut:
        source.note("perfmon: the last line is incomplete (file cut off while being "
                    "written) and was ignored")
    if not trailer and not cut:
        return None
    total_lines = text.count(b"\n", header_end) + (0 if text.endswith(b"\n") else 1)
    return max(total_lines - (len(lines) - k - 1) - (1 if cut else 0), 0)


def _csv(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
         columns: list[int], overrides: dict[str, pl.DataType] | None) -> pl.DataFrame:
    # The header's cell count is the schema (not the first sample line's, which may be
    # malformed), and a longer line is an error, not truncated: see _read_table.
    types = overrides or {}
    schema = {f"column_{i}": types.get(f"column_{i}", pl.String())
              for i in range(header.n_cells)}
    return pl.read_csv(text, has_header=False, skip_lines=header_idx + 1,
                       separator=header.separator, quote_char='"', columns=[0, *columns],
                       n_rows=n_rows, schema=schema, truncate_ragged_lines=False)


def _read_table(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
                columns: list[int], source: Source) -> pl.DataFrame:
    """The used columns as a frame: ``_row`` (0-based line after the header), ``ts``
    (text) and ``c<index>`` (Float64).

    The last cell of every line is read too (as text when it is not a used counter): a line
    cut short (fewer cells than the header) leaves it null. Then, or when polars cannot read
    the lines as they are (a quote left open, a line with more cells, a first line shorter
    than the header, a cell that is not a number), :func:`_read_checked` refuses the
    malformed lines by number, off the fast path, and reads the rest."""
    last = header.n_cells - 1
    wanted = sorted({*columns, last})
    overrides: dict[str, pl.DataType] = {f"column_{i}": pl.Float64() for i in columns}
    if last not in columns:
        overrides[f"column_{last}"] = pl.String()
    try:
        df = _csv(text, header, header_idx, n_rows, wanted, overrides)
        ragged = df[f"column_{last}"].null_count() > df["column_0"].null_count()
        if ragged and last in columns:
            # A used counter's cell is null when blank -- relog writes " " in every cell of
            # a binary log's first sample -- as when the line is cut short: read as text,
            # only a missing cell is. (Taken for a cut line, every relog file went the line
            # check's way: 4.9-6.1 s and 1.04 GB for the 403 MB UTF-16 benchmark file, which
            # this reads in 1.3 s at 0.47 GB.)
            tail = _csv(text, header, header_idx, n_rows, [last],
                        {f"column_{last}": pl.String()})
            ragged = tail[f"column_{last}"].null_count() > tail["column_0"].null_count()
            del tail
    except pl.exceptions.NoDataError:
        raise InputFormatError(source.path, None, "no sample lines after the header") from None
    except pl.exceptions.PolarsError:
        ragged = True
    if ragged:
        df = _read_checked(text, header, header_idx, n_rows, wanted, overrides, source)
    else:
        df = df.with_row_index("_row")
    if last not in columns:
        df = df.drop(f"column_{last}")
    return df.rename({"column_0": "ts"} | {f"column_{i}": f"c{i}" for i in columns})


def _read_checked(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
                  wanted: list[int], overrides: dict[str, pl.DataType],
                  source: Source) -> pl.DataFrame:
    """:func:`_read_table` of a file polars could not read as it is. Each sample line must be
    cells joined by the separator, exactly ``n_cells`` of them, each ``"quoted"`` (as PDH
    writes them) or bare text without quote or separator; the others are refused
    (``source.bad_line``: raise, or skip in lenient mode) and the well-formed lines read,
    ``_row`` keeping each line's place after the header; a cell that is not a number
    refuses its line too (:func:`_numbers_or_refuse`)."""
    lines = pl.read_csv(text, has_header=False, skip_lines=header_idx + 1, separator="\x1f",
                        quote_char=None, n_rows=n_rows, new_columns=["line"],
                        schema={"line": pl.String()}).with_row_index("_row")
    sep = f"\\x{{{ord(header.separator):x}}}"  # the separator as a regex escape
    line = pl.col("line").str.strip_chars_end("\r")
    # Quoted cells reduced to "" (PDH quotes every cell; a file saved again by a
    # spreadsheet may not): then a cell is "" or text without quote or separator.
    reduced = line.str.replace_all(r'"[^"]*"', '""')
    cell = f'(?:""|[^"{sep}]*)'
    cells = reduced.str.count_matches(sep) + 1
    reason = (pl.when(line.is_null() | (line.str.strip_chars() == "")).then(None)
              .when(~reduced.str.contains(f"^{cell}(?:{sep}{cell})*$"))
              .then(pl.format("the line is not cells joined by the separator (a quote left "
                              "open, a character after a closing quote): {}",
                              line.str.slice(0, 100)))
              .when(cells != header.n_cells)
              .then(pl.format("{} cells where the header has " + str(header.n_cells), cells))
              .otherwise(None))
    checked = lines.select("_row", "line", reason.alias("reason"))
    del lines
    bad = checked.filter(pl.col("reason").is_not_null())
    for r, why in bad.select("_row", "reason").iter_rows():
        source.bad_line(header_idx + 2 + int(r), str(why))
    good = checked.filter(pl.col("reason").is_null())
    del checked
    rows = good["_row"]
    if bad.height:
        body = good["line"].fill_null("").str.join("\n").item() + "\n"
        text, skip, n_rows = body.encode("utf-8"), -1, None
    else:
        skip = header_idx
    del good
    values = [i for i in wanted if overrides[f"column_{i}"] == pl.Float64()]
    try:
        try:
            df = _csv(text, header, skip, n_rows, wanted, overrides)
        except pl.exceptions.ComputeError:
            # Some cell is not a number: read the same columns as text to find which lines.
            df = _csv(text, header, skip, n_rows, wanted, None)
            return _numbers_or_refuse(df.with_columns(rows.alias("_row")).select(
                "_row", *df.columns), values, header_idx, source)
    except pl.exceptions.NoDataError:
        raise InputFormatError(source.path, None, "no sample lines after the header") from None
    except pl.exceptions.PolarsError as exc:
        raise InputFormatError(source.path, None, f"cannot read the sample lines: {exc}"
                               ) from exc
    return df.with_columns(rows.alias("_row")).select("_row", *df.columns)


def _numbers_or_refuse(df: pl.DataFrame, columns: list[int], header_idx: int,
                       source: Source) -> pl.DataFrame:
    """``column_<i>`` of ``columns`` (text) as Float64: a line with a cell that is not a
    number (blank cells are "no value") is refused, or dropped in lenient mode."""
    names = [f"column_{i}" for i in columns]

    def number(n: str) -> pl.Expr:
        return pl.col(n).str.strip_chars().cast(pl.Float64, strict=False)

    def is_bad(n: str) -> pl.Expr:
        return number(n).is_null() & (pl.col(n).str.strip_chars().str.len_bytes() > 0)

    bad_rows = (df.filter(pl.any_horizontal([is_bad(n) for n in names]))
                .select("_row", *names, *[is_bad(n).alias(f"bad:{n}") for n in names]))
    for rec in bad_rows.iter_rows(named=True):
        which = next(n for n in names if rec[f"bad:{n}"])
        source.bad_line(header_idx + 2 + int(rec["_row"]),
                        f"column {int(which.removeprefix('column_')) + 1}: {rec[which]!r} "
                        "is not a number")
    if bad_rows.height:
        df = df.filter(~pl.col("_row").is_in(bad_rows["_row"].implode()))
    return df.with_columns([number(n) for n in names])


def _convert(values: pl.Series, conv: str, check: bool) -> pl.Series:
    """Counter values as SampleFrame values. With ``check``, negative or non-finite values
    become null first (PDH shows them when a counter wraps or an instance restarts)."""
    if check:
        v = pl.col("v")
        values = values.to_frame("v").select(
            pl.when((v >= 0) & v.is_finite()).then(v)).to_series()
    if conv == _MS:
        return values * 1000.0
    if conv == _KIB:
        return values / 1024.0
    if conv == _IDLE:
        return (100.0 - values).clip(lower_bound=0.0)
    return values
