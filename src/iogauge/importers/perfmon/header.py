"""The PDH-CSV/TSV header line: the counter paths of every column, and the devices they name."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.perfmon.counters import (
    _CPU_OBJECTS,
    _DISK_OBJECTS,
    _DRIVE_RE,
    _HEADER_RE,
    _PATH_RE,
    _TOTAL,
    CPU_COUNTERS,
    DISK_COUNTERS,
)

# ---- header ------------------------------------------------------------------------------


@dataclass
class _Device:
    host: str
    obj: str
    instance: str
    kind: str
    parent: str | None = None
    #: SampleFrame column -> (file column index, conversion)
    counters: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class _Header:
    line_no: int  # 1-based line of the header
    separator: str
    n_cells: int
    zone: str | None
    bias_min: int | None
    devices: list[_Device]
    cpu: dict[str, dict[str, int]]  # host -> cpu column -> file column index


def _split_cells(line: str, separator: str) -> list[str]:
    return next(csv.reader([line], delimiter=separator, quotechar='"'))


def _find_header(text: bytes) -> tuple[int, int, str]:
    """(0-based line index, byte offset after the line, decoded line) of the first non-blank
    line."""
    pos = 0
    idx = 0
    while pos < len(text):
        end = text.find(b"\n", pos)
        stop = len(text) if end < 0 else end + 1
        line = text[pos:stop].decode("utf-8", errors="replace").lstrip("\ufeff")
        if line.strip():
            return idx, stop, line.rstrip("\r\n")
        pos = stop
        idx += 1
    return idx, len(text), ""


def _parse_header(line: str, line_no: int, source: Source) -> _Header:
    separator = "\t" if line.lstrip().startswith('"(PDH-TSV') else ","
    cells = _split_cells(line, separator)
    m = _HEADER_RE.match(cells[0].strip()) if cells else None
    if m is None:
        raise InputFormatError(source.path, line_no, "expected the PDH format cell "
                               f"'(PDH-CSV 4.0) (<zone>)(<bias>)', got {cells[0][:60]!r}"
                               if cells else "empty header line")
    host_default = source.host or Path(source.path).stem
    devices: dict[tuple[str, str, str], _Device] = {}
    cpu: dict[str, dict[str, tuple[int, int]]] = {}  # host -> col -> (preference, index)
    ignored_objects: set[str] = set()
    ignored_counters: set[str] = set()
    totals = 0
    duplicates: list[str] = []
    for i, cell in enumerate(cells[1:], start=1):
        pm = _PATH_RE.match(cell.strip())
        if pm is None:
            source.bad_line(line_no, f"column {i + 1}: {cell[:80]!r} is not a counter path "
                            "\\\\HOST\\Object(Instance)\\Counter")
            continue
        host = pm["host"] or host_default
        obj = pm["object"].strip()
        obj_l = obj.lower()
        instance = (pm["instance"] or "").strip()
        counter_l = pm["counter"].strip().lower()
        if obj_l in _CPU_OBJECTS:
            if instance.lower() == _TOTAL and counter_l in CPU_COUNTERS:
                pref = _CPU_OBJECTS.index(obj_l)
                col = CPU_COUNTERS[counter_l]
                have = cpu.setdefault(host, {})
                if col not in have or pref < have[col][0]:
                    have[col] = (pref, i)
            continue
        kind = _DISK_OBJECTS.get(obj_l)
        if kind is None:
            ignored_objects.add(obj)
            continue
        if instance.lower() == _TOTAL:
            totals += 1
            continue
        mapped = DISK_COUNTERS.get(counter_l)
        if mapped is None:
            ignored_counters.add(pm["counter"].strip())
            continue
        if not instance:
            source.bad_line(line_no, f"column {i + 1}: {obj} counter without an instance")
            continue
        dev = devices.setdefault((host, obj_l, instance), _Device(host, obj, instance, kind))
        column, conv = mapped
        if column in dev.counters:
            duplicates.append(cell.strip())
            continue
        dev.counters[column] = (i, conv)
    if totals:
        source.note("perfmon: _Total instances skipped (PDH sums the instances into _Total; "
                    "keeping it would count every I/O twice)")
    if ignored_objects:
        source.note(f"perfmon: objects without disk statistics ignored: "
                    f"{', '.join(sorted(ignored_objects))}")
    if ignored_counters:
        source.note(f"perfmon: disk counters not mapped (see the module documentation; "
                    f"'% Disk Time' is queue length x 100, not busy time): "
                    f"{', '.join(sorted(ignored_counters))}")
    if duplicates:
        source.note(f"perfmon: {len(duplicates)} duplicate counter column(s) ignored, the "
                    f"first kept: {duplicates[0]}")
    dev_list = list(devices.values())
    _link_parents(dev_list, source)
    bias = int(m["bias"]) if m["bias"] is not None else None
    cpu_idx = {h: {c: idx for c, (_p, idx) in cols.items()} for h, cols in cpu.items()}
    return _Header(line_no, separator, len(cells), m["zone"], bias, dev_list, cpu_idx)


def _link_parents(devices: list[_Device], source: Source) -> None:
    """LogicalDisk ``C:`` -> the PhysicalDisk whose instance name lists ``C:``."""
    letters: dict[tuple[str, str], list[str]] = {}
    for d in devices:
        if d.kind == "physical_disk":
            for tok in d.instance.split():
                if _DRIVE_RE.match(tok):
                    letters.setdefault((d.host, tok.upper()), []).append(d.instance)
    for d in devices:
        if d.kind != "logical_disk" or not _DRIVE_RE.match(d.instance):
            continue
        owners = letters.get((d.host, d.instance.upper()), [])
        if len(owners) == 1:
            d.parent = owners[0]
        elif len(owners) > 1:
            source.note(f"perfmon: {d.host} {d.instance} is listed by several physical "
                        f"disks ({', '.join(owners)}): a spanned volume, parent left empty")
