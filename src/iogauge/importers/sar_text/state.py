"""What the pieces of a sar text file hand on to each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import polars as pl

from iogauge.importers._lines import LineCarry


@dataclass
class _BlockEnd:
    days: int  # midnights crossed inside the block
    last_tod: int
    last_fold: bool


@dataclass
class _PlaceState:
    """Where :func:`_place_blocks` stands after a part of a report (handed to the next part
    when a report is read in pieces, see :func:`iter_parse`).

    Attributes:
        cur_date: the date of the last banner.
        base: the next stretch starts at or after this local time (naive epoch seconds).
        prev: the last section's (start, start fold, end, end fold), or None.
        stretch_start: the first header time of the current stretch.
    """

    cur_date: date | None = None
    base: int = 0
    prev: tuple[int, bool, int, bool] | None = None
    stretch_start: int = 0



@dataclass
class _Carry(LineCarry):
    """What the pieces of a file tell about the whole (:func:`iter_parse`), besides the lines
    of a piece's last report, read again with the next piece.

    Attributes:
        dev: some piece held a device section.
        rows: some device section held rows.
        summaries: 'Average:' lines skipped so far.
        restarts: LINUX RESTART lines met so far.
        date_alts: banner dates read as month/day/year that a day/month locale would read
            the other way.
        tail_offset: the UTC offset (s) a ksar footer at the end of the file states.
        tail_path: a compressed file whose tail_offset is still to be looked up (when a
            piece without a footer of its own needs it).
        offset: the one the last footer read so far states.
        resume: how the next piece takes up a report cut inside (None: it starts with a
            banner).
        place, host: where :func:`_place_blocks` stood and the banner above, at the end
            of the piece read last; open_header: the header (line number, text) of the
            section its last sample is in (None: not under a header).
        cpu: the CPU rows of the report read so far (a grouped ``sar -f`` prints a
            stretch's CPU section before its device section).
        other_skipped, other_first: malformed lines skipped in sections iogauge does not
            read, and the first of them.
    """

    dev: bool = False
    rows: bool = False
    summaries: int = 0
    restarts: int = 0
    date_alts: list[str] = field(default_factory=list)
    tail_offset: int | None = None
    tail_path: str | None = None
    offset: int | None = None
    resume: _Resume | None = None
    place: _PlaceState | None = None
    host: tuple[int, str] | None = None
    open_header: tuple[int, str] | None = None
    cpu: pl.DataFrame | None = None
    other_skipped: int = 0
    other_first: int | None = None


@dataclass
class _Resume:
    """How the next part of a report cut inside (:func:`iter_parse`) takes up where the part
    before ended: ``place``, where :func:`_place_blocks` stood; ``host``, the banner line and
    host above it; ``header``, the line number and text of the header put before the part
    when the cut is inside a section (the section's header with the time of its last sample
    before the cut: the start of the next interval), else None."""

    place: _PlaceState
    host: tuple[int, str]
    header: tuple[int, str] | None
