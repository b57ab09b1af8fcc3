"""The steady state of an ``iostat -x -t`` log: pieces made of whole reports exactly as
iostat prints them, linked in one pass over their reports instead of the general path.

Once a ``-t`` log is in its steady state (the date order and the run's interval decided,
nothing pending or unreadable, no value read as text), a piece of whole reports — stamp,
avg-cpu header, values, blank, the Device header the run had, fixed-width device lines
whose every value the fixed-width decoder reads, blank — needs none of the general path's
stacking, joining and filtering of every line kind: its rows are the device lines as read,
and each report's time, interval, host and CPU values are one pass over the reports. The
frame is then built by the same :func:`.assemble.assemble` and the intervals by the same
:func:`.times.interval` as the general path's, and the tests run every fixture, damaged logs
and a daylight-saving change both ways.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from iogauge.importers.iostat.columns import DEVICE_WIDTH, Layout, cpu_columns
from iogauge.importers.iostat.fixed import decode_lines, device_names, name_groups
from iogauge.importers.iostat.lines import BLANK, CPUH, CPUV, DEVH, ROW, TS, Lines, same_lines
from iogauge.importers.iostat.link import Parser
from iogauge.importers.iostat.times import Run, interval
from iogauge.model.sampleframe import SampleFrame

#: Pieces that are whole reports of a ``-t`` log in its steady state are linked by
#: :func:`link` (in this thread) instead of the general path; False sends every piece
#: through the general path (the tests compare the two).
ENABLED = True


def steady_run(parser: Parser) -> Run | None:
    """The run a piece may continue by :func:`link`, or None.

    The steady state: the date order is decided, nothing is pending or unreadable, no
    value was read as text, and the current run's reports start at their stamps, carry
    avg-cpu values, and have a known interval and a previous time."""
    if (not ENABLED or not parser.started or not parser.times.decided()
            or parser.pending.reports or parser.bad or parser.unclean):
        return None
    run = parser.runs[parser.current_run]
    if not (run.has_ts and run.has_cpu and run.nominal_fixed and run.reports
            and run.nominal_s is not None and run.last_utc is not None):
        return None
    return run


@dataclass
class _Reports:
    """Whole reports of a steady piece, read: the report starts (stamp lines), the device
    lines under each, their layout, values and names, and the avg-cpu values."""

    ts: np.ndarray
    n_rows: np.ndarray
    layout: Layout
    values: list[np.ndarray]
    device: pl.Series
    names: list[str]
    cpu_cols: list[tuple[str, int, int, int]]
    cpu_values: list[np.ndarray]


def link(parser: Parser, lines: Lines, kind: np.ndarray, lo: int, hi: int
         ) -> list[SampleFrame] | None:
    """Lines ``lo`` .. ``hi - 1`` of a piece as whole reports of the steady state, linked
    without the general path; None, with nothing done, when they are not.

    The open report of the general path, if any, is complete (the piece starts with a
    report) and is linked first."""
    run = steady_run(parser)
    if run is None or hi <= lo:
        return None
    got = _read(parser, lines, kind, lo, hi)
    if got is None:
        return None
    stamps = parser.times.steady_stamps(lines, got.ts)
    if stamps is None:
        return None
    # every test passed: from here on the parser's state changes
    frames: list[SampleFrame] = []
    opened = parser.close_open()
    if opened is not None and len(opened):
        frames.append(opened)
    # (the run's last time is read after the general path's open report is linked: its
    # time is the one before this piece's first report)
    frames.append(_frame(parser, run, got, stamps.alias("ts")))
    return frames


def _read(parser: Parser, lines: Lines, kind: np.ndarray, lo: int, hi: int
          ) -> _Reports | None:
    """The piece's lines ``lo`` .. ``hi - 1`` read as whole steady reports, or None."""
    k = kind[lo:hi]
    ts = np.flatnonzero(k == TS)
    if ts.size == 0 or ts[0] != 0:
        return None
    ends = np.append(ts[1:], hi - lo)  # report r is lines ts[r] .. ends[r] - 1
    n_rows = ends - ts - 6
    if (n_rows < 1).any():
        return None
    expect = np.full(hi - lo, ROW, dtype=np.uint8)
    for off, kd in ((0, TS), (1, CPUH), (2, CPUV), (3, BLANK), (4, DEVH)):
        expect[ts + off] = kd
    expect[ends - 1] = BLANK
    if not np.array_equal(k, expect):
        return None
    ts += lo  # indices into the piece from here on
    dev_text = same_lines(lines, ts + 4)
    cpu_text = same_lines(lines, ts + 1)
    lay = parser.layouts.get(dev_text) if dev_text is not None else None
    if (cpu_text is None or lay is None or lay.device_last or lay.part or not lay.cols
            or lay.ends[1] - DEVICE_WIDTH < 2):
        return None
    rows = np.flatnonzero(k == ROW) + lo
    header_len = len(lay.text.encode("utf-8"))
    if not bool((lines.lens[rows] == header_len).all()):
        return None
    values, ok = decode_lines(lines, rows, header_len, lay.fixed_fields())
    grouped = name_groups(lines, rows, DEVICE_WIDTH)
    if grouped is not None:
        names, valid, code = grouped
        named = all(valid)
        device = pl.Series("device", names, dtype=pl.String).gather(pl.Series("code", code))
    else:
        device, named_rows = device_names(lines.matrix(rows, header_len), DEVICE_WIDTH)
        named = bool(named_rows.all())
        names = device.unique().to_list()
    _names, cpu_cols, cpu_width = cpu_columns(cpu_text)
    cpu_at = ts + 2
    if not (ok.all() and named and (lines.lens[cpu_at] == cpu_width).all()):
        return None
    cpu_values: list[np.ndarray] = []
    if cpu_cols:
        cpu_values, cpu_ok = decode_lines(lines, cpu_at, cpu_width,
                                          [(a, b) for _t, _j, a, b in cpu_cols])
        if not cpu_ok.all():
            return None
    return _Reports(ts, n_rows, lay, values, device, names, cpu_cols, cpu_values)


def _frame(parser: Parser, run: Run, got: _Reports, stamps: pl.Series) -> SampleFrame:
    """The SampleFrame of steady reports ``got`` stamped ``stamps``; the run goes on."""
    n_rep = got.ts.size
    first = parser.next_report
    ids = pl.int_range(first, first + n_rep, eager=True, dtype=pl.Int64).alias("report")
    nominal = pl.lit(run.nominal_s, dtype=pl.Float64)
    prev = pl.lit(run.last_utc, dtype=pl.Datetime("us", "UTC"))
    reports = pl.DataFrame([ids, stamps]).with_columns(
        interval(prev, nominal).alias("interval_s"),
        pl.lit(False).alias("since_boot"),  # not a run's first report
        pl.lit(run.host or parser.times.host_default, dtype=pl.String).alias("host"),
        *[pl.Series(target, v) for (target, _j, _a, _b), v in zip(got.cpu_cols,
                                                                    got.cpu_values,
                                                                    strict=True)])
    rows = pl.DataFrame({"report": np.repeat(np.arange(first, first + n_rep), got.n_rows),
                         "device": got.device, **got.layout.columns(got.values)})
    run.last_utc = stamps[-1]
    parser.next_report += n_rep
    run.reports += n_rep
    parser.last_size = (run.run_id, 4 + int(got.n_rows[-1]))  # stamp, avg-cpu x2, Device
    return parser.assemble(rows, reports, got.names)
