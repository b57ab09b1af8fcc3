"""Reading catalog TOML files (format in docs/catalog.md) into profiles, families and RAID levels.

Every error names the file and the reason (:class:`CatalogError`).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from iogauge.analysis.catalog.limits import derive_limits
from iogauge.analysis.catalog.profiles import (
    KINDS,
    MIB_PER_MB,
    CatalogError,
    Exclusion,
    Family,
    Figure,
    MatchRule,
    Profile,
    RaidLevel,
)

#: Keys each kind of table may hold (anything else is a typo the loader names).
_FIGURES: dict[str, tuple[set[str], set[str]]] = {
    # kind: (required figure names, optional figure names); throughput names are given here
    # in their canonical MiB form, a file may write *_MBps instead.
    "hdd": ({"rpm", "seek_read_ms", "seek_write_ms", "media_max_MiBps", "media_min_MiBps"},
            {"command_overhead_ms", "seq_mix_efficiency", "latency_design_ms"}),
    "ssd": ({"rand_read_iops", "rand_write_iops", "seq_read_MiBps", "seq_write_MiBps"},
            {"qd1_read_iops", "qd1_write_iops", "latency_design_ms", "latency_typical_ms"}),
    "array": ({"rand_read_iops", "seq_read_MiBps", "seq_write_MiBps"},
              {"rand_write_iops", "seq_mix_efficiency", "latency_typical_ms",
               "latency_design_ms", "ref_kB"}),
    "cloud": ({"read_iops", "write_iops", "read_MiBps", "write_MiBps"},
              {"io_unit_kB", "latency_typical_ms", "latency_design_ms", "latency_peak_ms",
               "example_size_GiB", "size_GiB"}),
}
_PROFILE_KEYS = {"id", "title", "kind", "parallel", "rotational", "raid_level", "seq_merge",
                 "extends", "notes", "match"}
_FAMILY_KEYS = {"id", "title", "kind", "rotational", "parallel", "seq_merge", "tier_source",
                "tiers", "notes", "match"}
_FAMILY_FIGURES = {"io_unit_kB", "latency_typical_ms", "latency_design_ms", "latency_peak_ms"}
_RULE_KEYS = {"priority", "name", "model", "vendor", "rotational", "kind", "source", "note"}


def builtin_dir() -> Path:
    return Path(str(resources.files("iogauge.analysis") / "catalog"))


class Loader:
    """Parses catalog files into profiles, families, exclusions and RAID levels."""

    def __init__(self) -> None:
        self.profiles: dict[str, Profile] = {}
        self.origin: dict[str, str] = {}
        self.families: dict[str, Family] = {}
        self.exclusions: list[Exclusion] = []
        self.raid: dict[str, RaidLevel] = {}
        self.sources: dict[str, str] = {}
        self.seq: dict[str, int] = {}  # id -> load order (later files win rule ties)
        self.pending: list[tuple[dict[str, Any], Path, dict[str, str]]] = []

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _err(path: Path, reason: str) -> CatalogError:
        return CatalogError(f"{path}: {reason}")

    def _source(self, path: Path, local: Mapping[str, str], text: object, where: str,
                builtin: bool) -> str:
        if not isinstance(text, str) or not text.strip():
            raise self._err(path, f"{where}: every figure needs a source (a key of [sources] "
                                  "or a citation text)")
        key = text.strip()
        if key in local:
            return local[key]
        if key in self.sources:
            return self.sources[key]
        if builtin:
            raise self._err(path, f"{where}: source {key!r} is not a key of [sources]")
        return key

    def _regex(self, path: Path, text: object, where: str) -> re.Pattern[str]:
        if not isinstance(text, str):
            raise self._err(path, f"{where}: must be a regular expression string")
        try:
            return re.compile(text)
        except re.error as exc:
            raise self._err(path, f"{where}: bad regular expression {text!r}: {exc}") from exc

    @staticmethod
    def _number(v: object) -> float | None:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        f = float(v)
        return f if math.isfinite(f) else None

    def _figure(self, path: Path, local: Mapping[str, str], key: str, raw: object,
                where: str, builtin: bool) -> Figure:
        """Parse ``key = { value | per_GiB/base/max, source, derived? }``."""
        if not isinstance(raw, dict):
            raise self._err(path, f"{where}{key}: a figure is a table {{ value = N, source = "
                                  "\"...\" }")
        extra = set(raw) - {"value", "per_GiB", "base", "max", "source", "derived"}
        if extra:
            raise self._err(path, f"{where}{key}: unknown key(s) {', '.join(sorted(extra))}")
        src = self._source(path, local, raw.get("source"), f"{where}{key}", builtin)
        derived = raw.get("derived")
        if derived is not None:
            if not isinstance(derived, str):
                raise self._err(path, f"{where}{key}: derived must be text")
            src = f"{derived}; {src}"
        name, factor = key, 1.0
        if key.endswith("_MBps"):
            name, factor = key[: -len("_MBps")] + "_MiBps", MIB_PER_MB
        nums: dict[str, float | None] = {}
        for k in ("value", "per_GiB", "base", "max"):
            if k in raw:
                n = self._number(raw[k])
                if n is None or n < 0:
                    raise self._err(path, f"{where}{key}.{k}: must be a number >= 0, got "
                                          f"{raw[k]!r}")
                nums[k] = n * factor
            else:
                nums[k] = None
        if (nums["value"] is None) == (nums["per_GiB"] is None):
            raise self._err(path, f"{where}{key}: give either value or per_GiB")
        if nums["per_GiB"] is None and (nums["base"] is not None or nums["max"] is not None):
            raise self._err(path, f"{where}{key}: base and max only go with per_GiB")
        if factor != 1.0:
            src = f"{src} [{key} converted: 1 MB = 10^6 bytes = {MIB_PER_MB:.4f} MiB]"
        return Figure(name, nums["value"], src, nums["per_GiB"], nums["base"], nums["max"])

    def _rules(self, path: Path, raw: object, where: str) -> tuple[MatchRule, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self._err(path, f"{where}match: must be an array of tables [[...match]]")
        rules = []
        for i, r in enumerate(raw):
            w = f"{where}match[{i}]"
            if not isinstance(r, dict):
                raise self._err(path, f"{w}: must be a table")
            extra = set(r) - _RULE_KEYS
            if extra:
                raise self._err(path, f"{w}: unknown key(s) {', '.join(sorted(extra))}")
            pr = r.get("priority", 30)
            if not isinstance(pr, int) or isinstance(pr, bool):
                raise self._err(path, f"{w}.priority: must be an integer")
            rot = r.get("rotational")
            if rot is not None and not isinstance(rot, bool):
                raise self._err(path, f"{w}.rotational: must be true or false")
            kinds = self._strs(path, r.get("kind"), f"{w}.kind")
            srcs = self._strs(path, r.get("source"), f"{w}.source")
            note = r.get("note", "")
            if not isinstance(note, str):
                raise self._err(path, f"{w}.note: must be text")
            rule = MatchRule(
                priority=pr,
                name=None if "name" not in r else self._regex(path, r["name"], f"{w}.name"),
                model=None if "model" not in r else self._regex(path, r["model"], f"{w}.model"),
                vendor=None if "vendor" not in r else self._regex(path, r["vendor"],
                                                                  f"{w}.vendor"),
                rotational=rot, kinds=kinds, sources=srcs, note=note)
            if (rule.name is None and rule.model is None and rule.vendor is None
                    and rule.rotational is None and rule.kinds is None):
                raise self._err(path, f"{w}: a rule needs name, model, vendor, rotational "
                                      "or kind")
            rules.append(rule)
        return tuple(rules)

    def _strs(self, path: Path, raw: object, where: str) -> frozenset[str] | None:
        if raw is None:
            return None
        if isinstance(raw, str):
            return frozenset({raw})
        if isinstance(raw, list) and raw and all(isinstance(x, str) for x in raw):
            return frozenset(raw)
        raise self._err(path, f"{where}: must be a string or a list of strings")

    def _notes(self, path: Path, local: Mapping[str, str], raw: object, where: str,
               builtin: bool) -> tuple[tuple[str, str], ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self._err(path, f"{where}notes: must be a list")
        out = []
        for i, n in enumerate(raw):
            if isinstance(n, str) and not builtin:
                out.append((n, ""))
                continue
            if not isinstance(n, dict) or set(n) - {"text", "source"} or \
                    not isinstance(n.get("text"), str):
                raise self._err(path, f"{where}notes[{i}]: must be {{ text = \"...\", "
                                      "source = \"...\" }")
            out.append((n["text"], self._source(path, local, n.get("source"),
                                                 f"{where}notes[{i}]", builtin)))
        return tuple(out)

    # -- files ---------------------------------------------------------------------------
    def load_file(self, path: Path, builtin: bool) -> None:
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise self._err(path, f"cannot read catalog file: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise self._err(path, f"not UTF-8 text: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise self._err(path, f"not valid TOML: {exc}") from exc
        extra = set(doc) - {"sources", "profile", "family", "exclude", "raid_level"}
        if extra:
            raise self._err(path, f"unknown top-level key(s) {', '.join(sorted(extra))}")
        local_raw = doc.get("sources", {})
        if not isinstance(local_raw, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v.strip()
                for k, v in local_raw.items()):
            raise self._err(path, "[sources] must map keys to citation texts")
        local: dict[str, str] = dict(local_raw)
        for key in ("profile", "family", "exclude", "raid_level"):
            if key in doc and not isinstance(doc[key], list):
                raise self._err(path, f"{key} must be an array of tables [[{key}]]")
        for i, ex in enumerate(doc.get("exclude", [])):
            self._exclusion(path, ex, i)
        for i, rl in enumerate(doc.get("raid_level", [])):
            self._raid_level(path, local, rl, i, builtin)
        seen: set[str] = set()
        for i, fam in enumerate(doc.get("family", [])):
            self._family(path, local, fam, i, builtin, seen)
        for i, raw in enumerate(doc.get("profile", [])):
            if not isinstance(raw, dict):
                raise self._err(path, f"profile[{i}]: must be a table")
            pid = raw.get("id")
            if not isinstance(pid, str) or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", pid):
                raise self._err(path, f"profile[{i}]: id must be lower-case letters, digits, "
                                      f"'.', '_' or '-', got {pid!r}")
            if pid in seen:
                raise self._err(path, f"profile {pid!r} is defined twice in this file")
            seen.add(pid)
            self.pending.append((raw, path, local))
        for k, v in local.items():
            self.sources.setdefault(k, v)
        # Profiles may extend profiles of earlier files or of this one: resolve in order,
        # parents first within the file.
        self._resolve_pending(builtin)

    def _resolve_pending(self, builtin: bool) -> None:
        todo = self.pending
        self.pending = []
        ids = {str(raw["id"]) for raw, _, _ in todo}
        done: set[str] = set()
        while todo:
            progressed = False
            rest = []
            for raw, path, local in todo:
                parent = raw.get("extends")
                if isinstance(parent, str) and parent in ids and parent not in done:
                    rest.append((raw, path, local))
                    continue
                prof = self._profile(path, local, raw, builtin)
                self.profiles[prof.id] = prof
                self.seq[prof.id] = len(self.seq)
                self.origin[prof.id] = str(path)
                done.add(prof.id)
                progressed = True
            if not progressed:
                raw, path, _ = rest[0]
                raise self._err(path, f"profile {raw['id']!r}: extends forms a cycle")
            todo = rest

    def _exclusion(self, path: Path, raw: object, i: int) -> None:
        w = f"exclude[{i}]"
        if not isinstance(raw, dict) or set(raw) - {"name", "model", "vendor", "reason"}:
            raise self._err(path, f"{w}: keys are name, model, vendor (regexes) and reason")
        reason = raw.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise self._err(path, f"{w}: needs a reason")
        pats = {k: None if k not in raw else self._regex(path, raw[k], f"{w}.{k}")
                for k in ("name", "model", "vendor")}
        if all(p is None for p in pats.values()):
            raise self._err(path, f"{w}: needs name, model or vendor")
        self.exclusions.append(Exclusion(pats["name"], pats["model"], pats["vendor"], reason))

    def _raid_level(self, path: Path, local: Mapping[str, str], raw: object, i: int,
                    builtin: bool) -> None:
        w = f"raid_level[{i}]"
        if not isinstance(raw, dict) or set(raw) != {"level", "write_penalty",
                                                     "redundancy_disks"}:
            raise self._err(path, f"{w}: keys are level, write_penalty, redundancy_disks")
        level = raw["level"]
        if not isinstance(level, str):
            raise self._err(path, f"{w}.level: must be text such as raid5")
        pen = self._figure(path, local, "write_penalty", raw["write_penalty"], f"{w}.",
                           builtin)
        red = self._figure(path, local, "redundancy_disks", raw["redundancy_disks"], f"{w}.",
                           builtin)
        if pen.value is None or pen.value < 1 or red.value is None:
            raise self._err(path, f"{w}: write_penalty must be a value >= 1")
        self.raid[level] = RaidLevel(level, pen, red)

    def _family(self, path: Path, local: Mapping[str, str], raw: object, i: int,
                builtin: bool, seen: set[str]) -> None:
        w = f"family[{i}]"
        if not isinstance(raw, dict):
            raise self._err(path, f"{w}: must be a table")
        extra = set(raw) - _FAMILY_KEYS - _FAMILY_FIGURES
        if extra:
            raise self._err(path, f"{w}: unknown key(s) {', '.join(sorted(extra))}")
        fid = raw.get("id")
        if not isinstance(fid, str) or not fid:
            raise self._err(path, f"{w}: needs an id")
        w = f"family {fid!r}: "
        if raw.get("kind", "cloud") != "cloud":
            raise self._err(path, f"{w}families are cloud disk tiers (kind = \"cloud\")")
        tsrc = self._source(path, local, raw.get("tier_source"), f"{w}tier_source", builtin)
        common = {k: self._figure(path, local, k, raw[k], w, builtin)
                  for k in _FAMILY_FIGURES if k in raw}
        notes = self._notes(path, local, raw.get("notes"), w, builtin)
        tiers_raw = raw.get("tiers")
        if not isinstance(tiers_raw, list) or not tiers_raw:
            raise self._err(path, f"{w}tiers must be a non-empty list of tables")
        tiers = []
        for j, t in enumerate(tiers_raw):
            tw = f"{w}tiers[{j}]"
            if not isinstance(t, dict) or set(t) != {"id", "title", "size_GiB", "iops",
                                                     "MiBps"}:
                raise self._err(path, f"{tw}: keys are id, title, size_GiB, iops, MiBps")
            nums = {k: self._number(t[k]) for k in ("size_GiB", "iops", "MiBps")}
            bad = [k for k, v in nums.items() if v is None or v <= 0]
            if bad or not isinstance(t["id"], str) or not isinstance(t["title"], str):
                raise self._err(path, f"{tw}: id/title must be text, size_GiB, iops and "
                                      f"MiBps numbers > 0 ({', '.join(bad) or 'id/title'})")
            if t["id"] in seen:
                raise self._err(path, f"{tw}: profile {t['id']!r} is defined twice")
            seen.add(t["id"])
            cite = f"{tsrc} ({t['title']} row)"
            figs = dict(common)
            size, iops, mib = nums["size_GiB"], nums["iops"], nums["MiBps"]
            if size is None or iops is None or mib is None:  # checked above; for mypy
                raise self._err(path, f"{tw}: size_GiB, iops and MiBps must be numbers")
            figs["size_GiB"] = Figure("size_GiB", size, cite)
            for n in ("read_iops", "write_iops"):
                figs[n] = Figure(n, iops, cite)
            for n in ("read_MiBps", "write_MiBps"):
                figs[n] = Figure(n, mib, cite)
            rot = bool(raw.get("rotational", False))
            prof = Profile(id=t["id"], title=f"{raw.get('title', fid)} {t['title']}",
                           kind="cloud", parallel=bool(raw.get("parallel", True)),
                           rotational=rot, figures=figs, notes=notes, path=str(path),
                           family=fid, size_GiB=size,
                           seq_merge=bool(raw.get("seq_merge", False)))
            prof = replace(prof, limits=derive_limits(prof, self.raid))
            tiers.append(prof)
            self.profiles[prof.id] = prof
            self.origin[prof.id] = str(path)
        tiers.sort(key=lambda p: p.size_GiB or 0.0)
        title = raw.get("title", fid)
        self.families[fid] = Family(fid, str(title), tuple(tiers),
                                    self._rules(path, raw.get("match"), w), str(path))
        self.seq[fid] = len(self.seq)

    def _profile(self, path: Path, local: Mapping[str, str], raw: dict[str, Any],
                 builtin: bool) -> Profile:
        pid = str(raw["id"])
        w = f"profile {pid!r}: "
        base: Profile | None = None
        if "extends" in raw:
            parent = raw["extends"]
            if not isinstance(parent, str) or parent not in self.profiles:
                raise self._err(path, f"{w}extends unknown profile {parent!r}")
            base = self.profiles[parent]
        kind = raw.get("kind", base.kind if base else None)
        if kind not in KINDS:
            raise self._err(path, f"{w}kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if base is not None and kind != base.kind:
            raise self._err(path, f"{w}kind {kind!r} differs from the extended profile's "
                                  f"{base.kind!r}")
        required, optional = _FIGURES[kind]
        allowed = required | optional
        figures: dict[str, Figure] = dict(base.figures) if base else {}
        for key, val in raw.items():
            if key in _PROFILE_KEYS:
                continue
            canon = key[: -len("_MBps")] + "_MiBps" if key.endswith("_MBps") else key
            if canon not in allowed:
                raise self._err(path, f"{w}unknown key {key!r} for kind {kind!r} (figures: "
                                      f"{', '.join(sorted(allowed))})")
            fig = self._figure(path, local, key, val, w, builtin)
            figures[fig.name] = fig
        missing = sorted(required - set(figures))
        if missing:
            raise self._err(path, f"{w}missing figure(s) {', '.join(missing)}")
        title = raw.get("title", base.title if base else pid)
        if not isinstance(title, str):
            raise self._err(path, f"{w}title must be text")
        rot_default = {"hdd": True, "ssd": False, "array": True, "cloud": False}[kind]
        flags: dict[str, bool] = {}
        for key, default in (("rotational", base.rotational if base else rot_default),
                             ("parallel", base.parallel if base else kind != "hdd"),
                             ("seq_merge", base.seq_merge if base else False)):
            v = raw.get(key, default)
            if not isinstance(v, bool):
                raise self._err(path, f"{w}{key} must be true or false")
            flags[key] = v
        raid_level = raw.get("raid_level", base.raid_level if base else None)
        if raid_level is not None and raid_level not in self.raid:
            raise self._err(path, f"{w}raid_level {raid_level!r} is not one of "
                                  f"{', '.join(sorted(self.raid)) or 'the known levels'}")
        if kind == "array" and "rand_write_iops" not in figures and raid_level is None:
            raise self._err(path, f"{w}an array needs rand_write_iops or a raid_level to "
                                  "derive it from")
        notes = self._notes(path, local, raw.get("notes"), w, builtin)
        if base is not None and "notes" not in raw:
            notes = base.notes
        rules = self._rules(path, raw.get("match"), w)
        eff = figures.get("seq_mix_efficiency")
        if eff is not None and eff.value is not None and not 0 < eff.value <= 1:
            raise self._err(path, f"{w}seq_mix_efficiency must be in (0, 1]")
        prof = Profile(id=pid, title=title, kind=kind, parallel=flags["parallel"],
                       rotational=flags["rotational"], figures=figures, match=rules,
                       notes=notes, path=str(path), raid_level=raid_level,
                       seq_merge=flags["seq_merge"])
        try:
            return replace(prof, limits=None if prof.scaled else derive_limits(prof, self.raid))
        except ValueError as exc:
            raise self._err(path, f"{w}{exc}") from exc
