"""Phase A: what one piece of ``iostat`` text holds, found without any state: its
structural lines, its device lines read under their ``Device`` header, its avg-cpu values."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from iogauge.importers.iostat import native
from iogauge.importers.iostat.columns import (
    CPU_TARGETS,
    DEVICE_WIDTH,
    Layout,
    cpu_columns,
    human_value,
    layout_of,
    number,
)
from iogauge.importers.iostat.fixed import decode_lines, line_names
from iogauge.importers.iostat.lines import (
    BLANK,
    CPUH,
    CPUV,
    DEVH,
    ROW,
    STRUCT_KIND,
    Lines,
    classify,
    frame_of,
    utf8,
)

NOT_A_NUMBER = ("a value is not a number (as iostat prints them: 12.34, 1,5, 33.7M or "
                 "4.4%)")
NOT_UNDERSTOOD = ("line not understood: not a device line of a 'Device' table, a time "
                   "stamp, an avg-cpu block or a banner")


@dataclass
class Scan:
    """What one piece holds, found without any state (phase A).

    Line indices are the file's 0-based line numbers.

    Attributes:
        n_lines: lines in the piece.
        struct: banner, stamp, avg-cpu, avg-cpu values and Device header lines
            (``i``, ``line``, ``kind``; the avg-cpu values are read here, into ``cpu``).
        rows: parsed device lines (``i``, ``device``, ``part`` flag, measures).
        cpu: avg-cpu values (``i`` of the values line, cpu_* columns).
        orphans: indices of lines that are not in any table.
        bad: (line number, reason) of device lines that could not be read.
        notes: notes of the layouts met (unknown columns …).
        last_kind: kind of the piece's last line; ``newline``: it ends with one.
        last_row: index of the last device line (orphans included), or -1.
        unclean: some value may be NaN, infinite or negative (read as text by polars, not
            by the digit decoder, which reads digits only): see :func:`.assemble.clean_values`.
    """

    n_lines: int
    struct: pl.DataFrame
    rows: pl.DataFrame
    cpu: pl.DataFrame
    orphans: pl.Series
    bad: list[tuple[int, str]]
    notes: list[str]
    last_kind: int
    newline: bool
    last_row: int
    unclean: bool = False


def scan_piece(buf: bytes | bytearray, final: bool, layouts: dict[str, Layout]) -> Scan:
    """Phase A: classify the lines of a piece and read its device and avg-cpu lines.

    Line indices are the piece's own (0 = its first line): a piece is scanned before the
    number of lines above it is known (:func:`shift`)."""
    buf = utf8(buf)
    if native.kernels() is None:
        buf = bytes(buf)  # the numpy routines slice lines out of it as bytes
    lines = Lines(buf)
    n = lines.n
    newline = not buf or buf.endswith(b"\n")
    kind = classify(lines)
    struct_idx = np.flatnonzero(STRUCT_KIND[kind])
    struct_kind = kind[struct_idx]
    text = lines.text(struct_idx)
    struct = pl.DataFrame({"i": pl.Series("i", struct_idx, dtype=pl.Int64), "line": text,
                           "kind": pl.Series("kind", struct_kind, dtype=pl.UInt8)})
    rows = np.flatnonzero(kind == ROW)
    notes: list[str] = []
    bad: list[tuple[int, str]] = []
    last_kind = int(kind[-1]) if n else BLANK
    last_row = int(rows[-1]) if rows.size else -1
    # a device line belongs to the table whose header is the last non-device line above it
    # (a piece starts after a blank line: nothing above counts)
    above = np.maximum.accumulate(np.where(kind != ROW, np.arange(n), -1))[rows]
    in_table = (above >= 0) & (kind[np.maximum(above, 0)] == DEVH)
    orphans = pl.Series("i", rows[~in_table], dtype=pl.Int64)
    header_of = above[in_table]
    unclean = [False]
    parsed = parse_rows(lines, struct, rows[in_table], header_of, layouts, notes, bad, unclean)
    cpu = parse_cpu(lines, kind, struct, bad, unclean)
    return Scan(n, struct, parsed, cpu, orphans, bad, notes, last_kind, newline, last_row,
                unclean[0])


def stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames one under the other: their chunks appended when the columns agree (no copy),
    else matched by name, missing columns null."""
    if len(frames) == 1:
        return frames[0]
    first = frames[0].schema
    if all(f.schema == first for f in frames[1:]):
        return pl.concat(frames, how="vertical")
    return pl.concat(frames, how="diagonal_relaxed")


def merge(scans: list[Scan]) -> Scan:
    """Consecutive pieces' scans as one (phase B's fixed costs are paid once per batch)."""
    if len(scans) == 1:
        return scans[0]
    last = scans[-1]
    return Scan(
        n_lines=sum(x.n_lines for x in scans),
        struct=stack([x.struct for x in scans]),
        rows=stack([x.rows for x in scans]),
        cpu=stack([x.cpu for x in scans]),
        orphans=pl.concat([x.orphans for x in scans]),
        bad=[b for x in scans for b in x.bad],
        notes=[n for x in scans for n in x.notes],
        last_kind=last.last_kind, newline=last.newline,
        last_row=max(x.last_row for x in scans),
        unclean=any(x.unclean for x in scans))


def shift(scan: Scan, line0: int) -> Scan:
    """``scan`` with line indices counted from the file's start (``line0`` lines above)."""
    if line0 == 0:
        return scan
    i = pl.col("i") + line0
    return replace(scan, struct=scan.struct.with_columns(i), rows=scan.rows.with_columns(i),
                   cpu=scan.cpu.with_columns(i), orphans=scan.orphans + line0,
                   bad=[(ln + line0, reason) for ln, reason in scan.bad],
                   last_row=scan.last_row + line0 if scan.last_row >= 0 else -1)


def parse_rows(lines: Lines, struct: pl.DataFrame, rows: np.ndarray, header_of: np.ndarray,
                layouts: dict[str, Layout], notes: list[str],
                bad: list[tuple[int, str]], unclean: list[bool]) -> pl.DataFrame:
    """Device lines ``rows`` (under the Device headers ``header_of``) -> numbers, per
    distinct Device header (a few per file)."""
    if rows.size == 0:
        return pl.DataFrame(schema={"i": pl.Int64, "device": pl.String, "part": pl.Boolean})
    headers = struct.filter(pl.col("kind") == DEVH)
    texts = headers["line"].unique(maintain_order=True).to_list()
    for text in texts:
        lay = layouts.get(text)
        if lay is None:
            lay = layouts[text] = layout_of(text)
        notes.extend(lay.notes)
    groups = [(texts[0], rows)]
    if len(texts) > 1:
        code = headers["line"].replace_strict({t: k for k, t in enumerate(texts)},
                                              return_dtype=pl.Int64).to_numpy()
        row_code = code[np.searchsorted(headers["i"].to_numpy(), header_of)]
        groups = [(t, rows[row_code == k]) for k, t in enumerate(texts)]
    frames: list[pl.DataFrame] = []
    for text, sel in groups:
        if sel.size:
            lay = layouts[text]
            part = lay.part or lay.device_last
            frames.append(parse_layout(lay, lines, sel, bad, unclean)
                          .with_columns(pl.lit(part).alias("part")))
    out = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    return out.sort("i") if len(frames) > 1 else out


def parse_layout(lay: Layout, lines: Lines, sel: np.ndarray, bad: list[tuple[int, str]],
                  unclean: list[bool]) -> pl.DataFrame:
    """Numbers of the device lines ``sel`` under one header: fixed-width fast path, then
    regex.

    sysstat prints the name as ``%-13s`` and each value right-aligned in a fixed width
    (``" %*.2f"``), so a line exactly as long as its header has no overflowed field and
    each value lies between the ends of two header names (:func:`decode_fixed`). Lines
    that differ (long names, overflowing values, human units, signs, decimal commas) take
    the regex path (:func:`parse_slow`), whose values may be NaN or negative (``unclean``).
    """
    width = DEVICE_WIDTH
    header_len = len(lay.text.encode("utf-8"))
    fixed = lines.lens[sel] == header_len
    if lay.device_last or not lay.cols or lay.ends[1] - width < 2 or not fixed.any():
        unclean[0] = True
        return parse_slow(lay, frame_of(lines, sel), bad)
    cand = sel[fixed]
    values, ok = decode_lines(lines, cand, header_len, lay.fixed_fields())
    device, named = line_names(lines, cand, header_len, width)
    ok &= named
    cols: dict[str, pl.Series] = {"i": pl.Series("i", cand, dtype=pl.Int64),
                                  "device": device, **lay.columns(values)}
    fast = pl.DataFrame(cols)
    slow = sel[~fixed]
    if not ok.all():
        fast = fast.filter(pl.Series("ok", ok))
        slow = np.sort(np.concatenate([slow, cand[~ok]]))
    if slow.size == 0:
        return fast
    unclean[0] = True
    # file order: lines that took the regex path go back between their neighbours
    return pl.concat([fast, parse_slow(lay, frame_of(lines, slow), bad)],
                     how="vertical_relaxed").sort("i")


def parse_slow(lay: Layout, rows: pl.DataFrame, bad: list[tuple[int, str]]) -> pl.DataFrame:
    """Whitespace-split lines (any width), --human suffixes, decimal commas."""
    rows = _merge_name_lines(lay, rows)
    n = lay.n_fields
    pattern = r"^\s*(\S+)" + r"\s+(\S+)" * (n - 1) + r"\s*$"
    groups = rows.select("i", pl.col("line").str.extract_groups(pattern).alias("g"),
                         pl.col("line").str.count_matches(r"\S+").alias("nf"))
    matched = groups.filter(pl.col("g").struct.field("1").is_not_null())
    for i, nf in groups.filter(pl.col("g").struct.field("1").is_null()).select(
            "i", "nf").iter_rows():
        bad.append((int(i) + 1, (f"expected {n} fields as in the Device header "
                                 f"'{' '.join(lay.tokens[:4])} …', found {nf}")))
    dev_idx = n - 1 if lay.device_last else 0
    exprs: list[pl.Expr] = [pl.col("i"),
                            pl.col("g").struct.field(str(dev_idx + 1)).alias("device")]
    for idx, _tok, spec in lay.cols:
        tok = pl.col("g").struct.field(str(idx + 1))
        exprs.append(human_value(tok, spec).alias(spec.target or ""))
    out = matched.select(exprs)
    if lay.cols:
        failed = out.filter(pl.any_horizontal([pl.col(spec.target or "").is_null()
                                               for _, _, spec in lay.cols]))
        if failed.height:
            for i in failed["i"].to_list():
                bad.append((int(i) + 1, NOT_A_NUMBER))
            out = out.filter(~pl.col("i").is_in(failed["i"].implode()))
    return out


def _merge_name_lines(lay: Layout, rows: pl.DataFrame) -> pl.DataFrame:
    """sysstat 10/11 ``-h``: a device name alone on a line, its values on the next."""
    if lay.device_last:
        return rows
    single = ~pl.col("line").str.strip_chars().str.contains(r"\s")
    nxt_i = pl.col("i").shift(-1)
    nxt_line = pl.col("line").shift(-1)
    flagged = rows.with_columns(
        (single & (nxt_i == pl.col("i") + 1)
         & nxt_line.str.contains(r"^\s")).fill_null(False).alias("name_only"))
    if not flagged["name_only"].any():
        return rows
    merged = flagged.with_columns(
        pl.when(pl.col("name_only"))
        .then(pl.col("line").str.strip_chars() + pl.lit(" ") + nxt_line)
        .otherwise(pl.col("line")).alias("line"),
        pl.col("name_only").shift(1).fill_null(False).alias("consumed"))
    return merged.filter(~pl.col("consumed")).drop("name_only", "consumed")


def parse_cpu(lines: Lines, kind: np.ndarray, struct: pl.DataFrame,
               bad: list[tuple[int, str]], unclean: list[bool]) -> pl.DataFrame:
    """avg-cpu values (the line after each avg-cpu header); fixed width like device lines,
    read by :func:`decode_fixed`; other lines split at blanks."""
    def empty() -> pl.DataFrame:
        return pl.DataFrame(schema={"i": pl.Int64, **dict.fromkeys(CPU_TARGETS, pl.Float64)})

    vals = np.flatnonzero(kind == CPUV)
    if vals.size == 0:
        return empty()
    has_header = kind[vals - 1] == CPUH
    for i in vals[~has_header].tolist():
        bad.append((i + 1, "avg-cpu values without their header"))
    vals = vals[has_header]
    if vals.size == 0:
        return empty()
    # the header of each values line, as a code into its few distinct texts
    heads = np.flatnonzero(struct["kind"].to_numpy() == CPUH)
    htext = struct["line"].gather(heads)
    texts = htext.unique(maintain_order=True).to_list()
    code = np.zeros(vals.size, dtype=np.int64)
    if len(texts) > 1:
        head_code = htext.replace_strict({t: k for k, t in enumerate(texts)},
                                         return_dtype=pl.Int64).to_numpy()
        code = head_code[np.searchsorted(struct["i"].to_numpy()[heads], vals - 1)]
    out: list[pl.DataFrame] = []
    for c, text in enumerate(texts):
        grp = vals[code == c]
        names, cols, width = cpu_columns(text)
        fixed = lines.lens[grp] == width
        retry = grp[~fixed]
        if fixed.any():
            cand = grp[fixed]
            ok = np.ones(cand.size, dtype=bool)
            values: list[np.ndarray] = []
            if cols:
                values, ok = decode_lines(lines, cand, width,
                                           [(a, b) for _t, _j, a, b in cols])
            out.append(pl.DataFrame({"i": pl.Series("i", cand[ok], dtype=pl.Int64),
                                     **{t: v[ok] for (t, _j, _a, _b), v in zip(cols, values,
                                                                              strict=True)}}))
            retry = np.sort(np.concatenate([retry, cand[~ok]]))
        if retry.size:
            unclean[0] = True
            slow = frame_of(lines, retry)
            toks = slow["line"].str.extract_all(r"\S+")
            fits = toks.list.len() == len(names)
            for i in slow.filter(~fits)["i"].to_list():
                bad.append((int(i) + 1, (f"avg-cpu values: expected {len(names)} fields "
                                         f"under '{text.strip()}'")))
            frame = slow.filter(fits).with_columns(toks.filter(fits).alias("t")).select(
                "i", *[number(pl.col("t").list.get(j)).alias(t) for t, j, _a, _b in cols])
            if cols:
                good = pl.all_horizontal([pl.col(t).is_not_null() for t, _j, _a, _b in cols])
                for i in frame.filter(~good)["i"].to_list():
                    bad.append((int(i) + 1, "avg-cpu values: not a number"))
                frame = frame.filter(good)
            out.append(frame)
    if not out:
        return empty()
    if len(out) == 1 and len(texts) == 1 and out[0].height == vals.size:
        return out[0]  # every line read by the fixed-width decoder: already in file order
    return pl.concat(out, how="diagonal_relaxed").sort("i")
