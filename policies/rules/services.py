"""Services in front of vLLM: an API key when one is reachable from outside the cluster, and target ports that reach
vLLM's port."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.kinds import PLAIN_SERVING_KINDS
from vllm_pulumi.policies.label_selectors import services_selecting
from vllm_pulumi.policies.pods import container_port
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import mapping, sequence
from vllm_pulumi.policies.workload import Resource, server_has_api_key, vllm_port

_EXPOSED_TYPES = frozenset({"LoadBalancer", "NodePort"})


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
    kinds=("Service", "Ingress", "HTTPRoute", "GRPCRoute", *PLAIN_SERVING_KINDS),
)
def api_key_when_exposed(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A vLLM server reachable from outside the cluster (a LoadBalancer or NodePort Service, or a Service behind an
    Ingress or HTTPRoute, selecting its pods) requires an API key: VLLM_API_KEY or --api-key=$(VAR) from a Secret.

    Why: vLLM's OpenAI API has no authentication by default: anyone who reaches it spends your GPUs.

    Fix: Set env VLLM_API_KEY from a Secret (valueFrom.secretKeyRef) on the vLLM container.
    """
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
    kinds=("Service", *PLAIN_SERVING_KINDS),
)
def service_targets_vllm_port(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A Service that selects vLLM server pods has a port whose targetPort reaches vLLM's --port (by number, or by the
    name of a container port).

    Why: A Service whose targetPort is another number, or a port name the vLLM container does not declare, sends every
    request to a closed port; the pods look healthy and clients get connection errors.

    Fix: Set the Service port's targetPort to the vLLM port (e.g. 8000) or the name of the containerPort that is it.
    """
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


RULES: tuple[Rule, ...] = (api_key_when_exposed, service_targets_vllm_port)
"""This topic's rules, in the order the registry lists them."""
