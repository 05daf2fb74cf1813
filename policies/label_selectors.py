"""Which objects of a stack select which: label selectors, and indexes that find the Services, monitors and
disruption budgets selecting a set of pod labels without comparing against every object. The stack rules share them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from vllm_pulumi.policies.values import mapping, sequence, strings
from vllm_pulumi.policies.workload import Resource


def match_selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels; empty selects everything."""
    for key, value in mapping(selector.get("matchLabels")).items():
        if labels.get(str(key)) != str(value):
            return False
    for expression in sequence(selector.get("matchExpressions")):
        expression = mapping(expression)
        key, operator, values = str(expression.get("key")), expression.get("operator"), strings(expression.get("values"))
        present = key in labels
        if operator == "In" and (not present or labels[key] not in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _in_namespaces(monitor: Resource, namespace: str) -> bool:
    selector = mapping(monitor.spec.get("namespaceSelector"))
    if selector.get("any") is True:
        return True
    names = strings(selector.get("matchNames"))
    return namespace in names if names else namespace == monitor.namespace


class SelectorIndex:
    """Objects with a label selector, found from the labels they would select without comparing against every one:
    selectors are grouped by their set of keys, and a set of labels is looked up once per distinct key set. Callers
    still check namespaces and matchExpressions on the (few) candidates."""

    def __init__(self) -> None:
        self._tables: dict[frozenset[str], dict[frozenset[tuple[str, str]], list[Resource]]] = {}
        self._unkeyed: list[Resource] = []

    def add(self, match_labels: Mapping[str, Any], item: Resource) -> None:
        if not match_labels:
            self._unkeyed.append(item)
            return
        pairs = frozenset((str(k), str(v)) for k, v in match_labels.items())
        self._tables.setdefault(frozenset(k for k, _ in pairs), {}).setdefault(pairs, []).append(item)

    def candidates(self, labels: Mapping[str, str]) -> list[Resource]:
        found = list(self._unkeyed)
        for keys, table in self._tables.items():
            if keys <= labels.keys():
                found += table.get(frozenset((k, labels[k]) for k in keys), ())
        return found


_MEMO: dict[str, tuple[Sequence[Resource], Any]] = {}


def _memo(name: str, resources: Sequence[Resource], build: Any) -> Any:
    """Indexes several stack rules share, built once per set of resources: the same list object, which evaluate()
    hands to every stack rule unchanged (the memo holds it, so its identity cannot be reused meanwhile)."""
    held = _MEMO.get(name)
    if held is None or held[0] is not resources:
        held = (resources, build(resources))
        _MEMO[name] = held
    return held[1]


def objects_by_key(resources: Sequence[Resource]) -> dict[tuple[str, str, str], Resource]:
    """Every object by (namespace, kind, name): how an autoscaler's scaleTargetRef is followed."""
    return cast(dict[tuple[str, str, str], Resource],
                _memo("by-key", resources, lambda rs: {(r.namespace, r.kind, r.name): r for r in rs}))


def _service_index(resources: Sequence[Resource]) -> SelectorIndex:
    def build(items: Sequence[Resource]) -> SelectorIndex:
        index = SelectorIndex()
        for r in items:
            selector = mapping(r.spec.get("selector"))
            if r.kind == "Service" and selector and r.spec.get("type") != "ExternalName":
                index.add(selector, r)  # an empty Service selector selects nothing (manual endpoints)
        return index

    return cast(SelectorIndex, _memo("services", resources, build))


def services_selecting(resources: Sequence[Resource], namespace: str, labels: Mapping[str, str]) -> list[Resource]:
    """The Services of ``namespace`` whose selector matches pods with ``labels``."""
    return [s for s in _service_index(resources).candidates(labels) if s.namespace == namespace]


def index_by_selector(resources: Sequence[Resource], kind: str) -> SelectorIndex:
    """PodMonitors, ServiceMonitors or PodDisruptionBudgets by their spec.selector.matchLabels."""
    def build(items: Sequence[Resource]) -> SelectorIndex:
        index = SelectorIndex()
        for r in items:
            if r.kind == kind:
                index.add(mapping(mapping(r.spec.get("selector")).get("matchLabels")), r)
        return index

    return cast(SelectorIndex, _memo(kind, resources, build))


def monitored(resources: Sequence[Resource], kind: str, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether a monitor of ``kind`` (PodMonitor, ServiceMonitor) watching ``namespace`` selects ``labels``."""
    return any(_in_namespaces(m, namespace) and match_selector(mapping(m.spec.get("selector")), labels)
               for m in index_by_selector(resources, kind).candidates(labels))

