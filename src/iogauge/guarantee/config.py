"""The guarantee controller's configuration: command-line options and the TOML form.

A TOML file (``iogauge guarantee --config FILE``) carries the same settings as the options;
options given on the command line win over the file. Example (docs/guarantee.md has more)::

    device = "/dev/sdb"
    interval_s = 1.0
    policy = "adaptive"            # or "paper" ([Oe] §4 exactly)
    state = "/run/iogauge/guarantee.state.json"
    db = "/var/lib/iogauge/guarantee.duckdb"
    b_min_iops = 5

    [[protect]]
    cgroup = "/sys/fs/cgroup/fileserver.slice"
    iops = 100

    [[throttle]]
    cgroup = "/sys/fs/cgroup/backup.slice"

    [paper]                        # PaperParams fields
    x_initial_pct = 95.0

    [adaptive]                     # AdaptiveParams fields
    x_max_pct = 90.0

Unknown keys are refused with the list of known ones, so a typo cannot silently fall back to
a default.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.policy import POLICY_NAMES, AdaptiveParams, PaperParams, PolicyName
from iogauge.guarantee.safety import DEFAULT_STATE_PATH

CapacityModel = Literal["auto", "util", "latency"]
OnInfeasible = Literal["warn", "refuse"]


@dataclass(frozen=True)
class ProtectSpec:
    """A protected cgroup and its floor.

    Attributes:
        cgroup: absolute cgroup directory (v1 blkio or v2).
        iops: floor in I/Os per second (reads + writes).
    """

    cgroup: Path
    iops: float


@dataclass(frozen=True)
class GuaranteeConfig:
    """Everything ``iogauge guarantee`` needs.

    Attributes:
        device: /dev path, kernel name or major:minor; a partition means its disk.
        protect: protected cgroups with floors (A).
        throttle: throttled cgroup directories (B); they share B's budget.
        interval_s: seconds between decisions ([Oe] used 20 s iostat samples).
        policy: ``adaptive`` (default) or ``paper``.
        state: state file recording every limit written and the value it replaced.
        db: DuckDB store for the decisions (None: the default store).
        record: write decisions to the store at all.
        dry_run: print the limits that would be written, write nothing.
        duration_s: stop after this long (None: until SIGTERM/SIGINT).
        b_min_iops: every throttled group keeps at least this many reads and writes/s.
        capacity_model: ``util`` (%util is capacity: one spindle), ``latency`` (SSD, NVMe,
            RAID: capacity from the latency knee) or ``auto`` (from sysfs).
        capacity_iops: the device's capacity if known (starting estimate, up-front check).
        on_infeasible: ``warn`` (keep running, B at its minimum) or ``refuse`` (stop,
            restoring every limit) when the floors exceed what the device can give.
        flush_s: decisions are committed to the store at least this often.
        sample_s: while A shows no demand and B's limits are open, A's counters are read
            this often between decisions (at most every ``interval_s``), and a decision is
            taken at once when A's I/O returns (limits are still written only on a change).
        reserve_idle: keep A's floor reserved while A is idle (the adaptive policy's
            ``reserve_idle``; the paper's policy always reserves it).
        paper, adaptive: policy constants.
    """

    device: str
    protect: tuple[ProtectSpec, ...]
    throttle: tuple[Path, ...]
    interval_s: float = 1.0
    policy: PolicyName = "adaptive"
    state: Path = DEFAULT_STATE_PATH
    db: Path | None = None
    record: bool = True
    dry_run: bool = False
    duration_s: float | None = None
    b_min_iops: int = 1
    capacity_model: CapacityModel = "auto"
    capacity_iops: float | None = None
    on_infeasible: OnInfeasible = "warn"
    flush_s: float = 5.0
    sample_s: float = 0.2
    reserve_idle: bool = False
    paper: PaperParams = field(default_factory=PaperParams)
    adaptive: AdaptiveParams = field(default_factory=AdaptiveParams)

    def __post_init__(self) -> None:
        if not self.device:
            raise GuaranteeError("no device: give --device DEV (or device = ... in the config)")
        if not self.protect:
            raise GuaranteeError("no protected cgroup: give --protect CGROUP_DIR:IOPS")
        if not self.throttle:
            raise GuaranteeError("no throttled cgroup: give --throttle CGROUP_DIR")
        if not (math.isfinite(self.interval_s) and self.interval_s >= 0.1):
            raise GuaranteeError(f"interval must be >= 0.1 s, got {self.interval_s}")
        if not (math.isfinite(self.sample_s) and self.sample_s >= 0.05):
            raise GuaranteeError(f"sample interval must be >= 0.05 s, got {self.sample_s}")
        if self.policy not in POLICY_NAMES:
            raise GuaranteeError(f"unknown policy {self.policy!r}; choose "
                                 f"{' or '.join(POLICY_NAMES)}")
        if self.capacity_model not in get_args(CapacityModel):
            raise GuaranteeError(f"capacity_model must be auto, util or latency, got "
                                 f"{self.capacity_model!r}")
        if self.on_infeasible not in get_args(OnInfeasible):
            raise GuaranteeError(f"on_infeasible must be warn or refuse, got "
                                 f"{self.on_infeasible!r}")
        if self.b_min_iops < 1:
            raise GuaranteeError(f"b_min_iops must be >= 1 (0 would mean 'no limit' to the "
                                 f"kernel), got {self.b_min_iops}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise GuaranteeError(f"duration must be > 0, got {self.duration_s}")
        if self.capacity_iops is not None and not self.capacity_iops > 0:
            raise GuaranteeError(f"capacity_iops must be > 0, got {self.capacity_iops}")
        for p in (*(s.cgroup for s in self.protect), *self.throttle):
            if not p.is_absolute():
                raise GuaranteeError(f"cgroup directory {p} must be an absolute path")
        seen: set[Path] = set()
        for p in (*(s.cgroup for s in self.protect), *self.throttle):
            if p in seen:
                raise GuaranteeError(f"cgroup {p} is given twice (a group is either protected "
                                     "or throttled, once)")
            seen.add(p)


def parse_protect(text: str) -> ProtectSpec:
    """``CGROUP_DIR:IOPS`` (split at the last colon) -> ProtectSpec."""
    path, sep, num = text.rpartition(":")
    if not sep or not path:
        raise GuaranteeError(f"--protect {text!r}: expected CGROUP_DIR:IOPS, e.g. "
                             "/sys/fs/cgroup/fileserver.slice:100")
    try:
        iops = float(num)
    except ValueError:
        raise GuaranteeError(f"--protect {text!r}: {num!r} is not a number of IOPS") from None
    if not (math.isfinite(iops) and iops > 0):
        raise GuaranteeError(f"--protect {text!r}: the floor must be a positive number of "
                             "IOPS")
    return ProtectSpec(Path(path), iops)


_TOP_KEYS = {
    "device", "interval_s", "policy", "state", "db", "record", "dry_run", "duration_s",
    "b_min_iops", "capacity_model", "capacity_iops", "on_infeasible", "flush_s", "protect",
    "sample_s", "reserve_idle",
    "throttle", "paper", "adaptive",
}


_TYPES: dict[str, type] = {
    "device": str, "interval_s": float, "policy": str, "record": bool, "dry_run": bool,
    "duration_s": float, "b_min_iops": int, "capacity_model": str, "capacity_iops": float,
    "on_infeasible": str, "flush_s": float, "sample_s": float, "reserve_idle": bool,
}


def _params(cls: type[Any], raw: object, where: str) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        raise GuaranteeError(f"{where}: must be a table of {cls.__name__} fields")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise GuaranteeError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(names))}")
    try:
        return cls(**dict(raw))
    except (TypeError, ValueError) as exc:
        raise GuaranteeError(f"{where}: {exc}") from exc


def load_toml(path: str | Path) -> dict[str, Any]:
    """The file's settings (validated keys, types converted), for :func:`build_config`."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GuaranteeError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise GuaranteeError(f"{p}: not valid TOML: {exc}") from exc
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise GuaranteeError(f"{p}: unknown key(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(_TOP_KEYS))}")
    out: dict[str, Any] = {k: v for k, v in raw.items()
                           if k not in ("protect", "throttle", "paper", "adaptive")}
    protect = []
    for i, item in enumerate(raw.get("protect", [])):
        if not isinstance(item, Mapping) or set(item) != {"cgroup", "iops"}:
            raise GuaranteeError(f"{p}: [[protect]] #{i + 1} needs exactly cgroup = \"DIR\" "
                                 "and iops = N")
        try:
            protect.append(ProtectSpec(Path(str(item["cgroup"])), float(item["iops"])))
        except (TypeError, ValueError):
            raise GuaranteeError(f"{p}: [[protect]] #{i + 1}: iops must be a number") from None
    if protect:
        out["protect"] = tuple(protect)
    throttle: list[Path] = []
    for i, item in enumerate(raw.get("throttle", [])):
        if isinstance(item, str):
            throttle.append(Path(item))
        elif isinstance(item, Mapping) and set(item) == {"cgroup"}:
            throttle.append(Path(str(item["cgroup"])))
        else:
            raise GuaranteeError(f"{p}: throttle #{i + 1} must be a path or a table with "
                                 "cgroup = \"DIR\"")
    if throttle:
        out["throttle"] = tuple(throttle)
    for key in ("state", "db"):
        if key in out:
            out[key] = Path(str(out[key]))
    for key, typ in _TYPES.items():
        if key in out:
            v = out[key]
            ok = (isinstance(v, bool) if typ is bool else
                  isinstance(v, int) and not isinstance(v, bool) if typ is int else
                  isinstance(v, int | float) and not isinstance(v, bool) if typ is float else
                  isinstance(v, str))
            if not ok:
                raise GuaranteeError(f"{p}: {key} must be a {typ.__name__}, got {v!r}")
            out[key] = typ(v)
    if "paper" in raw:
        out["paper"] = _params(PaperParams, raw["paper"], f"{p}: [paper]")
    if "adaptive" in raw:
        out["adaptive"] = _params(AdaptiveParams, raw["adaptive"], f"{p}: [adaptive]")
    return out


def build_config(file_settings: Mapping[str, Any] | None,
                 overrides: Mapping[str, Any]) -> GuaranteeConfig:
    """Settings from the file, then every override that is not None (the command line)."""
    merged: dict[str, Any] = dict(file_settings or {})
    for k, v in overrides.items():
        if v is None or (isinstance(v, Sequence) and not isinstance(v, str) and not v):
            continue
        merged[k] = v
    merged.setdefault("device", "")
    merged.setdefault("protect", ())
    merged.setdefault("throttle", ())
    merged["protect"] = tuple(merged["protect"])
    merged["throttle"] = tuple(Path(p) for p in merged["throttle"])
    try:
        return GuaranteeConfig(**merged)
    except TypeError as exc:
        raise GuaranteeError(f"configuration: {exc}") from exc


__all__ = ["CapacityModel", "GuaranteeConfig", "OnInfeasible", "ProtectSpec", "build_config",
           "load_toml", "parse_protect"]
