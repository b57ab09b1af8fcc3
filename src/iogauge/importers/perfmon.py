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

import codecs
import csv
import io
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.model.sampleframe import SCHEMA, TS_DTYPE, SampleFrame

NAME = "perfmon"
DESCRIPTION = ("Windows Performance Monitor CSV/TSV (PDH-CSV 4.0 from typeperf, relog, logman): "
               "LogicalDisk and PhysicalDisk counters")
EXPECTS = ('a first cell "(PDH-CSV 4.0) (<time zone>)(<bias>)" (or PDH-TSV 4.0) followed by '
           'counter paths "\\\\HOST\\LogicalDisk(C:)\\Avg. Disk sec/Read"')

#: The format cell: zone name (may itself contain parentheses) and bias in minutes.
_HEADER_RE = re.compile(r"^\(PDH-(?P<kind>CSV|TSV) 4\.0\)\s*"
                        r"(?:\((?P<zone>.*)\)\s*\((?P<bias>[+-]?\d+)\))?\s*$")
#: A counter path; the instance may contain backslashes (mount points) and parentheses.
_PATH_RE = re.compile(r"^(?:\\\\(?P<host>[^\\]+))?\\(?P<object>[^\\(]+)"
                      r"(?:\((?P<instance>.*)\))?\\(?P<counter>[^\\]+)$")

#: PDH timestamp layout (Platform SDK: "MM/DD/YYYY HH:MM:SS.mmm", local time).
_TS_FORMAT = "%m/%d/%Y %H:%M:%S%.f"

#: Conversions: how a counter value becomes a SampleFrame value.
_AS_IS, _MS, _KIB, _IDLE = "as-is", "s->ms", "B->kB", "idle->util"

#: Disk counter (lower case) -> (SampleFrame column, conversion).
DISK_COUNTERS: dict[str, tuple[str, str]] = {
    "avg. disk sec/read": ("r_await_ms", _MS),
    "avg. disk sec/write": ("w_await_ms", _MS),
    "avg. disk sec/transfer": ("await_ms", _MS),
    "disk reads/sec": ("r_iops", _AS_IS),
    "disk writes/sec": ("w_iops", _AS_IS),
    "disk transfers/sec": ("iops", _AS_IS),
    "disk read bytes/sec": ("r_kBps", _KIB),
    "disk write bytes/sec": ("w_kBps", _KIB),
    "disk bytes/sec": ("kBps", _KIB),
    "avg. disk bytes/read": ("r_areq_kB", _KIB),
    "avg. disk bytes/write": ("w_areq_kB", _KIB),
    "avg. disk bytes/transfer": ("areq_kB", _KIB),
    "avg. disk queue length": ("aqu_sz", _AS_IS),
    "current disk queue length": ("inflight", _AS_IS),
    "% idle time": ("util_pct", _IDLE),
    "split io/sec": ("split_iops", _AS_IS),
}
#: Processor(_Total) counter (lower case) -> host CPU column.
CPU_COUNTERS: dict[str, str] = {
    "% user time": "cpu_user_pct",
    "% privileged time": "cpu_system_pct",
    "% idle time": "cpu_idle_pct",
}
_DISK_OBJECTS = {"logicaldisk": "logical_disk", "physicaldisk": "physical_disk"}
_CPU_OBJECTS = ("processor", "processor information")  # preference order
_TOTAL = "_total"
_DRIVE_RE = re.compile(r"^[A-Za-z]:$")


def sniff(head: str) -> bool:
    """The first non-blank line starts with the PDH format cell."""
    start = head.lstrip("\ufeff \t\r\n")
    return start.startswith(('"(PDH-CSV 4.0)', '"(PDH-TSV 4.0)'))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---- decoding ----------------------------------------------------------------------------


def _utf16_to_utf8(data: bytes, offset: int, big_endian: bool) -> bytes:
    """UTF-16 text as UTF-8 bytes. ASCII-only text (the usual case) is converted by taking
    the low byte of every code unit -- exact when every unit is <= 0x7F, one copy, and
    ~10x faster than a codec, which builds a str and then the bytes."""
    n_units = (len(data) - offset) // 2
    if (len(data) - offset) % 2 == 0 and n_units:
        units = np.frombuffer(data, dtype=">u2" if big_endian else "<u2", offset=offset)
        if int(units.max()) <= 0x7F:
            low = np.frombuffer(data, dtype=np.uint8, offset=offset + (1 if big_endian else 0))
            return low[::2].tobytes()
    codec = "utf-16-be" if big_endian else "utf-16-le"
    return data[offset:].decode(codec, errors="replace").encode("utf-8")


def to_utf8(data: bytes) -> tuple[bytes, str]:
    """The file as UTF-8 bytes (what polars reads) and the encoding it was in.

    relog writes UTF-16 LE with a BOM by default; typeperf and logman CSV are ANSI
    (the system code page, cp1252 on western Windows) or UTF-8. UTF-8 and ASCII data are
    returned as they are (no copy).
    """
    if data.startswith(b"\xff\xfe"):
        return _utf16_to_utf8(data, 2, big_endian=False), "utf-16-le"
    if data.startswith(b"\xfe\xff"):
        return _utf16_to_utf8(data, 2, big_endian=True), "utf-16-be"
    if len(data) >= 4 and data[1:2] == b"\x00" and data[3:4] == b"\x00":
        return _utf16_to_utf8(data, 0, big_endian=False), "utf-16-le"
    if data.isascii():
        return data, "ascii"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace").encode("utf-8"), "cp1252"
    return data, "utf-8"


#: Bytes read per call when :func:`read_utf8` converts a UTF-16 stream: a piece is converted
#: while it is still in the CPU cache, and the UTF-16 text is never held whole.
READ_BYTES = 1 << 20


def read_utf8(stream: BinaryIO) -> tuple[bytes, str]:
    """The whole of ``stream`` as UTF-8 bytes and the encoding it was in, as :func:`to_utf8`
    gives for the same bytes.

    UTF-16 (relog's default, twice the size of the text) is converted a piece at a time as
    it is read: ASCII pieces by narrowing every code unit to a byte (exact when each is
    <= 0x7F) straight into one output buffer, sized from the file when it is a plain file,
    any other piece and everything after it by an incremental codec (which carries a code
    unit or surrogate pair split between pieces). Other encodings are read whole and go
    through :func:`to_utf8`.
    """
    head = stream.read(4)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        offset, big_endian = 2, head.startswith(b"\xfe\xff")
    elif len(head) >= 4 and head[1:2] == b"\x00" and head[3:4] == b"\x00":
        offset, big_endian = 0, False
    else:
        return to_utf8(_read_rest(stream, head))
    encoding = "utf-16-be" if big_endian else "utf-16-le"
    unit = ">u2" if big_endian else "<u2"
    # ASCII text goes into ``out`` (pre-sized for a plain file: no growing, no join);
    # ``parts`` takes what does not fit and everything once a non-ASCII unit was met.
    out = bytearray(_remaining(stream) // 2 + 2)
    out_arr = np.frombuffer(out, dtype=np.uint8)
    filled = 0
    parts: list[bytes] = []
    carry = head[offset:]  # bytes of the text not yet converted (at most one odd byte)
    codec: codecs.IncrementalDecoder | None = None
    buf = bytearray(READ_BYTES)
    while True:
        n = stream.readinto(buf)  # type: ignore[attr-defined]
        if not n:
            break
        chunk = carry + bytes(buf[:n]) if carry else memoryview(buf)[:n]
        even = len(chunk) - len(chunk) % 2
        carry = bytes(chunk[even:])
        if codec is None:
            units = np.frombuffer(chunk, dtype=unit, count=even // 2)
            if units.size == 0 or int(units.max()) <= 0x7F:
                # the numeric value of a unit <= 0x7F is its ASCII byte, whatever the order
                if not parts and filled + units.size <= out_arr.size:
                    np.copyto(out_arr[filled:filled + units.size], units, casting="unsafe")
                    filled += units.size
                else:
                    parts.append(units.astype(np.uint8).tobytes())
                continue
            codec = codecs.getincrementaldecoder(encoding)(errors="replace")
        parts.append(codec.decode(bytes(chunk[:even])).encode("utf-8"))
    if codec is None:
        codec = codecs.getincrementaldecoder(encoding)(errors="replace")
    tail = codec.decode(carry, final=True)  # an odd last byte: U+FFFD, as a one-shot decode
    if tail:
        parts.append(tail.encode("utf-8"))
    first = bytes(memoryview(out)[:filled])
    del out_arr, out
    return (b"".join([first, *parts]) if parts else first), encoding


def _remaining(stream: BinaryIO) -> int:
    """Bytes left to read in ``stream`` when it is a plain file, else 0 (unknown)."""
    if not isinstance(stream, io.BufferedReader):
        return 0
    try:
        st = os.fstat(stream.fileno())
        return max(st.st_size - stream.tell(), 0) if stat.S_ISREG(st.st_mode) else 0
    except (OSError, ValueError):
        return 0


def _read_rest(stream: BinaryIO, head: bytes) -> bytes:
    """``head`` (what was read of ``stream``) and the rest of it, as one bytes object.

    A plain file is read again from its start in one call of its known size (as
    :func:`.io.read_bytes` does): ``head + read()`` would grow a buffer chunk by chunk and
    then copy it, holding the file two or three times at the peak.
    """
    if isinstance(stream, io.BufferedReader) and stream.seekable():
        try:
            size = os.fstat(stream.fileno()).st_size
        except OSError:
            size = 0
        if size > len(head):
            stream.seek(0)
            data = stream.read(size)
            rest = stream.read()  # a file that grew while being read
            return data + rest if rest else data
    return head + stream.read()


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


# ---- body --------------------------------------------------------------------------------


def _data_rows(text: bytes, header_end: int, header: _Header,
               source: Source) -> int | None:
    """How many lines after the header to read: None = all. Drops typeperf's console
    trailer ("Exiting, please wait...") and a last line cut off mid-write."""
    tail_start = max(header_end, len(text) - 65536)
    lines = text[tail_start:].split(b"\n")
    if text.endswith(b"\n"):
        lines = lines[:-1]  # the empty piece after the final newline is not a line
    if tail_start > header_end:
        lines = lines[1:]  # the window may start inside a line
    k = len(lines) - 1
    while k >= 0 and not lines[k].strip().startswith(b'"'):
        k -= 1
    trailer = sum(1 for x in lines[k + 1:] if x.strip())
    cut = False
    if k >= 0 and k == len(lines) - 1 and not text.endswith(b"\n"):
        last = lines[k].decode("utf-8", errors="replace").rstrip("\r")
        cut = (len(_split_cells(last, header.separator)) != header.n_cells
               or not last.endswith('"'))
    if trailer:
        source.note(f"perfmon: {trailer} line(s) after the last sample are not samples "
                    "(typeperf console messages) and were ignored")
    if cut:
        source.note("perfmon: the last line is incomplete (file cut off while being "
                    "written) and was ignored")
    if not trailer and not cut:
        return None
    total_lines = text.count(b"\n", header_end) + (0 if text.endswith(b"\n") else 1)
    return max(total_lines - (len(lines) - k - 1) - (1 if cut else 0), 0)


def _csv(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
         columns: list[int], overrides: dict[str, pl.DataType] | None) -> pl.DataFrame:
    # The header's cell count is the schema (not the first sample line's, which may be
    # malformed), and a longer line is an error, not truncated: see _read_table.
    types = overrides or {}
    schema = {f"column_{i}": types.get(f"column_{i}", pl.String())
              for i in range(header.n_cells)}
    return pl.read_csv(text, has_header=False, skip_lines=header_idx + 1,
                       separator=header.separator, quote_char='"', columns=[0, *columns],
                       n_rows=n_rows, schema=schema, truncate_ragged_lines=False)


def _read_table(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
                columns: list[int], source: Source) -> pl.DataFrame:
    """The used columns as a frame: ``_row`` (0-based line after the header), ``ts``
    (text) and ``c<index>`` (Float64).

    The last cell of every line is read too (as text when it is not a used counter): a line
    cut short (fewer cells than the header) leaves it null. Then, or when polars cannot read
    the lines as they are (a quote left open, a line with more cells, a first line shorter
    than the header, a cell that is not a number), :func:`_read_checked` refuses the
    malformed lines by number, off the fast path, and reads the rest."""
    last = header.n_cells - 1
    wanted = sorted({*columns, last})
    overrides: dict[str, pl.DataType] = {f"column_{i}": pl.Float64() for i in columns}
    if last not in columns:
        overrides[f"column_{last}"] = pl.String()
    try:
        df = _csv(text, header, header_idx, n_rows, wanted, overrides)
        ragged = df[f"column_{last}"].null_count() > df["column_0"].null_count()
        if ragged and last in columns:
            # A used counter's cell is null when blank -- relog writes " " in every cell of
            # a binary log's first sample -- as when the line is cut short: read as text,
            # only a missing cell is. (Taken for a cut line, every relog file went the line
            # check's way: 4.9-6.1 s and 1.04 GB for the 403 MB UTF-16 benchmark file, which
            # this reads in 1.3 s at 0.47 GB.)
            tail = _csv(text, header, header_idx, n_rows, [last],
                        {f"column_{last}": pl.String()})
            ragged = tail[f"column_{last}"].null_count() > tail["column_0"].null_count()
            del tail
    except pl.exceptions.NoDataError:
        raise InputFormatError(source.path, None, "no sample lines after the header") from None
    except pl.exceptions.PolarsError:
        ragged = True
    if ragged:
        df = _read_checked(text, header, header_idx, n_rows, wanted, overrides, source)
    else:
        df = df.with_row_index("_row")
    if last not in columns:
        df = df.drop(f"column_{last}")
    return df.rename({"column_0": "ts"} | {f"column_{i}": f"c{i}" for i in columns})


def _read_checked(text: bytes, header: _Header, header_idx: int, n_rows: int | None,
                  wanted: list[int], overrides: dict[str, pl.DataType],
                  source: Source) -> pl.DataFrame:
    """:func:`_read_table` of a file polars could not read as it is. Each sample line must be
    cells joined by the separator, exactly ``n_cells`` of them, each ``"quoted"`` (as PDH
    writes them) or bare text without quote or separator; the others are refused
    (``source.bad_line``: raise, or skip in lenient mode) and the well-formed lines read,
    ``_row`` keeping each line's place after the header; a cell that is not a number
    refuses its line too (:func:`_numbers_or_refuse`)."""
    lines = pl.read_csv(text, has_header=False, skip_lines=header_idx + 1, separator="\x1f",
                        quote_char=None, n_rows=n_rows, new_columns=["line"],
                        schema={"line": pl.String()}).with_row_index("_row")
    sep = f"\\x{{{ord(header.separator):x}}}"  # the separator as a regex escape
    line = pl.col("line").str.strip_chars_end("\r")
    # Quoted cells reduced to "" (PDH quotes every cell; a file saved again by a
    # spreadsheet may not): then a cell is "" or text without quote or separator.
    reduced = line.str.replace_all(r'"[^"]*"', '""')
    cell = f'(?:""|[^"{sep}]*)'
    cells = reduced.str.count_matches(sep) + 1
    reason = (pl.when(line.is_null() | (line.str.strip_chars() == "")).then(None)
              .when(~reduced.str.contains(f"^{cell}(?:{sep}{cell})*$"))
              .then(pl.format("the line is not cells joined by the separator (a quote left "
                              "open, a character after a closing quote): {}",
                              line.str.slice(0, 100)))
              .when(cells != header.n_cells)
              .then(pl.format("{} cells where the header has " + str(header.n_cells), cells))
              .otherwise(None))
    checked = lines.select("_row", "line", reason.alias("reason"))
    del lines
    bad = checked.filter(pl.col("reason").is_not_null())
    for r, why in bad.select("_row", "reason").iter_rows():
        source.bad_line(header_idx + 2 + int(r), str(why))
    good = checked.filter(pl.col("reason").is_null())
    del checked
    rows = good["_row"]
    if bad.height:
        body = good["line"].fill_null("").str.join("\n").item() + "\n"
        text, skip, n_rows = body.encode("utf-8"), -1, None
    else:
        skip = header_idx
    del good
    values = [i for i in wanted if overrides[f"column_{i}"] == pl.Float64()]
    try:
        try:
            df = _csv(text, header, skip, n_rows, wanted, overrides)
        except pl.exceptions.ComputeError:
            # Some cell is not a number: read the same columns as text to find which lines.
            df = _csv(text, header, skip, n_rows, wanted, None)
            return _numbers_or_refuse(df.with_columns(rows.alias("_row")).select(
                "_row", *df.columns), values, header_idx, source)
    except pl.exceptions.NoDataError:
        raise InputFormatError(source.path, None, "no sample lines after the header") from None
    except pl.exceptions.PolarsError as exc:
        raise InputFormatError(source.path, None, f"cannot read the sample lines: {exc}"
                               ) from exc
    return df.with_columns(rows.alias("_row")).select("_row", *df.columns)


def _numbers_or_refuse(df: pl.DataFrame, columns: list[int], header_idx: int,
                       source: Source) -> pl.DataFrame:
    """``column_<i>`` of ``columns`` (text) as Float64: a line with a cell that is not a
    number (blank cells are "no value") is refused, or dropped in lenient mode."""
    names = [f"column_{i}" for i in columns]

    def number(n: str) -> pl.Expr:
        return pl.col(n).str.strip_chars().cast(pl.Float64, strict=False)

    def is_bad(n: str) -> pl.Expr:
        return number(n).is_null() & (pl.col(n).str.strip_chars().str.len_bytes() > 0)

    bad_rows = (df.filter(pl.any_horizontal([is_bad(n) for n in names]))
                .select("_row", *names, *[is_bad(n).alias(f"bad:{n}") for n in names]))
    for rec in bad_rows.iter_rows(named=True):
        which = next(n for n in names if rec[f"bad:{n}"])
        source.bad_line(header_idx + 2 + int(rec["_row"]),
                        f"column {int(which.removeprefix('column_')) + 1}: {rec[which]!r} "
                        "is not a number")
    if bad_rows.height:
        df = df.filter(~pl.col("_row").is_in(bad_rows["_row"].implode()))
    return df.with_columns([number(n) for n in names])


def _convert(values: pl.Series, conv: str, check: bool) -> pl.Series:
    """Counter values as SampleFrame values. With ``check``, negative or non-finite values
    become null first (PDH shows them when a counter wraps or an instance restarts)."""
    if check:
        v = pl.col("v")
        values = values.to_frame("v").select(
            pl.when((v >= 0) & v.is_finite()).then(v)).to_series()
    if conv == _MS:
        return values * 1000.0
    if conv == _KIB:
        return values / 1024.0
    if conv == _IDLE:
        return (100.0 - values).clip(lower_bound=0.0)
    return values


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


def _sample_rows(df: pl.DataFrame, value_cols: list[str], header: _Header, header_idx: int,
                 source: Source) -> pl.DataFrame:
    """The sample lines to import, as a small frame: ``_row``, ``ts`` (UTC), ``_prev`` (the
    previous sample line's time) and ``interval_s`` (ts - _prev, seconds).

    Blank lines are passed over; a line whose time cannot be read or does not advance is a
    bad line; lines with no value at all (relog's first sample) are skipped with a note but
    still open the next line's interval.
    """
    side = df.select(
        "_row", pl.col("ts").alias("_text"),
        pl.any_horizontal([pl.col(c).is_not_null() for c in value_cols]).alias("_any"))
    side = side.filter(pl.col("_text").is_not_null() | pl.col("_any"))
    local = pl.col("_text").str.strip_chars().str.strptime(pl.Datetime("us"), _TS_FORMAT,
                                                           strict=False)
    side = side.with_columns(local.alias("_local"))
    bad_ts = side.filter(pl.col("_local").is_null())
    for r, txt in bad_ts.select("_row", "_text").iter_rows():
        source.bad_line(header_idx + 2 + int(r), f"timestamp {txt!r} is not "
                        "MM/DD/YYYY HH:MM:SS.mmm")
    side = side.filter(pl.col("_local").is_not_null())
    side = side.select("_row", "_any",
                       _to_utc(pl.col("_local"), header, source).cast(TS_DTYPE).alias("ts"))
    # Time must advance: a clock that repeats or goes back (a daylight-saving change, which
    # PDH does not fold into the header's fixed bias) cannot be placed.
    back = side.filter(pl.col("ts").diff() <= pl.duration(microseconds=0))
    for r in back["_row"].to_list():
        source.bad_line(header_idx + 2 + int(r), "timestamp is not after the previous "
                        "sample's (a daylight-saving change? PDH logs local time with the "
                        "bias of the log's start)")
    while back.height:  # lenient mode: drop until strictly increasing
        side = side.filter(~pl.col("_row").is_in(back["_row"].implode()))
        back = side.filter(pl.col("ts").diff() <= pl.duration(microseconds=0))
    if side.height == 0:
        raise InputFormatError(source.path, None, "no sample lines after the header")
    if side.height == 1:
        raise InputFormatError(source.path, header_idx + 2 + int(side["_row"][0]),
                               "a single sample line: the interval it covers is unknown "
                               "(PDH rates need a previous sample)")
    steps_us = side["ts"].diff().drop_nulls().dt.total_microseconds().to_numpy()
    median_us = int(np.median(steps_us))
    # The previous line's time; for the first line one sampling interval earlier.
    side = side.with_columns(pl.col("ts").shift(1).fill_null(
        pl.col("ts").first() - pl.duration(microseconds=median_us)).alias("_prev"))
    side = side.with_columns(
        ((pl.col("ts") - pl.col("_prev")).dt.total_microseconds() / 1e6).alias("interval_s"))
    empty = side.filter(~pl.col("_any"))
    if empty.height:
        source.note(f"perfmon: {empty.height} sample line(s) with no value at all skipped"
                    + (" (relog leaves the first sample empty: a rate needs two raw "
                       "samples)" if not side["_any"][0] else ""))
    elif side["_any"][0]:
        source.note(f"perfmon: the first sample has values; its interval is taken as the "
                    f"file's sampling interval ({median_us / 1e6:g} s)")
    side = side.filter(pl.col("_any")).drop("_any")
    if side.height == 0:
        raise InputFormatError(source.path, None, "no disk counter has a value in any "
                               "sample line")
    return side


def _to_utc(local: pl.Expr, header: _Header, source: Source) -> pl.Expr:
    if header.bias_min is not None:
        # Windows TIME_ZONE_INFORMATION: UTC = local time + bias (minutes).
        return (local + pl.duration(minutes=header.bias_min)).dt.replace_time_zone("UTC")
    if source.tz is not None:
        source.note(f"perfmon: the header states no time zone; local times read as "
                    f"{source.tz.key} (--tz)")
        return local.dt.replace_time_zone(source.tz.key, ambiguous="earliest",
                                          non_existent="null").dt.convert_time_zone("UTC")
    source.note("perfmon: the header states no time zone and no --tz was given; "
                "timestamps taken as UTC")
    return local.dt.replace_time_zone("UTC")


def _invalid_columns(df: pl.DataFrame, value_cols: list[str], source: Source) -> set[str]:
    """Counter columns holding a negative or non-finite value (noted with their count).

    min/max/NaN per column is one cheap pass; exact counts only for the (rare) suspects.
    """
    stats = df.select(pl.col(value_cols).min().name.suffix(":min"),
                      pl.col(value_cols).max().name.suffix(":max"),
                      pl.col(value_cols).is_nan().any().name.suffix(":nan")).row(0, named=True)

    def bad(c: str) -> bool:
        lo, hi = stats[f"{c}:min"], stats[f"{c}:max"]
        return bool((lo is not None and lo < 0) or (hi is not None and math.isinf(hi))
                    or stats[f"{c}:nan"])

    suspect = {c for c in value_cols if bad(c)}
    if suspect:
        counts = df.select([((pl.col(c) < 0) | ~pl.col(c).is_finite()).sum().alias(c)
                            for c in sorted(suspect)]).row(0)
        source.note(f"perfmon: {sum(int(n or 0) for n in counts)} negative or non-finite "
                    "counter value(s) left null (PDH shows them when a counter wraps or an "
                    "instance restarts)")
    return suspect


def _reshape(columns: dict[str, pl.Series], header: _Header, suspect: set[str],
             source: Source) -> SampleFrame:
    """One row per (device, sample line that has a value for the device).

    ``columns`` holds the sample lines: ``ts``, ``_prev``, ``interval_s`` and the counter
    columns ``c<index>``; it is consumed. Each output column is built once, contiguous, by
    concatenating the devices' pieces (device after device, lines in time order), and each
    counter column is dropped once copied. ``suspect`` columns may hold negative or
    non-finite values, which become null.
    """
    height = columns["ts"].len()
    devices: list[tuple[_Device, pl.Series | None, int]] = []  # (device, row mask, rows)
    for dev in header.devices:
        names = [f"c{i}" for i, _c in dev.counters.values()]
        if all(columns[c].null_count() == 0 for c in names):
            devices.append((dev, None, height))  # a value in every line: no mask needed
            continue
        has = pl.DataFrame([columns[c] for c in names]).select(
            pl.any_horizontal(pl.all().is_not_null())).to_series()
        present = int(has.sum())
        if present:
            devices.append((dev, has if present < height else None, present))
    if not devices:
        raise InputFormatError(source.path, None, "no disk counter has a value")

    def gather(series: pl.Series, mask: pl.Series | None) -> pl.Series:
        return series if mask is None else series.filter(mask)

    out: dict[str, pl.Series] = {}

    # Counters first: their columns are freed as they are copied, so the identity
    # columns below can reuse that memory.
    measures = sorted({c for d in header.devices for c in d.counters}
                      | {c for cols in header.cpu.values() for c in cols})
    for name in measures:
        parts: list[pl.Series] = []
        convs: set[str] = set()
        check = False
        for dev, mask, n in devices:
            src = dev.counters.get(name)
            idx = src[0] if src else header.cpu.get(dev.host, {}).get(name)
            if idx is None:
                parts.append(pl.repeat(None, n, dtype=pl.Float64(), eager=True))
                continue
            convs.add(src[1] if src else _AS_IS)
            check = check or f"c{idx}" in suspect
            parts.append(gather(columns[f"c{idx}"], mask))
        if convs:  # else no device with this counter has a value: left null
            (conv,) = convs  # one counter per column: its conversion is the column's
            out[name] = _convert(pl.concat(parts, rechunk=True), conv, check).alias(name)
        for dev, _m, _n in devices:  # the counter columns of this measure are done
            src = dev.counters.get(name)
            if src:
                columns.pop(f"c{src[0]}", None)
    # Identity columns: gather a small per-device table by a row -> device index.
    ident = pl.DataFrame({
        "host": [d.host for d, _m, _n in devices],
        "device": [d.instance for d, _m, _n in devices],
        "device_kind": [d.kind for d, _m, _n in devices],
        "parent": [d.parent for d, _m, _n in devices],
    }, schema={"host": pl.String(), "device": pl.String(), "device_kind": pl.String(),
               "parent": pl.String()})
    dev_index = pl.Series(np.repeat(np.arange(len(devices), dtype=np.uint32),
                                    [n for _d, _m, n in devices]))
    out.update(zip(ident.columns, ident[dev_index].get_columns(), strict=True))
    ts, prev, interval = columns.pop("ts"), columns.pop("_prev"), columns.pop("interval_s")
    out["ts"] = pl.concat([gather(ts, m) for _d, m, _n in devices], rechunk=True)
    out["interval_s"] = pl.concat([
        interval if m is None else _partial_interval(ts, prev, m) for _d, m, _n in devices],
        rechunk=True)

    columns.clear()
    # Constant and absent columns as literals: polars keeps them as scalars, not as
    # 640,000 copies of "perfmon" or of null.
    constants: dict[str, pl.Expr] = {"source": pl.lit(NAME, pl.String()),
                                     "since_boot": pl.lit(False), "reset": pl.lit(False)}
    frame = pl.DataFrame(list(out.values())).select([
        pl.col(c) if c in out else constants.get(c, pl.lit(None, dtype)).alias(c)
        for c, dtype in SCHEMA.items()])
    # Not re-validated: every rule holds by construction -- ts strictly increases, so every
    # interval is > 0; negative and non-finite counter values were nulled and the
    # conversions (x 1000, / 1024, 100 - idle clipped at 0) keep values finite and >= 0;
    # kinds are constants; nothing is a reset row. tests/unit/importers/test_perfmon.py
    # validates generated files (hypothesis); skipping it saves ~15 % of a 200 MB import.
    return SampleFrame(frame, validate=False)


def _partial_interval(ts: pl.Series, prev_line: pl.Series, mask: pl.Series) -> pl.Series:
    """Interval of a device that was empty in some lines: from the last line where it had a
    value (PDH rates run from the last raw sample collected), else from the previous
    line."""
    df = pl.DataFrame({"ts": ts, "prev": prev_line, "has": mask})
    prev_with_value = pl.when(pl.col("has")).then(pl.col("ts")).shift(1).forward_fill()
    return df.select(
        ((pl.col("ts") - pl.coalesce(prev_with_value, pl.col("prev")))
         .dt.total_microseconds() / 1e6).alias("interval_s")).filter(df["has"]).to_series()
