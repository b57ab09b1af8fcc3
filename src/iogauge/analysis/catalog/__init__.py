"""Device capability catalog: what a device can do for a given workload, with a source per figure.

[Yuge]: judge measured throughput against the device's published
capability *for the workload's attributes*, not against one number — one DS8000 RAID-5 rank
does ~2,200 IOPS of 4 KB random reads (≈ 8 MB/s) but ~600 MB/s sequential, so 300 MB/s says
nothing until the mix is known. This module holds that capability as data and interpolates it.

Data. The built-in profiles are TOML files in ``iogauge/analysis/catalog/`` (format in
``docs/catalog.md``): single disks by rpm, SATA/NVMe SSDs, RAID write penalties and a DS8000
rank, Azure managed-disk tiers, AWS EBS gp3/io2/st1, GCP Persistent Disk. Every figure is a
table ``{ value = ..., source = "key" }`` whose key names a citation in the file's
``[sources]``; figures the catalog derives (HDD random IOPS from seek and rotation, md RAID
limits from the members, size-scaled cloud limits) carry the formula and their inputs'
citations. User TOML files (``load_catalog(extra=...)``) add profiles or replace built-in
ones; a profile may ``extends`` another and change only some figures.

The parts: :mod:`.profiles` (data types), :mod:`.loader` (TOML files), :mod:`.limits`
(figures -> model inputs), :mod:`.lookup` (the :class:`Catalog` and device matching),
:mod:`.expect` (the model: what a profile sustains for a mix, see its docstring).
"""

from __future__ import annotations

from iogauge.analysis.catalog.expect import (
    Expected,
    Mix,
    capability,
    capability_for,
    expected,
    parse_profile_overrides,
)
from iogauge.analysis.catalog.loader import builtin_dir
from iogauge.analysis.catalog.lookup import Catalog, load_catalog
from iogauge.analysis.catalog.profiles import (
    KINDS,
    MIB_PER_MB,
    REF_KB,
    CatalogError,
    Exclusion,
    Family,
    Figure,
    Limits,
    MatchRule,
    Profile,
    RaidLevel,
)

__all__ = ["KINDS", "MIB_PER_MB", "REF_KB", "Catalog", "CatalogError", "Exclusion", "Expected",
           "Family", "Figure", "Limits", "MatchRule", "Mix", "Profile", "RaidLevel",
           "builtin_dir", "capability", "capability_for", "expected", "load_catalog",
           "parse_profile_overrides"]
