"""A piece of text reports: its lines classified at once, and what reading it collects.
"""


from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.oracle.grammar import (
    _ANY_TITLE_RE,
    _BLOCK_B_RE,
    _BLOCK_K_RE,
    _BLOCK_TITLE_RE,
    _ELAPSED_RE,
    _HOST_RE,
    _SNAP8_RE,
    _SNAP_RE,
    _TOP_RE,
    _Col,
    _Report,
)


# ---------------------------------------------------------------------------------------------
# a piece of reports: its lines classified at once
# ---------------------------------------------------------------------------------------------
def _clean(line: str) -> str:
    return line.rstrip("\r").lstrip("\x0c")


#: The line classes a piece is read by, as polars (Rust) regexes: Rust's regex has no
#: look-ahead, so a title's tail is matched rather than looked at (only whether a line
#: matches is asked here; the Python patterns then read the few title lines).
_V_TAIL = r"(?:\s+for DB:|\s{2,}DB/Inst:|\s*$)"
_V_WORD = r"(?:[\d,]*\.?\d+(?:[eE][-+]?\d+)?|[\d,]*\.?\d+[KMGTP]|#+|N/A)"
_V_CLASSES = {
    "top": _TOP_RE.pattern,
    "waits": r"^(?:Foreground |Background )?Wait Events(?: \(fg and bg\))?" + _V_TAIL,
    "file": r"^(?:File IO Stats|File IO Statistics)" + _V_TAIL,
    "ts": r"^(?:Tablespace IO Stats|Tablespace IO Summary)" + _V_TAIL,
    "os": r"^(?:Operating System Statistics|OS Statistics)" + _V_TAIL,
    "hist": r"^Wait Event Histogram" + _V_TAIL,
    "filetype": r"^IOStat by Filetype summary" + _V_TAIL,
    "title": _ANY_TITLE_RE.pattern,
    "footer": r"^\s+-{20,}\s*$",  # the indented rule SQL*Plus prints after a section
    # the titles of the summary blocks that follow a table with no blank line between (AWR
    # 11.2: "Host CPU (CPUs: 2 Cores: 2 Sockets: 1)" right under the Top 5 rows)
    "block": _BLOCK_TITLE_RE.pattern,
    "tilde": r"^~{2,}",  # the underline of a block title (its title is the line above)
    "blank": r"^\s*$",
    "reset": r"^[\s~]*$|^\s*->",  # a line after which column headings start anew
    "numeric": rf"^\s*{_V_WORD}(?:\s+{_V_WORD})*\s*$",  # numbers (or '#' runs) only
    "head": "|".join(f"(?:{p.pattern})" for p in (_SNAP_RE, _SNAP8_RE, _ELAPSED_RE, _BLOCK_K_RE,
                                                   _BLOCK_B_RE, _HOST_RE)),
}
#: the letters of a two-line table's lines (see _RECORD_RE); X: not yet told T from C;
#: J: a text line that can start no record (a line of another block)
_B, _N, _X, _C, _T, _J = (ord(c) for c in "BNXCTJ")
#: a record's name line from its first character: a tablespace name (an Oracle identifier)
_NAME_START_RE = re.compile(r"[A-Za-z]")
#: a two-line table's lines, one letter each (B blank, N numbers only, T text, C a text line
#: indented to the last column: a long file name continued) -> its records, as reading it
#: line by line with one record pending finds them: N alone is numbers without their text
#: line, T/C ... T/N a record (blank lines and continuations between; a text line where the
#: numbers should be is taken as the numbers, and refused when converted), T/C ... at the
#: end a record without numbers; J (alone or inside a record) is refused by itself
_RECORD_RE = re.compile(r"B|N|J|[TC][BCJ]*[TN]|[TC][BCJ]*$")


@dataclass
class _Piece:
    """The lines of a piece (index k is line ``base + 1 + k`` of the file) and, for each line
    class, the sorted indices of its lines; ``series`` holds the lines cleaned of CR and
    form feeds, ``code`` B/N/X per line (blank, numbers only, other) and ``lead`` the
    width of each line's indent."""

    raw: list[str]
    base: int
    n: int
    series: pl.Series
    idx: dict[str, list[int]]
    code: np.ndarray
    lead: np.ndarray

    @classmethod
    def of(cls, raw: list[str], base: int, start_re: re.Pattern[str]) -> _Piece:
        series = (pl.Series("l", raw, dtype=pl.String)
                  .str.strip_chars_end("\r").str.strip_chars_start("\x0c"))
        col = pl.col("l")
        classes = {name: col.str.contains(p) for name, p in _V_CLASSES.items()}
        masks = pl.DataFrame([series]).select(
            start=col.str.contains(start_re.pattern),
            rule=col.str.contains(r"^[-~][-~ ]*\s*$") & col.str.contains("-", literal=True),
            end=col.str.starts_with("End of Report"),
            lead=col.str.len_chars() - col.str.strip_chars_start().str.len_chars(),
            **classes)
        arr = {name: masks[name].to_numpy() for name in masks.columns}
        interest = (arr["top"] | arr["waits"] | arr["file"] | arr["ts"] | arr["os"]
                    | arr["hist"] | arr["filetype"])
        idx = {name: np.flatnonzero(arr[name]).tolist()
               for name in ("start", "rule", "blank", "reset", "head")}
        idx["text"] = np.flatnonzero(~arr["blank"]).tolist()
        idx["interest"] = np.flatnonzero(interest).tolist()
        idx["waits_top"] = np.flatnonzero(arr["top"] | arr["waits"]).tolist()
        # what ends a table (_read_table): a footer rule, End of Report, any section title
        # a line with a ~ underline is a block's title: "Host CPU ...", then "~~~~  Load Average"
        underlined = np.zeros_like(arr["tilde"])
        underlined[:-1] = arr["tilde"][1:]
        titled = arr["block"] | (underlined & ~arr["blank"] & (arr["lead"] == 0))
        idx["term"] = np.flatnonzero(interest | arr["title"] | arr["footer"] | arr["end"]
                                     | titled).tolist()
        # another section's title (a footer-like rule may underline a heading: histogram)
        idx["section"] = np.flatnonzero(interest | arr["title"] | titled).tolist()
        code = np.full(len(raw), _X, dtype=np.uint8)
        code[arr["numeric"]] = _N
        code[arr["blank"]] = _B
        return cls(raw=raw, base=base, n=len(raw), series=series, idx=idx, code=code,
                   lead=arr["lead"])

    def line(self, k: int) -> str:
        return _clean(self.raw[k])

    def no(self, k: int) -> int:
        return self.base + 1 + k

    def first(self, name: str, lo: int, hi: int) -> int | None:
        """The first line of class ``name`` in [lo, hi), or None."""
        ks = self.idx[name]
        j = bisect.bisect_left(ks, lo)
        return ks[j] if j < len(ks) and ks[j] < hi else None

    def last(self, name: str, lo: int, hi: int) -> int | None:
        """The last line of class ``name`` in [lo, hi), or None."""
        ks = self.idx[name]
        j = bisect.bisect_left(ks, hi) - 1
        return ks[j] if j >= 0 and ks[j] >= lo else None

    def between(self, name: str, lo: int, hi: int) -> list[int]:
        ks = self.idx[name]
        return ks[bisect.bisect_left(ks, lo):bisect.bisect_left(ks, hi)]


@dataclass
class _Spec:
    """A complete table of a report, as found: its columns and the lines of its records."""

    order: int  # place in the piece (document order)
    rep: int  # the report (index into _Out.meta)
    seq: int  # place in the report (of its section titles)
    kind: str  # top | waits | file | tablespace
    section: str  # the wait section's name (wait tables)
    title: str
    title_line: int
    cols: list[_Col]
    cols2: list[_Col] | None
    first: list[int]  # line index of each record (of its first line in two-line tables)
    second: list[int]  # line index of each record's numbers (two-line tables)
    more: dict[int, str]  # record -> the file name's continuation lines, joined


@dataclass
class _Meta:
    """What every row of a report carries."""

    r: int  # the report's place in the piece
    rep: _Report
    ts: datetime
    interval_s: Decimal
    host: str


class _Events:
    """Notes and refused lines, kept with the place where reading the piece line by line
    meets them -- (report, table, 0 while finding the table's lines / 1 while converting
    them) -- and given to the Source in that order at the piece's end: the tables are
    converted a layout at a time, not in the order of the file."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple[int, int, int, int], bool, int | None, str]] = []

    def bad(self, key: tuple[int, int, int], line_no: int | None, reason: str) -> None:
        self.items.append(((*key, len(self.items)), False, line_no, reason))

    def note(self, key: tuple[int, int, int], message: str) -> None:
        self.items.append(((*key, len(self.items)), True, None, message))

    def replay(self, source: Source) -> None:
        for _key, is_note, line_no, text in sorted(self.items, key=lambda item: item[0]):
            if is_note:
                source.note(text)
            else:
                source.bad_line(line_no, text)


class _Sink:
    """The Source of a table read the old way (:class:`_Ctx`): its refusals become events."""

    def __init__(self, events: _Events, key: tuple[int, int, int]) -> None:
        self.events = events
        self.key = key

    def bad_line(self, line_no: int | None, reason: str) -> None:
        self.events.bad(self.key, line_no, reason)


@dataclass
class _Out:
    pc: _Piece
    fmt: str
    meta: list[_Meta] = field(default_factory=list)
    specs: list[_Spec] = field(default_factory=list)
    events: _Events = field(default_factory=_Events)
    #: report -> its Operating System Statistics as host CPU columns (osstat.cpu_pcts)
    cpu: dict[int, dict[str, float]] = field(default_factory=dict)
    #: report -> notes of its tables (given sorted after the report, as _Ctx.notes were)
    notes: dict[int, set[str]] = field(default_factory=dict)
    #: specs whose rows are made one at a time (a value that is not a number, a '#', ...)
    fallback: list[tuple[_Spec, list[list[str]], list[list[str]] | None]] = field(
        default_factory=list)
    fallback_waits: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    fallback_files: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)

    def bad(self, r: int, seq: int, line_no: int | None, reason: str) -> None:
        self.events.bad((r, seq, 0), line_no, reason)

    def note(self, r: int, seq: int, message: str) -> None:
        self.events.note((r, seq, 0), message)


_LAST = 1 << 30  # (the place of a report's notes: after its tables)


