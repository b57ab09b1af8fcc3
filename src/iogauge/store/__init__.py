"""The embedded store: a DuckDB file of SampleFrame rows and device metadata."""

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
