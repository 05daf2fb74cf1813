"""The one place each rule is described: name, what it checks, its default enforcement and severity, why it matters,
how to fix it, and its settings. The CrossGuard pack, the offline checker and docs/policies.md are all built from
``RULES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .workload import NON_WORKLOAD_KINDS, Resource

ANY_KIND = "*"
"""In a rule's ``kinds``: every kind that may hold a container (all but ``workload.NON_WORKLOAD_KINDS``)."""

Enforcement = Literal["mandatory", "advisory", "disabled"]
Severity = Literal["low", "medium", "high", "critical"]
Scope = Literal["resource", "stack"]
ENFORCEMENTS: tuple[Enforcement, ...] = ("mandatory", "advisory", "disabled")
CANNOT_CHECK_POLICY = "vllm-cannot-check"
"""The pack's advisory policy for "cannot check" findings (CrossGuard fixes one level per policy)."""


@dataclass(frozen=True)
class Violation:
    """What a rule found: the problem with its numbers, and the change that fixes it."""

    message: str
    fix: str
    cannot_check: bool = False
    """The rule lacks a fact it needs (unknown model or GPU): always reported as advisory, never blocks."""
    resource: Resource | None = None
    """For stack rules: the object at fault (defaults to the one being checked)."""


@dataclass(frozen=True)
class Setting:
    default: Any
    description: str

    @property
    def json_type(self) -> str:
        if isinstance(self.default, bool):
            return "boolean"
        if isinstance(self.default, int):
            return "integer"
        if isinstance(self.default, float):
            return "number"
        if isinstance(self.default, list):
            return "array"
        return "string"


ResourceCheck = Callable[[Resource, Mapping[str, Any]], Iterable[Violation]]
StackCheck = Callable[[Sequence[Resource], Mapping[str, Any]], Iterable[Violation]]


@dataclass(frozen=True)
class Rule:
    name: str
    group: str
    description: str
    enforcement: Enforcement
    severity: Severity
    why: str
    fix: str
    scope: Scope
    check: Callable[..., Iterable[Violation]]
    kinds: tuple[str, ...]
    settings: Mapping[str, Setting] = field(default_factory=dict)
    text_filter: tuple[str, ...] = ()
    """When set, an object whose YAML text contains none of these strings cannot violate the rule (so the offline
    checker need not parse it for this rule)."""

    def defaults(self) -> dict[str, Any]:
        return {key: setting.default for key, setting in self.settings.items()}


RULES: dict[str, Rule] = {}


def rule(
    name: str, *, group: str, description: str, enforcement: Enforcement, severity: Severity, why: str, fix: str,
    kinds: Sequence[str], scope: Scope = "resource", settings: Mapping[str, Setting] | None = None,
    text_filter: Sequence[str] = (),
) -> Callable[[Callable[..., Iterable[Violation]]], Callable[..., Iterable[Violation]]]:
    """Register a rule function under ``name``; the function stays a plain function that tests call directly."""

    def register(check: Callable[..., Iterable[Violation]]) -> Callable[..., Iterable[Violation]]:
        if name in RULES:
            raise ValueError(f"rule {name!r} registered twice")
        RULES[name] = Rule(name, group, " ".join(description.split()), enforcement, severity, " ".join(why.split()),
                           " ".join(fix.split()), scope, check, tuple(kinds), dict(settings or {}),
                           tuple(text_filter))
        return check

    return register


def reads(rules: Iterable[Rule]) -> Callable[[str, str], bool]:
    """``reads(kind, text)``: whether any of ``rules`` looks at an object of this kind with this YAML text."""
    always: set[str] = set()
    filtered: dict[str, list[tuple[str, ...]]] = {}
    anywhere: list[tuple[str, ...]] = []
    for item in rules:
        if ANY_KIND in item.kinds:
            anywhere.append(item.text_filter)
            continue
        for kind in item.kinds:
            if item.text_filter:
                filtered.setdefault(kind, []).append(item.text_filter)
            else:
                always.add(kind)

    def needed(kind: str, text: str) -> bool:
        if kind in always:
            return True
        if any(marker in text for markers in filtered.get(kind, ()) for marker in markers):
            return True
        return kind not in NON_WORKLOAD_KINDS and any(
            not markers or any(marker in text for marker in markers) for markers in anywhere)

    return needed


def all_rules() -> dict[str, Rule]:
    """Every registered rule (importing the rule modules registers them)."""
    from . import rules_stack, rules_workload  # noqa: F401  (registration side effect)

    return RULES
