"""sysstat ``sar`` text output: ``sar -d``, ``sar -dp``, ``sar -A`` of every sysstat generation.

What the text looks like (sysstat sources: sar.c, pr_stats.c; checked against real 10.1.5,
11.6.1 and 12.6.1 output)::

    Linux 3.10.0-327.el7.x86_64 (host)    03/28/16    _x86_64_    (48 CPU)

    08:51:10          LINUX RESTART

    09:00:01       DEV    tps rd_sec/s wr_sec/s avgrq-sz avgqu-sz  await svctm %util
    09:10:01    dev8-0   0.35     0.53     1.71     6.44     0.01  20.24  5.61  0.20
    Average:    dev8-0   ...

* The **banner** names the host and the date of the first sample (locale format: ``03/28/16``,
  ``11/22/2026``, ``22.11.2026``, ``2026-11-22`` ...).
* Every **section** starts with a column header line whose time is the *previous* sample, i.e.
  the start of the first interval shown under it; every row's time is the *end* of its
  interval. So the interval of a row is its time minus the previous sample time of its
  section (the header's time for the first row) — exact even for the first interval after
  a ``LINUX RESTART``, because sar prints a fresh header after every restart with the time
  of the first record after it (the record the next rates are computed from).
* Times are local, ``HH:MM:SS`` or ``HH:MM:SS AM|PM`` (``%X`` of the locale), and wrap past
  midnight: a time lower than the one before it (by more than an hour — less is a DST
  fall-back hour repeating) is on the next day.
* ``sar -f`` prints sections **grouped**: for each stretch between restarts, every activity
  in turn, each restarting at the stretch's first sample. A live ``sar -A 10 6`` prints them
  **interleaved**: every interval repeats every section. Both are handled (see
  :func:`_place_blocks`).
* ``Average:`` lines (translated: ``Durchschn.:`` ...) are summaries over the whole stretch,
  never intervals: they are skipped and counted in a note.
* Device columns by generation: 10.x ``tps rd_sec/s wr_sec/s avgrq-sz avgqu-sz await svctm
  %util`` (sizes in 512-byte sectors); 11.6+ ``tps rkB/s wkB/s areq-sz aqu-sz await svctm
  %util`` (kB); 12.x adds ``dkB/s`` and drops ``svctm``; ``--pretty`` (12.x) moves ``DEV`` to
  the last column. Without ``-p``, sysstat < 12 names devices ``devMAJ-MIN``.
* Numbers use the locale's decimal separator (``0,35`` under de_DE).
* ``--human`` (``-h``) prints kB amounts with a unit letter and percentages with ``%``
  (``7.9k``, ``0.3%``): read with the iostat importer's helper (1 decimal printed).
* ``sar ... 0`` (statistics since boot) prints every line, headers included, at one time:
  such a section's rows are kept, flagged ``since_boot``, with a nominal ``interval_s``.
* A malformed line in a section iogauge does not read (USB devices, network, power,
  interrupts ...) is skipped and counted in a note; the DEV and CPU sections stay strict.

CPU context: the ``CPU`` section's ``all`` rows (``sar -u``: %user %nice %system %iowait
%steal %idle; ``sar -u ALL``: %usr %nice %sys %iowait %steal %irq %soft %guest %gnice %idle)
fill the ``cpu_*_pct`` columns of the device rows with the same timestamp. With ``-u ALL``,
``cpu_system_pct`` = %sys + %irq + %soft, which is how sysstat's plain ``-u`` (and iostat)
defines %system (pr_stats.c print_cpu_stats), rounded to the printed 2 decimals.

Time zone: sar prints the zone of the machine that ran it and does not say which. A ksar
style footer (``## EndTime:`` local and ``## EndTimeUTC:``) states the offset and is used;
otherwise ``--tz``; otherwise UTC is assumed and a note says so.

A file is read a few MiB at a time (:func:`iter_parse`), cut before banners (``cat sar*``)
or, inside a report, where an interval starts; the next piece is handed the dates, the host,
the report's CPU rows and the open section's header. 100 MB of ``sar -A`` reports import to
Parquet at 0.20-0.21 GB peak, where the whole-file read peaked at 0.62-0.95 GB; a 102 MB
report of one day (``sar -u -d -p -f``, 1-second samples) at 0.24-0.25 GB in 4.2-4.6 s,
where reading each report whole peaked at 1.07-1.10 GB in 3.5-3.8 s.
"""

from __future__ import annotations

import bisect
import io
import mmap
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import BinaryIO

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers._lines import LineCarry, line_frames
from iogauge.importers.base import Source
from iogauge.importers.io import compression_of, decode, encoding_of, is_read_error, open_binary
from iogauge.importers.iostat import UNKNOWN_INTERVAL_S, ColumnSpec, human_value
from iogauge.model.sampleframe import SampleFrame

NAME = "sar"
DESCRIPTION = "sysstat sar text (sar -d, sar -dp, sar -A of any sysstat version), Linux"
EXPECTS = ("a 'Linux <kernel> (<host>)  <date>' banner followed by 'HH:MM:SS [AM|PM]' lines "
           "with sar column headers such as 'DEV tps rkB/s ...'")

_BANNER_RE = re.compile(r"^Linux\s+\S+\s+\(([^)]*)\)(.*)$")
_TIMED_LINE_RE = re.compile(r"(?m)^\d{1,2}:\d{2}:\d{2}(?:[ \t]*[AaPp][Mm])?[ \t]+\S+[ \t]+\S")
#: A sar time stamp (locale %X): hours, minutes, seconds, optional AM/PM.
_TIMED = r"^(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})(?:[ \t]*(?P<ampm>[AaPp][Mm]))?$"
_STAMP = r"^(\d{1,2}:\d{2}:\d{2}(?:[ \t]*[AaPp][Mm])?)[ \t]"
_TIME_PREFIX = r"^\d{1,2}:\d{2}:\d{2}(?:[ \t]*[AaPp][Mm])?[ \t]+\S"
#: After the stamp, a column header: the first two fields are not numbers (a data row has a
#: number among them: 'sda 1.00 ...' or, with --pretty, '1.00 ... sda').
_HEADER = r"^[ \t]+[^\s\d+-]\S*[ \t]+[^\s\d+-]"
#: After the stamp, a sar -C comment record: 'HH:MM:SS COM text'.
_COMMENT = r"^[ \t]+COM[ \t]"

#: sar/sadf device column -> (SampleFrame column, factor). Sectors are 512 bytes, so
#: sectors/s -> kB/s and request sizes in sectors -> kB are exact halvings ([sysstat] sar(1)).
DEV_COLUMNS: dict[str, tuple[str, float]] = {
    "tps": ("iops", 1.0),
    "rd_sec/s": ("r_kBps", 0.5),
    "wr_sec/s": ("w_kBps", 0.5),
    "dc_sec/s": ("d_kBps", 0.5),
    "rkB/s": ("r_kBps", 1.0),
    "wkB/s": ("w_kBps", 1.0),
    "dkB/s": ("d_kBps", 1.0),
    "avgrq-sz": ("areq_kB", 0.5),  # sysstat < 11.5: mean request size in sectors
    "areq-sz": ("areq_kB", 1.0),  # sysstat >= 11.5: in kB
    "avgqu-sz": ("aqu_sz", 1.0),
    "aqu-sz": ("aqu_sz", 1.0),
    "await": ("await_ms", 1.0),
    "svctm": ("svctm_ms", 1.0),  # removed in sysstat 12.1.2
    "%util": ("util_pct", 1.0),
}

#: CPU column -> SampleFrame column. ``%sys``/``%irq``/``%soft`` (``-u ALL``) are summed.
CPU_COLUMNS: dict[str, str] = {
    "%user": "cpu_user_pct",
    "%usr": "cpu_user_pct",
    "%nice": "cpu_nice_pct",
    "%system": "cpu_system_pct",
    "%iowait": "cpu_iowait_pct",
    "%steal": "cpu_steal_pct",
    "%idle": "cpu_idle_pct",
}
CPU_SYSTEM_PARTS: tuple[str, ...] = ("%sys", "%irq", "%soft")

#: Columns ``sar --human`` (``-h``) prints as kB amounts with a unit letter (``7.9k``,
#: ``1.2M``: sysstat cprintf_unit, 1024 per step, as iostat --human [sysstat]); percentages
#: get a ``%`` suffix and counts stay plain.
HUMAN_SIZE_COLUMNS: frozenset[str] = frozenset({"rkB/s", "wkB/s", "dkB/s", "areq-sz"})
#: A value as --human prints it: digits then a unit letter or '%'.
_HUMAN_VALUE_RE = r"\d[%BkKMGTPEZY](?:\s|$)"

#: A DST fall-back repeats at most this much local time; a bigger step back is midnight.
_MAX_DST_FOLD_S = 3600
_DAY_S = 86400


# ---- helpers shared with the sadf importer ------------------------------------------------


def read_lines(data: bytes | list[bytes]) -> pl.DataFrame:
    """The input as a frame of ``line_no`` (1-based) and ``line`` (trailing blanks and CR
    removed; null for a blank line), read in one vectorised pass.

    A one-item list hands the bytes over: they are let go once polars has read them, before
    the lines are trimmed (a copy of the column)."""
    if isinstance(data, list):
        data = data.pop()
    enc = encoding_of(data[:65536])
    if enc not in ("utf-8", "utf-8-sig"):
        data = decode(data).encode("utf-8")
    elif data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        return pl.DataFrame({"line_no": [], "line": []},
                            schema={"line_no": pl.Int64(), "line": pl.String()})
    df = pl.read_csv(io.BytesIO(data), has_header=False, separator="\x1f", quote_char=None,
                     new_columns=["line"], schema={"line": pl.String()})
    del data
    line = pl.col("line").str.strip_chars_end()
    return df.with_row_index("line_no", offset=1).select(
        pl.col("line_no").cast(pl.Int64()),
        pl.when(line == "").then(None).otherwise(line).alias("line"))


def to_float(expr: pl.Expr, *, comma: bool = False) -> pl.Expr:
    """Cast sar/sadf number text to Float64; null where it is not a finite number (callers
    report it). ``comma``: the locale writes a decimal comma (de_DE ``0,35``); sysstat
    prints no thousands separators, so a comma can only be the decimal mark."""
    text = expr.str.strip_chars()
    if comma:
        text = text.str.replace(",", ".", literal=True)
    value = text.cast(pl.Float64(), strict=False)
    return pl.when(value.is_finite()).then(value)


def decimal_comma(texts: pl.Series) -> bool:
    """Whether sample lines of a file print numbers with a decimal comma."""
    return bool(texts.head(50).str.contains(r"\d,\d").any())


# Linux block majors with a fixed meaning (Documentation/admin-guide/devices.txt), for the
# ``devMAJ-MIN`` names sysstat prints without -p: kind, and minors per whole disk (0 = the
# driver has no partition minors). Dynamic majors (device-mapper, virtio-blk, zram, nvme via
# 259 "blkext") depend on the host and are reported as 'other'.
_STATIC_MAJORS: dict[int, tuple[str, int]] = {
    1: ("ram", 0), 7: ("loop", 0), 9: ("md", 0),
    3: ("disk", 64), 22: ("disk", 64), 33: ("disk", 64), 34: ("disk", 64),
    56: ("disk", 64), 57: ("disk", 64), 88: ("disk", 64), 89: ("disk", 64),
    90: ("disk", 64), 91: ("disk", 64),
    8: ("disk", 16), **dict.fromkeys(range(65, 72), ("disk", 16)),
    **dict.fromkeys(range(128, 136), ("disk", 16)),
    179: ("disk", 8),  # mmcblk (CONFIG_MMC_BLOCK_MINORS default 8)
    202: ("disk", 16),  # Xen xvd
}
_DEVNUM_RE = re.compile(r"^dev(\d+)-(\d+)$")
_KERNEL_NAME_RE = re.compile(
    r"^(?:[shv]d[a-z]+\d*|xvd[a-z]+\d*|nvme\d+n\d+(?:p\d+)?|mmcblk\d+(?:p\d+)?|loop\d+(?:p\d+)?"
    r"|md\d+(?:p\d+)?|md_d\d+|dm-\d+|zram\d+|ram\d+|nbd\d+(?:p\d+)?|sr\d+|rbd\d+|drbd\d+"
    r"|bcache\d+|pmem\d+|vd[a-z]+\d*)$")


def device_kind_and_parent(name: str) -> tuple[str, str | None]:
    """Kind (one of DEVICE_KINDS) and parent disk of a device name as sysstat prints it.

    ``devMAJ-MIN`` (sysstat without -p) keeps its name; its kind comes from the static major
    table, and a partition's parent is the whole disk's ``devMAJ-MIN``. A pretty name is a
    kernel name (sda1, nvme0n1p2, dm-0) or, for device-mapper devices, the /dev/mapper name
    sysstat substitutes under -p (``vg0-root``; sa_common.c transform_devmapname).
    """
    m = _DEVNUM_RE.match(name)
    if m:
        major, minor = int(m.group(1)), int(m.group(2))
        kind, per_disk = _STATIC_MAJORS.get(major, ("other", 0))
        if per_disk and minor % per_disk:
            return "partition", f"dev{major}-{minor - minor % per_disk}"
        return kind, None
    parent = guess_parent(name)
    if parent is not None:
        return "partition", parent
    if not _KERNEL_NAME_RE.match(name) and "-" in name:
        return "dm", None
    return kind_from_name(name), None


def device_identity(devices: Iterable[str]) -> pl.DataFrame:
    """``device``, ``device_kind``, ``parent`` for each distinct name (joined onto rows)."""
    names = sorted(set(devices))
    pairs = [device_kind_and_parent(n) for n in names]
    return pl.DataFrame({"device": names, "device_kind": [k for k, _ in pairs],
                         "parent": [p for _, p in pairs]},
                        schema={"device": pl.String(), "device_kind": pl.String(),
                                "parent": pl.String()})


def report(source: Source, problems: Sequence[tuple[int | None, str]]) -> None:
    """Hand problems to the Source in line order: the first raises unless --lenient."""
    for line_no, reason in sorted(problems, key=lambda p: (p[0] is None, p[0] or 0)):
        source.bad_line(line_no, reason)


def zone_note(source: Source, what: str) -> None:
    source.note(f"{what} are local times and the file does not state its zone: assumed UTC "
                "(use --tz ZONE to give the zone of the machine that wrote it)")


def local_to_utc_us(local_s: pl.Series, fold: pl.Series, zone: tzinfo) -> pl.Series:
    """Naive local epoch seconds -> UTC epoch microseconds in ``zone``.

    ``fold`` True picks the second occurrence of a repeated (DST fall-back) local time, as
    Python's ``datetime.fold``. Converted once per distinct timestamp (one per interval, not
    per row), in Python because any ``tzinfo`` (also one without an IANA key) must work.
    """
    frame = pl.DataFrame({"s": local_s, "f": fold})
    uniq = frame.unique(maintain_order=True)
    epoch = datetime(1970, 1, 1)
    out: list[int] = []
    for s, f in uniq.iter_rows():
        naive = epoch + timedelta(seconds=int(s))
        aware = naive.replace(tzinfo=zone, fold=1 if f else 0)
        utc = aware.astimezone(UTC)
        out.append(int((utc.replace(tzinfo=None) - epoch) / timedelta(microseconds=1)))
    mapping = uniq.with_columns(pl.Series("us", out, dtype=pl.Int64()))
    return frame.join(mapping, on=["s", "f"], how="left", maintain_order="left")["us"]


# ---- the banner ---------------------------------------------------------------------------

_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})"), "ymd"),  # ISO (S_TIME_FORMAT=ISO)
    (re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]\s*(\d{1,2})"), "ymd"),  # ja/zh/ko
    (re.compile(r"(\d{4})[./]\s*(\d{1,2})[./]\s*(\d{1,2})"), "ymd"),  # hu, zh_TW ...
    (re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{2,4})"), "dmy"),  # de, ru, ...
    (re.compile(r"(\d{1,2})/(\d{1,2})/(\d{2,4})"), "mdy"),  # C, en_US (%x); en_GB is d/m
)


def _year(text: str) -> int:
    y = int(text)
    if len(text) <= 2:  # POSIX %y: 69-99 -> 19xx, 00-68 -> 20xx
        y += 1900 if y >= 69 else 2000
    return y


def parse_banner_date(text: str) -> tuple[date, date | None] | None:
    """The banner's date, and the other reading when ``a/b/yy`` could be either order."""
    for pattern, order in _DATE_PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        a, b, c = m.group(1), m.group(2), m.group(3)
        try:
            if order == "ymd":
                return date(int(a), int(b), int(c)), None
            if order == "dmy":
                return date(_year(c), int(b), int(a)), None
            first, second = int(a), int(b)
            if first > 12:  # cannot be a month: a day/month locale (en_GB, fr ...)
                return date(_year(c), second, first), None
            mdy = date(_year(c), first, second)
            alt = None
            if second <= 12 and first != second:
                alt = date(_year(c), second, first)
        except ValueError:
            return None
        return mdy, alt
    return None


def _first_text_line(head: str) -> str:
    for raw in head.splitlines():
        if raw.strip():
            return raw.strip()
    return ""


def sniff(head: str) -> bool:
    """A sysstat banner ('Linux <kernel> (<host>) ...') and at least one timed sar line.

    iostat and the Solaris/AIX/HP-UX sar (banner 'SunOS', 'AIX', 'HP-UX') are refused: iostat
    has the same banner but no 'HH:MM:SS <columns>' lines."""
    if not _BANNER_RE.match(_first_text_line(head)):
        return False
    return _TIMED_LINE_RE.search(head) is not None


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---- parsing ------------------------------------------------------------------------------


@dataclass
class _Block:
    """One section: its header line and where it sits in time."""

    line_no: int
    kind: str  # 'dev', 'cpu' or 'other'
    tokens: list[str]
    tod: int
    host: str
    text: str = ""  # the header line as printed (its column positions)
    day0_local: int = 0  # midnight of the header's day, naive local epoch seconds
    start_fold: bool = False  # the header time is the second pass of a DST-repeated hour


def _classify(lines: pl.DataFrame) -> pl.DataFrame:
    """Add ``kind`` (blank, banner, footer, summary, restart, comment, header, data, unknown),
    ``tod`` (seconds after local midnight), ``bad_clock``, ``stamp`` and ``grp`` (section run).

    Only cheap anchored tests run on every line; times are parsed once per distinct stamp
    and lines are split into fields later, only where their values are wanted."""
    line = pl.col("line")
    timed = line.str.contains(_TIME_PREFIX)
    stamped = lines.with_columns(stamp=pl.when(timed).then(line.str.extract(_STAMP, 1)))
    # What follows the stamp (AM/PM included in it: a regex alone could read 'AM' as a
    # column name).
    rest = line.str.slice(pl.col("stamp").str.len_chars())
    kind = (pl.when(line.is_null()).then(pl.lit("blank"))
            .when(line.str.contains(r"^Linux\s+\S+\s+\(")).then(pl.lit("banner"))
            .when(line.str.starts_with("#")).then(pl.lit("footer"))
            .when(timed & line.str.contains("LINUX RESTART", literal=True))
            .then(pl.lit("restart"))
            .when(timed & rest.str.contains(_COMMENT)).then(pl.lit("comment"))
            .when(timed & rest.str.contains(_HEADER)).then(pl.lit("header"))
            .when(timed).then(pl.lit("data"))
            # 'Average:' and its translations ('Durchschn.:' ...): a first word ending in ':'
            .when(line.str.contains(r"^\S+:\s+\S")).then(pl.lit("summary"))
            .otherwise(pl.lit("unknown")))
    df = stamped.with_columns(kind=kind)
    # sar prints a blank line before every column header. A header-looking line right after
    # a sample or a header is a sample whose first value is damaged (it must be reported,
    # not open a section that would swallow the rows after it), unless it carries what only
    # column names do ('%util', 'rkB/s', DEV, CPU): output whose blank lines were stripped.
    prev = pl.col("kind").shift(1)
    damaged = ((pl.col("kind") == "header") & prev.is_in(["data", "header"])
               & ~rest.str.contains(r"%[a-z]|[a-zA-Z]/s\b|\bDEV\b|\bCPU\b"))
    df = df.with_columns(kind=pl.when(damaged).then(pl.lit("data")).otherwise(pl.col("kind")))
    stamps = df.select(pl.col("stamp").drop_nulls().unique())
    parts = pl.col("stamp").str.extract_groups(_TIMED)
    h = parts.struct.field("h").cast(pl.Int64())
    mi = parts.struct.field("m").cast(pl.Int64())
    se = parts.struct.field("s").cast(pl.Int64())
    ampm = parts.struct.field("ampm").str.to_uppercase()
    hour = (pl.when(ampm == "AM").then(h % 12)
            .when(ampm == "PM").then(h % 12 + 12)
            .otherwise(h))
    stamps = stamps.with_columns(
        tod=hour * 3600 + mi * 60 + se,
        bad_clock=(h > 23) | (mi > 59) | (se > 60)
        | (ampm.is_not_null() & ((h > 12) | (h == 0))),
        n_stamp_tokens=pl.when(ampm.is_not_null()).then(2).otherwise(1),
    )
    # each line's time, joined on the stamp alone and added beside the line's columns (a join
    # of the whole frame would copy them all)
    times = (df.select("stamp").join(stamps, on="stamp", how="left", maintain_order="left")
             .drop("stamp"))
    df = df.with_columns(times.get_columns())
    boundary = pl.col("kind").is_in(["blank", "banner", "footer", "summary", "restart",
                                     "header", "unknown"])
    return df.with_columns(grp=boundary.cum_sum())


def _strict_only(df: pl.DataFrame, blocks: Mapping[int, _Block],
                 loose: list[tuple[int | None, str]], carry: _Carry
                 ) -> list[tuple[int | None, str]]:
    """The ``loose`` problems that count: those outside the sections iogauge does not read.

    A line is in the section of the last header above it (a blank line or 'Average:' ends
    a section's rows, not the section a stray line belongs to; a banner or LINUX RESTART
    does). A malformed line of a USB, network, power, interrupts ... section never fails an
    import: it is counted in ``carry`` for a note; DEV and CPU sections stay strict."""
    if not loose:
        return []
    k = pl.col("kind")
    sect = (pl.when(k == "header").then(pl.col("line_no"))
            .when(k.is_in(["banner", "restart"])).then(pl.lit(0))
            .otherwise(None).forward_fill())
    where = dict(df.select("line_no", sect.alias("sect")).filter(
        pl.col("line_no").is_in([n for n, _ in loose if n is not None])).iter_rows())
    kept: list[tuple[int | None, str]] = []
    skipped: set[int] = set()  # (a line can be both: a bad time and under no header)
    for line_no, reason in loose:
        blk = blocks.get(where.get(line_no) or -1)
        if line_no is not None and blk is not None and blk.kind == "other":
            skipped.add(line_no)
        else:
            kept.append((line_no, reason))
    if skipped:
        carry.other_skipped += len(skipped)
        first = min(skipped)
        carry.other_first = first if carry.other_first is None else min(carry.other_first,
                                                                          first)
    return kept


def _tokens() -> pl.Expr:
    """The whitespace-separated fields after the time stamp (and its AM/PM)."""
    return pl.col("line").str.extract_all(r"\S+").list.slice(pl.col("n_stamp_tokens"))


def _block_kind(tokens: Sequence[str]) -> str:
    toks = set(tokens)
    if "DEV" in toks and "tps" in toks:
        return "dev"
    if "CPU" in toks and "%idle" in toks and ("%user" in toks or "%usr" in toks):
        return "cpu"
    return "other"


def _next_at_or_after(base: int, tod: int) -> int:
    """The first local time (naive epoch seconds) at or after ``base`` whose time of day is
    ``tod``."""
    cand = base - base % _DAY_S + tod
    return cand if cand >= base else cand + _DAY_S


@dataclass
class _BlockEnd:
    days: int  # midnights crossed inside the block
    last_tod: int
    last_fold: bool


@dataclass
class _PlaceState:
    """Where :func:`_place_blocks` stands after a part of a report (handed to the next part
    when a report is read in pieces, see :func:`iter_parse`).

    Attributes:
        cur_date: the date of the last banner.
        base: the next stretch starts at or after this local time (naive epoch seconds).
        prev: the last section's (start, start fold, end, end fold), or None.
        stretch_start: the first header time of the current stretch.
    """

    cur_date: date | None = None
    base: int = 0
    prev: tuple[int, bool, int, bool] | None = None
    stretch_start: int = 0


def _place_blocks(events: pl.DataFrame, blocks: dict[int, _Block],
                  ends: Mapping[int, _BlockEnd],
                  problems: list[tuple[int | None, str]],
                  state: _PlaceState | None = None, continues: int | None = None
                  ) -> _PlaceState:
    """Give every section header its local date, walking banners, restarts and headers in
    file order (a loop per section, not per line); returns where it stands at the end.

    A header repeats the start of the section before it (``sar -f`` prints every activity
    of a stretch from the stretch's first sample; a live ``sar -A`` prints every activity of
    one interval from that interval's start), or that section's end (the next interval of a
    live sar, or a header repeated inside a section), or the stretch's first sample (the
    next activity after a section with repeated headers). The first header after the banner
    or a restart is the first time at or after it; anything else continues forward from the
    last section's end.

    ``state``: where the part of the report before this one ended; ``continues``: the
    header (put there by :func:`iter_parse`) that continues that part's last section from
    its last sample.
    """
    st = state or _PlaceState()
    cur_date, base, prev, stretch_start = st.cur_date, st.base, st.prev, st.stretch_start
    for line_no, kind, tod, banner_date in events.iter_rows():
        if kind == "banner":
            cur_date = banner_date
            if cur_date is None:
                problems.append((line_no, ("banner without a readable date (expected e.g. "
                                          "03/28/16, 2016-03-28 or 28.03.2016 after the host "
                                          "name)")))
                continue
            base = int((datetime(cur_date.year, cur_date.month, cur_date.day)
                        - datetime(1970, 1, 1)).total_seconds())
            prev = None
            continue
        if cur_date is None:
            continue  # reported: lines before any banner
        if kind == "restart":
            base = _next_at_or_after(prev[2] if prev else base, tod)
            prev = None
            continue
        block = blocks[line_no]
        if line_no == continues and prev is not None:
            start, fold = prev[2], prev[3]  # (the same section, from its last sample)
        elif prev is None:
            start, fold = _next_at_or_after(base, tod), False
            stretch_start = start
        elif tod == prev[0] % _DAY_S:
            start, fold = prev[0], prev[1]
        elif tod == prev[2] % _DAY_S:
            start, fold = prev[2], prev[3]
        elif tod == stretch_start % _DAY_S:
            # the next activity of a grouped stretch, after one whose header was repeated
            # inside it (sar -I ALL prints its wide header again for every interval)
            start, fold = stretch_start, False
        else:
            start, fold = _next_at_or_after(prev[2], tod), False
        if line_no == continues and state is not None and state.prev is not None:
            # the section began before this part: its start (for the next header's "the
            # start of the section before") is the one the part before saw
            section_start, section_fold = state.prev[0], state.prev[1]
        else:
            section_start, section_fold = start, fold
        block.day0_local = start - start % _DAY_S
        block.start_fold = fold
        end = ends.get(line_no)
        if end is None:
            prev = (section_start, section_fold, start, fold)
        else:
            # Still on the second pass of a repeated hour if the block saw the fold itself,
            # or began on that pass and crossed no midnight.
            prev = (section_start, section_fold,
                    block.day0_local + end.days * _DAY_S + end.last_tod,
                    end.last_fold or (end.days == 0 and fold))
    return _PlaceState(cur_date, base, prev, stretch_start)


def _footer_offset(texts: Iterable[str]) -> int | None:
    """The UTC offset (s) a ksar footer states by its last ``## EndTime:`` and ``##
    EndTimeUTC:`` lines among ``texts``, or None."""
    local = utc = None
    for text in texts:
        m = re.match(r"^##\s*EndTime(UTC)?:\s*(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", text)
        if m:
            stamp = datetime.fromisoformat(m.group(2))
            if m.group(1):
                utc = stamp
            else:
                local = stamp
    if local is None or utc is None:
        return None
    return int((local - utc).total_seconds())


def _tail_offset(stream: BinaryIO) -> int | None:
    """The offset stated by the last ksar footer in ``stream`` (the one a read of the whole
    file takes), looked up before the stream is read when that is cheap (a plain file or
    bytes, searched for ``EndTime`` without being read into Python), else None (a
    compressed file: see :func:`_compressed_tail_offset`)."""
    if isinstance(stream, io.BytesIO):
        return _footer_in(stream.getvalue())  # (CPython hands over its bytes: no copy)
    if not isinstance(stream, io.BufferedReader | io.FileIO) or not stream.seekable():
        return None  # (also a named pipe opened as a file)
    try:
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _footer_in(mapped)
    except (ValueError, OSError):  # (an empty file cannot be mapped)
        return None


def _compressed(stream: BinaryIO, path: str) -> str | None:
    """``path`` when ``stream`` is a compressed file's (whose tail :func:`_tail_offset`
    cannot look up), else None."""
    if isinstance(stream, io.BytesIO | io.BufferedReader | io.FileIO):
        return None
    try:
        with Path(path).open("rb") as fh:
            return path if compression_of(fh.read(8)) is not None else None
    except OSError:
        return None


def _compressed_tail_offset(path: str) -> int | None:
    """The offset the last ksar footer of the compressed file ``path`` states: the file is
    decompressed a second time, a MiB at a time, keeping only its ``## EndTime`` lines
    (asked for once, by the first piece without a footer of its own; a 100 MB gzip file
    takes some 0.3 s more). None when it has none or cannot be read (the reading itself then
    says why)."""
    texts: list[str] = []
    try:
        stream, _ = open_binary(path)
        with stream:
            rest = b""
            while block := stream.read(1 << 20):
                block = rest + block
                cut = block.rfind(b"\n") + 1
                if b"EndTime" in block[:cut]:
                    texts += _footer_lines(block[:cut])
                rest = block[cut:]
            texts += _footer_lines(rest)
    except Exception as exc:
        if isinstance(exc, InputFormatError) or is_read_error(exc):
            return None
        raise
    return _footer_offset(texts)


def _footer_in(view: mmap.mmap | bytes) -> int | None:
    """:func:`_footer_offset` of the ``## EndTime`` lines in ``view``."""
    return _footer_offset(_footer_lines(view))


def _footer_lines(view: mmap.mmap | bytes) -> list[str]:
    """The ``## EndTime`` lines in ``view``."""
    texts: list[str] = []
    at = view.find(b"EndTime")
    while at >= 0:
        start = view.rfind(b"\n", 0, at) + 1
        end = view.find(b"\n", at)
        line = bytes(view[start:end if end >= 0 else len(view)])
        if line.startswith(b"##"):
            texts.append(line.decode("utf-8", errors="replace"))
        at = view.find(b"EndTime", at + 7)
    return texts


def _zone_of(lines: pl.DataFrame, source: Source, carry: _Carry
             ) -> tuple[tzinfo | None, int | None]:
    """(zone, fixed UTC offset in seconds) of the reports in ``lines``: a ksar footer's
    EndTime/EndTimeUTC pair wins (the file states its own offset) - the piece's own, else
    the one that ends the file, else the last one before the piece -, then --tz; (None, None)
    means assume UTC."""
    foot = lines.filter(pl.col("line").str.starts_with("## EndTime"))["line"].to_list()
    own = _footer_offset(foot)
    if own is not None:
        carry.offset = own
    elif carry.tail_path is not None:  # (a compressed file: its tail looked up now, once)
        carry.tail_offset, carry.tail_path = _compressed_tail_offset(carry.tail_path), None
    offset = own if own is not None else (carry.tail_offset if carry.tail_offset is not None
                                          else carry.offset)
    if offset is not None:
        source.note(f"local times converted to UTC with the offset {offset / 3600:+.2f} h "
                    "stated by the file's EndTime/EndTimeUTC footer")
        return None, offset
    if source.tz is not None:
        return source.tz, None
    return None, None


#: Bytes read per piece by :func:`iter_parse`. A 102 MB one-report ``sar -u -d -p`` (a day
#: of 1-second samples) peaked at 0.26 GB in 4.9 s with 4 MiB pieces, 0.30 GB in 4.5 s with
#: 6 MiB (side by side, another job busy on the second CPU).
CHUNK_BYTES = 4 << 20


@dataclass
class _Carry(LineCarry):
    """What the pieces of a file tell about the whole (:func:`iter_parse`), besides the lines
    of a piece's last report, read again with the next piece.

    Attributes:
        dev: some piece held a device section.
        rows: some device section held rows.
        summaries: 'Average:' lines skipped so far.
        restarts: LINUX RESTART lines met so far.
        date_alts: banner dates read as month/day/year that a day/month locale would read
            the other way.
        tail_offset: the UTC offset (s) a ksar footer at the end of the file states.
        tail_path: a compressed file whose tail_offset is still to be looked up (when a
            piece without a footer of its own needs it).
        offset: the one the last footer read so far states.
        resume: how the next piece takes up a report cut inside (None: it starts with a
            banner).
        place, host: where :func:`_place_blocks` stood and the banner above, at the end
            of the piece read last; open_header: the header (line number, text) of the
            section its last sample is in (None: not under a header).
        cpu: the CPU rows of the report read so far (a grouped ``sar -f`` prints a
            stretch's CPU section before its device section).
        other_skipped, other_first: malformed lines skipped in sections iogauge does not
            read, and the first of them.
    """

    dev: bool = False
    rows: bool = False
    summaries: int = 0
    restarts: int = 0
    date_alts: list[str] = field(default_factory=list)
    tail_offset: int | None = None
    tail_path: str | None = None
    offset: int | None = None
    resume: _Resume | None = None
    place: _PlaceState | None = None
    host: tuple[int, str] | None = None
    open_header: tuple[int, str] | None = None
    cpu: pl.DataFrame | None = None
    other_skipped: int = 0
    other_first: int | None = None


@dataclass
class _Resume:
    """How the next part of a report cut inside (:func:`iter_parse`) takes up where the part
    before ended: ``place``, where :func:`_place_blocks` stood; ``host``, the banner line and
    host above it; ``header``, the line number and text of the header put before the part
    when the cut is inside a section (the section's header with the time of its last sample
    before the cut: the start of the next interval), else None."""

    place: _PlaceState
    host: tuple[int, str]
    header: tuple[int, str] | None


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time, in file order.

    A piece is cut before its last banner (``cat sar*``: a report a day), else, inside a
    report, before the start of its second-to-last interval: a header after a blank line
    that follows samples (a live ``sar -d 1 N`` prints every section again for every
    interval), or a sample whose time differs from the sample above it (a grouped
    ``sar -f`` prints each activity for the whole stretch). The lines from the cut are read
    again with the next piece. A piece cut inside a report hands the next one what
    :func:`_place_blocks` knew (the dates: midnights, restarts, the DST repeated hour), the
    host, the report's CPU rows so far (a device row's CPU context may be in a part read
    before) and, when the cut is inside a section, a copy of the section's header with the
    time of its last sample before the cut (so the next interval's length is known).

    What is said of the whole file (the counts of 'Average:' and LINUX RESTART lines,
    ambiguous banner dates, a file without device rows) is said once at its end. The UTC
    offset a ksar ``## EndTime``/``EndTimeUTC`` footer states holds for the reports of its
    piece; a piece without one takes the footer that ends the file (looked up first in a
    plain file, and in a compressed one by a second decompression when a piece needs it),
    else the last one read.
    """
    carry = _Carry(tail_offset=_tail_offset(stream),
                   tail_path=_compressed(stream, source.path))
    for lines, last, cut in line_frames(stream, chunk_bytes, carry, source.path, read_lines):
        part = _uncolored(lines, source)
        del lines
        resume = carry.resume
        at: _Cut | None = None
        if not last:
            at = _cut_point(part)
            if at is None:
                carry.lines = part  # no whole interval yet: read on
                continue
            carry.lines = part.filter(pl.col("line_no") >= at.line_no)
            part = part.filter(pl.col("line_no") < at.line_no)
        # (the last sample before an inside cut)
        above = str(part["line"][-1] or "") if part.height else ""
        frame = _parse_piece(part, source, carry, cut_off=cut, resume=resume, final=last)
        del part
        if at is not None:
            if at.banner or carry.place is None or carry.host is None:
                carry.resume, carry.cpu = None, None
            else:
                header = _continued(carry.open_header, above) if at.inside else None
                carry.resume = _Resume(carry.place, carry.host, header)
        if frame is not None and len(frame):
            yield frame
    if carry.date_alts:
        source.note("banner date(s) " + ", ".join(carry.date_alts) + " read as month/day/year "
                    "(C and en_US locales); a day/month locale would read them the other way")
    if carry.summaries:
        source.note(f"{carry.summaries} summary line(s) ('Average:') skipped: they average a "
                    "whole stretch and are not intervals")
    if carry.other_skipped:
        source.note(f"{carry.other_skipped} malformed line(s) in sections iogauge does not "
                    f"read (USB, network, power, interrupts ...) skipped, the first at line "
                    f"{carry.other_first}; the DEV and CPU sections were read in full")
    if carry.restarts:
        source.note(f"{carry.restarts} LINUX RESTART mark(s): the first interval after each "
                    "starts at the header time sar prints after the restart")
    if not carry.dev:
        raise InputFormatError(source.path, None, "no device section ('DEV tps ...' header): "
                               "the sar output has no disk statistics (run sar -d)")
    if not carry.rows:
        raise InputFormatError(source.path, None, "the device section(s) hold no rows")


#: An SGR colour sequence (``S_COLORS=always`` [sysstat]: sar colours values and names).
_SGR_RE = r"\x1b\[[0-9;]*m"


def _uncolored(lines: pl.DataFrame, source: Source) -> pl.DataFrame:
    """``lines`` without the colour sequences of ``S_COLORS=always`` output (sar pads a
    value before colouring it, so the columns line up again once they are removed)."""
    coloured = pl.col("line").str.contains("\x1b[", literal=True)
    if not lines.select(coloured.any()).item():
        return lines
    source.note("colour escape sequences (S_COLORS=always) removed")
    return lines.with_columns(pl.col("line").str.replace_all(_SGR_RE, ""))


@dataclass
class _Cut:
    """Where :func:`iter_parse` cuts a piece: before line ``line_no``, a ``banner`` or not,
    inside a section (``inside``: before a sample whose time differs from the one above)
    or before a section's header."""

    line_no: int
    banner: bool
    inside: bool


#: Lines at the end of a piece looked at first for where to cut it (:func:`_cut_point`).
_CUT_TAIL_LINES = 4096


def _cut_point(lines: pl.DataFrame) -> _Cut | None:
    """Where to cut a piece (see :func:`iter_parse`), or None when it holds no place to.
    Looked for in its last lines first (classifying them costs as much as reading them)."""
    tails = (lines.tail(_CUT_TAIL_LINES), lines) if lines.height > _CUT_TAIL_LINES else (lines,)
    for tail in tails:
        df = _classify(tail).select("line_no", "kind", "tod", "bad_clock")
        k = pl.col("kind")
        after_samples = (pl.when(k != "blank").then(k).forward_fill().shift(1)
                         .is_in(["data", "summary"]))
        clock_ok = ~pl.col("bad_clock").fill_null(True)
        df = df.with_columns(
            banner=(k == "banner"),
            section=(k == "header") & (k.shift(1) == "blank") & after_samples,
            # (a sample whose time is damaged starts no interval, nor does the one after it)
            interval=(k == "data") & (k.shift(1) == "data") & clock_ok & clock_ok.shift(1)
            & (pl.col("tod") != pl.col("tod").shift(1)),
        ).filter(pl.col("line_no") > pl.first("line_no"))
        banners = df.filter(pl.col("banner"))["line_no"]
        starts = df.filter(pl.col("section") | pl.col("interval")).select("line_no", "interval")
        banner = int(banners[-1]) if banners.len() else None
        if starts.height >= 2 and (banner is None or banner < int(starts["line_no"][-2])):
            line_no, inside = starts.row(starts.height - 2)
            return _Cut(int(line_no), banner=False, inside=bool(inside))
        if banner is not None:
            return _Cut(banner, banner=True, inside=False)
    return None


def _continued(header: tuple[int, str] | None, above: str) -> tuple[int, str] | None:
    """The header put before a piece that continues a section: the section's ``header``
    (line number, text) with the time of ``above``, its last sample before the cut (the
    start of the next interval). None for samples without a header (the next piece reads
    them as such, as a read of the whole does)."""
    stamp = re.match(_STAMP, above)
    old = re.match(_STAMP, header[1]) if header is not None else None
    if header is None or stamp is None or old is None:
        return None
    return header[0], stamp.group(1) + header[1][len(old.group(1)):]


def parse(data: bytes, source: Source) -> SampleFrame:
    """Parse sar text into one row per device per interval (see the module docstring). Files
    longer than :data:`CHUNK_BYTES` are read a few reports at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _parse_piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, cut_off: bool,
                 resume: _Resume | None = None, final: bool = True) -> SampleFrame | None:
    """The rows of the reports in ``lines`` (the whole file when it is one piece;
    ``cut_off``: it ends inside its last line; ``resume``: it continues a report cut
    inside, see :func:`iter_parse`; ``final``: it ends the file, whose last interval may
    be partial)."""
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None  # (blank lines only: a file of nothing else is "empty")
    problems: list[tuple[int | None, str]] = []
    if resume is not None and resume.header is not None:
        lines = pl.concat([pl.DataFrame({"line_no": [resume.header[0]],
                                         "line": [resume.header[1]]}, schema=lines.schema),
                           lines])
    df = _classify(lines)

    # A file that does not end with a newline was cut in the middle of its last line.
    cut_line: int | None = None
    if cut_off:
        last = df.filter(pl.col("line").is_not_null()).tail(1)
        if last.height:
            cut_line = int(last["line_no"][0])
            source.note(f"file ends in the middle of line {cut_line} (cut off); that line was "
                        "ignored")

    first_banner = df.filter(pl.col("kind") == "banner")["line_no"].min()
    if resume is not None:
        first_banner = 0  # (the banner is above, in a part read before)
    elif first_banner is None:
        raise InputFormatError(source.path, 1, "no 'Linux <kernel> (<host>) <date>' banner: "
                               "not sysstat sar output")
    # (lines that may lie in a section iogauge does not read: judged once sections are known)
    loose: list[tuple[int | None, str]] = []
    for rec in df.filter((pl.col("kind") == "unknown")
                         | (pl.col("kind").is_in(["header", "data", "restart"])
                            & pl.col("bad_clock"))).select("line_no", "line", "kind").rows():
        if rec[2] == "unknown":
            loose.append((rec[0], f"not a sar line: {rec[1][:60]!r}"))
        else:
            loose.append((rec[0], f"invalid time of day in {rec[1][:30]!r}"))
    early = df.filter((pl.col("line_no") < first_banner)
                      & pl.col("kind").is_in(["header", "data", "restart"]))
    problems += [(n, "sar line before the 'Linux ...' banner") for n in early["line_no"]]

    # Sections: a header opens one; data rows belong to the header that opened their run.
    df = df.with_columns(
        blk=pl.when(pl.col("kind") == "header").then(pl.col("line_no")).otherwise(None)
        .first().over("grp"))
    cut: tuple[int, int | None, int | None] | None = None
    if cut_line is not None:
        row = df.filter(pl.col("line_no") == cut_line)
        cut = (cut_line, row["blk"][0], row["tod"][0])
        df = df.with_columns(
            kind=pl.when(pl.col("line_no") == cut_line).then(pl.lit("cut"))
            .otherwise(pl.col("kind")))
    headers = df.filter(pl.col("kind") == "header").with_columns(tokens=_tokens())
    banners = df.filter(pl.col("kind") == "banner")
    hosts, dates, zone_date_alts = _banner_info(banners, problems)
    banner_lines = banners["line_no"].to_list()
    if resume is not None:
        hosts[resume.host[0]] = resume.host[1]
        banner_lines.insert(0, resume.host[0])
    host_at = _host_lookup(banner_lines, hosts, source)
    carry.host = (banner_lines[-1], hosts.get(banner_lines[-1], "")) if banner_lines else None
    blocks: dict[int, _Block] = {}
    for line_no, tokens, tod, text in headers.select("line_no", "tokens", "tod",
                                                     "line").iter_rows():
        blocks[line_no] = _Block(line_no, _block_kind(tokens), list(tokens), tod,
                                 host_at(line_no), text)
    for alt in zone_date_alts:
        if alt not in carry.date_alts:
            carry.date_alts.append(alt)
    last_sample = df.filter(pl.col("kind") == "data").tail(1)["blk"]
    open_blk = last_sample[0] if last_sample.len() else None
    carry.open_header = (int(open_blk), blocks[int(open_blk)].text) if open_blk in blocks \
        else None
    if any(b.kind == "dev" for b in blocks.values()):
        carry.dev = True

    # Every sample line's section and time (for the midnight wraps below); the lines
    # themselves only of the device and CPU sections, the ones read (a sar -A report has
    # dozens of others: copying all their lines cost ~0.2 GB on a 100 MB file).
    samples = df.filter(pl.col("kind") == "data").select("blk", "line_no", "tod")
    orphans = samples.filter(pl.col("blk").is_null() & (pl.col("line_no") > first_banner))
    # sar prints a new header after every LINUX RESTART (with the time the next rates start
    # from), so a sample without one has no known interval start: refused, never guessed.
    loose += [(n, ("sample line not under a column header (a blank line, 'Average:' or "
                  "LINUX RESTART line ended its section)")) for n in orphans["line_no"]]
    problems += _strict_only(df, blocks, loose, carry)
    samples = samples.filter(pl.col("blk").is_not_null())
    read_blks = [b for b, blk in blocks.items() if blk.kind in ("dev", "cpu")]
    data_rows = df.filter((pl.col("kind") == "data") & pl.col("blk").is_in(read_blks))
    carry.summaries += int((df["kind"] == "summary").sum())
    restarts = df.filter(pl.col("kind") == "restart")
    carry.restarts += restarts.height

    # Midnight wraps and DST folds inside each section, vectorised.
    seq = pl.concat([headers.select("blk", "line_no", "tod"),
                     samples]).sort("line_no")
    step = pl.col("tod").shift(1).over("blk") - pl.col("tod")
    seq = seq.with_columns(
        wrap=(step > _MAX_DST_FOLD_S).fill_null(False),
        fold_step=((step > 0) & (step <= _MAX_DST_FOLD_S)).fill_null(False),
    ).with_columns(day=pl.col("wrap").cum_sum().over("blk"))
    seq = seq.with_columns(fold_seen=pl.col("fold_step").cum_sum().over(["blk", "day"]) > 0)
    agg = seq.group_by("blk").agg(pl.col("day").last(), pl.col("tod").last(),
                                  pl.col("fold_seen").last())
    ends = {b: _BlockEnd(d, t, f) for b, d, t, f in agg.iter_rows()}

    events = pl.concat([
        banners.select("line_no", pl.lit("banner").alias("kind"), "tod"),
        restarts.select("line_no", pl.lit("restart").alias("kind"), "tod"),
        headers.select("line_no", pl.lit("header").alias("kind"), "tod"),
    ]).sort("line_no").with_columns(
        pl.col("line_no").replace_strict(dates, default=None, return_dtype=pl.Date())
        .alias("date"))
    carry.place = _place_blocks(
        events, blocks, ends, problems, resume.place if resume is not None else None,
        resume.header[0] if resume is not None and resume.header is not None else None)

    block_info = pl.DataFrame(
        {"blk": list(blocks), "day0": [b.day0_local for b in blocks.values()],
         "start_fold": [b.start_fold for b in blocks.values()],
         "host": [b.host for b in blocks.values()]},
        schema={"blk": pl.Int64(), "day0": pl.Int64(), "start_fold": pl.Boolean(),
                "host": pl.String()})
    timed = seq.join(block_info, on="blk", how="left").with_columns(
        local=pl.col("day0") + pl.col("day") * _DAY_S + pl.col("tod"),
        fold=pl.col("fold_seen") | (pl.col("start_fold") & (pl.col("day") == 0)))

    zone, offset = _zone_of(lines, source, carry)
    if zone is None and offset is None:
        zone_note(source, "sar times")
    if offset is not None or zone is None:
        utc_us = (timed["local"] - (offset or 0)) * 1_000_000
    else:
        utc_us = local_to_utc_us(timed["local"], timed["fold"], zone)
    timed = timed.with_columns(utc_us.alias("utc_us"))

    dev = _device_rows(timed, data_rows, blocks, problems, source)
    cpu = _cpu_rows(timed, data_rows, blocks, problems)
    if resume is not None and carry.cpu is not None and carry.cpu.height:
        cpu = pl.concat([carry.cpu, cpu], how="diagonal_relaxed").unique(
            subset=["host", "utc_us"], keep="first", maintain_order=True)
    carry.cpu = cpu
    report(source, problems)
    if dev.height == 0:
        return None
    carry.rows = True

    if final:
        dev = _drop_cut_interval(dev, cut, df, source)
    return device_frame(dev.drop("blk"), cpu, name=NAME, order="line_no")


def device_frame(dev: pl.DataFrame, cpu: pl.DataFrame, *, name: str, order: str
                 ) -> SampleFrame:
    """SampleFrame rows of device rows (``host``, ``utc_us``, ``device``, the measures and
    the ``order`` column they are sorted by) with their CPU context (``cpu``: ``host``,
    ``utc_us`` and CPU columns; may be empty) and device identity; ``name`` is the
    ``source`` column. (Shared with the sadf readers.)"""
    if cpu.height:
        # (on the host too: 'cat' of two hosts' reports of the same day has the same times)
        dev = dev.join(cpu, on=["host", "utc_us"], how="left")
    ident = device_identity(dev["device"].unique().to_list())
    out = dev.join(ident, on="device", how="left").with_columns(
        source=pl.lit(name),
        ts=pl.from_epoch(pl.col("utc_us"), time_unit="us").dt.replace_time_zone("UTC"),
    ).sort(order).drop("utc_us", order)
    return SampleFrame(out)


def _banner_info(banners: pl.DataFrame, problems: list[tuple[int | None, str]]
                 ) -> tuple[dict[int, str], dict[int, date | None], list[str]]:
    hosts: dict[int, str] = {}
    dates: dict[int, date | None] = {}
    ambiguous: list[str] = []
    for line_no, text in banners.select("line_no", "line").iter_rows():
        m = _BANNER_RE.match(text)
        if m is None:  # pragma: no cover - the classifier used a looser pattern
            problems.append((line_no, "unreadable banner"))
            continue
        hosts[line_no] = m.group(1).strip()
        after = re.split(r"\s+_[^\s_][^\s]*_(?:\s|$)|\(\d+\s+CPU\)", m.group(2))[0]
        parsed = parse_banner_date(after)
        dates[line_no] = parsed[0] if parsed else None
        if parsed and parsed[1] is not None:
            ambiguous.append(after.strip())
    return hosts, dates, ambiguous


def _host_lookup(banner_lines: list[int], hosts: Mapping[int, str],
                 source: Source) -> Callable[[int], str]:
    """Host of the banner above a line; else --host, else the file name's stem."""
    fallback = source.host or file_stem(source.path)

    def host_at(line_no: int) -> str:
        i = bisect.bisect_right(banner_lines, line_no) - 1
        if i < 0:
            return fallback
        return hosts.get(banner_lines[i]) or fallback
    return host_at


def file_stem(path: str) -> str:
    """A file's name without compression and text suffixes (the host name of last resort)."""
    name = Path(path).name
    for suffix in (".gz", ".xz", ".bz2", ".zst", ".txt", ".log", ".out", ".json", ".csv"):
        name = name.removesuffix(suffix)
    return name or path


def _layout_groups(blocks: Mapping[int, _Block], kind: str
                   ) -> dict[tuple[str, ...], tuple[list[int], str]]:
    """Sections of one kind by column layout: layout -> (header lines, first header text)."""
    groups: dict[tuple[str, ...], tuple[list[int], str]] = {}
    for b in blocks.values():
        if b.kind == kind:
            groups.setdefault(tuple(b.tokens), ([], b.text))[0].append(b.line_no)
    return groups


def _with_intervals(rows: pl.DataFrame, timed: pl.DataFrame,
                    problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Attach ``utc_us``, ``host`` and ``interval_s``: the time since the previous sample of
    the same section (the header's time for its first rows)."""
    t = timed.select("line_no", "utc_us", "host")
    rows = rows.join(t, on="line_no", how="left")
    hdr = timed.join(rows.select(pl.col("blk").unique()), on="blk", how="semi") \
        .filter(pl.col("line_no") == pl.col("blk")).select("blk", pl.col("utc_us")
                                                           .alias("hdr_us"))
    rows = rows.sort("line_no").join(hdr, on="blk", how="left")
    changed = pl.col("utc_us") != pl.col("utc_us").shift(1).over("blk")
    prev = (pl.when(changed).then(pl.col("utc_us").shift(1).over("blk")).otherwise(None)
            .forward_fill().over("blk"))
    rows = rows.with_columns(prev_us=prev).with_columns(
        prev_us=pl.coalesce("prev_us", "hdr_us"))
    # 'sar ... 0' (since boot) prints a section's header and rows at one time: no interval
    # of its own, so a nominal one, as iostat's since-boot report (sar.c, count 0) [sysstat]
    boot = (pl.col("utc_us") == pl.col("hdr_us")).all().over("blk")
    rows = rows.with_columns(since_boot=boot).with_columns(
        interval_s=pl.when(pl.col("since_boot")).then(pl.lit(UNKNOWN_INTERVAL_S))
        .otherwise((pl.col("utc_us") - pl.col("prev_us")).cast(pl.Float64()) / 1e6))
    bad = rows.filter(pl.col("interval_s") <= 0)
    for line_no, iv in bad.select("line_no", "interval_s").iter_rows():
        hint = (" - a daylight-saving change? give the zone with --tz"
                if -_MAX_DST_FOLD_S <= iv < 0 else "")
        problems.append((line_no, (f"sample time is not after the previous sample of its "
                                  f"section ({iv:+g} s){hint}")))
    return rows.filter(pl.col("interval_s") > 0).drop("prev_us", "hdr_us")


def _fields(rows: pl.DataFrame, layout: Sequence[str], header_text: str,
            problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Split rows into fields ``f0`` .. ``fN-1``, N = the header's column count.

    sar prints every column right-aligned at the width of its header name (pr_stats.c:
    ``%9.2f`` after the ``%-11s`` time; under --pretty the name comes last, left-aligned),
    so a row as long as its header is cut at the header's column ends - far cheaper than
    splitting. A row that does not fit (a value wider than its column, a long device name)
    is split on whitespace instead; a row whose field count differs from the header's is
    reported and dropped."""
    n = len(layout)
    all_ends = [m.end() for m in re.finditer(r"\S+", header_text)]
    ends = all_ends[-n:]
    line = pl.col("line")
    name_last = layout[-1] == "DEV" and n >= 2
    # Column i spans [ends[i-1], ends[i]) (column 0 starts where the time stamp ends); its
    # first character is the separating blank.
    bounds = [all_ends[-n - 1], *ends[:-1]]
    slot_ok = [line.str.slice(b, 1) == " " for b in bounds]
    if name_last:
        fits = ((line.str.len_chars() > ends[-2] + 1)
                & (line.str.slice(ends[-2] + 1, 1) != " "))
        widths = [e - b for b, e in zip(bounds[:-1], ends[:-1], strict=True)]
    else:
        fits = line.str.len_chars() == len(header_text)
        widths = [e - b for b, e in zip(bounds, ends, strict=True)]
    rows = rows.with_columns(_fast=pl.all_horizontal([fits, *slot_ok]))
    fast = rows.filter(pl.col("_fast"))
    cols = [line.str.slice(b, w).str.strip_chars().alias(f"f{i}")
            for i, (b, w) in enumerate(zip(bounds, widths, strict=False))]
    if name_last:
        cols.append(line.str.slice(ends[-2] + 1).str.strip_chars().alias(f"f{n - 1}"))
    fast = fast.with_columns(cols)
    slow = rows.filter(~pl.col("_fast")).with_columns(_tok=_tokens())
    slow = slow.with_columns(_n=pl.col("_tok").list.len())
    bad_n = slow.filter(pl.col("_n") != n)
    for line_no, k, blk in bad_n.select("line_no", "_n", "blk").iter_rows():
        problems.append((line_no, f"{k} fields where the header at line {blk} has {n}"))
    slow = slow.filter(pl.col("_n") == n).with_columns(
        [pl.col("_tok").list.get(i).alias(f"f{i}") for i in range(n)]).drop("_tok", "_n")
    return pl.concat([fast, slow], how="vertical").sort("line_no").drop("_fast")


def _typed_values(rows: pl.DataFrame, columns: Mapping[str, int],
                  problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """Cast the fields at ``columns`` (name -> index) to floats; report non-numbers.

    A locale decimal comma (de_DE: ``0,35``) is read as a point; sar prints no thousands
    separators, so a comma can only be the decimal mark."""
    if rows.height == 0:
        return rows.with_columns([pl.lit(None, pl.Float64()).alias(f"v:{n}") for n in columns])
    comma = decimal_comma(rows["line"])
    human = bool(rows["line"].head(50).str.contains(_HUMAN_VALUE_RE).any())
    rows = rows.with_columns([_value(pl.col(f"f{i}"), name, comma=comma, human=human)
                              .alias(f"v:{name}") for name, i in columns.items()])
    bad_any = pl.any_horizontal([pl.col(f"v:{n}").is_null() for n in columns])
    bad = rows.filter(bad_any)
    for row in bad.select("line_no", *[f"f{i}" for i in columns.values()],
                          *[f"v:{n}" for n in columns]).iter_rows():
        line_no, texts, values = row[0], row[1:1 + len(columns)], row[1 + len(columns):]
        name, text = next((nm, t) for nm, t, v in zip(columns, texts, values, strict=True)
                          if v is None)
        problems.append((line_no, f"column {name!r} is not a number: {text!r}"))
    return rows.filter(~bad_any)


def _value(text: pl.Expr, name: str, *, comma: bool, human: bool) -> pl.Expr:
    """A printed value of column ``name`` as a float (null if it is not a number); ``human``:
    the section was printed with --human (unit letters on kB amounts, '%' on percentages)."""
    if not human:
        return to_float(text, comma=comma)
    value = human_value(text.str.strip_chars(),
                        ColumnSpec(None, size=name in HUMAN_SIZE_COLUMNS))
    return pl.when(value.is_finite()).then(value)


def _device_rows(timed: pl.DataFrame, data_rows: pl.DataFrame, blocks: Mapping[int, _Block],
                 problems: list[tuple[int | None, str]], source: Source) -> pl.DataFrame:
    frames: list[pl.DataFrame] = []
    for layout, (blk_ids, header_text) in _layout_groups(blocks, "dev").items():
        rows = _fields(data_rows.filter(pl.col("blk").is_in(blk_ids)), layout, header_text,
                       problems)
        dev_idx = layout.index("DEV")
        known = {name: i for i, name in enumerate(layout) if name in DEV_COLUMNS}
        unknown = [name for name in layout if name not in DEV_COLUMNS and name != "DEV"]
        if unknown:
            source.note(f"device column(s) {', '.join(unknown)} not imported (no SampleFrame "
                        "column)")
        rows = _typed_values(rows, known, problems)
        rows = _with_intervals(rows, timed, problems)
        if rows["since_boot"].any():
            source.note("since-boot statistics ('sar ... 0': header and rows at one time): "
                        f"rows flagged since_boot, with a nominal interval_s of "
                        f"{UNKNOWN_INTERVAL_S:g} s")
        exprs = [pl.col("line_no"), pl.col("blk"), pl.col("utc_us"), pl.col("host"),
                 pl.col("interval_s"), pl.col("since_boot"),
                 pl.col(f"f{dev_idx}").alias("device")]
        for name in known:
            target, factor = DEV_COLUMNS[name]
            exprs.append((pl.col(f"v:{name}") * factor).alias(target))
        frames.append(rows.select(exprs))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal")


def _cpu_rows(timed: pl.DataFrame, data_rows: pl.DataFrame, blocks: Mapping[int, _Block],
              problems: list[tuple[int | None, str]]) -> pl.DataFrame:
    """The 'all' rows of CPU sections, one per host and sample time (the first section
    wins)."""
    frames: list[pl.DataFrame] = []
    for layout, (blk_ids, header_text) in _layout_groups(blocks, "cpu").items():
        cpu_idx = layout.index("CPU")
        # Only the 'all' rows are wanted: select them before splitting every per-CPU row.
        rows = data_rows.filter(pl.col("blk").is_in(blk_ids)
                                & pl.col("line").str.contains(r"\sall(?:\s|$)"))
        rows = _fields(rows, layout, header_text, problems)
        rows = rows.filter(pl.col(f"f{cpu_idx}") == "all")
        wanted = {n: i for i, n in enumerate(layout) if n in CPU_COLUMNS or n in
                  CPU_SYSTEM_PARTS}
        rows = _typed_values(rows, wanted, problems)
        rows = rows.join(timed.select("line_no", "utc_us", "host"), on="line_no", how="left")
        exprs = [pl.col("host"), pl.col("utc_us")]
        exprs += [pl.col(f"v:{n}").alias(CPU_COLUMNS[n]) for n in wanted if n in CPU_COLUMNS]
        if "%sys" in wanted:
            parts = [pl.col(f"v:{p}") for p in CPU_SYSTEM_PARTS if p in wanted]
            exprs.append(pl.sum_horizontal(parts).round(2).alias("cpu_system_pct"))
        frames.append(rows.select(exprs))
    if not frames:
        return pl.DataFrame(schema={"host": pl.String(), "utc_us": pl.Int64()})
    cpu = pl.concat(frames, how="diagonal")
    return cpu.unique(subset=["host", "utc_us"], keep="first", maintain_order=True)


def _drop_cut_interval(dev: pl.DataFrame, cut: tuple[int, int | None, int | None] | None,
                       df: pl.DataFrame, source: Source) -> pl.DataFrame:
    """Keep whole intervals only: when the file was cut off, drop its last, partial interval.

    ``cut`` is (line, section, time of day) of a last line that has no newline. That line is
    never parsed; if it lies in the last device section and carries the time of that
    section's last sample (or its time itself is cut), that sample is incomplete. Without a
    cut line, a last device section that ends the file with no 'Average:' lines and whose
    last sample lists fewer devices than the one before is taken as cut off too.
    """
    last_blk = int(dev.sort("line_no")["blk"][-1])
    in_last = dev.filter(pl.col("blk") == last_blk)
    last_us = in_last["utc_us"][-1]
    last_tod_rows = df.filter(pl.col("line_no") == in_last["line_no"].max())["tod"]
    last_tod = last_tod_rows[0] if last_tod_rows.len() else None
    after = df.filter(pl.col("line_no") > in_last["line_no"].max())
    counts = in_last.group_by("utc_us", maintain_order=True).len()
    partial = False
    if cut is not None:
        _cut_line, cut_blk, cut_tod = cut
        partial = cut_blk == last_blk and (cut_tod == last_tod or (
            # the cut line's own time is lost: whole only if as long as the one before
            cut_tod is None and (counts.height < 2 or counts["len"][-1] < counts["len"][-2])))
    else:
        open_end = not bool(after["kind"].is_in(["summary", "header"]).any())
        partial = open_end and counts.height >= 2 and counts["len"][-1] < counts["len"][-2]
    if partial:
        n = int(counts["len"][-1])
        source.note(f"file cut off inside its last interval: the {n} device row(s) of that "
                    "partial interval were dropped (whole intervals only)")
        return dev.filter(~((pl.col("blk") == last_blk) & (pl.col("utc_us") == last_us)))
    return dev
