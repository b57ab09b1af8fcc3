"""Every rule's finding titles, rendered over the reference cases, read cleanly.

The reference cases are the fixtures of test_seed_cases.py (tests/fixtures/NOTICE): the
Solaris `iostat -x` reports quoted in [Goodus], the RMF reports of the DS8000 rank case
[Yuge], the perfmon captures with Windows drive names (``E:``, ``2 E:``) [MS-Azure-JP], and
the iostat and Statspack reports of [Insight-SSD9]. A title is what a user pastes into a
ticket: a doubled colon after a drive name ("E:: 99.6 % busy") or any other doubled mark is
a slip.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.analysis.rules import all_rules
from iogauge.importers.registry import import_file

FIX = Path(__file__).resolve().parents[2] / "fixtures"

CASES: list[tuple[str, dict[str, object]]] = [
    *((f"solaris-iostat/{p.name}", {}) for p in sorted((FIX / "solaris-iostat").glob("*.txt"))),
    ("rmf/seed000_before_1rank.txt", {}),
    ("rmf/seed000_after_2ranks.txt", {}),
    *((f"perfmon/{p.name}", {}) for p in sorted((FIX / "perfmon").iterdir())),
    *((f"iostat/{p.name}", {"start": datetime(2007, 8, 21, 10, tzinfo=UTC), "interval_s": 10.0})
      for p in sorted((FIX / "iostat").glob("seed003-*.txt"))),
    ("statspack/sp_817_config5-1-1_hdd_cache1024m.txt", {}),
    ("statspack/sp_817_config5-2-1_ssd_cache1024m.txt", {}),
]

#: A mark written twice (``::``, ``;;``, ``,,``, ``..`` but not an ellipsis), a space before
#: a mark, or a colon and a comma run together.
SLIP = re.compile(r"(?<!\.)([:;,])\1|(?<!\.)\.\.(?!\.)|\s[:;,](?!\S*[:\\/])|[:;,][:;,]")


def _titles() -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for name, kw in CASES:
        r = import_file(FIX / name, **kw)  # type: ignore[arg-type]
        res = analyze(r.frame, r.waits, None, AnalysisOptions(strict=True))
        out += [(name, f.rule, f.title) for f in res.findings]
        out += [(name, "verdict", d.verdict_reason) for d in res.devices]
    return out


def test_titles_have_no_doubled_punctuation() -> None:
    titles = _titles()
    rules = {rule for _n, rule, _t in titles}
    # most rules speak over these cases (the rest need inputs they do not have: --target)
    assert len(rules) >= 8, sorted(rules)
    slips = [(n, rule, t) for n, rule, t in titles if SLIP.search(t)]
    assert not slips, "\n".join(f"{n} [{rule}]: {t}" for n, rule, t in slips)


@pytest.mark.parametrize("text", ["E:: 99.6 % busy", "sdb: busy ,; x", "a..b", "x ,y"])
def test_the_check_sees_a_slip(text: str) -> None:
    assert SLIP.search(text)


def test_windows_drive_names_take_no_second_colon() -> None:
    r = import_file(FIX / "perfmon" / "relog-utf16-azure-2hosts.csv")
    res = analyze(r.frame, r.waits, None, AnalysisOptions(strict=True))
    drives = [f.title for f in res.findings if f.device and f.device.endswith(":")
              and f.title.startswith(f.device)]
    assert drives, "the case has findings about drives"
    assert all(not t.startswith(f"{t.split(' ')[0]}:") for t in drives)
    assert len(all_rules()) >= 10
