"""Start-up cost of the command line: what every `iogauge` invocation imports.

Every invocation (even ``iogauge --version``) imports ``iogauge.cli.main``, which builds every
command's options; the commands import their machinery (polars, DuckDB, the analysis engine,
the lab's simulator, the guarantee controller) inside their bodies, when they run. These tests
run ``iogauge --version`` in a fresh interpreter and look at ``sys.modules`` after it, and
check that the option defaults copied into :mod:`iogauge.cli.defaults` (so that declaring
the options imports none of their owners) still equal their owners' values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iogauge.cli import defaults

#: Modules that `iogauge --version` must not import: each costs tens to hundreds of ms and
#: only some commands need it.
KEPT_OUT = (
    "polars",
    "numpy",
    "duckdb",
    "iogauge.store.duckdb_store",
    "iogauge.model.sampleframe",
    "iogauge.analysis.engine",
    "iogauge.analysis.catalog",
    "iogauge.analysis.compare",
    "iogauge.lab.experiments",
    "iogauge.lab.paper_eval",
    "iogauge.lab.simulator",
    "iogauge.lab.device",
    "iogauge.reporting.html_report",
    "iogauge.guarantee.config",
    "iogauge.guarantee.controller",
    "iogauge.guarantee.safety",
    "iogauge.collector.linux",
    "iogauge.collector.recorder",
)

_RUN = """
import json, sys
sys.argv = ["iogauge", *sys.argv[1:]]
from iogauge.cli.main import main
try:
    main()
except SystemExit as exc:
    assert exc.code in (None, 0), exc.code
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_by(*argv: str) -> tuple[str, set[str]]:
    """Run ``iogauge ARGV`` in a fresh interpreter: (its stderr and stdout before the probe's
    line, every module in ``sys.modules`` after it)."""
    res = subprocess.run([sys.executable, "-c", _RUN, *argv], capture_output=True,
                         text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    *said, last = res.stdout.splitlines()
    return res.stderr + "\n".join(said), set(json.loads(last))


@pytest.fixture(scope="module")
def loaded_by_version() -> set[str]:
    """Every module in ``sys.modules`` after ``iogauge --version``."""
    said, modules = _loaded_by("--version")
    assert said.startswith("iogauge ")  # the version was printed: the command really ran
    return modules


def test_version_imports_the_command_line_itself(loaded_by_version: set[str]) -> None:
    # the probe sees what start-up loads: every command module is there
    for name in ("typer", "iogauge.cli.main", "iogauge.cli.analyze_cmd",
                 "iogauge.cli.guarantee_cmd", "iogauge.cli.lab_reproduce_cmd",
                 "iogauge.cli.defaults"):
        assert name in loaded_by_version


@pytest.mark.parametrize("module", KEPT_OUT)
def test_version_does_not_import(module: str, loaded_by_version: set[str]) -> None:
    assert module not in loaded_by_version


def test_the_guarantee_safety_net_does_without_polars() -> None:
    # `iogauge guarantee release` imports iogauge.guarantee.safety, whose actuators read
    # sysfs into DeviceInfo; iogauge.model must not load the SampleFrame (polars) for that.
    code = ("import sys, iogauge.guarantee.safety; "
            "print(sorted(m for m in ('polars', 'numpy', 'iogauge.model.sampleframe') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_guarantee_release_does_without_polars(tmp_path: Path) -> None:
    said, modules = _loaded_by("guarantee", "release", "--state",
                               str(tmp_path / "none.state.json"))
    assert "nothing to restore" in said  # the command ran
    assert "polars" not in modules


def test_option_defaults_equal_their_owners() -> None:
    from iogauge.analysis.compare import ALPHA, MIN_EFFECT_PCT
    from iogauge.collector.recorder import MAX_FLUSH_S
    from iogauge.guarantee.safety import DEFAULT_STATE_PATH
    from iogauge.importers.registry import FORMATS
    from iogauge.lab.device import DEFAULT_BACKING_DIR, DEFAULT_MODEL
    from iogauge.lab.experiments import EXPERIMENTS
    from iogauge.lab.paper_eval import VARIANT_NAMES

    assert defaults.COMPARE_ALPHA == ALPHA
    assert defaults.COMPARE_MIN_EFFECT_PCT == MIN_EFFECT_PCT
    assert tuple(FORMATS) == defaults.FORMAT_IDS  # same ids, same (sniffing) order
    assert defaults.GUARANTEE_STATE_PATH == DEFAULT_STATE_PATH
    assert defaults.RECORD_MAX_FLUSH_S == MAX_FLUSH_S
    assert defaults.LAB_DEFAULT_MODEL == DEFAULT_MODEL
    assert defaults.LAB_DEFAULT_BACKING_DIR == DEFAULT_BACKING_DIR
    assert isinstance(defaults.LAB_DEFAULT_BACKING_DIR, Path)
    assert defaults.LAB_EXPERIMENTS == EXPERIMENTS
    assert defaults.LAB_VARIANT_NAMES == VARIANT_NAMES


def test_import_to_parquet_does_without_duckdb_and_pydantic(tmp_path: Path) -> None:
    # `import --parquet` is the fast path (benchmarks/import_speed.py): the DuckDB store is
    # not loaded (iogauge.store loads it when first used), and nor is pydantic, which typer
    # 0.29 builds a TypeAdapter with for every parameter (0.15-0.2 s of CPU per run).
    fixture = (Path(__file__).parents[1] / "fixtures" / "iostat"
               / "iostat-tool-sysstat11.7.3-iostat-x-t.txt")
    out = tmp_path / "out.parquet"
    said, modules = _loaded_by("import", str(fixture), "--parquet", str(out))
    assert "rows written to" in said  # the command ran
    assert out.stat().st_size > 0
    assert "duckdb" not in modules
    assert "pydantic" not in modules


def test_final_collections_are_spared_unless_duckdb_is_loaded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from iogauge.cli.shutdown import spare_final_collections

    before = gc.get_freeze_count()
    try:
        # DuckDB's nanobind bindings would report the frozen instances as leaked at exit
        monkeypatch.setitem(sys.modules, "duckdb", sys.modules.get("duckdb") or object())
        spare_final_collections()
        assert gc.get_freeze_count() == before
        monkeypatch.delitem(sys.modules, "duckdb")
        spare_final_collections()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
