"""Device and CPU rows of sar sections -> SampleFrame rows: fields, values, intervals, hosts."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path

import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.iostat import UNKNOWN_INTERVAL_S, ColumnSpec, human_value
from iogauge.importers.sar_text.banner import parse_banner_date
from iogauge.importers.sar_text.blocks import _Block, _tokens
from iogauge.importers.sar_text.common import (
    _BANNER_RE,
    _HUMAN_VALUE_RE,
    _MAX_DST_FOLD_S,
    CPU_COLUMNS,
    CPU_SYSTEM_PARTS,
    DEV_COLUMNS,
    HUMAN_SIZE_COLUMNS,
    decimal_comma,
    device_identity,
    to_float,
)
from iogauge.model.sampleframe import SampleFrame


def device_frame(dev: pl.DataFrame, cpu: pl.DataFrame, *, name: str, order: str
                 ) -> SampleFrame:
    """SampleFrame rows of device rows (``host``, ``utc_us``, ``device``, the measures and
    the ``order`` column they are sorted by) with their CPU context (``cpu``: ``host``,
    ``utc_us`` and CPU columns; may be empty) and device identity; ``name`` is the
    ``source`` column. (Shared with the sadf readers.)"""
    if cpu.height:
        # (on the host too: 'cat' of two hosts' reports of the same day has the same times)
        dev = dev.join(cpu, on=["host", "utc_us"], how="left")
    ident = device_identity(dev["device"].unique().to_list())
    out = dev.join(ident, on="device", how="left").with_columns(
        source=pl.lit(name),
        ts=pl.from_epoch(pl.col("utc_us"), time_unit="us").dt.replace_time_zone("UTC"),
    ).sort(order).drop("utc_us", order)
    return SampleFrame(out)


def _banner_info(banners: pl.DataFrame, problems: list[tuple[int | None, str]]
                 ) -> tuple[dict[int, str], dict[int, date | None], list[str]]:
    hosts: dict[int, str] = {}
    dates: dict[int, date | None] = {}
    ambiguous: list[str] = []
    for line_no, text in banners.select("line_no", "line").iter_rows():
        m = _BANNER_RE.match(text)
        if m is None:  # pragma: no cover - the classifier used a looser pattern
            problems.append((line_no, "unreadable banner"))
            continue
        hosts[line_no] = m.group(1).strip()
        after = re.split(r"\s+_[^\s_][^\s]*_(?:\s|$)|\(\d+\s+CPU\)", m.group(2))[0]
        parsed = parse_banner_date(after)
        dates[line_no] = parsed[0] if parsed else None
        if parsed and parsed[1] is not None:
            ambiguous.append(after.strip())
    return hosts, dates, ambiguous


def _host_lookup(banner_lines: list[int], hosts: Mapping[int, str],
                 source: Source) -> Callable[[int], str]:
    """Host of the banner above a line; else --host, else the file name's stem."""
    fallback = source.host or file_stem(source.path)

    def host_at(line_no: int) -> str:
        i = bisect.bisect_right(banner_lines, line_no) - 1
        if i < 0:
            return fallback
        return hosts.get(banner_lines[i]) or fallback
    return host_at


def file_stem(path: str) -> str:
    """A file's name without compression and text suffixes (the host name of last resort)."""
    name = Path(path).name
    for suffix in (".gz", ".xz", ".bz2", ".zst", ".txt", ".log", ".out", ".json", ".csv"):
        name = name.removesuffix(suffix)
    return name or path


def _layout_groups(blocks: Mapping[int, _Block], kind: str
                   ) -> dict[tuple[str, ...], tuple[list[int], str]]:
    """Sections of one kind by column layout: layout -> (header lines, first header text)."""
    groups: dict[tuple[str, ...], tuple[list[int], str]] = {}
    for b in blocks.values():
        if b.kind == kind:
            groups.setdefault(tuple(b.tokens), ([], b.text))[0].append(b.line_no)
    return groups


def _with_intervals(rows: pl.DataFrame, timed: pl.DataFrame,
                    problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Attach ``utc_us``, ``host`` and ``interval_s``: the time since the previous sample of
    the same section (the header's time for its first rows)."""
    t = timed.select("line_no", "utc_us", "host")
    rows = rows.join(t, on="line_no", how="left")
    hdr = timed.join(rows.select(pl.col("blk").unique()), on="blk", how="semi") \
        .filter(pl.col("line_no") == pl.col("blk")).select("blk", pl.col("utc_us")
                                                           .alias("hdr_us"))
    rows = rows.sort("line_no").join(hdr, on="blk", how="left")
    changed = pl.col("utc_us") != pl.col("utc_us").shift(1).over("blk")
    prev = (pl.when(changed).then(pl.col("utc_us").shift(1).over("blk")).otherwise(None)
            .forward_fill().over("blk"))
    rows = rows.with_columns(prev_us=prev).with_columns(
        prev_us=pl.coalesce("prev_us", "hdr_us"))
    # 'sar ... 0' (since boot) prints a section's header and rows at one time: no interval
    # of its own, so a nominal one, as iostat's since-boot report (sar.c, count 0) [sysstat]
    boot = (pl.col("utc_us") == pl.col("hdr_us")).all().over("blk")
    rows = rows.with_columns(since_boot=boot).with_columns(
        interval_s=pl.when(pl.col("since_boot")).then(pl.lit(UNKNOWN_INTERVAL_S))
        .otherwise((pl.col("utc_us") - pl.col("prev_us")).cast(pl.Float64()) / 1e6))
    bad = rows.filter(pl.col("interval_s") <= 0)
    for line_no, iv in bad.select("line_no", "interval_s").iter_rows():
        hint = (" - a daylight-saving change? give the zone with --tz"
                if -_MAX_DST_FOLD_S <= iv < 0 else "")
        problems.append((line_no, (f"sample time is not after the previous sample of its "
                                  f"section ({iv:+g} s){hint}")))
    return rows.filter(pl.col("interval_s") > 0).drop("prev_us", "hdr_us")


def _fields(rows: pl.DataFrame, layout: Sequence[str], header_text: str,
            problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Split rows into fields ``f0`` .. ``fN-1``, N = the header's column count.

    sar prints every column right-aligned at the width of its header name (pr_stats.c:
    ``%9.2f`` after the ``%-11s`` time; under --pretty the name comes last, left-aligned),
    so a row as long as its header is cut at the header's column ends - far cheaper than
    splitting. A row that does not fit (a value wider than its column, a long device name)
    is split on whitespace instead; a row whose field count differs from the header's is
    reported and dropped."""
    n = len(layout)
    all_ends = [m.end() for m in re.finditer(r"\S+", header_text)]
    ends = all_ends[-n:]
    line = pl.col("line")
    name_last = layout[-1] == "DEV" and n >= 2
    # Column i spans [ends[i-1], ends[i]) (column 0 starts where the time stamp ends); its
    # first character is the separating blank.
    bounds = [all_ends[-n - 1], *ends[:-1]]
    slot_ok = [line.str.slice(b, 1) == " " for b in bounds]
    if name_last:
        fits = ((line.str.len_chars() > ends[-2] + 1)
                & (line.str.slice(ends[-2] + 1, 1) != " "))
        widths = [e - b for b, e in zip(bounds[:-1], ends[:-1], strict=True)]
    else:
        fits = line.str.len_chars() == len(header_text)
        widths = [e - b for b, e in zip(bounds, ends, strict=True)]
    rows = rows.with_columns(_fast=pl.all_horizontal([fits, *slot_ok]))
    fast = rows.filter(pl.col("_fast"))
    cols = [line.str.slice(b, w).str.strip_chars().alias(f"f{i}")
            for i, (b, w) in enumerate(zip(bounds, widths, strict=False))]
    if name_last:
        cols.append(line.str.slice(ends[-2] + 1).str.strip_chars().alias(f"f{n - 1}"))
    fast = fast.with_columns(cols)
    slow = rows.filter(~pl.col("_fast")).with_columns(_tok=_tokens())
    slow = slow.with_columns(_n=pl.col("_tok").list.len())
    bad_n = slow.filter(pl.col("_n") != n)
    for line_no, k, blk in bad_n.select("line_no", "_n", "blk").iter_rows():
        problems.append((line_no, f"{k} fields where the header at line {blk} has {n}"))
    slow = slow.filter(pl.col("_n") == n).with_columns(
        [pl.col("_tok").list.get(i).alias(f"f{i}") for i in range(n)]).drop("_tok", "_n")
    return pl.concat([fast, slow], how="vertical").sort("line_no").drop("_fast")


def _typed_values(rows: pl.DataFrame, columns: Mapping[str, int],
                  problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Cast the fields at ``columns`` (name -> index) to floats; report non-numbers.

    A locale decimal comma (de_DE: ``0,35``) is read as a point; sar prints no thousands
    separators, so a comma can only be the decimal mark."""
    if rows.height == 0:
        return rows.with_columns([pl.lit(None, pl.Float64()).alias(f"v:{n}") for n in columns])
    comma = decimal_comma(rows["line"])
    human = bool(rows["line"].head(50).str.contains(_HUMAN_VALUE_RE).any())
    rows = rows.with_columns([_value(pl.col(f"f{i}"), name, comma=comma, human=human)
                              .alias(f"v:{name}") for name, i in columns.items()])
    bad_any = pl.any_horizontal([pl.col(f"v:{n}").is_null() for n in columns])
    bad = rows.filter(bad_any)
    for row in bad.select("line_no", *[f"f{i}" for i in columns.values()],
                          *[f"v:{n}" for n in columns]).iter_rows():
        line_no, texts, values = row[0], row[1:1 + len(columns)], row[1 + len(columns):]
        name, text = next((nm, t) for nm, t, v in zip(columns, texts, values, strict=True)
                          if v is None)
        problems.append((line_no, f"column {name!r} is not a number: {text!r}"))
    return rows.filter(~bad_any)


def _value(text: pl.Expr, name: str, *, comma: bool, human: bool) -> pl.Expr:
    """A printed value of column ``name`` as a float (null if it is not a number); ``human``:
    the section was printed with --human (unit letters on kB amounts, '%' on percentages)."""
    if not human:
        return to_float(text, comma=comma)
    value = human_value(text.str.strip_chars(),
                        ColumnSpec(None, size=name in HUMAN_SIZE_COLUMNS))
    return pl.when(value.is_finite()).then(value)


def _device_rows(timed: pl.DataFrame, data_rows: pl.DataFrame, blocks: Mapping[int, _Block],
                 problems: list[tuple[int | None, str]], source: Source) -> pl.DataFrame:
    frames: list[pl.DataFrame] = []
    for layout, (blk_ids, header_text) in _layout_groups(blocks, "dev").items():
        rows = _fields(data_rows.filter(pl.col("blk").is_in(blk_ids)), layout, header_text,
                       problems)
        dev_idx = layout.index("DEV")
        known = {name: i for i, name in enumerate(layout) if name in DEV_COLUMNS}
        unknown = [name for name in layout if name not in DEV_COLUMNS and name != "DEV"]
        if unknown:
            source.note(f"device column(s) {', '.join(unknown)} not imported (no SampleFrame "
                        "column)")
        rows = _typed_values(rows, known, problems)
        rows = _with_intervals(rows, timed, problems)
        if rows["since_boot"].any():
            source.note("since-boot statistics ('sar ... 0': header and rows at one time): "
                        f"rows flagged since_boot, with a nominal interval_s of "
                        f"{UNKNOWN_INTERVAL_S:g} s")
        exprs = [pl.col("line_no"), pl.col("blk"), pl.col("utc_us"), pl.col("host"),
                 pl.col("interval_s"), pl.col("since_boot"),
                 pl.col(f"f{dev_idx}").alias("device")]
        for name in known:
            target, factor = DEV_COLUMNS[name]
            exprs.append((pl.col(f"v:{name}") * factor).alias(target))
        frames.append(rows.select(exprs))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal")


def _cpu_rows(timed: pl.DataFrame, data_rows: pl.DataFrame, blocks: Mapping[int, _Block],
              problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """The 'all' rows of CPU sections, one per host and sample time (the first section
    wins)."""
    frames: list[pl.DataFrame] = []
    for layout, (blk_ids, header_text) in _layout_groups(blocks, "cpu").items():
        cpu_idx = layout.index("CPU")
        # Only the 'all' rows are wanted: select them before splitting every per-CPU row.
        rows = data_rows.filter(pl.col("blk").is_in(blk_ids)
                                & pl.col("line").str.contains(r"\sall(?:\s|$)"))
        rows = _fields(rows, layout, header_text, problems)
        rows = rows.filter(pl.col(f"f{cpu_idx}") == "all")
        wanted = {n: i for i, n in enumerate(layout) if n in CPU_COLUMNS or n in
                  CPU_SYSTEM_PARTS}
        rows = _typed_values(rows, wanted, problems)
        rows = rows.join(timed.select("line_no", "utc_us", "host"), on="line_no", how="left")
        exprs = [pl.col("host"), pl.col("utc_us")]
        exprs += [pl.col(f"v:{n}").alias(CPU_COLUMNS[n]) for n in wanted if n in CPU_COLUMNS]
        if "%sys" in wanted:
            parts = [pl.col(f"v:{p}") for p in CPU_SYSTEM_PARTS if p in wanted]
            exprs.append(pl.sum_horizontal(parts).round(2).alias("cpu_system_pct"))
        frames.append(rows.select(exprs))
    if not frames:
        return pl.DataFrame(schema={"host": pl.String(), "utc_us": pl.Int64()})
    cpu = pl.concat(frames, how="diagonal")
    return cpu.unique(subset=["host", "utc_us"], keep="first", maintain_order=True)


def _drop_cut_interval(dev: pl.DataFrame, cut: tuple[int, int | None, int | None] | None,
                       df: pl.DataFrame, source: Source) -> pl.DataFrame:
    """Keep whole intervals only: when the file was cut off, drop its last, partial interval.

    ``cut`` is (line, section, time of day) of a last line that has no newline. That line is
    never parsed; if it lies in the last device section and carries the time of that
    section's last sample (or its time itself is cut), that sample is incomplete. Without a
    cut line, a last device section that ends the file with no 'Average:' lines and whose
    last sample lists fewer devices than the one before is taken as cut off too.
    """
    last_blk = int(dev.sort("line_no")["blk"][-1])
    in_last = dev.filter(pl.col("blk") == last_blk)
    last_us = in_last["utc_us"][-1]
    last_tod_rows = df.filter(pl.col("line_no") == in_last["line_no"].max())["tod"]
    last_tod = last_tod_rows[0] if last_tod_rows.len() else None
    after = df.filter(pl.col("line_no") > in_last["line_no"].max())
    counts = in_last.group_by("utc_us", maintain_order=True).len()
    partial = False
    if cut is not None:
        _cut_line, cut_blk, cut_tod = cut
        partial = cut_blk == last_blk and (cut_tod == last_tod or (
            # the cut line's own time is lost: whole only if as long as the one before
            cut_tod is None and (counts.height < 2 or counts["len"][-1] < counts["len"][-2])))
    else:
        open_end = not bool(after["kind"].is_in(["summary", "header"]).any())
        partial = open_end and counts.height >= 2 and counts["len"][-1] < counts["len"][-2]
    if partial:
        n = int(counts["len"][-1])
        source.note(f"file cut off inside its last interval: the {n} device row(s) of that "
                    "partial interval were dropped (whole intervals only)")
        return dev.filter(~((pl.col("blk") == last_blk) & (pl.col("utc_us") == last_us)))
    return dev
