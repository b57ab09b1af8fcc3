"""What the command line does just before the interpreter exits."""

from __future__ import annotations

import gc
import sys


def spare_final_collections() -> None:
    """Spare the interpreter's exit its full garbage collections, when that is safe.

    They walk every object still alive (the modules of polars, numpy, typer, rich ...) only
    to free memory that the process's exit frees anyway: 60-120 ms after an import of the
    benchmark log (perf: ``gc_collect_main``; strace: from the last write to ``exit_group``
    0.115-0.119 s, 0.001 s with frozen objects). The commands close their files and stores
    themselves, so nothing is left for those collections to finalise.

    Not when DuckDB is loaded: its nanobind bindings check at exit that every instance was
    freed and print "leaked instances" otherwise (``tests/e2e/test_record_signals`` caught
    it). ``import --parquet``, the command this is for, does not load DuckDB."""
    if "duckdb" not in sys.modules:
        gc.freeze()
