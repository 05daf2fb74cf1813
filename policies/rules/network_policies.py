"""NetworkPolicies that isolate vLLM pods still admit Prometheus on the vLLM port."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.kinds import PLAIN_SERVING_KINDS
from vllm_pulumi.policies.label_selectors import match_selector
from vllm_pulumi.policies.pods import container_port
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, rule
from vllm_pulumi.policies.values import mapping, sequence, strings
from vllm_pulumi.policies.workload import Resource, vllm_port
from vllm_pulumi.runtime.vocabulary import NAMESPACE_NAME_LABEL


def _peer_admits(peer: Mapping[str, Any], namespace: str, own_namespace: str) -> bool:
    """Whether a NetworkPolicy ``from`` peer admits pods of ``namespace`` (ipBlock peers: not known, so no)."""
    if "namespaceSelector" in peer:
        return match_selector(mapping(peer.get("namespaceSelector")), {NAMESPACE_NAME_LABEL: namespace})
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
    scope="stack", kinds=("NetworkPolicy", *PLAIN_SERVING_KINDS),
    settings={"prometheus_namespaces": Setting(["monitoring"], "Namespaces Prometheus scrapes from.")},
)
def network_policy_admits_prometheus(resources: Sequence[Resource],
                                     settings: Mapping[str, Any]) -> Iterator[Violation]:
    """When NetworkPolicies isolate the vLLM pods, one of them admits Prometheus (its namespaces, a setting) on the vLLM
    port, where /metrics is served.

    Why: An ingress policy that lists only the client namespaces silently cuts Prometheus off: dashboards go empty and
    KEDA, which scales on those metrics, stops scaling.

    Fix: Add an ingress rule from the Prometheus namespace (namespaceSelector on kubernetes.io/metadata.name) to the
    vLLM port.
    """
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


RULES: tuple[Rule, ...] = (network_policy_admits_prometheus,)
"""This topic's rules, in the order the registry lists them."""
