"""No import cycle among iogauge's modules.

The graph counts every import of an ``iogauge`` module that runs: at module level, inside a
function (a deferred import only dodges the cycle at load time; the two modules still need each
other) and ``importlib.import_module("iogauge...")`` with a literal name. Imports under
``if TYPE_CHECKING:`` never run (annotations only) and are left out. An edge goes to the module
named (a package's ``__init__`` when the name is a package), so that sibling modules under one
package are not linked through it.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import iogauge

PKG_DIR = Path(iogauge.__file__).parent


def _modules() -> dict[str, Path]:
    """Every iogauge module name -> its source file."""
    out = {"iogauge": PKG_DIR / "__init__.py"}
    for info in pkgutil.walk_packages([str(PKG_DIR)], prefix="iogauge."):
        rel = Path(*info.name.split(".")[1:])
        path = PKG_DIR / rel / "__init__.py" if info.ispkg else PKG_DIR / rel.with_suffix(".py")
        if path.is_file():
            out[info.name] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` starts with (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in known:
            return cand
        parts.pop()
    return None


def _imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The iogauge modules ``mod`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(tree):  # drop `if TYPE_CHECKING:` bodies before walking
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # ``from pkg import sub`` imports the submodule when there is one
            names.update(f"{stem}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    out = {r for n in names if n.startswith("iogauge") and (r := _resolve(n, known))}
    out.discard(mod)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def test_the_walk_sees_the_known_imports() -> None:
    """The walker itself: module-level, deferred and relative imports all make edges."""
    graph = _graph()
    assert len(graph) > 100
    assert "iogauge.analysis.engine" in graph["iogauge.cli.analyze_cmd"]
    assert "iogauge.lab.workloads" in graph["iogauge.lab.simulator"]
    # a deferred import inside a function is an edge too
    assert "iogauge.lab.paper_eval" in graph["iogauge.lab.experiments"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
