"""Compiled disk models: the same source, compiled with mypyc, used when present and fresh.

The simulator spends most of its time in the disk models' per-command arithmetic (seek,
rotation, zoned transfer, write-back destaging; a RAID-5 small write is four member
commands), and pure Python missed the 10 s target for one simulated hour of the 6-disk
RAID-5 (figures in ``benchmarks/README.md``). ``scripts/build_accel.py`` (run by
``make install``) compiles ``hdd.py``, ``raid.py`` and ``ssd.py`` unchanged with mypyc
into the separate package ``iogauge_accel`` (~3x faster), stamping each compiled module
with the SHA-256 of the source it was built from.

:func:`modules` returns the compiled modules only when every stamp matches the source that
is installed now, so an edited model never runs stale compiled code; otherwise (no C
compiler, not built, or ``IOGAUGE_PURE_PYTHON=1``) the pure-Python modules are used. Both
give identical results for the same seed (tested).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import ModuleType

log = logging.getLogger(__name__)

#: The modules that are compiled; their import lines are rewritten to each other.
COMPILED = ("hdd", "raid", "ssd")
ACCEL_PACKAGE = "iogauge_accel"


@dataclass(frozen=True)
class ModelModules:
    """The model modules in use: compiled (``compiled=True``) or the pure-Python ones."""

    hdd: ModuleType
    raid: ModuleType
    ssd: ModuleType
    compiled: bool


def source_sha256(name: str) -> str:
    """SHA-256 of the installed pure-Python source of ``iogauge.lab.<name>``."""
    data = resources.files("iogauge.lab").joinpath(f"{name}.py").read_bytes()
    return hashlib.sha256(data).hexdigest()


def _pure() -> ModelModules:
    from iogauge.lab import hdd, raid, ssd  # noqa: PLC0415 - avoid an import cycle

    return ModelModules(hdd, raid, ssd, compiled=False)


@cache
def modules() -> ModelModules:
    """The compiled model modules when built from the current sources, else the pure ones."""
    if os.environ.get("IOGAUGE_PURE_PYTHON", "") not in ("", "0"):
        return _pure()
    loaded: dict[str, ModuleType] = {}
    for name in COMPILED:
        try:
            mod = importlib.import_module(f"{ACCEL_PACKAGE}.{name}")
        except ImportError:
            return _pure()
        stamp = getattr(mod, "SOURCE_SHA256", None)
        if stamp != source_sha256(name):
            log.info("compiled %s.%s is stale (source changed since it was built): using "
                     "pure Python; re-run scripts/build_accel.py", ACCEL_PACKAGE, name)
            return _pure()
        loaded[name] = mod
    return ModelModules(loaded["hdd"], loaded["raid"], loaded["ssd"], compiled=True)
