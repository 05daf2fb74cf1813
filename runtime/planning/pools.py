"""The pools a stack's pods land on: the node shape of each pool the stack states (an EKS node pool's instance types,
or ``cluster.nodes`` of a render or kubeconfig cluster) or the planner assumes from the GPU facts, which pool each
model lands on, and the minimum replicas every stated pool must have room for (docs/placement.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.instances import INSTANCES, InstanceFacts, find_instance, instances_with
from vllm_pulumi.runtime.planning.nodes import (
    KUBELET_DEFAULT_MAX_PODS,
    NODE_DISK_GIB,
    NODE_POOL_LABEL,
    NODEPOOL_PROVISIONERS,
    NodeShape,
    instance_shape,
    node_shape,
)
from vllm_pulumi.runtime.planning.placement import nodes_needed
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.cluster import EksCluster, GpuNodesSpec
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec
from vllm_pulumi.runtime.spec.node_pools import (
    AutoModePool,
    GpuNodePoolSpec,
    KarpenterPool,
    ManagedNodeGroupPool,
    NodePoolBase,
    NodePoolLaunchedPool,
)
from vllm_pulumi.runtime.vocabulary import (
    AUTO_MODE_GPU_COUNT_LABEL,
    AUTO_MODE_GPU_NAME_LABEL,
    KARPENTER_GPU_COUNT_LABEL,
    KARPENTER_GPU_NAME_LABEL,
    KARPENTER_NODEPOOL_LABEL,
)

# A GPU no EC2 instance carries (RTX 4090, RTX 6000 Ada, H100 PCIe) is assumed in a typical 8-GPU PCIe server:
# two 32-core CPUs with SMT and 1 TiB of memory, i.e. per GPU 16 logical CPUs and 128 GiB.
ASSUMED_VCPUS_PER_GPU = 16
ASSUMED_MEMORY_GIB_PER_GPU = 128
ASSUMED_SERVER_GPUS = 8


def pool_instances(pool: NodePoolBase) -> list[InstanceFacts]:
    """The EC2 types a pool's nodes may be: instance_type, instance_types, or every known type carrying ``gpu``
    (with ``gpus_per_node`` GPUs, else the most). Raises PlanningError at the pool's setting (relative path)."""
    if isinstance(pool, NodePoolLaunchedPool) and pool.gpu is not None:
        return _instances_carrying(pool.gpu, pool.gpus_per_node)
    listed = pool.instance_types if isinstance(pool, NodePoolLaunchedPool) else []
    names = listed or ([pool.instance_type] if pool.instance_type else [])
    setting = "instance_types" if listed else "instance_type"
    instances = []
    for j, name in enumerate(names):
        try:
            instances.append(find_instance(name))
        except PlanningError as error:
            raise error.at(f"{setting}[{j}]" if listed else setting) from None
    counts = sorted({i.gpus for i in instances})
    if len(counts) > 1:
        raise PlanningError(setting, names, f"the types carry different GPU counts ({counts}); a serving pod asks "
                            "for one count, so it would not fit the smaller nodes",
                            "list types with the same GPU count, or make a pool per count")
    return instances


def _instances_carrying(gpu_name: str, gpus_per_node: int | None) -> list[InstanceFacts]:
    """A NodePool's types named by ``gpu``: every EC2 type carrying it, with ``gpus_per_node`` GPUs, else the most."""
    try:
        gpu = find_gpu(gpu_name)
    except PlanningError as error:
        raise error.at("gpu") from None
    carrying = instances_with(gpu.id)
    if not carrying:
        raise PlanningError("gpu", gpu_name, "no EC2 instance type carries this GPU",
                            f"use one of {', '.join(sorted({i.gpu_id for i in INSTANCES}))}")
    count = gpus_per_node or max(i.gpus for i in carrying)
    chosen = [i for i in carrying if i.gpus == count]
    if not chosen:
        raise PlanningError("gpus_per_node", gpus_per_node, f"no EC2 type carries {count} {gpu.id}",
                            f"use one of {sorted({i.gpus for i in carrying})}")
    return chosen


def pool_gpu_names(instances: list[InstanceFacts]) -> tuple[str, ...]:
    """The instance-gpu-name label values of these types, sorted."""
    return tuple(sorted({find_gpu(i.gpu_id).aws_gpu_name or i.gpu_id for i in instances}))


def karpenter_node_labels(pool: NodePoolLaunchedPool, instance: InstanceFacts) -> dict[str, str]:
    """What Karpenter or Auto Mode adds on a node of this pool beyond the node group's labels."""
    gpu = find_gpu(instance.gpu_id)
    name_label, count_label = ((AUTO_MODE_GPU_NAME_LABEL, AUTO_MODE_GPU_COUNT_LABEL) if isinstance(pool, AutoModePool)
                               else (KARPENTER_GPU_NAME_LABEL, KARPENTER_GPU_COUNT_LABEL))
    return {KARPENTER_NODEPOOL_LABEL: pool.name, name_label: gpu.aws_gpu_name or gpu.id,
            count_label: str(instance.gpus)}


def node_disk_gib(pool: GpuNodePoolSpec) -> int:
    """The disk a pool's nodes keep images, layers and emptyDirs on: disk_size_gib, else the project's GPU node disk
    (an Auto Mode pool's is its built-in NodeClass's, planned as the same)."""
    if isinstance(pool, (ManagedNodeGroupPool, KarpenterPool)) and pool.disk_size_gib:
        return pool.disk_size_gib
    return NODE_DISK_GIB


def node_pool_gpu_limit(pool: NodePoolLaunchedPool, instances: list[InstanceFacts]) -> int:
    """nvidia.com/gpu a NodePool may have in total: max_gpus, else max_size nodes of its types' GPU count (one count:
    pool_instances refuses types that differ)."""
    return pool.max_gpus or pool.max_size * max(i.gpus for i in instances)


@dataclass(frozen=True)
class NodePoolPlan:
    """What the NodePools of a karpenter or auto-mode pool state beyond its settings, planned from the models."""

    gpu_limit: int
    """spec.limits nvidia.com/gpu of each NodePool (node_pool_gpu_limit)."""
    consolidate_after_seconds: int
    """How long a node stays empty before Karpenter removes it: consolidate_after_seconds, else the longest startup
    budget of the models on the pool (all models' when none is): a replacement pod would load the model that long,
    so an empty node is kept at least that long for the next scale-up."""


def plan_node_pool(pool: NodePoolLaunchedPool, plans: Sequence[ServingPlan]) -> NodePoolPlan:
    on_pool = [plan.startup_budget_seconds for plan in plans if plan.node_shape.pool == pool.name]
    startup_budget_seconds = max(on_pool or [plan.startup_budget_seconds for plan in plans] or [0])
    consolidate_after = pool.consolidate_after_seconds
    return NodePoolPlan(gpu_limit=node_pool_gpu_limit(pool, pool_instances(pool)),
                        consolidate_after_seconds=startup_budget_seconds if consolidate_after is None
                        else consolidate_after)


def pool_shape(pool: GpuNodePoolSpec, index: int) -> NodeShape:
    """An EKS node pool's node: the instance type's facts and the root disk the node group gets.

    A Karpenter or Auto Mode pool may launch several types. Its GPU is the one with the least memory (the engine's
    plan then holds on whichever GPU Karpenter gets); its host the largest of those types, since Karpenter launches
    only a type that fits the Pending pod's CPU and memory requests."""
    setting = f"cluster.node_pools[{index}]"
    instances = pool_instances(pool)
    instance = min(instances, key=lambda i: (find_gpu(i.gpu_id).memory_mib, -i.vcpus, -i.memory_gib, i.instance_type))
    gpu_names: tuple[str, ...] = ()
    if isinstance(pool, ManagedNodeGroupPool):
        extra, max_nodes, count_name = dict(pool.labels), pool.max_size, "max_size"
        basis = f"EC2 {instance.instance_type} (node pool {pool.name})"
    else:
        extra = {**pool.labels, **karpenter_node_labels(pool, instance)}
        max_nodes = node_pool_gpu_limit(pool, instances) // instance.gpus
        count_name = "max_size" if pool.max_gpus is None else "max_gpus"
        basis = (f"EC2 {instance.instance_type}, the planning basis of "
                 f"{', '.join(i.instance_type for i in instances)} (node pool {pool.name}, {pool.provisioner})")
        gpu_names = pool_gpu_names(instances)
    shape = instance_shape(
        pool.name, instance, node_disk_gib(pool), arch="arm64" if "_ARM_" in pool.ami_type else "amd64",
        extra_labels=extra, min_nodes=pool.min_size, max_nodes=max_nodes, setting=setting,
        count_setting=f"{setting}.{count_name}", basis=basis,
    )
    return replace(shape, provisioner=pool.provisioner, gpu_names=gpu_names)


def stated_nodes_shape(nodes: GpuNodesSpec, index: int) -> NodeShape:
    """A render or kubeconfig cluster's stated nodes: an instance type's facts, or the stated size."""
    setting = f"cluster.nodes[{index}]"
    disk = nodes.ephemeral_storage_gib or NODE_DISK_GIB
    if nodes.instance_type is not None:
        return instance_shape(
            nodes.name, find_instance(nodes.instance_type), disk, max_pods=nodes.max_pods,
            extra_labels=nodes.labels, min_nodes=nodes.count, max_nodes=nodes.count, setting=setting,
            count_setting=f"{setting}.count", basis=f"EC2 {nodes.instance_type} (stated in {setting})",
        )
    assert nodes.gpu is not None and nodes.gpus_per_node and nodes.vcpus and nodes.memory_gib  # the spec checks
    return node_shape(
        nodes.name, find_gpu(nodes.gpu), nodes.gpus_per_node, None, nodes.vcpus, nodes.memory_gib, disk,
        nodes.max_pods or KUBELET_DEFAULT_MAX_PODS, extra_labels=nodes.labels, min_nodes=nodes.count,
        max_nodes=nodes.count, setting=setting, count_setting=f"{setting}.count", basis=f"stated in {setting}",
    )


def stated_shapes(spec: DeploymentSpec) -> list[NodeShape]:
    """The pools the stack states, in order (node pools of an EKS cluster, or cluster.nodes)."""
    if isinstance(spec.cluster, EksCluster):
        return [pool_shape(pool, j) for j, pool in enumerate(spec.cluster.node_pools)]
    return [stated_nodes_shape(nodes, j) for j, nodes in enumerate(spec.cluster.nodes)]


def _assumed_instance(gpu: GpuFacts, gpus: int | None) -> InstanceFacts | None:
    """The largest EC2 instance carrying this GPU (with exactly ``gpus`` of them when given)."""
    candidates = [i for i in instances_with(gpu.id) if gpus is None or i.gpus == gpus]
    return max(candidates, key=lambda i: (i.gpus, i.vcpus, i.memory_gib), default=None)


def assumed_shape(gpu: GpuFacts, gpus: int | None, pool: str) -> NodeShape:
    """A node the stack does not state: the largest known node for the GPU (node count decided by the planner)."""
    instance = _assumed_instance(gpu, gpus)
    if instance is not None:
        return instance_shape(pool, instance, NODE_DISK_GIB, stated=False,
                               basis=f"the largest EC2 instance with {instance.gpus} {gpu.id}, with the "
                                     f"{NODE_DISK_GIB} GiB root disk of this project's node groups")
    count = gpus or ASSUMED_SERVER_GPUS
    return node_shape(pool, gpu, count, None, ASSUMED_VCPUS_PER_GPU * count, ASSUMED_MEMORY_GIB_PER_GPU * count,
                  NODE_DISK_GIB, KUBELET_DEFAULT_MAX_PODS, stated=False,
                  basis=f"no EC2 instance carries {gpu.id}: a generic GPU server with {ASSUMED_VCPUS_PER_GPU} vCPUs "
                        f"and {ASSUMED_MEMORY_GIB_PER_GPU} GiB per GPU and a {NODE_DISK_GIB} GiB disk")


def _nodes_setting(spec: DeploymentSpec) -> str:
    return "cluster.node_pools" if isinstance(spec.cluster, EksCluster) else "cluster.nodes"


def base_shape_for(spec: DeploymentSpec, index: int, stated: list[NodeShape] | None = None) -> NodeShape:
    """The pool a model's serving pods land on, before the planner counts the nodes of an assumed pool.

    The model's GPU (``models[].gpu``, or the one GPU the stated pools carry) picks the pool; with several pools of
    that GPU, the one with ``models[].gpus_per_node`` GPUs, else the largest. Without a stated pool for the GPU the
    shape is assumed (an EKS cluster may have node groups this stack does not create; a render or kubeconfig stack
    that states its nodes must state the model's).
    """
    model = spec.models[index]
    path = f"models[{index}]"
    shapes = stated_shapes(spec) if stated is None else stated
    if model.gpu is not None:
        try:
            gpu = find_gpu(model.gpu)
        except PlanningError as error:
            raise error.at(f"{path}.gpu") from None
    else:
        distinct = {shape.gpu.id: shape.gpu for shape in shapes}
        if len(distinct) != 1:
            where = "node pools" if isinstance(spec.cluster, EksCluster) else "stated nodes (cluster.nodes)"
            raise PlanningError(
                f"{path}.gpu", None, f"no GPU given and the stack's {where} do not name exactly one GPU type",
                "set gpu to a catalog id (e.g. h100-sxm) or a nvidia.com/gpu.product label",
            )
        gpu = next(iter(distinct.values()))
    candidates = [shape for shape in shapes if shape.gpu.id == gpu.id]
    if not candidates:
        if shapes and not isinstance(spec.cluster, EksCluster):
            stated_gpus = ", ".join(sorted({f"{s.pool} ({s.gpu.id})" for s in shapes}))
            raise PlanningError(
                f"{path}.gpu", model.gpu, f"no stated node carries {gpu.id} GPUs (cluster.nodes: {stated_gpus})",
                "add a cluster.nodes entry for these nodes, or set gpu to the GPU of a stated one",
            )
        return assumed_shape(gpu, model.gpus_per_node, f"assumed-{gpu.id}")
    wanted = model.gpus_per_node
    if wanted is None:
        return max(candidates, key=lambda shape: shape.gpus)  # first of the largest
    exact = [shape for shape in candidates if shape.gpus == wanted]
    larger = [shape for shape in candidates if shape.gpus > wanted]
    if exact or larger:
        return exact[0] if exact else max(larger, key=lambda shape: shape.gpus)
    biggest = max(candidates, key=lambda shape: shape.gpus)
    raise PlanningError(
        f"{path}.gpus_per_node", wanted,
        f"larger than the {biggest.gpus} {gpu.id} GPU(s) of one node of {biggest.setting} ({biggest.pool})",
        f"use at most {biggest.gpus}, or leave it unset to use the node's GPUs",
    )


def distinct_pools(shapes: list[NodeShape]) -> list[NodeShape]:
    """Models' shapes with assumed pools of different GPU counts under different names (``assumed-l4-1gpu``):
    a pool is one shape of node."""
    first: dict[str, NodeShape] = {}
    result = []
    for shape in shapes:
        seen = first.setdefault(shape.pool, shape)
        if not shape.stated and seen.gpus != shape.gpus:
            name = f"{shape.pool}-{shape.gpus}gpu"
            shape = replace(shape, pool=name, labels={**shape.labels, NODE_POOL_LABEL: name})
        result.append(shape)
    return result


def state_nodes_hint(spec: DeploymentSpec, gpu: GpuFacts) -> str:
    """The setting that states the real nodes for a GPU, for the assumed-shape warning."""
    if isinstance(spec.cluster, EksCluster):
        return f"add a cluster.node_pools entry with an instance type carrying {gpu.id}"
    return (f"state them in {_nodes_setting(spec)} (name, count, and instance_type or gpu, gpus_per_node, vcpus, "
            "memory_gib)")


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
    if not isinstance(pool, NodePoolLaunchedPool) or pool.consolidate_after_seconds is None:
        return []
    if pool.consolidate_after_seconds >= plan.startup_budget_seconds:
        return []
    return [f"{shape.setting}.consolidate_after_seconds {pool.consolidate_after_seconds} is shorter than the "
            f"{plan.startup_budget_seconds} s startup budget of {plan.spec.name}: Karpenter removes an empty GPU node "
            "before a new replica could have loaded on it; leave it unset (the startup budget) or raise it"]
