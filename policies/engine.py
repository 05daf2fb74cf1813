"""Run the registered rules over a set of manifests, with a configuration and exemptions: the core both shells use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.rule_types import (
    ANY_KIND,
    CANNOT_CHECK_POLICY,
    ENFORCEMENTS,
    Enforcement,
    Rule,
    Severity,
    Violation,
)
from vllm_pulumi.policies.workload import Resource

_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", list: "a list"}


class ConfigError(ValueError):
    """A configuration that names an unknown rule, setting or enforcement level."""


@dataclass(frozen=True)
class Finding:
    policy: str
    enforcement: Enforcement
    severity: Severity
    resource: dict[str, str]
    message: str
    fix: str
    file: str = ""
    line: int = 0
    """Where the object's document starts in ``file`` (0: the object came from no text, e.g. in the Pulumi pack)."""
    document: int = 0
    """Which document of ``file`` holds the object (1-based): the only pointer a reader of a piped stream has
    besides the line."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "policy": self.policy, "enforcement": self.enforcement, "severity": self.severity,
            "resource": self.resource, "message": self.message, "fix": self.fix,
        }
        if self.file:
            data["file"] = self.file
        if self.line:
            data["line"] = self.line
            data["document"] = self.document
        return data


@dataclass(frozen=True)
class Config:
    """Per-rule enforcement overrides and settings (offline --config file, or CrossGuard pack config)."""

    enforcement: Mapping[str, Enforcement] = field(default_factory=dict)
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    all_rules_level: Enforcement | None = None
    """CrossGuard's ``all`` key: the level of every rule not named on its own."""

    @classmethod
    def from_mapping(cls, raw: object) -> Config:
        """``{rules: {<rule>: {enforcement: advisory, <setting>: value}}}``; the top-level ``rules:`` key is optional
        and CrossGuard's own spellings are accepted too (``enforcementLevel``, a bare level string, the ``all`` key,
        the pack-only cannot-check policy), so one policy-config file serves both shells."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ConfigError("the config must be a mapping of rule names to settings")
        rules_raw = raw["rules"] if "rules" in raw else raw
        if not isinstance(rules_raw, dict):
            raise ConfigError("`rules` must be a mapping of rule names to settings")
        known = all_rules()
        enforcement: dict[str, Enforcement] = {}
        settings: dict[str, dict[str, Any]] = {}
        all_level: Enforcement | None = None
        for name, body in rules_raw.items():
            if name == CANNOT_CHECK_POLICY:
                continue  # offline, "cannot check" findings are advisory findings of their own rule
            if name == "all":
                level = body.get("enforcementLevel", body.get("enforcement")) if isinstance(body, dict) else body
                if level not in ENFORCEMENTS:
                    raise ConfigError(f"all: enforcement {level!r} is not one of {', '.join(ENFORCEMENTS)}")
                all_level = level
                continue
            if name not in known:
                raise ConfigError(f"unknown rule {name!r} in the config; known rules: {', '.join(sorted(known))}")
            if isinstance(body, str):
                body = {"enforcement": body}
            if not isinstance(body, dict):
                raise ConfigError(f"rule {name}: expected a mapping like {{enforcement: advisory}}")
            for key, value in body.items():
                if key in ("enforcement", "enforcementLevel"):
                    if value not in ENFORCEMENTS:
                        raise ConfigError(f"rule {name}: enforcement {value!r} is not one of {', '.join(ENFORCEMENTS)}")
                    enforcement[name] = value
                elif key in known[name].settings:
                    expected = type(known[name].settings[key].default)
                    if expected is float and isinstance(value, int):
                        value = float(value)
                    if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
                        raise ConfigError(f"rule {name}: setting {key} must be {_TYPE_NAMES.get(expected, 'a string')}, "
                                          f"got {value!r}")
                    settings.setdefault(name, {})[key] = value
                else:
                    valid = ", ".join(["enforcement", *known[name].settings])
                    raise ConfigError(f"rule {name}: unknown setting {key!r} (valid: {valid})")
        return cls(enforcement, settings, all_level)

    def level(self, rule: Rule) -> Enforcement:
        return self.enforcement.get(rule.name, self.all_rules_level or rule.enforcement)

    def settings_for(self, rule: Rule) -> dict[str, Any]:
        return {**rule.defaults(), **self.settings.get(rule.name, {})}


def finding(rule: Rule, level: Enforcement, violation: Violation, resource: Resource) -> Finding:
    return Finding(
        policy=rule.name,
        enforcement="advisory" if violation.cannot_check else level,
        severity="low" if violation.cannot_check else rule.severity,
        resource=resource.identity(),
        message=violation.message,
        fix=violation.fix,
        file=resource.source,
        line=resource.line,
        document=resource.document,
    )


def check_resource(rule: Rule, resource: Resource, settings: Mapping[str, Any]) -> list[Violation]:
    """One resource rule on one object, exemptions applied."""
    if rule.name in resource.exemptions or (resource.kind not in rule.kinds and ANY_KIND not in rule.kinds):
        return []
    return list(rule.check(resource, settings))


def check_stack(rule: Rule, resources: Sequence[Resource], settings: Mapping[str, Any]) -> list[Violation]:
    """One stack rule over all objects; violations on an exempted object are dropped."""
    violations = []
    for violation in rule.check(resources, settings):
        at = violation.resource
        if at is not None and rule.name in at.exemptions:
            continue
        violations.append(violation)
    return violations


def evaluate(
    resources: Sequence[Resource], config: Config | None = None, only: Iterable[str] | None = None,
) -> list[Finding]:
    """Every finding of every enabled rule (or of ``only``) over ``resources``."""
    config = config or Config()
    rules = all_rules()
    selected = [rules[name] for name in only] if only is not None else list(rules.values())
    findings: list[Finding] = []
    by_kind: dict[str, list[Resource]] = {}
    for resource in resources:
        by_kind.setdefault(resource.kind, []).append(resource)
    for rule in selected:
        level = config.level(rule)
        if level == "disabled":
            continue
        settings = config.settings_for(rule)
        if rule.scope == "stack":
            for violation in check_stack(rule, resources, settings):
                findings.append(finding(rule, level, violation, violation.resource or resources[0]))
            continue
        for kind in (by_kind if ANY_KIND in rule.kinds else rule.kinds):
            for resource in by_kind.get(kind, ()):
                for violation in check_resource(rule, resource, settings):
                    findings.append(finding(rule, level, violation, resource))
    return findings


def evaluate_objects(objects: Sequence[dict[str, Any]], config: Config | None = None,
                     only: Iterable[str] | None = None) -> list[Finding]:
    """``evaluate`` over plain manifest dicts (the camelCase dicts the builders produce)."""
    return evaluate([Resource(obj) for obj in objects], config, only)
