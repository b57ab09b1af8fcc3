"""The loaded catalog: profiles by id and size tier, and which profile a device matches."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from iogauge.analysis.catalog.limits import derive_limits, md_profile
from iogauge.analysis.catalog.loader import Loader, builtin_dir
from iogauge.analysis.catalog.profiles import (
    CatalogError,
    Exclusion,
    Family,
    MatchRule,
    Profile,
    RaidLevel,
)
from iogauge.model.device import DeviceInfo

if TYPE_CHECKING:
    from iogauge.analysis.context import DeviceContext


@dataclass
class Catalog:
    """All profiles, size-tier families, exclusions and RAID levels.

    Attributes:
        by_id: profile id -> profile (built-in, then user files in order; later wins).
        families: family id -> size tiers (``azure-premium``).
        exclusions: devices never matched, with the reason.
        raid: RAID level name (``raid5``) -> write penalty and redundancy.
        origin: profile id -> file it was (last) defined in.
        seq: profile or family id -> load order; among rules of equal priority the one
            loaded last (a user file) wins.
    """

    by_id: dict[str, Profile]
    families: dict[str, Family]
    exclusions: list[Exclusion]
    raid: dict[str, RaidLevel]
    origin: dict[str, str]
    seq: dict[str, int] = field(default_factory=dict)

    @property
    def profiles(self) -> list[Profile]:
        """Every profile, sorted by id."""
        return [self.by_id[k] for k in sorted(self.by_id)]

    def get(self, profile_id: str, size_GiB: float | None = None) -> Profile:
        """A profile by id, resolved for a device size where its figures scale with size.

        ``profile_id`` may carry the size: ``gcp-pd-ssd@500`` (GiB); a family id picks the
        tier for the size (``azure-premium@1024`` -> P30). Unknown ids raise
        :class:`CatalogError` listing the closest names.
        """
        pid, _, sz = profile_id.strip().partition("@")
        if sz:
            try:
                size_GiB = float(sz)
            except ValueError:
                raise CatalogError(f"profile {profile_id!r}: the size after '@' must be a "
                                   "number of GiB, e.g. gcp-pd-ssd@500") from None
            if not size_GiB > 0 or not math.isfinite(size_GiB):
                raise CatalogError(f"profile {profile_id!r}: the size must be > 0 GiB")
        if pid in self.families:
            fam = self.families[pid]
            if size_GiB is None:
                sizes = ", ".join(f"{t.id} ({t.size_GiB:g} GiB)" for t in fam.tiers)
                raise CatalogError(f"profile {pid!r} is a family of size tiers: give the disk "
                                   f"size ({pid}@1024) or a tier: {sizes}")
            tier, fits = fam.tier_for(size_GiB)
            note = (f"{fam.title}: a {size_GiB:g} GiB disk is tier {tier.title}" if fits else
                    f"{fam.title}: {size_GiB:g} GiB is larger than every tier; the largest, "
                    f"{tier.title}, is used")
            return replace(tier, assumptions=(*tier.assumptions, note))
        if pid not in self.by_id:
            names = sorted(set(self.by_id) | set(self.families))
            close = difflib.get_close_matches(pid, names, n=5, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise CatalogError(f"unknown capability profile {pid!r}{hint} (all profiles: "
                               "iogauge.analysis.catalog / docs/catalog.md)")
        prof = self.by_id[pid]
        if prof.scaled:
            return self._at_size(prof, size_GiB)
        return prof

    def _at_size(self, prof: Profile, size_GiB: float | None) -> Profile:
        notes: list[str] = []
        if size_GiB is None:
            ex = prof.figures.get("example_size_GiB")
            if ex is None or ex.value is None:
                raise CatalogError(f"profile {prof.id!r} scales with the disk size: give it "
                                   f"as {prof.id}@GIB")
            size_GiB = ex.value
            notes.append(f"device size unknown: {size_GiB:g} GiB assumed for the size-scaled "
                         f"limits of {prof.id} ({ex.source})")
        lim = derive_limits(prof, self.raid, size_GiB)
        return replace(prof, limits=lim, size_used_GiB=size_GiB,
                       assumptions=(*prof.assumptions, *notes))

    # -- matching ------------------------------------------------------------------------
    def match(self, dev: DeviceContext, infos: Mapping[str, DeviceInfo] | None = None
              ) -> tuple[Profile, str] | None:
        """The profile for a device and the facts that chose it, or None.

        Linux devices are matched by their sysfs facts (``dev.info``): exclusions (virtual,
        loop, memory devices) first, then rules by priority — vendor/model (cloud disks, SSD
        and HDD families), the kernel name (``nvme*``), the rotational flag. ``md`` arrays
        become a synthesised profile of their members with the RAID level's write penalty;
        ``dm`` devices and partitions take their underlying device's profile. ``infos`` (kernel
        name -> DeviceInfo) is needed to see the members of md/dm devices and a partition's
        whole disk. Other sources match by kind (RMF ``rank`` -> the DS8000 rank profile).
        """
        return self._match(dev.device, dev.kind, dev.source, dev.info, infos or {}, set())[0]

    def explain(self, dev: DeviceContext, infos: Mapping[str, DeviceInfo] | None = None) -> str:
        """Why a device matched what it did, or why it matched nothing."""
        m, why = self._match(dev.device, dev.kind, dev.source, dev.info, infos or {}, set())
        return why if m is None else f"{m[0].id}: {m[1]}"

    def _match(self, name: str, kind: str, source: str, info: DeviceInfo | None,
               infos: Mapping[str, DeviceInfo], seen: set[str]
               ) -> tuple[tuple[Profile, str] | None, str]:
        if name in seen:
            return None, f"{name}: device stack loops back on itself"
        seen = seen | {name}
        kind = info.kind if info is not None and kind in ("disk", "") else kind
        for ex in self.exclusions:
            if ex.matches(name, info):
                return None, f"{name}: {ex.reason}"
        if kind in ("loop", "ram"):
            return None, f"{name}: {kind} device: its capability is that of what backs it"
        if kind == "md":
            return self._match_md(name, info, infos, seen)
        if kind == "dm":
            return self._match_dm(name, info, infos, seen)
        size_info = info
        via = ""
        if kind == "partition" and info is not None and info.parent:
            parent = infos.get(info.parent)
            if parent is not None:
                size_info = parent
                via = f" (partition of {info.parent})"
        cands: list[tuple[int, int, int, MatchRule, Profile | Family]] = []
        targets: list[Profile | Family] = [*self.by_id.values(), *self.families.values()]
        for target in targets:
            for i, rule in enumerate(target.match):
                cands.append((rule.priority, self.seq.get(target.id, 0), -i, rule, target))
        # Highest priority first; among equals the later definition (user files) wins, and
        # within one profile the rule written first.
        cands.sort(key=lambda c: (-c[0], -c[1], -c[2]))
        for _, _, _, rule, target in cands:
            facts = rule.matches(name, kind, source, info)
            if facts is None:
                continue
            size = None
            if size_info is not None and size_info.size_bytes:
                size = size_info.size_bytes / 2**30
            notes = (rule.note,) if rule.note else ()
            if isinstance(target, Family):
                if size is None:
                    return None, (f"{name}: {facts} is a {target.title} disk but its size is "
                                  "unknown, so its tier cannot be chosen: give --profile "
                                  f"{name}={target.id}@GIB")
                tier, fits = target.tier_for(size)
                tnote = (f"{size:g} GiB -> tier {tier.title} ({tier.size_GiB:g} GiB)" if fits
                         else f"{size:g} GiB exceeds every tier: {tier.title} used")
                prof = replace(tier, assumptions=(*notes, tnote))
                return (prof, f"{facts}, {tnote}{via}"), ""
            prof = self._at_size(target, size) if target.scaled else target
            prof = replace(prof, assumptions=(*notes, *prof.assumptions))
            extra = f", {size:g} GiB" if target.scaled and size is not None else ""
            return (prof, f"{facts}{extra}{via}"), ""
        if info is None:
            return None, (f"{name}: no device facts (model, rotational flag) from this source "
                          "and no rule for its kind: give --profile to judge it")
        return None, f"{name}: no catalog rule matches its facts: give --profile"

    def _member(self, name: str, infos: Mapping[str, DeviceInfo], seen: set[str]
                ) -> tuple[tuple[Profile, str] | None, str]:
        info = infos.get(name)
        if info is None:
            return None, f"{name}: no device facts for this member"
        return self._match(name, info.kind, "", info, infos, seen)

    def _match_dm(self, name: str, info: DeviceInfo | None, infos: Mapping[str, DeviceInfo],
                  seen: set[str]) -> tuple[tuple[Profile, str] | None, str]:
        if info is None or not info.slaves:
            return None, f"{name}: device-mapper device whose underlying devices are unknown"
        found = [self._member(s, infos, seen) for s in info.slaves]
        failed = [why for m, why in found if m is None]
        if failed:
            return None, f"{name}: device-mapper over {', '.join(info.slaves)}: {failed[0]}"
        profs = [m[0] for m, _ in found if m is not None]
        if len({p.id for p in profs}) != 1:
            return None, (f"{name}: device-mapper over devices of different types "
                          f"({', '.join(sorted({p.id for p in profs}))}): give --profile")
        prof = profs[0]
        label = info.dm_name or name
        if len(profs) == 1:
            note = f"device-mapper {label} over {info.slaves[0]}: judged as that device"
        else:
            note = (f"device-mapper {label} over {len(profs)} devices ({', '.join(info.slaves)}):"
                    " linear or striped is not known, one member's capability is assumed (a "
                    "striped volume can do up to that many times more)")
        facts = "; ".join(f"{s}: {m[1]}" for s, (m, _) in zip(info.slaves, found, strict=True)
                          if m is not None)
        return (replace(prof, assumptions=(*prof.assumptions, note)),
                f"dm over {', '.join(info.slaves)} ({facts})"), ""

    def _match_md(self, name: str, info: DeviceInfo | None, infos: Mapping[str, DeviceInfo],
                  seen: set[str]) -> tuple[tuple[Profile, str] | None, str]:
        if info is None or not info.slaves:
            return None, f"{name}: md array whose members are unknown"
        level = (info.md_level or "").lower()
        found = [self._member(s, infos, seen) for s in info.slaves]
        failed = [why for m, why in found if m is None]
        if failed:
            return None, f"{name}: md {level or 'array'} member {failed[0]}"
        members = [m[0] for m, _ in found if m is not None]
        ids = sorted({p.id for p in members})
        if len(ids) != 1:
            return None, (f"{name}: md {level} over members of different types "
                          f"({', '.join(ids)}): give --profile")
        member = members[0]
        if level == "linear":
            note = (f"md linear concatenation of {len(members)} {member.id}: one member's "
                    "capability (I/O to one region goes to one member)")
            return (replace(member, assumptions=(*member.assumptions, note)),
                    f"md linear over {', '.join(info.slaves)}"), ""
        if level not in self.raid:
            return None, (f"{name}: md level {info.md_level!r} has no write penalty in the "
                          f"catalog (known: {', '.join(sorted(self.raid))})")
        prof = md_profile(member, self.raid[level], len(members), name)
        first = found[0][0]
        member_why = "" if first is None else f"; {info.slaves[0]}: {first[1]}"
        why = f"md {level} of {len(members)} x {member.id} over {', '.join(info.slaves)}"
        return (prof, why + member_why), ""


def load_catalog(extra: Sequence[Path | str] = ()) -> Catalog:
    """The built-in catalog plus user TOML files (later files add or replace profiles).

    Raises :class:`CatalogError` naming the file and the reason for any file that cannot be
    read or does not follow the format (``docs/catalog.md``).
    """
    ld = Loader()
    files = sorted(builtin_dir().glob("*.toml"))
    if not files:
        raise CatalogError(f"{builtin_dir()}: no built-in catalog files (broken install?)")
    # raid.toml first: array profiles in any file may name a RAID level.
    files.sort(key=lambda p: (p.name != "raid.toml", p.name))
    for p in files:
        ld.load_file(p, builtin=True)
    for x in extra:
        ld.load_file(Path(x), builtin=False)
    return Catalog(ld.profiles, ld.families, ld.exclusions, ld.raid, ld.origin, ld.seq)
