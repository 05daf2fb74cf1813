"""The GPU nodes a model's pods land on: what one node has, what its kubelet keeps back, its labels and taints.

A node shape is stated by the stack (an EKS node pool's instance type, or ``cluster.nodes`` of a render or kubeconfig
cluster) or, when the stack states none for a model's GPU, assumed from the GPU facts; the plan then says what it
assumed and which setting states the real nodes. The planner refuses a pod that needs more than one node offers and
derives the rollout strategy from how many replicas the nodes hold; the node group builder and the simulated cluster
of the end-to-end tests build their nodes from these same facts.

Allocatable (what the scheduler can hand to pods) is capacity minus the reserve the EKS AMIs configure, used for every
node (for other kubelets it is a conservative stand-in):

- CPU: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of every core above four;
- memory: 255 MiB + 11 MiB per pod the kubelet admits (max pods), plus the 100 MiB hard eviction threshold;
- ephemeral storage: 1 GiB kube-reserved plus the 10% ``nodefs.available`` hard eviction threshold.

Memory capacity is the instance's nominal memory; a real kubelet reports a few percent less (firmware and kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.instances import INSTANCES, InstanceFacts, find_instance, instances_with
from vllm_pulumi.runtime.spec.cluster import EksCluster, GpuNodesSpec
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.node_pools import GpuNodePoolSpec
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    AUTO_MODE_GPU_COUNT_LABEL,
    AUTO_MODE_GPU_NAME_LABEL,
    GPU_COUNT_LABEL,
    GPU_MEMORY_LABEL,
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_TAINT,
    INSTANCE_TYPE_LABEL,
    KARPENTER_GPU_COUNT_LABEL,
    KARPENTER_GPU_NAME_LABEL,
    KARPENTER_NODEPOOL_LABEL,
    OS_LABEL,
)

# ---- the label this project puts on the nodes of its pools ---------------------------------------------------------
NODE_POOL_LABEL = "vllm-pulumi.dev/node-pool"
"""Set on the nodes of each pool this project creates (EKS node group labels)."""

# ---- sizes and the kubelet reserve ----------------------------------------------------------------------------------
# Root disk of a GPU node: the vLLM image (~20 GB unpacked), containerd's copy while pulling, logs, and slack.
NODE_DISK_GIB = 200
# The kubelet's own default when nothing else sets max pods.
KUBELET_DEFAULT_MAX_PODS = 110
KUBE_RESERVED_MEMORY_BASE_MIB = 255
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11
EVICTION_HARD_MEMORY_MIB = 100
KUBE_RESERVED_EPHEMERAL_STORAGE_GIB = 1
EVICTION_HARD_NODEFS_FRACTION = 0.10
# (cores, millicores reserved per core) in the order the EKS formula takes them; None: every further core.
_CPU_RESERVE_STEPS: tuple[tuple[int | None, float], ...] = ((1, 60), (1, 10), (2, 5), (None, 2.5))
# A GPU no EC2 instance carries (RTX 4090, RTX 6000 Ada, H100 PCIe) is assumed in a typical 8-GPU PCIe server:
# two 32-core CPUs with SMT and 1 TiB of memory, i.e. per GPU 16 logical CPUs and 128 GiB.
ASSUMED_VCPUS_PER_GPU = 16
ASSUMED_MEMORY_GIB_PER_GPU = 128
ASSUMED_SERVER_GPUS = 8


def reserved_cpu_millicores(vcpus: int) -> int:
    """What the EKS AMI's kubelet keeps back of ``vcpus`` cores, in millicores (rounded up)."""
    left, reserved = vcpus, 0.0
    for cores, per_core in _CPU_RESERVE_STEPS:
        taken = left if cores is None else min(left, cores)
        reserved += taken * per_core
        left -= taken
    return math.ceil(reserved)


def reserved_memory_mib(max_pods: int) -> int:
    return KUBE_RESERVED_MEMORY_BASE_MIB + KUBE_RESERVED_MEMORY_PER_POD_MIB * max_pods + EVICTION_HARD_MEMORY_MIB


def allocatable_ephemeral_storage_gib(capacity_gib: int) -> int:
    return math.floor(capacity_gib * (1 - EVICTION_HARD_NODEFS_FRACTION)) - KUBE_RESERVED_EPHEMERAL_STORAGE_GIB


@dataclass(frozen=True)
class Resources:
    """What a pod asks for, or what a node has left: the four quantities placement counts."""

    gpus: int
    cpu_millicores: int
    memory_mib: int
    ephemeral_storage_gib: int

    def minus(self, other: Resources, times: int = 1) -> Resources:
        return Resources(self.gpus - other.gpus * times, self.cpu_millicores - other.cpu_millicores * times,
                         self.memory_mib - other.memory_mib * times,
                         self.ephemeral_storage_gib - other.ephemeral_storage_gib * times)

    def how_many(self, pod: Resources) -> int:
        """How many such pods fit in these resources."""
        counts = [have // need for have, need in (
            (self.gpus, pod.gpus), (self.cpu_millicores, pod.cpu_millicores), (self.memory_mib, pod.memory_mib),
            (self.ephemeral_storage_gib, pod.ephemeral_storage_gib)) if need > 0]
        return max(0, min(counts)) if counts else 0


# Provisioners whose nodes Karpenter launches from a NodePool for Pending pods (pods select them by the labels the
# NodePool declares; serving pods carry karpenter.sh/do-not-disrupt).
NODEPOOL_PROVISIONERS = frozenset({"karpenter", "auto-mode"})


@dataclass(frozen=True)
class NodeShape:
    """One node of a pool, as the cluster would report it, and how many such nodes the pool may have."""

    pool: str
    """node_pools[].name, cluster.nodes[].name, or ``assumed-<gpu id>`` when the stack states none."""
    gpu: GpuFacts
    gpus: int
    """nvidia.com/gpu per node."""
    instance_type: str | None
    capacity_cpu_millicores: int
    capacity_memory_mib: int
    capacity_ephemeral_storage_gib: int
    allocatable_cpu_millicores: int
    allocatable_memory_mib: int
    allocatable_ephemeral_storage_gib: int
    max_pods: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    min_nodes: int
    max_nodes: int
    stated: bool
    """False when the planner assumed the shape (and, from the plans, the node count)."""
    setting: str | None = None
    """Where the stack states this pool (``cluster.node_pools[0]``, ``cluster.nodes[1]``); None when assumed."""
    count_setting: str | None = None
    """The setting that bounds the node count (``...max_size`` or ``...count``); None when assumed."""
    local_nvme_gb: int = 0
    basis: str = ""
    """Where the numbers come from, for the plan's output."""
    extra_labels: dict[str, str] = field(default_factory=dict)
    """The labels the stack gives the pool (an EKS node group sets these and the pool label)."""
    provisioner: str = "existing"
    """Who launches the pool's nodes: GpuNodePoolSpec.provisioner for an EKS pool; ``existing`` for nodes the stack
    does not provision (cluster.nodes of a render or kubeconfig cluster, or assumed)."""
    gpu_names: tuple[str, ...] = ()
    """karpenter / auto-mode: the instance-gpu-name values of every type the NodePool may launch."""

    @property
    def allocatable(self) -> Resources:
        return Resources(self.gpus, self.allocatable_cpu_millicores, self.allocatable_memory_mib,
                         self.allocatable_ephemeral_storage_gib)

    def describe(self) -> str:
        kind = f"{self.instance_type}: " if self.instance_type else ""
        return (f"{kind}{self.gpus} x {self.gpu.id}, {self.capacity_cpu_millicores // 1000} vCPUs, "
                f"{self.capacity_memory_mib // 1024} GiB memory, {self.capacity_ephemeral_storage_gib} GiB disk")


def node_labels(pool: str, gpu: GpuFacts, gpus: int, instance_type: str | None, arch: str,
                extra: dict[str, str]) -> dict[str, str]:
    """Every label placement relies on, as the kubelet, GPU Feature Discovery and the node group would set them."""
    labels = dict(sorted(extra.items()))
    labels.update({
        GPU_PRODUCT_LABEL: gpu.product_label,
        GPU_COUNT_LABEL: str(gpus),
        GPU_MEMORY_LABEL: str(gpu.memory_mib),
        GPU_PRESENT_LABEL: "true",
        ARCH_LABEL: arch,
        OS_LABEL: "linux",
        NODE_POOL_LABEL: pool,
    })
    if instance_type is not None:
        labels[INSTANCE_TYPE_LABEL] = instance_type
    return labels


def pool_node_group_labels(pool: GpuNodePoolSpec) -> dict[str, str]:
    """The labels an EKS node group puts on its nodes: the pool's own, and the pool label."""
    labels = dict(sorted(pool.labels.items()))
    labels[NODE_POOL_LABEL] = pool.name
    return labels


def _shape(pool: str, gpu: GpuFacts, gpus: int, instance_type: str | None, vcpus: int, memory_gib: int,
           disk_gib: int, max_pods: int, *, arch: str = "amd64", extra_labels: dict[str, str] | None = None,
           min_nodes: int = 0, max_nodes: int = 0, stated: bool = True, setting: str | None = None,
           count_setting: str | None = None, local_nvme_gb: int = 0, basis: str = "") -> NodeShape:
    extra = dict(sorted((extra_labels or {}).items()))
    return NodeShape(
        pool=pool, gpu=gpu, gpus=gpus, instance_type=instance_type,
        capacity_cpu_millicores=vcpus * 1000, capacity_memory_mib=memory_gib * 1024,
        capacity_ephemeral_storage_gib=disk_gib,
        allocatable_cpu_millicores=vcpus * 1000 - reserved_cpu_millicores(vcpus),
        allocatable_memory_mib=memory_gib * 1024 - reserved_memory_mib(max_pods),
        allocatable_ephemeral_storage_gib=allocatable_ephemeral_storage_gib(disk_gib),
        max_pods=max_pods, labels=node_labels(pool, gpu, gpus, instance_type, arch, extra),
        taints=[dict(GPU_TAINT)], min_nodes=min_nodes, max_nodes=max_nodes, stated=stated, setting=setting,
        count_setting=count_setting, local_nvme_gb=local_nvme_gb, basis=basis, extra_labels=extra,
    )


def _instance_shape(pool: str, instance: InstanceFacts, disk_gib: int, *, max_pods: int | None = None,
                    arch: str = "amd64", extra_labels: dict[str, str] | None = None, min_nodes: int = 0,
                    max_nodes: int = 0, stated: bool = True, setting: str | None = None,
                    count_setting: str | None = None, basis: str = "") -> NodeShape:
    return _shape(pool, find_gpu(instance.gpu_id), instance.gpus, instance.instance_type, instance.vcpus,
                  instance.memory_gib, disk_gib, max_pods or instance.eks_max_pods, arch=arch,
                  extra_labels=extra_labels, min_nodes=min_nodes, max_nodes=max_nodes, stated=stated,
                  setting=setting, count_setting=count_setting, local_nvme_gb=instance.local_nvme_gb, basis=basis)


def pool_instances(pool: GpuNodePoolSpec) -> list[InstanceFacts]:
    """The EC2 types a pool's nodes may be: instance_type, instance_types, or every known type carrying ``gpu``
    (with ``gpus_per_node`` GPUs, else the most). Raises PlanningError at the pool's setting (relative path)."""
    if pool.gpu is not None:
        try:
            gpu = find_gpu(pool.gpu)
        except PlanningError as error:
            raise error.at("gpu") from None
        carrying = instances_with(gpu.id)
        if not carrying:
            raise PlanningError("gpu", pool.gpu, "no EC2 instance type carries this GPU",
                                f"use one of {', '.join(sorted({i.gpu_id for i in INSTANCES}))}")
        count = pool.gpus_per_node or max(i.gpus for i in carrying)
        chosen = [i for i in carrying if i.gpus == count]
        if not chosen:
            raise PlanningError("gpus_per_node", pool.gpus_per_node, f"no EC2 type carries {count} {gpu.id}",
                                f"use one of {sorted({i.gpus for i in carrying})}")
        return chosen
    names = pool.instance_types or ([pool.instance_type] if pool.instance_type else [])
    setting = "instance_types" if pool.instance_types else "instance_type"
    instances = []
    for j, name in enumerate(names):
        try:
            instances.append(find_instance(name))
        except PlanningError as error:
            raise error.at(f"{setting}[{j}]" if pool.instance_types else setting) from None
    counts = sorted({i.gpus for i in instances})
    if len(counts) > 1:
        raise PlanningError(setting, names, f"the types carry different GPU counts ({counts}); a serving pod asks "
                            "for one count, so it would not fit the smaller nodes",
                            "list types with the same GPU count, or make a pool per count")
    return instances


def pool_gpu_names(instances: list[InstanceFacts]) -> tuple[str, ...]:
    """The instance-gpu-name label values of these types, sorted."""
    return tuple(sorted({find_gpu(i.gpu_id).aws_gpu_name or i.gpu_id for i in instances}))


def karpenter_node_labels(pool: GpuNodePoolSpec, instance: InstanceFacts) -> dict[str, str]:
    """What Karpenter or Auto Mode adds on a node of this pool beyond the node group's labels."""
    gpu = find_gpu(instance.gpu_id)
    name_label, count_label = ((AUTO_MODE_GPU_NAME_LABEL, AUTO_MODE_GPU_COUNT_LABEL) if pool.provisioner == "auto-mode"
                               else (KARPENTER_GPU_NAME_LABEL, KARPENTER_GPU_COUNT_LABEL))
    return {KARPENTER_NODEPOOL_LABEL: pool.name, name_label: gpu.aws_gpu_name or gpu.id,
            count_label: str(instance.gpus)}


def pool_shape(pool: GpuNodePoolSpec, index: int) -> NodeShape:
    """An EKS node pool's node: the instance type's facts and the root disk the node group gets.

    A Karpenter or Auto Mode pool may launch several types. Its GPU is the one with the least memory (the engine's
    plan then holds on whichever GPU Karpenter gets); its host the largest of those types, since Karpenter launches
    only a type that fits the Pending pod's CPU and memory requests."""
    setting = f"cluster.node_pools[{index}]"
    instances = pool_instances(pool)
    instance = min(instances, key=lambda i: (find_gpu(i.gpu_id).memory_mib, -i.vcpus, -i.memory_gib, i.instance_type))
    managed = pool.provisioner == "managed-node-group"
    extra = dict(pool.labels) if managed else {**pool.labels, **karpenter_node_labels(pool, instance)}
    gpus = 0 if managed else (pool.max_gpus or pool.max_size * instance.gpus)
    shape = _instance_shape(
        pool.name, instance, pool.disk_size_gib or NODE_DISK_GIB,
        arch="arm64" if "_ARM_" in pool.ami_type else "amd64", extra_labels=extra,
        min_nodes=pool.min_size, max_nodes=pool.max_size if managed else gpus // instance.gpus, setting=setting,
        count_setting=f"{setting}.{'max_size' if managed or pool.max_gpus is None else 'max_gpus'}",
        basis=(f"EC2 {instance.instance_type} (node pool {pool.name})" if managed else
               f"EC2 {instance.instance_type}, the planning basis of {', '.join(i.instance_type for i in instances)} "
               f"(node pool {pool.name}, {pool.provisioner})"),
    )
    return replace(shape, provisioner=pool.provisioner, gpu_names=() if managed else pool_gpu_names(instances))


def stated_nodes_shape(nodes: GpuNodesSpec, index: int) -> NodeShape:
    """A render or kubeconfig cluster's stated nodes: an instance type's facts, or the stated size."""
    setting = f"cluster.nodes[{index}]"
    disk = nodes.ephemeral_storage_gib or NODE_DISK_GIB
    if nodes.instance_type is not None:
        return _instance_shape(
            nodes.name, find_instance(nodes.instance_type), disk, max_pods=nodes.max_pods,
            extra_labels=nodes.labels, min_nodes=nodes.count, max_nodes=nodes.count, setting=setting,
            count_setting=f"{setting}.count", basis=f"EC2 {nodes.instance_type} (stated in {setting})",
        )
    assert nodes.gpu is not None and nodes.gpus_per_node and nodes.vcpus and nodes.memory_gib  # the spec checks
    return _shape(
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
        return _instance_shape(pool, instance, NODE_DISK_GIB, stated=False,
                               basis=f"the largest EC2 instance with {instance.gpus} {gpu.id}, with the "
                                     f"{NODE_DISK_GIB} GiB root disk of this project's node groups")
    count = gpus or ASSUMED_SERVER_GPUS
    return _shape(pool, gpu, count, None, ASSUMED_VCPUS_PER_GPU * count, ASSUMED_MEMORY_GIB_PER_GPU * count,
                  NODE_DISK_GIB, KUBELET_DEFAULT_MAX_PODS, stated=False,
                  basis=f"no EC2 instance carries {gpu.id}: a generic GPU server with {ASSUMED_VCPUS_PER_GPU} vCPUs "
                        f"and {ASSUMED_MEMORY_GIB_PER_GPU} GiB per GPU and a {NODE_DISK_GIB} GiB disk")


def with_node_count(shape: NodeShape, count: int) -> NodeShape:
    return replace(shape, min_nodes=count, max_nodes=count)


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
