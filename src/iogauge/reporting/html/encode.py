"""Compact JSON for the embedded data: numbers rounded to a few significant digits, arrays
formatted in one vectorised pass, and text made safe inside a <script> element.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np
import polars as pl

#: Significant digits of embedded values: 4 keeps 0.1 % resolution, which no chart or
#: tooltip needs more of, and makes a day of data per device a few hundred kB.
SIG_DIGITS = 4


class _Nums:
    """A number array to embed. Its JSON text is made by :func:`_dump` for every array of the
    document in one polars pass (one call per array costs ~1 ms of overhead each)."""

    __slots__ = ("text", "values")

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.text = ""


def round_sig(values: np.ndarray, sig: int = SIG_DIGITS) -> np.ndarray:
    """``values`` rounded to ``sig`` significant digits (NaN and 0 unchanged), computed so that
    the result is the double nearest the short decimal (its shortest repr is that decimal):
    divide by an exact power of ten for large values, multiply for small ones."""
    a = np.array(values, dtype=np.float64, copy=True)
    ok = np.isfinite(a) & (a != 0)
    if not ok.any():
        return a
    v = a[ok]
    exp = (sig - 1 - np.floor(np.log10(np.abs(v)))).astype(np.int64)
    small = exp >= 0
    out = np.empty_like(v)
    p_small = 10.0 ** exp[small]
    out[small] = np.round(v[small] * p_small) / p_small
    p_big = 10.0 ** (-exp[~small])
    out[~small] = np.round(v[~small] / p_big) * p_big
    a[ok] = out
    return a


def _num_array(values: np.ndarray | pl.Series, sig: int = SIG_DIGITS) -> _Nums:
    """Numbers rounded to ``sig`` significant digits; null for missing values."""
    a = values.to_numpy() if isinstance(values, pl.Series) else values
    return _Nums(round_sig(np.asarray(a, dtype=np.float64), sig))


def _time_array(seconds: np.ndarray | pl.Series) -> _Nums:
    """Offsets in seconds from the report's base time (or intervals), to the millisecond."""
    a = seconds.to_numpy() if isinstance(seconds, pl.Series) else seconds
    return _Nums(np.round(np.asarray(a, dtype=np.float64), 3))


def _int_array(values: Sequence[int] | np.ndarray | pl.Series) -> _Nums:
    a = values.to_numpy() if isinstance(values, pl.Series) else values
    return _Nums(np.asarray(a, dtype=np.float64))


def _format_all(items: Sequence[_Nums]) -> None:
    """Set the JSON text of every array: shortest round-trip text of each value (formatted by
    polars in Rust, ~10x faster than ``numpy.char.mod``; exponents such as ``1.235e-7`` are
    valid JSON), ``.0`` dropped from whole numbers, null for missing or non-finite values."""
    if not items:
        return
    sizes = [it.values.size for it in items]
    s = pl.Series("v", np.concatenate([it.values for it in items]), dtype=pl.Float64)
    text = (s.set(~s.is_finite().fill_null(value=False), None).cast(pl.String)
            .str.replace(r"\.0$", "").fill_null("null").to_list())
    pos = 0
    for it, n in zip(items, sizes, strict=True):
        it.text = "[" + ",".join(text[pos:pos + n]) + "]"
        pos += n


def _pending(obj: object, out: list[_Nums]) -> None:
    if isinstance(obj, _Nums):
        if not obj.text:
            out.append(obj)
    elif isinstance(obj, Mapping):
        for v in obj.values():
            _pending(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _pending(v, out)


def _dump(obj: object) -> str:
    """Compact JSON of ``obj``, with its number arrays formatted in one pass."""
    todo: list[_Nums] = []
    _pending(obj, todo)
    _format_all(todo)
    return _encode(obj)


def _encode(obj: object) -> str:
    if isinstance(obj, _Nums):
        return obj.text
    if isinstance(obj, Mapping):
        return "{" + ",".join(json.dumps(str(k)) + ":" + _encode(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_encode(v) for v in obj) + "]"
    if isinstance(obj, float):
        return json.dumps(round(obj, 6)) if math.isfinite(obj) else "null"
    if isinstance(obj, datetime):
        return json.dumps(obj.isoformat())
    return json.dumps(obj, ensure_ascii=False)


def _script_json(text: str) -> str:
    """JSON safe inside ``<script>``: no ``<`` (so no ``</script>`` or ``<!--``), ``>``, ``&``;
    the escapes are valid only inside JSON strings, which is the only place they occur."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
