"""One piece of sar text (whole reports) -> the rows of its device and CPU sections."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.sar_text.blocks import (
    _Block,
    _block_kind,
    _classify,
    _place_blocks,
    _strict_only,
    _tokens,
)
from iogauge.importers.sar_text.common import (
    _DAY_S,
    _MAX_DST_FOLD_S,
    _STAMP,
    NAME,
    local_to_utc_us,
    report,
    zone_note,
)
from iogauge.importers.sar_text.footer import _zone_of
from iogauge.importers.sar_text.rows import (
    _banner_info,
    _cpu_rows,
    _device_rows,
    _drop_cut_interval,
    _host_lookup,
    device_frame,
)
from iogauge.importers.sar_text.state import _BlockEnd, _Carry, _Resume
from iogauge.model.sampleframe import SampleFrame

_SGR_RE = r"\x1b\[[0-9;]*m"


def _uncolored(lines: pl.DataFrame, source: Source) -> pl.DataFrame:
    """``lines`` without the colour sequences of ``S_COLORS=always`` output (sar pads a
    value before colouring it, so the columns line up again once they are removed)."""
    coloured = pl.col("line").str.contains("\x1b[", literal=True)
    if not lines.select(coloured.any()).item():
        return lines
    source.note("colour escape sequences (S_COLORS=always) removed")
    return lines.with_columns(pl.col("line").str.replace_all(_SGR_RE, ""))


@dataclass
class _Cut:
    """Where :func:`iter_parse` cuts a piece: before line ``line_no``, a ``banner`` or not,
    inside a section (``inside``: before a sample whose time differs from the one above)
    or before a section's header."""

    line_no: int
    banner: bool
    inside: bool


#: Lines at the end of a piece looked at first for where to cut it (:func:`_cut_point`).
_CUT_TAIL_LINES = 4096


def _cut_point(lines: pl.DataFrame) -> _Cut | None:
    """Where to cut a piece (see :func:`iter_parse`), or None when it holds no place to.
    Looked for in its last lines first (classifying them costs as much as reading them)."""
    tails = (lines.tail(_CUT_TAIL_LINES), lines) if lines.height > _CUT_TAIL_LINES else (lines,)
    for tail in tails:
        df = _classify(tail).select("line_no", "kind", "tod", "bad_clock")
        k = pl.col("kind")
        after_samples = (pl.when(k != "blank").then(k).forward_fill().shift(1)
                         .is_in(["data", "summary"]))
        clock_ok = ~pl.col("bad_clock").fill_null(True)
        df = df.with_columns(
            banner=(k == "banner"),
            section=(k == "header") & (k.shift(1) == "blank") & after_samples,
            # (a sample whose time is damaged starts no interval, nor does the one after it)
            interval=(k == "data") & (k.shift(1) == "data") & clock_ok & clock_ok.shift(1)
            & (pl.col("tod") != pl.col("tod").shift(1)),
        ).filter(pl.col("line_no") > pl.first("line_no"))
        banners = df.filter(pl.col("banner"))["line_no"]
        starts = df.filter(pl.col("section") | pl.col("interval")).select("line_no", "interval")
        banner = int(banners[-1]) if banners.len() else None
        if starts.height >= 2 and (banner is None or banner < int(starts["line_no"][-2])):
            line_no, inside = starts.row(starts.height - 2)
            return _Cut(int(line_no), banner=False, inside=bool(inside))
        if banner is not None:
            return _Cut(banner, banner=True, inside=False)
    return None


def _continued(header: tuple[int, str] | None, above: str) -> tuple[int, str] | None:
    """The header put before a piece that continues a section: the section's ``header``
    (line number, text) with the time of ``above``, its last sample before the cut (the
    start of the next interval). None for samples without a header (the next piece reads
    them as such, as a read of the whole does)."""
    stamp = re.match(_STAMP, above)
    old = re.match(_STAMP, header[1]) if header is not None else None
    if header is None or stamp is None or old is None:
        return None
    return header[0], stamp.group(1) + header[1][len(old.group(1)):]


def _parse_piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, cut_off: bool,
                 resume: _Resume | None = None, final: bool = True) -> SampleFrame | None:
    """The rows of the reports in ``lines`` (the whole file when it is one piece;
    ``cut_off``: it ends inside its last line; ``resume``: it continues a report cut
    inside, see :func:`iter_parse`; ``final``: it ends the file, whose last interval may
    be partial)."""
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None  # (blank lines only: a file of nothing else is "empty")
    problems: list[tuple[int | None, str]] = []
    if resume is not None and resume.header is not None:
        lines = pl.concat([pl.DataFrame({"line_no": [resume.header[0]],
                                         "line": [resume.header[1]]}, schema=lines.schema),
                           lines])
    df = _classify(lines)
    cut_line = _cut_line(df, source, cut_off=cut_off)
    first_banner = _first_banner(df, source, resume)
    loose = _loose_lines(df, first_banner, problems)
    # Sections: a header opens one; data rows belong to the header that opened their run.
    df = df.with_columns(
        blk=pl.when(pl.col("kind") == "header").then(pl.col("line_no")).otherwise(None)
        .first().over("grp"))
    cut: tuple[int, int | None, int | None] | None = None
    if cut_line is not None:
        row = df.filter(pl.col("line_no") == cut_line)
        cut = (cut_line, row["blk"][0], row["tod"][0])
        df = df.with_columns(
            kind=pl.when(pl.col("line_no") == cut_line).then(pl.lit("cut"))
            .otherwise(pl.col("kind")))
    headers = df.filter(pl.col("kind") == "header").with_columns(tokens=_tokens())
    banners = df.filter(pl.col("kind") == "banner")
    blocks, dates = _blocks_of(df, headers, banners, problems, source, carry, resume)
    # Every sample line's section and time (for the midnight wraps below); the lines
    # themselves only of the device and CPU sections, the ones read (a sar -A report has
    # dozens of others: copying all their lines cost ~0.2 GB on a 100 MB file).
    samples = df.filter(pl.col("kind") == "data").select("blk", "line_no", "tod")
    orphans = samples.filter(pl.col("blk").is_null() & (pl.col("line_no") > first_banner))
    # sar prints a new header after every LINUX RESTART (with the time the next rates start
    # from), so a sample without one has no known interval start: refused, never guessed.
    loose += [(n, ("sample line not under a column header (a blank line, 'Average:' or "
                  "LINUX RESTART line ended its section)")) for n in orphans["line_no"]]
    problems += _strict_only(df, blocks, loose, carry)
    samples = samples.filter(pl.col("blk").is_not_null())
    read_blks = [b for b, blk in blocks.items() if blk.kind in ("dev", "cpu")]
    data_rows = df.filter((pl.col("kind") == "data") & pl.col("blk").is_in(read_blks))
    carry.summaries += int((df["kind"] == "summary").sum())
    restarts = df.filter(pl.col("kind") == "restart")
    carry.restarts += restarts.height
    timed = _timed(headers, samples, banners, restarts, dates, blocks, problems, carry, resume)
    timed = _with_utc(timed, lines, source, carry)
    dev = _device_rows(timed, data_rows, blocks, problems, source)
    cpu = _cpu_rows(timed, data_rows, blocks, problems)
    if resume is not None and carry.cpu is not None and carry.cpu.height:
        cpu = pl.concat([carry.cpu, cpu], how="diagonal_relaxed").unique(
            subset=["host", "utc_us"], keep="first", maintain_order=True)
    carry.cpu = cpu
    report(source, problems)
    if dev.height == 0:
        return None
    carry.rows = True
    if final:
        dev = _drop_cut_interval(dev, cut, df, source)
    return device_frame(dev.drop("blk"), cpu, name=NAME, order="line_no")


def _cut_line(df: pl.DataFrame, source: Source, *, cut_off: bool) -> int | None:
    """A file that does not end with a newline was cut in the middle of its last line: that
    line's number, noted (None: not cut)."""
    if not cut_off:
        return None
    last = df.filter(pl.col("line").is_not_null()).tail(1)
    if not last.height:
        return None
    cut_line = int(last["line_no"][0])
    source.note(f"file ends in the middle of line {cut_line} (cut off); that line was "
                "ignored")
    return cut_line


def _first_banner(df: pl.DataFrame, source: Source, resume: _Resume | None) -> int:
    """The line of the piece's first ``Linux ...`` banner (0 when a piece continues a report
    whose banner was read before)."""
    if resume is not None:
        return 0  # (the banner is above, in a part read before)
    first_banner = df.filter(pl.col("kind") == "banner")["line_no"].min()
    if first_banner is None:
        raise InputFormatError(source.path, 1, "no 'Linux <kernel> (<host>) <date>' banner: "
                               "not sysstat sar output")
    return int(first_banner)  # type: ignore[arg-type]


def _loose_lines(df: pl.DataFrame, first_banner: int,
                 problems: list[tuple[int | None, str]]) -> list[tuple[int | None, str]]:
    """Lines that may lie in a section iogauge does not read (judged once sections are
    known); sar lines before the banner go to ``problems``."""
    loose: list[tuple[int | None, str]] = []
    for rec in df.filter((pl.col("kind") == "unknown")
                         | (pl.col("kind").is_in(["header", "data", "restart"])
                            & pl.col("bad_clock"))).select("line_no", "line", "kind").rows():
        if rec[2] == "unknown":
            loose.append((rec[0], f"not a sar line: {rec[1][:60]!r}"))
        else:
            loose.append((rec[0], f"invalid time of day in {rec[1][:30]!r}"))
    early = df.filter((pl.col("line_no") < first_banner)
                      & pl.col("kind").is_in(["header", "data", "restart"]))
    problems += [(n, "sar line before the 'Linux ...' banner") for n in early["line_no"]]
    return loose


def _blocks_of(df: pl.DataFrame, headers: pl.DataFrame, banners: pl.DataFrame,
               problems: list[tuple[int | None, str]], source: Source, carry: _Carry,
               resume: _Resume | None) -> tuple[dict[int, _Block], dict[int, date | None]]:
    """The sections of the piece by header line, with their hosts, and the banner dates by
    line; the carry learns the last banner's host, the open section and the zone's dates."""
    hosts, dates, zone_date_alts = _banner_info(banners, problems)
    banner_lines = banners["line_no"].to_list()
    if resume is not None:
        hosts[resume.host[0]] = resume.host[1]
        banner_lines.insert(0, resume.host[0])
    host_at = _host_lookup(banner_lines, hosts, source)
    carry.host = (banner_lines[-1], hosts.get(banner_lines[-1], "")) if banner_lines else None
    blocks: dict[int, _Block] = {}
    for line_no, tokens, tod, text in headers.select("line_no", "tokens", "tod",
                                                     "line").iter_rows():
        blocks[line_no] = _Block(line_no, _block_kind(tokens), list(tokens), tod,
                                 host_at(line_no), text)
    for alt in zone_date_alts:
        if alt not in carry.date_alts:
            carry.date_alts.append(alt)
    last_sample = df.filter(pl.col("kind") == "data").tail(1)["blk"]
    open_blk = last_sample[0] if last_sample.len() else None
    carry.open_header = (int(open_blk), blocks[int(open_blk)].text) if open_blk in blocks \
        else None
    if any(b.kind == "dev" for b in blocks.values()):
        carry.dev = True
    return blocks, dates


def _timed(headers: pl.DataFrame, samples: pl.DataFrame, banners: pl.DataFrame,
           restarts: pl.DataFrame, dates: dict[int, date | None], blocks: dict[int, _Block],
           problems: list[tuple[int | None, str]], carry: _Carry, resume: _Resume | None
           ) -> pl.DataFrame:
    """Every header and sample line's local time (``local``, s) and daylight-saving
    ``fold``: midnight wraps and DST folds inside each section, vectorised, and each
    section placed in time (:func:`_place_blocks`)."""
    seq = pl.concat([headers.select("blk", "line_no", "tod"),
                     samples]).sort("line_no")
    step = pl.col("tod").shift(1).over("blk") - pl.col("tod")
    seq = seq.with_columns(
        wrap=(step > _MAX_DST_FOLD_S).fill_null(False),
        fold_step=((step > 0) & (step <= _MAX_DST_FOLD_S)).fill_null(False),
    ).with_columns(day=pl.col("wrap").cum_sum().over("blk"))
    seq = seq.with_columns(fold_seen=pl.col("fold_step").cum_sum().over(["blk", "day"]) > 0)
    agg = seq.group_by("blk").agg(pl.col("day").last(), pl.col("tod").last(),
                                  pl.col("fold_seen").last())
    ends = {b: _BlockEnd(d, t, f) for b, d, t, f in agg.iter_rows()}
    events = pl.concat([
        banners.select("line_no", pl.lit("banner").alias("kind"), "tod"),
        restarts.select("line_no", pl.lit("restart").alias("kind"), "tod"),
        headers.select("line_no", pl.lit("header").alias("kind"), "tod"),
    ]).sort("line_no").with_columns(
        pl.col("line_no").replace_strict(dates, default=None, return_dtype=pl.Date())
        .alias("date"))
    carry.place = _place_blocks(
        events, blocks, ends, problems, resume.place if resume is not None else None,
        resume.header[0] if resume is not None and resume.header is not None else None)
    block_info = pl.DataFrame(
        {"blk": list(blocks), "day0": [b.day0_local for b in blocks.values()],
         "start_fold": [b.start_fold for b in blocks.values()],
         "host": [b.host for b in blocks.values()]},
        schema={"blk": pl.Int64(), "day0": pl.Int64(), "start_fold": pl.Boolean(),
                "host": pl.String()})
    return seq.join(block_info, on="blk", how="left").with_columns(
        local=pl.col("day0") + pl.col("day") * _DAY_S + pl.col("tod"),
        fold=pl.col("fold_seen") | (pl.col("start_fold") & (pl.col("day") == 0)))


def _with_utc(timed: pl.DataFrame, lines: pl.DataFrame, source: Source, carry: _Carry
              ) -> pl.DataFrame:
    """``timed`` with ``utc_us``: the local times in the file's zone (a ksar footer's
    offset, ``--tz``), else taken as UTC with a note."""
    zone, offset = _zone_of(lines, source, carry)
    if zone is None and offset is None:
        zone_note(source, "sar times")
    if offset is not None or zone is None:
        utc_us = (timed["local"] - (offset or 0)) * 1_000_000
    else:
        utc_us = local_to_utc_us(timed["local"], timed["fold"], zone)
    return timed.with_columns(utc_us.alias("utc_us"))
