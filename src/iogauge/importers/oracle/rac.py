"""AWR RAC global reports (``awrgrpt.sql``, ``<title>AWR RAC Report for DB: ...``) in HTML:
the foreground wait events of each instance.

A global report has no Tablespace/File IO Stats (it sums the cluster); what it gives per
instance is the ``Top Timed Foreground Events`` table, whose ``I#`` column names the
instance of each row (``*`` = the cluster-wide sum of the instance rows, left out so that
a wait is counted once). Each instance row becomes a wait row of that instance -- its name
and host from ``Database Instances Included In Report``, its window from that table's End
Snap Time and ``Elapsed Time(min)`` (the snapshot times are printed to the minute, the
elapsed time to 1/100 minute). The columns ``Avg``/``Min``/``Max``/``Std Dev``/``Cnt``
summarise the instances' averages on the cluster rows and are not read. The report's
foreground and background wait lists and its histogram are cluster-wide and not read
either: a row there would belong to no instance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from iogauge.importers.base import Source
from iogauge.importers.oracle.grammar import _BadLine, _Col, _norm, _oracle_time, _Report, _Table
from iogauge.importers.oracle.rows import _Ctx

#: the title of a RAC global report (one row per instance, another layout)
RAC_TITLE_RE = re.compile(r"<title>\s*AWR RAC Report for DB:\s*([^,<\s]+)", re.IGNORECASE)

_INSTANCES = "database instances included in report"
_TOP_FG = "top timed foreground events"
#: heading of the Top Timed Foreground Events table -> the heading the wait reader knows
_TOP_HEADINGS = {"class": "Wait Class", "event": "Event", "waits": "Waits",
                 "%timeouts": "%Timeouts", "total(s)": "Time(s)", "avgwait": "Avg Wait",
                 "%dbtime": "% DB time"}
#: the per-instance-average summary columns of the cluster rows
_TOP_SUMMARY = frozenset({"avg", "min", "max", "stddev", "cnt"})
#: ``15-Feb-23 00:00``: snapshot times to the minute
_MINUTE_RE = re.compile(r"\d{1,2}-[A-Za-z]{3}-\d{2,4} \d{1,2}:\d{2}")


class HtmlTable(Protocol):
    """An HTML table as :mod:`.html` reads it: its summary, line and rows of cells."""

    summary: str
    line: int
    rows: list[tuple[int, list[str]]]


@dataclass(frozen=True)
class _Instance:
    number: str
    name: str
    host: str
    rep: _Report


def _summary(summary: str) -> str:
    return " ".join(summary.lower().split())


def _instances(rows: list[tuple[int, list[str]]], db_name: str) -> dict[str, _Instance]:
    """I# -> the instance, from ``Database Instances Included In Report``."""
    heads = [_norm(h) for h in rows[0][1]]
    need = ("i#", "instance", "host", "endsnaptime", "elapsedtime(min)")
    if any(h not in heads for h in need):
        raise _BadLine(rows[0][0], "Database Instances Included In Report: column headings "
                       f"not recognised ({', '.join(rows[0][1])})")
    out: dict[str, _Instance] = {}
    for line, cells in rows[1:]:
        named = dict(zip(heads, cells, strict=False))
        end = named.get("endsnaptime", "")
        if not _MINUTE_RE.fullmatch(end):
            raise _BadLine(line, f"{end!r} is not a snapshot time")
        try:
            elapsed = Decimal(named["elapsedtime(min)"].replace(",", ""))
            rep = _Report(start_line=1, db_name=db_name, instance=named["instance"],
                          host=named["host"], end=_oracle_time(end + ":00"),
                          elapsed_min=elapsed)
        except (InvalidOperation, ValueError):
            raise _BadLine(line, f"instance {named.get('i#')!r}: no end time and elapsed "
                           "minutes") from None
        out[named["i#"]] = _Instance(named["i#"], named["instance"], named["host"], rep)
    return out


def _top_table(rows: list[tuple[int, list[str]]], line: int) -> tuple[int, list[str]]:
    """Where the I# headings are, and the wait reader's heading of each column ('' for a
    column not read)."""
    at = next((k for k, (_l, cells) in enumerate(rows) if cells[:1] == ["I#"]), None)
    if at is None:
        raise _BadLine(line, "Top Timed Foreground Events: no I# heading")
    names = []
    for head in rows[at][1][1:]:
        key = _norm(head)
        if key in _TOP_HEADINGS:
            names.append(_TOP_HEADINGS[key])
        elif key in _TOP_SUMMARY:
            names.append("")
        else:
            raise _BadLine(rows[at][0], f"Top Timed Foreground Events: heading {head!r} is "
                           "not one of Oracle's")
    return at, names


def rac_waits(tables: Sequence[HtmlTable], source: Source, db_name: str,
              make_ctx: Callable[[_Report], _Ctx | str]) -> list[dict[str, Any]]:
    """The wait rows of each instance of a RAC global report (``tables``: the HTML tables
    with ``summary`` and ``rows``; ``make_ctx(rep)``: the reader's context for one
    instance's window, or a reason string)."""
    found = {_summary(t.summary).split(".")[0].strip(): t for t in tables}
    inst_t, top_t = found.get(_INSTANCES), found.get(_TOP_FG)
    if inst_t is None or top_t is None or len(inst_t.rows) < 2:
        source.bad_line(None, "AWR RAC report without its Database Instances or Top Timed "
                        "Foreground Events table")
        return []
    try:
        instances = _instances(inst_t.rows, db_name)
        at, names = _top_table(top_t.rows, top_t.line)
    except _BadLine as exc:
        source.bad_line(exc.line_no, exc.reason)
        return []
    keep = [k for k, n in enumerate(names) if n]
    cols = [_Col(names[k], k, k, _norm(names[k]) in ("event", "waitclass")) for k in keep]
    by_instance: dict[str, _Table] = {}
    for line, cells in top_t.rows[at + 1:]:
        if len(cells) != len(names) + 1:
            source.bad_line(line, f"Top Timed Foreground Events: {len(cells)} cells under "
                            f"{len(names) + 1} headings")
            continue
        number = cells[0]
        if number == "*":
            continue  # the cluster-wide sum of the instance rows below it
        if number not in instances:
            source.bad_line(line, f"Top Timed Foreground Events: instance {number!r} is not "
                            "in Database Instances Included In Report")
            continue
        table = by_instance.setdefault(number, _Table(
            title="Top Timed Foreground Events", title_line=top_t.line, cols=cols,
            cols2=None, complete=True))
        table.rows.append((line, [cells[1 + k] for k in keep], None, None))
    out: list[dict[str, Any]] = []
    notes: set[str] = set()
    for number, table in by_instance.items():
        ctx = make_ctx(instances[number].rep)
        if isinstance(ctx, str):
            source.bad_line(None, f"instance {instances[number].name}: {ctx}")
            continue
        try:
            ctx.add_waits(table, "top timed events")
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
        out += ctx.wait_rows
        notes |= ctx.notes
    for note in sorted(notes):
        source.note(note)
    return out
