"""sysstat ``sadf -d`` (semicolon CSV) and ``sadf -j`` (JSON) exports of sa files.

``sadf -d FILE -- -d -p`` (sysstat 9 to 12; sadf.c, rndr_stats.c)::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;2026-11-22 10:49:25 UTC;vda;12.00;0.00;64.00;80.00;12.00;0.00;0.17;0.40
    vm;-1;2026-11-22 10:49:43 UTC;LINUX-RESTART	(2 CPU)

Every activity gets its own ``# hostname;interval;timestamp;...`` header, repeated after each
restart. ``interval`` is the length of the interval in seconds as sadf computed it (from the
records' uptimes) and ``timestamp`` its end: UTC (``... UTC``), seconds since the epoch
(``-U``), or local time without a zone (``-T``/``-t``: ``--tz`` or assumed UTC). Columns are
those of ``sar -d`` of the same generation (sar_text.DEV_COLUMNS); the CPU activity (``CPU``
``-1`` = all) fills ``cpu_*_pct``. Restart and comment records (``LINUX-RESTART``, ``COM``)
are skipped. The locale may print decimal commas.

A ``sadf -d`` export is read a piece of :data:`CSV_CHUNK_BYTES` at a time
(:func:`iter_parse`), cut where an interval starts; the piece's last two intervals are read
again with the next one (a cut last interval is judged against the one before it), which
also gets the header of the section it starts inside and every CPU row read so far (sadf
prints a stretch's CPU section before its DEV section). 100 MB import to Parquet at
0.18-0.22 GB peak (0.21 GB for an export whose 255,102 CPU lines come first, which took
0.27 GB while the CPU rows were one table remade each piece), where one read of the whole
took 0.97-1.16 GB, with the same rows, in 3.6-3.9 s against 2.7-3.3 s. Local stamps
(``-T``) keep the latest stamp of each section across pieces, for the DST fall-back hour.

``sadf -j`` documents are read by :mod:`iogauge.importers.sadf_json` (the same format
name: one sniff for both exports).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers import sadf_common, sadf_json
from iogauge.importers._lines import LineCarry, line_frames
from iogauge.importers.base import Source
from iogauge.importers.io import decode, head_then
from iogauge.importers.sadf_common import fallback_host, utc_us
from iogauge.importers.sar_text.common import (
    CPU_COLUMNS,
    CPU_SYSTEM_PARTS,
    DEV_COLUMNS,
    decimal_comma,
    read_lines,
    report,
    to_float,
)
from iogauge.importers.sar_text.rows import device_frame
from iogauge.model.sampleframe import SampleFrame

NAME = sadf_common.NAME
DESCRIPTION = "sysstat sadf -d (CSV) and sadf -j (JSON) exports of sa files"
EXPECTS = ("a '# hostname;interval;timestamp;...' header line (sadf -d), or a JSON document "
           "{\"sysstat\": {\"hosts\": [...]}} with 'file-date' and object timestamps (sadf -j)")

_CSV_HEADER_RE = re.compile(r"^#\s*hostname;interval;timestamp;")
#: A restart or comment record of sadf -d: 'host;-1;<timestamp>;LINUX-RESTART ...'.
_CSV_SPECIAL_RE = re.compile(r"^[^;]*;-1;[^;]+;(?:LINUX-RESTART|COM )")
_JSON_SADF_RE = re.compile(r'"file-date"\s*:|"timestamp"\s*:\s*\{')

def _first_char(head: str) -> str:
    stripped = head.lstrip("\ufeff \t\r\n")
    return stripped[:1]


def sniff(head: str) -> bool:
    """``# hostname;interval;timestamp;`` (sadf -d), or a ``{"sysstat": ...`` document with
    sadf's object timestamps or ``file-date`` (sadf -j; iostat -o JSON has neither)."""
    if _first_char(head) == "{":
        return '"sysstat"' in head[:4096] and _JSON_SADF_RE.search(head) is not None
    for raw in head.splitlines():
        text = raw.strip()
        if not text or _CSV_SPECIAL_RE.match(text):
            continue  # a file may open with a restart mark (sa files begin at boot)
        return _CSV_HEADER_RE.match(text) is not None
    return False


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def parse(data: bytes, source: Source) -> SampleFrame:
    """Parse a sadf -d or sadf -j export (see the module docstring); sadf -d longer than
    :data:`CSV_CHUNK_BYTES` is read a piece at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


# ---- sadf -d -------------------------------------------------------------------------------


#: A line's ';'-separated fields (a header's after its '# '). Split only where they are read
#: (headers, the DEV and CPU sections, a batch at a time): the lists of a whole file cost
#: some 15x its size.
_FIELDS = (pl.when(pl.col("line").str.starts_with("#"))
           .then(pl.col("line").str.strip_chars_start("# ").str.split(";"))
           .otherwise(pl.col("line").str.split(";")))

#: Sample lines split into fields at a time (see _FIELDS).
BATCH_ROWS = 20_000


#: Bytes read per piece of a sadf -d export (:func:`iter_parse`). 100 MB of one long stretch
#: (its CPU section, then its DEV section) peaked at 0.27 GB with 2 MiB pieces and
#: 20,000-row batches, 0.30 GB with 4 MiB and 200,000.
CSV_CHUNK_BYTES = 2 << 20


@dataclass
class _CsvCarry(LineCarry):
    """What the pieces of a sadf -d export hand on (:func:`iter_parse`), besides the lines
    of the intervals a piece ends with, read again with the next piece.

    Attributes:
        header: the last header line read (``line_no``, ``line``): the section the next
            piece's first lines belong to.
        cpu: the CPU rows read so far, a table a piece (sadf prints a stretch's CPU section
            before its DEV section: a DEV row's CPU context was read before it); cpu_keys:
            their (host, utc_us), against which a piece's rows are checked (the first of a
            time stamp is kept). Made one table again and again, with a ``unique`` over it
            each piece, they raised the peak of a 100 MB export whose 255,102 CPU lines
            come first from 0.20 to 0.27 GB: the copies freed went back to the system only
            later.
        fold_max: per section, the latest local stamp read (a DST fall-back repeat is a
            stamp earlier than it).
        restarts: LINUX-RESTART records; dev_sections: DEV headers; dev_rows: rows read.
    """

    header: pl.DataFrame | None = None
    cpu: list[pl.DataFrame] = field(default_factory=list)
    cpu_keys: pl.DataFrame | None = None
    fold_max: dict[int, int] = field(default_factory=dict)
    restarts: int = 0
    dev_sections: int = 0
    dev_rows: int = 0


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CSV_CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`: a sadf -d export a piece of about ``chunk_bytes`` at a
    time, cut where an interval starts (the last two intervals are read again with the
    next piece); a sadf -j document by :func:`iogauge.importers.sadf_json.iter_parse` (in
    pieces of its own :data:`~iogauge.importers.sadf_json.CHUNK_BYTES`)."""
    head = stream.read(4096)
    if _first_char(head.decode("utf-8", errors="replace")) == "{":
        yield from sadf_json.iter_parse(head_then(head, stream), source)
        return
    carry = _CsvCarry()
    pieces = line_frames(head_then(head, stream), chunk_bytes, carry,
                         source.path, read_lines)
    for piece, last, cut in pieces:
        lines = piece
        del piece
        if not last:
            at = _interval_start(lines)
            if at is None:
                carry.lines = lines  # fewer than two intervals so far: read on
                continue
            carry.lines = lines.filter(pl.col("line_no") >= at)
            lines = lines.filter(pl.col("line_no") < at)
        frame = _csv_piece(lines, source, carry, whole=not cut)
        del lines
        if frame is not None and len(frame):
            yield frame
    if carry.restarts:
        source.note(f"{carry.restarts} LINUX-RESTART record(s) skipped; sadf gives every "
                    "interval its own length, so intervals after a restart are exact")
    if not carry.dev_sections:
        raise InputFormatError(source.path, None, "no disk activity ('# ...;DEV;tps;...' "
                               "header): export with sadf -d FILE -- -d")
    if not carry.dev_rows:
        raise InputFormatError(source.path, None, "the disk activity holds no rows")


#: A sample line's time stamp (its third field; null for a header).
_STAMP = pl.col("line").str.extract(r"^[^;#]*;[^;]*;([^;]*);", 1)


def _interval_start(lines: pl.DataFrame) -> int | None:
    """Where the piece's last two intervals start (the first line of the one before the
    last: a cut last interval is judged against the one before it, see
    :func:`_drop_partial_csv`), None if that is the piece's first line."""
    for tail in (lines.tail(8192), lines):
        t = tail.filter(pl.col("line").is_not_null()).select("line_no", _STAMP.alias("s"))
        t = t.with_columns(new=(pl.col("s") != pl.col("s").shift(1)).fill_null(True)
                           | pl.col("s").is_null())
        starts = t.filter(pl.col("new"))["line_no"]
        if starts.len() > 1 and int(starts[-2]) > int(lines["line_no"][0]):
            return int(starts[-2])
        if tail.height == lines.height:
            break
    return None


def _csv_piece(lines: pl.DataFrame, source: Source, carry: _CsvCarry, *, whole: bool
               ) -> SampleFrame | None:
    """The rows of one piece of a sadf -d export (whole intervals; the file's end when it
    is the last); ``whole``: the file ends with a line break."""
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None
    carried = -1
    if carry.header is not None:  # the section this piece's first lines belong to
        carried = int(carry.header["line_no"][0])
        lines = pl.concat([carry.header, lines])
    problems: list[tuple[int | None, str]] = []
    df = _csv_lines(lines, carry)
    del lines
    cut_line: int | None = None
    if not whole:
        cut_line = int(df.filter(pl.col("line").is_not_null())["line_no"][-1])
        source.note(f"file ends in the middle of line {cut_line} (cut off); that line was "
                    "ignored")
    item = pl.col("item")
    special = item.str.starts_with("LINUX-RESTART") | item.str.starts_with("COM ")
    rows = df.filter((pl.col("kind") == "data") & (pl.col("line_no") != (cut_line or 0)))
    carry.restarts += int(rows.select(item.str.starts_with("LINUX-RESTART").sum()).item()
                          or 0)
    rows = rows.filter(~special.fill_null(False))
    orphans = rows.filter(pl.col("blk").is_null())
    problems += [(n, "data line before any '# hostname;interval;timestamp;...' header")
                 for n in orphans["line_no"]]
    rows = rows.filter(pl.col("blk").is_not_null())
    layouts = _csv_layouts(df, carried, problems, carry)
    dev_frames, cpu_frames = _csv_sections(rows, layouts, problems, source)
    if not dev_frames and not cpu_frames:
        report(source, problems)
        return None
    empty = pl.DataFrame(schema={"blk": pl.Int64(), "order": pl.Int64(),
                                 "local_s": pl.Int64(), "is_utc": pl.Boolean(),
                                 "interval_s": pl.Float64()})
    dev = pl.concat(dev_frames, how="diagonal") if dev_frames else empty
    cpu = pl.concat(cpu_frames, how="diagonal") if cpu_frames else pl.DataFrame()
    bad_iv = dev.filter(pl.col("interval_s") <= 0)
    problems += [(n, f"interval {iv:g} s is not positive")
                 for n, iv in bad_iv.select("order", "interval_s").iter_rows()]
    report(source, problems)
    dev = dev.filter(pl.col("interval_s") > 0)
    both = pl.concat([dev.select("blk", "order", "local_s", "is_utc"),
                      cpu.select("blk", "order", "local_s", "is_utc") if cpu.height
                      else empty.drop("interval_s")]).sort("order")
    both = both.with_columns(utc_us(both, source, carry.fold_max).alias("utc_us")).select(
        "order", "utc_us")
    if cpu.height:
        _keep_cpu(cpu.join(both, on="order", how="left"), carry)
    if dev.height == 0:
        return None
    dev = dev.join(both, on="order", how="left")
    carry.dev_rows += dev.height  # (a cut last interval dropped still counts: not an error)
    if cut_line is not None:
        dev = _drop_partial_csv(dev, df, cut_line, source)
    cpu_now = pl.DataFrame()
    if carry.cpu and dev.height:  # (the CPU rows of this piece's times only)
        lo, hi = dev["utc_us"].min(), dev["utc_us"].max()
        cpu_now = pl.concat([c.filter(pl.col("utc_us").is_between(lo, hi))
                             for c in carry.cpu], how="diagonal_relaxed")
    return device_frame(dev.drop("blk", "local_s", "is_utc"), cpu_now, name=NAME,
                        order="order")


def _csv_lines(lines: pl.DataFrame, carry: _CsvCarry) -> pl.DataFrame:
    """The piece's lines with their ``kind`` (blank, header, data), number of fields
    ``n``, fourth field ``item`` and section ``blk`` (its header's line); the carry keeps
    the last header for the next piece."""
    line = pl.col("line")
    df = lines.with_columns(
        kind=pl.when(line.is_null()).then(pl.lit("blank"))
        .when(line.str.starts_with("#")).then(pl.lit("header"))
        .otherwise(pl.lit("data")),
        # as many fields as split(";") gives: one more than the separators
        n=(line.str.count_matches(";", literal=True) + 1).cast(pl.UInt32()),
        # the fourth field (DEV, CPU, or a LINUX-RESTART / COM record), as list.get(3)
        item=line.str.extract(r"^(?:[^;]*;){3}([^;]*)", 1),
    )
    df = df.with_columns(grp=(pl.col("kind") == "header").cum_sum()).with_columns(
        blk=pl.when(pl.col("grp") > 0).then(pl.col("line_no").first().over("grp")))
    last_header = df.filter(pl.col("kind") == "header").tail(1)
    if last_header.height:
        carry.header = last_header.select("line_no", "line")
    return df


def _csv_layouts(df: pl.DataFrame, carried: int, problems: list[tuple[int | None, str]],
                 carry: _CsvCarry) -> dict[tuple[str, ...], list[int]]:
    """The header layouts of the piece and the sections (header lines) under each; headers
    sadf -d does not write are refused (the ``carried`` one was judged with its piece)."""
    headers = df.filter(pl.col("kind") == "header").select("line_no", _FIELDS).rows()
    layouts: dict[tuple[str, ...], list[int]] = {}
    for line_no, fields in headers:
        own = line_no != carried  # (the carried header was judged with its own piece)
        if "[...]" in ";".join(fields):
            if own:
                problems.append((line_no, ("sadf -dh (all activities on one line) is not "
                                          "supported: export with sadf -d without -h")))
            continue
        if len(fields) < 4 or fields[:3] != ["hostname", "interval", "timestamp"]:
            if own:
                problems.append((line_no, ("header does not start with "
                                          "'# hostname;interval;timestamp;'")))
            continue
        if own and fields[3] == "DEV":
            carry.dev_sections += 1
        layouts.setdefault(tuple(fields), []).append(line_no)
    return layouts


def _csv_sections(rows: pl.DataFrame, layouts: dict[tuple[str, ...], list[int]],
                  problems: list[tuple[int | None, str]], source: Source
                  ) -> tuple[list[pl.DataFrame], list[pl.DataFrame]]:
    """The values of the DEV and CPU sections' rows, a batch of rows at a time; rows with
    another number of fields than their header are refused."""
    dev_frames: list[pl.DataFrame] = []
    cpu_frames: list[pl.DataFrame] = []
    for layout, blks in layouts.items():
        if layout[3] not in ("DEV", "CPU"):
            continue
        part = rows.filter(pl.col("blk").is_in(blks))
        bad_n = part.filter(pl.col("n") != len(layout))
        problems += [(n, f"{k} fields where the header at line {b} has {len(layout)}")
                     for n, k, b in bad_n.select("line_no", "n", "blk").iter_rows()]
        part = part.filter(pl.col("n") == len(layout))
        if layout[3] != "DEV" and "%idle" not in layout:
            continue
        comma = decimal_comma(part["line"])
        frames = dev_frames if layout[3] == "DEV" else cpu_frames
        for start in range(0, max(part.height, 1), BATCH_ROWS):
            batch = part.slice(start, BATCH_ROWS).with_columns(_FIELDS.alias("fields"))
            frames.append(_csv_values(batch, layout, problems, source,
                                      dev=layout[3] == "DEV", comma=comma))
    return dev_frames, cpu_frames


def _keep_cpu(cpu: pl.DataFrame, carry: _CsvCarry) -> None:
    """The piece's CPU rows (with ``utc_us``) not seen before, kept in the carry (the last
    intervals are read again with the next piece)."""
    # (the host names are views into the piece's text and split fields: copied, so
    # that the rows kept do not keep those buffers - 50 MB a 4 MiB piece)
    cpu = cpu.drop("blk", "order", "local_s", "is_utc", "interval_s").with_columns(
        pl.col("host").cast(pl.Categorical()).cast(pl.String()))
    cpu = cpu.unique(subset=["host", "utc_us"], keep="first", maintain_order=True)
    if carry.cpu_keys is not None:  # (the last intervals are read again: seen rows go)
        cpu = cpu.join(carry.cpu_keys, on=["host", "utc_us"], how="anti",
                       maintain_order="left")
    if cpu.height:
        carry.cpu.append(cpu)
        keys = cpu.select("host", "utc_us")
        carry.cpu_keys = (keys if carry.cpu_keys is None
                          else pl.concat([carry.cpu_keys, keys], rechunk=False))


def _csv_values(part: pl.DataFrame, layout: tuple[str, ...],
                problems: list[tuple[int | None, str]], source: Source, *,
                dev: bool, comma: bool) -> pl.DataFrame:
    """The rows of ``part`` (sample lines of one layout, split into ``fields``) as values;
    ``comma``: the section prints decimal commas (:func:`decimal_comma` of all its lines)."""
    f = pl.col("fields")
    stamp = f.list.get(2).str.strip_chars()
    epoch = stamp.str.contains(r"^\d+$")
    m = stamp.str.extract_groups(
        r"^(?P<dt>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\s+(?P<zone>UTC|GMT))?$")
    naive = m.struct.field("dt").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False,
                                                 time_unit="us")
    local_s = (pl.when(epoch).then(stamp.cast(pl.Int64(), strict=False))
               .otherwise(naive.dt.epoch("s")))
    part = part.with_columns(
        host=f.list.get(0),
        interval_s=to_float(f.list.get(1)),
        local_s=local_s,
        is_utc=epoch | m.struct.field("zone").is_not_null(),
        item=f.list.get(3),
    )
    # The file's host name wins; --host, then the file name, stand in for an empty one.
    part = part.with_columns(host=pl.when(pl.col("host").str.len_chars() > 0)
                             .then(pl.col("host")).otherwise(pl.lit(fallback_host(source))))
    bad_ts = part.filter(pl.col("local_s").is_null())
    problems += [(n, (f"timestamp {ff[2]!r} is not 'YYYY-MM-DD HH:MM:SS [UTC]' or epoch "
                  "seconds")) for n, ff in bad_ts.select("line_no", "fields").iter_rows()]
    bad_iv = part.filter(pl.col("interval_s").is_null())
    problems += [(n, f"interval {ff[1]!r} is not a number")
                 for n, ff in bad_iv.select("line_no", "fields").iter_rows()]
    part = part.filter(pl.col("local_s").is_not_null() & pl.col("interval_s").is_not_null())
    if dev:
        wanted = {name: i for i, name in enumerate(layout) if name in DEV_COLUMNS}
        unknown = [n for n in layout[4:] if n not in DEV_COLUMNS]
        if unknown:
            source.note(f"device column(s) {', '.join(unknown)} not imported (no SampleFrame "
                        "column)")
    else:
        part = part.filter(pl.col("item") == "-1")  # CPU -1 is 'all' (rndr_stats.c)
        wanted = {name: i for i, name in enumerate(layout)
                  if name in CPU_COLUMNS or name in CPU_SYSTEM_PARTS}
    part = part.with_columns([to_float(f.list.get(i), comma=comma).alias(f"v:{n}")
                              for n, i in wanted.items()])
    bad = pl.any_horizontal([pl.col(f"v:{n}").is_null() for n in wanted])
    for line_no, fields, *vals in part.filter(bad).select(
            "line_no", "fields", *[f"v:{n}" for n in wanted]).iter_rows():
        name = next(n for n, v in zip(wanted, vals, strict=True) if v is None)
        problems.append((line_no, (f"column {name!r} is not a number: "
                                  f"{fields[wanted[name]]!r}")))
    part = part.filter(~bad)
    keep = [pl.col("line_no").alias("order"), "blk", "host", "interval_s", "local_s",
            "is_utc"]
    if dev:
        keep.append(pl.col("item").alias("device"))
        keep += [(pl.col(f"v:{n}") * DEV_COLUMNS[n][1]).alias(DEV_COLUMNS[n][0])
                 for n in wanted]
    else:
        keep += [pl.col(f"v:{n}").alias(CPU_COLUMNS[n]) for n in wanted if n in CPU_COLUMNS]
        if "%sys" in wanted:
            keep.append(pl.sum_horizontal([pl.col(f"v:{p}") for p in CPU_SYSTEM_PARTS
                                           if p in wanted]).round(2).alias("cpu_system_pct"))
    return part.select(keep)


def _drop_partial_csv(dev: pl.DataFrame, df: pl.DataFrame, cut_line: int,
                      source: Source) -> pl.DataFrame:
    """The line cut mid-way may have belonged to the last device interval: keep whole
    intervals only."""
    cut = df.filter(pl.col("line_no") == cut_line)
    blk = cut["blk"][0]
    last = dev.sort("order").tail(1)
    if last.height == 0 or blk is None or last["blk"][0] != blk:
        return dev
    fields = cut.select(_FIELDS).to_series()[0]
    cut_stamp = fields[2] if fields is not None and len(fields) > 3 else None
    last_stamp = df.filter(pl.col("line_no") == last["order"][0]).select(
        _FIELDS).to_series()[0][2]
    us = last["utc_us"][0]
    dropped = dev.filter((pl.col("blk") == blk) & (pl.col("utc_us") == us))
    if cut_stamp is not None and cut_stamp != last_stamp:
        return dev
    if cut_stamp is None:
        # The cut line's own time is lost: the last interval is whole only if it lists as
        # many devices as the one before it.
        before = dev.filter((pl.col("blk") == blk) & (pl.col("utc_us") < us))
        if before.height and before.group_by("utc_us").len()["len"].max() == dropped.height:
            return dev
    source.note(f"file cut off inside its last interval: the {dropped.height} device row(s) "
                "of that partial interval were dropped (whole intervals only)")
    return dev.filter(~((pl.col("blk") == blk) & (pl.col("utc_us") == us)))
