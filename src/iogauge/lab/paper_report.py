"""What the lab's reproductions of [Oe] share: the paper's figures, the results-table line,
the error type and the report's CSS and helpers.

Its own module so that :mod:`iogauge.lab.experiments` ([Oe] §3) and
:mod:`iogauge.lab.paper_eval` ([Oe] §5) both build on it and neither imports the other's
internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iogauge.errors import IogaugeError


class ExperimentError(IogaugeError):
    """An experiment cannot run (unknown name, emulated device unavailable, fio failed)."""


#: Maximum IOPS on partition A (§3: "A のみの性能最高値がそれぞれ 239iops, 65iops").
PAPER_MAX_A = {"file-share": 239.0, "backup": 65.0}


#: B alone vs A alone (§3: "それぞれ約 90%, 約 89%の性能").
PAPER_B_OVER_A = {"file-share": 0.90, "backup": 0.89}


#: A+B vs A alone (§3: "それぞれ約 70%, 69%の性能").
PAPER_AB_OVER_A = {"file-share": 0.70, "backup": 0.69}


#: Proportional-limit busy rate, % (§3 / Fig. 5).
PAPER_KNEE_PCT = {("file-share", "A"): 90.0, ("file-share", "B"): 90.0,
                  ("file-share", "A+B"): 95.0, ("backup", "A"): 85.0,
                  ("backup", "B"): 80.0, ("backup", "A+B"): 85.0}


#: §4: svctm for the file share on A+B at 80 and 160 IOPS (ms).
PAPER_SVCTM_MS = ((80.0, 5.68), (160.0, 5.72))


#: The knee band the paper observed across its workloads (§4 footnote: "80%-95%").
KNEE_BAND_PCT = (80.0, 95.0)


@dataclass
class Comparison:
    """One line of the results table.

    Attributes:
        finding: what is compared.
        ours: our number, formatted.
        paper: the paper's number, formatted.
        holds: whether our number shows the paper's qualitative finding (None: no claim).
        criterion: what "holds" means here.
    """

    finding: str
    ours: str
    paper: str
    holds: bool | None
    criterion: str

    def __post_init__(self) -> None:
        if self.holds is not None:
            self.holds = bool(self.holds)  # numpy comparisons give numpy booleans


def holds_text(h: bool | None) -> str:
    return "-" if h is None else ("yes" if h else "NO")


REPORT_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d232a}
h1{font-size:1.4rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.6rem 0 .4rem}
.meta{color:#5b6670;margin-bottom:1rem}
table{border-collapse:collapse;margin:.5rem 0}
th,td{padding:.25rem .6rem;border-bottom:1px solid #dde3e8;text-align:right}
th:first-child,td:first-child,td:last-child,th:last-child{text-align:left}
th{background:#f3f6f8}.no{color:#b3261e;font-weight:600}.yes{color:#1b7f3b}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
figure{margin:0}figcaption{font-size:.85rem;color:#5b6670;max-width:400px}
svg{background:#fbfcfd;border:1px solid #dde3e8}
"""


def nice_ceiling(v: float) -> float:
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * mag:
            return float(m * mag)
    return float(10 * mag)


__all__ = ["KNEE_BAND_PCT", "PAPER_AB_OVER_A", "PAPER_B_OVER_A", "PAPER_KNEE_PCT", "PAPER_MAX_A",
           "PAPER_SVCTM_MS", "REPORT_CSS", "Comparison", "ExperimentError", "holds_text",
           "nice_ceiling"]
