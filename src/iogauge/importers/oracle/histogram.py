"""The Wait Event Histogram of AWR and Statspack: how a wait event's waits spread over
time buckets, reduced to the shares a rule can use (waits of 32 ms or more, of 1 s or more).

Bucket headings change with the release (10g/11g ``<1ms <2ms ... <32ms <=1s >1s``; 12c+
down to ``<1us`` and up to ``<1s >=1s``), so each bucket is known by its heading: a bucket
holds the waits from the previous bucket's bound up to its own (``<32ms``: 16-32 ms;
``<=1s`` after ``<32ms``: 32 ms-1 s), and ``>1s``/``>=1s`` those of 1 s or more. A share is
the sum of the buckets whose lower bound is at least the threshold. Cells are percentages
of the event's waits; blank is 0 ("null is truly 0"), and 19c prints a count in
parentheses where the share rounds to 0.0 (taken as 0).
"""

from __future__ import annotations

import re
from decimal import Decimal

from iogauge.importers.oracle.grammar import _EVENT_RE, _BadLine, _norm, _number

#: the text section title
HIST_RE = re.compile(r"^(Wait Event Histogram)(?=\s+for DB:|\s{2,}DB/Inst:|\s*$)")
_BUCKET_RE = re.compile(r"^(<|<=|>|>=)(\d+)(us|ms|s)$")
_UNIT_MS = {"us": Decimal("0.001"), "ms": Decimal(1), "s": Decimal(1000)}
SLOW_MS = Decimal(32)
VERY_SLOW_MS = Decimal(1000)
#: a count of waits printed with a fraction and no K/M suffix: AWR 11.2.0.4 prints
#: ``118.6K`` in a column 5 wide as ``118.6`` (the suffix cut off, the count 1000 times off)
_CUT_COUNT_RE = re.compile(r"[\d,]*\.\d+")
#: headings of the histogram that are not buckets
_OTHER = frozenset({"event", "waits", "totalwaits"})


def _cut_unit(key: str, before: list[tuple[str, str]]) -> str:
    """A bucket heading whose unit the column width cut (12.2's text: ``<128u``, and
    ``>=512`` after ``<512u``), with its unit: ``u`` is microseconds; no unit at all is the
    unit of the bucket before, when that bucket ends at the same number (the last, open
    bucket starts where the one before it ends)."""
    m = re.fullmatch(r"(<|<=|>|>=)(\d+)(u?)", key)
    if m is None:
        return key
    if m.group(3) == "u":
        return f"{m.group(1)}{m.group(2)}us"
    if before and before[-1][0] == m.group(2) and m.group(1).startswith(">"):
        return f"{key}{before[-1][1]}"
    return key


def lower_bounds(headings: list[str]) -> list[Decimal | None] | str:
    """Each column's lower bound in ms (None: not a bucket), or why the headings are not a
    histogram's."""
    out: list[Decimal | None] = []
    out_units: list[tuple[str, str]] = []  # (number, unit) of the buckets so far
    previous = Decimal(0)
    for h in headings:
        key = _cut_unit(_norm(h), out_units)
        m = _BUCKET_RE.fullmatch(key)
        if m is None:
            if key not in _OTHER:
                return f"column heading {h!r} is not a bucket of the wait event histogram"
            out.append(None)
            continue
        out_units.append((m.group(2), m.group(3)))
        bound = Decimal(m.group(2)) * _UNIT_MS[m.group(3)]
        if m.group(1) in (">", ">="):
            out.append(bound)
        else:
            out.append(previous)
            previous = bound
    if "event" not in [_norm(h) for h in headings]:
        return "no Event column in the wait event histogram"
    return out


def shares(cells: list[str], bounds: list[Decimal | None], line_no: int,
           headings: list[str]) -> tuple[float | None, float | None]:
    """(% of waits >= 32 ms, % of waits >= 1 s) of one event's row; None where the buckets
    stop below the threshold (12.2's first histogram ends at ``>=512us``: its last bucket
    holds the waits of 512 us and of 2 s alike)."""
    top = max((b for b in bounds if b is not None), default=Decimal(0))
    slow = very = Decimal(0)
    for cell, low, head in zip(cells, bounds, headings, strict=True):
        if low is None or cell == "" or re.fullmatch(r"\(\d+\)", cell):
            continue
        value = _number(cell, line_no, head, set())
        if value is None:
            continue
        if value > 100:
            raise _BadLine(line_no, f"{head}: {cell!r} is not a percentage of the waits")
        if low >= SLOW_MS:
            slow += value
        if low >= VERY_SLOW_MS:
            very += value
    return (float(slow) if top >= SLOW_MS else None,
            float(very) if top >= VERY_SLOW_MS else None)


def hist_row(cells: list[str], bounds: list[Decimal | None], headings: list[str],
             waits_at: int | None, line_no: int, title: str, notes: set[str]
             ) -> dict[str, object]:
    """One histogram row as WaitEventFrame columns (event, waits, the two shares); a count
    that did not fit its column adds a note to ``notes`` and is left empty."""
    event = cells[0]
    if not _EVENT_RE.match(event):
        raise _BadLine(line_no, f"{title}: {event!r} is not an event name (a line of "
                       "another block?)")
    waits = None
    if waits_at is not None:
        cell, head = cells[waits_at], headings[waits_at]
        if _CUT_COUNT_RE.fullmatch(cell):
            notes.add(f"{title}: {head} {cell!r} (line {line_no}) is a count cut at its "
                      "column width (its K/M suffix lost); left empty")
        else:
            waits = _number(cell, line_no, head, notes)
    slow, very = shares(cells, bounds, line_no, headings)
    return {"event": event, "waits": None if waits is None else float(waits),
            "waits_ge_32ms_pct": slow, "waits_ge_1s_pct": very}
