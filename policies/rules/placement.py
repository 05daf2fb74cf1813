"""Placement of GPU pods: per pod, a node selector naming the GPU and a toleration of the GPU taint; against the
stack's node pools, a pool that can launch each GPU pod, and GPU NodePools that consolidate only empty nodes, and no
sooner than a model load."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vllm_pulumi.policies.facts import startup_budget_for
from vllm_pulumi.policies.gpu_labels import LABELS as GPU_LABELS
from vllm_pulumi.policies.kinds import PLAIN_SERVING_KINDS, POD_KINDS, SERVING_KINDS
from vllm_pulumi.policies.node_pools import (
    MANAGED_NODE_GROUP_KIND,
    NODE_POOL_KINDS,
    duration_seconds,
    gpu_node_pools,
    is_gpu_node_pool,
    pool_admits,
)
from vllm_pulumi.policies.pods import PodTemplate
from vllm_pulumi.policies.rule_types import Rule, Setting, Violation, rule
from vllm_pulumi.policies.values import mapping, sequence
from vllm_pulumi.policies.workload import Resource, gpu_products, gpu_templates
from vllm_pulumi.runtime.vocabulary import GPU_PRODUCT_LABEL, GPU_RESOURCE


@rule(
    "gpu-product-selector", group="Placement", enforcement="mandatory", severity="medium", kinds=SERVING_KINDS,
    text_values={"gpu_labels": ", ".join(GPU_LABELS), "product_label": GPU_PRODUCT_LABEL},
)
def gpu_product_selector(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """GPU pods of a vLLM workload select the GPU model by nodeSelector or required node affinity on a label that
    names it: {gpu_labels} (a GPU instance type).

    Why: Memory, KV-cache capacity and probe budgets were sized for one GPU; on a smaller one the engine runs out of
    memory or its KV cache no longer fits max-model-len.

    Fix: Add nodeSelector: {{{product_label}: <GFD product label, e.g. NVIDIA-H100-80GB-HBM3>}}; for a Karpenter
    NodePool, karpenter.k8s.aws/instance-gpu-name (e.g. h100), which Karpenter knows before the node exists.
    """
    if not res.is_vllm:
        return
    for template in gpu_templates(res):
        if not gpu_products(template.spec):
            yield Violation(f"{template.path} requests GPUs but selects no GPU model (none of {', '.join(GPU_LABELS)})",
                            f"add nodeSelector: {{{GPU_PRODUCT_LABEL}: <product label>}} to {template.path}")


@rule("gpu-toleration", group="Placement", enforcement="advisory", severity="low", kinds=SERVING_KINDS)
def gpu_toleration(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """GPU pods of a vLLM workload tolerate the nvidia.com/gpu taint.

    Why: GPU node pools are usually tainted nvidia.com/gpu:NoSchedule so other pods stay off them; without the
    toleration the vLLM pod stays Pending.

    Fix: Add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}].
    """
    if not res.is_vllm:
        return
    for template in gpu_templates(res):
        tolerations = [mapping(t) for t in sequence(template.spec.get("tolerations"))]
        if not any(t.get("key") == GPU_RESOURCE or (not t.get("key") and t.get("operator") == "Exists")
                   for t in tolerations):
            yield Violation(f"{template.path} has no toleration for the {GPU_RESOURCE} taint",
                            f"add tolerations: [{{key: {GPU_RESOURCE}, operator: Exists, effect: NoSchedule}}]")


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
)
def gpu_pod_matches_a_node_pool(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """When the stack declares GPU node pools (Karpenter / EKS Auto Mode NodePools, or EKS managed node groups in the
    policy pack), every pod that requests nvidia.com/gpu has a nodeSelector and required node affinity that a node of
    one of them can satisfy.

    Why: Karpenter launches a node only for a Pending pod that some NodePool can satisfy, judging by the labels the
    NodePool declares (template labels, requirements, well-known labels). A selector on a label only a running node gets
    (GPU Feature Discovery's nvidia.com/gpu.product) or on another pool's value leaves the pod Pending forever while the
    GPU nodes scale from zero, and nothing reports an error.

    Fix: Select the pool by a label of its NodePool template (vllm-pulumi.dev/node-pool) and the GPU by
    karpenter.k8s.aws/instance-gpu-name (eks.amazonaws.com/instance-gpu-name on Auto Mode), with values the NodePool's
    requirements allow.
    """
    pools = gpu_node_pools(resources)
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


@rule(
    "gpu-nodepool-consolidation", group="Placement", enforcement="mandatory", severity="high", scope="stack",
    kinds=("NodePool", *sorted(SERVING_KINDS)),
    settings={"default_storage_kind": Setting(
        "local-nvme", "Storage assumed for a model read from a mounted path when the storage-kind annotation is "
                      "absent (for the startup budget).")},
)
def gpu_nodepool_consolidation(resources: Sequence[Resource], settings: Mapping[str, Any]) -> Iterator[Violation]:
    """A GPU NodePool consolidates only empty nodes (consolidationPolicy WhenEmpty; Karpenter's default is
    WhenEmptyOrUnderutilized) and waits consolidateAfter at least the startup budget of the vLLM pods it runs.

    Why: WhenEmptyOrUnderutilized lets Karpenter delete a GPU node to repack its pods onto others: each moved vLLM pod
    loads its weights again (minutes of lost capacity, in-flight requests cut). A consolidateAfter shorter than a load
    removes a node the autoscaler's next replica would have needed, which then waits for a new node and a full load.

    Fix: Set spec.disruption.consolidationPolicy: WhenEmpty and consolidateAfter to at least the startup budget (the
    vllm-pulumi.dev/startup-budget-seconds annotation, or weights / read speed + engine init).
    """
    for pool in (r for r in resources if r.kind in NODE_POOL_KINDS and is_gpu_node_pool(r)):
        disruption = mapping(pool.spec.get("disruption"))
        policy = str(disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized")
        if policy != "WhenEmpty":
            yield Violation(
                f"spec.disruption.consolidationPolicy is {policy}: Karpenter may delete a GPU node with vLLM pods on "
                "it to repack them, and each reloads its model",
                "set spec.disruption.consolidationPolicy: WhenEmpty", resource=pool)
        after_text = str(disruption.get("consolidateAfter", "0s"))
        after = duration_seconds(after_text)
        if after is None:
            continue  # Never: empty nodes are kept
        budgets = [(startup_budget_for(res, server, settings).seconds, res)
                   for res in resources if res.kind in PLAIN_SERVING_KINDS
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


RULES: tuple[Rule, ...] = (
    gpu_product_selector, gpu_toleration, gpu_pod_matches_a_node_pool, gpu_nodepool_consolidation,
)
"""This topic's rules, in the order the registry lists them."""
