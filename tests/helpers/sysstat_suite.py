"""sysstat's own expected outputs (tests/fixtures/sysstat) read a second way, for the parity
test: every device row sysstat printed, as text, with a reader that shares nothing with the
importers (whitespace, ';' and JSON splitting only) [sysstat].

A printed row becomes, per printed column that has a SampleFrame column, the value and the
half unit of its last printed digit; :func:`compare` checks the imported rows against them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from iogauge.errors import IogaugeError
from iogauge.importers.registry import import_file

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "sysstat"
FOLDERS = ("iostat", "iostat-json", "sar", "sadf")

#: printed column (iostat, sar, sadf -d, iostat -o JSON) -> (SampleFrame column, factor)
PRINTED: dict[str, tuple[str, float]] = {
    "tps": ("iops", 1.0), "r/s": ("r_iops", 1.0), "w/s": ("w_iops", 1.0),
    "d/s": ("d_iops", 1.0), "f/s": ("f_iops", 1.0),
    "kB_read/s": ("r_kBps", 1.0), "kB_wrtn/s": ("w_kBps", 1.0), "kB_dscd/s": ("d_kBps", 1.0),
    "MB_read/s": ("r_kBps", 1024.0), "MB_wrtn/s": ("w_kBps", 1024.0),
    "MB_dscd/s": ("d_kBps", 1024.0), "kB/s": ("kBps", 1.0), "MB/s": ("kBps", 1024.0),
    "rkB/s": ("r_kBps", 1.0), "wkB/s": ("w_kBps", 1.0), "dkB/s": ("d_kBps", 1.0),
    "rMB/s": ("r_kBps", 1024.0), "wMB/s": ("w_kBps", 1024.0), "dMB/s": ("d_kBps", 1024.0),
    "rd_sec/s": ("r_kBps", 0.5), "wr_sec/s": ("w_kBps", 0.5),
    "rrqm/s": ("r_merged_ps", 1.0), "wrqm/s": ("w_merged_ps", 1.0),
    "drqm/s": ("d_merged_ps", 1.0), "%rrqm": ("r_rqm_pct", 1.0), "%wrqm": ("w_rqm_pct", 1.0),
    "%drqm": ("d_rqm_pct", 1.0), "r_await": ("r_await_ms", 1.0),
    "w_await": ("w_await_ms", 1.0), "d_await": ("d_await_ms", 1.0),
    "f_await": ("f_await_ms", 1.0), "await": ("await_ms", 1.0),
    "rareq-sz": ("r_areq_kB", 1.0), "wareq-sz": ("w_areq_kB", 1.0),
    "dareq-sz": ("d_areq_kB", 1.0), "areq-sz": ("areq_kB", 1.0),
    "avgrq-sz": ("areq_kB", 0.5), "aqu-sz": ("aqu_sz", 1.0), "avgqu-sz": ("aqu_sz", 1.0),
    "svctm": ("svctm_ms", 1.0), "%util": ("util_pct", 1.0),
}
#: sadf -j disk keys -> printed column names above
SADF_JSON_KEYS = {"tps": "tps", "rd_sec": "rd_sec/s", "wr_sec": "wr_sec/s", "rkB": "rkB/s",
                  "wkB": "wkB/s", "dkB": "dkB/s", "areq-sz": "areq-sz", "avgrq-sz": "avgrq-sz",
                  "aqu-sz": "aqu-sz", "avgqu-sz": "avgqu-sz", "await": "await",
                  "svctm": "svctm", "util-percent": "%util"}
#: sadf -j sysstat 10 disk keys -> the key that replaced them
SADF_JSON_NEWER = {"rd_sec": "rkB", "wr_sec": "wkB", "avgrq-sz": "areq-sz",
                   "avgqu-sz": "aqu-sz"}
#: --human unit letters: kB per letter (sysstat cprintf_unit, 1024 per step)
UNIT_KB = {"B": 1 / 1024, "k": 1.0, "M": 1024.0, "G": 1024.0**2, "T": 1024.0**3}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SAR_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}(?:\s+[AP]M)?\s")
_NUMBER = re.compile(r"^(-?\d+(?:\.(\d+))?)([BkMGT%]?)$")


@dataclass
class Printed:
    """What sysstat printed: per device and printed column, the values in file order, each
    as (value in SampleFrame units, tolerance)."""

    values: dict[str, dict[str, list[tuple[float, float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list)))

    def add(self, device: str, column: str, text: str | float) -> None:
        if column not in PRINTED:
            return
        target, factor = PRINTED[column]
        value, tol = _read(text, factor)
        self.values[device][target].append((value, tol))

    def rows(self, device: str) -> int:
        return max(len(v) for v in self.values[device].values())

    @property
    def total_rows(self) -> int:
        return sum(self.rows(d) for d in self.values)


def _read(text: str | float, factor: float) -> tuple[float, float]:
    """(value in SampleFrame units, half a unit of the last printed digit, scaled)."""
    if isinstance(text, float | int):
        return float(text) * factor, 0.005 * factor + 1e-9
    m = _NUMBER.match(text.strip())
    if m is None:
        raise ValueError(f"not a printed number: {text!r}")
    digits = len(m.group(2) or "")
    unit = m.group(3)
    scale = UNIT_KB[unit] if unit and unit != "%" else factor
    return float(m.group(1)) * scale, 0.5 * 10.0**-digits * scale + 1e-9


def _iostat_text(lines: list[str], out: Printed) -> None:
    cols: list[str] | None = None
    pretty = False
    for raw in lines:
        toks = raw.split()
        if not toks:
            cols = None
            continue
        if toks[0] in ("Device", "Device:"):
            cols, pretty = toks[1:], False
        elif toks[-1] == "Device":
            cols, pretty = toks[:-1], True
        elif cols is not None:
            name, vals = (toks[-1], toks[:-1]) if pretty else (toks[0], toks[1:])
            if len(vals) == len(cols):
                for c, v in zip(cols, vals, strict=True):
                    out.add(name, c, v)


def _sar_text(lines: list[str], out: Printed) -> None:
    cols: list[str] | None = None
    dev_at = 0
    for raw in lines:
        line = _ANSI.sub("", raw)
        if not _SAR_TIME.match(line):
            cols = None
            continue
        toks = line.split()[1:]
        if toks and toks[0] in ("AM", "PM"):
            toks = toks[1:]
        if "DEV" in toks and "tps" in toks:
            cols, dev_at = toks, toks.index("DEV")
        elif cols is not None and len(toks) == len(cols):
            for i, (c, v) in enumerate(zip(cols, toks, strict=True)):
                if i != dev_at:
                    out.add(toks[dev_at], c, v)


def _sadf_csv(lines: list[str], out: Printed) -> None:
    cols: list[str] | None = None
    for line in lines:
        if line.startswith("#"):
            head = line.lstrip("# ").split(";")
            cols = head if len(head) > 3 and head[3] == "DEV" else None
        elif cols is not None and line.strip():
            fields = line.split(";")
            for c, v in zip(cols[4:], fields[4:], strict=True):
                out.add(fields[3], c, v)


def _json(doc: dict[str, Any], out: Printed) -> None:
    for host in doc["sysstat"]["hosts"]:
        for stat in host["statistics"]:
            for disk in stat.get("disk", []):
                name = disk.get("disk_device") or disk.get("disk-device")
                for key, value in disk.items():
                    if SADF_JSON_NEWER.get(key) in disk:
                        continue  # (sadf -j prints the sysstat 10 keys beside the 11.6 ones)
                    column = SADF_JSON_KEYS.get(key, key) if "disk-device" in disk else key
                    if isinstance(value, float | int) and not isinstance(value, bool):
                        out.add(name, column, value)


def printed(path: Path) -> Printed:
    """Every device row ``path`` holds, read as text."""
    text = path.read_text(encoding="utf-8")
    out = Printed()
    if text.lstrip().startswith("{"):
        _json(json.loads(text), out)
    elif path.parent.name == "sadf":
        _sadf_csv(text.splitlines(), out)
    elif path.parent.name == "sar":
        _sar_text(text.splitlines(), out)
    else:
        _iostat_text(text.splitlines(), out)
    return out


def manifest() -> dict[str, str]:
    """file name -> the sysstat command that printed it (MANIFEST.tsv)."""
    rows = (SUITE / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
    return {r.split("\t")[0]: r.split("\t")[2] for r in rows if not r.startswith("#")}


def interval_of(command: str) -> float:
    """The interval an iostat command line was given (1 s when it has none: one report)."""
    nums = re.findall(r"\s(\d+)(?=\s|$)", command.split("iostat", 1)[-1])
    return float(nums[0]) if nums else 1.0


@dataclass
class Outcome:
    """How a vendored output imported: rows (None: refused), the reason or notes."""

    rows: int | None
    frame: pl.DataFrame | None
    reason: str
    notes: list[str]


def import_output(path: Path) -> Outcome:
    """Import one output through the public library call, with --start and --interval for
    iostat outputs (sysstat's test runs print no time stamps)."""
    kw: dict[str, Any] = {}
    if path.parent.name.startswith("iostat"):
        kw = {"start": datetime(2020, 6, 1, tzinfo=UTC),
              "interval_s": interval_of(manifest()[path.name])}
    try:
        result = import_file(path, **kw)
    except IogaugeError as exc:
        return Outcome(None, None, str(exc), [])
    return Outcome(len(result.frame), result.frame.df, "", result.notes)


def compare(expected: Printed, frame: pl.DataFrame) -> list[str]:
    """Differences between the printed rows and the imported ones (empty: none)."""
    diffs: list[str] = []
    names = set(frame["device"].unique().to_list())
    if names != set(expected.values):
        diffs.append(f"devices {sorted(names)} != printed {sorted(expected.values)}")
    for device, columns in expected.values.items():
        rows = frame.filter(pl.col("device") == device)
        if rows.height != expected.rows(device):
            diffs.append(f"{device}: {rows.height} rows, printed {expected.rows(device)}")
            continue
        for target, printed_values in columns.items():
            got = rows[target].to_list()
            for k, ((want, tol), have) in enumerate(zip(printed_values, got, strict=True)):
                if have is None or abs(have - want) > tol:
                    diffs.append(f"{device} row {k} {target}: {have} != printed {want}")
    return diffs
