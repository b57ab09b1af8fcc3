"""The System V ``sar`` text of Solaris/illumos, AIX and HP-UX: the ``sar -d`` device section,
with the ``sar -u`` CPU figures of the same intervals.

These are the reports ``sar -A`` / ``sar -d`` / ``sar -u`` print (live or from a daily
``/var/adm/sa/saDD`` file)::

    SunOS ala52s01 5.11 11.3 sun4v    05/26/2017          <- OS, host, release ... date

    08:00:00    %usr    %sys    %wio   %idle              <- a section header: its time is
    08:20:00       0       0       0      99                 the start of the first interval
    ...
    Average        0       2       0      98              <- summaries: skipped

    08:00:00   device        %busy   avque   r+w/s  blks/s  avwait  avserv
    08:20:00   iscsi0            0     0.0       0       0     0.0     0.0
               mpt_sas2          1     0.0       6     212     0.0     3.1   <- only the first
    ...                                                         device of an interval has
    Average    iscsi0            0     0.0       0       0     0.0     0.0      the time

AIX prints ``Kbs/s`` instead of ``blks/s`` (AIX 5.3 and later) and ``System configuration:``
lines between sections; HP-UX prints only the devices that were active, a bare time when none
was, and two decimals. Linux sysstat's ``sar`` (header ``Linux ...``) is another format.

Column mapping (every value as printed, units converted exactly):

=========  ==================  ==============================================================
column     SampleFrame         source of the meaning
=========  ==================  ==============================================================
%busy      util_pct            all three: share of time the device was busy.
avque      aqu_sz              Solaris: illumos ``sar.c`` ``prt_d_opt`` prints
           (Solaris, HP-UX)    ``(wlentime + rlentime) / elapsed``, the mean number of requests
                               waiting plus in service over the whole interval (= ``iostat``
                               wait + actv). Oracle's Solaris 10 guide (819-2380, "sar -d")
                               says "Average number of requests during the time the device was
                               busy"; the Solaris 2.6 guide (802-5750) even calls it "the sum
                               of the average wait time plus the average service time" - the
                               source code is what runs. HP-UX sar(1M): "Average number of
                               requests outstanding for the device".
avque      queue_wait_len      AIX 5.3+ (``Kbs/s`` layout): IBM's sar command reference
           (AIX, Kbs/s)        "Average number of requests waiting to be sent to disk" (the
                               driver's wait queue, iostat ``avgwqsz``). The AIX 7.2 sample
                               shows why it is not aqu-sz: 0.0 at 79 %busy and 410 r+w/s.
avque      active_len          older AIX (``blks/s`` layout): IBM "Assessing disk performance
           (AIX, blks/s)       with the sar command": "requests outstanding from the adapter to
                               the device ... There may be additional I/O operations in the
                               queue of the device driver".
r+w/s      iops                transfers per second (reads + writes).
r/s, w/s   r_iops, w_iops      HP-UX ``sar -d -R``.
blks/s     kBps = blks/s / 2   512-byte blocks per second (Solaris ``BLKS(x) = x >> 9``;
                               HP-UX sar(1M) "in 512-byte units").
Kbs/s      kBps                AIX: kilobytes per second.
avwait     queue_wait_ms       mean time a request waited in the queue before service (sar.c:
                               ``wlentime / elapsed / tps * 1000``, the same as iostat wsvc_t).
avserv     svctm_ms            mean service time once sent to the device (sar.c: ``rlentime /
                               elapsed / tps * 1000`` = iostat asvc_t).
--         await_ms            avwait + avserv: the whole time of a request, as iostat's
                               ``svc_t = wserv + rserv`` (illumos iostat.c ``show_disk``).
%usr ...   cpu_user_pct, ...   ``sar -u``: %usr, %sys, %wio, %idle of the same time stamp.
=========  ==================  ==============================================================

``%wio`` of Solaris 10 (SunOS 5.10) and later is not measured - Oracle's mpstat(1M)/iostat(1M)
say the I/O wait time "is no longer calculated as a percentage of CPU time, and this statistic
will always return zero" - so ``cpu_iowait_pct`` is left null there (a zero would tell the
analysis "the CPUs never waited for the disk").

Time stamps are the host's local time: the date comes from the header line (or from
``Source.start`` for a bare ``sar -d`` without one), a time earlier than the previous one in
the same section is the next day, and each row's interval starts at the previous time stamp of
its section (the section header's time for the first). ``unix restarts`` lines mark reboots.
A ``sar -d`` section that reaches the end of the file without its ``Average`` block was cut off:
its last interval may lack devices, so it is dropped (whole intervals only) and a note says so.

A file of several reports (``cat sar*``) is read a few MiB at a time, cut before report header
lines (:func:`iter_parse`): 100 MB of daily AIX, HP-UX or Solaris reports import to Parquet at
0.24-0.28 GB peak, where the whole-file read peaked at 0.67-0.76 GB.

Solaris truncates device names to 8 characters (``%-8.8s`` in sar.c): ``sd10.t6.`` is an I/O
path of ``sd10``; ``sd4,a`` is a partition of ``sd4``.

The helpers :func:`read_lines`, :func:`localize` and :func:`numbers` are shared with the
Solaris and AIX ``iostat`` importers.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers._lines import (
    LineCarry,
    host_fallback,
    localize,
    max_int,
    numbers,
    refuse_rows,
    report_frames,
    start_local,
)
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.model.sampleframe import SampleFrame

NAME = "unix-sar"
DESCRIPTION = ("sar text of Solaris/illumos, AIX and HP-UX: the sar -d device section, with the "
               "sar -u CPU figures")
EXPECTS = ("a 'SunOS|AIX|HP-UX <host> ... MM/DD/YY' header line followed by sar sections "
           "('HH:MM:SS  %usr %sys ...'), or a bare 'HH:MM:SS device %busy avque r+w/s "
           "blks/s|Kbs/s avwait avserv' header")

# ---------------------------------------------------------------------------------------------
# sniffing
# ---------------------------------------------------------------------------------------------
_OS_RE = (r"^\s*(SunOS|AIX|HP-UX)\s+(\S+)\s+(.*?)\s*(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})\s*$")
_SECTION_HEADER_RE = re.compile(r"^\d{2}:\d{2}:\d{2}\s+\S*[%/]\S*(\s+\S+)*\s*$", re.MULTILINE)
_BARE_DISK_HEADER_RE = re.compile(
    r"^\d{2}:\d{2}:\d{2}\s+device\s+%busy\s+avque\s+(r\+w/s\s+)?(blks/s|Kbs/s)\s+avwait\s+"
    r"avserv\s*$", re.MULTILINE)
_TIME_RE = r"^\d{1,2}:\d{2}:\d{2}$"


def sniff(head: str) -> bool:
    """A ``SunOS|AIX|HP-UX`` header line among the first lines plus a sar section header, or
    a bare Solaris/AIX/HP-UX ``sar -d`` header (Linux sysstat says ``DEV tps ...``)."""
    first = [ln for ln in head.splitlines()[:12] if ln.strip()][:3]
    has_os = any(re.match(_OS_RE, ln) for ln in first)
    if has_os and _SECTION_HEADER_RE.search(head):
        return True
    return bool(_BARE_DISK_HEADER_RE.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------
#: sar -u columns -> SampleFrame host columns.
_CPU_MAP: Mapping[str, str] = {"%usr": "cpu_user_pct", "%sys": "cpu_system_pct",
                               "%wio": "cpu_iowait_pct", "%idle": "cpu_idle_pct"}


def _year(text: str) -> int:
    y = int(text)
    if len(text) == 4:
        return y
    # POSIX strptime %y: 69-99 -> 19xx, 00-68 -> 20xx.
    return 1900 + y if y >= 69 else 2000 + y


def _device_kind(os_name: str | None) -> tuple[pl.Expr, pl.Expr]:
    """(device_kind, parent) expressions for the ``device`` column of ``os_name``."""
    dev = pl.col("device")
    if os_name == "AIX":
        kind = (pl.when(dev.str.contains(r"^(hdisk|hdiskpower|vpath|dlmfdrv)\d+$")).then(
            pl.lit("disk")).otherwise(pl.lit("other")))
        return kind, pl.lit(None, dtype=pl.String())
    if os_name == "HP-UX":
        kind = (pl.when(dev.str.contains(r"^(disk\d+|c\d+t\d+d\d+)$")).then(pl.lit("disk"))
                .when(dev.str.contains(r"^disk\d+_p\d+$")).then(pl.lit("partition"))
                .otherwise(pl.lit("other")))
        parent = (pl.when(kind == "partition").then(dev.str.extract(r"^(disk\d+)_p\d+$"))
                  .otherwise(None))
        return kind, parent
    # Solaris (and a bare sar -d): kstat instance names. sd/ssd/dad/cmdk/vdc/blkdev are disk
    # drivers, "sd4,a" a slice of sd4, mdN an SVM metadevice, nfsN a mount, "sd4.t2.m" an I/O
    # path of sd4 (lun.targetport.controller, truncated), mpt_sas/fp/iscsi/scsi_vhci... HBAs.
    disk_re = r"^(sd|ssd|dad|cmdk|vdc|blkdev|xdf|nvme|zvblk)\d+"
    kind = (pl.when(dev.str.contains(disk_re + "$")).then(pl.lit("disk"))
            .when(dev.str.contains(disk_re + r",[a-z]+$")).then(pl.lit("partition"))
            .when(dev.str.contains(r"^md\d+$")).then(pl.lit("md"))
            .when(dev.str.contains(
                r"^(mpt_sas|mpt|mr_sas|fp|fcp|iscsi|scsi_vhc|ahci|nv_sata|si3124|pmcs|glm|isp|"
                r"qlc|emlxs|lsimega|aac|ata)\d*$")).then(pl.lit("port"))
            .otherwise(pl.lit("other")))
    parent = (pl.when(kind == "partition").then(dev.str.extract(r"^([^,]+),"))
              .when(dev.str.contains(disk_re + r"\.")).then(dev.str.extract(r"^([^.]+)\."))
              .otherwise(None))
    return kind, parent


def _disk_measures(cols: list[str], os_name: str | None) -> dict[str, pl.Expr]:
    """SampleFrame measures from the value columns ``cols`` (header order after ``device``);
    ``v{i}`` holds the i-th value. See the module docstring for the sources."""
    idx = {c: i for i, c in enumerate(cols)}

    def v(name: str) -> pl.Expr:
        return pl.col(f"v{idx[name]}")

    out: dict[str, pl.Expr] = {}
    if "%busy" in idx:
        out["util_pct"] = v("%busy")
    if "avque" in idx:
        if os_name == "AIX" and "Kbs/s" in idx:
            out["queue_wait_len"] = v("avque")
        elif os_name == "AIX":
            out["active_len"] = v("avque")
        else:
            out["aqu_sz"] = v("avque")
    if "r+w/s" in idx:
        out["iops"] = v("r+w/s")
    if "r/s" in idx:
        out["r_iops"] = v("r/s")
    if "w/s" in idx:
        out["w_iops"] = v("w/s")
    if "blks/s" in idx:
        out["kBps"] = v("blks/s") / 2.0  # 512-byte blocks -> kB (1 kB = 1024 B)
    elif "Kbs/s" in idx:
        out["kBps"] = v("Kbs/s")
    if "avwait" in idx:
        out["queue_wait_ms"] = v("avwait")
    if "avserv" in idx:
        out["svctm_ms"] = v("avserv")
    if "avwait" in idx and "avserv" in idx:
        # await = wait + service: iostat's svc_t = wserv + rserv (illumos iostat.c show_disk),
        # and sar.c's avwait/avserv are the same two quotients.
        out["await_ms"] = v("avwait") + v("avserv")
    return out


#: Lines of ``sar -d``/``sar -u`` sections tokenised at a time. :func:`parse` splits the file
#: into batches of whole sections of about this many lines (a longer section is one batch) and
#: handles all the sections of one layout in a batch together, so the token lists of the whole
#: file are never held at once and a file of thousands of short sections (a month of daily
#: ``sar -A`` reports in one file) costs a few polars calls per batch, not per section.
BATCH_LINES = 200_000

#: A whitespace-led token that is a plain decimal number (:data:`._lines._NUMBER_RE` as one token):
#: on a line led by a time stamp, a section header has none, a data row has some.
_NUMBER_FIELD_RE = r"\s[+]?(?:\d+\.?\d*|\.\d+)(?:\s|$)"


def _timeline(stamps: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """Per section and time stamp (``tl`` 0 = the section header): naive local ``ts_local``
    with day rollover, and ``interval_s`` since the previous stamp of the section.

    ``stamps`` holds the time-led rows (``section``, ``tl``, ``t0`` HH:MM:SS) of the sections
    in ``meta`` (``section``, ``hdr_time``, ``base`` date)."""
    allst = pl.concat([
        meta.select("section", pl.lit(0, dtype=pl.UInt32()).alias("tl"),
                    pl.col("hdr_time").alias("t0")),
        stamps.select("section", pl.col("tl").cast(pl.UInt32()), "t0"),
    ]).sort("section", "tl")
    parts = pl.col("t0").str.split(":")
    secs = (parts.list.get(0).cast(pl.Int64) * 3600 + parts.list.get(1).cast(pl.Int64) * 60
            + parts.list.get(2).cast(pl.Int64))
    rollover = (pl.col("sod").diff() < 0).fill_null(False).cum_sum().over("section")
    return (allst.join(meta.select("section", "base"), on="section", how="left",
                       maintain_order="left")
            .with_columns(secs.alias("sod"))
            .with_columns(rollover.alias("day"))
            .with_columns((pl.col("base").cast(pl.Datetime("us"))
                           + pl.duration(seconds=pl.col("sod") + pl.col("day") * 86400))
                          .alias("ts_local"))
            .with_columns((pl.col("ts_local").diff().dt.total_microseconds() / 1e6)
                          .over("section").alias("interval_s"))
            .select("section", "tl", "ts_local", "interval_s"))


_Layout = tuple[str, tuple[str, ...], str | None]
#: A section to read: first row, end row, section id, header time, base date, layout (kind
#: "disk" or "cpu", header tokens, OS name).
_Wanted = tuple[int, int, int, str, date, _Layout]


def _section_starts(df: pl.DataFrame) -> list[int]:
    """0-based row of each section's first line (its header or OS line), by section id - 1
    (``df`` holds consecutive lines: a piece of the file, its first line at row 0)."""
    first = int(df["line_no"][0]) if df.height else 1
    return [int(r) - first for r in
            df.filter(pl.col("is_header") | pl.col("is_os"))["line_no"].to_list()]


#: Bytes read per piece by :func:`iter_parse`.
CHUNK_BYTES = 4 << 20


@dataclass
class _Carry(LineCarry):
    """What one piece of a file hands on to the next (:func:`iter_parse`), besides the lines
    of its last report (from its last ``SunOS|AIX|HP-UX`` header line), read again with it.

    Attributes:
        disks: some piece held a ``sar -d`` section.
        busy: some piece held a ``%busy`` header (a ``sar -d`` of no device is no error).
    """

    disks: bool = False
    busy: bool = False


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time, in file order.

    A file of several reports (a day each, every one led by its ``SunOS|AIX|HP-UX <host> ...
    MM/DD/YY`` header line: ``cat sar*``) is cut before header lines; a piece's last report
    is held back and read again with the next piece, so every report is read whole. A
    report carries its own date, host and sections, so nothing else spans pieces; rows
    come sorted by time within each piece (the whole file's are sorted as one when it is a
    piece). A file without header lines is one piece.
    """
    carry = _Carry()
    for lines, last, cut in report_frames(stream, chunk_bytes, carry, source.path, _OS_RE):
        frame = _parse_piece(lines, source, carry, final=last, cut=cut)
        del lines
        if frame is not None and len(frame):
            yield frame
    if not carry.disks and not carry.busy:
        raise InputFormatError(source.path, None, "no sar -d section ('HH:MM:SS device %busy "
                               "avque r+w/s blks/s avwait avserv') in this sar output")


def parse(data: bytes, source: Source) -> SampleFrame:
    """Rows of every ``sar -d`` interval (``Average`` blocks skipped), with the ``sar -u`` CPU
    columns of the same time stamp; see the module docstring for the mapping. Files longer
    than :data:`CHUNK_BYTES` are read a report at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _parse_piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool,
                 cut: bool) -> SampleFrame | None:
    """The rows of the reports in ``lines`` (the whole file when it is one piece); ``final``:
    the file ends with them (its last section may be cut off), ``cut``: inside a line."""
    whole = not cut
    if lines.height == 0 or lines["line"].null_count() == lines.height:
        return None  # (blank lines only: a file of nothing else is "empty")
    df = _sectioned(lines, carry, whole=whole)
    del lines  # df shares its line column: the lines go with df, before the rows are finished
    os_info = _os_blocks(df, source)
    # (a section that reaches the end of the file without its Average block was cut off;
    # the end of a piece that is not the last is a report's end)
    last_section = max_int(df["section"]) if final else -1
    wanted, any_busy = _wanted_sections(df, os_info, source)
    disk_frames, cpu_frames, bad = _read_sections(df, wanted, last_section, whole, source)
    del df  # the lines: what follows holds only the rows read from them
    if bad:
        refuse_rows(source, pl.concat(bad))
    carry.busy = carry.busy or any_busy
    if not disk_frames:
        return None
    carry.disks = True
    # Each batch's rows come sorted by time and device (see _finish); the frames are let go
    # as they are copied, so the peak holds the rows about twice, not three or four times.
    disks = pl.concat(disk_frames, how="diagonal_relaxed")
    disk_frames.clear()
    if cpu_frames:
        cpu = (pl.concat(cpu_frames, how="diagonal_relaxed").sort("line_no")
               .unique(subset=["os_block", "ts_local"], keep="first", maintain_order=True)
               .drop("line_no"))
        # the CPU figures of each row's time stamp, joined on the two keys alone and added
        # beside the row's columns (a join of the whole frame would copy every column)
        keys = disks.select("os_block", "ts_local")
        figures = keys.join(cpu, on=["os_block", "ts_local"], how="left",
                            maintain_order="left").drop("os_block", "ts_local")
        disks = disks.with_columns(figures.get_columns())
    # Solaris 10+ no longer measures %wio (always 0): not measured -> null.
    sol10 = [b for b, i in os_info.items() if i["os"] == "SunOS" and _release(i) >= (5, 10)]
    if sol10 and "cpu_iowait_pct" in disks.columns:
        disks = disks.with_columns(
            pl.when(pl.col("os_block").is_in(sol10)).then(None)
            .otherwise(pl.col("cpu_iowait_pct")).alias("cpu_iowait_pct"))
        source.note("Solaris 10 and later do not measure %wio (sar prints 0): cpu_iowait_pct "
                    "left null")
    return _finish(disks, source, os_info)


def _sectioned(lines: pl.DataFrame, carry: _Carry, *, whole: bool) -> pl.DataFrame:
    """The lines with their kind (time-led, restart, OS header, section header), the OS
    block and the section each is in."""
    line = pl.col("line")
    t0 = line.str.extract(r"^\s*(\S+)", 1)
    # without a final line break the last line may be cut ("08:40:00   i"): never a header
    partial = (pl.col("line_no") == carry.lines_read) & pl.lit(not whole)
    is_time0 = t0.str.contains(_TIME_RE).fill_null(False)
    restart = is_time0 & line.str.contains(r"\sunix\s+restarts").fill_null(False)
    # Led by a time stamp, with a second token and no number after it: "08:00:00 device
    # %busy ...". (The time itself is never a number token, so any number token follows it.)
    two_tokens = line.str.contains(r"^\s*\S+\s+\S").fill_null(False)
    number_after = line.str.contains(_NUMBER_FIELD_RE).fill_null(False)
    return lines.with_columns(
        is_time0.alias("is_time0"),
        restart.alias("restart"),
        line.str.contains(_OS_RE).fill_null(False).alias("is_os"),
        (is_time0 & two_tokens & ~restart & ~number_after & ~partial).alias("is_header"),
    ).with_columns(
        pl.col("is_os").cum_sum().alias("os_block"),
        (pl.col("is_header") | pl.col("is_os")).cum_sum().alias("section"),
    )


def _os_blocks(df: pl.DataFrame, source: Source) -> dict[int, dict[str, Any]]:
    """OS header lines: the OS, host, release and date of each block."""
    os_rows = df.filter(pl.col("is_os")).select(
        "os_block", pl.col("line").str.extract_groups(_OS_RE).alias("g"))
    os_info: dict[int, dict[str, Any]] = {}
    for block, g in os_rows.iter_rows():
        try:
            day = date(_year(g["6"]), int(g["4"]), int(g["5"]))
        except ValueError as exc:
            raise InputFormatError(source.path, None, f"header date "
                                   f"{g['4']}/{g['5']}/{g['6']} is not a date") from exc
        release = (g["3"] or "").split()
        os_info[int(block)] = {"os": g["1"], "host": g["2"], "date": day,
                               "release": release[0] if release else ""}
    return os_info


def _wanted_sections(df: pl.DataFrame, os_info: dict[int, dict[str, Any]], source: Source
                     ) -> tuple[list[_Wanted], bool]:
    """Section headers: the sar -d and sar -u sections to read, with their layouts; and
    whether any header has %busy."""
    headers = df.filter(pl.col("is_header")).select(
        "section", "os_block", "line_no",
        pl.col("line").str.extract(r"^\s*(\S+)", 1).alias("t0"),
        pl.col("line").str.extract_all(r"\S+").list.slice(1).alias("cols"))
    starts = _section_starts(df)
    wanted: list[_Wanted] = []
    any_busy = False
    for section, os_block, hdr_line, hdr_time, hdr_cols in headers.iter_rows():
        cols = tuple(hdr_cols)
        any_busy = any_busy or "%busy" in cols
        is_disk = "device" in cols and "%busy" in cols and cols[0] == "device"
        is_cpu = bool(cols) and cols[0] == "%usr" and "%idle" in cols
        if not (is_disk or is_cpu):
            continue
        info = os_info.get(int(os_block))
        base = _base_date(info, source, int(hdr_line))
        end = starts[section] if section < len(starts) else df.height
        wanted.append((starts[section - 1], end, int(section), str(hdr_time), base,
                       ("disk" if is_disk else "cpu", cols, info["os"] if info else None)))
    return wanted, any_busy


def _read_sections(df: pl.DataFrame, wanted: list[_Wanted], last_section: int, whole: bool,
                   source: Source,
                   ) -> tuple[list[pl.DataFrame], list[pl.DataFrame], list[pl.DataFrame]]:
    """The disk frames, CPU frames and refused rows of the ``wanted`` sections of ``df``, read
    in batches of whole sections of about :data:`BATCH_LINES` lines, the sections of one
    layout in a batch together."""
    disk_frames: list[pl.DataFrame] = []
    cpu_frames: list[pl.DataFrame] = []
    bad: list[pl.DataFrame] = []
    i = 0
    while i < len(wanted):
        j = i + 1
        while j < len(wanted) and wanted[j][1] - wanted[i][0] <= BATCH_LINES:
            j += 1
        batch = wanted[i:j]
        first, end = batch[0][0], batch[-1][1]
        # One chunk per column: polars 2.1 panicked ("i < self.len()" in polars-arrow's
        # binview) evaluating a when/then format over a frame whose columns were chunked
        # differently (the AIX sample with a device line cut short, under the former
        # per-section filter); a batch is small, so the copy is cheap insurance.
        rows = df.slice(first, end - first).filter(~pl.col("is_header")).rechunk()
        layouts: dict[_Layout, list[int]] = {}
        for k, w in enumerate(batch):
            layouts.setdefault(w[5], []).append(k)
        for (kind, cols, os_name), ks in layouts.items():
            meta = pl.DataFrame(
                {"section": [batch[k][2] for k in ks], "hdr_time": [batch[k][3] for k in ks],
                 "base": [batch[k][4] for k in ks]},
                schema={"section": pl.UInt32(), "hdr_time": pl.String(), "base": pl.Date()})
            # the batch's rows are its sections' alone when they follow one another; else
            # (sections of another activity, or a report's header, between them) filtered
            ids = [batch[k][2] for k in ks]
            alone = len(layouts) == 1 and ids == list(range(ids[0], ids[0] + len(ids)))
            part = (rows if alone else
                    rows.filter(pl.col("section").is_in(meta["section"].implode())))
            at_end = last_section in meta["section"]
            if kind == "disk":
                frame = _disk_sections(part, list(cols[1:]), os_name, meta, source, bad,
                                       last=last_section if at_end else None)
                if frame.height:
                    disk_frames.append(frame)
            else:
                frame = _cpu_sections(part, list(cols), meta, source, bad,
                                      cut=last_section if at_end and not whole else None)
                if frame.height:
                    cpu_frames.append(frame)
        i = j
    return disk_frames, cpu_frames, bad


def _release(info: Mapping[str, Any]) -> tuple[int, ...]:
    parts = re.findall(r"\d+", str(info.get("release", "")))
    return tuple(int(p) for p in parts[:2]) if parts else (0,)


def _base_date(info: Mapping[str, Any] | None, source: Source, line_no: int) -> date:
    if info is not None:
        d: date = info["date"]
        return d
    start = start_local(source)
    if start is None:
        raise InputFormatError(source.path, line_no, "this sar output has no 'SunOS|AIX|HP-UX "
                               "<host> ... MM/DD/YY' header line, so its times have no date: "
                               "supply the start date (--start YYYY-MM-DD)")
    return start.date()


def _with_tokens(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows of some sections (headers excluded, file order) with their tokens ``tok``,
    ``n`` tokens, first token ``t0``, time stamp index ``tl`` in the section (0 = the header,
    then one per time-led line) and ``leader``: "t" under a time stamp, "a" under ``Average``,
    null before either."""
    avg = pl.col("t0") == "Average"
    return (rows.with_columns(pl.col("line").str.extract_all(r"\S+").alias("tok"))
            .with_columns(pl.col("tok").list.len().fill_null(0).alias("n"),
                          pl.col("tok").list.get(0, null_on_oob=True).alias("t0"))
            .with_columns(
                pl.col("is_time0").cum_sum().over("section").alias("tl"),
                pl.when(pl.col("is_time0")).then(pl.lit("t")).when(avg).then(pl.lit("a"))
                .otherwise(None).forward_fill().over("section").alias("leader")))


_CONF = pl.col("line").str.contains(r"^\s*System configuration").fill_null(False)


def _disk_sections(rows: pl.DataFrame, cols: list[str], os_name: str | None,
                   meta: pl.DataFrame, source: Source, bad: list[pl.DataFrame], *,
                   last: int | None) -> pl.DataFrame:
    """Device rows of ``sar -d`` sections of one layout (value columns ``cols``), validated
    and mapped; refused rows (``line_no``, ``reason``) are appended to ``bad``. ``last`` is the
    file's last section when it is among them: without its Average block it was cut off."""
    nv = len(cols)
    rows = _with_tokens(rows)
    stamps = rows.filter(pl.col("is_time0"))
    timeline = _timeline(stamps, meta)
    data = rows.filter((pl.col("n") > 0) & ~_CONF & ~pl.col("restart")
                       & ~((pl.col("is_time0")) & (pl.col("n") == 1))
                       & (pl.col("leader") != "a").fill_null(True))
    if rows.filter((pl.col("leader") == "a") & (pl.col("n") > 0)).height:
        source.note("sar 'Average' blocks are summaries of the whole report: skipped")
    if rows.filter(pl.col("restart")).height:
        source.note("'unix restarts' lines mark reboots: the first interval after one starts "
                    "at the restart time")
    if last is not None:
        in_last = pl.col("section") == last
        last_stamps = stamps.filter(in_last)
        if last_stamps.height and not rows.filter(in_last & (pl.col("t0") == "Average")).height:
            last_tl = max_int(last_stamps["tl"])
            last_time = last_stamps.filter(pl.col("tl") == last_tl)["t0"][0]
            data = data.filter(~(in_last & (pl.col("tl") == last_tl)))
            source.note(f"the sar -d section ends without its Average block: the file was cut "
                        f"off, and its last interval ({last_time}) was dropped as it may be "
                        f"incomplete")
    vals = pl.when(pl.col("is_time0")).then(pl.col("tok").list.slice(1)).otherwise(pl.col("tok"))
    data = data.with_columns(vals.alias("vals")).with_columns(
        pl.col("vals").list.get(0, null_on_oob=True).alias("device"),
        *[numbers(pl.col("vals").list.get(i + 1, null_on_oob=True)).alias(f"v{i}")
          for i in range(nv)])
    bad_count = pl.col("vals").list.len() != nv + 1
    bad_num = pl.any_horizontal([pl.col(f"v{i}").is_null() for i in range(nv)])
    reason = (pl.when(pl.col("leader").is_null())
              .then(pl.format("device line before any time stamp: '{}'", pl.col("line")))
              .when(bad_count)
              .then(pl.format("sar -d line has {} fields, expected {} (device + {}): '{}'",
                              pl.col("vals").list.len(), pl.lit(nv + 1),
                              pl.lit(" ".join(cols)), pl.col("line")))
              .when(bad_num)
              .then(pl.format("sar -d values are not all numbers: '{}'", pl.col("line")))
              .otherwise(None))
    data = data.with_columns(reason.alias("reason"))
    bad.append(data.filter(pl.col("reason").is_not_null()).select("line_no", "reason"))
    data = (data.filter(pl.col("reason").is_null())
            .join(timeline, on=["section", "tl"], how="left", maintain_order="left"))
    bad.append(data.filter(~(pl.col("interval_s") > 0)).select(
        "line_no", pl.format("time stamp does not advance: interval of {} s",
                             pl.col("interval_s")).alias("reason")))
    data = data.filter(pl.col("interval_s") > 0)
    measures = _disk_measures(cols, os_name)
    kind, parent = _device_kind(os_name)
    return data.select(
        "line_no", "os_block", "device", "ts_local", "interval_s",
        kind.alias("device_kind"), parent.alias("parent"),
        *[e.alias(k) for k, e in measures.items()],
    ).sort("ts_local", "device", maintain_order=True)


def _cpu_sections(rows: pl.DataFrame, cols: list[str], meta: pl.DataFrame, source: Source,
                  bad: list[pl.DataFrame], *, cut: int | None) -> pl.DataFrame:
    """``sar -u`` rows of sections of one layout as ``line_no``, ``os_block``, ``ts_local`` +
    cpu_*_pct columns; refused rows are appended to ``bad``. ``cut`` is the file's last
    section when it is among them and the file ends inside a line: its last row goes."""
    nv = len(cols)
    rows = _with_tokens(rows)
    timeline = _timeline(rows.filter(pl.col("is_time0")), meta)
    data = rows.filter(pl.col("is_time0") & ~pl.col("restart") & (pl.col("n") > 1))
    if cut is not None:
        in_cut = data.filter(pl.col("section") == cut)
        if in_cut.height:
            data = data.filter(pl.col("line_no") != in_cut["line_no"].max())
    stray = rows.filter((pl.col("n") > 0) & ~pl.col("is_time0") & ~_CONF
                        & (pl.col("leader") != "a").fill_null(True))
    data = data.with_columns(*[numbers(pl.col("tok").list.get(i + 1, null_on_oob=True))
                               .alias(f"v{i}") for i in range(nv)])
    reason = (pl.when(pl.col("n") != nv + 1)
              .then(pl.format("sar -u line has {} fields, expected {}: '{}'", pl.col("n"),
                              pl.lit(nv + 1), pl.col("line")))
              .when(pl.any_horizontal([pl.col(f"v{i}").is_null() for i in range(nv)]))
              .then(pl.format("sar -u values are not all numbers: '{}'", pl.col("line")))
              .otherwise(None))
    data = data.with_columns(reason.alias("reason"))
    bad.append(data.filter(pl.col("reason").is_not_null()).select("line_no", "reason"))
    bad.append(stray.select("line_no", pl.format("unexpected line in a sar -u section: '{}'",
                                                 pl.col("line")).alias("reason")))
    data = (data.filter(pl.col("reason").is_null())
            .join(timeline, on=["section", "tl"], how="left", maintain_order="left"))
    picked = {c: i for i, c in enumerate(cols) if c in _CPU_MAP}
    return data.select("line_no", "os_block", "ts_local",
                       *[pl.col(f"v{i}").alias(_CPU_MAP[c]) for c, i in picked.items()])

def _finish(disks: pl.DataFrame, source: Source, os_info: Mapping[int, Mapping[str, Any]]
            ) -> SampleFrame:
    hosts = {b: str(i["host"]) for b, i in os_info.items()}
    fallback = host_fallback(source)
    host = (pl.col("os_block").replace_strict(hosts, default=fallback, return_dtype=pl.String())
            if hosts else pl.lit(fallback))
    ts = localize(pl.col("ts_local"), source)
    out = disks.with_columns(host.alias("host"), ts.alias("ts"),
                             pl.lit(NAME).alias("source"))
    missing = out.filter(pl.col("ts").is_null())
    if missing.height:
        refuse_rows(source, missing.with_columns(pl.lit(
            f"local time does not exist in zone {source.tz}").alias("reason")))
        out = out.filter(pl.col("ts").is_not_null())
    out = out.drop("line_no", "ts_local", "os_block", "reason", strict=False)
    # Rows are wanted in (ts, device) order, ties in file order. Each batch sorted its own
    # rows that way (by local time, which the one zone maps to UTC in the same order), so
    # the whole is sorted already unless batches overlap in time (several hosts' reports in
    # one file, several disk layouts in a batch): only then is it sorted again, a copy.
    ts_, dev = pl.col("ts"), pl.col("device")
    unsorted = ((ts_ < ts_.shift(1)) | ((ts_ == ts_.shift(1)) & (dev < dev.shift(1))))
    if out.select(unsorted.fill_null(False).any()).item():
        out = out.sort("ts", "device", maintain_order=True)
    return SampleFrame(out)
