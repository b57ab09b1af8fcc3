"""Native kernels of the iostat text importer: ``kernels.c``, loaded with ctypes.

The text importer's hot loops — splitting a piece into lines, the first pass of line
classification, the fixed-width number decoder and device-name grouping — each have a numpy
reference implementation in :mod:`iogauge.importers.iostat` (:mod:`.lines`, :mod:`.fixed`)
and an exact C equivalent here (tests run both on the same input and require identical
results). The C versions read each byte once, where numpy needs a pass per test, and ctypes
releases the GIL while they run.

``scripts/build_accel.py`` (run by ``make install``) compiles ``kernels.c`` into the
``iogauge_native`` directory of site-packages, stamped with the SHA-256 of the source.
:func:`kernels` loads it only when the stamp matches the installed source; otherwise (no C
compiler, not built, edited since, or ``IOGAUGE_PURE_PYTHON=1``) it returns None and the
importer uses numpy (same results, slower).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import sysconfig
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SOURCE = "kernels.c"
LIBRARY = "libiogauge_iostat.so"
#: Directory of site-packages that holds the built library.
NATIVE_DIR = "iogauge_native"

_I64P = np.ctypeslib.ndpointer(dtype=np.int64, flags="C_CONTIGUOUS")
_I32P = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")
_U32P = np.ctypeslib.ndpointer(dtype=np.uint32, flags="C_CONTIGUOUS")
_U8P = np.ctypeslib.ndpointer(dtype=np.uint8, flags="C_CONTIGUOUS")
_F64P = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")


def source_sha256() -> str:
    """SHA-256 of the installed ``kernels.c``."""
    data = resources.files("iogauge.importers.iostat").joinpath(SOURCE).read_bytes()
    return hashlib.sha256(data).hexdigest()


def library_path() -> Path:
    """Where ``scripts/build_accel.py`` installs the library for this Python."""
    return Path(sysconfig.get_paths()["platlib"]) / NATIVE_DIR / LIBRARY


@dataclass(frozen=True)
class Kernels:
    """The loaded library's functions (see ``kernels.c`` for each contract)."""

    lib: ctypes.CDLL

    def lines(self, buf: bytes | bytearray, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the lines of ``buf`` (``arr``: it as uint8, no copy), as
        ``lines.Lines`` finds them."""
        cap = self.lib.ig_count(arr, arr.size, 10) + 1
        starts = np.empty(cap, dtype=np.int64)
        ends = np.empty(cap, dtype=np.int64)
        n = self.lib.ig_lines(arr, arr.size, starts, ends, cap)
        if n < 0:  # pragma: no cover - ig_count and ig_lines disagree
            raise RuntimeError("iostat kernels: more lines than newlines counted")
        return starts[:n], ends[:n]

    def gather_lines(self, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                     idx: np.ndarray) -> bytes:
        """The lines ``idx`` joined, each followed by a newline."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        size = int((ends[idx] - starts[idx]).sum()) + idx.size
        out = np.empty(size, dtype=np.uint8)
        n = self.lib.ig_gather_lines(arr, starts, ends, idx, idx.size, out)
        return out[:n].tobytes()

    def group_shapes(self, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                     idx: np.ndarray, max_groups: int = 1 << 12
                     ) -> tuple[np.ndarray, np.ndarray] | None:
        """(group of each line of ``idx``, position in ``idx`` of each group's first line)
        by shape (see ``ig_group_shapes``); None beyond ``max_groups`` shapes."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        m = idx.size
        cap = min(m, max_groups)
        code = np.empty(m, dtype=np.uint32)
        first = np.empty(cap + 1, dtype=np.int64)
        n = self.lib.ig_group_shapes(arr, starts, ends, idx, m, cap, code, first)
        if n < 0:
            return None
        return code, first[:n]

    def classify(self, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """First-pass kind of every line (K_* codes of ``kernels.c``)."""
        kind = np.empty(starts.size, dtype=np.uint8)
        self.lib.ig_classify(arr, starts, ends, starts.size, kind)
        return kind

    def decode_fixed(self, arr: np.ndarray, rows: np.ndarray, fields: list[tuple[int, int]],
                     dots: list[int], *, vector: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Values (n_fields, len(rows)) and per-line ``ok`` of the fixed-width decoder
        (``vector=False``: without the SSE4.1 reader, to test the others)."""
        k = rows.size
        fa = np.array([a for a, _b in fields], dtype=np.int32)
        fb = np.array([b for _a, b in fields], dtype=np.int32)
        fd = np.array(dots, dtype=np.int32)
        scale = np.array([float(10 ** max(b - d - 1, 0)) for (_a, b), d in
                          zip(fields, dots, strict=True)], dtype=np.float64)
        out = np.zeros((len(fields), k), dtype=np.float64)
        ok = np.empty(k, dtype=np.uint8)
        self.lib.ig_decode_fixed(arr, np.ascontiguousarray(rows, dtype=np.int64), k,
                                 len(fields), fa, fb, fd, scale, out, ok, int(vector))
        return out, ok.view(bool)

    def stamps(self, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, idx: np.ndarray,
               template: bytes, classes: bytes, at: list[int], ampm: int
               ) -> tuple[np.ndarray, np.ndarray]:
        """Wall-clock microseconds since 1970 of the stamp lines ``idx`` of one fixed shape,
        and whether each was read (``ig_stamps``)."""
        n = idx.size
        out = np.empty(n, dtype=np.int64)
        ok = np.empty(n, dtype=np.uint8)
        self.lib.ig_stamps(arr, starts, ends, np.ascontiguousarray(idx, dtype=np.int64), n,
                           np.frombuffer(template, dtype=np.uint8),
                           np.frombuffer(classes, dtype=np.uint8), len(template),
                           np.array(at, dtype=np.int32), ampm, out, ok)
        return out, ok.view(bool)

    def group_names(self, arr: np.ndarray, rows: np.ndarray, width: int,
                    max_groups: int = 1 << 15) -> tuple[np.ndarray, np.ndarray] | None:
        """(group of each line, first line of each group) by the first ``width`` bytes of
        the lines starting at ``rows``; None beyond ``max_groups`` distinct names."""
        k = rows.size
        code = np.empty(k, dtype=np.uint32)
        first = np.empty(min(k, max_groups) + 1, dtype=np.int64)
        n = self.lib.ig_group_names(arr, np.ascontiguousarray(rows, dtype=np.int64), k, width,
                                    min(k, max_groups), code, first)
        if n < 0:
            return None
        return code, first[:n]


def _bind(lib: ctypes.CDLL) -> None:
    i64, i32 = ctypes.c_int64, ctypes.c_int32
    lib.ig_source_sha256.restype = ctypes.c_char_p
    lib.ig_source_sha256.argtypes = []
    lib.ig_lines.restype = i64
    lib.ig_lines.argtypes = [_U8P, i64, _I64P, _I64P, i64]
    lib.ig_count.restype = i64
    lib.ig_count.argtypes = [_U8P, i64, i32]
    lib.ig_gather_lines.restype = i64
    lib.ig_gather_lines.argtypes = [_U8P, _I64P, _I64P, _I64P, i64, _U8P]
    lib.ig_group_shapes.restype = i64
    lib.ig_group_shapes.argtypes = [_U8P, _I64P, _I64P, _I64P, i64, i64, _U32P, _I64P]
    lib.ig_classify.restype = None
    lib.ig_classify.argtypes = [_U8P, _I64P, _I64P, i64, _U8P]
    lib.ig_decode_fixed.restype = None
    lib.ig_decode_fixed.argtypes = [_U8P, _I64P, i64, i32, _I32P, _I32P, _I32P, _F64P, _F64P,
                                    _U8P, i32]
    lib.ig_stamps.restype = i64
    lib.ig_stamps.argtypes = [_U8P, _I64P, _I64P, _I64P, i64, _U8P, _U8P, i32, _I32P, i32,
                              _I64P, _U8P]
    lib.ig_group_names.restype = i64
    lib.ig_group_names.argtypes = [_U8P, _I64P, i64, i32, i64, _U32P, _I64P]


@cache
def kernels() -> Kernels | None:
    """The native kernels when built from the current source, else None (use numpy)."""
    if os.environ.get("IOGAUGE_PURE_PYTHON", "") not in ("", "0"):
        return None
    path = library_path()
    if not path.exists():
        return None
    try:
        lib = ctypes.CDLL(str(path))
        _bind(lib)
        stamp = lib.ig_source_sha256().decode()
    except (OSError, AttributeError) as exc:
        log.info("native iostat kernels at %s not usable (%s): using numpy", path, exc)
        return None
    if stamp != source_sha256():
        log.info("native iostat kernels at %s are stale (source changed since they were "
                 "built): using numpy; re-run scripts/build_accel.py", path)
        return None
    return Kernels(lib)
