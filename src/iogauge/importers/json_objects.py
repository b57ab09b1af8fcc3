"""Vectorised decoding of JSON objects written one per line (sadf -j, iostat -o JSON).

sysstat writes each device of an interval as one JSON object on one line. polars decodes a
column of them at once (:meth:`polars.Expr.str.json_decode`); when one is damaged the whole
column fails, and only then are the lines looked at one by one, to name each bad one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl

from iogauge.importers.base import Source

#: Rows decoded per call of polars' decoder. Its working memory grows faster than its input:
#: 39,459 iostat disk objects (15 MB) took 0.18 s and 189 MB more RSS in one call, 0.08 s
#: and 7 MB in calls of 1,000 (0.08 s and 13 MB at 2,000; 0.10 s and 8 MB at 250).
SLICE_ROWS = 1000


def decode_objects(frame: pl.DataFrame, column: str, dtype: pl.Struct
                   ) -> tuple[pl.Series, list[tuple[int, str]]]:
    """``frame[column]`` (one JSON object per row) decoded to ``dtype``, and the rows that
    could not be, as ``(line_no, reason)`` from ``frame["line_no"]`` (their value is null).
    Decoded :data:`SLICE_ROWS` rows at a time; the slow path, one ``json.loads`` a row, runs
    only when the vectorised decoding fails."""
    texts = frame[column]
    try:
        if texts.len() <= SLICE_ROWS:
            return texts.str.json_decode(dtype), []
        return pl.concat([texts.slice(at, SLICE_ROWS).str.json_decode(dtype)
                          for at in range(0, texts.len(), SLICE_ROWS)]), []
    except pl.exceptions.ComputeError:
        pass
    good: list[str | None] = []
    problems: list[tuple[int, str]] = []
    schema = dtype.to_schema()
    for line_no, text in frame.select("line_no", column).iter_rows():
        why = object_problem(text, schema)
        if why is None:
            good.append(text)
        else:
            problems.append((int(line_no), why))
            good.append(None)
    return pl.Series(column, good, dtype=pl.String()).str.json_decode(dtype), problems


def object_problem(text: str, schema: Mapping[str, Any]) -> str | None:
    """Why one line's JSON object cannot be decoded with ``schema``, or None."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"unreadable JSON object: {exc.msg} at column {exc.colno}"
    if not isinstance(obj, dict):
        return "not a JSON object"
    for key, value in obj.items():
        want = schema.get(key)
        if want == pl.Float64() and (isinstance(value, bool)
                                     or not isinstance(value, int | float)):
            return f"{key!r} is {value!r}, not a number"
        if want == pl.String() and not isinstance(value, str):
            return f"{key!r} is {value!r}, not a string"
    return None


def drop_bad_entries(lines: pl.DataFrame, refused: list[int], exempt_region: int,
                     source: Source) -> pl.Series:
    """The statistics entries to drop whole (``--lenient``; strict imports raised at the
    first refused line before): those with a refused line or without their closing line,
    plus ``exempt_region`` (an entry the document was cut inside). The lines of a dropped
    entry that were not refused themselves are counted as skipped at its first line
    (``refused``: one line number per :meth:`Source.bad_line` call).

    ``lines``: ``line_no``, ``region`` (the entry a line belongs to, -1 for none) and
    ``closes_entry`` (the entry's closing bracket)."""
    exempt = pl.Series([exempt_region], dtype=pl.Int64())
    inside = lines.filter(pl.col("region") >= 0)
    if not refused and inside["region"].n_unique() == int(inside["closes_entry"].sum()):
        return exempt  # (every entry closed, none refused: the common case, cheaply)
    per = inside.group_by("region").agg(
        lines=pl.len(), first=pl.col("line_no").min(), closed=pl.col("closes_entry").any())
    # (a line refused twice was counted twice: once per bad_line)
    bad = pl.DataFrame({"line_no": refused}, schema={"line_no": pl.Int64()}).join(
        lines.select(pl.col("line_no").cast(pl.Int64()), "region"), on="line_no"
    ).group_by("region").agg(bad=pl.len())
    dropped = per.filter(pl.col("region") != exempt_region).join(
        bad, on="region", how="left").filter(pl.col("bad").is_not_null() | ~pl.col("closed"))
    for first, n_lines, n_bad in dropped.sort("region").select(
            "first", "lines", pl.col("bad").fill_null(0)).iter_rows():
        if n_lines > n_bad:
            source.skip(int(first), "the rest of a statistics entry with an unreadable line "
                        "(dropped whole)", count=int(n_lines - n_bad))
    return pl.concat([dropped["region"].cast(pl.Int64()), exempt])
