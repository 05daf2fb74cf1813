"""Where a pod on a GPU pool runs: its node selector, required node affinity and the GPU taint's toleration, for a
pool of any provisioner (managed node groups and stated nodes by GFD's product label; Karpenter and EKS Auto Mode
pools by the labels Karpenter knows before a node exists), and the annotation that keeps Karpenter from disrupting
a serving pod's node.

The NodePools themselves are built in karpenter.py from the same helpers (``node_requirement``, ``gpu_name_label``),
so a pod's selection and its pool's requirements cannot disagree (tests/components/test_karpenter.py checks it for
every GPU of the catalog).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.nodes import NODEPOOL_PROVISIONERS, NODE_POOL_LABEL, NodeShape
from vllm_pulumi.runtime.vocabulary import GPU_TAINT
from vllm_pulumi.runtime.vocabulary import (
    AUTO_MODE_GPU_COUNT_LABEL,
    AUTO_MODE_GPU_NAME_LABEL,
    DO_NOT_DISRUPT_ANNOTATION,
    GPU_PRODUCT_LABEL,
    KARPENTER_GPU_COUNT_LABEL,
    KARPENTER_GPU_NAME_LABEL,
)


def node_requirement(key: str, values: Sequence[str]) -> dict[str, Any]:
    """A node selector requirement (NodePool requirements and pod node affinity share the form)."""
    return {"key": key, "operator": "In", "values": list(values)}


def gpu_name_label(provisioner: str) -> str:
    return AUTO_MODE_GPU_NAME_LABEL if provisioner == "auto-mode" else KARPENTER_GPU_NAME_LABEL


def gpu_count_label(provisioner: str) -> str:
    return AUTO_MODE_GPU_COUNT_LABEL if provisioner == "auto-mode" else KARPENTER_GPU_COUNT_LABEL


def gpu_toleration() -> dict[str, str]:
    """Tolerates the GPU taint every GPU node of ours carries (runtime.vocabulary.GPU_TAINT), whatever its value."""
    return {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}


def karpenter_pod_scheduling(shape: NodeShape) -> dict[str, Any]:
    """nodeSelector and affinity of a pod on a karpenter or auto-mode pool: the NodePool template's pool label, and
    the GPU names the NodePool requires (the same values, from the same facts)."""
    return {
        "nodeSelector": {NODE_POOL_LABEL: shape.pool},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [node_requirement(gpu_name_label(shape.provisioner), shape.gpu_names)]},
        ]}}},
    }


def gpu_pool_scheduling(plan: ServingPlan) -> dict[str, Any]:
    """A pod on the serving GPU pool (the serving pods, and the hydration Job beside them): only nodes with the
    planned GPU, by GFD's product label, or on a Karpenter or Auto Mode pool by the labels Karpenter knows before the
    node exists; tolerating the GPU taint those nodes carry (runtime.vocabulary.GPU_TAINT)."""
    if plan.node_shape.provisioner in NODEPOOL_PROVISIONERS:
        selection = karpenter_pod_scheduling(plan.node_shape)
    else:
        selection = {"nodeSelector": {GPU_PRODUCT_LABEL: plan.gpu.product_label}}
    return {**selection, "tolerations": [gpu_toleration()]}


def do_not_disrupt_annotations(shape: NodeShape) -> dict[str, str]:
    """``karpenter.sh/do-not-disrupt: "true"`` on serving pods of a Karpenter or Auto Mode pool.

    Karpenter does not voluntarily disrupt (consolidate, drift-replace) a node running such a pod. A vLLM pod
    spends minutes loading weights and compiling before it serves; losing the node then wastes all of it, and once
    serving, an eviction drops in-flight requests. The annotation holds for the pod's whole life, not only while it
    starts: the accepted practice for inference servers, since scale-down (the autoscaler removing a replica) empties
    the node and WhenEmpty consolidation then removes it. Forceful disruption (spot interruption, node repair,
    expiry after the NodePool's expireAfter, Karpenter's default 720h) is not prevented; with no terminationGracePeriod
    on our NodePools an expired node's drain waits for such pods to go (a scale-down or a rollout), so a serving pod
    is never cut mid-request by expiry."""
    if shape.provisioner not in NODEPOOL_PROVISIONERS:
        return {}
    return {DO_NOT_DISRUPT_ANNOTATION: "true"}
