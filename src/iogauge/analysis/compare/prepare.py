"""One side of a comparison: totals derived where the parts exist, and the device pairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from iogauge.analysis.compare.results import CompareError, DevicePair
from iogauge.analysis.summary import IDLE_IOPS
from iogauge.model.sampleframe import SampleFrame


def _sum_present(*cols: str) -> pl.Expr:
    """Sum of the columns that are not null; null when all are."""
    exprs = [pl.col(c) for c in cols]
    return (pl.when(pl.any_horizontal([e.is_not_null() for e in exprs]))
            .then(pl.sum_horizontal(exprs)).otherwise(None))


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """num / den per interval; 0.0 when den is 0 (sysstat prints 0.00 then); null if unknown."""
    return (pl.when(num.is_null() | den.is_null()).then(None)
            .when(den > 0).then(num / den).otherwise(0.0))


def _prepare(frame: SampleFrame, side: str, notes: list[str]) -> pl.DataFrame:
    """One side's intervals with a device key and every compared column (derived where the
    source lacks a total)."""
    used = ["source", "host", "device", "device_kind", "ts", "interval_s", "since_boot",
            "reset", "iops", "r_iops", "w_iops", "d_iops", "kBps", "r_kBps", "w_kBps",
            "d_kBps", "await_ms", "r_await_ms", "w_await_ms", "svctm_ms", "util_pct", "aqu_sz",
            "areq_kB", "r_areq_kB", "w_areq_kB"]
    # only the columns compared: a SampleFrame has ~60, most of them null here
    df = frame.df.select(used).filter(~pl.col("reset"))
    if df.height == 0:
        return df.with_columns(key=pl.col("device"))
    key = (pl.concat_str([pl.col("host"), pl.lit(":"), pl.col("device")])
           if df["host"].n_unique() > 1 else pl.col("device"))
    df = df.with_columns(key.alias("key"))
    # An iostat run's first report averages since boot. Drop those rows where the device has
    # measured intervals too; a device with since-boot rows only (a single quoted report, as
    # [Goodus]'s) is compared as it is, and the note says so.
    df = df.with_columns(_only_sb=pl.col("since_boot").all().over("key"))
    only_sb = sorted(df.filter(pl.col("_only_sb"))["key"].unique().to_list())
    if only_sb:
        notes.append(
            f"{side}: {_names(only_sb)} have only reports flagged since-boot (an iostat run's "
            "first report); they are compared as they are -- right if the lines were copied "
            "from a later report, otherwise they average everything since boot")
    df = df.filter(~pl.col("since_boot") | pl.col("_only_sb"))

    iops = pl.coalesce(pl.col("iops"), _sum_present("r_iops", "w_iops", "d_iops"))
    kbps = pl.coalesce(pl.col("kBps"), _sum_present("r_kBps", "w_kBps", "d_kBps"))
    # await from its parts where the source splits reads and writes only; a part that did
    # nothing (no await, 0 or unknown IOPS) does not block it, a part that did I/O with an
    # unknown await does.
    def part(kind: str) -> tuple[pl.Expr, pl.Expr, pl.Expr, pl.Expr]:
        lat, ops = pl.col(f"{kind}_await_ms"), pl.col(f"{kind}_iops")
        ok = lat.is_not_null() & ops.is_not_null()
        none = lat.is_null() & (ops.is_null() | (ops == 0))
        return (ok, none, pl.when(ok).then(lat * ops).otherwise(0.0),
                pl.when(ok).then(ops).otherwise(0.0))

    r_ok, r_none, r_num, r_den = part("r")
    w_ok, w_none, w_num, w_den = part("w")
    usable = (r_ok | r_none) & (w_ok | w_none) & (r_ok | w_ok)
    await_rw = (pl.when(usable & (r_den + w_den > 0)).then((r_num + w_num) / (r_den + w_den))
                .when(usable).then(0.0).otherwise(None))
    df = df.with_columns(iops=iops, kBps=kbps)
    return df.select(
        "key", "host", "device", "device_kind", "ts",
        pl.col("interval_s").alias("dt"),
        "iops", "r_iops", "w_iops",
        (pl.col("kBps") / 1024.0).alias("MBps"),
        pl.coalesce(pl.col("await_ms"), await_rw).alias("await_ms"),
        "r_await_ms", "w_await_ms", "svctm_ms", "util_pct", "aqu_sz",
        pl.coalesce(pl.col("areq_kB"), _ratio(pl.col("kBps"), pl.col("iops"))).alias("areq_kB"),
        pl.coalesce(pl.col("r_areq_kB"), _ratio(pl.col("r_kBps"), pl.col("r_iops")))
        .alias("r_areq_kB"),
        pl.coalesce(pl.col("w_areq_kB"), _ratio(pl.col("w_kBps"), pl.col("w_iops")))
        .alias("w_areq_kB"),
    )


@dataclass(frozen=True)
class _Dev:
    key: str
    kind: str
    iops: float | None  # time-weighted mean
    mbps: float | None

    @property
    def busy(self) -> bool:
        return (self.iops or 0.0) >= IDLE_IOPS

    @property
    def idle(self) -> bool:
        known = self.iops is not None or self.mbps is not None
        return known and (self.iops or 0.0) < IDLE_IOPS and (self.mbps or 0.0) == 0.0


def _devices(df: pl.DataFrame) -> dict[str, _Dev]:
    if df.height == 0:
        return {}

    def tw(c: str) -> pl.Expr:
        w = pl.when(pl.col(c).is_not_null()).then(pl.col("dt")).otherwise(None)
        return pl.when(w.sum() > 0).then((pl.col(c) * w).sum() / w.sum()).otherwise(None)

    per = (df.group_by("key", maintain_order=True)
           .agg(pl.col("device_kind").first(), tw("iops").alias("iops"),
                tw("MBps").alias("MBps")))
    return {r["key"]: _Dev(r["key"], r["device_kind"], r["iops"], r["MBps"])
            for r in per.iter_rows(named=True)}


def _names(keys: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _match(before: dict[str, _Dev], after: dict[str, _Dev],
           device_map: Mapping[str, str] | None, notes: list[str]) -> list[DevicePair]:
    pairs: list[DevicePair] = []
    used_b: set[str] = set()
    used_a: set[str] = set()

    def add(b: str, a: str, how: Literal["name", "map", "auto"]) -> None:
        pairs.append(DevicePair(b, a, how, before[b].kind, after[a].kind))
        used_b.add(b)
        used_a.add(a)

    for b, a in (device_map or {}).items():
        if b not in before:
            raise CompareError(f"device map {b}={a}: no device {b!r} before (devices: "
                               f"{_names(sorted(before))})")
        if a not in after:
            raise CompareError(f"device map {b}={a}: no device {a!r} after (devices: "
                               f"{_names(sorted(after))})")
        if b in used_b or a in used_a:
            raise CompareError(f"device map {b}={a}: a device may be paired only once")
        add(b, a, "map")
    for b in before:
        if b not in used_b and b in after and b not in used_a:
            add(b, b, "name")
    # Automatic pairing, per device kind (a tablespace is never paired with a datafile): the
    # one busy device left on each side is what the two runs were about ([Insight-SSD9]: the user
    # tablespace on HDD sdb, then on SSD sdc).
    left_b = [k for k in before if k not in used_b]
    left_a = [k for k in after if k not in used_a]
    unpaired_busy_b: list[str] = []
    unpaired_busy_a: list[str] = []
    for kind in dict.fromkeys([before[k].kind for k in left_b] + [after[k].kind for k in left_a]):
        busy_b = [k for k in left_b if before[k].busy and before[k].kind == kind]
        busy_a = [k for k in left_a if after[k].busy and after[k].kind == kind]
        if len(busy_b) == 1 and len(busy_a) == 1:
            b, a = busy_b[0], busy_a[0]
            add(b, a, "auto")
            notes.append(f"paired {b} (before) with {a} (after): the names differ and each is "
                         f"the only busy {kind} left on its side; give --map to pair "
                         "otherwise")
        elif busy_b and busy_a:
            unpaired_busy_b += busy_b
            unpaired_busy_a += busy_a
    if unpaired_busy_b:
        notes.append(f"busy devices with no partner by name: before {_names(unpaired_busy_b)}, "
                     f"after {_names(unpaired_busy_a)}; pair them with --map BEFORE=AFTER")
    left_b = [k for k in before if k not in used_b]
    left_a = [k for k in after if k not in used_a]
    if left_b:
        notes.append(f"only before (not compared): {_names(left_b)}")
    if left_a:
        notes.append(f"only after (not compared): {_names(left_a)}")
    return pairs
