"""Binary sysstat data files (``/var/log/sa/saDD``, ``/var/log/sysstat/saDD``, what ``sadc``
writes), read natively: no ``sadf`` is needed, on any OS ([sysstat] sa.h).

Read: the formats of sysstat 9.1.6 to 12.7.x (format magics 0x2171, 0x2173, 0x2175; see
:mod:`.layout`), written on a little- or a big-endian machine (x86_64, arm64 / ppc64,
s390x), 64- or 32-bit. The disk activity gives sar -d's rows (tps, rkB/s, wkB/s, dkB/s,
areq-sz, aqu-sz, await, %util, computed as sar computes them: :mod:`.rates`) and CPU "all"
their sar -u context; other activities are passed over by their declared sizes. RESTART
records start a new reference (no row spans a reboot); COMMENT records are quoted in a
note. A file cut inside a record (a copy cut short, or still being written by sadc) keeps
every whole record, with a note of where it ends. Anything else that is not what sadc
writes is an error naming the file and the byte offset.

Device names: :mod:`.devices`. The former reader, which runs this machine's sadf, stays as
``--format sa-sadf`` (:mod:`iogauge.importers.sa_binary`): a file from a sysstat newer
than this reader (a format magic it does not know) is read there by an up-to-date sadf.
"""

from __future__ import annotations

import contextlib
import io
import mmap
from collections.abc import Callable, Iterator
from functools import cache
from typing import BinaryIO

import numpy as np
import polars as pl

from iogauge.errors import BinaryFormatError, InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.sa import devices
from iogauge.importers.sa.codecs import DiskCounters
from iogauge.importers.sa.layout import A_DISK, Buffer, Generation, Layout, byte_order, read_layout
from iogauge.importers.sa.rates import (
    CPU_COLUMNS,
    DISK_COLUMNS,
    cpu_percentages,
    disk_rates,
)
from iogauge.importers.sa.records import Comment, Cut, Restart, Stats, iter_records
from iogauge.importers.sadf_common import fallback_host
from iogauge.importers.sar_text.common import device_kind_and_parent
from iogauge.model.sampleframe import SampleFrame

NAME = "sa"
DESCRIPTION = ("binary sysstat sa data files (saDD) of sysstat 9.1.6 to 12.7.x, little- or "
               "big-endian, read natively (no sadf needed)")
EXPECTS = "the sysstat file magic 0xd596 in the first two bytes (either byte order)"
#: Rows per SampleFrame handed on by :func:`iter_parse` (some 20 MB of SampleFrame).
ROWS_PER_FRAME = 1 << 16


def sniff_bytes(head: bytes) -> bool:
    """The sysstat magic number at offset 0, in either byte order."""
    return byte_order(head[:2]) is not None


def sniff(head: str) -> bool:
    """A binary sa file is never valid text: :func:`sniff_bytes` decides."""
    del head
    return False


def parse(data: bytes, source: Source) -> SampleFrame:
    """Every disk row of the file (see :func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _buffer(stream: BinaryIO) -> tuple[Buffer, mmap.mmap | None]:
    """The file's bytes: mapped when it is a plain file (not held in memory), else read.
    (A decompressing stream has the compressed file's fileno: it is read.)"""
    if isinstance(stream, (io.BufferedReader, io.FileIO)):
        try:
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # (an empty file, or one that cannot be mapped)
            pass
        else:
            stream.seek(0, io.SEEK_END)  # (the caller reads the size off the stream)
            return mapped, mapped
    return stream.read(), None


def iter_parse(stream: BinaryIO, source: Source, *,
               rows_per_frame: int = ROWS_PER_FRAME) -> Iterator[SampleFrame]:
    """The rows a piece at a time (``rows_per_frame`` rows or so each)."""
    buf, mapped = _buffer(stream)
    try:
        if len(buf) == 0:
            raise BinaryFormatError(source.path, 0, "the file is empty")
        lay = read_layout(buf, source.path)
        yield from _rows(buf, lay, source, rows_per_frame, _releaser(mapped))
    finally:
        if mapped is not None:
            with contextlib.suppress(BufferError):
                mapped.close()


def _releaser(mapped: mmap.mmap | None) -> Callable[[int], None]:
    """A function that gives the pages of the mapped file before an offset back to the
    kernel: they are read once, and would otherwise count in the process's memory until
    the end (100 MB for a 100 MB file)."""
    def release(upto: int) -> None:
        end = upto - upto % mmap.PAGESIZE
        if mapped is not None and end > 0 and hasattr(mapped, "madvise"):
            with contextlib.suppress(OSError, ValueError):
                mapped.madvise(mmap.MADV_DONTNEED, 0, end)
    return release


class _Batch:
    """Rows gathered before they become one SampleFrame."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in (
            *DISK_COLUMNS, "major", "minor", "utc_us", "interval_s", *CPU_COLUMNS)}
        self.rows = 0

    def add(self, rates: dict[str, np.ndarray], stats: Stats, disks: DiskCounters,
            itv_cs: int, cpu: tuple[float, ...] | None) -> None:
        n = len(disks)
        for k, v in rates.items():
            self.cols[k].append(v)
        self.cols["major"].append(disks.cols["major"])
        self.cols["minor"].append(disks.cols["minor"])
        self.cols["utc_us"].append(np.full(n, stats.ust_time * 1_000_000, np.int64))
        self.cols["interval_s"].append(np.full(n, itv_cs / 100.0))
        for k, value in zip(CPU_COLUMNS, cpu or (np.nan,) * len(CPU_COLUMNS), strict=True):
            self.cols[k].append(np.full(n, value))
        self.rows += n

    def frame(self, host: str, local: bool) -> SampleFrame:
        """The rows as a SampleFrame, in the file's order. Names and their kind are worked
        out once per device (the rows point at them), not once per row."""
        data = {k: np.concatenate(v) for k, v in self.cols.items()}
        keys = (data.pop("major").astype(np.uint64) << np.uint64(32)) | data.pop(
            "minor").astype(np.uint64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        names = [devices.device_name(int(k >> np.uint64(32)), int(k & np.uint64(0xFFFFFFFF)),
                                     local=local) for k in uniq]
        ident = [_identity(n) for n in names]
        at = pl.Series(inverse.astype(np.uint32).ravel())
        df = pl.DataFrame(data).with_columns(
            pl.Series("device", names, pl.String()).gather(at),
            pl.Series("device_kind", [k for k, _ in ident], pl.String()).gather(at),
            pl.Series("parent", [p for _, p in ident], pl.String()).gather(at),
            pl.lit(host).alias("host"), pl.lit(NAME).alias("source"),
            pl.from_epoch(pl.col("utc_us"), time_unit="us").dt.replace_time_zone("UTC")
            .alias("ts"),
            *(pl.col(k).fill_nan(None) for k in ("d_kBps", *CPU_COLUMNS)),
        ).drop("utc_us")
        return SampleFrame(df)


@cache
def _identity(name: str) -> tuple[str, str | None]:
    """Kind and parent of a device name (as every sysstat importer gives them)."""
    return device_kind_and_parent(name)


def _rows(buf: Buffer, lay: Layout, source: Source, rows_per_frame: int,
          release: Callable[[int], None]) -> Iterator[SampleFrame]:
    host = lay.nodename or fallback_host(source)
    local = devices.same_host(lay.nodename)
    prev: Stats | None = None
    batch, done, restarts, records, back = _Batch(), 0, 0, 0, 0
    cut = ""
    events = iter_records(buf, lay, source.path)
    while True:
        try:
            event = next(events, None)
        except BinaryFormatError as exc:
            if not source.lenient:
                raise
            source.skip(None, f"{exc.reason}; the rest of the file was not read")
            break
        if event is None:
            break
        if isinstance(event, Restart):
            prev, restarts = None, restarts + 1
        elif isinstance(event, Comment):
            source.note(f"comment in the sa file at offset {event.offset}: {event.text!r}")
        elif isinstance(event, Cut):
            cut = (f"the sa file is cut off: it ends at byte {event.size} inside the "
                   f"record that starts at offset {event.offset}")
            source.note(f"{cut}; the whole records before it were read")
        else:
            records += 1
            if event.disks is None:
                continue  # (no disk activity: the records are still walked and checked)
            if prev is not None and prev.uptime_cs > event.uptime_cs:
                back += 1  # (not one boot: sar would print a wrapped interval)
            elif prev is not None and prev.disks is not None:
                itv = (event.uptime_cs - prev.uptime_cs) or 1
                cpu = (cpu_percentages(prev.cpus, event.cpus)
                       if prev.cpus is not None and event.cpus is not None else None)
                batch.add(disk_rates(prev.disks, event.disks, itv), event, event.disks, itv,
                          cpu)
                if batch.rows >= rows_per_frame:
                    yield batch.frame(host, local)
                    done += batch.rows
                    batch = _Batch()
                    release(event.offset)
            prev = event
    if batch.rows:
        yield batch.frame(host, local)
    elif not any(a.id == A_DISK for a in lay.activities):
        endian = "big" if lay.big_endian else "little"
        raise InputFormatError(source.path, None, f"the sa file (sysstat {lay.version}, "
                               f"{endian}-endian, {lay.machine}) holds {records} statistics "
                               "records but no disk statistics: sadc collects them only "
                               "with '-S DISK' (sa1 -S DISK, SADC_OPTIONS in the sysstat "
                               "configuration)")
    elif not done:
        raise InputFormatError(source.path, None, "the sa file holds no interval of disk "
                               f"statistics ({records} statistics record(s))"
                               + (f"; {cut}" if cut else ""))
    if back:
        source.note(f"{back} record(s) with an uptime below the record before them (not "
                    "the same boot, without a restart record) start a new reference: the "
                    "interval that would span them was left out")
    _notes(lay, source, restarts, local)


def _notes(lay: Layout, source: Source, restarts: int, local: bool) -> None:
    if restarts:
        source.note(f"{restarts} restart record(s) in the file: no interval spans one")
    if lay.generation is not Generation.V2175:
        source.note(f"sa format 0x{lay.generation.value:x} ({lay.generation.writers}) does "
                    "not store the kernel's HZ: 100 assumed, as sadf -c does on Linux")
    if not local:
        source.note(f"the file was written on {lay.nodename or 'an unnamed host'}, not here: "
                    "devices are named by the fixed numbering (sda, loop0, md0...) where it "
                    "applies, else devMAJOR-MINOR as sar does")
