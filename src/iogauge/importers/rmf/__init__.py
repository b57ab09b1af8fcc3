"""z/OS RMF Postprocessor reports: DASD activity, cache subsystem activity, ESS rank statistics.

[Yuge] reads three RMF Postprocessor reports together: the DIRECT ACCESS
DEVICE ACTIVITY report (per-volume response time and its IOSQ/PEND/DISC/CONN breakdown), the
CACHE SUBSYSTEM ACTIVITY report (the "application attributes": read/write mix, sequential vs
"normal" (random) requests, hit ratios, destage) and the ESS RANK STATISTICS report (throughput
and response time per DS8000 RAID rank). This importer turns the text of those reports -- as
the Postprocessor writes them to SYSOUT (132 columns, ASA carriage control in column 1, a page
title whose letters are spaced out, e.g. ``D I R E C T   A C C E S S   D E V I C E   A C T I V I
T Y``) -- into SampleFrame rows. Other reports in the same output (CPU, CHANNEL PATH, I/O
QUEUING, ...) are skipped page by page and listed in a note.

Layouts follow IBM, *z/OS RMF Report Analysis* (SC34-2665): the V2R1/V2R4 figures "Cache
Subsystem Activity Report - Status and Overview" and "Cache Device Activity" give the cache
pages line by line; the DASD column headings (STORAGE GROUP, DEV NUM, DEVICE TYPE, NUMBER OF
CYL, VOLUME SERIAL, PAV, LCU, DEVICE ACTIVITY RATE, AVG RESP/IOSQ/CMR/DB/INT/PEND/DISC/CONN
TIME, % DEV CONN/UTIL/RESV, ...) and the ESS rank columns (EXTENT POOL ID/TYPE, RRID, ADAPT ID,
READ and WRITE OPS/SEC, BYTES/OP, BYTES/SEC, RTIME/OP, ARRAY ..., RAID TYPE) come from the report
descriptions, not from a sample page, so the parser does not depend on column positions: DASD
values are named by pairing the second and third heading lines word by word and taken from the
right end of each line, ESS values by their order. Every page carries the header::

    z/OS V2R4   SYSTEM ID SYS1   DATE 05/11/2019   INTERVAL 10.00.010
                RPT VERSION V2R4 RMF   TIME 08.50.00

TIME is the *start* of the RMF interval in z/OS local time, INTERVAL is ``mm.ss.ttt``. A row's
``ts`` is start + INTERVAL (the interval end), converted to UTC with ``--tz`` (RMF reports state
no zone; without ``--tz`` UTC is assumed and a note says so); ``interval_s`` is INTERVAL.

Rows and mappings (one row per device per interval; the sections of one interval -- same
SYSTEM ID and start time -- are merged, so a volume met in the DASD report and in the cache
report is one row, with ``ts``/``interval_s`` taken from the DASD report's header):

=======================  ==========  ==================================================
device                   kind        columns (report field)
=======================  ==========  ==================================================
VOLSER (``DB2D01``)      volume      DASD: iops (DEVICE ACTIVITY RATE), await_ms (AVG RESP
                                     TIME), iosq_ms/pend_ms/disc_ms/conn_ms (AVG IOSQ/PEND/
                                     DISC/CONN TIME), util_pct (% DEV UTIL).
                                     Cache device overview: cache_hit_pct (TOTAL H/R x 100).
                                     Cache device activity (device-level reporting):
                                     r_iops/w_iops (TOTAL read/write RATE), seq_read_ps/
                                     seq_write_ps (SEQUENTIAL read/write RATE),
                                     cache_hit_pct (TOTAL H/R x 100).
``LCU:0040``             lcu         the DASD report's LCU summary line, same columns as
                                     a volume.
``SG:SGDB2``             lcu         a storage group (the DASD lines' STORAGE GROUP
                                     column), computed from its volumes' DASD lines:
                                     iops summed, the times weighted by activity, util_pct
                                     the volumes' mean (:func:`_storage_groups`).
``SSID:4000``            lcu         the cache subsystem overview of one SSID: r_iops,
                                     w_iops, seq_read_ps, seq_write_ps, cache_hit_pct.
``RANK:0004@ABCD1``      rank        ESS rank statistics: r_iops/w_iops (OPS/SEC),
                                     r_kBps/w_kBps (BYTES/SEC / 1024), r_areq_kB/w_areq_kB
                                     (BYTES/OP / 1024), r_await_ms/w_await_ms (RTIME/OP).
``POOL:0000@ABCD1``      other       the ESS POOL summary line of an extent pool, same
                                     columns as a rank.
=======================  ==========  ==================================================

``ABCD1`` is the storage facility serial with its leading zeros dropped (the cache report
prints it in 12 digits, the ESS report in 10). ``parent``: a rank's parent is its extent pool;
a volume's parent is its rank when the report links them -- the cache device page's ``RRID``
(IBM's 2105 figure; for a 2107 the page's ``XTNT POOL nnnn`` form is our reading), or the
device overview's XTNT POOL column when the ESS report of the same file shows that pool
holding exactly one rank -- else its extent pool (a pool of several ranks stripes volumes over
all of them), else its LCU (DASD report). Analyses that aggregate by parent must look at the
parent's kind.

Deliberate choices, because the reports say less than a SampleFrame could hold:

* RMF prints K/M/G after large byte figures; they are taken as binary multiples, as RMF
  Report Analysis describes its size suffixes ("followed by a K (... kilobytes) ... M (...
  megabytes)"), so ``203.8M`` bytes/s is ``203.8 x 1024`` kB/s. Hit ratios (H/R, 0..1)
  become percentages (x 100). Conversions are done in decimal so that the printed digits
  survive (0.998 -> 99.8, not 99.80000000000001).
* The cache counts *requests seen by the control unit* and the DASD report counts *start
  subchannels*, so a volume's ``r_iops + w_iops`` (cache) need not equal its ``iops`` (DASD).
* Not mapped (no SampleFrame column): CMR/DB/INT delays, % DEV CONN/RESV, allocation counts,
  cache miss and destage (ASYNC) rates, DFW/CFW/ICL/bypass counts, ESS array attributes. ESS
  EXTENT POOL (capacity) and LINK statistics pages are skipped.
* Storage groups: a volume's group is the STORAGE GROUP column of its DASD line (blank: in
  none), and each group's row is computed from those lines, as RMF makes its LCU summary
  line from its device lines. A report sorted by storage group prints a total line per
  group, whose layout IBM does not document (no sample of one was available): a DASD line
  that names the group of the device lines above it just before the values, with at most
  two fields before the name (``SG  SGDB2 ...``, ``SGDB2 ...``), is taken for that total,
  left out (a note counts them) and closes the table as an LCU line does. Any other summary
  line is refused with its line number rather than guessed.
* A file cut off inside a report page (no final newline, or a DASD page not closed by its LCU
  summary, an ESS page not closed by POOL, a cache page without its TOTAL row or device
  overview) loses the whole last interval, not only the cut line, and a note says so: half an
  interval would show a rank without its volumes. A cut at a line end between two complete
  pages or lines is found by comparing the last interval with the earlier ones (every report
  and device line they all have must be there); a file of one interval cut that cleanly keeps
  the pages it has.

Reading: each piece of text (:data:`CHUNK_BYTES`) is one polars Series of lines, classified
at once by expressions: the page titles (a regex pre-filter, so that :func:`_title_of` sees only
lines starting with the ASA '1' or with no two printable characters side by side), the page
each line is on (lines of skipped reports are never looked at again), and per page type the
lines that carry structure -- page headers, DASD column headings, cache rules and the
sub-section titles after them, SUBSYSTEM/TYPE-MODEL/VOLSER/SERIAL lines, the request table's
heading, TOTAL H/R, ESS SERIAL NUMBER and rank lines. Only those go through the line functions
(the state machine) one by one. Between two of them the state cannot change, so the data lines
there -- DASD device and LCU lines, cache device overview rows, request table rows -- are
checked, split and converted by one regex per line type for the whole piece; lines there that
change nothing (status, cache misses) are not read at all. A run of DASD or device overview
lines between two structure lines joins its interval at once (:func:`_bulk`): set operations
check that no device of the run is in its section twice or of two kinds, and its rows stay in
the parsed table, gathered once a piece (State.parts). A line the expressions cannot vouch
for (a character outside printable ASCII, a field that is not a plain number, a wrong field
count), and every line of a run that fails a check, is read by the line function, so it is
refused with the same line number and reason as before. On the benchmark input below 23 % of
the lines still go through the line functions one by one (page headers 6.6 %, cache
structure 12.4 %, ESS 2.5 %, DASD headings 1.7 %) and 4 % are page titles; of the rows,
those of the DASD and device overview lines (86 % in a 10 MB slice: 18,086 of 21,098) are
never touched one by one in Python, those of the request tables (SSID and cache device
pages) and ESS rank lines are; the rest of the lines is never touched in Python.

Memory: the text is read a piece at a time, and RMF prints the reports of an interval
together, so a host's earlier intervals are complete when a later one begins: once
``_ROWS_PER_TABLE`` rows of closed intervals are waiting, those read a line at a time leave
Python dicts (some 1.4 kB a row) and, with those read a run at a time, make a table of a
row per device and interval (:func:`_merged`), with their volume links, LCU and the
sections each device was read in; of their lines only what the cut checks need (the lines
every one of them had) is kept. A page of an interval thought complete opens it again, and
a device line it had read already is refused as before. The rows are handed on at the end
(a volume's parent comes from the whole file's ESS pages), sorted, in SampleFrames of
``_ROWS_OUT`` rows (the measurements are in benchmarks/README.md, ``import_memory.py``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import BinaryIO

from iogauge.importers._lines import pieces
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.rmf.reading import (
    _drop_cut_interval,
    _drop_short_last_intervals,
    _page_complete,
    _read_piece,
)
from iogauge.importers.rmf.state import _Page, _State
from iogauge.importers.rmf.tables import _ROWS_OUT, _frame
from iogauge.importers.rmf.tokens import (
    _KNOWN,
    _SNIFF_TITLES,
    DESCRIPTION,
    EXPECTS,
    NAME,
    _spaced_title,
)
from iogauge.model.sampleframe import SampleFrame

__all__ = ["CHUNK_BYTES", "DESCRIPTION", "EXPECTS", "NAME", "iter_parse", "parse", "sniff",
           "sniff_bytes"]


def sniff(head: str) -> bool:
    """RMF report text: a z/OS page header and one of the I/O report titles (spaced or not)."""
    if "z/OS" not in head or "RMF" not in head:
        return False
    collapsed = re.sub(r"\s+", "", head)
    return any(t in collapsed for t in _SNIFF_TITLES)


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))

#: Bytes read per piece by :func:`iter_parse`.
CHUNK_BYTES = 4 << 20


def _pieces(stream: BinaryIO, chunk_bytes: int) -> Iterator[tuple[int, list[str], str | None]]:
    """``(number of the first line, lines, cut line)`` of each piece of the input: the lines
    as split (``\\r`` not yet removed), and the last line of a file cut off inside it (no
    line end) apart, or None."""
    first = 1
    for data, last in pieces(stream, chunk_bytes):
        cut = last and bool(data) and not data.endswith(b"\n")
        # split on \n only: str.splitlines() would also break at form feeds and shift line
        # numbers
        raw_lines = decode(data).split("\n")
        del data
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()  # the empty string after the final newline
        tail = raw_lines.pop() if cut and raw_lines else None
        yield first, raw_lines, tail
        first += len(raw_lines)


# ---------------------------------------------------------------------------------------------
# parse
# ---------------------------------------------------------------------------------------------
def parse(data: bytes, source: Source) -> SampleFrame:
    """Parse RMF Postprocessor report text (see the module docstring for the mapping)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, given at the end (an interval's reports may be anywhere
    in the file, and a volume's parent comes from the whole file's ESS pages) in
    SampleFrames of :data:`_ROWS_OUT` rows; the text is read a piece at a time, so it is
    never held whole."""
    st = _State(source=source)
    page: _Page | None = None
    cut_line = False
    partial: tuple[int, str] | None = None
    for first, raw_lines, tail in _pieces(stream, chunk_bytes):
        page = _read_piece(st, page, first, raw_lines)
        if tail is not None:
            cut_line = True
            partial = (first + len(raw_lines), tail.rstrip("\r"))
    if partial is not None and (partial[1].startswith("1")
                                or _spaced_title(partial[1]) is not None):
        # the cut fell in the title line of a new page: nothing of that page was read and
        # the pages before it are whole
        cut_line = False
        source.note(f"line {partial[0]} (a page title) is cut off; not read")
    if page is not None and page.title in _KNOWN and (cut_line or not _page_complete(page)):
        _drop_cut_interval(st, page, cut_line)
    _drop_short_last_intervals(st)
    if st.sg_summaries:
        source.note(f"{st.sg_summaries} storage-group summary line"
                    f"{'s' if st.sg_summaries != 1 else ''} (a report sorted by storage "
                    "group) not read: IBM documents no layout for them; each group's row is "
                    "computed from its volumes' lines instead")
    if st.skipped_titles:
        source.note("RMF report pages not imported (no device I/O statistics): "
                    + ", ".join(st.skipped_titles))
    rows = _frame(st)
    for offset in range(0, rows.height, _ROWS_OUT):
        yield SampleFrame(rows.slice(offset, _ROWS_OUT))
