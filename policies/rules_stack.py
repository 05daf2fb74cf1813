"""Rules over all objects of a stack (or of the offline checker's input): autoscalers against their targets,
Services and monitors against the pods they select."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import find_gpu
from vllm_pulumi.runtime.facts.instances import find_instance
from vllm_pulumi.runtime.planning.autoscaling import MIN_COOLDOWN_SECONDS
from vllm_pulumi.runtime.planning.nodes import NODE_POOL_LABEL, node_labels
from vllm_pulumi.runtime.vocabulary import INSTANCE_TYPE_LABEL

from .gpu_labels import required_node_terms
from .registry import Setting, Violation, rule
from .rules_workload import container_port, server_has_api_key, vllm_port
from .workload import (
    LWS_NAME_LABEL,
    POD_KINDS,
    SERVING_KINDS,
    PodTemplate,
    Resource,
    as_int,
    mapping,
    sequence,
    strings,
)

_RESOURCE_METRICS = frozenset({"cpu", "memory"})
_EXPOSED_TYPES = frozenset({"LoadBalancer", "NodePort"})


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


def _target(autoscaler: Resource, by_key: Mapping[tuple[str, str, str], Resource]) -> Resource | None:
    ref = mapping(autoscaler.spec.get("scaleTargetRef"))
    kind = str(ref.get("kind") or "Deployment")
    return by_key.get((autoscaler.namespace, kind, str(ref.get("name", ""))))


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


def _index(resources: Sequence[Resource]) -> dict[tuple[str, str, str], Resource]:
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
    return [s for s in _service_index(resources).candidates(labels) if s.namespace == namespace]


def _monitor_index(resources: Sequence[Resource], kind: str) -> SelectorIndex:
    """PodMonitors, ServiceMonitors or PodDisruptionBudgets by their spec.selector.matchLabels."""
    def build(items: Sequence[Resource]) -> SelectorIndex:
        index = SelectorIndex()
        for r in items:
            if r.kind == kind:
                index.add(mapping(mapping(r.spec.get("selector")).get("matchLabels")), r)
        return index

    return cast(SelectorIndex, _memo(kind, resources, build))


def _monitored(resources: Sequence[Resource], kind: str, namespace: str, labels: Mapping[str, str]) -> bool:
    return any(_in_namespaces(m, namespace) and match_selector(mapping(m.spec.get("selector")), labels)
               for m in _monitor_index(resources, kind).candidates(labels))


def _serving_templates(workload: Resource) -> list[PodTemplate]:
    return list({id(s.template): s.template for s in workload.servers}.values())


def _autoscalers(resources: Sequence[Resource]) -> Iterator[tuple[Resource, Resource]]:
    by_key = _index(resources)
    for resource in resources:
        if resource.kind in ("ScaledObject", "HorizontalPodAutoscaler"):
            target = _target(resource, by_key)
            if target is not None and target.is_vllm:
                yield resource, target


@rule(
    "no-cpu-autoscaling", group="Autoscaling", enforcement="mandatory", severity="high", scope="stack",
    kinds=("HorizontalPodAutoscaler", "ScaledObject"),
    description="No HorizontalPodAutoscaler metric or KEDA trigger on cpu or memory targets a vLLM workload.",
    why="The GPU does the work: a vLLM pod's CPU sits at 5-10% at full load and its memory is fixed at start, so "
        "CPU/memory autoscaling either never scales or scales on noise. Queue depth is the signal.",
    fix="Scale with KEDA on vllm:num_requests_waiting (a prometheus trigger), optionally vllm:kv_cache_usage_perc.",
)
def no_cpu_autoscaling(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    for autoscaler, target in _autoscalers(resources):
        if autoscaler.kind == "ScaledObject":
            for i, trigger in enumerate(sequence(autoscaler.spec.get("triggers"))):
                kind = mapping(trigger).get("type")
                if kind in _RESOURCE_METRICS:
                    yield Violation(f"spec.triggers[{i}] scales {target.describe()} on {kind}",
                                    "replace it with a prometheus trigger on vllm:num_requests_waiting",
                                    resource=autoscaler)
            continue
        if autoscaler.spec.get("targetCPUUtilizationPercentage") is not None:
            yield Violation(f"autoscaling/v1 targetCPUUtilizationPercentage scales {target.describe()} on cpu",
                            "use KEDA on vllm:num_requests_waiting instead", resource=autoscaler)
        for i, metric in enumerate(sequence(autoscaler.spec.get("metrics"))):
            metric = mapping(metric)
            source = mapping(metric.get("resource") or metric.get("containerResource"))
            if metric.get("type") in ("Resource", "ContainerResource") and source.get("name") in _RESOURCE_METRICS:
                yield Violation(f"spec.metrics[{i}] scales {target.describe()} on {source.get('name')}",
                                "use KEDA on vllm:num_requests_waiting instead", resource=autoscaler)


@rule(
    "autoscaler-cooldown", group="Autoscaling", enforcement="mandatory", severity="medium", scope="stack",
    kinds=("ScaledObject", "HorizontalPodAutoscaler"),
    description="An autoscaler of a vLLM workload waits at least max(120 s, the target's "
                "terminationGracePeriodSeconds) before scaling down: the HPA scale-down stabilization window "
                "(default 300), and KEDA's cooldownPeriod (default 300) when the ScaledObject scales to zero (KEDA "
                "applies cooldownPeriod only then: minReplicaCount 0 or idleReplicaCount set).",
    why="Removing replicas faster than a drain takes cuts long generations, and flapping costs a model load (minutes) "
        "for every replica re-added.",
    fix="Raise cooldownPeriod / behavior.scaleDown.stabilizationWindowSeconds to the number in the message.",
    settings={"min_cooldown_seconds": Setting(MIN_COOLDOWN_SECONDS, "Floor for the scale-down delay.")},
)
def autoscaler_cooldown(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    floor = int(settings.get("min_cooldown_seconds", MIN_COOLDOWN_SECONDS))
    for autoscaler, target in _autoscalers(resources):
        grace = max((t.grace_seconds for t in _serving_templates(target)), default=30)
        needed = max(floor, grace)
        checks: list[tuple[str, object]] = []
        if autoscaler.kind == "ScaledObject":
            # KEDA's own default minReplicaCount is 0.
            scales_to_zero = (as_int(autoscaler.spec.get("minReplicaCount", 0)) == 0
                              or autoscaler.spec.get("idleReplicaCount") is not None)
            if scales_to_zero:
                checks.append(("spec.cooldownPeriod", autoscaler.spec.get("cooldownPeriod", 300)))
            behavior = mapping(mapping(mapping(autoscaler.spec.get("advanced")).get("horizontalPodAutoscalerConfig"))
                               .get("behavior"))
            path = "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds"
        else:
            behavior = mapping(autoscaler.spec.get("behavior"))
            path = "spec.behavior.scaleDown.stabilizationWindowSeconds"
        checks.append((path, mapping(behavior.get("scaleDown")).get("stabilizationWindowSeconds", 300)))
        for where, raw in checks:
            value = as_int(raw)
            if value is not None and value < needed:
                yield Violation(
                    f"{where} {value} s is shorter than max({floor} s, {target.describe()}'s grace period {grace} s) "
                    f"= {needed} s", f"set {where}: {needed}", resource=autoscaler,
                )


@rule(
    "metrics-scraped", group="Observability", enforcement="advisory", severity="medium", scope="stack",
    kinds=("Deployment", "StatefulSet", "LeaderWorkerSet", "Pod", "ServiceMonitor", "PodMonitor", "Service"),
    description="vLLM pods are scraped: prometheus.io/scrape annotations on the pod template, or a PodMonitor, or a "
                "ServiceMonitor selecting a Service that selects the pods, in the same input.",
    why="Queue depth, KV-cache use and TTFT exist only in vLLM's /metrics; without scraping, KEDA scales on nothing "
        "and no alert can fire.",
    fix="Add a ServiceMonitor (or PodMonitor) whose selector matches the vLLM Service (or pods).",
)
def metrics_scraped(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    for workload in resources:
        if not workload.servers:
            continue
        for template in _serving_templates(workload):
            if template.annotations.get("prometheus.io/scrape") == "true":
                continue
            labels = workload.pod_labels(template)
            ns = workload.namespace
            if _monitored(resources, "PodMonitor", ns, labels):
                continue
            selecting = services_selecting(resources, ns, labels)
            if any(_monitored(resources, "ServiceMonitor", ns, s.labels) for s in selecting):
                continue
            services_text = ", ".join(s.name for s in selecting) or "none"
            yield Violation(
                f"nothing scrapes the vLLM pods of {template.path}: no prometheus.io/scrape annotation, no PodMonitor "
                f"and no ServiceMonitor over a Service selecting them in the input (Services selecting them: "
                f"{services_text})",
                "add a ServiceMonitor whose selector matches the vLLM Service's labels", resource=workload,
            )


def _exposures(resources: Sequence[Resource]) -> Iterator[tuple[Resource, str]]:
    """(Service, how it is exposed) for Services reachable from outside the cluster."""
    services = {(r.namespace, r.name): r for r in resources if r.kind == "Service"}
    for service in services.values():
        kind = service.spec.get("type")
        if kind in _EXPOSED_TYPES:
            yield service, f"type {kind}"
    for resource in resources:
        names: list[str] = []
        if resource.kind == "Ingress":
            backend = mapping(mapping(resource.spec.get("defaultBackend")).get("service")).get("name")
            names += [str(backend)] if backend else []
            for rule_ in sequence(resource.spec.get("rules")):
                for path in sequence(mapping(mapping(rule_).get("http")).get("paths")):
                    name = mapping(mapping(mapping(path).get("backend")).get("service")).get("name")
                    names += [str(name)] if name else []
        elif resource.kind in ("HTTPRoute", "GRPCRoute"):
            for rule_ in sequence(resource.spec.get("rules")):
                for ref in sequence(mapping(rule_).get("backendRefs")):
                    ref = mapping(ref)
                    if ref.get("kind", "Service") == "Service" and ref.get("name"):
                        names.append(str(ref["name"]))
        for name in dict.fromkeys(names):
            backend = services.get((resource.namespace, name))
            if backend is not None:
                yield backend, f"{resource.kind} {resource.name}"


@rule(
    "api-key-when-exposed", group="Security", enforcement="mandatory", severity="critical", scope="stack",
    kinds=("Service", "Ingress", "HTTPRoute", "GRPCRoute", "Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"),
    description="A vLLM server reachable from outside the cluster (a LoadBalancer or NodePort Service, or a Service "
                "behind an Ingress or HTTPRoute, selecting its pods) requires an API key: VLLM_API_KEY or "
                "--api-key=$(VAR) from a Secret.",
    why="vLLM's OpenAI API has no authentication by default: anyone who reaches it spends your GPUs.",
    fix="Set env VLLM_API_KEY from a Secret (valueFrom.secretKeyRef) on the vLLM container.",
)
def api_key_when_exposed(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    exposures = {id(service): how for service, how in _exposures(resources)}
    if not exposures:
        return
    for workload in resources:
        for server in workload.servers:
            if server_has_api_key(server):
                continue
            labels = workload.pod_labels(server.template)
            for service in services_selecting(resources, workload.namespace, labels):
                how = exposures.get(id(service))
                if how is not None:
                    yield Violation(
                        f"{workload.describe()} {server.where} is exposed by Service {service.name} ({how}) without "
                        "an API key", "set env VLLM_API_KEY: {valueFrom: {secretKeyRef: {name: <secret>, key: "
                                      "<key>}}} on the vLLM container", resource=workload,
                    )
                    break


@rule(
    "service-targets-vllm-port", group="Networking", enforcement="mandatory", severity="high", scope="stack",
    kinds=("Service", "Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"),
    description="A Service that selects vLLM server pods has a port whose targetPort reaches vLLM's --port (by "
                "number, or by the name of a container port).",
    why="A Service whose targetPort is another number, or a port name the vLLM container does not declare, sends "
        "every request to a closed port; the pods look healthy and clients get connection errors.",
    fix="Set the Service port's targetPort to the vLLM port (e.g. 8000) or the name of the containerPort that is it.",
)
def service_targets_vllm_port(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    for workload in resources:
        for server in workload.servers:
            port = vllm_port(server)
            if port is None:
                continue
            labels = workload.pod_labels(server.template)
            for service in services_selecting(resources, workload.namespace, labels):
                ports = [mapping(p) for p in sequence(service.spec.get("ports"))]
                targets = [container_port(server.container, p.get("targetPort", p.get("port"))) for p in ports]
                if port not in targets:
                    written = ", ".join(repr(p.get("targetPort", p.get("port"))) for p in ports) or "none"
                    yield Violation(
                        f"Service {service.name} selects {workload.describe()} ({server.where}) but its target ports "
                        f"({written}) do not reach vLLM's port {port}",
                        f"set targetPort: {port} on the Service's port", resource=service,
                    )


@rule(
    "pdb-allows-eviction", group="Rollout", enforcement="advisory", severity="medium", scope="stack",
    kinds=("PodDisruptionBudget", "Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"),
    description="A PodDisruptionBudget over vLLM pods allows at least one eviction: maxUnavailable above 0, or "
                "minAvailable below the replicas.",
    why="A budget that allows no eviction blocks every node drain (cluster upgrades, scale-in of GPU nodes) until "
        "someone deletes it by hand.",
    fix="Use maxUnavailable: 1 (with unhealthyPodEvictionPolicy: AlwaysAllow).",
)
def pdb_allows_eviction(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    if not any(r.kind == "PodDisruptionBudget" for r in resources):
        return
    for workload in resources:
        templates = _serving_templates(workload)
        if not templates:
            continue
        labels = workload.pod_labels(templates[0])
        replicas = as_int(workload.spec.get("replicas", 1)) if workload.kind != "Pod" else 1
        for budget in _monitor_index(resources, "PodDisruptionBudget").candidates(labels):
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
    return [b for b in _monitor_index(resources, "PodDisruptionBudget").candidates(labels)
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
    description="A PodDisruptionBudget with maxUnavailable or a percentage minAvailable that covers vLLM pods selects "
                "no pod of a Job, a CronJob, a DaemonSet or a bare Pod in its namespace.",
    why="With maxUnavailable or a percentage minAvailable the disruption controller sizes the budget from the scale "
        "of every selected pod's controller. A Job (a model download keeps its Succeeded pod) or a DaemonSet has no "
        "scale, so the budget is never computed, disruptionsAllowed stays 0 and every eviction of the vLLM pods is "
        "refused: kubectl drain, cluster upgrades and GPU node scale-in hang. A bare Pod has no controller: it is "
        "left out of the count and the budget's status is wrong. A shared name/instance label pair is the usual "
        "cause. An integer minAvailable counts pods and needs no scale.",
    fix="Narrow the budget's selector to the serving pods: the Deployment's own selector (e.g. add "
        "app.kubernetes.io/component: server), or leaderworkerset.sigs.k8s.io/name for a LeaderWorkerSet.",
)
def pdb_selects_scalable_pods(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
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


def _peer_admits(peer: Mapping[str, Any], namespace: str, own_namespace: str) -> bool:
    """Whether a NetworkPolicy ``from`` peer admits pods of ``namespace`` (ipBlock peers: not known, so no)."""
    if "namespaceSelector" in peer:
        return match_selector(mapping(peer.get("namespaceSelector")), {"kubernetes.io/metadata.name": namespace})
    if "podSelector" in peer:
        return namespace == own_namespace
    return False


def _rule_admits(item: Mapping[str, Any], namespaces: Sequence[str], own_namespace: str, port: int,
                 container: dict[str, Any]) -> bool:
    peers = [mapping(p) for p in sequence(item.get("from"))]
    ports = [mapping(p) for p in sequence(item.get("ports"))]
    from_ok = not peers or any(_peer_admits(p, ns, own_namespace) for p in peers for ns in namespaces)
    port_ok = not ports or any("port" not in p or container_port(container, p.get("port")) == port for p in ports)
    return from_ok and port_ok


@rule(
    "network-policy-admits-prometheus", group="Observability", enforcement="advisory", severity="medium",
    scope="stack", kinds=("NetworkPolicy", "Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"),
    description="When NetworkPolicies isolate the vLLM pods, one of them admits Prometheus (its namespaces, a "
                "setting) on the vLLM port, where /metrics is served.",
    why="An ingress policy that lists only the client namespaces silently cuts Prometheus off: dashboards go empty "
        "and KEDA, which scales on those metrics, stops scaling.",
    fix="Add an ingress rule from the Prometheus namespace (namespaceSelector on kubernetes.io/metadata.name) to the "
        "vLLM port.",
    settings={"prometheus_namespaces": Setting(["monitoring"], "Namespaces Prometheus scrapes from.")},
)
def network_policy_admits_prometheus(resources: Sequence[Resource],
                                     settings: Mapping[str, Any]) -> Iterator[Violation]:
    policies = [r for r in resources if r.kind == "NetworkPolicy"]
    if not policies:
        return
    namespaces = [str(n) for n in settings.get("prometheus_namespaces", ["monitoring"])]
    for workload in resources:
        for server in workload.servers:
            port = vllm_port(server)
            labels = workload.pod_labels(server.template)
            isolating = [
                p for p in policies
                if p.namespace == workload.namespace and match_selector(mapping(p.spec.get("podSelector")), labels)
                and "Ingress" in (strings(p.spec.get("policyTypes")) or ["Ingress"])
            ]
            if port is None or not isolating:
                continue
            if any(_rule_admits(mapping(item), namespaces, workload.namespace, port, server.container)
                   for p in isolating for item in sequence(p.spec.get("ingress"))):
                continue
            yield Violation(
                f"NetworkPolicies {', '.join(p.name for p in isolating)} isolate {workload.describe()} but admit no "
                f"traffic from {', '.join(namespaces)} to port {port}: Prometheus cannot scrape /metrics",
                f"add an ingress rule from namespaceSelector kubernetes.io/metadata.name in [{', '.join(namespaces)}] "
                f"to port {port}", resource=workload,
            )


# ---- GPU node pools: Karpenter NodePools (and EKS managed node groups) against the GPU pods -------------------------
# Node labels whose values Karpenter knows for every node a NodePool may launch even when the NodePool does not
# constrain them (well-known labels of Karpenter core and its AWS provider, and of EKS Auto Mode): a pod may select any
# value. The instance-* labels of the providers are all well-known.
_KARPENTER_WELL_KNOWN = frozenset({
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "topology.k8s.aws/zone-id",
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
})
_KARPENTER_WELL_KNOWN_PREFIXES = ("karpenter.k8s.aws/", "eks.amazonaws.com/")
_NODE_POOL_KINDS = ("NodePool",)
MANAGED_NODE_GROUP_KIND = "ManagedNodeGroup"
"""The policy pack's stand-in for an EKS managed node group (aws:eks/nodeGroup:NodeGroup; policies/pack.py): its
node labels in spec.labels, which include the GFD and kubelet labels its instance type gives every node."""


def managed_node_group_manifest(resource_type: str, props: Mapping[str, Any], name: str = "") -> dict[str, Any] | None:
    """The stand-in object for an EKS managed node group resource (pulumi-aws ``aws:eks/nodeGroup:NodeGroup``): the
    labels its nodes carry, from the group's labels and, for an instance type of the GPU facts, the labels the
    kubelet and GPU Feature Discovery set (runtime.nodes.node_labels). None for any other resource."""
    if resource_type != "aws:eks/nodeGroup:NodeGroup":
        return None
    labels = {str(k): str(v) for k, v in mapping(props.get("labels")).items()}
    types = strings(props.get("instanceTypes") or props.get("instance_types"))
    if len(types) == 1:
        try:
            instance = find_instance(types[0])
        except PlanningError:
            labels[INSTANCE_TYPE_LABEL] = types[0]
        else:
            ami = str(props.get("amiType") or props.get("ami_type") or "")
            labels = node_labels(labels.get(NODE_POOL_LABEL, name), find_gpu(instance.gpu_id), instance.gpus,
                                 instance.instance_type, "arm64" if "_ARM_" in ami else "amd64", labels)
    group = str(props.get("nodeGroupName") or props.get("node_group_name") or name)
    return {"apiVersion": "vllm-pulumi.dev/v1", "kind": MANAGED_NODE_GROUP_KIND, "metadata": {"name": group},
            "spec": {"labels": labels}}


def _pool_labels_and_requirements(pool: Resource) -> tuple[dict[str, str], dict[str, set[str] | None], bool]:
    """(labels every node of the pool carries, key -> allowed values (None: any) of its requirements, whether keys
    it does not mention may still be selected: well-known labels on a NodePool)."""
    if pool.kind == MANAGED_NODE_GROUP_KIND:
        return {str(k): str(v) for k, v in mapping(pool.spec.get("labels")).items()}, {}, False
    template = mapping(pool.spec.get("template"))
    labels = {str(k): str(v) for k, v in mapping(mapping(template.get("metadata")).get("labels")).items()}
    labels["karpenter.sh/nodepool"] = pool.name
    requirements: dict[str, set[str] | None] = {}
    for item in sequence(mapping(template.get("spec")).get("requirements")):
        item = mapping(item)
        key, operator = str(item.get("key")), item.get("operator")
        requirements[key] = set(strings(item.get("values"))) if operator == "In" else None
    return labels, requirements, True


def _allowed_values(key: str, labels: Mapping[str, str], requirements: Mapping[str, set[str] | None],
                    well_known_open: bool) -> set[str] | None:
    """Values of ``key`` a node of the pool may carry: a set, None for any, or an empty set for none."""
    if key in labels:
        return {labels[key]}
    if key in requirements:
        return requirements[key]
    if well_known_open and (key in _KARPENTER_WELL_KNOWN or key.startswith(_KARPENTER_WELL_KNOWN_PREFIXES)):
        return None
    if not well_known_open and key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone",
                                       "topology.kubernetes.io/region"):
        return None  # the kubelet sets them on every node, with values unknown before the node exists
    return set()


def pool_admits(pool: Resource, pod_spec: Mapping[str, Any]) -> bool:
    """Could a node of this pool satisfy the pod's nodeSelector and required node affinity? Only In and Exists are
    judged; other operators are assumed satisfiable (no finding without certainty)."""
    labels, requirements, open_ = _pool_labels_and_requirements(pool)
    for key, value in mapping(pod_spec.get("nodeSelector")).items():
        allowed = _allowed_values(str(key), labels, requirements, open_)
        if allowed is not None and str(value) not in allowed:
            return False
    terms = [mapping(term) for term in required_node_terms(pod_spec)]
    if not terms:
        return True

    def term_ok(term: Mapping[str, Any]) -> bool:
        for expression in sequence(term.get("matchExpressions")):
            expression = mapping(expression)
            allowed = _allowed_values(str(expression.get("key")), labels, requirements, open_)
            operator = expression.get("operator")
            if operator == "In" and allowed is not None and not allowed & set(strings(expression.get("values"))):
                return False
            if operator == "Exists" and allowed == set():
                return False
        return True

    return any(term_ok(term) for term in terms)


def _gpu_node_pools(resources: Sequence[Resource]) -> list[Resource]:
    return [r for r in resources if r.kind in (*_NODE_POOL_KINDS, MANAGED_NODE_GROUP_KIND)]


def _gpu_pod_templates(resources: Sequence[Resource]) -> Iterator[tuple[Resource, PodTemplate]]:
    for res in resources:
        if res.kind not in POD_KINDS:
            continue
        for template in res.templates:
            if template.gpus > 0:
                yield res, template


@rule(
    "gpu-pod-matches-a-node-pool", group="Placement", enforcement="mandatory", severity="high", scope="stack",
    kinds=("NodePool", MANAGED_NODE_GROUP_KIND, *sorted(POD_KINDS)),
    description="When the stack declares GPU node pools (Karpenter / EKS Auto Mode NodePools, or EKS managed node "
                "groups in the policy pack), every pod that requests nvidia.com/gpu has a nodeSelector and required "
                "node affinity that a node of one of them can satisfy.",
    why="Karpenter launches a node only for a Pending pod that some NodePool can satisfy, judging by the labels the "
        "NodePool declares (template labels, requirements, well-known labels). A selector on a label only a running "
        "node gets (GPU Feature Discovery's nvidia.com/gpu.product) or on another pool's value leaves the pod "
        "Pending forever while the GPU nodes scale from zero, and nothing reports an error.",
    fix="Select the pool by a label of its NodePool template (vllm-pulumi.dev/node-pool) and the GPU by "
        "karpenter.k8s.aws/instance-gpu-name (eks.amazonaws.com/instance-gpu-name on Auto Mode), with values the "
        "NodePool's requirements allow.",
)
def gpu_pod_matches_a_node_pool(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    pools = _gpu_node_pools(resources)
    if not pools:
        return  # the pools are not in this input (node groups made elsewhere): nothing to compare against
    names = ", ".join(dict.fromkeys(f"{p.kind} {p.name}" for p in pools))
    for res, template in _gpu_pod_templates(resources):
        if any(pool_admits(pool, template.spec) for pool in pools):
            continue
        selector = mapping(template.spec.get("nodeSelector"))
        yield Violation(
            f"{res.describe()} {template.path} requests GPUs, but no declared pool ({names}) can launch or has a node "
            f"matching its nodeSelector {dict(selector)} and required node affinity: it stays Pending",
            "select a NodePool's template label and values its requirements allow (e.g. nodeSelector "
            "vllm-pulumi.dev/node-pool: <pool>, affinity karpenter.k8s.aws/instance-gpu-name In [<gpu>])",
            resource=res,
        )


def _is_gpu_node_pool(pool: Resource) -> bool:
    template_spec = mapping(mapping(pool.spec.get("template")).get("spec"))
    if any(mapping(t).get("key") == "nvidia.com/gpu" for t in sequence(template_spec.get("taints"))):
        return True
    if "nvidia.com/gpu" in mapping(pool.spec.get("limits")):
        return True
    gpu_keys = ("karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-name",
                "eks.amazonaws.com/instance-gpu-count", "eks.amazonaws.com/instance-gpu-name")
    return any(mapping(r).get("key") in gpu_keys for r in sequence(template_spec.get("requirements")))


def _duration_seconds(text: str) -> int | None:
    """A Karpenter duration (``90s``, ``5m``, ``1h30m``) in seconds; None for Never or an unreadable value."""
    if not re.fullmatch(r"([0-9]+[smh])+", text):
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(number) * units[unit] for number, unit in re.findall(r"([0-9]+)([smh])", text))


@rule(
    "gpu-nodepool-consolidation", group="Placement", enforcement="mandatory", severity="high", scope="stack",
    kinds=("NodePool", *sorted(SERVING_KINDS)),
    description="A GPU NodePool consolidates only empty nodes (consolidationPolicy WhenEmpty; Karpenter's default is "
                "WhenEmptyOrUnderutilized) and waits consolidateAfter at least the startup budget of the vLLM pods "
                "it runs.",
    why="WhenEmptyOrUnderutilized lets Karpenter delete a GPU node to repack its pods onto others: each moved vLLM pod "
        "loads its weights again (minutes of lost capacity, in-flight requests cut). A consolidateAfter shorter than "
        "a load removes a node the autoscaler's next replica would have needed, which then waits for a new node and "
        "a full load.",
    fix="Set spec.disruption.consolidationPolicy: WhenEmpty and consolidateAfter to at least the startup budget "
        "(the vllm-pulumi.dev/startup-budget-seconds annotation, or weights / read speed + engine init).",
    settings={"default_storage_kind": Setting(
        "local-nvme", "Storage assumed for a model read from a mounted path when the storage-kind annotation is "
                      "absent (for the startup budget).")},
)
def gpu_nodepool_consolidation(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    from .facts import startup_budget_for

    for pool in (r for r in resources if r.kind in _NODE_POOL_KINDS and _is_gpu_node_pool(r)):
        disruption = mapping(pool.spec.get("disruption"))
        policy = str(disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized")
        if policy != "WhenEmpty":
            yield Violation(
                f"spec.disruption.consolidationPolicy is {policy}: Karpenter may delete a GPU node with vLLM pods on "
                "it to repack them, and each reloads its model",
                "set spec.disruption.consolidationPolicy: WhenEmpty", resource=pool)
        after_text = str(disruption.get("consolidateAfter", "0s"))
        after = _duration_seconds(after_text)
        if after is None:
            continue  # Never: empty nodes are kept
        budgets = [(startup_budget_for(res, server, settings).seconds, res)
                   for res in resources if res.kind in SERVING_WORKLOAD_KINDS
                   for template in res.templates if template.gpus > 0 and pool_admits(pool, template.spec)
                   for server in res.servers]
        known = [(seconds, res) for seconds, res in budgets if seconds is not None]
        if not known:
            continue
        needed, slowest = max(known, key=lambda item: item[0])
        if after < needed:
            yield Violation(
                f"spec.disruption.consolidateAfter {after_text} ({after} s) is shorter than the startup budget of "
                f"{slowest.describe()} ({needed} s): an empty GPU node goes before a new replica could have loaded",
                f"set spec.disruption.consolidateAfter: {needed}s", resource=pool)


SERVING_WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet", "Pod"})
