"""What nodes a declared GPU node pool can launch, read from the stack: Karpenter and EKS Auto Mode NodePools (their
template labels, requirements and the well-known labels Karpenter knows before a node exists), and the policy pack's
stand-in for an EKS managed node group (``aws_objects``). The placement rules compare GPU pods against them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.gpu_labels import required_node_terms
from vllm_pulumi.policies.values import mapping, sequence, strings
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    AUTO_MODE_GPU_COUNT_LABEL,
    AUTO_MODE_GPU_NAME_LABEL,
    AUTO_MODE_LABEL_PREFIX,
    AWS_ZONE_ID_LABEL,
    CAPACITY_TYPE_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    KARPENTER_AWS_LABEL_PREFIX,
    KARPENTER_GPU_COUNT_LABEL,
    KARPENTER_GPU_NAME_LABEL,
    KARPENTER_NODEPOOL_LABEL,
    OS_LABEL,
    REGION_LABEL,
    WINDOWS_BUILD_LABEL,
    ZONE_LABEL,
)

# Node labels whose values Karpenter knows for every node a NodePool may launch even when the NodePool does not
# constrain them (well-known labels of Karpenter core and its AWS provider, and of EKS Auto Mode): a pod may select any
# value. The instance-* labels of the providers are all well-known.
_KARPENTER_WELL_KNOWN = frozenset({
    ZONE_LABEL, REGION_LABEL, AWS_ZONE_ID_LABEL, INSTANCE_TYPE_LABEL, ARCH_LABEL, OS_LABEL, CAPACITY_TYPE_LABEL,
    WINDOWS_BUILD_LABEL,
})
_KARPENTER_WELL_KNOWN_PREFIXES = (KARPENTER_AWS_LABEL_PREFIX, AUTO_MODE_LABEL_PREFIX)
_KUBELET_SET_LABELS = (HOSTNAME_LABEL, ZONE_LABEL, REGION_LABEL)
"""Labels the kubelet sets on every node of a managed node group, with values unknown before the node exists."""
_GPU_REQUIREMENT_KEYS = (KARPENTER_GPU_COUNT_LABEL, KARPENTER_GPU_NAME_LABEL, AUTO_MODE_GPU_COUNT_LABEL,
                         AUTO_MODE_GPU_NAME_LABEL)
NODE_POOL_KINDS = ("NodePool",)
MANAGED_NODE_GROUP_KIND = "ManagedNodeGroup"
"""The policy pack's stand-in for an EKS managed node group (aws:eks/nodeGroup:NodeGroup; policies/aws_objects.py): its
node labels in spec.labels, which include the GFD and kubelet labels its instance type gives every node."""


def _pool_labels_and_requirements(pool: Resource) -> tuple[dict[str, str], dict[str, set[str] | None], bool]:
    """(labels every node of the pool carries, key -> allowed values (None: any) of its requirements, whether keys
    it does not mention may still be selected: well-known labels on a NodePool)."""
    if pool.kind == MANAGED_NODE_GROUP_KIND:
        return {str(k): str(v) for k, v in mapping(pool.spec.get("labels")).items()}, {}, False
    template = mapping(pool.spec.get("template"))
    labels = {str(k): str(v) for k, v in mapping(mapping(template.get("metadata")).get("labels")).items()}
    labels[KARPENTER_NODEPOOL_LABEL] = pool.name
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
    if not well_known_open and key in _KUBELET_SET_LABELS:
        return None
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


def gpu_node_pools(resources: Sequence[Resource]) -> list[Resource]:
    """The node pools declared in the stack: NodePools and managed node group stand-ins."""
    return [r for r in resources if r.kind in (*NODE_POOL_KINDS, MANAGED_NODE_GROUP_KIND)]


def is_gpu_node_pool(pool: Resource) -> bool:
    """A NodePool for GPU nodes: it taints them with the GPU resource, limits GPUs, or requires a GPU label."""
    template_spec = mapping(mapping(pool.spec.get("template")).get("spec"))
    if any(mapping(t).get("key") == GPU_RESOURCE for t in sequence(template_spec.get("taints"))):
        return True
    if GPU_RESOURCE in mapping(pool.spec.get("limits")):
        return True
    return any(mapping(r).get("key") in _GPU_REQUIREMENT_KEYS for r in sequence(template_spec.get("requirements")))


def duration_seconds(text: str) -> int | None:
    """A Karpenter duration (``90s``, ``5m``, ``1h30m``) in seconds; None for Never or an unreadable value."""
    if not re.fullmatch(r"([0-9]+[smh])+", text):
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(number) * units[unit] for number, unit in re.findall(r"([0-9]+)([smh])", text))
