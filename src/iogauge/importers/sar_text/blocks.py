"""The sections of sar text (a header line and its rows) and their place in time: midnights,
restarts and the daylight-saving repeated hour."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from iogauge.importers.sar_text.common import (
    _COMMENT,
    _DAY_S,
    _HEADER,
    _STAMP,
    _TIME_PREFIX,
    _TIMED,
)
from iogauge.importers.sar_text.state import _BlockEnd, _Carry, _PlaceState

# ---- parsing ------------------------------------------------------------------------------


@dataclass
class _Block:
    """One section: its header line and where it sits in time."""

    line_no: int
    kind: str  # 'dev', 'cpu' or 'other'
    tokens: list[str]
    tod: int
    host: str
    text: str = ""  # the header line as printed (its column positions)
    day0_local: int = 0  # midnight of the header's day, naive local epoch seconds
    start_fold: bool = False  # the header time is the second pass of a DST-repeated hour


def _classify(lines: pl.DataFrame) -> pl.DataFrame:
    """Add ``kind`` (blank, banner, footer, summary, restart, comment, header, data, unknown),
    ``tod`` (seconds after local midnight), ``bad_clock``, ``stamp`` and ``grp`` (section run).

    Only cheap anchored tests run on every line; times are parsed once per distinct stamp
    and lines are split into fields later, only where their values are wanted."""
    line = pl.col("line")
    timed = line.str.contains(_TIME_PREFIX)
    stamped = lines.with_columns(stamp=pl.when(timed).then(line.str.extract(_STAMP, 1)))
    # What follows the stamp (AM/PM included in it: a regex alone could read 'AM' as a
    # column name).
    rest = line.str.slice(pl.col("stamp").str.len_chars())
    kind = (pl.when(line.is_null()).then(pl.lit("blank"))
            .when(line.str.contains(r"^Linux\s+\S+\s+\(")).then(pl.lit("banner"))
            .when(line.str.starts_with("#")).then(pl.lit("footer"))
            .when(timed & line.str.contains("LINUX RESTART", literal=True))
            .then(pl.lit("restart"))
            .when(timed & rest.str.contains(_COMMENT)).then(pl.lit("comment"))
            .when(timed & rest.str.contains(_HEADER)).then(pl.lit("header"))
            .when(timed).then(pl.lit("data"))
            # 'Average:' and its translations ('Durchschn.:' ...): a first word ending in ':'
            .when(line.str.contains(r"^\S+:\s+\S")).then(pl.lit("summary"))
            .otherwise(pl.lit("unknown")))
    df = stamped.with_columns(kind=kind)
    # sar prints a blank line before every column header. A header-looking line right after
    # a sample or a header is a sample whose first value is damaged (it must be reported,
    # not open a section that would swallow the rows after it), unless it carries what only
    # column names do ('%util', 'rkB/s', DEV, CPU): output whose blank lines were stripped.
    prev = pl.col("kind").shift(1)
    damaged = ((pl.col("kind") == "header") & prev.is_in(["data", "header"])
               & ~rest.str.contains(r"%[a-z]|[a-zA-Z]/s\b|\bDEV\b|\bCPU\b"))
    df = df.with_columns(kind=pl.when(damaged).then(pl.lit("data")).otherwise(pl.col("kind")))
    stamps = df.select(pl.col("stamp").drop_nulls().unique())
    parts = pl.col("stamp").str.extract_groups(_TIMED)
    h = parts.struct.field("h").cast(pl.Int64())
    mi = parts.struct.field("m").cast(pl.Int64())
    se = parts.struct.field("s").cast(pl.Int64())
    ampm = parts.struct.field("ampm").str.to_uppercase()
    hour = (pl.when(ampm == "AM").then(h % 12)
            .when(ampm == "PM").then(h % 12 + 12)
            .otherwise(h))
    stamps = stamps.with_columns(
        tod=hour * 3600 + mi * 60 + se,
        bad_clock=(h > 23) | (mi > 59) | (se > 60)
        | (ampm.is_not_null() & ((h > 12) | (h == 0))),
        n_stamp_tokens=pl.when(ampm.is_not_null()).then(2).otherwise(1),
    )
    # each line's time, joined on the stamp alone and added beside the line's columns (a join
    # of the whole frame would copy them all)
    times = (df.select("stamp").join(stamps, on="stamp", how="left", maintain_order="left")
             .drop("stamp"))
    df = df.with_columns(times.get_columns())
    boundary = pl.col("kind").is_in(["blank", "banner", "footer", "summary", "restart",
                                     "header", "unknown"])
    return df.with_columns(grp=boundary.cum_sum())


def _strict_only(df: pl.DataFrame, blocks: Mapping[int, _Block],
                 loose: list[tuple[int | None, str]], carry: _Carry
                 ) -> list[tuple[int | None, str]]:
    """The ``loose`` problems that count: those outside the sections iogauge does not read.

    A line is in the section of the last header above it (a blank line or 'Average:' ends
    a section's rows, not the section a stray line belongs to; a banner or LINUX RESTART
    does). A malformed line of a USB, network, power, interrupts ... section never fails an
    import: it is counted in ``carry`` for a note; DEV and CPU sections stay strict."""
    if not loose:
        return []
    k = pl.col("kind")
    sect = (pl.when(k == "header").then(pl.col("line_no"))
            .when(k.is_in(["banner", "restart"])).then(pl.lit(0))
            .otherwise(None).forward_fill())
    where = dict(df.select("line_no", sect.alias("sect")).filter(
        pl.col("line_no").is_in([n for n, _ in loose if n is not None])).iter_rows())
    kept: list[tuple[int | None, str]] = []
    skipped: set[int] = set()  # (a line can be both: a bad time and under no header)
    for line_no, reason in loose:
        blk = blocks.get(where.get(line_no) or -1)
        if line_no is not None and blk is not None and blk.kind == "other":
            skipped.add(line_no)
        else:
            kept.append((line_no, reason))
    if skipped:
        carry.other_skipped += len(skipped)
        first = min(skipped)
        carry.other_first = first if carry.other_first is None else min(carry.other_first,
                                                                          first)
    return kept


def _tokens() -> pl.Expr:
    """The whitespace-separated fields after the time stamp (and its AM/PM)."""
    return pl.col("line").str.extract_all(r"\S+").list.slice(pl.col("n_stamp_tokens"))


def _block_kind(tokens: Sequence[str]) -> str:
    toks = set(tokens)
    if "DEV" in toks and "tps" in toks:
        return "dev"
    if "CPU" in toks and "%idle" in toks and ("%user" in toks or "%usr" in toks):
        return "cpu"
    return "other"


def _next_at_or_after(base: int, tod: int) -> int:
    """The first local time (naive epoch seconds) at or after ``base`` whose time of day is
    ``tod``."""
    cand = base - base % _DAY_S + tod
    return cand if cand >= base else cand + _DAY_S

def _place_blocks(events: pl.DataFrame, blocks: dict[int, _Block],
                  ends: Mapping[int, _BlockEnd],
                  problems: list[tuple[int | None, str]],
                  state: _PlaceState | None = None, continues: int | None = None
                  ) -> _PlaceState:
    """Give every section header its local date, walking banners, restarts and headers in
    file order (a loop per section, not per line); returns where it stands at the end.

    A header repeats the start of the section before it (``sar -f`` prints every activity
    of a stretch from the stretch's first sample; a live ``sar -A`` prints every activity of
    one interval from that interval's start), or that section's end (the next interval of a
    live sar, or a header repeated inside a section), or the stretch's first sample (the
    next activity after a section with repeated headers). The first header after the banner
    or a restart is the first time at or after it; anything else continues forward from the
    last section's end.

    ``state``: where the part of the report before this one ended; ``continues``: the
    header (put there by :func:`iter_parse`) that continues that part's last section from
    its last sample.
    """
    st = state or _PlaceState()
    cur_date, base, prev, stretch_start = st.cur_date, st.base, st.prev, st.stretch_start
    for line_no, kind, tod, banner_date in events.iter_rows():
        if kind == "banner":
            cur_date = banner_date
            if cur_date is None:
                problems.append((line_no, ("banner without a readable date (expected e.g. "
                                          "03/28/16, 2016-03-28 or 28.03.2016 after the host "
                                          "name)")))
                continue
            base = int((datetime(cur_date.year, cur_date.month, cur_date.day)
                        - datetime(1970, 1, 1)).total_seconds())
            prev = None
            continue
        if cur_date is None:
            continue  # reported: lines before any banner
        if kind == "restart":
            base = _next_at_or_after(prev[2] if prev else base, tod)
            prev = None
            continue
        block = blocks[line_no]
        if line_no == continues and prev is not None:
            start, fold = prev[2], prev[3]  # (the same section, from its last sample)
        elif prev is None:
            start, fold = _next_at_or_after(base, tod), False
            stretch_start = start
        elif tod == prev[0] % _DAY_S:
            start, fold = prev[0], prev[1]
        elif tod == prev[2] % _DAY_S:
            start, fold = prev[2], prev[3]
        elif tod == stretch_start % _DAY_S:
            # the next activity of a grouped stretch, after one whose header was repeated
            # inside it (sar -I ALL prints its wide header again for every interval)
            start, fold = stretch_start, False
        else:
            start, fold = _next_at_or_after(prev[2], tod), False
        if line_no == continues and state is not None and state.prev is not None:
            # the section began before this part: its start (for the next header's "the
            # start of the section before") is the one the part before saw
            section_start, section_fold = state.prev[0], state.prev[1]
        else:
            section_start, section_fold = start, fold
        block.day0_local = start - start % _DAY_S
        block.start_fold = fold
        end = ends.get(line_no)
        if end is None:
            prev = (section_start, section_fold, start, fold)
        else:
            # Still on the second pass of a repeated hour if the block saw the fold itself,
            # or began on that pass and crossed no midnight.
            prev = (section_start, section_fold,
                    block.day0_local + end.days * _DAY_S + end.last_tod,
                    end.last_fold or (end.days == 0 and fold))
    return _PlaceState(cur_date, base, prev, stretch_start)
