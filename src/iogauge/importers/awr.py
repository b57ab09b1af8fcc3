"""Oracle AWR text reports (``awrrpt.sql``, text output): wait events and file I/O statistics.

Everything but the sniffer lives in :mod:`iogauge.importers.oracle`, shared with
Statspack: see there for the sections read, the column mapping and the release differences
(``Top 5 Timed Events`` in 10g, ``Top 5 Timed Foreground Events`` in 11g, ``Top 10 Foreground
Events by Total Wait Time`` with unit-suffixed averages from 11.2.0.4/12c on). Only the
single-instance text report is read: RAC global text reports (``WORKLOAD REPOSITORY RAC REPORT``;
the HTML one is read by :mod:`iogauge.importers.awr_html`) and
compare-period reports have other layouts and are not sniffed as AWR.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.oracle import CHUNK_BYTES, iter_reports, parse_reports
from iogauge.model.sampleframe import SampleFrame

NAME = "awr"
DESCRIPTION = "Oracle AWR text report (wait events, file and tablespace I/O)"
EXPECTS = "a 'WORKLOAD REPOSITORY report for' line (Oracle awrrpt.sql text output)"

_START_RE = re.compile(r"^\s*WORKLOAD REPOSITORY report for\s*$")


#: an HTML document (the AWR HTML report's <h1> holds the same title line: awr_html's)
_HTML_RE = re.compile(r"<html\b|<title>", re.IGNORECASE)


def sniff(head: str) -> bool:
    return (any(_START_RE.match(line) for line in head.splitlines()[:200])
            and not _HTML_RE.search(head[:4096]))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def parse(data: bytes, source: Source) -> SampleFrame:
    """AWR report(s) -> datafile/tablespace rows; wait events go to ``source.waits``."""
    return parse_reports(data, source, fmt=NAME, start_re=_START_RE,
                         title="WORKLOAD REPOSITORY report for")


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of whole reports at a time."""
    return iter_reports(stream, source, fmt=NAME, start_re=_START_RE,
                        title="WORKLOAD REPOSITORY report for", chunk_bytes=chunk_bytes)
