"""Closed intervals -> tables -> SampleFrame rows: times, storage-group summaries and the
volume -> rank links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from iogauge.importers.rmf.sections import _SECTION_BITS
from iogauge.importers.rmf.state import _Interval, _Piece, _State
from iogauge.importers.rmf.tokens import NAME
from iogauge.model.sampleframe import SCHEMA


def _keep_runs(st: _State, piece: _Piece) -> None:
    """The rows of the runs of data lines read at once (:func:`_bulk`) into State.parts: one
    gather from each parsed table of the piece, with each row's interval (host, _start).
    Called at the end of a piece, and before its intervals' rows are tabled."""
    for key, parsed in piece.parsed.items():
        if not parsed.runs:
            continue
        rows = np.concatenate([r for r, _ in parsed.runs])
        run = np.repeat(np.arange(len(parsed.runs)), [r.size for r, _ in parsed.runs])
        info = pl.DataFrame([(k, *meta) for k, (_, meta) in enumerate(parsed.runs)],
                            schema={"_run": pl.Int64(), "host": pl.String(),
                                    "_start": pl.Datetime("us"), "_serial": pl.String()},
                            orient="row")
        df = parsed.frame[rows].with_columns(pl.Series("_run", run, dtype=pl.Int64())).join(
            info, on="_run", how="left", maintain_order="left")
        none = pl.lit(None, pl.String())
        if key[0] == "dasd":
            kind = pl.col("kind")
            st.parts.append(df.select(
                "host", "_start", "device", kind.alias("device_kind"),
                *parsed.frame.columns[6:],  # (the mapped values: see _dasd_parsed)
                pl.when(kind == "volume").then(pl.col("lcu")).otherwise(none).alias("_lcu"),
                pl.when(kind == "volume").then(pl.col("sg")).otherwise(none).alias("_sg"),
                none.alias("_link"),
                pl.lit(_SECTION_BITS["DASD"], pl.UInt8()).alias("_sections")))
        else:  # the device overview: its TOTAL H/R, and its XTNT POOL column
            serial = pl.col("_serial")
            st.parts.append(df.select(
                "host", "_start", pl.col("volser").alias("device"),
                pl.lit("volume", pl.String()).alias("device_kind"),
                pl.col("hit").alias("cache_hit_pct"), none.alias("_lcu"), none.alias("_sg"),
                pl.when(serial.is_not_null())
                .then(pl.concat_str([pl.lit("POOL"), pl.col("pool"), serial], separator="\t"))
                .otherwise(none).alias("_link"),
                pl.lit(value=True).alias("_has_hit"),  # (as its setdefault set the key)
                pl.lit(_SECTION_BITS["cache device overview"], pl.UInt8()).alias("_sections")))
        parsed.runs = []

# ---------------------------------------------------------------------------------------------
# frame
# ---------------------------------------------------------------------------------------------
#: Rows of closed intervals made into one table at a time (see :func:`_close_older`).
_ROWS_PER_TABLE = 10_000


def _close_older(st: _State, new: _Interval) -> None:
    """A new interval of a host began: its earlier ones are closed. RMF prints the reports of
    an interval together, so their rows are complete; they are moved from Python dicts (the
    bulk of what a long report holds, some 1.4 kB a row) into a table of the columns present
    once :data:`_ROWS_PER_TABLE` rows are closed. A page of a closed interval that comes
    after all opens it again (:func:`_reopen`)."""
    still: list[tuple[str, datetime]] = []
    open_keys = st.open_keys.setdefault(new.host, [])
    for key in open_keys:
        iv = st.intervals.get(key)
        if iv is None or iv.closed:
            continue
        if iv.start < new.start:
            iv.closed = True
            st.closed.append(key)
            st.closed_rows += iv.devices()
        else:
            still.append(key)
    still.append((new.host, new.start))
    st.open_keys[new.host] = still
    if st.closed_rows >= _ROWS_PER_TABLE:
        _tables_of_closed(st)


def _ts_of(st: _State, iv: _Interval) -> datetime:
    """An interval's ``ts``: its end, in UTC."""
    end_local = iv.start + timedelta(seconds=float(iv.interval_s))
    tz = st.source.tz
    return (end_local.replace(tzinfo=tz).astimezone(UTC) if tz is not None
            else end_local.replace(tzinfo=UTC))


def _tables_of_closed(st: _State) -> None:
    """The rows of the closed intervals into a table (see :func:`_close_older`): those read
    one line at a time (each with whether it set cache_hit_pct) and those read a run at a
    time (State.parts, the current piece's first), merged into a row a device
    (:func:`_merged`)."""
    if st.piece is not None:
        _keep_runs(st, st.piece)
    batch: list[dict[str, Any]] = []
    extra: dict[str, list[Any]] = {"host": [], "_start": [], "ts": [], "interval_s": [],
                                   "_link": [], "_lcu": [], "_sg": [], "_has_hit": [],
                                   "_sections": []}
    tabled: list[_Interval] = []
    for key in st.closed:
        iv = st.intervals.get(key)
        if iv is None or iv.in_table:
            continue
        tabled.append(iv)
        ts = _ts_of(st, iv)
        for device, row in iv.rows.items():
            batch.append(row)
            extra["host"].append(iv.host)
            extra["_start"].append(iv.start)
            extra["ts"].append(ts)
            extra["interval_s"].append(float(iv.interval_s))
            link = st.vol_links.pop((iv.host, iv.start, device), None)
            extra["_link"].append("\t".join(link) if link is not None else None)
            extra["_lcu"].append(st.vol_lcu.pop((iv.host, iv.start, device), None))
            extra["_sg"].append(st.vol_sg.pop((iv.host, iv.start, device), None))
            extra["_has_hit"].append("cache_hit_pct" in row)
            extra["_sections"].append(sum(bit for section, bit in _SECTION_BITS.items()
                                          if (device, section) in iv.seen))
        iv.rows, iv.kinds = {}, {}
        iv.in_table = True
        if not iv.folded:  # (what _drop_short_last_intervals needs of it: the intersection)
            common = st.common_seen.get(iv.host)
            st.common_seen[iv.host] = iv.seen if common is None else common & iv.seen
        iv.seen, iv.folded = set(), True
    st.closed.clear()
    st.closed_rows = 0
    frames: list[pl.DataFrame] = []
    if batch:
        keys: set[str] = set().union(*batch)  # (one pass over the rows, not one a column)
        present = [c for c in SCHEMA if c in keys]
        table = pl.DataFrame(batch, schema={c: SCHEMA[c] for c in present})
        frames.append(table.with_columns(
            pl.Series("host", extra["host"], dtype=pl.String()),
            pl.Series("_start", extra["_start"], dtype=pl.Datetime("us")),
            pl.Series("ts", extra["ts"], dtype=SCHEMA["ts"]),
            pl.Series("interval_s", extra["interval_s"], dtype=pl.Float64()),
            pl.Series("_link", extra["_link"], dtype=pl.String()),
            pl.Series("_lcu", extra["_lcu"], dtype=pl.String()),
            pl.Series("_sg", extra["_sg"], dtype=pl.String()),
            pl.Series("_has_hit", extra["_has_hit"], dtype=pl.Boolean()),
            pl.Series("_sections", extra["_sections"], dtype=pl.UInt8())))
        del batch, table
    if tabled and st.parts:  # (their rows read a run at a time, with ts; the rest stay)
        when = _when(st, tabled)
        keep: list[pl.DataFrame] = []
        for part in st.parts:
            mine = part.join(when, on=["host", "_start"], how="inner", maintain_order="left")
            if mine.height:
                frames.append(mine)
                part = part.join(when, on=["host", "_start"], how="anti",  # noqa: PLW2901
                                 maintain_order="left")
            if part.height:
                keep.append(part)
        st.parts = keep
    if frames:
        st.tables.append(_merged(frames))


def _seen_of(rows: pl.DataFrame) -> set[tuple[str, str]]:
    """The (device, section) lines that tabled ``rows`` were read from (their _sections)."""
    if "_sections" not in rows.columns:
        return set()
    return {(device, section) for device, bits in rows.select("device", "_sections").iter_rows()
            for section, bit in _SECTION_BITS.items() if (bits or 0) & bit}


def _tabled_seen(st: _State, iv: _Interval) -> set[tuple[str, str]]:
    """The lines of a tabled interval (as :func:`_seen_of`)."""
    mine = (pl.col("host") == iv.host) & (pl.col("_start") == iv.start)
    return set().union(*(_seen_of(table.filter(mine)) for table in st.tables))


def _when(st: _State, ivs: list[_Interval]) -> pl.DataFrame:
    """The intervals ``ivs`` (host, _start) with their ts and interval_s."""
    return pl.DataFrame({"host": [iv.host for iv in ivs], "_start": [iv.start for iv in ivs],
                         "ts": [_ts_of(st, iv) for iv in ivs],
                         "interval_s": [float(iv.interval_s) for iv in ivs]},
                        schema={"host": pl.String(), "_start": pl.Datetime("us"),
                                "ts": SCHEMA["ts"], "interval_s": pl.Float64()})


def _reopen(st: _State, iv: _Interval) -> None:
    """Open a closed interval again: its rows back to dicts (rare: a page out of order)."""
    iv.closed = False
    st.open_keys.setdefault(iv.host, []).append((iv.host, iv.start))
    if (iv.host, iv.start) in st.closed:
        st.closed.remove((iv.host, iv.start))
        st.closed_rows -= iv.devices()
    if not iv.in_table:
        return
    mine = (pl.col("host") == iv.host) & (pl.col("_start") == iv.start)
    for k, table in enumerate(st.tables):
        rows = table.filter(mine)
        if rows.height:
            st.tables[k] = table.filter(~mine)
            # (a cache_hit_pct set to N/A stays set: see _merged)
            iv.rows = {r["device"]: {c: v for c, v in r.items() if v is not None
                                     or (c == "cache_hit_pct" and r.get("_has_hit"))}
                       for r in rows.drop("host", "_start", "ts", "interval_s", "_link",
                                          "_lcu", "_sg").to_dicts()}
            for row in iv.rows.values():
                row.pop("_has_hit", None)
                row.pop("_sections", None)
            iv.seen |= _seen_of(rows)
            for device, link_text, lcu, sg in rows.select("device", "_link", "_lcu",
                                                          "_sg").iter_rows():
                link = _link_of(link_text)
                if link is not None:
                    st.vol_links[(iv.host, iv.start, device)] = link
                if lcu is not None:
                    st.vol_lcu[(iv.host, iv.start, device)] = lcu
                if sg is not None:
                    st.vol_sg[(iv.host, iv.start, device)] = sg
    # (a tabled interval's rows are all in its table: those of its runs went in with them)
    for device, row in iv.rows.items():
        iv.kinds.setdefault(row["device_kind"], set()).add(device)
    iv.in_table = False


def _frame(st: _State) -> pl.DataFrame:
    """Every row, sorted (time, host, kind, device), with its parent."""
    if st.source.tz is None and st.intervals:
        st.source.note("RMF reports print z/OS local time without a zone; assumed UTC (use --tz "
                       "to give the system's zone)")
    for key, iv in st.intervals.items():
        if not iv.closed:
            iv.closed = True
            st.closed.append(key)
    _tables_of_closed(st)
    st.parts = []  # (what is left is of intervals dropped as cut off)
    # (and the tables of intervals dropped after their rows were tabled go)
    kept = _when(st, list(st.intervals.values())).select("host", "_start")
    tables = [t.join(kept, on=["host", "_start"], how="semi", maintain_order="left")
              for t in st.tables if t.height]
    st.tables = []
    tables = [t for t in tables if t.height]
    if not tables:
        return pl.DataFrame()
    df = (pl.concat(tables, how="diagonal_relaxed", rechunk=False) if len(tables) > 1
          else tables[0])
    del tables
    groups = _storage_groups(st, df)
    df = df.with_columns(pl.lit(NAME, pl.String()).alias("source"),
                         _parents(st, df).alias("parent")).drop(
        "_start", "_link", "_lcu", "_sg", "_has_hit", "_sections", strict=False)
    if groups is not None:
        df = pl.concat([df, groups], how="diagonal_relaxed", rechunk=False)
    # sorted a column at a time, each let go once gathered: a frame of tables sorted whole
    # is copied into one piece first and then gathered (the peak twice the frame, 48 MB
    # more on the benchmark input, against the one piece the reading had left before)
    order = df.select(pl.arg_sort_by("ts", "host", "device_kind", "device")).to_series()
    out: list[pl.Series] = []
    for c in df.columns:
        out.append(df[c].gather(order))
        df = df.drop(c)
    return pl.DataFrame(out)


def _merged(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """One row per (host, interval start, device) of ``frames``, the first of which holds the
    rows read a line at a time. Each column is taken from the first row that sets it: a
    section sets its own columns, and a device is in a section once (:func:`_row`,
    :func:`_bulk`). Two sections set the same columns: the cache device page and the device
    overview set cache_hit_pct and the volume's link. The page's wins, whichever came first,
    as its assignment won over the overview's ``setdefault`` -- even with no value (H/R
    N/A): cache_hit_pct is taken from the first row that set it (_has_hit: the rows read a
    line at a time say whether they did, the overview's runs did), not the first with a
    value. A row keeps _has_hit, for :func:`_reopen`.

    The groups are numbered with numpy from the key columns' codes, each group's first row
    found with ``minimum.at`` of row numbers, and each column gathered by it: a polars
    group_by took some 0.5 kB a row (85 MB on the benchmark input in one go)."""
    df = (pl.concat(frames, how="diagonal_relaxed", rechunk=False) if len(frames) > 1
          else frames[0])
    frames.clear()
    n = df.height
    _, group = _groups(df, "device")
    groups = int(group.max()) + 1 if n else 0
    if groups == n:
        return df
    rows = np.arange(n, dtype=np.int64)

    def gather(col: pl.Series, mask: np.ndarray | None) -> pl.Series:
        """``col`` at each group's first row where ``mask`` holds (null where none does)."""
        first = np.full(groups, n, dtype=np.int64)
        if mask is None:
            np.minimum.at(first, group, rows)
        else:
            np.minimum.at(first, group[mask], rows[mask])
        missing = np.flatnonzero(first == n)
        out = col.gather(np.minimum(first, n - 1))
        return out.scatter(missing, None) if missing.size else out

    has_hit = (df["_has_hit"].fill_null(value=False).to_numpy() if "_has_hit" in df.columns
               else np.zeros(n, dtype=bool))
    out = []
    for c in df.columns:
        col = df[c]
        if c == "_sections":  # (every section a device of the group was read in)
            bits = np.zeros(groups, dtype=np.uint8)
            np.bitwise_or.at(bits, group, col.fill_null(0).to_numpy())
            out.append(pl.Series(c, bits, dtype=pl.UInt8()))
        elif c in ("host", "_start", "device"):
            out.append(gather(col, None))
        elif c in ("cache_hit_pct", "_has_hit"):
            out.append(gather(col, has_hit))
        else:
            out.append(gather(col, col.is_not_null().to_numpy()))
    return pl.DataFrame(out)


#: The DASD times of a storage group's row: means over the group's I/Os (see
#: :func:`_storage_groups`).
_SG_TIMES = ("await_ms", "iosq_ms", "pend_ms", "disc_ms", "conn_ms")
#: Storage groups named one by one in the import's note, then counted.
_SG_LISTED = 10


def _storage_groups(st: _State, df: pl.DataFrame) -> pl.DataFrame | None:
    """A row per storage group and interval -- device ``SG:name``, kind ``lcu``, no parent --
    computed from the DASD lines of the volumes that name it in the STORAGE GROUP column:
    ``iops`` is their DEVICE ACTIVITY RATEs summed; AVG RESP/IOSQ/PEND/DISC/CONN TIME the mean
    over the group's I/Os (each volume's time weighted by its activity rate, over the volumes
    that print it; the plain mean when none had any I/O); % DEV UTIL the volumes' mean. That
    is how RMF's LCU summary line is made from its device lines (LCU 0040 of the fixtures
    checks it to the printed digits), and how RMF's overview conditions for a storage group
    (``SG(name)``: DART = SSC / INT, DCTAVG = CNN / SSC, ...; z/OS RMF User's Guide,
    "Device Activity - SMF record type 74-1") sum the counters of its devices."""
    if "_sg" not in df.columns:
        return None
    present = [c for c in (*_SG_TIMES, "util_pct") if c in df.columns]
    rate = pl.col("iops") if "iops" in df.columns else pl.lit(None, pl.Float64())
    vols = df.select("host", "_start", "ts", "interval_s", "_sg", rate.alias("iops"),
                     *present).filter(pl.col("_sg").is_not_null())
    if vols.height == 0:
        return None
    # Groups numbered and summed with numpy (bincount): a polars group_by of these rows
    # took 22 MB more on the benchmark input (100 MB of report), this some 11 MB.
    first, group = _groups(vols, "_sg")

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=first.size)

    def column(name: str) -> np.ndarray:
        return vols[name].cast(pl.Float64()).fill_null(np.nan).to_numpy()

    iops = column("iops")
    has_rate = ~np.isnan(iops)
    values: dict[str, np.ndarray] = {
        "iops": np.where(total(has_rate) > 0, total(np.where(has_rate, iops, 0.0)), np.nan)}
    for name in present:
        x = column(name)
        has = ~np.isnan(x)
        mean = total(np.where(has, x, 0.0)) / np.maximum(total(has), 1)
        mean[total(has) == 0] = np.nan
        if name == "util_pct":
            values[name] = mean
            continue
        both = has & has_rate
        weight = total(np.where(both, iops, 0.0))
        values[name] = np.where(weight > 0, total(np.where(both, x * iops, 0.0))
                                / np.where(weight > 0, weight, 1.0), mean)
    heads: pl.DataFrame = vols.select("host", "ts", "interval_s", "_sg")[first]
    # A sum's last digits depend on the order of the lines (read a run at a time or one by
    # one): rounded to 1e-9, far below the 0.001 RMF prints, they do not.
    groups = heads.with_columns(
        *(pl.Series(name, np.round(v, 9), dtype=pl.Float64()).fill_nan(None)
          for name, v in values.items()),
        pl.Series("_volumes", np.bincount(group, minlength=first.size), dtype=pl.Int64()))
    sizes = groups.group_by("_sg").agg(pl.col("_volumes").max()).sort("_sg")
    named = [f"{sg} ({n} volume{'s' if n != 1 else ''})"
             for sg, n in sizes.head(_SG_LISTED).iter_rows()]
    more = f" and {sizes.height - _SG_LISTED} more" if sizes.height > _SG_LISTED else ""
    st.source.note(f"storage groups computed from their volumes' DASD lines (rows SG:name): "
                   f"{', '.join(named)}{more}")
    return groups.select(
        pl.lit(NAME, pl.String()).alias("source"), "host",
        (pl.lit("SG:") + pl.col("_sg")).alias("device"),
        pl.lit("lcu", pl.String()).alias("device_kind"),
        pl.lit(None, pl.String()).alias("parent"), "ts", "interval_s",
        *(c for c in groups.columns if c in SCHEMA and c not in ("host", "ts", "interval_s")))


def _groups(df: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``df`` grouped by (host, ``name``, _start): each group's first row, and
    each row's group number (groups in key order). Numbered with numpy from the key columns'
    codes (fewer than 2**31 of each: the product fits in int64)."""
    key = np.zeros(df.height, dtype=np.int64)
    for c in ("host", name):
        codes = df[c].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
        key = key * (int(codes.max()) + 1) + codes
    starts, start_code = np.unique(df["_start"].to_physical().to_numpy(), return_inverse=True)
    _, first, group = np.unique(key * starts.size + start_code, return_index=True,
                                return_inverse=True)
    return first, group


def _parents(st: _State, df: pl.DataFrame) -> pl.Series:
    """Every row's parent: a rank's pool; a volume's rank (its link from the cache report:
    RRID, or an extent pool of one rank), else its extent pool, else its LCU (DASD
    report); none for the other kinds. The parent of each link is worked out once (a
    volume's link is its rank's or its pool's, shared), and looked up by the rows:
    expressions over every row took 40 MB on the benchmark input."""
    links: dict[str, str] = {}
    for text in df["_link"].drop_nulls().unique().to_list():
        what, ident, serial = text.split("\t")
        ranks = st.pool_ranks.get((serial, ident), set()) if what != "RRID" else set()
        links[text] = (f"RANK:{ident}@{serial}" if what == "RRID"
                       else next(iter(ranks)) if len(ranks) == 1 else f"POOL:{ident}@{serial}")
    kind = pl.col("device_kind")
    none = pl.lit(None, pl.String())
    return df.select(
        pl.when(kind == "volume").then(pl.coalesce(
            pl.col("_link").replace_strict(links, default=none, return_dtype=pl.String()),
            pl.lit("LCU:") + pl.col("_lcu")))
        .when(kind == "rank").then(pl.col("device").replace_strict(
            st.rank_pool, default=none, return_dtype=pl.String()))
        .otherwise(none).alias("parent")).to_series()


#: Rows per SampleFrame handed on by :func:`iter_parse`.
_ROWS_OUT = 50_000


def _link_of(text: str | None) -> tuple[str, str, str] | None:
    """A volume's link as the table holds it (``what<TAB>id<TAB>serial``)."""
    if not text:
        return None
    what, ident, serial = text.split("\t")
    return what, ident, serial
