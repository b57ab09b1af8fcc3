"""Windows Performance Monitor logs in PDH text form: PDH-CSV 4.0 and PDH-TSV 4.0.

``typeperf -f CSV``, ``relog -f csv``, ``logman ... -f csv`` and ``Export-Counter
-FileFormat CSV`` all write the layout the Platform SDK documents ("Log File Formats",
Performance Data Helper): a header line whose first cell names the format and the time zone
of the log, then one cell per counter path; then one line per sample, first cell the local
time of the sample, then the formatted counter values::

    "(PDH-CSV 4.0) (Pacific Standard Time)(480)","\\\\SQL01\\LogicalDisk(C:)\\Disk Reads/sec"
    "04/15/2024 10:00:15.123","5012.75"

* Time zone: the cell is ``(PDH-CSV 4.0) (<zone name>)(<bias>)``; the bias is the Windows
  ``TIME_ZONE_INFORMATION`` bias in minutes, with UTC = local time + bias, and it already
  includes daylight saving when the log started ("(Eastern Daylight Time)(240)"). The zone
  name can be localised and contain parentheses ("(Maroc (heure d'été))(-60)"), so the bias
  is read from the last parenthesised number. ``--tz`` is used only when the header states
  no zone; otherwise UTC is assumed and a note says so.
* Timestamps are always ``MM/DD/YYYY HH:MM:SS.mmm`` local wall-clock time. PDH keeps the
  bias of the log's start, so a daylight-saving change during the log makes the clock jump;
  a timestamp that does not advance is refused as a bad line (``--lenient`` drops it).
* Counter paths are ``\\\\HOST\\Object(Instance)\\Counter``. Each (host, object, instance)
  becomes one device; several hosts and instances in one file are normal (relog merges).
* Empty cells (``" "``) are "no value" (null). relog writes the first sample of a binary
  log with every rate counter empty, because a rate needs two raw samples: such all-empty
  samples are skipped with a note, but their time still opens the next interval.

Counter mapping (LogicalDisk and PhysicalDisk; names as English Windows spells them):

==============================  =================  ===========================================
counter                         SampleFrame        conversion
==============================  =================  ===========================================
Avg. Disk sec/Read              r_await_ms         seconds x 1000
Avg. Disk sec/Write             w_await_ms         seconds x 1000
Avg. Disk sec/Transfer          await_ms           seconds x 1000
Disk Reads/sec                  r_iops
Disk Writes/sec                 w_iops
Disk Transfers/sec              iops
Disk Read Bytes/sec             r_kBps             bytes / 1024
Disk Write Bytes/sec            w_kBps             bytes / 1024
Disk Bytes/sec                  kBps               bytes / 1024
Avg. Disk Bytes/Read            r_areq_kB          bytes / 1024
Avg. Disk Bytes/Write           w_areq_kB          bytes / 1024
Avg. Disk Bytes/Transfer        areq_kB            bytes / 1024
Avg. Disk Queue Length          aqu_sz
Current Disk Queue Length       inflight           (a gauge at the sample time)
% Idle Time                     util_pct           100 - % Idle Time, clipped at 0
Split IO/Sec                    split_iops
==============================  =================  ===========================================

``% Disk Time`` (and its read/write halves) is not used: it is the summed time requests were
outstanding divided by the interval, i.e. Avg. Disk Queue Length x 100, which exceeds 100 on
any device serving requests in parallel. Microsoft KB 310067 ("% Disk Time May Exceed 100
Percent") gives 100 - % Idle Time as the accurate busy time, which is what ``util_pct`` holds.

Devices: LogicalDisk instances (``C:``, ``HarddiskVolume3``) are ``logical_disk``;
PhysicalDisk instances (``0 C: D:``) are ``physical_disk``. A logical disk's ``parent`` is
the physical disk whose instance name lists its drive letter; none when no physical disk or
several (a spanned volume) list it. The ``_Total`` instances are skipped: PDH computes them
by summing the instances (Windows NT 4.0 Resource Kit, "Troubleshooting the Disk Activity
Counters"), so they would double count; analyses aggregate devices themselves.

Host CPU: ``Processor(_Total)`` (or ``Processor Information(_Total)``) ``% User Time``,
``% Privileged Time`` and ``% Idle Time`` fill ``cpu_user_pct``, ``cpu_system_pct`` and
``cpu_idle_pct`` of that host's rows (privileged time includes interrupt and DPC time, as
iostat's %system includes irq and softirq). Windows has no iowait: ``cpu_iowait_pct`` stays
null. Other objects (Memory, Network Interface, ...) are ignored with a note.

``interval_s`` is, per device, the time since the previous sample line (the previous line
in which the device had a value, if it was empty in between: PDH computes the next rate
from the last raw sample it collected). A first line that has values covers one sampling
interval (typeperf shows its first rate one interval after starting): the median spacing of
the file's samples, noted.

Speed and memory (benchmarks/_perfmon_speed.py): the whole file is parsed by a single
``polars.read_csv`` (only the columns that are used, as Float64). The reshape to one row
per device builds each output column once, contiguous, by concatenating the devices'
columns, and frees each counter column as soon as it is copied; constant and absent
columns are polars literals (no memory); the input bytes are released right after the read
(the registry hands over its only reference). A 200 MB log imports in under 2x the time of
a bare ``polars.read_csv`` with a peak resident set near 2x the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.perfmon.body import _data_rows, _read_table
from iogauge.importers.perfmon.counters import (
    CPU_COUNTERS,
    DESCRIPTION,
    DISK_COUNTERS,
    EXPECTS,
    NAME,
)
from iogauge.importers.perfmon.decoding import read_utf8, to_utf8
from iogauge.importers.perfmon.header import _find_header, _parse_header
from iogauge.importers.perfmon.rows import _invalid_columns, _reshape, _sample_rows
from iogauge.model.sampleframe import SampleFrame

__all__ = ["CPU_COUNTERS", "DESCRIPTION", "DISK_COUNTERS", "EXPECTS", "NAME", "iter_parse",
           "parse", "read_utf8", "sniff", "sniff_bytes", "to_utf8"]


def sniff(head: str) -> bool:
    """The first non-blank line starts with the PDH format cell."""
    start = head.lstrip("\ufeff \t\r\n")
    return start.startswith(('"(PDH-CSV 4.0)', '"(PDH-TSV 4.0)'))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))

def parse(data: bytes, source: Source) -> SampleFrame:
    """Every LogicalDisk/PhysicalDisk instance of every host, one row per sample line."""
    text, encoding = to_utf8(data)
    # Drop our reference to the input: the registry hands the only one over, so the bytes
    # (or, for UTF-16, the original) are freed once parsed and the frame is built without
    # them in memory.
    del data
    return _parse_text([text], encoding, source)


def iter_parse(stream: BinaryIO, source: Source) -> Iterator[SampleFrame]:
    """:func:`parse` of a stream read by :func:`read_utf8` (a UTF-16 log is converted as it
    is read, never held whole), as the one SampleFrame of the file: PDH-CSV is read by one
    ``polars.read_csv`` of the whole text, so it is not streamed further."""
    text, encoding = read_utf8(stream)
    handover = [text]
    del text  # _parse_text frees the text once read_csv has it: no reference here
    yield _parse_text(handover, encoding, source)


def _parse_text(handover: list[bytes], encoding: str, source: Source) -> SampleFrame:
    """:func:`parse` of the UTF-8 text ``handover[0]`` (taken out of the list, so that this
    holds its only reference and frees it once read)."""
    text = handover.pop()
    if encoding == "cp1252":
        source.note("perfmon: not UTF-8 or UTF-16; decoded as Windows-1252 (ANSI)")
    header_idx, header_end, header_line = _find_header(text)
    if not header_line:
        raise InputFormatError(source.path, None, "empty file: no PDH header line")
    header = _parse_header(header_line, header_idx + 1, source)
    if not header.devices:
        raise InputFormatError(source.path, header.line_no, "no LogicalDisk or PhysicalDisk "
                               "counter of a named instance in the header (only _Total or "
                               "other objects)")
    used = sorted({i for d in header.devices for i, _c in d.counters.values()}
                  | {i for cols in header.cpu.values() for i in cols.values()})
    n_rows = _data_rows(text, header_end, header, source)
    df = _read_table(text, header, header_idx, n_rows, used, source)
    del text  # parsed: free the input before building the frame

    value_cols = [f"c{i}" for i in used]
    rows = _sample_rows(df, value_cols, header, header_idx, source)
    first, last = int(rows["_row"][0]), int(rows["_row"][-1])
    if rows.height == df.height:
        pass
    elif last - first + 1 == rows.height:
        # Rows dropped only at the ends (relog's empty first sample): slice, no copy.
        df = df.slice(int(df["_row"].search_sorted(first)), rows.height)
    else:
        df = df.filter(pl.col("_row").is_in(rows["_row"].implode()))
    df = df.with_columns(rows["ts"], rows["_prev"], rows["interval_s"])
    suspect = _invalid_columns(df, value_cols, source)
    # Hand the columns over so that each counter column can be freed as soon as it has
    # been copied into the output (peak memory: the input plus about one copy of the data).
    columns = dict(zip(df.columns, df.get_columns(), strict=True))
    del df, rows
    return _reshape(columns, header, suspect, source)
