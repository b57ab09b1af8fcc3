"""The contract every importer module follows, and the per-file context it reports into.

An importer is a module under ``iogauge.importers`` with:

* ``NAME`` — the format id (``iostat``, ``sar``, ``perfmon`` …), also ``--format NAME``;
* ``DESCRIPTION`` — one line for ``iogauge import --help`` and error messages;
* ``EXPECTS`` — what its sniffer looks for, quoted when no format accepts a file;
* ``sniff(head: str) -> bool`` — True if the decoded first 64 KiB look like this format;
* ``sniff_bytes(head: bytes) -> bool`` — the same on the raw bytes (binary formats test
  their magic; text formats decode and call ``sniff``); the registry calls this one;
* ``iter_parse(stream: BinaryIO, source: Source) -> Iterator[SampleFrame]`` — the
  (decompressed) input read from a stream, SampleFrames in file order (a format read a piece
  at a time never holds the whole input); the registry calls this one;
* ``parse(data: bytes, source: Source) -> SampleFrame`` — the whole input in memory.

Parsers never diagnose: they turn text into SampleFrame rows, exactly, and say what they could
not read. A line that cannot be understood goes through :meth:`Source.bad_line`, which raises
an :class:`~iogauge.errors.InputFormatError` naming file, line and reason — or, when the user
chose ``--lenient``, counts it and goes on.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO, Protocol
from zoneinfo import ZoneInfo

from iogauge.errors import InputFormatError
from iogauge.importers.first_report import FirstReport
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame

#: How many skipped lines a lenient import lists in full (the rest are only counted).
MAX_LISTED_SKIPS = 20


@dataclass
class Source:
    """One input being imported, and what the parser found out while reading it.

    Attributes:
        path: the file's name as the user gave it (used in every message).
        tz: zone of timestamps that carry no offset (``--tz``); None means the file's own
            zone if it states one, else UTC (and a note says so).
        lenient: skip unreadable lines instead of failing (``--lenient``).
        host: host name to use when the file does not name one.
        skipped: number of lines skipped in lenient mode.
        skipped_examples: the first :data:`MAX_LISTED_SKIPS` of them in the file, in line
            order, as "line N: reason" (those without a line, "file: reason", after them):
            the same list whichever order a reader meets them in.
        notes: facts the user should know (since-boot report kept, file cut off, zone
            assumed, ...).
        waits: database wait events found (Statspack/AWR), beside the SampleFrame.
        start: when the collection started (``--start``), for outputs whose timestamps are
            missing or incomplete: reports without any time stamp (Solaris/AIX ``iostat``
            without ``-T``) end at ``start + k * interval_s``; outputs that print only the
            time of day take their date from it. Naive values are local time in ``tz``.
        interval_s: the sampling interval the command was run with (``--interval``), for
            outputs that do not print one.
        date_order: ``"MDY"``, ``"DMY"`` or ``"YMD"`` for dates such as 01/02/2024 that
            the file alone cannot decide (``--date-order``); None: inferred, with a note
            when it is a guess (see :mod:`iogauge.importers.timestamps`).
        first_report: how to read an iostat file's first report (``--first-report``; see
            :mod:`iogauge.importers.first_report`).
    """

    path: str
    tz: ZoneInfo | None = None
    lenient: bool = False
    host: str | None = None
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    waits: list[WaitEventFrame] = field(default_factory=list)
    start: datetime | None = None
    interval_s: float | None = None
    date_order: str | None = None
    first_report: FirstReport = FirstReport.AUTO
    #: the line numbers of skipped_examples (inf: none), in the same order
    _skip_keys: list[float] = field(default_factory=list, repr=False)

    def bad_line(self, line_no: int | None, reason: str) -> None:
        """Refuse a line: raise, or in lenient mode count it and carry on."""
        if not self.lenient:
            raise InputFormatError(self.path, line_no, reason)
        self.skip(line_no, reason)

    def skip(self, line_no: int | None, reason: str, count: int = 1) -> None:
        """Count ``count`` skipped lines (lenient mode), keeping the first few reasons."""
        self.skipped += count
        key = math.inf if line_no is None else float(line_no)
        at = bisect.bisect_right(self._skip_keys, key)
        if at >= MAX_LISTED_SKIPS:
            return
        where = f"line {line_no}" if line_no is not None else "file"
        self._skip_keys.insert(at, key)
        self.skipped_examples.insert(at, f"{where}: {reason}")
        if len(self._skip_keys) > MAX_LISTED_SKIPS:
            del self._skip_keys[-1], self.skipped_examples[-1]

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)


class ImporterModule(Protocol):
    """The module-level interface of an importer (see the module docstring)."""

    NAME: str
    DESCRIPTION: str
    EXPECTS: str

    def sniff(self, head: str) -> bool: ...

    def sniff_bytes(self, head: bytes) -> bool: ...

    def parse(self, data: bytes, source: Source) -> SampleFrame: ...

    def iter_parse(self, stream: BinaryIO, source: Source) -> Iterator[SampleFrame]: ...


@dataclass
class ImportResult:
    """What importing one file produced.

    Attributes:
        path: the file.
        format: the format id used.
        detected: True if sniffed, False if forced with ``--format``.
        compression: 'gzip', 'xz', 'bzip2', 'zstd' or None.
        frame: the rows.
        waits: database wait events (empty for device-statistics formats).
        skipped, skipped_examples, notes: from the :class:`Source`.
        seconds: wall time of the parse.
        input_bytes: decompressed size.
    """

    path: str
    format: str
    detected: bool
    compression: str | None
    frame: SampleFrame
    waits: WaitEventFrame
    skipped: int
    skipped_examples: list[str]
    notes: list[str]
    seconds: float
    input_bytes: int
