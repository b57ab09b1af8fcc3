"""SampleFrames streamed into one Parquet file while they are being parsed.

:func:`write_frames` is what ``iogauge import --parquet`` runs: polars' streaming engine
(``sink_parquet`` over a Python source) encodes and writes the frames as they come, so memory
is bounded by the frames in flight, not by the file.

The frames are produced (the files parsed) in a thread of their own, at most
:data:`AHEAD` frames ahead of the writer. A plain generator would be pulled by the engine
only when it wants the next batch, so parsing and encoding took turns; with the thread they
overlap (parsing holds the GIL for its Python steps; polars encodes without it). Measured on
``benchmarks/import_speed.py``'s 100 MB ``iostat -x -t`` log on a 2-CPU host, parse and write
without start-up, 6 runs each, alternating: 0.58-0.82 s (mean 0.76 s) in the thread against
0.74-1.16 s (mean 0.89 s) pulled.

Failures keep their type and message: an exception of the frames (an
:class:`~iogauge.errors.InputFormatError` naming file and line) is raised again in the
writer's place. The file is created before anything is parsed, because polars reports a file
it cannot create (or a write that fails) only after it has read the whole source; once
:func:`write_frames` returns or raises, the parsing thread has stopped (it is told to at
its next frame) and been joined.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import polars as pl

    from iogauge.model.sampleframe import SampleFrame

#: Frames parsed ahead of the writer. Each is one piece of the input (a few MB of text,
#: some 30,000 rows for iostat), so this bounds the extra memory; two keep the writer fed
#: while the next one is parsed.
AHEAD = 2

#: Seconds between the parsing thread's checks that the writer is still there.
_POLL_S = 0.1


class _Failed:
    """An exception of the frames, carried to the writer's thread."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_END = object()


def write_frames(frames: Iterable[SampleFrame], path: str | Path, *,
                 row_group_size: int | None = None) -> int:
    """Write every row of ``frames`` to the Parquet file ``path`` (zstd, statistics, the
    SampleFrame schema, as :meth:`SampleFrame.to_parquet`); returns the number of rows.

    ``frames`` is iterated in a thread of its own (see the module docstring); whatever it
    raises is raised here. ``row_group_size``: rows per row group (default: polars')."""
    from polars.io.plugins import register_io_source  # noqa: PLC0415 - polars is slow to load

    from iogauge.model.sampleframe import SCHEMA  # noqa: PLC0415

    ahead: queue.Queue[object] = queue.Queue(maxsize=AHEAD)
    stop = threading.Event()
    counted = [0]

    def put(item: object) -> bool:
        """Queue ``item`` for the writer; False once the writer has stopped."""
        while not stop.is_set():
            try:
                ahead.put(item, timeout=_POLL_S)
            except queue.Full:
                continue
            return True
        return False

    def produce() -> None:
        it = iter(frames)
        try:
            for frame in it:
                counted[0] += len(frame)
                if not put(frame.df):
                    return
                del frame  # not held while the next one is parsed
        except BaseException as exc:  # noqa: BLE001 - raised again in the writer's thread
            put(_Failed(exc))
            return
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()  # a generator's files are closed in the thread that read them
        put(_END)

    def batches(with_columns: list[str] | None, predicate: Any, n_rows: int | None,
                batch_size: int | None) -> Iterator[pl.DataFrame]:
        while not stop.is_set():
            item = ahead.get()
            if item is _END:
                stop.set()  # (a second call of the source ends at once)
                return
            if isinstance(item, _Failed):
                stop.set()
                raise item.exc
            yield cast("pl.DataFrame", item)

    # polars reports a file it cannot create only after it has read the whole source, so
    # create it first: a wrong path fails before any parsing
    Path(path).open("wb").close()
    worker = threading.Thread(target=produce, name="iogauge-parse", daemon=True)
    worker.start()
    try:
        register_io_source(batches, schema=SCHEMA).sink_parquet(
            path, compression="zstd", statistics=True, row_group_size=row_group_size)
    finally:
        stop.set()
        worker.join()
    return counted[0]
