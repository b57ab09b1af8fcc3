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

import io
from collections.abc import Iterator
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers._lines import line_frames
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.sar_text.banner import parse_banner_date
from iogauge.importers.sar_text.common import (
    _BANNER_RE,
    _TIMED_LINE_RE,
    DESCRIPTION,
    DEV_COLUMNS,
    EXPECTS,
    NAME,
    device_kind_and_parent,
    read_lines,
)
from iogauge.importers.sar_text.footer import _compressed, _tail_offset
from iogauge.importers.sar_text.pieces import _continued, _Cut, _cut_point, _parse_piece, _uncolored
from iogauge.importers.sar_text.rows import device_frame
from iogauge.importers.sar_text.state import _Carry, _Resume
from iogauge.model.sampleframe import SampleFrame

__all__ = ["CHUNK_BYTES", "DESCRIPTION", "DEV_COLUMNS", "EXPECTS", "NAME", "device_frame",
           "device_kind_and_parent", "iter_parse", "parse", "parse_banner_date", "sniff",
           "sniff_bytes"]


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

#: Bytes read per piece by :func:`iter_parse`. A 102 MB one-report ``sar -u -d -p`` (a day
#: of 1-second samples) peaked at 0.26 GB in 4.9 s with 4 MiB pieces, 0.30 GB in 4.5 s with
#: 6 MiB (side by side, another job busy on the second CPU).
CHUNK_BYTES = 4 << 20

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



def parse(data: bytes, source: Source) -> SampleFrame:
    """Parse sar text into one row per device per interval (see the module docstring). Files
    longer than :data:`CHUNK_BYTES` are read a few reports at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))
