"""Oracle Statspack text reports (``spreport.sql``): wait events and file I/O statistics.

Everything but the sniffer lives in :mod:`iogauge.importers.oracle`, shared with AWR:
see there for the sections read, the column mapping and the release differences (8i prints
wait times in centiseconds and file I/O as counts; 9i+ in seconds and per-second rates).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.oracle import CHUNK_BYTES, iter_reports, parse_reports
from iogauge.model.sampleframe import SampleFrame

NAME = "statspack"
DESCRIPTION = "Oracle Statspack text report (wait events, file and tablespace I/O)"
EXPECTS = "a 'STATSPACK report for' line (Oracle spreport.sql output)"

_START_RE = re.compile(r"^\s*STATSPACK report for\s*$")


def sniff(head: str) -> bool:
    return any(_START_RE.match(line) for line in head.splitlines()[:200])


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def parse(data: bytes, source: Source) -> SampleFrame:
    """Statspack report(s) -> datafile/tablespace rows; wait events go to ``source.waits``."""
    return parse_reports(data, source, fmt=NAME, start_re=_START_RE,
                         title="STATSPACK report for")


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of whole reports at a time."""
    return iter_reports(stream, source, fmt=NAME, start_re=_START_RE,
                        title="STATSPACK report for", chunk_bytes=chunk_bytes)
