"""importers.base.Source: what a lenient import lists of the lines it skipped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iogauge.importers.base import MAX_LISTED_SKIPS, Source


@given(st.lists(st.one_of(st.none(), st.integers(1, 200)), max_size=60), st.randoms())
def test_skipped_lines_are_listed_in_line_order_whatever_order_they_are_met(
        lines: list[int | None], rnd: object) -> None:
    """The first MAX_LISTED_SKIPS skipped lines of the file, in line order (those without a
    line after them), however a reader met them; every skip is counted."""
    met = list(lines)
    rnd.shuffle(met)  # type: ignore[attr-defined]
    src = Source(path="x", lenient=True)
    for line_no in met:
        src.bad_line(line_no, f"reason {line_no}")
    want = sorted(lines, key=lambda n: (n is None, n or 0))[:MAX_LISTED_SKIPS]
    assert src.skipped == len(lines)
    assert src.skipped_examples == [
        f"line {n}: reason {n}" if n is not None else "file: reason None" for n in want]


def test_skip_with_a_count_counts_them_all_and_lists_one() -> None:
    src = Source(path="x", lenient=True)
    src.skip(None, "further unreadable lines", count=7)
    src.skip(12, "bad field")
    assert src.skipped == 8
    assert src.skipped_examples == ["line 12: bad field", "file: further unreadable lines"]
