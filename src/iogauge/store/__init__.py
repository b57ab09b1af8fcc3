"""The embedded store: a DuckDB file of SampleFrame rows and device metadata.

The names below come from :mod:`iogauge.store.duckdb_store` when first used (PEP 562), so
that :mod:`iogauge.store.parquet` (``import --parquet``) does not load DuckDB (~70 ms of
every start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iogauge.store.duckdb_store import (
        DB_FILENAME,
        STORE_SCHEMA_VERSION,
        Store,
        default_db_path,
        duckdb_type,
        parse_time,
    )

__all__ = ["DB_FILENAME", "STORE_SCHEMA_VERSION", "Store", "default_db_path", "duckdb_type",
           "parse_time"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from iogauge.store import duckdb_store  # noqa: PLC0415 - loaded when first used

        return getattr(duckdb_store, name)
    raise AttributeError(f"module 'iogauge.store' has no attribute {name!r}")
