"""iogauge.store.parquet.write_frames: SampleFrames parsed in a thread while polars writes."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from iogauge.errors import InputFormatError
from iogauge.importers import iostat
from iogauge.importers.base import Source
from iogauge.model.sampleframe import SampleFrame
from iogauge.store import parquet

FIX = Path(__file__).resolve().parents[2] / "fixtures"
LOG = FIX / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt"


def _parse_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "iogauge-parse"]


def test_every_row_is_written_in_order(tmp_path: Path) -> None:
    data = LOG.read_bytes()
    expected = iostat.parse(data, Source(path=str(LOG)))
    frames = iostat.iter_parse(io.BytesIO(data), Source(path=str(LOG)),
                                    chunk_bytes=1 << 14)
    out = tmp_path / "o.parquet"
    rows = parquet.write_frames(frames, out, row_group_size=1000)
    back = SampleFrame.read_parquet(out)
    assert rows == len(expected) == len(back) > 3000
    assert back.df.equals(expected.df, null_equal=True)
    assert pl.read_parquet_schema(out) == dict(SampleFrame.empty().df.schema)
    assert not _parse_threads()


def test_an_error_of_the_frames_is_raised_as_it_was(tmp_path: Path) -> None:
    def frames() -> Iterator[SampleFrame]:
        yield from iostat.iter_parse(LOG.open("rb"), Source(path=str(LOG)),
                                          chunk_bytes=1 << 14)
        raise InputFormatError("late.txt", 99, "a bad line at the end")

    with pytest.raises(InputFormatError, match=r"late\.txt:99: a bad line at the end"):
        parquet.write_frames(frames(), tmp_path / "o.parquet")
    assert not _parse_threads()


def test_a_file_that_cannot_be_created_fails_before_any_parsing(tmp_path: Path) -> None:
    # (polars itself would say so only after reading the whole source: here without end)
    produced = 0

    def frames() -> Iterator[SampleFrame]:
        nonlocal produced
        one = iostat.parse(LOG.read_bytes(), Source(path=str(LOG)))
        while True:
            produced += 1
            yield one

    with pytest.raises(OSError, match="No such file or directory"):
        parquet.write_frames(frames(), tmp_path / "no" / "such" / "dir" / "o.parquet")
    assert produced == 0
    assert not _parse_threads()


def test_no_frames_write_an_empty_file_of_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    assert parquet.write_frames(iter(()), out) == 0
    back = SampleFrame.read_parquet(out)
    assert len(back) == 0
    assert back.df.schema == SampleFrame.empty().df.schema
