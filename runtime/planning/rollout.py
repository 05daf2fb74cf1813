"""How a rolling update replaces each model's replicas, and how many nodes an assumed pool gets, from the room the
pool has at max scale (docs/placement.md).

A rolling update that surges needs room for one more replica at max scale; with several models on a pool their max
scales add up, and so do their surge replicas (one `pulumi up` may roll them all at once). Models keep surge in stack
order while the pool has room; the rest replace one replica at a time.
"""

from __future__ import annotations

from dataclasses import replace

from vllm_pulumi.runtime.planning.node_fit import node_setting
from vllm_pulumi.runtime.planning.nodes import NodeShape, Resources, with_node_count
from vllm_pulumi.runtime.planning.placement import Packing, nodes_needed
from vllm_pulumi.runtime.planning.plans import RolloutPlan, ServingPlan
from vllm_pulumi.runtime.planning.pools import node_pool_warnings, per_node_text, state_nodes_hint
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec

# Groups a LeaderWorkerSet rollout may add (its maxSurge when it surges); LWS surges only above this many replicas.
LWS_SURGE_GROUPS = 1

Pods = list[tuple[Resources, int]]
"""Pods placed on a pool, in order: (one pod's requests, how many such pods)."""


def pool_plans(spec: DeploymentSpec, shape: NodeShape, on_pool: list[ServingPlan],
               indices: dict[str, int]) -> list[ServingPlan]:
    """Node count (when assumed) and rollout of every model on one pool, in stack order."""
    node = shape.allocatable
    max_scale = [(plan.pod_resources, plan.max_replicas * plan.layout.size) for plan in on_pool]
    if not shape.stated:
        surges = [(plan.pod_resources, plan.layout.size) for plan in on_pool]
        shape = with_node_count(shape, nodes_needed(node, max_scale + surges) or 0)
    packing = Packing(node, shape.max_nodes)
    held = [packing.place(pod, count) // plan.layout.size for (pod, count), plan in zip(max_scale, on_pool)]
    placed = list(max_scale)
    result = []
    for plan, replicas_held in zip(on_pool, held):
        index = indices[plan.spec.name]
        spare = (packing.room_for(plan.pod_resources) or 0) // plan.layout.size
        pool_text = (f"pool {shape.pool} ({shape.max_nodes} node(s) of {shape.describe()}; "
                     f"{per_node_text(shape, plan)}{_shared(plan, on_pool)})")
        warnings = list(plan.warnings) + _room_warnings(spec, shape, plan, index, replicas_held, pool_text, max_scale)
        rollout, rollout_warnings = _decide_rollout(plan, index, shape, packing, placed, replicas_held + spare,
                                                    replicas_held >= plan.max_replicas and spare >= 1, pool_text)
        warnings += rollout_warnings + node_pool_warnings(spec, shape, plan)
        result.append(replace(plan, node_shape=shape, rollout=rollout, warnings=warnings))
    return result


def _min_setting(plan: ServingPlan, index: int) -> str:
    return f"models[{index}].{'autoscaling.min_replicas' if plan.spec.autoscaling else 'replicas'}"


def _max_setting(plan: ServingPlan, index: int) -> str:
    return f"models[{index}].{'autoscaling.max_replicas' if plan.spec.autoscaling else 'replicas'}"


def _shared(plan: ServingPlan, on_pool: list[ServingPlan]) -> str:
    others = [other.spec.name for other in on_pool if other is not plan]
    if not others:
        return ""
    return f", shared with {', '.join(others)} (their max scale and surge replicas counted)"


def _room_warnings(spec: DeploymentSpec, shape: NodeShape, plan: ServingPlan, index: int, replicas_held: int,
                   pool_text: str, max_scale: Pods) -> list[str]:
    """An assumed pool, GPUs left idle by the disk, and replicas the pool cannot hold at max scale."""
    node, name, max_setting = shape.allocatable, plan.spec.name, _max_setting(plan, index)
    warnings = []
    if not shape.stated:
        warnings.append(
            f"the stack states no nodes for {shape.gpu.id}, so the plan assumes pool {shape.pool}: "
            f"{shape.max_nodes} node(s) of {shape.describe()} ({shape.basis}), enough for every replica at max "
            f"scale plus a surge replica; {state_nodes_hint(spec, shape.gpu)}"
        )
    per_node = node.how_many(plan.pod_resources)
    pod = plan.pod_resources
    without_disk = node.how_many(Resources(pod.gpus, pod.cpu_millicores, pod.memory_mib, 0))
    if per_node < without_disk:
        warnings.append(
            f"{without_disk} pods of {name} fit one node of {shape.pool} by GPUs, CPU and memory, but only "
            f"{per_node} by disk (each requests {plan.ephemeral_storage_gib} GiB of ephemeral storage, the node "
            f"has {node.ephemeral_storage_gib} GiB allocatable): the rest of its GPUs stay idle; give the nodes a "
            "larger disk"
            + (f" ({node_setting(shape, 'ephemeral_storage_gib')})" if shape.setting else "")
        )
    if replicas_held < plan.max_replicas:
        warnings.append(
            f"at max scale ({max_setting} {plan.max_replicas}) {pool_text} holds only {replicas_held} replica(s) of "
            f"{name}: the others would stay Pending; raise {shape.count_setting} to {nodes_needed(node, max_scale)}, "
            f"or lower {max_setting} to {replicas_held}"
        )
    return warnings


def _decide_rollout(plan: ServingPlan, index: int, shape: NodeShape, packing: Packing, placed: Pods, capacity: int,
                    room_to_surge: bool, pool_text: str) -> tuple[RolloutPlan, list[str]]:
    """Surge when the pool has room for one more replica at max scale (placing it, so the next model on the pool
    counts it), else replace one replica at a time; and what that costs."""
    name, size, max_replicas = plan.spec.name, plan.layout.size, plan.max_replicas
    max_setting = _max_setting(plan, index)
    # LeaderWorkerSet 0.8 starts a surge group only while more groups than maxSurge are out of date
    # (rollingUpdateParameters: a new rollout counts every group unready, and releases the burst when that count
    # is <= maxSurge): with one group it never surges, and with maxUnavailable 0 its partition never moves.
    if plan.multi_node and plan.min_replicas <= LWS_SURGE_GROUPS:
        rollout = RolloutPlan(0, 1, (
            f"replace the group (maxSurge 0, maxUnavailable 1): {name} can run a single LeaderWorkerSet group "
            f"({_min_setting(plan, index)} {plan.min_replicas}), and LeaderWorkerSet surges only while more "
            "groups than maxSurge are out of date, so a surging rollout of one group would never start"),
            max_replicas, capacity)
        return rollout, [
            f"{rollout.reason}; every rollout at one group stops it before the new one is ready, an outage of "
            f"about {plan.startup_budget_seconds} s (the startup budget); run at least 2 replicas, on a pool with "
            "room for a third group, to roll without one"]
    if room_to_surge:
        packing.place(plan.pod_resources, size)
        placed.append((plan.pod_resources, size))
        return RolloutPlan(1, 0, (
            f"surge (maxSurge 1, maxUnavailable 0): at max scale ({max_setting} {max_replicas}) {pool_text} holds "
            f"{capacity} replica(s) of {name}, so a new replica starts before an old one stops"), max_replicas,
            capacity), []
    restore = nodes_needed(shape.allocatable, placed + [(plan.pod_resources, size)])
    rollout = RolloutPlan(0, 1, (
        f"replace one replica at a time (maxSurge 0, maxUnavailable 1): at max scale ({max_setting} "
        f"{max_replicas}) {pool_text} holds {capacity} replica(s) of {name}, no room for a surge replica, "
        "so a surging rollout would wait forever at full scale"), max_replicas, capacity)
    warnings = [f"{rollout.reason}; each rollout step takes one replica out of service until its "
                f"replacement is ready; raise {shape.count_setting} to {restore} to restore surge"]
    if max_replicas == 1:
        warnings.append(
            f"{name} runs a single replica and its pool has no room for a second: every rollout stops it "
            f"before the new one is ready, an outage of about {plan.startup_budget_seconds} s (the startup "
            f"budget); raise {shape.count_setting} to {restore} to keep it serving"
        )
    return rollout, warnings
