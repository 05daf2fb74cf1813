"""What a rule is: its description (name, what it checks, default enforcement and severity, why it matters, how to fix
it, its settings), the check function, and what a check reports. Every topic module under ``rules/`` imports this;
``registry`` collects their rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime import annotations as ann

ANY_KIND = "*"
"""In a rule's ``kinds``: every kind that may hold a container (all but ``kinds.NON_WORKLOAD_KINDS``)."""

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


def cannot_check(what: str, problem: str) -> Violation:
    """The "cannot check" finding of a rule that misses the model or the GPU (or a literal value) it needs."""
    return Violation(f"cannot check {what}: {problem}",
                     f"add the {ann.MODEL} / {ann.GPU} annotations or use catalog ids so the rule can check",
                     cannot_check=True)


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


@dataclass(frozen=True)
class Rule:
    """One rule: its description and its check. Calling the rule calls the check, so tests call it like a function."""

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

    def __call__(self, checked: Any, settings: Mapping[str, Any]) -> Iterable[Violation]:
        """The check on one object (``scope`` resource) or on all objects of a stack (``scope`` stack)."""
        return self.check(checked, settings)


def rule(
    name: str, *, group: str, description: str, enforcement: Enforcement, severity: Severity, why: str, fix: str,
    kinds: Sequence[str], scope: Scope = "resource", settings: Mapping[str, Setting] | None = None,
    text_filter: Sequence[str] = (),
) -> Callable[[Callable[..., Iterable[Violation]]], Rule]:
    """Make a check function into the Rule ``name`` (texts folded onto one line each). Registering is the
    registry's: it collects the ``RULES`` tuple of each topic module it lists."""

    def make(check: Callable[..., Iterable[Violation]]) -> Rule:
        return Rule(name, group, " ".join(description.split()), enforcement, severity, " ".join(why.split()),
                    " ".join(fix.split()), scope, check, tuple(kinds), dict(settings or {}), tuple(text_filter))

    return make
