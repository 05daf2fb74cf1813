"""pulumi-aws resources as the rules can read them: the policy pack turns an EKS managed node group
(``aws:eks/nodeGroup:NodeGroup``) into a stand-in manifest whose labels are the labels its nodes carry, so the
placement rules compare GPU pods against it as they do against a Karpenter NodePool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_pulumi.policies.node_pools import MANAGED_NODE_GROUP_KIND
from vllm_pulumi.policies.values import mapping, strings
from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import find_gpu
from vllm_pulumi.runtime.facts.instances import find_instance
from vllm_pulumi.runtime.planning.nodes import NODE_POOL_LABEL, node_labels
from vllm_pulumi.runtime.vocabulary import INSTANCE_TYPE_LABEL

NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"
"""pulumi-aws's type token of an EKS managed node group."""


def managed_node_group_manifest(resource_type: str, props: Mapping[str, Any], name: str = "") -> dict[str, Any] | None:
    """The stand-in object for an EKS managed node group resource (pulumi-aws ``aws:eks/nodeGroup:NodeGroup``): the
    labels its nodes carry, from the group's labels and, for an instance type of the GPU facts, the labels the
    kubelet and GPU Feature Discovery set (runtime.planning.nodes.node_labels). None for any other resource."""
    if resource_type != NODE_GROUP_TYPE:
        return None
    labels = {str(k): str(v) for k, v in mapping(props.get("labels")).items()}
    types = strings(props.get("instanceTypes") or props.get("instance_types"))
    if len(types) == 1:
        try:
            instance = find_instance(types[0])
        except PlanningError:
            labels[INSTANCE_TYPE_LABEL] = types[0]
        else:
            ami = str(props.get("amiType") or props.get("ami_type") or "")
            labels = node_labels(labels.get(NODE_POOL_LABEL, name), find_gpu(instance.gpu_id), instance.gpus,
                                 instance.instance_type, "arm64" if "_ARM_" in ami else "amd64", labels)
    group = str(props.get("nodeGroupName") or props.get("node_group_name") or name)
    return {"apiVersion": "vllm-pulumi.dev/v1", "kind": MANAGED_NODE_GROUP_KIND, "metadata": {"name": group},
            "spec": {"labels": labels}}
