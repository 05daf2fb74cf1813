"""How clients reach a model: the Namespace, the Service in front of the serving pods, and the NetworkPolicy."""

from __future__ import annotations

from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.linters import service_exemptions
from vllm_pulumi.components.builders.pod import HTTP_PORT_NAME
from vllm_pulumi.components.builders.serving import SERVICE_PORT, server_labels, service_selector
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.vocabulary import LWS_NAME_LABEL, NAMESPACE_NAME_LABEL


def build_namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": lbl.project_labels()}}


def build_service(plan: ServingPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": lbl.metadata(plan.spec.name, plan.namespace, server_labels(plan),
                                 service_exemptions(plan)),
        "spec": {
            "type": "ClusterIP",
            "selector": service_selector(plan),
            "ports": [{"name": HTTP_PORT_NAME, "port": SERVICE_PORT, "targetPort": HTTP_PORT_NAME,
                       "protocol": "TCP"}],
        },
    }


def service_url(plan: ServingPlan) -> str:
    """The OpenAI base URL of the model's Service, for clients inside the cluster."""
    return f"http://{plan.spec.name}.{plan.namespace}.svc.cluster.local:{SERVICE_PORT}/v1"


def _namespaces_selector(namespaces: list[str]) -> dict[str, Any]:
    return {"matchExpressions": [
        {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(namespaces)}
    ]}


def build_network_policy(plan: ServingPlan) -> dict[str, Any] | None:
    """Admit the listed clients and Prometheus on the vLLM port; the pods of one LWS group talk freely (Ray, NCCL)."""
    network = plan.spec.network
    if not network.network_policy:
        return None
    port = [{"protocol": "TCP", "port": plan.spec.engine.port}]
    clients: list[dict[str, Any]] = []
    if network.allowed_pod_labels:
        peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(sorted(network.allowed_pod_labels.items()))}}
        if network.allowed_namespaces:
            peer["namespaceSelector"] = _namespaces_selector(network.allowed_namespaces)
        clients.append(peer)
    elif network.allowed_namespaces:
        clients.append({"namespaceSelector": _namespaces_selector(network.allowed_namespaces)})
    ingress: list[dict[str, Any]] = []
    if clients:
        ingress.append({"from": clients, "ports": port})
    ingress.append({"from": [{"namespaceSelector": _namespaces_selector([network.prometheus_namespace])}],
                    "ports": port})
    if plan.multi_node:
        ingress.append({"from": [{"podSelector": {"matchLabels": {LWS_NAME_LABEL: plan.spec.name}}}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": lbl.metadata(plan.spec.name, plan.namespace, server_labels(plan)),
        "spec": {
            "podSelector": {"matchLabels": lbl.selector_labels(plan.spec.name)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def build_network(plan: ServingPlan) -> list[dict[str, Any]]:
    """Service, then the NetworkPolicy (when enabled)."""
    objects = [build_service(plan)]
    policy = build_network_policy(plan)
    if policy is not None:
        objects.append(policy)
    return objects
