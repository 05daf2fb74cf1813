"""Every rule, in one ordered mapping: the CrossGuard pack, the offline checker and docs/policies.md are all built
from ``RULES``. The rules live in one module per topic (``rules/``); this module lists those modules, so which rules
exist and in which order never depends on what was imported first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from vllm_pulumi.policies.kinds import NON_WORKLOAD_KINDS
from vllm_pulumi.policies.rule_types import ANY_KIND, Rule, Scope
from vllm_pulumi.policies.rules import (
    autoscaling,
    capacity,
    coverage,
    disruption_budgets,
    drain,
    flags_and_metrics,
    gpus,
    images,
    memory_and_cpu,
    multi_node,
    network_policies,
    observability,
    placement,
    probes,
    rollout,
    security,
    services,
    storage,
)

PER_OBJECT_TOPICS: tuple[ModuleType, ...] = (
    probes, drain, rollout, memory_and_cpu, gpus, capacity, placement, storage, images, multi_node, observability,
    security, flags_and_metrics, coverage,
)
"""The topics whose per-object rules (scope ``resource``) come first, in this order."""
STACK_TOPICS: tuple[ModuleType, ...] = (
    autoscaling, observability, services, disruption_budgets, network_policies, placement,
)
"""The topics whose stack rules come after them, in this order. A topic with both kinds of rule (placement,
observability) is in both lists; the two orders keep the order the rules were written in, which the docs table, the
pack's policies and the SARIF rule list show."""


def _collect() -> dict[str, Rule]:
    """The per-object rules of the per-object topics, then the stack rules of the stack topics. A rule of a topic not
    listed for its scope, or a name used twice, fails here, at import."""
    rules: dict[str, Rule] = {}
    lists: tuple[tuple[Scope, tuple[ModuleType, ...]], ...] = (("resource", PER_OBJECT_TOPICS),
                                                               ("stack", STACK_TOPICS))
    for scope, topics in lists:
        for topic in topics:
            for item in topic.RULES:
                if item.scope != scope:
                    continue
                if item.name in rules:
                    raise ValueError(f"rule {item.name!r} is defined twice")
                rules[item.name] = item
    listed = {id(item) for item in rules.values()}
    for topic in dict.fromkeys((*PER_OBJECT_TOPICS, *STACK_TOPICS)):
        for item in topic.RULES:
            if id(item) not in listed:
                raise ValueError(f"{topic.__name__}.{item.name} is a {item.scope} rule, but the topic is not listed "
                                 f"for that scope in {__name__}")
    return rules


RULES: dict[str, Rule] = _collect()


def all_rules() -> dict[str, Rule]:
    """Every rule by name, in the registry's order."""
    return RULES


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
