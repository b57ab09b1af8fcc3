"""sysstat ``sadf -j`` exports (format ``sadf``; the CSV export is :mod:`iogauge.importers.sadf`).

``sadf -j FILE -- -d -u`` (sysstat 10 to 12; sadf_misc.c, json_stats.c), here with two
spaces where sadf writes one tab::

    {"sysstat": {
      "hosts": [
        {
          "nodename": "vm",
          ...
          "statistics": [
            {
              "timestamp": {"date": "2026-11-22", "time": "10:49:25", "utc": 1,
                            "interval": 1},
              "cpu-load": [
                {"cpu": "all", "user": 0.50, ...}
              ],
              "disk": [
                {"disk-device": "vda", "tps": 12.00, "rd_sec": 0.00, "rkB": 0.00, ...}
              ]
            }
          ],
          "restarts": [...]
        }
      ]
    }}

(``timestamp`` is on one line.) The object-valued ``timestamp`` is what tells it from
``iostat -o JSON`` (a string there).
Disk keys: ``tps``; ``rkB``/``wkB``/``dkB`` (11.5+) else ``rd_sec``/``wr_sec``/``dc_sec`` ÷ 2;
``areq-sz`` (kB) else ``avgrq-sz`` (sectors) ÷ 2; ``aqu-sz`` else ``avgqu-sz``; ``await``;
``svctm`` (< 12.1.2); ``util-percent``. ``cpu-load`` (user, nice, system, iowait, steal,
idle) or ``cpu-load-all`` (usr, nice, sys + irq + soft, iowait, steal, idle). Other
activities (``sadf -j -- -A``: memory, network, ...) are passed over.

**Two readers.** sadf writes its document in one layout (``xprintf``: one tab per nesting
level, each bracket that opens or closes a list or an object of several lines on a line of
its own, and each device or CPU object on one line; so in the 10.x and 12.x sources read,
and in 12.6.1's output). A document in that
layout — its first line ``{"sysstat": {``, its second indented by tabs — is read a piece
of :data:`CHUNK_BYTES` at a time, cut before a statistics entry's ``\\t\\t\\t\\t{``; the
piece's last entry is read again with the next piece, so entries are read whole and memory
does not grow with the file. Every line is classified by its text (a bracket that opens, one
that closes, a ``"key": value`` line, a one-line object), and the layout is checked line by
line, so that a lost, doubled or damaged line is an error naming its line:

* a line is indented one tab more than the line before it when that one opens a bracket,
  one tab less when it closes one, else as much;
* a closing bracket closes the kind of bracket opened at its indentation;
* the lines read for the rows (entry brackets, ``timestamp``, the disk and CPU lists and
  their objects, and the outer brackets) end with ``,`` exactly when a sibling follows.
  Other lines' commas are not judged: sadf 10.2.1 wrote no comma after ``"file-date"``
  and 11.1.5 none between two network activities (sysstat issues #12 and #90), and such
  files import;
* each statistics entry has one ``timestamp``; a disk named twice in one entry is refused.

``--lenient`` drops the statistics entry a bad line is in, whole (its lines are counted as
skipped). Any other layout (re-indented by jq or Python, or on one line) is read a piece at
a time by :class:`~iogauge.importers.json_stream.HostsDocument` (the JSON structure found
vectorised, each piece's complete entries read by polars in one call; a problem is named
by the line where the JSON parser stops, or by its entry's first line): 100 MB on one line
(``jq -c``) import at 0.27 GB peak in 3.2-3.4 s, where the JSON parser that read the whole
document took 1.17 GB and 6.0-6.5 s (same rows; three alternating runs).

100 MB (76,555 entries of 4 disks, ``benchmarks/import_memory.py``) import to Parquet at
0.22 GB peak in 2.3-2.4 s, where the whole-document reader this replaced peaked at
0.93-1.02 GB in 2.0-2.1 s (alternating runs on a quiet machine), with the same rows.
Binary sa files (:mod:`iogauge.importers.sa_binary`) are read through this reader from
sadf's pipe.

A document cut off (sadf killed, a copy cut short) keeps its complete statistics entries;
the one it ends inside is dropped and a note says where the cut was.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers._lines import LineCarry, report_frames
from iogauge.importers.base import Source
from iogauge.importers.io import head_then
from iogauge.importers.json_objects import decode_objects, drop_bad_entries
from iogauge.importers.json_stream import HostsDocument
from iogauge.importers.sadf_common import NAME, fallback_host, utc_us
from iogauge.importers.sar_text.common import report
from iogauge.importers.sar_text.rows import device_frame
from iogauge.model.sampleframe import SampleFrame

#: Bytes read per piece by :func:`iter_parse`.
CHUNK_BYTES = 4 << 20

#: sadf -j disk key -> (SampleFrame column, factor); the first key present wins.
_JSON_DISK: dict[str, tuple[tuple[str, float], ...]] = {
    "iops": (("tps", 1.0),),
    "r_kBps": (("rkB", 1.0), ("rd_sec", 0.5)),
    "w_kBps": (("wkB", 1.0), ("wr_sec", 0.5)),
    "d_kBps": (("dkB", 1.0), ("dc_sec", 0.5)),
    "areq_kB": (("areq-sz", 1.0), ("avgrq-sz", 0.5)),
    "aqu_sz": (("aqu-sz", 1.0), ("avgqu-sz", 1.0)),
    "await_ms": (("await", 1.0),),
    "svctm_ms": (("svctm", 1.0),),
    "util_pct": (("util-percent", 1.0),),
}
_JSON_DISK_KEYS = sorted({k for alts in _JSON_DISK.values() for k, _ in alts})
_DISK_DTYPE = pl.Struct({"disk-device": pl.String(),
                         **{k: pl.Float64() for k in _JSON_DISK_KEYS}})
#: cpu-load / cpu-load-all key -> SampleFrame column (sys, irq and soft are summed).
_JSON_CPU = {"user": "cpu_user_pct", "usr": "cpu_user_pct", "nice": "cpu_nice_pct",
             "system": "cpu_system_pct", "iowait": "cpu_iowait_pct",
             "steal": "cpu_steal_pct", "idle": "cpu_idle_pct"}
_JSON_CPU_PARTS = ("sys", "irq", "soft")
_CPU_DTYPE = pl.Struct({"cpu": pl.String(),
                        **{k: pl.Float64() for k in [*_JSON_CPU, *_JSON_CPU_PARTS]}})
_TS_DTYPE = pl.Struct({"date": pl.String(), "time": pl.String(), "utc": pl.Int64(),
                       "interval": pl.Int64()})

#: The document's first line and the start of its second, in sadf's layout (after a BOM).
_OWN_LAYOUT = re.compile(rb'(?:\xef\xbb\xbf)?\{"sysstat": \{\r?\n\t')
#: A statistics entry's first line (also a restart record's): where pieces are cut.
_ENTRY_HEAD = r"^\t{4}\{$"
_KEY_RE = r'^"([^"\\]*)": '
_TS_RE = r'^"timestamp": (\{[^{}]*\}),?$'
#: The lists whose objects are read (at five tabs in a statistics entry).
_CPU_LISTS = ["cpu-load", "cpu-load-all"]
_DATA_LISTS = ["disk", *_CPU_LISTS]
_CLOSERS = ["]", "],", "}", "},"]
#: Stats table of one piece (or document): one row per statistics entry.
_STATS_SCHEMA = {"region": pl.Int64(), "host_no": pl.Int64(), "ts_line": pl.Int64(),
                 "date": pl.String(), "time": pl.String(), "utc": pl.Int64(),
                 "interval": pl.Int64()}


def own_layout(head: bytes) -> bool:
    """Whether a document starting with ``head`` (its first 64 bytes will do) is in sadf's
    own layout, read line by line (else by :mod:`~iogauge.importers.json_stream`)."""
    return bool(_OWN_LAYOUT.match(head))


@dataclass
class _Carry(LineCarry):
    """What the pieces of one document hand on, besides the lines of the entry a piece
    ends with (read again with the next piece).

    Attributes:
        prev_tabs, prev_opens, prev_kind: the last line read: its indentation, whether it
            opens a bracket, its kind (see :func:`_classify`).
        level_last: per indentation, the last line read there without its tabs (the
            bracket a closing line closes may have been opened pieces before).
        list3: the key of the host's list being read (``statistics``, ``restarts``).
        region: the statistics entry being read (-1: none).
        entries: statistics entries opened so far; host_no: hosts opened so far.
        hostnames: host number -> ``nodename``.
        fold_max: per host, the latest local stamp read (the DST fall-back hour).
        restarts, disk_lists, rows: restart records, ``disk`` lists and rows read.
    """

    prev_tabs: int = 0
    prev_opens: bool = False
    prev_kind: str = "^"
    level_last: dict[int, str] = field(default_factory=dict)
    list3: str | None = None
    region: int = -1
    entries: int = 0
    host_no: int = 0
    hostnames: dict[int, str] = field(default_factory=dict)
    fold_max: dict[int, int] = field(default_factory=dict)
    restarts: int = 0
    disk_lists: int = 0
    rows: int = 0


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES,
               sa_file: bool = False) -> Iterator[SampleFrame]:
    """The rows of a ``sadf -j`` document in file order, a piece of about ``chunk_bytes``
    at a time (in any layout). ``sa_file``: the JSON was produced
    here from a binary sa file (the ``source`` column says ``sa``, messages say so)."""
    name = "sa" if sa_file else NAME
    head = stream.read(64)
    if not own_layout(head):
        yield from _parse_generic(head_then(head, stream), source, name, chunk_bytes,
                                  sa_file=sa_file)
        return
    carry = _Carry()
    pieces = report_frames(head_then(head, stream), chunk_bytes, carry, source.path,
                           _ENTRY_HEAD)
    for lines, last, _cut in pieces:
        frame = _piece(lines, source, carry, final=last, name=name, sa_file=sa_file)
        del lines
        if frame is not None and len(frame):
            carry.rows += len(frame)
            yield frame
    _finish_document(source, carry.rows > 0, disk_lists=carry.disk_lists,
                     restarts=carry.restarts, sa_file=sa_file)


def parse(data: bytes, source: Source, *, sa_file: bool = False) -> SampleFrame:
    """All rows of a ``sadf -j`` document (see :func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source, sa_file=sa_file)))


def _finish_document(source: Source, any_rows: bool, *, disk_lists: int | None,
                     restarts: int, sa_file: bool) -> None:
    """The notes on the whole document, and its error when it gave no row (``disk_lists``:
    how many ``"disk": [`` lines it held, None when not counted)."""
    if restarts:
        source.note(f"{restarts} restart record(s) in the file; sadf gives every interval its "
                    "own length, so intervals after a restart are exact")
    if any_rows:
        return
    if sa_file:
        raise InputFormatError(source.path, None, "the sa file holds no disk statistics: "
                               "sadc collects them only with '-S DISK' (sa1 -S DISK, "
                               "SADC_OPTIONS in the sysstat configuration)")
    if not disk_lists:
        raise InputFormatError(source.path, None, "no disk statistics ('disk' lists) in the "
                               "document: export with sadf -j FILE -- -d")
    raise InputFormatError(source.path, None, "the disk statistics hold no rows")


# ---- sadf's own layout, a piece at a time -------------------------------------------------


def _classify(df: pl.DataFrame) -> pl.DataFrame:
    """``body`` (the line without its tabs), ``tabs`` and ``kind``: ``A`` the document's
    first line, ``z`` its last (``}}``), ``O`` a line that opens a bracket (``{``,
    ``"key": [``, ``"key": {``), ``C`` one that closes one, ``V`` a ``"key": value`` line,
    ``I`` a one-line object in a list, ``X`` anything else; ``key`` of ``O`` and ``V``."""
    ln = pl.col("line")
    b = pl.col("body")
    keyed = b.str.starts_with('"')
    df = df.with_columns(body=ln.str.strip_chars_start("\t"))
    df = df.with_columns(
        tabs=(ln.str.len_bytes() - b.str.len_bytes()).cast(pl.Int64()),
        key=pl.when(keyed).then(b.str.extract(_KEY_RE, 1)))
    kind = (pl.when(ln == '{"sysstat": {').then(pl.lit("A"))
            .when(ln == "}}").then(pl.lit("z"))
            .when(b.is_in(_CLOSERS)).then(pl.lit("C"))
            .when((b == "{") | (pl.col("key").is_not_null()
                                & (b.str.ends_with(": [") | b.str.ends_with(": {"))))
            .then(pl.lit("O"))
            .when(b.str.starts_with('{"') & (b.str.ends_with("}") | b.str.ends_with("},")))
            .then(pl.lit("I"))
            .when(pl.col("key").is_not_null()).then(pl.lit("V"))
            .otherwise(pl.lit("X")))
    return df.with_columns(kind=kind)


def _piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool, name: str,
           sa_file: bool) -> SampleFrame | None:
    """The rows of one piece (``lines``: ``line_no``, ``line``; it ends before a
    statistics entry's first line, or with the document when ``final``)."""
    df = _classify(lines.filter(pl.col("line").is_not_null()).select(
        pl.col("line_no").cast(pl.Int64()), "line"))
    del lines
    if df.height == 0:
        return None
    df = _judged(_placed(df, carry, final=final))
    exempt_region, exempt_line = _cut(df, source, final=final, sa_file=sa_file)
    k, tabs = pl.col("kind"), pl.col("tabs")
    live = (pl.col("region") != exempt_region) & (pl.col("line_no") != exempt_line)
    problems: list[tuple[int | None, str]] = []
    bad = df.filter(live & ((k == "X") | ~pl.col("indent_ok") | ~pl.col("bracket_ok")
                            | ~pl.col("comma_ok")))
    for row in bad.select("line_no", "kind", "body", "tabs", "indent_ok", "bracket_ok",
                          "prev_same").iter_rows(named=True):
        problems.append((row["line_no"], _why(row)))
    stats, disks, cpus = _entry_objects(df, live, problems)
    first: dict[int | None, str] = {}
    for line_no, reason in problems:  # (one reason a line: each refused line counts once)
        first.setdefault(line_no, reason)
    report(source, list(first.items()))  # (raises at the first unless --lenient)
    # the lines of an entry whose opening '{' was lost belong to no entry: counted here
    headless = df.filter(live & (pl.col("region") < 0) & (tabs >= 5)
                         & (pl.col("list3") == "statistics")
                         & ~pl.col("line_no").is_in(list(first)))["line_no"]
    if headless.len():
        source.skip(int(headless[0]), "a line of a statistics entry whose opening '{' is "
                    "lost (not read)", count=headless.len())
    # entries with a bad line are dropped whole
    gone = drop_bad_entries(
        df.select("line_no", "region",
                  closes_entry=(k == "C") & (tabs == 4) & (pl.col("region") >= 0)),
        [n for n in first if n is not None], exempt_region, source)
    _hand_on(df, carry)
    del df
    keep = ~pl.col("region").is_in(gone.implode())
    return _rows(stats.filter(keep), disks.filter(keep), cpus.filter(keep), source,
                 carry.hostnames, carry.fold_max, name=name)


def _placed(df: pl.DataFrame, carry: _Carry, *, final: bool) -> pl.DataFrame:
    """The classified lines with what their place is judged by: the line before (its
    indentation, whether it opens, its kind), the line after, the previous line at the same
    indentation, the lists they are in, the host and the statistics entry (``region``)."""
    k, b, tabs = pl.col("kind"), pl.col("body"), pl.col("tabs")
    opens = k.is_in(["A", "O"])
    carried = (tabs.replace_strict(carry.level_last, default=None, return_dtype=pl.String())
               if carry.level_last else pl.lit(None, pl.String()))
    entry_open = (k == "O") & (b == "{") & (tabs == 4) & (pl.col("list3") == "statistics")
    df = df.with_columns(
        prev_tabs=tabs.shift(1).fill_null(carry.prev_tabs),
        prev_opens=opens.shift(1).fill_null(carry.prev_opens),
        prev_kind=k.shift(1).fill_null(pl.lit(carry.prev_kind)),
        after=k.shift(-1).fill_null(pl.lit("$" if final else "O")),
        prev_same=pl.coalesce(b.shift(1).over("tabs"), carried),
        list3=pl.when((tabs == 3) & pl.col("key").is_not_null()).then(pl.col("key"))
        .forward_fill().fill_null(pl.lit(carry.list3, pl.String())),
        list5=pl.when((tabs == 5) & pl.col("key").is_not_null()).then(pl.col("key"))
        .forward_fill(),
        host_no=carry.host_no + ((tabs == 2) & (b == "{")).cum_sum().cast(pl.Int64()),
    )
    df = df.with_columns(entry_open=entry_open)
    return df.with_columns(
        region=pl.when(pl.col("entry_open"))
        .then(carry.entries + pl.col("entry_open").cum_sum().cast(pl.Int64()))
        .when(((tabs <= 3) | ((tabs == 4) & (k == "O"))) & (k != "X")).then(pl.lit(-1))
        .forward_fill().fill_null(carry.region))


def _judged(df: pl.DataFrame) -> pl.DataFrame:
    """The layout, line by line: ``indent_ok``, ``bracket_ok`` and ``comma_ok``."""
    k, b, tabs = pl.col("kind"), pl.col("body"), pl.col("tabs")
    closes = k.is_in(["C", "z"])
    expected = (pl.col("prev_tabs") + pl.col("prev_opens").cast(pl.Int64())
                - closes.cast(pl.Int64()))
    indent_ok = (tabs == expected) | (pl.col("prev_kind") == "X")
    ps = pl.col("prev_same")
    bracket_ok = (~closes | pl.when(b.str.starts_with("]")).then(ps.str.ends_with("["))
                  .otherwise(ps.str.ends_with("{"))).fill_null(False)
    judged = ((closes & (tabs <= 4))
              | (k.is_in(["I", "C"]) & (pl.col("list5").is_in(_DATA_LISTS))
                 & tabs.is_in([5, 6]))
              | ((k == "V") & (tabs == 5) & (pl.col("key") == "timestamp")))
    after = pl.col("after")
    sibling = ~after.is_in(["C", "z", "$", "A"])  # (A: a document after this one)
    comma_ok = ~judged | (b.str.ends_with(",") == sibling) | (after == "X")
    return df.with_columns(indent_ok=indent_ok, bracket_ok=bracket_ok, comma_ok=comma_ok)


def _cut(df: pl.DataFrame, source: Source, *, final: bool, sa_file: bool) -> tuple[int, int]:
    """A document that does not end with its last line: the entry (region) or the last line
    exempt from refusal (-2, -1: none), noted."""
    if not final or str(df["kind"][-1]) == "z":
        return -2, -1
    k, tabs = pl.col("kind"), pl.col("tabs")
    last_region = int(df["region"][-1])
    closed = df.filter((pl.col("region") == last_region) & (k == "C")
                       & (tabs == 4)).height > 0
    what = "the sa file" if sa_file else "the JSON document"
    if last_region >= 0 and not closed:
        opened = int(df.filter(pl.col("region") == last_region)["line_no"][0])
        source.note(f"{what} is cut off inside the statistics entry of line {opened}: "
                    "that interval was dropped (whole intervals only)")
        return last_region, -1
    # (its last line may be cut short: no error, like a cut entry)
    source.note(f"{what} is cut off after its last statistics entry: every "
                "interval was kept")
    return -2, int(df["line_no"][-1])


def _entry_objects(df: pl.DataFrame, live: pl.Expr, problems: list[tuple[int | None, str]]
                   ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Timestamps, disk and CPU objects of the live entries (each decoded in slices, see
    decode_objects); what cannot be read goes to ``problems``."""
    k, b, tabs = pl.col("kind"), pl.col("body"), pl.col("tabs")
    in_entry = live & (pl.col("region") >= 0)
    ts = df.filter(in_entry & (k == "V") & (tabs == 5) & (pl.col("key") == "timestamp"))
    ts = ts.select("line_no", "region", "host_no", obj=b.str.extract(_TS_RE, 1))
    problems += [(int(n), 'an unreadable "timestamp" line')
                 for n in ts.filter(pl.col("obj").is_null())["line_no"]]
    untimed = df.filter(in_entry & pl.col("entry_open")
                        & ~pl.col("region").is_in(ts["region"].implode()))
    problems += [(int(n), 'a statistics entry without its "timestamp" line')
                 for n in untimed["line_no"]]
    if ts["region"].is_duplicated().any():
        again = ts.filter(pl.int_range(pl.len()).over("region") > 0)["line_no"]
        why = 'a second "timestamp" in one statistics entry (a doubled line?)'
        problems += [(int(n), why) for n in again]
    stats = _decoded(ts.filter(pl.col("obj").is_not_null()).rename({"line_no": "ts_line"}),
                     _TS_DTYPE, problems, line="ts_line")
    items = df.filter(in_entry & (k == "I") & (tabs == 6)
                      & pl.col("list5").is_in(_DATA_LISTS)).select(
        "line_no", "region", "list5", obj=b.str.strip_chars_end(","))
    disks = _decoded(items.filter(pl.col("list5") == "disk"), _DISK_DTYPE, problems)
    cpus = _decoded(items.filter(pl.col("list5") != "disk"), _CPU_DTYPE, problems)
    del items
    problems += _disk_problems(disks)
    stats, stamp_problems = _stamps(stats)
    problems += stamp_problems
    return stats, disks, cpus


def _decoded(frame: pl.DataFrame, dtype: pl.Struct, problems: list[tuple[int | None, str]],
             *, line: str = "line_no") -> pl.DataFrame:
    """``frame`` with its ``obj`` column (one JSON object a row) decoded into the fields of
    ``dtype``; the rows that cannot be are dropped and added to ``problems``."""
    decoded, found = decode_objects(frame.rename({line: "line_no"}) if line != "line_no"
                                    else frame, "obj", dtype)
    problems += found
    return frame.with_columns(decoded.alias("obj")).filter(
        pl.col("obj").is_not_null()).unnest("obj")


def _why(row: dict[str, Any]) -> str:
    """Why a line breaks sadf's layout (``row`` from :func:`_piece`'s checks)."""
    body, kind = row["body"], row["kind"]
    if kind == "X":
        return f"not a line of sadf -j's layout: {body[:60]!r}"
    if not row["indent_ok"]:
        return (f"{body[:40]!r} is indented by {row['tabs']} tab(s), which does not follow "
                "the line before it: a line is missing, doubled or out of place")
    if not row["bracket_ok"]:
        return (f"{body!r} does not close what was opened at its indentation "
                f"({(row['prev_same'] or '')[:40]!r}): a bracket line is missing or doubled")
    if body.endswith(","):
        return (f"{body[:40]!r} ends with ',' but is the last of its list or object: the "
                "line after it is lost or doubled")
    return (f"{body[:40]!r} does not end with ',' but is followed by a sibling: a line is "
            "lost or doubled")


def _disk_problems(disks: pl.DataFrame) -> list[tuple[int | None, str]]:
    """A disk object without its name, or a disk named twice in one statistics entry (a
    doubled line keeps the layout right)."""
    out: list[tuple[int | None, str]] = [
        (int(n), "a disk object without 'disk-device'")
        for n in disks.filter(pl.col("disk-device").is_null())["line_no"]]
    named = disks.filter(pl.col("disk-device").is_not_null())
    if not named.select(pl.struct("region", "disk-device").is_duplicated().any()).item():
        return out
    again = named.filter(pl.int_range(pl.len()).over("region", "disk-device") > 0)
    out += [(int(n), f"disk {d!r} a second time in one statistics entry (a doubled line?)")
            for n, d in again.select("line_no", "disk-device").iter_rows()]
    return out


def _hand_on(df: pl.DataFrame, carry: _Carry) -> None:
    """What the next piece needs to know of this one (see :class:`_Carry`)."""
    k, tabs = pl.col("kind"), pl.col("tabs")
    last = df.row(df.height - 1, named=True)
    carry.prev_tabs = int(last["tabs"])
    carry.prev_opens = last["kind"] in ("A", "O")
    carry.prev_kind = str(last["kind"])
    for level, body in df.group_by("tabs").agg(pl.col("body").last()).iter_rows():
        carry.level_last[int(level)] = str(body)
    carry.list3 = last["list3"]
    carry.region = int(last["region"])
    carry.entries += int(df["entry_open"].sum())
    carry.host_no = int(last["host_no"])
    for host_no, value in df.filter((k == "V") & (tabs == 3) & (pl.col("key") == "nodename")
                                    ).select("host_no", "body").iter_rows():
        try:
            carry.hostnames[int(host_no)] = str(json.loads("{" + value.rstrip(",") + "}")
                                                ["nodename"])
        except (json.JSONDecodeError, TypeError):
            carry.hostnames[int(host_no)] = ""
    carry.restarts += df.filter((k == "V") & (tabs == 5) & (pl.col("key") == "boot")
                                & (pl.col("list3") == "restarts")).height
    carry.disk_lists += df.filter((k == "O") & (tabs == 5) & (pl.col("key") == "disk")).height


# ---- rows ---------------------------------------------------------------------------------


def _stamps(stats: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int | None, str]]]:
    """Each statistics entry's local time (``local_s``, ``is_utc``, ``interval_s``, ``blk``
    = its host), and the entries whose time cannot be a sample's (as problems at their
    ``timestamp`` line)."""
    local = (pl.col("date") + " " + pl.col("time")).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", strict=False, time_unit="us").dt.epoch("s")
    stats = stats.with_columns(local_s=local, is_utc=pl.col("utc") == 1,
                               interval_s=pl.col("interval").cast(pl.Float64()),
                               blk=pl.col("host_no"))
    ok = (pl.col("local_s").is_not_null() & pl.col("interval_s").is_not_null()
          & (pl.col("interval_s") > 0))
    problems: list[tuple[int | None, str]] = [
        (line_no, f"timestamp {d!r} {t!r} with interval {iv!r} is not a valid sample time")
        for line_no, d, t, iv in stats.filter(~ok.fill_null(False)).select(
            "ts_line", "date", "time", "interval").iter_rows()]
    return stats.filter(ok.fill_null(False)), problems


def _rows(stats: pl.DataFrame, disks: pl.DataFrame, cpus: pl.DataFrame, source: Source,
          hostnames: Mapping[int, str], fold_max: dict[int, int], *, name: str
          ) -> SampleFrame | None:
    """SampleFrame rows of decoded statistics entries (``stats``: one row per entry, from
    :func:`_stamps`), their disk objects (``disks``: ``line_no``, ``region``, the disk
    keys) and CPU objects (``cpus``: ``region``, the CPU keys)."""
    if stats.height == 0:
        return None
    stats = stats.with_columns(utc_us=utc_us(stats, source, fold_max))
    if disks.height == 0:
        return None
    named = pl.col("host_no").replace_strict(dict(hostnames), default="",
                                             return_dtype=pl.String())
    stats = stats.with_columns(
        host=pl.when(named.str.len_chars() > 0).then(named)
        .otherwise(pl.lit(fallback_host(source))))
    exprs = [pl.coalesce([pl.col(k) * f for k, f in alts]).alias(target)
             for target, alts in _JSON_DISK.items()]
    dev = disks.filter(pl.col("disk-device").is_not_null()).join(
        stats.select("region", "host", "utc_us", "interval_s"), on="region", how="inner")
    out = dev.select("region", pl.col("line_no").alias("order"), "host", "utc_us",
                     "interval_s", pl.col("disk-device").alias("device"), *exprs)
    cpu = cpus.filter(pl.col("cpu") == "all").unique(subset="region", keep="first",
                                                     maintain_order=True)
    if cpu.height:
        cexprs = [pl.col(k).alias(col) for k, col in _JSON_CPU.items()
                  if cpu[k].null_count() < cpu.height]
        parts = [p for p in _JSON_CPU_PARTS if cpu[p].null_count() < cpu.height]
        if "sys" in parts:
            cexprs.append(pl.sum_horizontal([pl.col(p) for p in parts]).round(2)
                          .alias("cpu_system_pct"))
        out = out.join(cpu.select("region", *cexprs), on="region", how="left")
    return device_frame(out.drop("region"), pl.DataFrame(), name=name, order="order")


# ---- any other layout ----------------------------------------------------------------------


def _parse_generic(stream: BinaryIO, source: Source, name: str, chunk_bytes: int, *,
                   sa_file: bool) -> Iterator[SampleFrame]:
    """Any layout of a sadf -j document, a piece at a time
    (:class:`~iogauge.importers.json_stream.HostsDocument`: no line per object, so a
    problem is named by its statistics entry's line)."""
    doc = HostsDocument(source, tool="sadf", chunk_bytes=chunk_bytes)
    hostnames: dict[int, str] = {}
    fold_max: dict[int, int] = {}
    regions = disk_lists = rows = orders = 0
    for batches in doc.pieces(stream):
        stats_parts: list[pl.DataFrame] = []
        disk_parts: list[pl.DataFrame] = []
        cpu_parts: list[pl.DataFrame] = []
        for batch in batches:
            e = batch.entries.with_columns(
                region=pl.int_range(pl.len(), dtype=pl.Int64()) + regions + 1)
            regions += e.height
            hostnames[batch.host.no] = str(batch.host.info.get("nodename") or "")
            stats_parts.append(e.select(
                "region", pl.lit(batch.host.no, pl.Int64()).alias("host_no"),
                pl.col("_line").alias("ts_line"),
                *_fields(e, "timestamp", _TS_DTYPE)))
            if "disk" in e.columns:
                disk_lists += int(e["disk"].is_not_null().sum())
                disks = _objects(e, "disk", _DISK_DTYPE, source)
                disks = disks.with_columns(
                    line_no=pl.int_range(pl.len(), dtype=pl.Int64()) + orders + 1)
                orders += disks.height
                disk_parts.append(disks)
            cpu_parts += [_objects(e, key, _CPU_DTYPE, source)
                          for key in _CPU_LISTS if key in e.columns]
        stats = pl.concat(stats_parts) if stats_parts else pl.DataFrame(schema=_STATS_SCHEMA)
        disks_df = (pl.concat(disk_parts) if disk_parts else pl.DataFrame(schema={
            "region": pl.Int64(), "entry_line": pl.Int64(), **_DISK_DTYPE.to_schema(),
            "line_no": pl.Int64()}))
        cpus_df = (pl.concat(cpu_parts) if cpu_parts else pl.DataFrame(schema={
            "region": pl.Int64(), "entry_line": pl.Int64(), **_CPU_DTYPE.to_schema()}))
        del stats_parts, disk_parts, cpu_parts
        stats, problems = _stamps(stats)
        problems += _disk_problems(disks_df.with_columns(line_no=pl.col("entry_line")))
        report(source, problems)
        if problems:  # (--lenient: the entries with a problem are dropped whole)
            bad = pl.Series([line for line, _ in problems], dtype=pl.Int64())
            gone = disks_df.filter(pl.col("entry_line").is_in(bad.implode()))["region"]
            stats = stats.filter(~pl.col("region").is_in(gone.implode()))
            disks_df = disks_df.filter(~pl.col("region").is_in(gone.implode()))
        frame = _rows(stats, disks_df.drop("entry_line"), cpus_df.drop("entry_line"),
                      source, hostnames, fold_max, name=name)
        if frame is not None and len(frame):
            rows += len(frame)
            yield frame
    restarts = sum(len(host["restarts"]) for d in doc.documents
                   for host in d["sysstat"]["hosts"]
                   if isinstance(host, Mapping) and isinstance(host.get("restarts"), list))
    _finish_document(source, rows > 0, disk_lists=disk_lists, restarts=restarts,
                     sa_file=sa_file)


def _fields(entries: pl.DataFrame, column: str, dtype: pl.Struct) -> list[pl.Expr]:
    """The fields of ``dtype`` from the struct column ``column`` (null where absent)."""
    have = entries.schema.get(column)
    present = set(have.to_schema()) if isinstance(have, pl.Struct) else set()
    return [(pl.col(column).struct.field(f).cast(t, strict=False) if f in present
             else pl.lit(None, t)).alias(f) for f, t in dtype.to_schema().items()]


def _objects(entries: pl.DataFrame, column: str, dtype: pl.Struct, source: Source
             ) -> pl.DataFrame:
    """``region``, ``entry_line`` and the fields of ``dtype``: one row per object of the
    list column ``column`` (a list of objects in each entry)."""
    have = entries.schema[column]
    if have in (pl.Null(), pl.List(pl.Null())):
        return pl.DataFrame(schema={"region": pl.Int64(), "entry_line": pl.Int64(),
                                    **dtype.to_schema()})
    if not isinstance(have, pl.List) or not isinstance(have.inner, pl.Struct):
        line = entries.filter(pl.col(column).is_not_null())["_line"][0]
        raise InputFormatError(source.path, line, f"{column!r} is not a list of objects")
    items = entries.select("region", pl.col("_line").alias("entry_line"),
                           pl.col(column).alias("_obj")).explode("_obj").filter(
        pl.col("_obj").is_not_null())
    return items.select("region", "entry_line", *_fields(items, "_obj", dtype))
