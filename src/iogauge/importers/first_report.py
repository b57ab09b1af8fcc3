"""Whether an iostat file's first report is the since-boot average, decided on evidence.

``iostat`` prints, first, an average over the time since boot ([sysstat] iostat(1); Solaris
iostat(8), which [Goodus] reads; AIX iostat): in a whole capture that report is not a measured
interval and is left out of the analysis. A file shows it is a whole capture by a banner
(Linux ``Linux … (host) date``) or by starting where the command's output starts (the
Solaris/AIX title line or ``-T`` stamp). Two things overrule that rule of the format:

* the report is implausible as an average since boot: a device at least
  :data:`IMPLAUSIBLE_BUSY_PCT` busy averaged over days of uptime does not happen, while an
  excerpt pasted from a ticket ([Goodus]'s ssd2 at 100 %b, 137.8 ms) often starts just there;
* the user says so: ``--first-report measured|since-boot``.

Every decision is stated in a note: which was assumed, and why.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from iogauge.importers.base import Source

#: A first report with a device at least this busy is not read as a since-boot average.
IMPLAUSIBLE_BUSY_PCT = 90.0


class FirstReport(Enum):
    """``--first-report``: how to read a file's first report."""

    AUTO = "auto"  # decided on the file's evidence (the module docstring)
    MEASURED = "measured"  # a measured interval like the others (an excerpt)
    SINCE_BOOT = "since-boot"  # iostat's since-boot average (left out of the analysis)


def since_boot(source: Source, *, shown_by: str | None, busiest: tuple[str, float] | None,
               what: str = "the first report") -> bool:
    """Whether ``what`` is taken as the since-boot average, with a note saying why.

    Args:
        source: the file (its ``first_report`` choice; the note goes there).
        shown_by: the evidence that it is a since-boot average (``"the 'Linux …' banner
            before it"``), or why the file does not show it (None: the file starts
            mid-capture; then ``busiest`` is not looked at).
        busiest: the busiest device of that report and its %util / %b, if known.
    """
    choice = source.first_report
    if choice is FirstReport.SINCE_BOOT:
        source.note(f"{what} is taken as iostat's since-boot average (--first-report "
                    "since-boot) and left out of the analysis")
        return True
    if choice is FirstReport.MEASURED:
        source.note(f"{what} is read as a measured interval (--first-report measured)")
        return False
    if shown_by is None:
        source.note(f"{what} is read as a measured interval: the file starts mid-capture, "
                    "so it is not iostat's since-boot average (--first-report since-boot "
                    "to override)")
        return False
    if busiest is not None and busiest[1] >= IMPLAUSIBLE_BUSY_PCT:
        source.note(f"{what} is read as a measured interval, not iostat's since-boot "
                    f"average: {busiest[0]} is {busiest[1]:g} % busy in it, which an average "
                    f"since boot cannot plausibly be (>= {IMPLAUSIBLE_BUSY_PCT:g} %); the file "
                    "is taken as an excerpt (--first-report since-boot to override)")
        return False
    source.note(f"{what} is taken as iostat's since-boot average ({shown_by}) and left out "
                "of the analysis (--first-report measured if the file is an excerpt)")
    return True


def busiest(report: pl.DataFrame) -> tuple[str, float] | None:
    """The busiest device of one report's rows (``device``, ``util_pct``) and its %util;
    None when the source has no busy figure."""
    if report.height == 0 or "util_pct" not in report.columns:
        return None
    top = report.drop_nulls("util_pct").sort("util_pct", descending=True).head(1)
    if top.height == 0:
        return None
    return str(top["device"][0]), float(top["util_pct"][0])
