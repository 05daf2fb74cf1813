"""Which pool each model's pods land on, and what a pool must hold: the stated nodes checked against the facts, the
models grouped by pool, and the minimum replicas every stated pool must have room for (docs/placement.md)."""

from __future__ import annotations

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.instances import find_instance
from vllm_pulumi.runtime.planning.nodes import (
    NODEPOOL_PROVISIONERS,
    NodeShape,
    base_shape_for,
    distinct_pools,
    pool_instances,
    stated_shapes,
)
from vllm_pulumi.runtime.planning.placement import nodes_needed
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


def gpu_for(spec: DeploymentSpec, model: ModelDeploymentSpec, index: int) -> tuple[GpuFacts, int]:
    """The model's GPU and GPUs per node: explicit settings first, then the pool its pods land on."""
    shape = base_shape_for(spec, index)
    return shape.gpu, model.gpus_per_node or shape.gpus


def model_shapes(spec: DeploymentSpec) -> list[NodeShape | PlanningError]:
    """Each model's pool, or why it has none (assumed pools of different GPU counts kept apart)."""
    stated = stated_shapes(spec)
    found: list[NodeShape | PlanningError] = []
    for index in range(len(spec.models)):
        try:
            found.append(base_shape_for(spec, index, stated))
        except PlanningError as error:
            found.append(error)
    shapes = distinct_pools([shape for shape in found if isinstance(shape, NodeShape)])
    renamed = iter(shapes)
    return [next(renamed) if isinstance(shape, NodeShape) else shape for shape in found]


def stated_node_issues(spec: DeploymentSpec, prefix: str) -> list[PlanningError]:
    """Unknown instance types or GPUs of the stated nodes, each at its setting."""
    issues = []
    if isinstance(spec.cluster, EksCluster):
        for j, pool in enumerate(spec.cluster.node_pools):
            try:
                pool_instances(pool)
            except PlanningError as error:
                issues.append(error.at(f"{prefix}cluster.node_pools[{j}].{error.setting}"))
        return issues
    entries = [(f"cluster.nodes[{j}]", nodes.instance_type, nodes.gpu) for j, nodes in enumerate(spec.cluster.nodes)]
    for setting, instance_type, gpu in entries:
        try:
            if instance_type is not None:
                find_instance(instance_type)
            if gpu is not None:
                find_gpu(gpu)
        except PlanningError as error:
            field_name = "instance_type" if instance_type is not None else "gpu"
            issues.append(error.at(f"{prefix}{setting}.{field_name}"))
    return issues


def by_pool(plans: list[ServingPlan]) -> dict[str, list[ServingPlan]]:
    pools: dict[str, list[ServingPlan]] = {}
    for plan in plans:
        pools.setdefault(plan.node_shape.pool, []).append(plan)
    return pools


def per_node_text(shape: NodeShape, plan: ServingPlan) -> str:
    per_node = shape.allocatable.how_many(plan.pod_resources)
    if plan.layout.size == 1:
        return f"{per_node} replica(s) per node"
    return f"a replica is a group of {plan.layout.size} pods, {per_node} pod(s) per node"


def min_scale_issues(plans: list[ServingPlan], prefix: str) -> list[PlanningError]:
    """A stated pool must hold every model on it at its minimum replicas, or the stack never becomes ready."""
    issues = []
    for on_pool in by_pool(plans).values():
        shape = on_pool[0].node_shape
        if not shape.stated or shape.count_setting is None:
            continue
        needed = nodes_needed(shape.allocatable, [(p.pod_resources, p.min_replicas * p.layout.size) for p in on_pool])
        if needed is not None and needed > shape.max_nodes:
            kind = shape.instance_type or shape.pool
            names = ", ".join(plan.spec.name for plan in on_pool)
            verb = "needs" if len(on_pool) == 1 else "need"
            whose = "its" if len(on_pool) == 1 else "their"
            layout = "; ".join(f"{p.spec.name}: {p.min_replicas} x {p.layout.size} pod(s), {per_node_text(shape, p)}"
                               for p in on_pool)
            issues.append(PlanningError(
                f"{prefix}{shape.count_setting}", shape.max_nodes,
                f"{names} {verb} {needed} node(s) of {kind} at {whose} minimum replicas ({layout})",
                f"use {shape.count_setting.rsplit('.', 1)[1]} >= {needed}",
            ))
    return issues


def node_pool_warnings(spec: DeploymentSpec, shape: NodeShape, plan: ServingPlan) -> list[str]:
    """A Karpenter / Auto Mode pool whose consolidate_after_seconds (set by hand) is shorter than this model's startup
    budget: an empty node goes before a new replica could have loaded on it (the policy pack refuses it too)."""
    if shape.provisioner not in NODEPOOL_PROVISIONERS or not isinstance(spec.cluster, EksCluster):
        return []
    pool = next((p for p in spec.cluster.node_pools if p.name == shape.pool), None)
    if pool is None or pool.consolidate_after_seconds is None:
        return []
    if pool.consolidate_after_seconds >= plan.startup_budget_seconds:
        return []
    return [f"{shape.setting}.consolidate_after_seconds {pool.consolidate_after_seconds} is shorter than the "
            f"{plan.startup_budget_seconds} s startup budget of {plan.spec.name}: Karpenter removes an empty GPU node "
            "before a new replica could have loaded on it; leave it unset (the startup budget) or raise it"]
