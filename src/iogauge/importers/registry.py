"""Pick an importer by sniffing, run it, and say why every format refused an unknown file.

Modules load lazily (``iogauge import`` of one iostat log should not import the RMF parser).
The order of :data:`FORMATS` is the sniffing priority: more specific formats first, so a
``sadf -j`` document is not taken for ``iostat -o JSON`` and a ``sadf -d`` CSV is not taken
for anything looser.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import importlib.util
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import cast
from zoneinfo import ZoneInfo

from iogauge.errors import InputFormatError, IogaugeError
from iogauge.importers.base import ImporterModule, ImportResult, Source
from iogauge.importers.first_report import FirstReport
from iogauge.importers.io import compression_of, is_read_error, open_binary, read_head
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame

#: format id -> module, in sniffing priority order.
FORMATS: dict[str, str] = {
    "sa": "iogauge.importers.sa",
    "sa-sadf": "iogauge.importers.sa_binary",
    "sadf": "iogauge.importers.sadf",
    "iostat-json": "iogauge.importers.iostat_json",
    "fio": "iogauge.importers.fio_json",
    "perfmon": "iogauge.importers.perfmon",
    "rmf": "iogauge.importers.rmf",
    "awr-html": "iogauge.importers.awr_html",
    "awr": "iogauge.importers.awr",
    "statspack": "iogauge.importers.statspack",
    "aix-iostat": "iogauge.importers.aix_iostat",
    "solaris-iostat": "iogauge.importers.solaris_iostat",
    "unix-sar": "iogauge.importers.unix_sar",
    "sar": "iogauge.importers.sar_text",
    "iostat": "iogauge.importers.iostat",
    "diskstats": "iogauge.importers.diskstats_snapshots",
}


@contextlib.contextmanager
def importer_guard(path: str | Path, name: str) -> Iterator[None]:
    """Run an importer: anything it raises that is not an :class:`IogaugeError` (a bug:
    an importer refuses what it cannot read with InputFormatError) becomes an
    InputFormatError that names the file, so the CLI says which file and goes on to the
    others instead of ending in a traceback; the original stays chained for a debugger.

    pyo3's PanicException (a panic inside polars) derives from BaseException, so that is
    what is caught, minus what stops the program (Ctrl-C, exit, generator close)."""
    try:
        yield
    except (IogaugeError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:
        if is_read_error(exc):
            raise  # a corrupt or cut compressed file: the caller says "cannot read"
        what = (str(exc).strip().splitlines() or [""])[0][:200]
        raise InputFormatError(path, None, f"the {name} importer failed unexpectedly "
                               f"({type(exc).__name__}: {what}); this is a bug in iogauge, "
                               "please report it with this file") from exc


class UnknownFormatError(IogaugeError):
    """No importer recognised a file. The message lists every format and what it expects."""

    def __init__(self, path: str, reasons: Sequence[tuple[str, str]]) -> None:
        self.path = path
        self.reasons = list(reasons)
        lines = [f"{path}: format not recognised; tried:"]
        lines += [f"  {name}: {why}" for name, why in reasons]
        lines.append("use --format NAME to force one")
        super().__init__("\n".join(lines))


def available() -> list[str]:
    """Format ids whose module is installed, in priority order."""
    return [name for name, mod in FORMATS.items() if importlib.util.find_spec(mod) is not None]


def load(name: str) -> ImporterModule:
    if name not in FORMATS:
        raise IogaugeError(f"unknown format {name!r}; known: {', '.join(FORMATS)}")
    try:
        module = importlib.import_module(FORMATS[name])
    except ModuleNotFoundError as exc:
        raise IogaugeError(f"format {name!r} is not available in this build") from exc
    return cast(ImporterModule, module)


def detect(head_bytes: bytes, path: str = "<input>") -> str:
    """The first format (in priority order) whose sniffer accepts ``head_bytes``."""
    reasons: list[tuple[str, str]] = []
    for name in available():
        module = load(name)
        if module.sniff_bytes(head_bytes):
            return name
        reasons.append((name, f"expects {module.EXPECTS}"))
    raise UnknownFormatError(path, reasons)


def expand(patterns: Iterable[str]) -> list[Path]:
    """Files named by ``patterns`` (globs allowed, ``**`` recursive), in order, de-duplicated.

    A pattern that names nothing is an error: a typo must not import zero files quietly.
    """
    out: list[Path] = []
    seen: set[Path] = set()
    for pat in patterns:
        if glob.has_magic(pat):
            matches = sorted(Path(p) for p in glob.glob(pat, recursive=True))  # noqa: PTH207 - user globs may be absolute
            matches = [m for m in matches if m.is_file()]
            if not matches:
                raise InputFormatError(pat, None, "no file matches this pattern")
        else:
            p = Path(pat)
            if not p.exists():
                raise InputFormatError(pat, None, "no such file")
            if p.is_dir():
                raise InputFormatError(pat, None, "is a directory (use a glob such as "
                                       f"'{pat}/*')")
            matches = [p]
        for m in matches:
            key = m.resolve()
            if key not in seen:
                seen.add(key)
                out.append(m)
    return out


@dataclass
class Opened:
    """One input file opened for import: its format, and its SampleFrames as they are read.

    Attributes:
        path: the file.
        format: the format id used; ``detected``: sniffed (False: ``--format``).
        compression: 'gzip', 'xz', 'bzip2', 'zstd' or None.
        module: the importer.
        source: what the importer reports into (notes, skipped lines, wait events).
        input_bytes, seconds: decompressed size and wall time, once :meth:`frames` is
            exhausted.
    """

    path: Path
    format: str
    detected: bool
    compression: str | None
    module: ImporterModule
    source: Source
    input_bytes: int = 0
    seconds: float = 0.0

    def frames(self) -> Iterator[SampleFrame]:
        """The file's SampleFrames in file order, from the importer's ``iter_parse`` (the
        file is read a piece at a time by the formats that can). Whatever the importer raises
        that is not an IogaugeError names the file (:func:`importer_guard`); a corrupt
        compressed file is a read error naming it."""
        t0 = time.perf_counter()
        stream, kind = open_binary(self.path)
        try:
            with importer_guard(self.path, self.format):
                pieces = self.module.iter_parse(stream, self.source)
            while True:
                with importer_guard(self.path, self.format):
                    piece = next(pieces, None)
                if piece is None:
                    break
                yield piece
                # let go before the next piece is parsed: the consumer has used it
                del piece
            self.input_bytes = stream.tell()
        except Exception as exc:
            if not is_read_error(exc):
                raise
            what = f"cannot decompress ({kind})" if kind else "cannot read (plain)"
            raise InputFormatError(self.path, None, f"{what}: {exc}") from exc
        finally:
            stream.close()
        self.seconds = time.perf_counter() - t0


def open_file(path: str | Path, *, fmt: str | None = None, tz: ZoneInfo | None = None,
              lenient: bool = False, host: str | None = None,
              start: datetime | None = None,
              interval_s: float | None = None,
              date_order: str | None = None,
              first_report: FirstReport = FirstReport.AUTO) -> Opened:
    """Open one file (compressed or not) with the sniffed or the forced format: the one
    entry point of the library (:func:`import_file`) and of ``iogauge import``.

    ``start`` and ``interval_s`` are for outputs that lack time stamps, ``date_order`` for
    dates the file cannot disambiguate, ``first_report`` for an iostat file's first report
    (see :class:`Source`).
    """
    p = Path(path)
    with p.open("rb") as fh:
        first = fh.read(8)
    name = fmt or detect(read_head(p), str(p))
    source = Source(path=str(p), tz=tz, lenient=lenient, host=host, start=start,
                    interval_s=interval_s, date_order=date_order, first_report=first_report)
    return Opened(path=p, format=name, detected=fmt is None, compression=compression_of(first),
                  module=load(name), source=source)


def import_file(path: str | Path, *, fmt: str | None = None, tz: ZoneInfo | None = None,
                lenient: bool = False, host: str | None = None,
                start: datetime | None = None,
                interval_s: float | None = None,
                date_order: str | None = None,
                first_report: FirstReport = FirstReport.AUTO) -> ImportResult:
    """Import one file (:func:`open_file`) whole: every SampleFrame, concatenated."""
    opened = open_file(path, fmt=fmt, tz=tz, lenient=lenient, host=host, start=start,
                       interval_s=interval_s, date_order=date_order, first_report=first_report)
    frames = list(opened.frames())
    frame = frames[0] if len(frames) == 1 else SampleFrame.concat(frames)
    source = opened.source
    return ImportResult(
        path=str(opened.path), format=opened.format, detected=opened.detected,
        compression=opened.compression, frame=frame, waits=WaitEventFrame.concat(source.waits),
        skipped=source.skipped, skipped_examples=source.skipped_examples, notes=source.notes,
        seconds=opened.seconds, input_bytes=opened.input_bytes)
