"""paper-sec3: the knee finder, the qualitative findings of seed 004 §3 as assertions (with
our numbers printed beside the paper's), the report files, and the CLI command."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from iogauge.lab.experiments import (
    APPROXIMATIONS,
    KNEE_BAND_PCT,
    QUICK,
    CaseResult,
    ExperimentError,
    Sec3Config,
    Sec3Result,
    compare_sec3,
    find_knee,
    paper_sec3,
    report_html,
    results_markdown,
    write_outputs,
)
from iogauge.lab.simulator import SweepPoint


def test_find_knee_on_a_line_that_bends() -> None:
    # util = 2 + 0.5 * iops up to 160 IOPS (82 %), then IOPS stalls while util climbs.
    pts: list[tuple[float, float]] = [(x, 2 + 0.5 * x) for x in (30, 60, 90, 120, 140, 160)]
    pts += [(166.0, 92.0), (168.0, 100.0)]
    k = find_knee(pts, tol=0.05)
    assert k.intercept_pct == pytest.approx(2.0)
    assert k.slope_pct_per_iops == pytest.approx(0.5)
    assert k.busy_per_iops_ms == pytest.approx(5.0)
    # The knee is the paper's proportional-limit busy rate: the last point on the line.
    assert k.knee_util_pct == pytest.approx(82.0)
    assert k.knee_iops == pytest.approx(160.0)
    assert k.beyond_util_pct == pytest.approx(92.0)
    # Shortfall at (166, 92): 1 - 166/180 = 7.8 %; at (160, 82): 0. 5 % is crossed at
    # 82 + 0.05 / 0.0778 * 10 = 88.4 %util.
    s = 1 - 166 / 180
    assert k.tol_util_pct == pytest.approx(82 + 0.05 / s * 10)
    assert k.tol_iops == pytest.approx(160 + 0.05 / s * 6)


def test_find_knee_on_a_straight_line_and_errors() -> None:
    pts = [(x, 0.4 * x) for x in range(20, 260, 20)]
    k = find_knee(pts)
    assert k.knee_util_pct == pytest.approx(96.0)  # the highest point: linear throughout
    assert k.knee_iops == pytest.approx(240.0)
    assert k.beyond_util_pct is None and k.tol_util_pct is None and k.tol_iops is None
    with pytest.raises(ValueError, match="at least 2 points"):
        find_knee([(10.0, 5.0), (200.0, 99.0)])


def test_find_knee_looks_past_a_stray_point_below_the_line() -> None:
    # One run 3 % below the line at 50 %util (more than the 2 % of the edge, less than the
    # 5 % that ends the linear range) does not end it: the runs above are on the line.
    pts = [(x, 0.5 * x) for x in (40.0, 80.0, 120.0, 140.0, 160.0)]
    pts += [(97.0, 50.0), (164.0, 99.0)]
    k = find_knee(pts)
    assert k.knee_util_pct == pytest.approx(80.0)
    assert k.beyond_util_pct == pytest.approx(99.0)


def test_find_knee_reports_the_edge_of_a_shallow_cliff() -> None:
    # util = 2 + 0.5 * iops up to 180 IOPS (92 %), then a wall at 182 IOPS: 97 % is only
    # 1 - 182/190 = 4.2 % short of the line (still "on" it for the 5 % crossing), 99 % is
    # 1 - 182/194 = 6.2 % short. The knee is the last point within 2 % of the line -- the
    # wall's edge, the 92 % one (seed 004's file share on A+B) -- and the 5 % crossing lies
    # up the wall.
    pts: list[tuple[float, float]] = [(x, 2 + 0.5 * x) for x in (40.0, 80.0, 120.0, 160.0, 180.0)]
    pts += [(182.0, 97.0), (182.0, 99.0)]
    k = find_knee(pts)
    s0, s1 = 1 - 182 / 190, 1 - 182 / 194
    assert k.tol_util_pct == pytest.approx(97 + (0.05 - s0) / (s1 - s0) * 2)
    assert k.knee_util_pct == pytest.approx(92.0)
    assert k.beyond_util_pct == pytest.approx(97.0)
    # A looser edge tolerance takes the wall's first point as still linear.
    assert find_knee(pts, edge_tol=0.045).knee_util_pct == pytest.approx(97.0)


def _case(name: str, placement: str, max_iops: float, capped: list[float]) -> CaseResult:
    pts = [SweepPoint(rate_iops=x, iops=x, util_pct=0.5 * x, await_ms=10.0) for x in capped]
    return CaseResult(workload=name, placement=placement, max_iops=max_iops,
                      max_util_pct=100.0, points=pts,
                      fit=find_knee([(p.iops, p.util_pct) for p in pts]))


def test_the_maximum_at_full_util_is_compared_with_the_best_capped_run() -> None:
    # Seed 004 §3: "%util が 100% で最高性能値に達している". An uncapped run 0.5 % below
    # the best capped one still counts (the runs scatter); one 5 % below does not.
    cases = {("file-share", "A"): _case("file-share", "A", 199.0, [40.0, 80.0, 120.0, 200.0]),
             ("backup", "A"): _case("backup", "A", 95.0, [40.0, 60.0, 80.0, 100.0])}
    res = Sec3Result(config=QUICK, mode="sim", profile="p", profile_description="d",
                     cases=cases)
    rows = {r.finding: r for r in compare_sec3(res)}
    fs = rows["file-share: the most IOPS at 100 %util"]
    bk = rows["backup: the most IOPS at 100 %util"]
    assert fs.holds is True and fs.ours == "A 199 vs 200"
    assert bk.holds is False and bk.ours == "A 95 vs 100"


@pytest.fixture(scope="module")
def sec3() -> Sec3Result:
    # The full-length runs, as `iogauge lab reproduce paper-sec3 --sim` makes them: the
    # quick runs are half as long, and their knees scatter by a point or two more.
    return paper_sec3("sim", Sec3Config(jobs=2))


def test_paper_sec3_reproduces_the_qualitative_findings(sec3: Sec3Result) -> None:
    print("\npaper-sec3 (sim, quick): ours vs seed 004")
    for row in sec3.comparisons:
        print(f"  {row.finding}: ours {row.ours}  paper {row.paper}  holds={row.holds}")
    fs = {p: sec3.case("file-share", p).max_iops for p in ("A", "B", "A+B")}
    bk = {p: sec3.case("backup", p).max_iops for p in ("A", "B", "A+B")}
    for m in (fs, bk):
        # outer > inner > both (seed 004: "A only is highest, then B only, A+B lowest")
        assert m["A"] > m["B"] > m["A+B"]
        assert 0.80 <= m["B"] / m["A"] <= 0.97  # paper: ~90 % / 89 %
        assert 0.55 <= m["A+B"] / m["A"] <= 0.80  # paper: ~70 % / 69 %
    assert fs["A"] / bk["A"] > 1.5  # paper: 239 vs 65 IOPS, 3.7x
    lo, hi = KNEE_BAND_PCT
    knees = {(name, p): sec3.case(name, p).fit.knee_util_pct
             for name in ("file-share", "backup") for p in ("A", "B", "A+B")}
    # Every case is linear up to a knee in the paper's band (seed 004 §3 and §4's footnote:
    # 80-95 %; the paper: file share ~90/90/95 %, backup 85/80/85 %).
    for key, k in knees.items():
        assert k is not None and lo <= round(k) <= hi, (key, k)
    for name in ("file-share", "backup"):
        # Seed 004: A+B's knee is at least A's (file share 95 vs 90 %, backup 85 vs 85 %).
        ab, a = knees[(name, "A+B")], knees[(name, "A")]
        assert ab is not None and a is not None and ab >= a - 1.0
    # The file share's knee is above the backup's (paper: ~90 % vs 80-85 %).
    fa, ba = knees[("file-share", "A")], knees[("backup", "A")]
    assert fa is not None and ba is not None and fa > ba
    # Past the backup's knee %util shoots up: "from there, 2-3 IOPS and the IO busy rate
    # reaches 100 %" (seed 004 §4, on Fig. 4): the first run at 95 %util or more gets at
    # most 3 IOPS more than the knee's.
    for p in ("A", "B"):
        c = sec3.case("backup", p)
        knee_iops = c.fit.knee_iops
        assert knee_iops is not None, p
        wall = min((pt.iops for pt in c.points
                    if pt.rate_iops is not None and pt.util_pct >= 95.0), default=None)
        assert wall is not None and wall - knee_iops <= 3.0, (p, knee_iops, wall)
    # Below the knee busy per IOPS stays put (paper: svctm 5.68 -> 5.72 ms, +0.78 % from 80
    # to 160 IOPS; compared at the knee where the model tops out below 160).
    row = next(r for r in sec3.comparisons if r.finding.startswith("file-share@A+B: util/IOPS"))
    assert row.holds is True, row


def test_paper_sec3_is_deterministic_for_its_seed(sec3: Sec3Result) -> None:
    cfg = dataclasses.replace(sec3.config, jobs=1, workloads=("backup",), placements=("B",))
    again = paper_sec3("sim", cfg)
    a, b = again.case("backup", "B"), sec3.case("backup", "B")
    assert a.max_iops == b.max_iops
    assert [(p.iops, p.util_pct) for p in a.points] == [(p.iops, p.util_pct)
                                                         for p in b.points]


def test_outputs_are_written_and_self_contained(sec3: Sec3Result, tmp_path: Path) -> None:
    paths = write_outputs(sec3, tmp_path / "out")
    assert [p.name for p in paths] == ["results.md", "report.html", "results.json"]
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| file-share / backup max IOPS on A |" in md
    assert "3.68 x (239 / 65)" in md
    assert "| backup: the most IOPS at 100 %util | A " in md
    assert md == results_markdown(sec3)
    page = report_html(sec3)
    assert page.count("<svg") == 6
    assert "<script" not in page
    assert not re.search(r"(src|href)=", page)  # no external resource
    assert "knee" in page
    # The notes on what is approximated are in both, the page's `code` spans as <code>.
    assert md.count("\n* ") >= len(APPROXIMATIONS)
    assert page.count("<li>") == len(APPROXIMATIONS)
    assert "<code>destage_idle_ms</code>" in page
    assert "`" not in page.split("<h2>What is approximated</h2>")[1]


def test_device_mode_without_the_emulated_device_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "iogauge.lab.device", None)
    with pytest.raises(ExperimentError, match="emulated device is unavailable"):
        paper_sec3("device", QUICK)


def test_cli_reproduce_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from iogauge.cli.lab_reproduce_cmd import reproduce

    app = typer.Typer()
    app.command()(reproduce)
    runner = CliRunner()
    r = runner.invoke(app, ["paper-sec9", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "unknown experiment 'paper-sec9'" in r.output
    monkeypatch.setitem(sys.modules, "iogauge.lab.device", None)
    r = runner.invoke(app, ["paper-sec3", "--device", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "emulated device is unavailable" in r.output
    assert "Example:" in (reproduce.__doc__ or "")


def test_cli_reproduce_sim_writes_the_table(tmp_path: Path) -> None:
    from iogauge.cli.lab_reproduce_cmd import reproduce

    app = typer.Typer()
    app.command()(reproduce)
    # Two small cases keep this quick.
    r = CliRunner().invoke(app, ["paper-sec3", "--sim", "--quick", "--point-seconds", "60",
                                 "--out", str(tmp_path / "o"), "--jobs", "1",
                                 "--workload", "backup", "-p", "A", "-p", "B"])
    assert r.exit_code == 0, r.output
    assert "backup: B / A max IOPS (inner vs outer): ours" in r.output
    assert (tmp_path / "o" / "report.html").read_text().count("<svg") == 2
    r = CliRunner().invoke(app, ["paper-sec3", "--workload", "oltp", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "not oltp" in r.output
