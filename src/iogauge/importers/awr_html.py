"""Oracle AWR HTML reports (``awrrpt.sql`` with report type ``html``, its default): wait
events and tablespace / file I/O, read with an HTML parser (see
:mod:`iogauge.importers.oracle.html`) into the same rows as the text report gives.

The RAC global report (``awrgrpt.sql``, ``<title>AWR RAC Report for DB:``) gives the foreground
wait events of each instance (:mod:`iogauge.importers.oracle.rac`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.oracle.html import TITLE_RE, parse_html
from iogauge.importers.oracle.rac import RAC_TITLE_RE
from iogauge.model.sampleframe import SampleFrame

NAME = "awr-html"
DESCRIPTION = "Oracle AWR HTML report (wait events, tablespace and file I/O)"
EXPECTS = ("a '<title>AWR Report for DB: ...' or '<title>AWR RAC Report for DB: ...' element "
           "(Oracle awrrpt.sql / awrgrpt.sql HTML output)")


def sniff(head: str) -> bool:
    return bool(TITLE_RE.search(head) or RAC_TITLE_RE.search(head))


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


def parse(data: bytes, source: Source) -> SampleFrame:
    """An AWR HTML report -> tablespace/datafile rows; wait events go to ``source.waits``."""
    return parse_html(data, source, fmt="awr")


def iter_parse(stream: BinaryIO, source: Source) -> Iterator[SampleFrame]:
    """:func:`parse` of the whole stream (an HTML report is parsed as one document)."""
    yield parse(stream.read(), source)
