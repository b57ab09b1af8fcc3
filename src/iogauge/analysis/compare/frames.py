"""The entry point for two SampleFrames: pair the devices, test every metric, add the notes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import polars as pl

from iogauge.analysis.compare.prepare import _Dev, _devices, _match, _names, _prepare
from iogauge.analysis.compare.results import (
    _TESTED,
    ALPHA,
    MAX_SAMPLES,
    METRICS,
    MIN_EFFECT_PCT,
    CompareError,
    Comparison,
    DevicePair,
    MetricChange,
    MetricSpec,
)
from iogauge.analysis.compare.samples import (
    _add_note,
    _batches,
    _cross_notes,
    _judge,
    _raw_dict,
    _sample_stats,
    _test_groups,
)
from iogauge.analysis.compare.waits import compare_waits
from iogauge.analysis.summary import IDLE_IOPS
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame


def _stack(before: pl.DataFrame, after: pl.DataFrame, pairs: list[DevicePair]) -> pl.DataFrame:
    ids_b = pl.DataFrame({"key": [p.device_before for p in pairs],
                          "g": list(range(len(pairs)))}, schema={"key": pl.String,
                                                                 "g": pl.Int64})
    ids_a = pl.DataFrame({"key": [p.device_after for p in pairs],
                          "g": list(range(len(pairs)))}, schema={"key": pl.String,
                                                                 "g": pl.Int64})
    b = before.join(ids_b, on="key", how="inner").with_columns(side=pl.lit(0, pl.Int8))
    a = after.join(ids_a, on="key", how="inner").with_columns(side=pl.lit(1, pl.Int8))
    return pl.concat([b, a], how="vertical")


def compare(before: SampleFrame, after: SampleFrame,
            before_waits: WaitEventFrame | None = None,
            after_waits: WaitEventFrame | None = None,
            device_map: Mapping[str, str] | None = None, *,
            alpha: float = ALPHA, min_effect_pct: float = MIN_EFFECT_PCT,
            max_samples: int = MAX_SAMPLES) -> Comparison:
    """Compare two datasets per device and metric, and their Oracle wait events.

    Devices are paired by name (the device key: ``host:device`` when a side holds several
    hosts, else the device name). ``device_map`` pairs differently named devices
    (``{"sdb": "sdc"}``: HDD sdb before, SSD sdc after, [Insight-SSD9]). When, after that, exactly
    one busy device (>= 1 IOPS on average) is left unpaired on each side and both are of the
    same kind, they are paired automatically and a note says so. Pairs idle on both sides are
    skipped (with a note).

    Raises :class:`CompareError` when the device map names a device a side does not have,
    or when there is nothing at all to compare.
    """
    notes: list[str] = []
    pb = _prepare(before, "before", notes)
    pa = _prepare(after, "after", notes)
    devs_b, devs_a = _devices(pb), _devices(pa)
    pairs = _busy_pairs(devs_b, devs_a, device_map, notes) if devs_b and devs_a else []
    if device_map and not (devs_b and devs_a):
        raise CompareError("a device map was given but a side has no device statistics")
    result = Comparison(pairs=pairs, notes=notes, alpha=alpha, min_effect_pct=min_effect_pct)
    if pairs:
        result.changes.extend(_metric_changes(_stack(pb, pa, pairs), pairs, alpha,
                                              min_effect_pct, max_samples))
    waits_b = before_waits is not None and len(before_waits) > 0
    waits_a = after_waits is not None and len(after_waits) > 0
    if before_waits is not None and after_waits is not None and waits_b and waits_a:
        result.wait_changes = compare_waits(before_waits, after_waits, notes, alpha=alpha,
                                            min_effect_pct=min_effect_pct)
    elif waits_b != waits_a:
        notes.append("wait events on one side only: not compared")
    if not (devs_b and devs_a) and not (waits_b and waits_a):
        raise CompareError("nothing to compare: the two sides have neither device statistics "
                           "nor wait events in common")
    if not result.changes and not result.wait_changes:
        notes.append("no metric was measured on both sides of any device pair")
    return result


def _busy_pairs(devs_b: dict[str, _Dev], devs_a: dict[str, _Dev],
                device_map: Mapping[str, str] | None, notes: list[str]) -> list[DevicePair]:
    """The device pairs (:func:`_match`) but those idle on both sides (noted)."""
    pairs = _match(devs_b, devs_a, device_map, notes)
    idle = [p for p in pairs if devs_b[p.device_before].idle and devs_a[p.device_after].idle]
    if idle:
        notes.append(f"idle on both sides (< {IDLE_IOPS:g} IOPS), not compared: "
                     f"{_names([p.device_before for p in idle])}")
    return [p for p in pairs if p not in idle]


@dataclass(frozen=True)
class _Samples:
    """What the tests read (:func:`_batches`): the samples, the whole-side values
    (metric, group, side) -> (intervals, value), and the batches of the batched groups."""

    samples: pl.DataFrame
    raw: dict[tuple[str, int, int], tuple[int, float]]
    batch_count: dict[tuple[int, int], int]

    @property
    def batched_groups(self) -> frozenset[int]:
        return frozenset(g for g, _ in self.batch_count)


def _metric_changes(stacked: pl.DataFrame, pairs: list[DevicePair], alpha: float,
                    min_effect_pct: float, max_samples: int) -> list[MetricChange]:
    """Every metric of every pair, tested; grouped by pair, metrics in METRICS order."""
    samples, raw_frame = _batches(stacked, max_samples)
    batched = samples.filter(pl.col("batched")).group_by("g", "side").agg(
        pl.len().alias("batches"))
    s = _Samples(samples, _raw_dict(raw_frame),
                 {(r["g"], r["side"]): r["batches"] for r in batched.iter_rows(named=True)})
    per_pair: dict[int, list[MetricChange]] = {g: [] for g in range(len(pairs))}
    for spec in METRICS:
        for g, change in _metric_tests(spec, s, pairs, alpha, min_effect_pct):
            per_pair[g].append(change)
    out: list[MetricChange] = []
    for g in range(len(pairs)):
        _cross_notes(per_pair[g])
        out.extend(per_pair[g])
    return out


def _metric_tests(spec: MetricSpec, s: _Samples, pairs: list[DevicePair], alpha: float,
                  min_effect_pct: float) -> Iterator[tuple[int, MetricChange]]:
    """One metric's change in every pair (group ``g``) measured on both sides."""
    sub = (s.samples.select("g", "side", pl.col(spec.name).alias("v"))
           .filter(pl.col("v").is_not_null()))
    if sub.height == 0:
        return
    stats = _sample_stats(sub)
    if spec.kind == "p95":
        # A percentile of fewer than two intervals is the value itself: the mean
        # row already shows it.
        stats = {k: st for k, st in stats.items()
                 if s.raw.get((spec.name, *k), (0, 0.0))[0] >= 2}
    batched_groups = s.batched_groups
    for g, tested in _test_groups(sub, spec.kind, stats, batched_groups).items():
        if (spec.name, g, 0) not in s.raw or (spec.name, g, 1) not in s.raw:
            continue
        (nb, b), (na, a) = s.raw[(spec.name, g, 0)], s.raw[(spec.name, g, 1)]
        v = _judge(spec.better, b, a, tested, alpha, min_effect_pct)
        pair = pairs[g]
        change = MetricChange(
            pair.device_before, pair.device_after, spec.name, spec.unit, b, a,
            v.change_pct, v.ratio, v.direction, v.significant, tested.test, tested.p,
            nb, na, v.note)
        if g in batched_groups and tested.test in _TESTED:
            kb = s.batch_count.get((g, 0), stats[(g, 0)].n)
            ka = s.batch_count.get((g, 1), stats[(g, 1)].n)
            what = "p95s" if spec.kind == "p95" else "means"
            _add_note(change, f"tested on batch {what} ({kb} before, {ka} after) "
                      "because consecutive intervals are correlated")
        yield g, change
