"""Rules: one module per rule, each turning an AnalysisContext into explained Findings.

A rule module defines:

- ``RULE_ID``: its id (the module name), cited in every finding it makes;
- ``DESCRIPTION``: one sentence on what it checks and the source of its thresholds;
- ``ROLE``: a :class:`~iogauge.analysis.types.RuleRole`, what its findings mean for the
  device's verdict (``ADVICE`` when absent);
- ``check(ctx: AnalysisContext) -> list[Finding]``.

A rule that cannot judge a device it is meant for (missing data, %util on NVMe) says so
with an ``info`` finding instead of staying silent. Modules are discovered by name, so a
new file here is a new rule (``all_rules``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from iogauge.analysis.context import AnalysisContext
from iogauge.analysis.types import Finding, RuleRole


@dataclass(frozen=True)
class Rule:
    """A loaded rule module: id, description, role and its check function."""

    rule_id: str
    description: str
    check: Callable[[AnalysisContext], list[Finding]]
    role: RuleRole = RuleRole.ADVICE


def _load(mod: ModuleType) -> Rule:
    rule_id = getattr(mod, "RULE_ID", None)
    check = getattr(mod, "check", None)
    desc = getattr(mod, "DESCRIPTION", None)
    name = mod.__name__.rsplit(".", 1)[-1]
    if rule_id != name or not callable(check) or not isinstance(desc, str):
        msg = f"rule module {mod.__name__} must define RULE_ID={name!r}, DESCRIPTION and check()"
        raise TypeError(msg)
    role = getattr(mod, "ROLE", RuleRole.ADVICE)
    if not isinstance(role, RuleRole):
        msg = f"rule module {mod.__name__}: ROLE must be a RuleRole, not {role!r}"
        raise TypeError(msg)
    return Rule(rule_id, desc, check, role)


def all_rules() -> list[Rule]:
    """Every rule module in this package, sorted by id."""
    rules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        rules.append(_load(importlib.import_module(f"{__name__}.{info.name}")))
    return rules


def roles() -> dict[str, RuleRole]:
    """Rule id -> its role, for every rule module."""
    return {r.rule_id: r.role for r in all_rules()}
