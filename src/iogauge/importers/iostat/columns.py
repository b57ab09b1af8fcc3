"""Column specs of sysstat ``iostat`` text: how each printed column becomes a SampleFrame
column (the table in :mod:`iogauge.importers.iostat`), and the layout of each ``Device``
header a file prints."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

#: sysstat prints the device name as "%-13s" (iostat.c write_plain_ext_stat and
#: write_plain_basic_stat, every version since 9.x).
DEVICE_WIDTH = 13

#: Pretty (device-last) tables after the first of a report: write, discard, flush parts.
PART_RE = r"^\s*(?:w/s|d/s|f/s)\s"

@dataclass(frozen=True)
class ColumnSpec:
    """How one printed column becomes a SampleFrame column.

    Attributes:
        target: SampleFrame column, or None when the column is not imported.
        factor: multiplier from the printed unit to the SampleFrame unit (exact: powers of 2).
        size: the value is a kB amount that ``--human`` prints with a k/M/G… suffix.
        rank: when two printed columns give one target (sysstat 7 printed sectors and kB),
            the lower rank wins.
        note: told to the user when the column is present but not imported.
    """

    target: str | None
    factor: float = 1.0
    size: bool = False
    rank: int = 0
    note: str | None = None


def _rate_cols() -> dict[str, ColumnSpec]:
    cols: dict[str, ColumnSpec] = {}
    for p in ("r", "w", "d"):
        cols[f"{p}kB/s"] = ColumnSpec(f"{p}_kBps", 1.0, True, 0)
        cols[f"{p}MB/s"] = ColumnSpec(f"{p}_kBps", 1024.0, True, 2)
        cols[f"{p}sec/s"] = ColumnSpec(f"{p}_kBps", 0.5, True, 1)
        cols[f"{p}rqm/s"] = ColumnSpec(f"{p}_merged_ps")
        cols[f"%{p}rqm"] = ColumnSpec(f"{p}_rqm_pct")
        cols[f"{p}_await"] = ColumnSpec(f"{p}_await_ms")
        cols[f"{p}areq-sz"] = ColumnSpec(f"{p}_areq_kB", 1.0, True)
        cols[f"{p}/s"] = ColumnSpec(f"{p}_iops")
    for word, p in (("read", "r"), ("wrtn", "w"), ("dscd", "d")):
        cols[f"kB_{word}/s"] = ColumnSpec(f"{p}_kBps", 1.0, True, 0)
        cols[f"MB_{word}/s"] = ColumnSpec(f"{p}_kBps", 1024.0, True, 2)
        cols[f"Blk_{word}/s"] = ColumnSpec(f"{p}_kBps", 0.5, True, 1)
        for unit in ("kB", "MB", "Blk"):
            cols[f"{unit}_{word}"] = ColumnSpec(None, size=True)  # interval total = rate x interval
    for unit, factor, rank in (("kB", 1.0, 0), ("MB", 1024.0, 2), ("Blk", 0.5, 1)):
        # basic -s: writes and discards together; kBps = read + w+d (see _assemble)
        cols[f"{unit}_w+d/s"] = ColumnSpec("_wd_kBps", factor, True, rank)
        cols[f"{unit}_w+d"] = ColumnSpec(None, size=True)
    return cols


#: Printed iostat device column -> how it is imported (the table in the module docstring).
COLUMNS: dict[str, ColumnSpec] = {
    **_rate_cols(),
    "f/s": ColumnSpec("f_iops"),
    "f_await": ColumnSpec("f_await_ms"),
    "tps": ColumnSpec("iops"),
    "kB/s": ColumnSpec("kBps", 1.0, True, 0),
    "MB/s": ColumnSpec("kBps", 1024.0, True, 2),
    "sec/s": ColumnSpec("kBps", 0.5, True, 1),
    "await": ColumnSpec("await_ms"),
    "areq-sz": ColumnSpec("areq_kB", 1.0, True),
    "avgrq-sz": ColumnSpec("areq_kB", 0.5),  # sectors in every sysstat that printed it
    "avgqu-sz": ColumnSpec("aqu_sz"),
    "aqu-sz": ColumnSpec("aqu_sz"),
    "svctm": ColumnSpec("svctm_ms"),
    "%util": ColumnSpec("util_pct"),
    "rqm/s": ColumnSpec(None, note="column rqm/s (read+write+discard requests merged per second, "
                  "iostat -s) has no SampleFrame column and was not imported"),
}

#: avg-cpu column -> SampleFrame host CPU column.
CPU_COLUMNS: dict[str, str] = {
    "%user": "cpu_user_pct", "%nice": "cpu_nice_pct", "%system": "cpu_system_pct",
    "%sys": "cpu_system_pct", "%iowait": "cpu_iowait_pct", "%steal": "cpu_steal_pct",
    "%idle": "cpu_idle_pct",
}
CPU_TARGETS: tuple[str, ...] = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct",
                                 "cpu_iowait_pct", "cpu_steal_pct", "cpu_idle_pct")

# --human suffixes: sysstat cprintf_unit divides a kB value by 1024 per step through
# "B k M G T P E Z Y" (B is bytes); '%' marks percentages.
SUFFIX_FACTOR: dict[str, float] = {
    "B": 1.0 / 1024, "k": 1.0, "K": 1.0, "M": 1024.0, "G": 1024.0**2, "T": 1024.0**3,
    "P": 1024.0**4, "E": 1024.0**5, "Z": 1024.0**6, "Y": 1024.0**7,
}




@dataclass
class Layout:
    """One distinct ``Device`` header of the file.

    Attributes:
        text: the header line as printed.
        tokens: its column names.
        ends: byte offset just past each name (values are right-aligned to it).
        device_last: ``--pretty``: the device name is the last field.
        part: a ``--pretty`` table after the first of a report (w/s, d/s, f/s first).
        cols: (field index, printed name, mapping) of every imported column.
        notes: what the user should know about this header (unknown columns …).
    """

    text: str
    tokens: list[str]
    ends: list[int]
    device_last: bool
    part: bool
    cols: list[tuple[int, str, ColumnSpec]]
    notes: list[str]

    def fixed_fields(self) -> list[tuple[int, int]]:
        """Byte range of each imported value in a fixed-width device line (right-aligned
        between the ends of two header names; the first after the ``%-13s`` name)."""
        return [(self.ends[idx - 1] if idx > 1 else DEVICE_WIDTH, self.ends[idx])
                for idx, _tok, _spec in self.cols]

    def columns(self, values: list[np.ndarray]) -> dict[str, pl.Series]:
        """The decoded ``values`` of :meth:`fixed_fields` as SampleFrame columns."""
        return {(spec.target or ""): pl.Series(spec.target or "", v * spec.factor
                                               if spec.factor != 1.0 else v)
                for (_idx, _tok, spec), v in zip(self.cols, values, strict=True)}

    @property
    def n_fields(self) -> int:
        return len(self.tokens)


def layout_of(text: str) -> Layout:
    stripped = text.rstrip()
    spans = [(m.group(0), m.end()) for m in re.finditer(r"\S+", stripped)]
    tokens = [s[0] for s in spans]
    device_last = not tokens[0].startswith("Device")
    part = bool(re.match(PART_RE, stripped))
    chosen: dict[str, tuple[int, str, ColumnSpec]] = {}
    notes: list[str] = []
    for idx, tok in enumerate(tokens):
        if tok.startswith("Device"):
            continue
        spec = COLUMNS.get(tok)
        if spec is None:
            notes.append(f"column {tok!r} of the Device header is not a known iostat column; "
                         "it was not imported")
            continue
        if spec.target is None:
            if spec.note:
                notes.append(spec.note)
            continue
        prev = chosen.get(spec.target)
        if prev is None or spec.rank < prev[2].rank:
            chosen[spec.target] = (idx, tok, spec)
    return Layout(text=text, tokens=tokens, ends=[s[1] for s in spans],
                   device_last=device_last, part=part,
                   cols=sorted(chosen.values(), key=lambda c: c[0]), notes=notes)


# ---- reading -------------------------------------------------------------------------------


def cpu_columns(header: str) -> tuple[list[str], list[tuple[str, int, int, int]], int]:
    """An avg-cpu header's column names, the (target, field index, start, end) of each
    imported one (values are right-aligned under their names), and the width of a values
    line printed under it."""
    spans = [(m.group(0), m.end()) for m in re.finditer(r"\S+", header.rstrip())]
    names = [s[0] for s in spans[1:]]
    cols = [(CPU_COLUMNS[nm], j, spans[j][1], spans[j + 1][1])
            for j, nm in enumerate(names) if nm in CPU_COLUMNS]
    return names, cols, len(header.rstrip().encode())


def number(tok: pl.Expr) -> pl.Expr:
    """A printed number: decimal comma accepted, a trailing % dropped."""
    return (tok.str.strip_chars_end("%").str.replace(",", ".", literal=True)
            .cast(pl.Float64, strict=False))


def human_value(tok: pl.Expr, spec: ColumnSpec) -> pl.Expr:
    """A value as iostat printed it, in SampleFrame units (see :data:`SUFFIX_FACTOR`).

    A size with a --human suffix is absolute (k = 1 kB, M = 1024 kB), so the column's own
    unit factor (MB, sectors) applies only to unsuffixed values.
    """
    last = tok.str.slice(-1, 1)
    num = number(tok.str.strip_chars_end("BkKMGTPEZY"))
    if not spec.size:
        value = number(tok)
        return value * spec.factor if spec.factor != 1.0 else value
    suffix = pl.lit(None, pl.Float64)
    for letter, mult in SUFFIX_FACTOR.items():
        suffix = pl.when(last == letter).then(pl.lit(mult)).otherwise(suffix)
    return pl.when(suffix.is_not_null()).then(num * suffix).otherwise(
        number(tok) * spec.factor)


# ---- public entry points -------------------------------------------------------------------
