"""A pure description of an EKS managed GPU node group: the arguments the GpuNodePool shell hands to pulumi-aws.

Everything is derived from the pool spec and the GPU facts: the instance type carries the GPU, the AMI ships the
driver, the taint keeps non-GPU pods off, and multi-node pools get EFA interfaces and a cluster placement group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.facts.gpus import gpu_for_instance_type
from vllm_pulumi.runtime.facts.instances import efa_interfaces_for
from vllm_pulumi.runtime.planning.nodes import pool_node_group_labels
from vllm_pulumi.runtime.planning.pools import node_disk_gib, pool_instances
from vllm_pulumi.runtime.spec.node_pools import ManagedNodeGroupPool
from vllm_pulumi.runtime.vocabulary import GPU_TAINT

# Policies every EKS worker node needs (join the cluster, pull images from ECR, run the VPC CNI).
NODE_ROLE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
)
# The EKS node group API spells taint effects in its own enum; the taint itself is a runtime node fact.
EKS_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def eks_taint(taint: dict[str, str]) -> dict[str, str]:
    """A Kubernetes taint in the form the EKS node group API takes."""
    return {**taint, "effect": EKS_TAINT_EFFECTS[taint["effect"]]}


@dataclass(frozen=True)
class NodeGroupDescription:
    name: str
    cluster_name: str
    instance_type: str
    gpu_id: str
    gpus_per_node: int
    ami_type: str
    capacity_type: str
    capacity_reservation_id: str | None
    min_size: int
    desired_size: int
    max_size: int
    subnet_ids: list[str]
    node_role_arn: str | None
    disk_size_gib: int
    root_device_name: str
    efa: bool
    efa_interfaces: int
    placement_group: bool
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)

    @property
    def node_group_name(self) -> str:
        return f"{self.cluster_name}-{self.name}"


def pool_is_multi_node(pool: ManagedNodeGroupPool, plans: list[ServingPlan]) -> bool:
    """True when a model on this pool's GPU spans nodes (LWS), so NCCL crosses the network."""
    gpus = {instance.gpu_id for instance in pool_instances(pool)}
    return any(plan.multi_node and plan.gpu.id in gpus for plan in plans)


def build_node_group(pool: ManagedNodeGroupPool, cluster_name: str, plans: list[ServingPlan]) -> NodeGroupDescription:
    instance_type = pool.instance_type
    assert instance_type is not None  # the spec requires it for a managed node group
    gpu, count = gpu_for_instance_type(instance_type)
    multi_node = pool_is_multi_node(pool, plans)
    efa = pool.efa if pool.efa is not None else multi_node
    placement = pool.placement_group if pool.placement_group is not None else efa
    labels = pool_node_group_labels(pool)
    # Bottlerocket keeps images on its second (data) volume; AL2023 on the root volume.
    device = "/dev/xvdb" if pool.ami_type.startswith("BOTTLEROCKET") else "/dev/xvda"
    return NodeGroupDescription(
        name=pool.name, cluster_name=cluster_name, instance_type=instance_type, gpu_id=gpu.id,
        gpus_per_node=count, ami_type=pool.ami_type, capacity_type=pool.capacity_type,
        capacity_reservation_id=pool.capacity_reservation_id, min_size=pool.min_size,
        desired_size=pool.desired_size, max_size=pool.max_size, subnet_ids=list(pool.subnet_ids),
        node_role_arn=pool.node_role_arn, disk_size_gib=node_disk_gib(pool),
        root_device_name=device, efa=efa, efa_interfaces=efa_interfaces_for(instance_type) if efa else 0,
        placement_group=placement, labels=labels, taints=[eks_taint(GPU_TAINT)],
    )


def node_group_args(desc: NodeGroupDescription) -> dict[str, Any]:
    """Keyword arguments of ``aws.eks.NodeGroup`` (role ARN and launch template are added by the shell)."""
    return {
        "cluster_name": desc.cluster_name,
        "node_group_name": desc.node_group_name,
        "subnet_ids": list(desc.subnet_ids),
        "instance_types": [desc.instance_type],
        "ami_type": desc.ami_type,
        # Capacity Blocks for ML are launched as CAPACITY_BLOCK; the reservation goes in the launch template.
        "capacity_type": desc.capacity_type,
        "scaling_config": {"min_size": desc.min_size, "desired_size": desc.desired_size, "max_size": desc.max_size},
        "labels": dict(desc.labels),
        "taints": [dict(taint) for taint in desc.taints],
        # Replace one node at a time on AMI or template updates: GPU capacity drops by one node, never more.
        "update_config": {"max_unavailable": 1},
    }


def launch_template_args(desc: NodeGroupDescription, security_group_ids: list[Any] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``aws.ec2.LaunchTemplate``: disk for the vLLM image, IMDSv2, EFA and placement.

    Interfaces declared in a launch template replace the ones EKS would add, so they carry the cluster security
    group (``security_group_ids``, an Output the shell passes through untouched)."""
    args: dict[str, Any] = {
        "block_device_mappings": [{
            "device_name": desc.root_device_name,
            "ebs": {"volume_size": desc.disk_size_gib, "volume_type": "gp3", "delete_on_termination": "true",
                    "encrypted": "true"},
        }],
        # IMDSv2 only. Hop limit 2 is the EKS default and lets pods reach IMDS (some CSI node plugins need it, and so
        # does S3 streaming on the node role); with IRSA / Pod Identity in place, 1 keeps pods off the node role.
        "metadata_options": {"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 2},
    }
    if desc.efa:
        args["network_interfaces"] = [
            {
                "device_index": 0 if card == 0 else 1,
                "network_card_index": card,
                "interface_type": "efa",
                "delete_on_termination": "true",
                **({"security_groups": list(security_group_ids)} if security_group_ids else {}),
            }
            for card in range(desc.efa_interfaces)
        ]
    if desc.capacity_reservation_id:
        args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": desc.capacity_reservation_id},
        }
    if desc.capacity_type == "CAPACITY_BLOCK":
        args["instance_market_options"] = {"market_type": "capacity-block"}
    return args


def placement_group_args(desc: NodeGroupDescription) -> dict[str, Any] | None:
    if not desc.placement_group:
        return None
    # Cluster strategy: all nodes of the pool on one spine, the lowest latency NCCL can get across nodes.
    return {"strategy": "cluster"}


def node_role_assume_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }, sort_keys=True)
