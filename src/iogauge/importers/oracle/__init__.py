"""Reading of Oracle Statspack and AWR reports (text; AWR HTML in :mod:`.html`): wait events,
file I/O, the Wait Event Histogram (:mod:`.histogram`) and Operating System Statistics
(:mod:`.osstat`).

Statspack (``spreport.sql``, Oracle 8i-11g and later) and AWR (``awrrpt.sql``, 10g and later)
text reports are SQL*Plus listings: a section title, optional ``->`` notes, column headings,
a rule of dashes under every column, and rows. The rule is what makes them readable: each dash
run is one column, so a heading word or a value belongs to the run it stands in. That is how
this module names and slices columns, whatever the release. The layouts handled are those
of ``sprepins.sql`` 8.1.x and 9.2 (read from the script's COLUMN/TTITLE definitions), Statspack
10.2, and AWR 10.2/11.2 text reports as public reports show them; the 12c/19c Top 10 table
(unit-suffixed ``Avg Wait``) and File IO Stats (extra single-block read columns) were
reconstructed from descriptions, which the heading-driven reading tolerates. Real reports
then taught: AWR 11.2.0.4 (tests/fixtures/awr, MIT) prints "Total Wait Time (sec)" four wide
("Tota" over "Time"), ``N/A`` where no average exists (no value), its Cache Sizes after the
Top 10, a histogram count cut at its width (``118.6`` for 118.6K: left empty, a note), and
a Tablespace IO Stats whose values after Av Blks/Rd stand under other headings (its writes
are not read, a note); Statspack 12.1 ("%Tim" over "out", the histogram's label on the
Total line, ``Mx Rd Bkt``, file names cut at 52 characters) and AWR 12.2 (bucket headings
cut at their width, ``No data exists for this section of the report.``) were seen in real
reports that carry no licence and are reproduced with invented values.

Sections read (all others are skipped):

* top events: ``Top 5 Wait Events`` (8i), ``Top 5 Timed Events`` (9i/10g, AWR 10g),
  ``Top 5 Timed Foreground Events`` (AWR 11g), ``Top 10 Foreground Events by Total Wait
  Time`` (AWR 11.2.0.4+/12c/19c);
* the full lists: ``Wait Events`` (Statspack, AWR 10g), ``Foreground Wait Events`` /
  ``Background Wait Events`` (AWR 11g+, Statspack 11g+);
* ``File IO Stats`` (``File IO Statistics`` in 8i) and ``Tablespace IO Stats``
  (``Tablespace IO Summary`` in 8i);
* ``Wait Event Histogram`` and ``Operating System Statistics`` (``OS Statistics``);
* ``IOStat by Filetype summary`` (AWR 11.2+: small and large read times, :mod:`.filetype`).

AWR HTML reports are read by :mod:`.html`, RAC global ones (``awrgrpt.sql``) by :mod:`.rac`.

A table ends at its footer rule, a blank line after a record, or the next title -- a section
title, a known block title (``Host CPU``, ``Instance CPU``, ... : AWR 11.2 prints Host CPU
right under the Top 5 rows) or any line underlined with ``~``. Each table has a grammar, so
that a line of another block is refused (``--lenient`` skips it), never read as a row: every
column heading must be one of Oracle's, a record starts with its name at column 1, an event
name starts with a letter and has a figure, a tablespace name is an identifier, and the rule
of dashes under a title's headings must come before the next section's title.

Wait events go to a :class:`WaitEventFrame` (``source.waits``); one row per event per section,
``ts`` = the end snapshot time, ``interval_s`` = end - begin snapshot time (exact to the second;
the printed ``Elapsed: n.nn (mins)`` is the same figure rounded, used only when the snapshot
times are missing). Column headings map as follows (spaces ignored, case ignored):

=====================================================  =============================
heading                                                WaitEventFrame column
=====================================================  =============================
Waits                                                  waits
%Time -outs                                            timeouts_pct
Time (s), Time(s), Total Wait Time (s) / (sec)         time_waited_s
Time (cs), Wait Time (cs), Total Wait Time (cs) (8i)   time_waited_s (/ 100)
Avg wait (ms), Avg Wait(ms), Wait Avg(ms)              avg_wait_ms
Avg Wait (12c+: value carries its unit, 7.38ms/540us)  avg_wait_ms (converted)
Waits /txn                                             waits_per_txn
% DB time, %Total Call Time, % Total Ela Time          pct_db_time
Wait Class                                             wait_class
=====================================================  =============================

``Timeouts`` (a count, 9i) and ``% Total Wt Time`` (8i: share of *wait* time, not of DB time)
have no column and are dropped. ``CPU time`` / ``DB CPU`` rows of the top-events tables are
kept as printed (no waits, no wait class).

File IO Stats rows become SampleFrame rows (device = the file name, ``device_kind``
``datafile``, ``parent`` = its tablespace); Tablespace IO Stats rows become ``tablespace`` rows.
``Av Reads/s`` -> r_iops, ``Av Rd(ms)`` -> r_await_ms, ``Av Blks/Rd`` x block size / 1024 ->
r_areq_kB (the block size from ``Std Block Size: 8K`` or ``db_block_size: 8192``, else 8 KB
and a note; tablespaces of another block size are not told apart by the report),
``Av Writes/s`` (``Writes avg/s``) -> w_iops. 8i prints counts only: r_iops/w_iops are then
Reads/Writes divided by ``interval_s`` (a note says so). Buffer Waits and Av Buf Wt(ms) (waits
for a *buffer*, not for the file) and the 12c single-block columns have no column here. A
blank Av Rd(ms) or Av Blks/Rd where Reads is 0 becomes 0.0, the SampleFrame convention for "no
request completed" (Oracle prints nothing there).

A file may hold several reports one after another (one per snapshot pair); each is an interval.
Such a file is read a piece of whole reports at a time (:func:`iter_reports`: cut before a
report's title line), so memory holds one piece, not the file, and the rows of a piece's
reports become one SampleFrame and one WaitEventFrame.
A file cut off inside a section keeps the sections that were complete (a table is complete
when its closing rule, the next title or -- for wait lists -- the blank line after it was
read) and drops the cut one, with a note.

How a piece is read (Python reads only the lines that carry structure -- section titles,
column headings, the header lines that can hold snapshot times or names, a few a table --
never the rows of a table one by one):

* its lines are classified at once by polars (section titles, rules of dashes, footers, blank
  lines, lines of numbers only, the header lines that can hold a snapshot time, block size or
  host), each class kept as a sorted list of line numbers;
* Python then walks the reports and their tables, a few binary searches in those lists a
  table (where its rule is, where it ends, which lines are its records -- a two-line table's
  records are found by a regular expression over one letter a line; a text line that can
  start no record is refused alone, two lines of numbers under one name are refused);
* the records are cut into cells and converted by polars a layout at a time (the reports of
  a file repeat the same layouts): a line with nothing but spaces outside its columns' rules
  is sliced by column, any other one (a value wider than its column) is cut word by word as
  before; a number is read from its text with the multiplier's power of ten written into
  its exponent, so it is rounded once, as ``float(Decimal(text) * multiplier)`` rounds it;
* a table holding anything to refuse or to note (a value that is not a number, ``#``, a name
  missing, a file listed twice) is read row by row as before, which names each refused line;
  the notes and refusals of a piece reach the Source in the order of the file.

100 MB of AWR reports (``benchmarks/import_memory.py``: 24,373 copies of the 19c excerpt, each a
day later) import to Parquet in 9.8-12.0 s at 0.24 GB peak, where reading each line in Python
took 31.0-34.0 s at 0.22 GB, and reading the whole file at once (before pieces) 237 s at
2.89 GB; rows and wait events are the same.
"""

from iogauge.importers.oracle.text import CHUNK_BYTES, iter_reports, parse_reports

__all__ = ["CHUNK_BYTES", "iter_reports", "parse_reports"]
