"""Rows from a table's cells, one at a time: the one reader of a table's records, used for
HTML reports and for the text tables set aside by the layout-at-a-time path.
"""


from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from iogauge.importers.oracle.grammar import (
    _EVENT_RE,
    _NOT_EVENT_RE,
    _NOT_FILENAME_RE,
    _TABLESPACE_RE,
    DEFAULT_BLOCK_BYTES,
    WAIT_FIGURES,
    _BadLine,
    _Col,
    _f,
    _file_layout,
    _number,
    _Report,
    _Table,
    _wait_mapping,
    _with_unit_ms,
    layout_note,
    wait_refusal,
)


class Refuser(Protocol):
    """Where a refused line goes: a Source (HTML) or a table's _Sink (text)."""

    def bad_line(self, line_no: int | None, reason: str) -> None: ...


@dataclass
class _Ctx:
    source: Refuser
    fmt: str
    ts: datetime
    interval_s: Decimal
    host: str
    rep: _Report
    wait_rows: list[dict[str, Any]] = field(default_factory=list)
    file_rows: list[dict[str, Any]] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)
    seen: set[tuple[str, str]] = field(default_factory=set)
    #: file names printed more than once because the text cut them (see _cut)
    cut_repeats: set[str] = field(default_factory=set)

    # ---- wait events ----------------------------------------------------------------------
    def add_waits(self, table: _Table, section: str) -> None:
        mapping = _wait_mapping(table.cols)
        refusal = wait_refusal(table.cols)
        if refusal is not None:
            raise _BadLine(table.title_line, f"{table.title}: {refusal}")
        for line_no, cells, _, _ in table.rows:
            try:
                self.wait_rows.append(self._wait_row(table, section, mapping, line_no, cells))
            except _BadLine as exc:
                self.source.bad_line(exc.line_no, exc.reason)

    def _wait_row(self, table: _Table, section: str,
                  mapping: list[tuple[str, Decimal | str] | None], line_no: int,
                  cells: list[str]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "source": self.fmt, "host": self.host, "db_name": self.rep.db_name,
            "instance": self.rep.instance, "ts": self.ts, "interval_s": float(self.interval_s),
            "section": section, "wait_class": None,
        }
        for spec, cell, col in zip(mapping, cells, table.cols, strict=True):
            if spec is None:
                continue
            name, how = spec
            if how == "text":
                row[name] = cell or None
            elif how == "unit":
                row[name] = _f(_with_unit_ms(cell, line_no, col.name))
            elif isinstance(how, Decimal):
                value = _number(cell, line_no, col.name, self.notes)
                row[name] = _f(None if value is None else value * how)
        if not row.get("event"):
            raise _BadLine(line_no, f"{table.title}: row without an event name")
        # the row grammar: a line of another block (a load average, a ~ underline) that
        # slipped into the table is refused, never turned into an event
        if not _EVENT_RE.match(row["event"]) or _NOT_EVENT_RE.search(row["event"]):
            raise _BadLine(line_no, f"{table.title}: {row['event']!r} is not an event name "
                           "(a line of another block?)")
        if all(row.get(k) is None for k in WAIT_FIGURES):
            raise _BadLine(line_no, f"{table.title}: no figures for {row['event']!r}")
        return row

    # ---- file and tablespace I/O -------------------------------------------------------------
    def add_files(self, table: _Table, kind: str) -> None:
        cols = table.cols + (table.cols2 or [])
        keys, stats, refusal = _file_layout(cols, kind)
        if refusal is not None:
            raise _BadLine(table.title_line, f"{table.title}: {refusal}")
        if self.rep.block_bytes is None:
            self.notes.add("no 'Std Block Size' / 'db_block_size' in the report: Av Blks/Rd "
                           "converted with 8 KB blocks")
        note = layout_note(cols, kind)
        if note is not None:
            self.notes.add(note)
        last_ts: str | None = None
        for line1, cells1, line2, cells2 in table.rows:
            try:
                row = self._file_row(table, kind, cols, keys, stats, line1, cells1, line2,
                                     cells2, last_ts)
            except _BadLine as exc:
                self.source.bad_line(exc.line_no, exc.reason)
                continue
            last_ts = row["parent"] if kind == "file" else row["device"]
            self.file_rows.append(row)
        if self.cut_repeats:  # (rows of earlier pages of the table too)
            self.file_rows = [row for row in self.file_rows
                              if not (row["device_kind"] == "datafile"
                                      and row["device"] in self.cut_repeats)]
            self.notes.add(f"{table.title}: file names cut at the column width repeat "
                           f"({len(self.cut_repeats)} name(s)); no file of such a name is "
                           "kept (it names none of them), their tablespaces' rows are")

    def _file_row(self, table: _Table, kind: str, cols: list[_Col], keys: list[str],
                  stats: dict[str, int], line1: int, cells1: list[str], line2: int | None,
                  cells2: list[str] | None, last_ts: str | None) -> dict[str, Any]:
        cells = cells1 + (cells2 or [])
        n1 = len(cells1)
        own = cells[keys.index("tablespace")]
        if own and not _TABLESPACE_RE.fullmatch(own):
            raise _BadLine(line1, f"{table.title}: {own!r} is not a tablespace name")
        pdb = cells[keys.index("pdbname")] if "pdbname" in keys else ""
        if own and pdb:  # (12c+ CDB reports: SYSTEM, SYSAUX... of each container)
            own = f"{pdb}:{own}"
        tsname = own or last_ts
        if not tsname:
            raise _BadLine(line1, f"{table.title}: no tablespace name")
        device = cells[keys.index("filename")] if kind == "file" else tsname
        if not device:
            raise _BadLine(line1, f"{table.title}: no file name")
        if kind == "file" and _NOT_FILENAME_RE.search(device):
            raise _BadLine(line1, f"{table.title}: {device!r} is not a file name (a line of "
                           "another block?)")
        dev_kind = "datafile" if kind == "file" else "tablespace"

        def get(stat: str) -> Decimal | None:
            idx = stats.get(stat)
            if idx is None:
                return None
            where = line1 if idx < n1 or line2 is None else line2
            return _number(cells[idx], where, cols[idx].name, self.notes)

        reads, writes = get("reads"), get("writes")
        r_iops, w_iops = get("reads_ps"), get("writes_ps")
        if "reads_ps" not in stats and reads is not None:
            r_iops = reads / self.interval_s
            self.notes.add(f"{table.title}: no Reads/s column (8i); r_iops/w_iops are "
                           "Reads/Writes divided by the snapshot interval")
        if "writes_ps" not in stats and writes is not None:
            w_iops = writes / self.interval_s
        rd_ms, blks = get("rd_ms"), get("blks_rd")
        # Oracle leaves Av Rd(ms) / Av Blks/Rd blank when nothing was read; SampleFrame's
        # convention for "no request completed" is 0.0, as iostat prints
        no_reads = reads == 0 or (reads is None and r_iops == 0)
        if rd_ms is None and no_reads and "rd_ms" in stats:
            rd_ms = Decimal(0)
        block = self.rep.block_bytes or DEFAULT_BLOCK_BYTES
        areq = None if blks is None else blks * block / 1024
        if areq is None and no_reads and "blks_rd" in stats:
            areq = Decimal(0)
        if (device, dev_kind) in self.seen:
            if not (kind == "file" and _cut(table, cols[keys.index("filename")], device)):
                raise _BadLine(line1, f"{table.title}: {device} listed twice")
            self.cut_repeats.add(device)
        self.seen.add((device, dev_kind))
        return {
            "source": self.fmt, "host": self.host, "device": device, "device_kind": dev_kind,
            "parent": tsname if kind == "file" else None, "ts": self.ts,
            "interval_s": float(self.interval_s), "r_iops": _f(r_iops), "w_iops": _f(w_iops),
            "r_await_ms": _f(rd_ms), "r_areq_kB": _f(areq),
        }


def _cut(table: _Table, col: _Col, name: str) -> bool:
    """Whether a file name of a text table fills its column: Statspack 12.1 cuts names at
    52 characters (AWR continues a long name on the next line, so its name is longer), and
    two files of one directory then print the same name."""
    width = col.end - col.start + 1
    return table.cols2 is not None and width > 1 and len(name) == width
