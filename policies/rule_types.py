"""What a rule is: its description (name, what it checks, default enforcement and severity, why it matters, how to fix
it, its settings), the check function, and what a check reports. Every topic module under ``rules/`` imports this;
``registry`` collects their rules.

How a rule is declared: ``@rule`` on its check function takes what is short and typed (name, group, enforcement,
severity, kinds, settings), and the check's docstring holds the three texts, in this order::

    @rule("readiness-probe", group="Probes and lifecycle", enforcement="mandatory", severity="medium", kinds=...)
    def readiness_probe(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
        '''The vLLM container has a readinessProbe.

        Why: Without one, the Service sends requests to a pod as soon as the container starts, ...

        Fix: Add readinessProbe: {httpGet: {path: /health, port: <vLLM port>}, periodSeconds: 5}.
        '''

The description is what the rule checks, ``Why:`` what goes wrong without it, ``Fix:`` the change that satisfies
it; each is folded onto one line. A docstring that quotes a constant of the package names it as a ``{field}`` and
passes its value in ``text_values`` (then literal braces are doubled, as in an f-string), so the number has one home.
A rule whose docstring lacks a part (or a run under ``python -OO``, which drops docstrings) fails at import.
"""

from __future__ import annotations

import inspect
import re
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


_TEXT_PARTS = re.compile(r"^(Why|Fix):", re.MULTILINE)


def _texts(name: str, doc: str | None, values: Mapping[str, object]) -> tuple[str, str, str]:
    """(description, why, fix) from a check's docstring, each folded onto one line."""
    if not doc:
        raise ValueError(f"rule {name!r}: the check has no docstring (its description, Why: and Fix:)")
    text = inspect.cleandoc(doc)
    if values:
        text = text.format(**values)
    parts = _TEXT_PARTS.split(text)
    if len(parts) != 5 or (parts[1], parts[3]) != ("Why", "Fix"):
        raise ValueError(f"rule {name!r}: the docstring needs a description, then a 'Why:' and a 'Fix:' paragraph")
    description, why, fix = (" ".join(part.split()) for part in parts[::2])
    return description, why, fix


def rule(
    name: str, *, group: str, enforcement: Enforcement, severity: Severity, kinds: Sequence[str],
    scope: Scope = "resource", settings: Mapping[str, Setting] | None = None, text_filter: Sequence[str] = (),
    text_values: Mapping[str, object] | None = None,
) -> Callable[[Callable[..., Iterable[Violation]]], Rule]:
    """Make a check function into the Rule ``name``, its texts read from the check's docstring (see the module's
    docstring). Registering is the registry's: it collects the ``RULES`` tuple of each topic module it lists."""

    def make(check: Callable[..., Iterable[Violation]]) -> Rule:
        description, why, fix = _texts(name, check.__doc__, text_values or {})
        return Rule(name, group, description, enforcement, severity, why, fix, scope, check, tuple(kinds),
                    dict(settings or {}), tuple(text_filter))

    return make
