"""The zone of a sar text file from a ksar footer (``## EndTime:`` / ``## EndTimeUTC:``),
read from the end of a plain, mapped or compressed file."""

from __future__ import annotations

import io
import mmap
import re
from collections.abc import Iterable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.io import compression_of, is_read_error, open_binary
from iogauge.importers.sar_text.state import _Carry


def _footer_offset(texts: Iterable[str]) -> int | None:
    """The UTC offset (s) a ksar footer states by its last ``## EndTime:`` and ``##
    EndTimeUTC:`` lines among ``texts``, or None."""
    local = utc = None
    for text in texts:
        m = re.match(r"^##\s*EndTime(UTC)?:\s*(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", text)
        if m:
            stamp = datetime.fromisoformat(m.group(2))
            if m.group(1):
                utc = stamp
            else:
                local = stamp
    if local is None or utc is None:
        return None
    return int((local - utc).total_seconds())


def _tail_offset(stream: BinaryIO) -> int | None:
    """The offset stated by the last ksar footer in ``stream`` (the one a read of the whole
    file takes), looked up before the stream is read when that is cheap (a plain file or
    bytes, searched for ``EndTime`` without being read into Python), else None (a
    compressed file: see :func:`_compressed_tail_offset`)."""
    if isinstance(stream, io.BytesIO):
        return _footer_in(stream.getvalue())  # (CPython hands over its bytes: no copy)
    if not isinstance(stream, io.BufferedReader | io.FileIO) or not stream.seekable():
        return None  # (also a named pipe opened as a file)
    try:
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return _footer_in(mapped)
    except (ValueError, OSError):  # (an empty file cannot be mapped)
        return None


def _compressed(stream: BinaryIO, path: str) -> str | None:
    """``path`` when ``stream`` is a compressed file's (whose tail :func:`_tail_offset`
    cannot look up), else None."""
    if isinstance(stream, io.BytesIO | io.BufferedReader | io.FileIO):
        return None
    try:
        with Path(path).open("rb") as fh:
            return path if compression_of(fh.read(8)) is not None else None
    except OSError:
        return None


def _compressed_tail_offset(path: str) -> int | None:
    """The offset the last ksar footer of the compressed file ``path`` states: the file is
    decompressed a second time, a MiB at a time, keeping only its ``## EndTime`` lines
    (asked for once, by the first piece without a footer of its own; a 100 MB gzip file
    takes some 0.3 s more). None when it has none or cannot be read (the reading itself then
    says why)."""
    texts: list[str] = []
    try:
        stream, _ = open_binary(path)
        with stream:
            rest = b""
            while block := stream.read(1 << 20):
                block = rest + block
                cut = block.rfind(b"\n") + 1
                if b"EndTime" in block[:cut]:
                    texts += _footer_lines(block[:cut])
                rest = block[cut:]
            texts += _footer_lines(rest)
    except Exception as exc:
        if isinstance(exc, InputFormatError) or is_read_error(exc):
            return None
        raise
    return _footer_offset(texts)


def _footer_in(view: mmap.mmap | bytes) -> int | None:
    """:func:`_footer_offset` of the ``## EndTime`` lines in ``view``."""
    return _footer_offset(_footer_lines(view))


def _footer_lines(view: mmap.mmap | bytes) -> list[str]:
    """The ``## EndTime`` lines in ``view``."""
    texts: list[str] = []
    at = view.find(b"EndTime")
    while at >= 0:
        start = view.rfind(b"\n", 0, at) + 1
        end = view.find(b"\n", at)
        line = bytes(view[start:end if end >= 0 else len(view)])
        if line.startswith(b"##"):
            texts.append(line.decode("utf-8", errors="replace"))
        at = view.find(b"EndTime", at + 7)
    return texts


def _zone_of(lines: pl.DataFrame, source: Source, carry: _Carry
             ) -> tuple[tzinfo | None, int | None]:
    """(zone, fixed UTC offset in seconds) of the reports in ``lines``: a ksar footer's
    EndTime/EndTimeUTC pair wins (the file states its own offset) - the piece's own, else
    the one that ends the file, else the last one before the piece -, then --tz; (None, None)
    means assume UTC."""
    foot = lines.filter(pl.col("line").str.starts_with("## EndTime"))["line"].to_list()
    own = _footer_offset(foot)
    if own is not None:
        carry.offset = own
    elif carry.tail_path is not None:  # (a compressed file: its tail looked up now, once)
        carry.tail_offset, carry.tail_path = _compressed_tail_offset(carry.tail_path), None
    offset = own if own is not None else (carry.tail_offset if carry.tail_offset is not None
                                          else carry.offset)
    if offset is not None:
        source.note(f"local times converted to UTC with the offset {offset / 3600:+.2f} h "
                    "stated by the file's EndTime/EndTimeUTC footer")
        return None, offset
    if source.tz is not None:
        return source.tz, None
    return None, None
