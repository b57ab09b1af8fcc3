"""Disk model profiles: TOML files of published parameters, and the models built from them.

A profile is one TOML file (the bundled ones live in ``iogauge/lab/profiles/``)::

    name = "hdd-7200"
    kind = "hdd"                      # hdd | raid | ssd
    description = "..."
    sources = ["datasheet, table, URL", ...]   # where every figure comes from

    [hdd]                             # kind = "hdd": HddParams, capacity in capacity_GB
    capacity_GB = 1000                # 10**9 bytes
    rpm = 7200
    ...

    [raid]                            # kind = "raid": RaidParams ...
    level = 5
    ...
    [member]                          # ... and the member disk: a profile name and/or
    profile = "hdd-7200-400g"         #     [hdd] keys overriding it

    [ssd]                             # kind = "ssd": SsdParams, capacity in capacity_GB

Unknown or missing keys are errors naming the file and the key, so a typo cannot silently
fall back to a default. ``capacity_bytes`` of :func:`build_model` rescales a model to a
device of another size (the emulated device is usually smaller than the disk it imitates):
the geometry is stretched, so the same *fractions* of the device behave the same.
"""

from __future__ import annotations

import tomllib
from dataclasses import MISSING, dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from iogauge.errors import InputFormatError
from iogauge.lab import accel
from iogauge.lab.hdd import HddParams
from iogauge.lab.model import DiskModel
from iogauge.lab.raid import RaidParams
from iogauge.lab.ssd import SsdParams

#: Profile used when none is named.
DEFAULT_PROFILE = "hdd-7200"
KINDS = ("hdd", "raid", "ssd")
_GB = 10**9
_P = TypeVar("_P", HddParams, RaidParams, SsdParams)


@dataclass(frozen=True)
class ModelProfile:
    """A parsed profile.

    Attributes:
        name: profile name (``hdd-7200``).
        kind: ``hdd``, ``raid`` or ``ssd``.
        description: one line for listings.
        sources: where the figures come from.
        params: HddParams, SsdParams, or RaidParams (kind ``raid``).
        member: the member disk's parameters (kind ``raid`` only).
        path: the file it was read from.
    """

    name: str
    kind: str
    description: str
    sources: tuple[str, ...]
    params: HddParams | RaidParams | SsdParams
    member: HddParams | None
    path: str

    @property
    def capacity_bytes(self) -> int:
        """Capacity of the device the profile describes (as :func:`build_model` builds it)."""
        return build_model(self).capacity_bytes


def _profiles_dir() -> Path:
    return Path(str(resources.files("iogauge.lab") / "profiles"))


def list_profiles() -> list[str]:
    """Names of the bundled profiles."""
    return sorted(p.stem for p in _profiles_dir().glob("*.toml"))


def profile_path(name_or_path: str | Path) -> Path:
    """The file of a bundled profile name, or the given path if it is a file."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise InputFormatError(p, None, "profile file not found")
        return p
    bundled = _profiles_dir() / f"{name_or_path}.toml"
    if not bundled.is_file():
        raise InputFormatError(str(name_or_path), None, "no such disk model profile; "
                               f"bundled: {', '.join(list_profiles())}")
    return bundled


def load_profile(name_or_path: str | Path) -> ModelProfile:
    """Parse a bundled profile (by name) or a profile file (by path)."""
    path = profile_path(name_or_path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(path, None, f"cannot read profile: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputFormatError(path, getattr(exc, "lineno", None),
                               f"not valid TOML: {exc}") from exc
    return _parse(doc, path)


def _parse(doc: dict[str, Any], path: Path) -> ModelProfile:
    def need(table: dict[str, Any], key: str, where: str) -> Any:
        if key not in table:
            raise InputFormatError(path, None, f"missing key {where}{key}")
        return table[key]

    kind = need(doc, "kind", "")
    if kind not in KINDS:
        raise InputFormatError(path, None, f"kind {kind!r} is not one of {', '.join(KINDS)}")
    allowed_top = {"name", "kind", "description", "sources", kind}
    if kind == "raid":
        allowed_top.add("member")
    extra = set(doc) - allowed_top
    if extra:
        raise InputFormatError(path, None, f"unknown key(s) {', '.join(sorted(extra))}")
    name = str(doc.get("name", path.stem))
    sources = doc.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InputFormatError(path, None, "sources must be a list of strings")
    table = need(doc, kind, "")
    if not isinstance(table, dict):
        raise InputFormatError(path, None, f"[{kind}] must be a table")
    member: HddParams | None = None
    params: HddParams | RaidParams | SsdParams
    if kind == "hdd":
        params = _hdd_params(table, path, f"[{kind}].")
    elif kind == "ssd":
        params = _dataclass_from(SsdParams, _with_capacity(table, path, "[ssd]."), path,
                                 "[ssd].")
    else:
        params = _dataclass_from(RaidParams, table, path, "[raid].")
        mt = doc.get("member")
        if not isinstance(mt, dict):
            raise InputFormatError(path, None, "a raid profile needs a [member] table")
        mt = dict(mt)
        base: dict[str, Any] = {}
        if "profile" in mt:
            ref = load_profile(str(mt.pop("profile")))
            if not isinstance(ref.params, HddParams):
                raise InputFormatError(path, None, "[member].profile must be an hdd profile")
            base = {f.name: getattr(ref.params, f.name) for f in fields(HddParams)}
            base["capacity_GB"] = base.pop("capacity_bytes") / _GB
        base.update(mt)
        member = _hdd_params(base, path, "[member].")
    return ModelProfile(name=name, kind=kind, description=str(doc.get("description", "")),
                        sources=tuple(sources), params=params, member=member, path=str(path))


def _with_capacity(table: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    t = dict(table)
    if "capacity_GB" not in t:
        raise InputFormatError(path, None, f"missing key {where}capacity_GB")
    t["capacity_bytes"] = round(float(t.pop("capacity_GB")) * _GB)
    return t


def _hdd_params(table: dict[str, Any], path: Path, where: str) -> HddParams:
    return _dataclass_from(HddParams, _with_capacity(table, path, where), path, where)


def _dataclass_from(cls: type[_P], table: dict[str, Any], path: Path, where: str) -> _P:
    names = {f.name: f for f in fields(cls)}
    extra = set(table) - set(names)
    if extra:
        keys = ", ".join(where + k for k in sorted(extra))
        raise InputFormatError(path, None, f"unknown key(s) {keys}")
    kwargs: dict[str, Any] = {}
    for n, f in names.items():
        if n not in table:
            if f.default is not MISSING:
                continue
            raise InputFormatError(path, None, f"missing key {where}{n}")
        v = table[n]
        if f.type in ("str", str):
            if not isinstance(v, str):
                raise InputFormatError(path, None, f"{where}{n} must be a string, not {v!r}")
            kwargs[n] = v
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputFormatError(path, None, f"{where}{n} must be a number, not {v!r}")
        kwargs[n] = int(v) if f.type in ("int", int) else float(v)
        if f.type in ("int", int) and v != int(v):
            raise InputFormatError(path, None, f"{where}{n} must be a whole number")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise InputFormatError(path, None, f"{where.rstrip('.')}: {exc}") from exc


def build_model(profile: ModelProfile | str | Path, *,
                capacity_bytes: int | None = None) -> DiskModel:
    """A fresh model of ``profile`` (a profile, a bundled name or a file path).

    Args:
        capacity_bytes: size of the device to model; the geometry is rescaled so the whole
            stroke (or array) maps onto it. None: the profile's own capacity.
    """
    prof = profile if isinstance(profile, ModelProfile) else load_profile(profile)
    p = prof.params
    # The compiled copies of the models when they were built from these sources (3x
    # faster, same results: lab/accel.py); their parameter classes are their own.
    mods = accel.modules()
    if isinstance(p, HddParams):
        if capacity_bytes is not None:
            p = replace(p, capacity_bytes=capacity_bytes)
        return mods.hdd.HddModel(_as(mods.hdd.HddParams, p), name=prof.name)  # type: ignore[no-any-return]
    if isinstance(p, SsdParams):
        if capacity_bytes is not None:
            p = replace(p, capacity_bytes=capacity_bytes)
        return mods.ssd.SsdModel(_as(mods.ssd.SsdParams, p), name=prof.name)  # type: ignore[no-any-return]
    member = prof.member
    if member is None:  # pragma: no cover - _parse always sets it for kind "raid"
        raise InputFormatError(prof.path, None, "a raid profile needs a [member] table")
    if capacity_bytes is not None:
        chunk = p.stripe_unit_KiB * 1024
        per_member = -(-capacity_bytes // p.data_disks)
        member = replace(member, capacity_bytes=-(-per_member // chunk) * chunk)
    return mods.raid.RaidModel(_as(mods.raid.RaidParams, p),  # type: ignore[no-any-return]
                               _as(mods.hdd.HddParams, member), name=prof.name)


def _as(cls: Any, params: Any) -> Any:
    """``params`` as an instance of ``cls`` (the compiled module's own dataclass), or
    unchanged when it already is one (pure-Python models)."""
    if isinstance(params, cls):
        return params
    return cls(**{f.name: getattr(params, f.name) for f in fields(params)})
