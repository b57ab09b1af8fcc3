"""Verdict of every device in every real capture: device -> verdict -> deciding evidence.

Runs ``iogauge analyze --json`` on each file under a samples directory (default
``../shared/samples`` beside the project) and writes one JSON object, file -> device ->
[verdict, reason, basis]. With ``--baseline OLD.json`` it prints, as a Markdown table,
every device whose verdict changed, and per file the verdict counts before and after.

    python benchmarks/samples_verdicts.py --out after.json
    PYTHONPATH=/path/to/old/src python benchmarks/samples_verdicts.py --out before.json
    python benchmarks/samples_verdicts.py --out after.json --baseline before.json

Not a timing benchmark: the record of how the analysis judges real data, to review a
change to the rules against (the closing notes quote it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def verdicts(samples: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in sorted(p for p in samples.rglob("*") if p.is_file() and p.suffix != ".md"):
        r = subprocess.run([str(Path(sys.executable).parent / "iogauge"), "analyze", "--json",
                            str(f)],
                           capture_output=True, text=True, check=False)
        key = str(f.relative_to(samples))
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines() or ["?"]
            out[key] = {"error": lines[-1][:200]}
            continue
        res = json.loads(r.stdout)
        out[key] = {f"{d.get('host') or ''}:{d['device']}":
                    [d["verdict"], d.get("verdict_reason"), d.get("verdict_basis")]
                    for d in res["devices"]}
    return out


def diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = ["| file | device | before | after | deciding evidence after |",
             "|---|---|---|---|---|"]
    counts = ["", "| file | before | after |", "|---|---|---|"]
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key, {}), after.get(key, {})
        if "error" in b or "error" in a:
            counts.append(f"| {key} | {b.get('error', '')[:60]} | {a.get('error', '')[:60]} |")
            continue
        for dev in sorted(set(b) | set(a)):
            vb, va = b.get(dev, ["-", "", ""]), a.get(dev, ["-", "", ""])
            if vb[0] != va[0]:
                lines.append(f"| {Path(key).name} | {dev.split(':', 1)[-1]} | {vb[0]} | {va[0]} "
                             f"| {va[2]} |")
        cb = Counter(v[0] for v in b.values())
        ca = Counter(v[0] for v in a.values())
        counts.append(f"| {key} | {_fmt(cb)} | {_fmt(ca)} |")
    return lines + counts


def _fmt(c: Counter[str]) -> str:
    return ", ".join(f"{n} {v}" for v, n in sorted(c.items(), key=lambda x: -x[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=Path, default=ROOT.parent / "shared" / "samples")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--baseline", type=Path)
    args = ap.parse_args()
    result = verdicts(args.samples)
    args.out.write_text(json.dumps(result, indent=1))
    if args.baseline is not None:
        print("\n".join(diff(json.loads(args.baseline.read_text()), result)))


if __name__ == "__main__":
    main()
