"""What crosses lines, pages and pieces while an RMF report is read: intervals, the page
being read, and the parse state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl

from iogauge.importers.base import Source


# ---------------------------------------------------------------------------------------------
# parse state
# ---------------------------------------------------------------------------------------------
@dataclass
class _Interval:
    """Everything read for one (SYSTEM ID, interval start)."""

    host: str
    start: datetime  # naive, z/OS local time
    interval_s: Decimal
    from_dasd: bool
    #: rows read one line at a time: device -> column -> value (the rows read a run of
    #: lines at a time are in State.parts)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: device_kind -> the devices of that kind (in ``rows`` or State.parts)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)
    sections: set[str] = field(default_factory=set)
    closed: bool = False  # a later interval of its host began (see _close_older)
    in_table: bool = False  # its rows were moved to State.tables
    folded: bool = False  # its ``seen`` went into State.common_seen (and was let go)

    def kind_of(self, device: str) -> str | None:
        return next((k for k, devices in self.kinds.items() if device in devices), None)

    def devices(self) -> int:
        return sum(len(devices) for devices in self.kinds.values())


@dataclass
class _Page:
    """The report page being read: its section and header, and where its tables stand."""

    title: str
    line_no: int
    asa: bool
    header_sys: tuple[str, str, Decimal] | None = None  # (system id, date, interval seconds)
    key: tuple[str, datetime] | None = None
    # DASD
    dasd_cols: list[str] | None = None
    dasd_line2: list[str] | None = None
    dasd_last_lcu: bool = False  # the last line read closes the table (LCU or SG summary)
    dasd_rows: int = 0
    dasd_last_sg: str | None = None  # the storage group of the last device line read
    # cache
    ssid: str | None = None
    serial: str | None = None
    volser: str | None = None
    vol_link: tuple[str, str] | None = None  # ("RRID"|"POOL", id)
    subsection: str = ""
    table: str = ""
    req: dict[str, list[str]] = field(default_factory=dict)
    req_done: bool = False
    overview_rows: int = 0
    total_hr: str | None = None
    after_rule: bool = False
    overview_pool: bool = False
    # ESS
    ess_serial: str | None = None
    ess_pool: str | None = None
    ess_last_pool: bool = True
    ess_rows: int = 0


@dataclass
class _State:
    source: Source
    intervals: dict[tuple[str, datetime], _Interval] = field(default_factory=dict)
    last_key: tuple[str, datetime] | None = None
    skipped_titles: list[str] = field(default_factory=list)
    #: (serial, pool) -> ranks seen in the ESS report, over the whole file (configuration)
    pool_ranks: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: (host, start, volser) -> ("RRID"|"POOL", id, serial)
    vol_links: dict[tuple[str, datetime, str], tuple[str, str, str]] = field(default_factory=dict)
    vol_lcu: dict[tuple[str, datetime, str], str] = field(default_factory=dict)
    #: (host, start, volser) -> the STORAGE GROUP column of the volume's DASD line
    vol_sg: dict[tuple[str, datetime, str], str] = field(default_factory=dict)
    #: storage-group summary lines recognised and not read (:func:`_dasd_line`)
    sg_summaries: int = 0
    rank_pool: dict[str, str] = field(default_factory=dict)
    #: the rows of closed intervals as tables, a row per device and interval (see
    #: :func:`_close_older`, :func:`_merged`)
    tables: list[pl.DataFrame] = field(default_factory=list)
    #: the rows read a run of lines at a time (:func:`_bulk`) of intervals not yet tabled,
    #: a table per piece and line type: host, _start, device, device_kind, the columns they
    #: set, _lcu, _sg, _link (and _has_hit for the device overview's)
    parts: list[pl.DataFrame] = field(default_factory=list)
    #: the piece being read (whose runs :func:`_tables_of_closed` takes first)
    piece: _Piece | None = None
    #: closed intervals not yet tabled, and how many rows they hold (dicts and runs)
    closed: list[tuple[str, datetime]] = field(default_factory=list)
    closed_rows: int = 0
    #: host -> its intervals not closed
    open_keys: dict[str, list[tuple[str, datetime]]] = field(default_factory=dict)
    #: host -> the (device, section) lines every folded interval of it had
    common_seen: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

@dataclass
class _Piece:
    """One piece of the input as the vectorised reading sees it: line ``first + k`` is
    ``raw[k]``; ``body`` is the line without its ASA column (on the pages that have one);
    the other arrays classify the lines for the page types (see :func:`_classify`)."""

    first: int
    raw: list[str]
    body: pl.Series
    dasd_events: np.ndarray
    dasd_data: np.ndarray
    cache_events: np.ndarray
    cache_data: np.ndarray
    #: full-width rules (40 dashes or more) on cache pages
    rules: np.ndarray
    #: cache data lines that begin as a request table row or its REQUESTS heading does
    request_rows: np.ndarray
    #: lines an ESS page's line function passes over
    ess_ignored: np.ndarray
    #: blank and PAGE lines without z/OS or RMF: passed over while a page header is read
    header_blank: np.ndarray
    #: lines that cannot be a cache sub-section title (a digit or "--", or not plain ASCII)
    not_title: np.ndarray
    stripped: pl.Series
    #: parsed data lines, made when first needed (see :func:`_parsed`)
    parsed: dict[Any, _Parsed] = field(default_factory=dict)

    def line(self, k: int) -> str:
        return self.raw[k].rstrip("\r")

    def stripped_line(self, k: int) -> str:
        """Line k as the cache line functions get it (ASA column removed, stripped)."""
        s = self.stripped[k]
        return s if isinstance(s, str) else ""

@dataclass
class _Parsed:
    """Data lines of a piece parsed together: ``row_of[k]`` is piece line k's row of
    ``frame`` (for the lines parsed), ``cols`` the frame's columns as lists, ``ok`` and
    ``skip`` its ok and skip columns as arrays (skip: all False when it has none)."""

    row_of: np.ndarray
    frame: pl.DataFrame
    cols: dict[str, list[Any]]
    ok: np.ndarray
    skip: np.ndarray
    #: the device column (object array), and for DASD lines the LCU summary lines
    devices: np.ndarray
    is_lcu: np.ndarray
    #: runs read at once (:func:`_bulk`): their rows, and (host, start, link serial)
    runs: list[tuple[np.ndarray, tuple[str, datetime, str | None]]] = field(
        default_factory=list)
