"""The compiled disk models (lab/accel.py) give the same results as the pure-Python ones."""

from __future__ import annotations

import importlib

import pytest

from iogauge.lab import accel
from iogauge.lab.profiles import build_model
from iogauge.lab.simulator import simulate
from iogauge.lab.workloads import oe_paper


def _compiled_available() -> bool:
    accel.modules.cache_clear()
    return accel.modules().compiled


def _run(profile: str) -> tuple[int, list[float]]:
    model = build_model(profile)
    wls = oe_paper("file-share", "A", rate_iops=150, arrival="poisson")
    res = simulate(model, wls, 20.0, interval_s=1.0, seed=7)
    df = res.frame.df
    return res.completed, [round(float(x), 9) for x in df["util_pct"].to_list()
                           + df["await_ms"].to_list()]


@pytest.mark.parametrize("profile", ["hdd-7200", "raid5-6x400g", "ssd-sata", "hdd-7200-ncq",
                                     "raid5-6x400g-ncq"])
def test_compiled_and_pure_models_agree(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _compiled_available():
        pytest.skip("iogauge_accel not built (make install builds it when a C compiler is "
                    "present)")
    compiled = _run(profile)
    assert type(build_model(profile)).__module__.startswith("iogauge_accel.")
    monkeypatch.setenv("IOGAUGE_PURE_PYTHON", "1")
    accel.modules.cache_clear()
    try:
        assert type(build_model(profile)).__module__.startswith("iogauge.lab.")
        pure = _run(profile)
    finally:
        monkeypatch.delenv("IOGAUGE_PURE_PYTHON")
        accel.modules.cache_clear()
    assert compiled[0] == pure[0] > 1000
    assert compiled[1] == pure[1]


def test_stale_compiled_module_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _compiled_available():
        pytest.skip("iogauge_accel not built")
    mod = importlib.import_module("iogauge_accel.raid")
    monkeypatch.setattr(accel, "source_sha256",
                        lambda name: "0" * 64 if name == "raid" else
                        importlib.import_module(f"iogauge_accel.{name}").SOURCE_SHA256)
    accel.modules.cache_clear()
    try:
        mods = accel.modules()
        assert not mods.compiled
        assert mods.raid.__name__ == "iogauge.lab.raid"
        assert mod.SOURCE_SHA256 != "0" * 64
    finally:
        accel.modules.cache_clear()


def test_pure_python_forced_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IOGAUGE_PURE_PYTHON", "1")
    accel.modules.cache_clear()
    try:
        mods = accel.modules()
        assert not mods.compiled
        assert mods.hdd.__name__ == "iogauge.lab.hdd"
    finally:
        accel.modules.cache_clear()
