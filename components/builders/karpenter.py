"""GPU node pools launched by Karpenter or EKS Auto Mode: NodePools (karpenter.sh/v1) and the EC2NodeClass
(karpenter.k8s.aws/v1) of a Karpenter pool.

Everything comes from the pool spec and the GPU/instance facts (runtime/facts/instances.py, runtime/facts/gpus.py): the
instance types, their GPU name and count, the architecture; capacity types in order of preference; the GPU limit;
the nvidia.com/gpu taint; and disruption settings that never take a node whose model is still loading.

Pods select a pool by ``vllm-pulumi.dev/node-pool`` (a label of the NodePool's template, which Karpenter knows before
any node exists) and, with required node affinity, by the instance-gpu-name the NodePool requires (placement.py).
Both sides build their terms with placement.py's helpers, so selector and pool cannot disagree
(tests/components/test_karpenter.py checks it for every GPU of the catalog).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm_pulumi.components.builders import labels as lbl
from vllm_pulumi.components.builders.placement import gpu_count_label, gpu_name_label, node_requirement
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.planning.nodes import NODE_POOL_LABEL, pool_node_group_labels
from vllm_pulumi.runtime.planning.pools import node_disk_gib, plan_node_pool, pool_gpu_names, pool_instances
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.node_pools import NODEPOOL_CLASSES, AutoModePool, KarpenterPool, NodePoolLaunchedPool
from vllm_pulumi.runtime.vocabulary import (
    ARCH_LABEL,
    AUTO_MODE_GROUP,
    CAPACITY_TYPE_LABEL,
    GPU_RESOURCE,
    GPU_TAINT,
    INSTANCE_TYPE_LABEL,
    KARPENTER_AWS_GROUP,
    KARPENTER_GROUP,
    OS_LABEL,
)

KARPENTER_API = f"{KARPENTER_GROUP}/v1"
EC2_NODE_CLASS_API = f"{KARPENTER_AWS_GROUP}/v1"
# EKS Auto Mode's built-in NodeClass: AWS keeps its AMI (with the NVIDIA driver and device plugin), subnets,
# security groups and role; a NodePool of ours only points at it.
AUTO_MODE_NODE_CLASS_REF = {"group": AUTO_MODE_GROUP, "kind": "NodeClass", "name": "default"}
# The order in which Karpenter picks among the capacity types one NodePool allows (karpenter-provider-aws
# getCapacityType: reserved, then spot, then on-demand; an unavailable one falls through to the next). A preference
# in this order needs one NodePool; any other order needs a NodePool per type, tried by descending weight.
KARPENTER_CAPACITY_ORDER = ("reserved", "spot", "on-demand")
# Weight of the first of several weighted NodePools; each later one 10 less (Karpenter tries the highest first).
FIRST_WEIGHT = 100
WEIGHT_STEP = 10
AMI_ALIASES = {"AL2023": "al2023@latest", "BOTTLEROCKET": "bottlerocket@latest"}
"""ami_type family -> EC2NodeClass alias; Karpenter picks the NVIDIA variant of the family for GPU types."""
# Bottlerocket boots from a small OS volume and keeps images and emptyDirs on its data volume (/dev/xvdb).
BOTTLEROCKET_OS_VOLUME_GIB = 4


def pool_requirements(pool: NodePoolLaunchedPool) -> list[dict[str, Any]]:
    """The NodePool's node requirements (without capacity type): the types, their GPU name and count, the
    architecture and OS. Instance types alone would do; the GPU name and count make the intent readable and are what
    the pods' affinity repeats."""
    instances = pool_instances(pool)
    arch = "arm64" if "_ARM_" in pool.ami_type else "amd64"
    return [
        node_requirement(INSTANCE_TYPE_LABEL, sorted(i.instance_type for i in instances)),
        node_requirement(gpu_name_label(pool.provisioner), pool_gpu_names(instances)),
        node_requirement(gpu_count_label(pool.provisioner), sorted({str(i.gpus) for i in instances})),
        node_requirement(ARCH_LABEL, [arch]),
        node_requirement(OS_LABEL, ["linux"]),
    ]


def capacity_groups(capacity_types: Sequence[str]) -> list[list[str]]:
    """Capacity types per NodePool: one NodePool when the preference is Karpenter's own order, else one per type."""
    ranks = [KARPENTER_CAPACITY_ORDER.index(kind) for kind in capacity_types]
    if ranks == sorted(ranks):
        return [list(capacity_types)]
    return [[kind] for kind in capacity_types]


def node_pool_names(pool: NodePoolLaunchedPool) -> list[str]:
    """Names of the NodePools a pool becomes (one, or one per capacity type when weighted)."""
    groups = capacity_groups(pool.effective_capacity_types)
    return [pool.name] if len(groups) == 1 else [f"{pool.name}-{group[0]}" for group in groups]


def node_class_ref(pool: NodePoolLaunchedPool) -> dict[str, str]:
    if isinstance(pool, AutoModePool):
        return dict(AUTO_MODE_NODE_CLASS_REF)
    return {"group": KARPENTER_AWS_GROUP, "kind": "EC2NodeClass", "name": pool.name}


def build_node_pools(pool: NodePoolLaunchedPool, plans: Sequence[ServingPlan]) -> list[dict[str, Any]]:
    """The NodePools of a karpenter or auto-mode pool.

    Each limits the pool's GPUs (with several weighted NodePools each has the whole limit: Karpenter limits per
    NodePool, so the sum may reach limit x types while the preferred type is short; the planner's node count is
    unaffected). Disruption fits vLLM: a node is consolidated only when empty (never to repack a serving pod onto
    another node, which would reload the model), only after a startup budget of emptiness, and at most
    ``disruption_budget_nodes`` at once. The limit and the wait are planned (runtime/planning/pools.py
    plan_node_pool).
    """
    planned = plan_node_pool(pool, plans)
    groups = capacity_groups(pool.effective_capacity_types)
    names = node_pool_names(pool)
    requirements = pool_requirements(pool)
    objects = []
    for index, (name, group) in enumerate(zip(names, groups, strict=True)):
        spec: dict[str, Any] = {
            "template": {
                "metadata": {"labels": pool_node_group_labels(pool)},
                "spec": {
                    "nodeClassRef": node_class_ref(pool),
                    "requirements": [*requirements, node_requirement(CAPACITY_TYPE_LABEL, group)],
                    "taints": [dict(GPU_TAINT)],
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": f"{planned.consolidate_after_seconds}s",
                "budgets": [{"nodes": str(pool.disruption_budget_nodes)}],
            },
            "limits": {GPU_RESOURCE: str(planned.gpu_limit)},
        }
        if len(groups) > 1:
            spec["weight"] = FIRST_WEIGHT - WEIGHT_STEP * index
        objects.append({
            "apiVersion": KARPENTER_API,
            "kind": "NodePool",
            "metadata": {"name": name, "labels": lbl.common_labels(pool.name, "gpu-nodes")},
            "spec": spec,
        })
    return objects


def role_name(arn: str) -> str:
    """The EC2NodeClass takes the role's name; an ARN ends in ``role/<path/>name``."""
    return arn.rsplit("/", 1)[-1]


def ami_alias(pool: KarpenterPool) -> str:
    return pool.ami_alias or AMI_ALIASES[pool.ami_type.split("_", 1)[0]]


def block_device_mappings(pool: KarpenterPool) -> list[dict[str, Any]]:
    """The disk images, containerd's unpacked layers and the pods' emptyDirs (compile caches) live on: the pool's
    disk_size_gib, else the project's GPU node disk (runtime/planning/pools.py node_disk_gib); the planner checks
    the pods' emptyDirs fit it."""
    size = node_disk_gib(pool)

    def ebs(gib: int) -> dict[str, Any]:
        return {"volumeSize": f"{gib}Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}

    if pool.ami_type.startswith("BOTTLEROCKET"):
        return [{"deviceName": "/dev/xvda", "ebs": ebs(BOTTLEROCKET_OS_VOLUME_GIB)},
                {"deviceName": "/dev/xvdb", "ebs": ebs(size)}]
    return [{"deviceName": "/dev/xvda", "ebs": ebs(size), "rootVolume": True}]


def build_ec2_node_class(pool: KarpenterPool) -> dict[str, Any]:
    """The EC2NodeClass of a karpenter pool: identity, subnets, security groups, AMI, disk and IMDS settings."""
    spec: dict[str, Any] = {}
    if pool.instance_profile is not None:
        spec["instanceProfile"] = pool.instance_profile
    else:
        assert pool.node_role_arn is not None  # the spec requires one of the two
        spec["role"] = role_name(pool.node_role_arn)
    spec["amiSelectorTerms"] = [{"alias": ami_alias(pool)}]
    spec["subnetSelectorTerms"] = [{"id": subnet} for subnet in pool.subnet_ids]
    spec["securityGroupSelectorTerms"] = (
        [{"id": group} for group in pool.security_group_ids] if pool.security_group_ids
        else [{"tags": dict(sorted(pool.security_group_tags.items()))}]
    )
    if "reserved" in pool.effective_capacity_types:
        spec["capacityReservationSelectorTerms"] = [{"id": pool.capacity_reservation_id}]
    spec["blockDeviceMappings"] = block_device_mappings(pool)
    # IMDSv2 only, hop limit 2 as on the managed node groups (components/builders/nodes.py launch_template_args).
    spec["metadataOptions"] = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpTokens": "required",
                               "httpPutResponseHopLimit": 2}
    # Karpenter tags the instances with the cluster, NodePool and NodeClaim itself; ours names the pool in billing.
    spec["tags"] = {NODE_POOL_LABEL: pool.name}
    return {
        "apiVersion": EC2_NODE_CLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": pool.name, "labels": lbl.common_labels(pool.name, "gpu-nodes")},
        "spec": spec,
    }


@dataclass(frozen=True)
class KarpenterObjects:
    node_classes: list[dict[str, Any]]
    node_pools: list[dict[str, Any]]

    @property
    def all(self) -> list[dict[str, Any]]:
        return [*self.node_classes, *self.node_pools]


def build_karpenter_objects(cluster: EksCluster, plans: Sequence[ServingPlan]) -> KarpenterObjects:
    """Every EC2NodeClass and NodePool of the cluster's karpenter and auto-mode pools, node classes first."""
    pools = [pool for pool in cluster.node_pools if isinstance(pool, NODEPOOL_CLASSES)]
    return KarpenterObjects(
        node_classes=[build_ec2_node_class(pool) for pool in pools if isinstance(pool, KarpenterPool)],
        node_pools=[obj for pool in pools for obj in build_node_pools(pool, plans)],
    )
