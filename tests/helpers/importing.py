"""Helpers for tests of the import paths."""

from __future__ import annotations

from typing import Any

import pytest

from iogauge.importers import iostat_text

#: tests/fixtures folder -> the format id of the inputs in it
FIXTURE_FORMATS = {
    "iostat": "iostat", "iostat-json": "iostat-json", "sar": "sar", "sadf": "sadf",
    "sa": "sa", "solaris-iostat": "solaris-iostat", "unix-sar": "unix-sar",
    "aix-iostat": "aix-iostat", "perfmon": "perfmon", "rmf": "rmf", "statspack": "statspack",
    "awr": "awr", "fio": "fio", "diskstats-snapshots": "diskstats", "diskstats": "diskstats",
}


def small_iostat_pieces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the iostat importer stream in pieces of a few kB (the fixtures are small), and
    count the SampleFrames it yields, so that a caller is seen to take the streaming path;
    returns the (growing) list of their row counts."""
    yielded: list[int] = []
    real = iostat_text.iter_parse

    def small(stream: Any, source: Any) -> Any:
        for frame in real(stream, source, chunk_bytes=4_000, link_bytes=9_000):
            yielded.append(len(frame))
            yield frame

    monkeypatch.setattr(iostat_text, "iter_parse", small)
    return yielded
