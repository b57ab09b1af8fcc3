"""What the sar text and sadf importers share: the sar columns and their SampleFrame
columns, lines as a frame, numbers, device identity, problems and local times."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta, tzinfo

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of

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
