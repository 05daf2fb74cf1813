"""The GPU nodes a model's pods land on: what one node has, what its kubelet keeps back, its labels and taints.

A node shape is stated by the stack (an EKS node pool's instance type, or ``cluster.nodes`` of a render or kubeconfig
cluster) or, when the stack states none for a model's GPU, assumed from the GPU facts (runtime/planning/pools.py);
the plan then says what it assumed and which setting states the real nodes. The planner refuses a pod that needs
more than one node offers and derives the rollout strategy from how many replicas the nodes hold; the node group
builder and the simulated cluster of the end-to-end tests build their nodes from these same facts.

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

from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.facts.gpus import GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.instances import InstanceFacts
from vllm_pulumi.runtime.spec.node_pools import NodePoolBase
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    GPU_COUNT_LABEL,
    GPU_MEMORY_LABEL,
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_TAINT,
    INSTANCE_TYPE_LABEL,
    OS_LABEL,
)

# ---- the label this project puts on the nodes of its pools ---------------------------------------------------------
NODE_POOL_LABEL = ann.NODE_POOL
"""Set on the nodes of each pool this project creates (EKS node group labels): the same key as the pool annotation the
serving workloads carry (runtime/annotations.py)."""

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
    """Who launches the pool's nodes: the provisioner of an EKS pool; ``existing`` for nodes the stack
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


def pool_node_group_labels(pool: NodePoolBase) -> dict[str, str]:
    """The labels an EKS node group puts on its nodes: the pool's own, and the pool label."""
    labels = dict(sorted(pool.labels.items()))
    labels[NODE_POOL_LABEL] = pool.name
    return labels


def node_shape(pool: str, gpu: GpuFacts, gpus: int, instance_type: str | None, vcpus: int, memory_gib: int,
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


def instance_shape(pool: str, instance: InstanceFacts, disk_gib: int, *, max_pods: int | None = None,
                    arch: str = "amd64", extra_labels: dict[str, str] | None = None, min_nodes: int = 0,
                    max_nodes: int = 0, stated: bool = True, setting: str | None = None,
                    count_setting: str | None = None, basis: str = "") -> NodeShape:
    return node_shape(pool, find_gpu(instance.gpu_id), instance.gpus, instance.instance_type, instance.vcpus,
                  instance.memory_gib, disk_gib, max_pods or instance.eks_max_pods, arch=arch,
                  extra_labels=extra_labels, min_nodes=min_nodes, max_nodes=max_nodes, stated=stated,
                  setting=setting, count_setting=count_setting, local_nvme_gb=instance.local_nvme_gb, basis=basis)


def with_node_count(shape: NodeShape, count: int) -> NodeShape:
    return replace(shape, min_nodes=count, max_nodes=count)
