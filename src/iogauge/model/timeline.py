"""The relative time line of reports that carry no time stamps.

``iostat`` run without ``-t`` (Linux, [sysstat]) or ``-T d|u`` (Solaris, AIX; [Goodus]
quotes such output) prints reports with no time at all: a pasted excerpt has neither its start
nor its interval. Rates in it are already per second, so every report can still be judged; it
only cannot be placed on the clock. Without ``--start`` the importers place report k (from 1)
at ``RELATIVE_EPOCH + k * interval``, the interval being ``--interval`` or, when the file does
not hold one, :data:`NOMINAL_INTERVAL_S`. Data ending before :data:`RELATIVE_END` is on this
line (no real capture is dated 1970), so the store and every output recognise it after a round
trip, and findings name the report ("report 3 of 12 (interval not in the file)"), never a
clock time or a duration the file does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

#: Report k of a file without time stamps ends k intervals after this instant.
RELATIVE_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Time lines that end before this are relative (a year of one-second reports fits).
RELATIVE_END = datetime(1971, 1, 1, tzinfo=UTC)
#: The spacing given to reports whose interval is not in the file: one analysis window
#: (analysis.windows.DEFAULT_WINDOW_S), so that each report is judged on its own.
NOMINAL_INTERVAL_S = 60.0
#: What every label of a relative time line says about it.
NO_INTERVAL = "interval not in the file"


def is_relative(ts: datetime | None) -> bool:
    """True for a time on the relative line (None: no time, False)."""
    return ts is not None and ts < RELATIVE_END


def when(start: datetime, end: datetime, line: RelativeTimeline | None) -> str:
    """A span for a reader: ``2026-11-22 10:00:00 - 10:05:00 UTC``, or on the relative
    line ``report 3 of 12 (interval not in the file)``."""
    if line is not None and is_relative(end):
        return line.describe(start, end)
    return f"{start:%Y-%m-%d %H:%M:%S} - {end:%H:%M:%S} UTC"


def placement_note(interval_s: float | None) -> str:
    """What an importer tells the user when it puts reports on the relative line."""
    step = (f"one report every {interval_s:g} s (--interval)" if interval_s is not None else
            f"a nominal {NOMINAL_INTERVAL_S:g} s apart")
    return ("the reports carry no time stamps and no --start was given: they are numbered on "
            f"a relative time line, {step}; findings name reports ('report 2 of 5'), not "
            "clock times (give --start and --interval to place them on the clock)")


@dataclass(frozen=True)
class RelativeTimeline:
    """Reports numbered 1..``reports``, ``interval_s`` apart from :data:`RELATIVE_EPOCH`."""

    interval_s: float
    reports: int

    @classmethod
    def of(cls, last_end: datetime | None, interval_s: float | None) -> RelativeTimeline | None:
        """The time line of data whose last interval ends at ``last_end`` with a median
        interval of ``interval_s``; None when the data is on the clock (or empty)."""
        if not is_relative(last_end) or not interval_s or interval_s <= 0:
            return None
        line = cls(float(interval_s), 0)
        return cls(float(interval_s), max(1, line.report(last_end)))  # type: ignore[arg-type]

    def report(self, end: datetime) -> int:
        """The number of the report that ends at ``end`` (1 = the first)."""
        return round((end - RELATIVE_EPOCH).total_seconds() / self.interval_s)

    def describe(self, start: datetime, end: datetime) -> str:
        """``report 3 of 12 (interval not in the file)``, ``reports 3-5 of 12 (...)``."""
        last = self.report(end)
        first = min(last, self.report(start) + 1)
        which = f"report {last}" if first == last else f"reports {first}-{last}"
        return f"{which} of {self.reports} ({NO_INTERVAL})"

    def window_name(self, window_s: float) -> str:
        """The analysis window in reports: ``report`` (one each), ``5-report``."""
        n = max(1, round(window_s / self.interval_s))
        return "report" if n == 1 else f"{n}-report"

    def windows_text(self, window_s: float) -> str:
        """The analysis windows for a reader: ``one per report``, ``5 reports each``."""
        n = max(1, round(window_s / self.interval_s))
        return "one per report" if n == 1 else f"{n} reports each"

    def to_dict(self) -> dict[str, object]:
        return {"clock": "relative", "reports": self.reports, "interval_s": self.interval_s,
                "note": f"reports without time stamps, numbered ({NO_INTERVAL})"}
