"""Device rows + their report's time, interval, flags, host and CPU -> a SampleFrame: the one
assembly both the general path and the steady path (:mod:`.steady`) go through."""

from __future__ import annotations

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.importers import first_report
from iogauge.importers.base import Source
from iogauge.importers.first_report import FirstReport
from iogauge.model.sampleframe import DEVICE_KINDS, SampleFrame

NAME = "iostat"

#: Columns of the rows that are not measures.
_NOT_MEASURES = ("i", "report", "device", "parent", "device_kind", "ts", "interval_s",
                 "since_boot", "host")


def assemble(rows: pl.DataFrame, reports: pl.DataFrame, source: Source, *, unclean: bool,
             names: list[str] | None = None) -> SampleFrame:
    """Device ``rows`` (``report``, ``device``, measures) + ``reports`` (``report``, ``ts``,
    ``interval_s``, ``since_boot``, ``host``, CPU columns) -> SampleFrame.

    ``unclean``: some value was read as text (may be NaN or negative: :func:`clean_values`);
    ``names``: the distinct device names when the caller knows them already."""
    reports = reports.sort("report")
    ids = reports["report"]
    first, last = ids[0], ids[-1]
    if last - first + 1 == ids.len():  # consecutive ids (always, but for a cut report)
        pos = (rows["report"] - first).cast(pl.UInt32)
    else:
        pos = ids.search_sorted(rows["report"]).cast(pl.UInt32)
    per_report = [c for c in reports.columns if c not in ("report", "run")]
    joined = rows.with_columns(reports.select(per_report)[pos])
    if joined["ts"].null_count():
        # rows of a report whose time stamp was refused (--lenient) have no time
        joined = joined.filter(pl.col("ts").is_not_null())
    joined = _since_boot_on_evidence(joined, source)
    joined = with_total_kbps(joined)
    info = device_info(joined["device"].unique().to_list() if names is None else names)
    # a mapping of the few names, not a join (which would copy every column); a
    # constant when all devices agree (no partitions, one kind: the usual log)
    joined = joined.with_columns(
        per_device(info, "parent").alias("parent"),
        per_device(info, "device_kind").alias("device_kind"))
    measures = [c for c in joined.columns if c not in _NOT_MEASURES]
    if unclean:
        joined = clean_values(joined, measures, source)
    frame = joined.select(
        pl.lit(NAME).alias("source"), "host", "device", "device_kind", "parent", "ts",
        "interval_s", "since_boot", *measures)
    return SampleFrame(frame, validate=not trusted(reports, info, rows))


def _since_boot_on_evidence(rows: pl.DataFrame, source: Source) -> pl.DataFrame:
    """A banner's first report stays since-boot only when it is plausible as an average
    since boot (importers/first_report.py): else it is measured, with a note."""
    if source.first_report is not FirstReport.AUTO or not rows["since_boot"].any():
        return rows
    boot = rows.filter(pl.col("since_boot"))
    measured: list[int] = []
    for (report,), part in boot.group_by("report", maintain_order=True):
        if not first_report.since_boot(
                source, busiest=first_report.busiest(part),
                shown_by="the 'Linux … (host) date' banner before it: iostat prints its "
                "since-boot summary first ([sysstat] iostat(1))"):
            measured.append(int(report))
    if not measured:
        return rows
    return rows.with_columns(pl.col("since_boot") & ~pl.col("report").is_in(measured))


def clean_values(df: pl.DataFrame, measures: list[str], source: Source) -> pl.DataFrame:
    """NaN/inf (old sysstat prints nan) and negative values (counter bugs) -> null."""
    def bad(m: str) -> pl.Expr:
        return pl.col(m).is_nan() | pl.col(m).is_infinite() | (pl.col(m) < 0)
    if not measures or not df.select(pl.any_horizontal([bad(m) for m in measures])
                                     .any()).item():
        return df
    checks = df.select([(pl.col(m).is_nan() | pl.col(m).is_infinite()).sum().alias(m)
                        for m in measures] + [(pl.col(m) < 0).sum().alias(f"neg_{m}")
                                              for m in measures])
    nan = {m: int(checks[m][0]) for m in measures if int(checks[m][0])}
    neg = {m: int(checks[f"neg_{m}"][0]) for m in measures if int(checks[f"neg_{m}"][0])}
    if nan:
        source.note("values printed as nan/inf were read as not measured (null): "
                    + ", ".join(f"{m} x{c}" for m, c in nan.items()))
    if neg:
        source.note("negative values (a kernel or sysstat counter glitch) were read "
                    "as not measured (null): "
                    + ", ".join(f"{m} x{c}" for m, c in neg.items()))
    return df.with_columns([pl.when(bad(m)).then(None).otherwise(pl.col(m)).alias(m)
                            for m in {*nan, *neg}])


def with_total_kbps(df: pl.DataFrame) -> pl.DataFrame:
    """kBps = read + (write + discard) when a layout printed the latter together (the
    basic ``-s`` report's ``kB_w+d/s``)."""
    if "_wd_kBps" not in df.columns:
        return df
    read = pl.col("r_kBps") if "r_kBps" in df.columns else pl.lit(None)
    return df.with_columns((read + pl.col("_wd_kBps")).alias("kBps")).drop("_wd_kBps")


def device_info(names: list[str]) -> pl.DataFrame:
    """One row per device name: its ``parent`` (a partition's disk, else null) and its
    ``device_kind`` (``partition`` or the kind its name tells)."""
    parents = [guess_parent(d) for d in names]
    return pl.DataFrame({
        "device": names, "parent": parents,
        "device_kind": ["partition" if p is not None else kind_from_name(d)
                        for d, p in zip(names, parents, strict=True)],
    }, schema={"device": pl.String, "parent": pl.String, "device_kind": pl.String})


def per_device(info: pl.DataFrame, column: str) -> pl.Expr:
    """``info[column]`` (one row per device) for every row, by its ``device``."""
    values = info[column]
    if values.n_unique() == 1:
        return pl.lit(values[0], dtype=pl.String)
    return pl.col("device").replace_strict(info["device"], values, return_dtype=pl.String)


def trusted(reports: pl.DataFrame, devices: pl.DataFrame, rows: pl.DataFrame) -> bool:
    """Whether the SampleFrame assembled from ``rows`` needs no row-by-row validation.

    Every column of it comes from a report (time, interval, flag, host, CPU), a device
    (name, kind, parent) or a value of the device line. :meth:`SampleFrame.validate`'s
    rules are checked here on the few reports and devices instead of the many rows; the
    values need no check when every one was read by :func:`.decode.decode_fixed` (digits
    only: finite and >= 0) or went through :func:`clean_values`, which runs whenever one
    was read as text. Anything else (a zone gap left a time null, an impossible interval)
    returns False and the frame is validated in full, which names the offending row.
    """
    stamped = reports.filter(pl.col("ts").is_not_null())
    iv = stamped["interval_s"]
    return bool(
        rows["device"].null_count() == 0
        and stamped["host"].null_count() == 0 and stamped["since_boot"].null_count() == 0
        and iv.null_count() == 0
        and (iv.len() == 0 or bool(((iv > 0) & iv.is_finite()).all()))
        and devices["device_kind"].is_in(sorted(DEVICE_KINDS)).all()
        and devices["device_kind"].null_count() == 0)
