"""One error hierarchy for iogauge.

Every error a user can provoke derives from :class:`IogaugeError`, so the CLI can print the
message and exit with status 2 instead of a traceback. Errors about input name the file,
the line (1-based) and the reason, in that order.
"""

from __future__ import annotations

from pathlib import Path


class IogaugeError(Exception):
    """Base of every error iogauge raises on purpose."""


class SchemaError(IogaugeError):
    """A frame does not satisfy its declared schema (missing column, wrong type, bad value)."""


class CollectorError(IogaugeError):
    """The live collector cannot read its source at all (e.g. /proc is unreadable)."""


class InputFormatError(IogaugeError):
    """A line of an input file cannot be understood.

    Attributes:
        path: the file (or pseudo-file such as ``/proc/diskstats``).
        line_no: 1-based line number, or None when the whole file is at fault.
        reason: why the line was refused.
    """

    def __init__(self, path: str | Path, line_no: int | None, reason: str) -> None:
        self.path = str(path)
        self.line_no = line_no
        self.reason = reason
        where = f"{self.path}:{line_no}" if line_no is not None else self.path
        super().__init__(f"{where}: {reason}")


class BinaryFormatError(InputFormatError):
    """A binary input (a sysstat sa file) cannot be understood at a byte offset.

    Attributes:
        offset: the byte offset (0-based) of the structure at fault.
    """

    def __init__(self, path: str | Path, offset: int, reason: str) -> None:
        self.offset = offset
        super().__init__(path, None, f"offset {offset}: {reason}")


class StoreError(IogaugeError):
    """The embedded store cannot be opened, written or read."""


class StoreBusyError(StoreError):
    """Another process holds the store: a second writer, or DuckDB's file lock."""


class SourceError(IogaugeError):
    """A remote source (a Prometheus or VictoriaMetrics query API) cannot be read: the URL is
    unreachable, refuses the credentials, rejects a query, or has no matching data."""
