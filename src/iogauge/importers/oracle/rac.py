"""AWR RAC global reports (``awrgrpt.sql``, ``<title>AWR RAC Report for DB: ...``) in HTML:
the foreground wait events of each instance.

A global report has no Tablespace/File IO Stats (it sums the cluster); what it gives per
instance is the ``Top Timed Foreground Events`` table, whose ``I#`` column names the
instance of each row (``*`` = the cluster-wide sum of the instance rows, left out so that
a wait is counted once). Each instance row becomes a wait row of that instance -- its name
and host from ``Database Instances Included In Report``, its window from that table's End
Snap Time and ``Elapsed Time(min)`` (the snapshot times are printed to the minute, the
elapsed time to 1/100 minute). The columns ``Avg``/``Min``/``Max``/``Std Dev``/``Cnt``
summarise the instances' averages on the cluster rows and are not read. ``IOStat by File
Type`` gives each instance's small and large read times the same way (:mod:`.filetype`).
The report's foreground and background wait lists and its histogram are cluster-wide and
not read: a row there would belong to no instance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from iogauge.importers.base import Source
from iogauge.importers.oracle.filetype import filetype_rows
from iogauge.importers.oracle.grammar import _BadLine, _Col, _norm, _oracle_time, _Report, _Table
from iogauge.importers.oracle.rows import _Ctx

#: the title of a RAC global report (one row per instance, another layout)
RAC_TITLE_RE = re.compile(r"<title>\s*AWR RAC Report for DB:\s*([^,<\s]+)", re.IGNORECASE)

_INSTANCES = "database instances included in report"
_TOP_FG = "top timed foreground events"
_FILETYPE = "iostat by file type"
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
        if len(cells) != len(heads):
            raise _BadLine(line, f"Database Instances Included In Report: {len(cells)} cells "
                           f"under {len(heads)} headings")
        named = dict(zip(heads, cells, strict=True))
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
    instance's window, or a reason string): its Top Timed Foreground Events, then its
    IOStat by File Type read times."""
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
    ctxs: dict[str, _Ctx] = {}
    for number, inst in instances.items():
        ctx = make_ctx(inst.rep)
        if isinstance(ctx, str):
            source.bad_line(None, f"instance {inst.name}: {ctx}")
        else:
            ctxs[number] = ctx
    keep = [k for k, n in enumerate(names) if n]
    cols = [_Col(names[k], k, k, _norm(names[k]) in ("event", "waitclass")) for k in keep]
    by_instance: dict[str, _Table] = {}
    for line, cells in _instance_rows(top_t, at, len(names) + 1, instances, source):
        table = by_instance.setdefault(cells[0], _Table(
            title="Top Timed Foreground Events", title_line=top_t.line, cols=cols,
            cols2=None, complete=True))
        table.rows.append((line, [cells[1 + k] for k in keep], None, None))
    out: list[dict[str, Any]] = []
    for number, table in by_instance.items():
        if number in ctxs:
            try:
                ctxs[number].add_waits(table, "top timed events")
            except _BadLine as exc:
                source.bad_line(exc.line_no, exc.reason)
            out += ctxs[number].wait_rows
    if _FILETYPE in found:
        out += _filetype(found[_FILETYPE], instances, ctxs, source)
    for note in sorted(set().union(*(c.notes for c in ctxs.values()))):
        source.note(note)
    return out


def _instance_rows(t: HtmlTable, at: int, width: int, instances: dict[str, _Instance],
                   source: Source) -> list[tuple[int, list[str]]]:
    """The rows of an instance (I# a number the report lists) under the headings at
    ``at``; the '*' rows (the cluster-wide sums of the instance rows) are left out."""
    title = t.summary.split(".")[0].strip()
    out = []
    for line, cells in t.rows[at + 1:]:
        if len(cells) != width:
            source.bad_line(line, f"{title}: {len(cells)} cells under {width} headings")
        elif cells[0] != "*" and cells[0] not in instances:
            source.bad_line(line, f"{title}: instance {cells[0]!r} is not in Database "
                            "Instances Included In Report")
        elif cells[0] != "*":
            out.append((line, cells))
    return out


def _filetype(t: HtmlTable, instances: dict[str, _Instance], ctxs: dict[str, _Ctx],
              source: Source) -> list[dict[str, Any]]:
    """IOStat by File Type's small/large read times of each instance (:mod:`.filetype`)."""
    at = next((k for k, (_l, cells) in enumerate(t.rows) if cells[:1] == ["I#"]), None)
    if at is None:
        source.bad_line(t.line, "IOStat by File Type: no I# heading")
        return []
    heads = t.rows[at][1]
    out: list[dict[str, Any]] = []
    for line, cells in _instance_rows(t, at, len(heads), instances, source):
        ctx = ctxs.get(cells[0])
        if ctx is None:
            continue
        base = {"source": ctx.fmt, "host": ctx.host, "db_name": ctx.rep.db_name,
                "instance": ctx.rep.instance, "ts": ctx.ts, "interval_s": float(ctx.interval_s)}
        try:
            rows = filetype_rows(heads[1:], cells[1:], line, "IOStat by File Type", ctx.notes)
        except _BadLine as exc:
            source.bad_line(exc.line_no, exc.reason)
            continue
        out += [{**base, **row} for row in rows]
    return out
