"""Sources are cited by public keys (docs/references.md), never by private document ids.

Every rule's SOURCE text (what the terminal, JSON and HTML report print under a finding) and
every file under src/, docs/ and README.md must be free of "seed NNN" ids and of references to
the internal design document. The pattern is the one ``grep -rniE 'seed ?0|DESIGN'`` looks
for, except that "design" in lower or mixed case is a word of the product's own vocabulary
(a device's "design latency", the catalog key ``latency_design_ms``): only the capitalised
document name and ``design.md`` count.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import iogauge.analysis.rules

ROOT = Path(__file__).resolve().parents[2]
PRIVATE = re.compile(r"(?i:seed ?0)|DESIGN|(?i:design\.md)")
KEYS = ("[Yuge]", "[Goodus]", "[MS-Azure-JP]", "[Insight-SSD9]", "[Oe]", "[sysstat]",
        "[iostats]", "[cgroup-v2]", "[node_exporter]")


def _rule_sources() -> dict[str, str]:
    """module.NAME -> text for every SOURCE* / *_SRC string in iogauge.analysis.rules."""
    out: dict[str, str] = {}
    pkg = iogauge.analysis.rules
    for info in pkgutil.iter_modules(pkg.__path__, prefix=pkg.__name__ + "."):
        mod = importlib.import_module(info.name)
        for name, value in vars(mod).items():
            if (name.startswith("SOURCE") or name.endswith("_SRC")) and isinstance(value, str):
                out[f"{info.name}.{name}"] = value
    return out


def test_every_rule_source_cites_by_public_key() -> None:
    sources = _rule_sources()
    assert len(sources) >= 14  # one per rule at least: the walk found the rules
    bad = {k: v for k, v in sources.items() if PRIVATE.search(v)}
    assert bad == {}
    assert all(any(key in v for key in KEYS) or "IBM" in v for v in sources.values())


def test_references_doc_gives_every_key() -> None:
    text = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    for key in KEYS:
        assert f"**{key}**" in text, key


def _offending_lines() -> list[str]:
    files = [ROOT / "README.md"]
    for top in ("src/iogauge", "docs"):
        files += [p for p in sorted((ROOT / top).rglob("*"))
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so"]
    out = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if PRIVATE.search(line):
                out.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()[:100]}")
        # an id broken over two lines ("seed" at a line's end, "004" on the next)
        joined = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", text)
        out += [f"{path.relative_to(ROOT)}: ...{m.group(0)}..."
                for m in re.finditer(r"(?i)seed 0\d\d", joined) if m.group(0) not in text]
    return out


def test_no_private_reference_in_src_docs_readme() -> None:
    offending = _offending_lines()
    assert offending == [], f"{len(offending)} lines:\n" + "\n".join(offending[:40])
