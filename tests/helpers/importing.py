"""Helpers for tests of the import paths."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

from iogauge.errors import InputFormatError
from iogauge.importers import iostat
from iogauge.importers.base import Source
from iogauge.model.sampleframe import SampleFrame

#: tests/fixtures folder -> the format id of the inputs in it
FIXTURE_FORMATS = {
    "iostat": "iostat", "iostat-json": "iostat-json", "sar": "sar", "sadf": "sadf",
    "sa": "sa", "solaris-iostat": "solaris-iostat", "unix-sar": "unix-sar",
    "aix-iostat": "aix-iostat", "perfmon": "perfmon", "rmf": "rmf", "statspack": "statspack",
    "awr": "awr", "awr-html": "awr-html", "fio": "fio", "diskstats-snapshots": "diskstats",
    "diskstats": "diskstats",
}


#: sysstat's own expected outputs (tests/fixtures/sysstat/<folder>), by format id
SYSSTAT_FOLDERS = {"iostat": "iostat", "iostat-json": "iostat-json", "sar": "sar",
                   "sadf": "sadf"}


def other_formats_fixtures(fixtures: Path, mine: set[str]) -> list[Path]:
    """Every fixture file except those of the format folders in ``mine`` (a top folder such
    as ``sar``, or the same name under ``sysstat/``, whose outputs are split by format)."""
    out: list[Path] = []
    for d in sorted(fixtures.iterdir()):
        if not d.is_dir() or d.name in mine:
            continue
        for f in sorted(d.rglob("*")):
            rel = f.relative_to(d).parts
            if d.name == "sysstat" and len(rel) > 1 and rel[0] in mine:
                continue
            if f.is_file():
                out.append(f)
    return out


def small_iostat_pieces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the iostat importer stream in pieces of a few kB (the fixtures are small), and
    count the SampleFrames it yields, so that a caller is seen to take the streaming path;
    returns the (growing) list of their row counts."""
    yielded: list[int] = []
    real = iostat.iter_parse

    def small(stream: Any, source: Any) -> Any:
        for frame in real(stream, source, chunk_bytes=4_000, link_bytes=9_000):
            yielded.append(len(frame))
            yield frame

    monkeypatch.setattr(iostat, "iter_parse", small)
    return yielded


def read_outcome(module: ModuleType, data: bytes, chunk: int | None,
                 **kw: Any) -> tuple[Any, ...]:
    """What ``module`` makes of ``data``, read whole (``parse``) or in pieces of ``chunk``
    bytes (``iter_parse``): (rows sorted, notes sorted, lines skipped, their reasons
    sorted), or ("error", message, lines skipped) - to compare the two readings."""
    src = Source(path="x", **kw)
    try:
        if chunk is None:
            df = module.parse(data, src).df
        else:
            frames = list(module.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk))
            df = pl.concat([f.df for f in frames]) if frames else SampleFrame.empty().df
    except InputFormatError as exc:
        return ("error", str(exc), src.skipped)
    return (df.sort(df.columns, nulls_last=True), sorted(src.notes), src.skipped,
            sorted(src.skipped_examples))


def reading_variants(folder: Path, kw: dict[str, Any], pattern: str = "*.txt"
                     ) -> list[tuple[str, bytes, dict[str, Any]]]:
    """(id, text, Source keywords) for every ``pattern`` fixture in ``folder``: whole, cut
    short inside and at a line end, three times over, with blanks after its last line
    break, with a line lost and with a line doubled, each strict and ``--lenient``."""
    out: list[tuple[str, bytes, dict[str, Any]]] = []
    for path in sorted(folder.glob(pattern)):
        data = path.read_bytes()
        lines = data.split(b"\n")
        mid = len(lines) // 2
        cases = {"whole": data, "x3": data * 3, "cut": data[: len(data) * 2 // 3],
                 "cut-at-line": b"\n".join(lines[:mid]) + b"\n",
                 "blank-tail": data + b"   ",
                 "line-lost": b"\n".join(lines[:mid] + lines[mid + 1:]),
                 "line-doubled": b"\n".join([*lines[:mid], lines[mid], *lines[mid:]])}
        for name, text in cases.items():
            for lenient in (False, True):
                out.append((f"{path.name}:{name}:{lenient}", text, {**kw, "lenient": lenient}))
    return out


Outcome = tuple[Any, ...]


def assert_pieces_agree(module: ModuleType, data: bytes, chunks: Iterable[int],
                        kw: dict[str, Any], label: str,
                        relax: Callable[[Outcome, Outcome], tuple[Outcome, Outcome]]
                        | None = None) -> None:
    """``module`` read in pieces of each of ``chunks`` bytes gives what one read of the
    whole gives (:func:`read_outcome`): the same rows, notes and refused lines, or the same
    error. ``relax`` may drop from both outcomes what a reading in pieces decides on its own
    (it gets and returns (pieces, whole))."""
    whole = read_outcome(module, data, None, **kw)
    for chunk in chunks:
        got = read_outcome(module, data, chunk, **kw)
        if isinstance(whole[0], str):
            assert got[:2] == whole[:2], (label, chunk)
            continue
        want = whole
        if relax is not None:
            got, want = relax(got, want)
        assert got[0].equals(want[0]), (label, chunk)
        assert got[1:] == want[1:], (label, chunk)


def as_printed(frame: SampleFrame) -> SampleFrame:
    """The frame's measures as sysstat prints them: two decimals, by C's %.2f, which
    Python's format shares (correctly rounded from the binary value); interval_s kept."""
    df = frame.df.with_columns(
        pl.col(c).map_elements(lambda v: float(f"{v:.2f}"), return_dtype=pl.Float64())
        for c, t in frame.df.schema.items() if t == pl.Float64() and c != "interval_s")
    return SampleFrame(df)
