"""PodDisruptionBudgets over vLLM pods: each allows an eviction, and selects only pods whose controller has a
scale."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.kinds import PLAIN_SERVING_KINDS
from vllm_pulumi.policies.label_selectors import index_by_selector, match_selector
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import as_int, mapping
from vllm_pulumi.policies.workload import Resource, serving_templates
from vllm_pulumi.runtime.vocabulary import LWS_NAME_LABEL


@rule(
    "pdb-allows-eviction", group="Rollout", enforcement="advisory", severity="medium", scope="stack",
    kinds=("PodDisruptionBudget", *PLAIN_SERVING_KINDS),
)
def pdb_allows_eviction(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A PodDisruptionBudget over vLLM pods allows at least one eviction: maxUnavailable above 0, or minAvailable below
    the replicas.

    Why: A budget that allows no eviction blocks every node drain (cluster upgrades, scale-in of GPU nodes) until
    someone deletes it by hand.

    Fix: Use maxUnavailable: 1 (with unhealthyPodEvictionPolicy: AlwaysAllow).
    """
    if not any(r.kind == "PodDisruptionBudget" for r in resources):
        return
    for workload in resources:
        templates = serving_templates(workload)
        if not templates:
            continue
        labels = workload.pod_labels(templates[0])
        replicas = as_int(workload.spec.get("replicas", 1)) if workload.kind != "Pod" else 1
        for budget in index_by_selector(resources, "PodDisruptionBudget").candidates(labels):
            if budget.namespace != workload.namespace or not match_selector(mapping(budget.spec.get("selector")),
                                                                            labels):
                continue
            unavailable, available = budget.spec.get("maxUnavailable"), budget.spec.get("minAvailable")
            minimum = as_int(available)
            blocked = ""
            if unavailable is not None and str(unavailable).strip() in ("0", "0%"):
                blocked = f"maxUnavailable {unavailable!r}"
            elif str(available).strip() == "100%":
                blocked = "minAvailable 100%"
            elif minimum is not None and replicas is not None and minimum >= replicas:
                blocked = f"minAvailable {available} with {replicas} replica(s)"
            if blocked:
                yield Violation(f"PodDisruptionBudget {budget.name} over {workload.describe()}: {blocked} allows no "
                                "eviction, so node drains hang", "use maxUnavailable: 1", resource=budget)


# Pods whose controller has no scale subresource (Job, CronJob via its Jobs, DaemonSet), or no controller at all.
_UNSCALABLE_KINDS = ("Job", "CronJob", "DaemonSet", "Pod")


def _budget_needs_scales(budget: Resource) -> str:
    """The setting that makes the disruption controller look up each selected pod's controller scale (maxUnavailable,
    or a percentage minAvailable); empty for an integer minAvailable, which counts pods instead."""
    unavailable, available = budget.spec.get("maxUnavailable"), budget.spec.get("minAvailable")
    if unavailable is not None:
        return f"maxUnavailable {unavailable if as_int(unavailable) is None else as_int(unavailable)}"
    if isinstance(available, str):
        return f"minAvailable {available}"
    return ""


def _budgets_selecting(resources: Sequence[Resource], namespace: str, labels: Mapping[str, str]) -> list[Resource]:
    """Budgets in ``namespace`` whose selector matches ``labels`` (a missing selector selects nothing)."""
    return [b for b in index_by_selector(resources, "PodDisruptionBudget").candidates(labels)
            if b.namespace == namespace and isinstance(b.spec.get("selector"), dict)
            and match_selector(mapping(b.spec.get("selector")), labels)]


def _serving_selector_hint(workload: Resource, other_labels: Mapping[str, str]) -> str:
    """A selector for the serving pods alone: the set's name for an LWS, else the workload's own selector unless it
    matches the other pods too."""
    if workload.is_lws:
        return f"{LWS_NAME_LABEL}: {workload.name} (every pod of the set)"
    selector = mapping(workload.spec.get("selector")) if workload.kind != "Pod" else {}
    if selector and not match_selector(selector, other_labels):
        written = ", ".join(f"{k}: {v}" for k, v in mapping(selector.get("matchLabels")).items())
        return f"{workload.kind} {workload.name}'s own selector ({written})"
    return "a label only the serving pods carry, such as app.kubernetes.io/component: server"


@rule(
    "pdb-selects-scalable-pods", group="Rollout", enforcement="mandatory", severity="high", scope="stack",
    kinds=("PodDisruptionBudget", "Deployment", "StatefulSet", "LeaderWorkerSet", *_UNSCALABLE_KINDS),
)
def pdb_selects_scalable_pods(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A PodDisruptionBudget with maxUnavailable or a percentage minAvailable that covers vLLM pods selects no pod of a
    Job, a CronJob, a DaemonSet or a bare Pod in its namespace.

    Why: With maxUnavailable or a percentage minAvailable the disruption controller sizes the budget from the scale of
    every selected pod's controller. A Job (a model download keeps its Succeeded pod) or a DaemonSet has no scale, so
    the budget is never computed, disruptionsAllowed stays 0 and every eviction of the vLLM pods is refused: kubectl
    drain, cluster upgrades and GPU node scale-in hang. A bare Pod has no controller: it is left out of the count and
    the budget's status is wrong. A shared name/instance label pair is the usual cause. An integer minAvailable counts
    pods and needs no scale.

    Fix: Narrow the budget's selector to the serving pods: the Deployment's own selector (e.g. add
    app.kubernetes.io/component: server), or leaderworkerset.sigs.k8s.io/name for a LeaderWorkerSet.
    """
    if not any(r.kind == "PodDisruptionBudget" for r in resources):
        return
    # Budgets that need scales, each with the first vLLM workload it covers.
    covering: dict[int, Resource] = {}
    for workload in resources:
        if workload.is_vllm:
            for template in workload.templates:
                for budget in _budgets_selecting(resources, workload.namespace, workload.pod_labels(template)):
                    if _budget_needs_scales(budget):
                        covering.setdefault(id(budget), workload)
    if not covering:
        return
    for other in resources:
        if other.kind not in _UNSCALABLE_KINDS:
            continue
        reported: set[int] = set()
        for template in other.templates:
            labels = other.pod_labels(template)
            for budget in _budgets_selecting(resources, other.namespace, labels):
                served = covering.get(id(budget))
                if served is None or id(budget) in reported:
                    continue
                reported.add(id(budget))
                if other.kind == "Pod":
                    what = "selects a bare Pod" if other is served else f"also selects the bare {other.describe()}"
                    effect = ("a bare Pod has no controller, so the disruption controller leaves it out of the count "
                              "and the budget's status is wrong (use an integer minAvailable for bare Pods)")
                else:
                    what = f"also selects the pods of {other.describe()}"
                    owner = "the Jobs of a CronJob have" if other.kind == "CronJob" else f"a {other.kind} has"
                    effect = (f"{owner} no scale, so the disruption controller cannot size the budget: "
                              "disruptionsAllowed stays 0 and every eviction of the vLLM pods is refused (node "
                              "drains, cluster upgrades and GPU node scale-in hang)")
                yield Violation(
                    f"PodDisruptionBudget {budget.name} ({_budget_needs_scales(budget)}) over the vLLM pods of "
                    f"{served.describe()} {what}: {effect}",
                    "run the vLLM pod under a Deployment, or use an integer minAvailable" if other is served else
                    f"narrow spec.selector to the serving pods: {_serving_selector_hint(served, labels)}",
                    resource=budget,
                )


RULES: tuple[Rule, ...] = (pdb_allows_eviction, pdb_selects_scalable_pods)
"""This topic's rules, in the order the registry lists them."""
