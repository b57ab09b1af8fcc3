"""sysstat ``iostat -o JSON`` -> SampleFrame (format id ``iostat-json``).

The document is ``{"sysstat": {"hosts": [{"nodename", "release", "date", "statistics": [
{"timestamp", "avg-cpu": {...}, "disk": [{"disk_device": ..., <column>: <value>, ...}]},
...]}]}}`` (iostat.c ``write_json_*``). The disk keys are the text report's column names
(``r/s``, ``rkB/s`` or ``rMB/s`` or ``rsec/s``, ``rareq-sz``, ``aqu-sz``, ``tps``,
``kB_read/s`` …), imported with the same mapping and unit conversions as the text importer
(:data:`iogauge.importers.iostat.COLUMNS`), with these JSON-only spellings:

* ``util`` is ``%util``; in 11.5+ ``rrqm``/``wrqm``/``drqm`` are ``%rrqm``/``%wrqm``/``%drqm``
  (the percentage of requests merged: the per-second counts are ``rrqm/s`` …);
* sysstat 11.0-11.4 wrote ``rrqm``, ``wrqm`` (merges per second), ``r``, ``w``, ``rkB``,
  ``wkB``, ``avgrq-sz`` (sectors), ``avgqu-sz``, ``await``, ``svctm``, ``util`` — recognised by
  the absence of ``r/s``; and ``kB_read_per_sec``/``kB_wrtn_per_sec`` in the basic report;
* ``timestamp`` is a *string* (``%x %X`` in the locale, or ISO 8601 with offset under
  ``S_TIME_FORMAT=ISO``) and is present only with ``-t``; ``sadf -j`` documents, whose
  timestamp is an object, belong to the ``sadf`` importer.

Times, intervals, the since-boot first report and files without ``-t`` follow the text
importer (see its module docstring): the first statistics entry of each host is iostat's
since-boot summary (``since_boot``), intervals come from successive stamps or
``--interval``, and without stamps reports are placed from ``--start`` (or midnight of the
host's ``date``) in steps of ``--interval``.

**Two readers.** iostat writes its document in one fixed layout: one tab per nesting level,
each structural bracket on its own line, and each ``avg-cpu`` object and each disk object on
one line (sysstat 11 and 12 alike). A document in that layout — what ``iostat -o JSON``
leaves in a file — is read a piece of :data:`CHUNK_BYTES` at a time, vectorised: every line
is classified by its exact text (``"\\t\\t\\t\\t{"`` opens a statistics entry), the disk
and CPU objects of a piece are decoded by polars in one call, and a piece's last entry is
held back and read again with the next piece, so entries are read whole and memory does not
grow with the file: 100 MB import to Parquet at 0.23 GB peak in 2.1 s, where the JSON
parser took 1.20 GB and 4.3 s (``benchmarks/import_memory.py``). The order of the lines is
checked against the layout (what may follow what, and a ',' exactly before a sibling), so
a lost, doubled or damaged line is an error naming its line. The date order (day/month)
is decided on the first piece whose dates decide it, the nominal interval on the first
piece of a host with two stamps; rows wait until both are known. Documents one after the
other (``cat`` of two runs) are read as two hosts, each first report since-boot.

Any other layout (a document re-indented by ``jq`` or Python, as PerfKitBenchmarker stores
it, or on one line) is read a piece at a time too, by
:class:`~iogauge.importers.json_stream.HostsDocument`: the JSON structure of each piece is
found vectorised and its complete statistics entries are read by polars in one call. 100 MB
re-indented as ``jq .`` leaves it import to Parquet at 0.21 GB peak in 2.0-2.1 s, where the
JSON parser that read the whole document took 0.54 GB and 3.0-3.1 s (same rows;
``benchmarks/import_memory.py``, three alternating runs).

A document cut off mid-run (iostat still writing, or killed) is not an error: every complete
statistics entry is kept, the partial one dropped, and a note says where the cut was. A
damaged line is an error naming its line (in another layout: the line where the JSON
parser stops); ``--lenient`` drops the statistics entry it is in, whole (its lines are
counted as skipped).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers import timestamps as tsx
from iogauge.importers._lines import LineCarry, report_frames
from iogauge.importers.base import Source
from iogauge.importers.io import decode, head_then
from iogauge.importers.iostat import COLUMNS, UNKNOWN_INTERVAL_S, ColumnSpec
from iogauge.importers.json_objects import decode_objects, drop_bad_entries
from iogauge.importers.json_stream import Batch, HostsDocument
from iogauge.model.sampleframe import SampleFrame

NAME = "iostat-json"
DESCRIPTION = ("sysstat iostat -o JSON (any version; a file cut off mid-run keeps its complete "
               "reports)")
EXPECTS = ('a JSON document {"sysstat": {"hosts": [{"statistics": [...]}]}} whose statistics '
           'hold "disk" lists of {"disk_device": …} objects (or "avg-cpu"), with a string '
           '"timestamp" or none (sadf -j, with an object timestamp, is format sadf)')

#: Bytes read per piece by :func:`iter_parse` (a piece's working set is some 10x its size).
CHUNK_BYTES = 4 << 20

#: JSON-only disk keys (sysstat 12.x and 11.5+): key -> mapping.
_JSON_KEYS: dict[str, ColumnSpec] = {
    "util": ColumnSpec("util_pct"),
    "rrqm": ColumnSpec("r_rqm_pct"), "wrqm": ColumnSpec("w_rqm_pct"),
    "drqm": ColumnSpec("d_rqm_pct"),
    "kB_read_per_sec": ColumnSpec("r_kBps", 1.0, True),
    "kB_wrtn_per_sec": ColumnSpec("w_kBps", 1.0, True),
}
#: sysstat 11.0-11.4 extended JSON (no "r/s" key): key -> mapping.
_OLD_KEYS: dict[str, ColumnSpec] = {
    "rrqm": ColumnSpec("r_merged_ps"), "wrqm": ColumnSpec("w_merged_ps"), "r": ColumnSpec("r_iops"),
    "w": ColumnSpec("w_iops"), "rkB": ColumnSpec("r_kBps"), "wkB": ColumnSpec("w_kBps"),
    "util": ColumnSpec("util_pct"),
}
#: avg-cpu key -> SampleFrame column.
_CPU_KEYS: dict[str, str] = {
    "user": "cpu_user_pct", "nice": "cpu_nice_pct", "system": "cpu_system_pct",
    "iowait": "cpu_iowait_pct", "steal": "cpu_steal_pct", "idle": "cpu_idle_pct",
}
#: Disk keys read (every key some sysstat writes that maps to a column or has a note).
_DISK_KEYS: tuple[str, ...] = tuple(sorted(
    {k for k, spec in COLUMNS.items() if spec.target is not None or spec.note}
    | _JSON_KEYS.keys() | _OLD_KEYS.keys()))
_DISK_KEY_SET = frozenset(_DISK_KEYS)
_CPU_DTYPE = pl.Struct(dict.fromkeys(_CPU_KEYS, pl.Float64()))

_SNIFF_SYSSTAT = re.compile(r'\{\s*"sysstat"\s*:\s*\{\s*"hosts"\s*:\s*\[')
_SNIFF_DISK = re.compile(r'"disk_device"\s*:|"avg-cpu"\s*:')
_SNIFF_NOT = re.compile(r'"timestamp"\s*:\s*\{|"sysdata-version"|"file-date"|"disk-device"')


def sniff(head: str) -> bool:
    """``iostat -o JSON``: a sysstat hosts document with disk_device / avg-cpu entries and no
    sadf markers (object timestamps, sysdata-version, file-date, disk-device)."""
    return bool(_SNIFF_SYSSTAT.search(head) and _SNIFF_DISK.search(head)
                and not _SNIFF_NOT.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---- iostat's own layout, read in pieces ---------------------------------------------------
#
# The lines iostat.c writes (write_json_global_header, write_json_cpu_stat, write_json_disk_*,
# write_json_global_footer; one tab per level), each given a one-letter kind:
#
#   {"sysstat": {                    A      "timestamp": "…",          T
#       "hosts": [                   B      "avg-cpu":  {…},           C
#           {                        H      "disk": [                  D
#               "nodename": "vm",    K          {"disk_device": …},    I
#               "statistics": [      S      ]                          L
#                   {                O  }, or }                        E (the entry's end)
#   ] (statistics) s   }, or } (host) h   ] (hosts) b   }} z

#: Lines that are structure only -> kind.
_STRUCTURE: dict[str, str] = {
    '{"sysstat": {': "A", '\t"hosts": [': "B", "\t\t{": "H", '\t\t\t"statistics": [': "S",
    "\t\t\t\t{": "O", '\t\t\t\t\t"disk": [': "D", "\t\t\t\t\t]": "L", "\t\t\t\t}": "E",
    "\t\t\t\t},": "E", "\t\t\t]": "s", "\t\t}": "h", "\t\t},": "h", "\t]": "b", "}}": "z",
}
_ITEM_PREFIX = '\t\t\t\t\t\t{"disk_device": '
_TS_PREFIX = '\t\t\t\t\t"timestamp":'
_CPU_PREFIX = '\t\t\t\t\t"avg-cpu":'
_TS_RE = r'^\t{5}"timestamp": "([^"\\]*)",?$'
_CPU_RE = r'^\t{5}"avg-cpu":\s+(\{[^{}]*\}),?$'
_KV_RE = r'^\t{3}"([^"\\]+)": (.+?),?$'
#: A statistics entry's first line: where pieces are cut.
_ENTRY_HEAD = r"^\t{4}\{$"
#: The document's first two lines in iostat's layout (after an optional BOM).
_OWN_LAYOUT = re.compile(rb'(?:\xef\xbb\xbf)?\{"sysstat": \{\r?\n\t"hosts": \[\r?\n')
#: Which kind may follow which ("^": the start of the document; "zA": documents one after
#: the other, as ``cat`` leaves them).
_FOLLOWS: frozenset[str] = frozenset({
    "^A", "AB", "BH", "HK", "HS", "KK", "KS", "SO", "Ss", "OT", "OC", "OD", "OE", "TC", "TD",
    "TE", "CD", "CE", "DI", "DL", "II", "IL", "LE", "EO", "Es", "sh", "hH", "hb", "bz", "zA"})
#: Kinds whose line ends with ',' when the next line is a sibling (these pairs), else not.
_COMMA_KINDS = ["T", "C", "I", "E", "h", "K"]
_SIBLINGS: frozenset[str] = frozenset({"TC", "TD", "CD", "II", "EO", "hH", "KK", "KS"})
#: Kind -> how a message names it.
_WHAT: dict[str, str] = {
    "^": "the start of the document", "A": "the document's first line", "B": '"hosts": [',
    "H": "a host's '{'", "K": "a host's key", "S": '"statistics": [',
    "O": "a statistics entry's '{'", "T": '"timestamp"', "C": '"avg-cpu"', "D": '"disk": [',
    "I": "a disk object", "L": "the disk list's ']'", "E": "a statistics entry's '}'",
    "s": "the statistics list's ']'", "h": "a host's '}'", "b": "the hosts list's ']'",
    "z": "the document's last line '}}'", "X": "an unreadable line"}
_HEADER_KINDS = ["A", "B", "H", "K", "S", "s", "h", "b", "z"]


@dataclass
class _Host:
    """What is known of one host of the document (its ``nodename``… lines, then its
    statistics entries as they are read).

    Attributes:
        info: the host's keys (``nodename``, ``date`` …).
        first_line: line of its ``"statistics"`` list (for messages).
        reports: statistics entries seen so far (read, dropped or cut).
        stamped: whether its entries carry a ``timestamp`` (decided by the first).
        nominal_s: its sampling interval, once known.
        last_utc: time of its last report read (the next interval's start).
        anchor: where unstamped reports are counted from.
        first_stamp_line: line of the entry that decided ``stamped``.
    """

    info: dict[str, Any] = field(default_factory=dict)
    first_line: int | None = None
    reports: int = 0
    stamped: bool | None = None
    nominal_s: float | None = None
    last_utc: datetime | None = None
    anchor: datetime | None = None
    first_stamp_line: int | None = None


def own_layout(head: bytes) -> bool:
    """Whether a document starting with ``head`` (its first 64 bytes will do) is in
    iostat's own layout, read line by line (else by :mod:`~iogauge.importers.json_stream`)."""
    return bool(_OWN_LAYOUT.match(head))


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time (in any
    layout), in file order."""
    head = stream.read(64)
    reader = _Reader(source)
    if not own_layout(head):
        yield from reader.generic(head_then(head, stream), chunk_bytes)
    else:
        carry = LineCarry()
        pieces = report_frames(head_then(head, stream), chunk_bytes, carry,
                               source.path, _ENTRY_HEAD)
        for lines, last, _cut in pieces:
            reader.piece(lines, final=last)
            del lines
            frame = reader.flush(final=last)
            if frame is not None:
                yield frame
    frame = reader.flush(final=True)
    if frame is not None:
        yield frame
    reader.finish()


def parse(data: bytes, source: Source) -> SampleFrame:
    """All rows of an ``iostat -o JSON`` document (see the module docstring)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


class _Reader:
    """Statistics entries -> rows, across the pieces of one document.

    Each piece (or the whole document in another layout) gives two tables: one row per
    statistics entry (``host``, ``idx`` — its number within the host —, ``line_no``,
    ``ts_text`` and the CPU columns) and one per disk object (``host``, ``idx``, ``device``
    and the measures). They wait in ``pending`` until their times can be decided
    (:meth:`flush`)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.hosts: dict[int, _Host] = {}
        self.host_no = 0  # hosts opened so far (the current one's number)
        self.entries = 0  # statistics entries opened so far
        self.prev_kind = "^"  # kind of the last line read
        self.pending_reports: list[pl.DataFrame] = []
        self.pending_rows: list[pl.DataFrame] = []
        self.dates: list[pl.DataFrame] = []
        self.order: tsx.DateOrder | None = None
        self.negatives: dict[str, int] = {}
        self.rows_out = 0
        self.lists = 0  # "statistics" lists read

    def host(self, no: int) -> _Host:
        return self.hosts.setdefault(no, _Host())

    # ---- iostat's own layout ----------------------------------------------------------------
    def piece(self, lines: pl.DataFrame, *, final: bool) -> None:
        """Read the statistics entries of one piece (``lines``: ``line_no``, ``line``; it
        ends before an entry's first line, or with the file when ``final``)."""
        df = lines.filter(pl.col("line").is_not_null()).select(
            pl.col("line_no").cast(pl.Int64()), "line")
        del lines
        if df.height == 0:
            return
        df, side = self._kinds(df, final=final)
        exempt_region, exempt_line, cut_note = self._cut(df, final=final)
        k = pl.col("kind")
        live = (pl.col("region") != exempt_region) & (pl.col("line_no") != exempt_line)
        problems = _misplaced(df.filter(live & ~pl.col("ok")))
        items, cpu = _objects(df, side, live, problems)
        for line_no, reason in sorted(problems):
            self.source.bad_line(line_no, reason)  # (raises at the first unless --lenient)
        refused = pl.Series([p[0] for p in problems], dtype=pl.Int64())
        # entries: kept whole or dropped whole
        gone = drop_bad_entries(df.select("line_no", "region", closes_entry=k == "E"),
                                [p[0] for p in problems], exempt_region, self.source)
        region_of = df.select("line_no", "region", "host")
        self._host_keys(df, side.filter(pl.col("key").is_not_null()).join(
            region_of, on="line_no").filter(~pl.col("line_no").is_in(
                refused.append(pl.Series([exempt_line], dtype=pl.Int64())).implode())))
        opens = self._count_entries(df, exempt_region)
        if cut_note is not None:
            self.source.note(cut_note)
        kept = opens.filter(~pl.col("region").is_in(gone.implode()))
        ts = side.filter(pl.col("kind") == "T").join(region_of, on="line_no").select(
            "region", "ts_text", pl.col("line_no").alias("ts_line"))
        cpu = cpu.join(region_of, on="line_no").select(
            "region", *[pl.col("c").struct.field(key).alias(col)
                        for key, col in _CPU_KEYS.items()])
        reports = (kept.join(ts, on="region", how="left").join(cpu, on="region", how="left")
                   .select("host", "idx", "line_no", "ts_text", "ts_line", *_CPU_KEYS.values()))
        rows = items.filter(pl.col("region").is_in(kept["region"].implode())).join(
            kept.select("region", "host", "idx"), on="region").select(
            "host", "idx", pl.col("d").struct.unnest())
        self.add(reports, rows)

    def _kinds(self, df: pl.DataFrame, *, final: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The lines with their ``kind`` (a letter of _STRUCTURE, or I item, T stamp, C CPU,
        K host key, X unreadable), the kind before, ``host``, ``region`` (the entry) and
        ``ok`` (in its place, its comma right); and the few lines that carry a value besides
        the disk objects (stamps, CPU objects, host keys)."""
        ln = pl.col("line")
        kind = pl.coalesce(
            ln.replace_strict(_STRUCTURE, default=None, return_dtype=pl.String()),
            pl.when(ln.str.starts_with(_ITEM_PREFIX)
                    & (ln.str.ends_with("}") | ln.str.ends_with("},"))).then(pl.lit("I")),
            pl.when(ln.str.starts_with(_TS_PREFIX)).then(pl.lit("T")),
            pl.when(ln.str.starts_with(_CPU_PREFIX)).then(pl.lit("C")),
            pl.when(ln.str.starts_with('\t\t\t"')).then(pl.lit("K")),
            pl.lit("X"))
        df = df.with_columns(kind=kind)
        side = df.filter(pl.col("kind").is_in(["T", "C", "K"])).select(
            "line_no", "kind",
            ts_text=ln.str.extract(_TS_RE, 1), cpu_json=ln.str.extract(_CPU_RE, 1),
            key=ln.str.extract(_KV_RE, 1), value=ln.str.extract(_KV_RE, 2))
        unread = side.filter(
            ((pl.col("kind") == "T") & pl.col("ts_text").is_null())
            | ((pl.col("kind") == "C") & pl.col("cpu_json").is_null())
            | ((pl.col("kind") == "K") & pl.col("key").is_null()))["line_no"]
        k = pl.col("kind")
        if unread.len():
            df = df.with_columns(kind=pl.when(pl.col("line_no").is_in(unread.implode()))
                                 .then(pl.lit("X")).otherwise(k))
        entry = self.entries + (k == "O").cum_sum()
        df = df.with_columns(
            prev=k.shift(1).fill_null(pl.lit(self.prev_kind)),
            host=self.host_no + (k == "H").cum_sum(),
            region=pl.when(k == "O").then(entry).when(k.is_in(_HEADER_KINDS)).then(pl.lit(-1))
            .forward_fill().fill_null(-1))
        # a line may follow an unreadable one: only the unreadable one is refused; a line
        # ends with ',' exactly when a sibling follows (a lost or doubled last disk object
        # leaves the order of kinds right, not the commas)
        after = k.shift(-1).fill_null(pl.lit("$" if final else "O"))
        sibling = pl.concat_str([k, after]).is_in(_SIBLINGS)
        comma_ok = ~k.is_in(_COMMA_KINDS) | (ln.str.ends_with(",") == sibling)
        df = df.with_columns(ok=((pl.col("prev") + k).is_in(_FOLLOWS) | (pl.col("prev") == "X"))
                             & (comma_ok | (after == "X")),
                             comma_ok=comma_ok)
        return df, side

    def _cut(self, df: pl.DataFrame, *, final: bool) -> tuple[int, int, str | None]:
        """A document that does not end with its last line: the entry (region) or the last
        line exempt from refusal (-2, -1: none), and the note that says so."""
        k = pl.col("kind")
        if not final or str(df["kind"][-1]) == "z":
            return -2, -1, None
        last_region = int(df["region"][-1])
        closed = df.filter((pl.col("region") == last_region) & (k == "E")).height > 0
        if last_region < 0 or closed:  # (its last line may be cut short: no error)
            return -2, int(df["line_no"][-1]), (
                "the document ends before its closing brackets (cut while iostat was "
                "running?); every complete report was kept")
        open_row = df.filter((pl.col("region") == last_region) & (k == "O")).row(
            0, named=True)
        h = self.host(int(open_row["host"]))
        done = h.reports + df.filter((k == "O") & (pl.col("host") == open_row["host"])
                                     & (pl.col("region") < last_region)).height
        return last_region, -1, (
            f"the document ends in the middle of report {done + 1} (line "
            f"{open_row['line_no']}) — cut while iostat was running? — the "
            f"{done} complete report(s) before it were kept")

    def _host_keys(self, df: pl.DataFrame, keys: pl.DataFrame) -> None:
        """Hosts: where each list of entries starts, and their keys (``keys``: the key lines
        not refused, with their ``host``)."""
        for line_no, kd, host_no in df.filter(pl.col("kind").is_in(["H", "S"])).select(
                "line_no", "kind", "host").iter_rows():
            h = self.host(int(host_no))
            if kd == "S":
                h.first_line = int(line_no)
                self.lists += 1
        for line_no, host_no, key, value in keys.select(
                "line_no", "host", "key", "value").iter_rows():
            try:
                self.host(int(host_no)).info[key] = json.loads(value)
            except json.JSONDecodeError:
                self.source.bad_line(line_no, f"host key {key!r} has an unreadable value "
                                     f"{value!r}")

    def _count_entries(self, df: pl.DataFrame, exempt_region: int) -> pl.DataFrame:
        """The piece's entries (``region``, ``host``, ``line_no``, ``idx``: their number in
        their host), counted into the hosts (a cut last entry is not counted: iostat never
        finished it)."""
        k = pl.col("kind")
        opens = df.filter((k == "O") & (pl.col("region") != exempt_region)).select(
            "region", "host", "line_no")
        offsets = {int(h): self.host(int(h)).reports for h in opens["host"].unique()}
        opens = opens.with_columns(
            idx=pl.int_range(pl.len(), dtype=pl.Int64()).over("host")
            + pl.col("host").replace_strict(offsets, default=0, return_dtype=pl.Int64()))
        for host_no, count in opens.group_by("host").len().iter_rows():
            self.host(int(host_no)).reports += int(count)
        self.entries += opens.height
        self.host_no = int(df["host"][-1])
        self.prev_kind = str(df["kind"][-1])
        return opens

    # ---- any other layout ----------------------------------------------------------------
    def generic(self, stream: BinaryIO, chunk_bytes: int) -> Iterator[SampleFrame]:
        """Read a document in any layout (:class:`~iogauge.importers.json_stream.HostsDocument`:
        no line per entry), a piece at a time."""
        doc = HostsDocument(self.source, tool="iostat", chunk_bytes=chunk_bytes)
        for batches in doc.pieces(stream):
            for batch in batches:
                self.batch(batch)
            frame = self.flush(final=False)
            if frame is not None:
                yield frame

    def batch(self, batch: Batch) -> None:
        """Queue the statistics entries of one host read from one piece (a table: one row
        per entry, its keys as columns)."""
        src = self.source
        no = batch.host.no
        h = self.host(no)
        h.info, h.first_line = batch.host.info, batch.host.line
        h.reports = batch.host.entries
        e = batch.entries
        stamp = e.get_column("timestamp") if "timestamp" in e.columns else None
        if stamp is not None and stamp.dtype not in (pl.String(), pl.Null()):
            bad = e.filter(stamp.is_not_null())["_line"][0]
            raise InputFormatError(src.path, bad, "statistics entry with a non-string "
                                   "timestamp: a sadf -j document (use --format sadf)")
        cpu = e.get_column("avg-cpu") if "avg-cpu" in e.columns else None
        fields = set(cpu.struct.fields) if cpu is not None and isinstance(
            cpu.dtype, pl.Struct) else set()
        reports = e.select(
            pl.lit(no, pl.Int64()).alias("host"), pl.col("_idx").alias("idx"),
            pl.col("_line").alias("line_no"),
            (pl.col("timestamp").cast(pl.String()) if stamp is not None
             else pl.lit(None, pl.String())).alias("ts_text"),
            pl.col("_line").alias("ts_line"),
            *[(pl.col("avg-cpu").struct.field(key).cast(pl.Float64(), strict=False)
               if key in fields else pl.lit(None, pl.Float64())).alias(col)
              for key, col in _CPU_KEYS.items()])
        disk_type = e.schema.get("disk")
        if disk_type is None or disk_type == pl.List(pl.Null()) or disk_type == pl.Null():
            rows = pl.DataFrame(schema={"host": pl.Int64(), "idx": pl.Int64(),
                                        "disk_device": pl.String()})
        else:
            if not isinstance(disk_type, pl.List) or not isinstance(disk_type.inner,
                                                                     pl.Struct):
                bad = e.filter(pl.col("disk").is_not_null())["_line"][0]
                raise InputFormatError(src.path, bad, '"disk" is not a list of objects')
            disks = e.select("_idx", "_line", "disk").explode("disk").filter(
                pl.col("disk").is_not_null()).unnest("disk")
            if "disk_device" not in disks.columns or disks["disk_device"].null_count():
                bad = (disks.filter(pl.col("disk_device").is_null())["_line"][0]
                       if "disk_device" in disks.columns else disks["_line"][0])
                raise InputFormatError(src.path, bad, 'a "disk" entry has no "disk_device"')
            rows = disks.select(
                pl.lit(no, pl.Int64()).alias("host"), pl.col("_idx").alias("idx"),
                pl.col("disk_device").cast(pl.String()),
                *[pl.col(c).cast(pl.Float64(), strict=False) for c in disks.columns
                  if c in _DISK_KEYS])
        self.add(reports, rows)

    # ---- both: times, then rows --------------------------------------------------------------
    def add(self, reports: pl.DataFrame, rows: pl.DataFrame) -> None:
        """Queue one piece's entries and disk rows (their stamps checked per host)."""
        src = self.source
        for host_no, line_no, ts_text in reports.select(
                "host", "line_no", "ts_text").iter_rows():
            # (a loop over reports, not lines: one per interval)
            h = self.host(int(host_no))
            stamped = ts_text is not None
            if h.stamped is None:
                h.stamped, h.first_stamp_line = stamped, int(line_no)
            elif h.stamped != stamped:
                raise InputFormatError(src.path, int(line_no), "some statistics entries have a "
                                       "timestamp and others none")
        rows = _map_rows(rows, src)
        self.pending_reports.append(reports)
        self.pending_rows.append(rows)
        if self.order is None or not self.order.certain:
            texts = reports["ts_text"].drop_nulls()
            if texts.len():
                self.dates.append(tsx.stamp_dates(texts))

    def flush(self, *, final: bool) -> SampleFrame | None:
        """The queued rows whose times can be decided now (None: nothing, or not yet)."""
        src = self.source
        if not self.pending_reports:
            return None
        reports = pl.concat(self.pending_reports, how="vertical_relaxed")
        stamped_hosts = [int(h) for h in reports.filter(pl.col("ts_text").is_not_null())[
            "host"].unique().to_list()]
        if stamped_hosts and (self.order is None or not self.order.certain):
            found = [*self.dates]
            for no in stamped_hosts:
                date = self.host(no).info.get("date")
                if isinstance(date, str):
                    found.append(tsx.stamp_dates(pl.Series([date]), kind="date"))
            try:
                order = tsx.infer_date_order(pl.concat(found, how="vertical_relaxed"),
                                             src.date_order)
            except ValueError as exc:
                line = self.host(stamped_hosts[0]).first_line
                raise InputFormatError(src.path, line, str(exc)) from exc
            if not order.certain and not final:
                return None
            self.order = order
        rows = pl.concat(self.pending_rows, how="diagonal_relaxed")
        # (hosts without disk rows need no times: iostat -c, an idle -z run)
        with_rows = sorted(int(h) for h in rows["host"].unique().to_list()) if rows.height \
            else []
        # every host's interval must be known (from --interval, or its stamps' spacing)
        for no in with_rows:
            h = self.host(no)
            if src.interval_s is not None or h.nominal_s is not None:
                continue
            if h.stamped:
                rep = reports.filter(pl.col("host") == no).sort("idx")
                h.nominal_s = tsx.nominal_interval_s(self._utc(rep, quiet=True)["ts"]
                                                     .drop_nulls())
                if h.nominal_s is None and not final:
                    return None
            elif h.reports > 1:
                raise _no_interval(src, h)
            elif not final:
                return None  # (one report so far: a second one needs --interval)
        if self.order is not None and self.order.note:
            src.note(self.order.note)
        times = [self._times(no, reports) for no in with_rows]
        self.pending_reports.clear()
        self.pending_rows.clear()
        self.dates.clear()
        if not times:
            return None
        return self._assemble(rows, pl.concat(times, how="vertical_relaxed"))

    def _utc(self, rep: pl.DataFrame, *, quiet: bool = False) -> pl.DataFrame:
        """``idx``, ``ts`` (UTC) of a stamped host's reports; an unreadable stamp is
        refused (its report's rows dropped) unless ``quiet`` (a look ahead)."""
        src = self.source
        order = self.order.order if self.order is not None else "MDY"
        texts = rep["ts_text"]
        parsed = tsx.parse_local(texts, order)
        if not quiet and parsed["local"].null_count():
            for line_no, text, local in zip(rep["ts_line"].to_list(), texts.to_list(),
                                            parsed["local"].to_list(), strict=True):
                if local is None:
                    src.bad_line(line_no, f"timestamp {text!r} is not a date and time")
        utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], src.tz)
        if note and not quiet:
            src.note(note)
        return pl.DataFrame([rep["idx"], utc.alias("ts")])

    def _times(self, no: int, reports: pl.DataFrame) -> pl.DataFrame:
        """``host``, ``idx``, ``host_name``, ``ts``, ``interval_s``, ``since_boot`` of the
        queued reports of host ``no``."""
        src = self.source
        h = self.host(no)
        rep = reports.filter(pl.col("host") == no).sort("idx")
        name = h.info.get("nodename") or src.host or Path(src.path).stem
        since_boot = pl.col("idx") == 0
        if h.stamped:
            utc = self._utc(rep)["ts"]
            nominal = src.interval_s if src.interval_s is not None else h.nominal_s
            if nominal is None:
                if h.reports > 1:
                    raise _no_interval(src, h)
                src.note("the document holds only iostat's since-boot summary: its rows are "
                         f"flagged since_boot with a nominal interval_s of "
                         f"{UNKNOWN_INTERVAL_S:g} s")
                nominal = UNKNOWN_INTERVAL_S
            if h.last_utc is None:  # (the first report's length is the nominal one)
                lengths = tsx.interval_lengths(utc, nominal)
            else:  # the first report's interval starts at the previous piece's last one
                before = pl.Series("ts", [h.last_utc], dtype=utc.dtype)
                lengths = tsx.interval_lengths(pl.concat([before, utc]), nominal).slice(1)
            last = utc.drop_nulls()
            if last.len():
                h.last_utc = last[-1]
            out = rep.with_columns(utc, lengths.alias("interval_s"))
        else:
            step = src.interval_s
            if step is None:  # (one report only: flush raised for more)
                src.note("the document holds only iostat's since-boot summary: its rows are "
                         f"flagged since_boot with a nominal interval_s of "
                         f"{UNKNOWN_INTERVAL_S:g} s")
                step = UNKNOWN_INTERVAL_S
            if h.anchor is None:
                h.anchor = _anchor(src, h)
            out = rep.with_columns(
                (pl.lit(h.anchor, dtype=pl.Datetime("us", "UTC"))
                 + pl.duration(microseconds=(pl.col("idx") * step * 1e6).round()
                               .cast(pl.Int64()))).alias("ts"),
                pl.lit(step, pl.Float64()).alias("interval_s"))
        return out.select("host", "idx", *_CPU_KEYS.values(), "ts", "interval_s",
                          since_boot.alias("since_boot"), pl.lit(str(name)).alias("host_name"))

    def _assemble(self, rows: pl.DataFrame, times: pl.DataFrame) -> SampleFrame | None:
        joined = rows.join(times, on=["host", "idx"], how="left").filter(
            pl.col("ts").is_not_null())
        if joined.height == 0:
            return None
        devices = joined["device"].unique().to_list()
        parents = [guess_parent(d) for d in devices]
        info = pl.DataFrame({"device": devices, "parent": parents,
                             "device_kind": ["partition" if p else kind_from_name(d)
                                             for d, p in zip(devices, parents, strict=True)]},
                            schema={"device": pl.String, "parent": pl.String,
                                    "device_kind": pl.String})
        joined = joined.join(info, on="device", how="left")
        measures = [c for c in joined.columns if c not in (
            "host", "idx", "host_name", "device", "parent", "device_kind", "ts", "interval_s",
            "since_boot")]
        joined = self._clean(joined, measures)
        self.rows_out += joined.height
        return SampleFrame(joined.select(
            pl.lit(NAME).alias("source"), pl.col("host_name").alias("host"), "device",
            "device_kind", "parent", "ts", "interval_s", "since_boot", *measures))

    def _clean(self, df: pl.DataFrame, measures: list[str]) -> pl.DataFrame:
        """Negative values (counter glitches) -> null, counted for a note at the end."""
        neg = {m: int(df[m].lt(0).sum()) for m in measures}
        neg = {m: c for m, c in neg.items() if c}
        for m, c in neg.items():
            self.negatives[m] = self.negatives.get(m, 0) + c
        if neg:
            df = df.with_columns([pl.when(pl.col(m) < 0).then(None).otherwise(pl.col(m))
                                  .alias(m) for m in neg])
        return df

    def finish(self) -> None:
        """The notes on the whole document (iostat's layout: refused without a statistics
        list, as the JSON parser refuses it)."""
        if self.prev_kind != "^" and self.lists == 0:
            raise InputFormatError(self.source.path, None, 'no "statistics" list found (the '
                                   "document ends before iostat's first report)")
        if self.negatives:
            self.source.note("negative values (a kernel or sysstat counter glitch) were read "
                             "as not measured (null): " + ", ".join(
                                 f"{m} x{c}" for m, c in self.negatives.items()))
        if self.rows_out == 0:
            self.source.note("no device statistics found in the document (iostat -c prints "
                             "CPU only)")


def _disk_dtype(items: pl.DataFrame) -> pl.Struct:
    """The struct the disk objects of ``items`` (``host``, ``obj``) decode to: ``disk_device``
    and the known keys of each host's first object. (iostat prints the same keys for every
    device of a run; decoding only those is three times faster than decoding every key any
    sysstat wrote.)"""
    keys: set[str] = set()
    for text in items.group_by("host", maintain_order=True).agg(pl.col("obj").first())[
            "obj"].to_list():
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            continue  # (refused by decode_objects, with its line)
        if isinstance(obj, dict):
            keys.update(k for k in obj if k in _DISK_KEY_SET)
    return pl.Struct({"disk_device": pl.String(),
                      **dict.fromkeys(sorted(keys), pl.Float64())})


def _mapping(keys: set[str]) -> dict[str, ColumnSpec]:
    """disk key -> column mapping for entries with these keys (lowest rank per target)."""
    old = "r" in keys and "r/s" not in keys
    chosen: dict[str, tuple[str, ColumnSpec]] = {}
    for key in keys:
        if key == "disk_device":
            continue
        spec = (_OLD_KEYS.get(key) if old else None) or _JSON_KEYS.get(key) or COLUMNS.get(key)
        if spec is None or spec.target is None:
            continue
        prev = chosen.get(spec.target)
        if prev is None or spec.rank < prev[1].rank:
            chosen[spec.target] = (key, spec)
    return dict(chosen.values())


def _map_rows(rows: pl.DataFrame, source: Source) -> pl.DataFrame:
    """Disk objects (``host``, ``idx``, ``disk_device``, a column per key) -> ``host``,
    ``idx``, ``device`` and SampleFrame measures (the keys present: not all null)."""
    present = {c for c in rows.columns if c in _DISK_KEYS
               and rows[c].null_count() < rows.height}
    exprs = [pl.col("disk_device").alias("device")]
    for key, spec in _mapping(present).items():
        v = pl.col(key)
        exprs.append((v * spec.factor if spec.factor != 1.0 else v).alias(spec.target or ""))
    out = rows.select("host", "idx", *exprs)
    if "_wd_kBps" in out.columns:
        out = out.with_columns((pl.col("r_kBps") + pl.col("_wd_kBps")).alias("kBps")
                               ).drop("_wd_kBps")
    note = COLUMNS["rqm/s"].note
    if "rqm/s" in present and note:
        source.note(note)
    return out


def _no_interval(source: Source, host: _Host) -> InputFormatError:
    return InputFormatError(
        source.path, host.first_line,
        "the sampling interval of these iostat reports is not in the file (reports without "
        "-t time stamps, or a single measured report): give it with --interval SECONDS — "
        "the number after the options on the iostat command line, e.g. 5 for "
        "'iostat -o JSON -x 5'")


def _anchor(source: Source, host: _Host) -> datetime:
    date = host.info.get("date")
    date_text = date if isinstance(date, str) else None
    if source.start is not None:
        start = source.start
        if start.tzinfo is None:
            utc, _ = tsx.to_utc(pl.Series([start], dtype=pl.Datetime("us")), None, source.tz)
            start = utc[0]
        return start.astimezone(UTC)
    if date_text is None:
        raise InputFormatError(source.path, host.first_line,
                               "the reports carry no timestamp (iostat was run without -t) "
                               'and the host has no "date": give --start and --interval')
    dates = tsx.stamp_dates(pl.Series([date_text]), kind="date")
    order = tsx.infer_date_order(dates, source.date_order)
    parsed = tsx.parse_local(pl.Series([date_text]), order.order, kind="date")
    utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], source.tz)
    if utc[0] is None:
        raise InputFormatError(source.path, host.first_line,
                               f'host "date" {date_text!r} is not a date')
    if note:
        source.note(note)
    source.note("the reports carry no timestamp (iostat was run without -t): report times are "
                f"counted from midnight of the host date ({date_text}) in steps of the "
                "interval; only their spacing is real (give --start for the real start time)")
    result: datetime = utc[0]
    return result


def _misplaced(bad: pl.DataFrame) -> list[tuple[int, str]]:
    """Why each line of ``bad`` (not in its place, or its comma wrong) is refused."""
    problems: list[tuple[int, str]] = []
    for line_no, kd, prev, text, comma_ok in bad.select(
            "line_no", "kind", "prev", "line", "comma_ok").iter_rows():
        if kd == "X":
            why = f"not a line of iostat -o JSON's layout: {text.strip()[:60]!r}"
        elif not comma_ok:
            why = (f"{_WHAT[kd]} {'ends' if text.endswith(',') else 'does not end'} "
                   "with ',' but is the last of its list (or not): the line after it is "
                   "lost or doubled")
        else:
            why = (f"{_WHAT[kd]} cannot follow {_WHAT[prev]}: a line is missing, doubled "
                   "or out of place")
        problems.append((line_no, why))
    return problems


def _objects(df: pl.DataFrame, side: pl.DataFrame, live: pl.Expr,
             problems: list[tuple[int, str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The disk objects (``line_no``, ``region``, ``d``) and CPU objects (``line_no``,
    ``c``) of the live lines, decoded in one call each; what cannot be read, and a disk twice
    in one entry, go to ``problems``."""
    k = pl.col("kind")
    items = df.filter(live & (k == "I")).select(
        "line_no", "region", "host",
        obj=pl.col("line").str.strip_chars_start("\t").str.strip_chars_end(","))
    decoded, found = decode_objects(items, "obj", _disk_dtype(items))
    problems += found
    items = items.select("line_no", "region", decoded.alias("d"))
    # a disk twice in one entry (a doubled line keeps the commas right)
    name = pl.col("d").struct.field("disk_device")
    named = items.filter(pl.col("d").is_not_null())
    if named.height and named.select(pl.struct("region", name).n_unique()).item() \
            < named.height:
        twice = named.select("line_no", name.alias("name"),
                             again=pl.int_range(pl.len()).over("region", name) > 0)
        for line_no, dev in twice.filter(pl.col("again")).select(
                "line_no", "name").iter_rows():
            why = f"disk {dev!r} a second time in one statistics entry (a doubled line?)"
            problems.append((line_no, why))
    cpu = side.filter(pl.col("cpu_json").is_not_null() & pl.col("line_no").is_in(
        df.filter(live)["line_no"].implode())).select("line_no", "cpu_json")
    cpu_decoded, found = decode_objects(cpu, "cpu_json", _CPU_DTYPE)
    problems += found
    return items, cpu.select("line_no", cpu_decoded.alias("c"))
