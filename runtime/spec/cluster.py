"""The cluster a stack deploys to (render, kubeconfig or eks) and the GPU nodes it states."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from vllm_pulumi.runtime.spec.common import DNS_LABEL, StrictModel
from vllm_pulumi.runtime.spec.node_pools import GpuNodePoolSpec


class GpuNodesSpec(StrictModel):
    """A group of identical GPU nodes a render or kubeconfig cluster has: the shape the planner places pods on.

    Give an EC2 instance_type (its GPU, vCPUs and memory come from the instance facts), or the GPU and the node's
    size (gpu, gpus_per_node, vcpus, memory_gib).
    """

    name: str = Field(pattern=DNS_LABEL, description="Name of this group of nodes (the pool plans and warnings name).")
    instance_type: str | None = Field(
        None, description="EC2 instance type of the nodes, e.g. g6e.xlarge: sets the GPU, its count, vCPUs, memory."
    )
    gpu: str | None = Field(None, description="Without instance_type: catalog id or nvidia.com/gpu.product.")
    gpus_per_node: int | None = Field(None, ge=1, le=16, description="Without instance_type: GPUs of one node.")
    vcpus: int | None = Field(None, ge=1, description="Without instance_type: logical CPUs of one node.")
    memory_gib: int | None = Field(None, ge=1, description="Without instance_type: memory of one node.")
    ephemeral_storage_gib: int | None = Field(
        None, ge=10, description="Disk for images, logs and emptyDirs. None: 200 GiB, the root disk of EKS GPU nodes."
    )
    max_pods: int | None = Field(
        None, ge=1, description="Pods the kubelet admits. None: the EKS AMI's limit for instance_type, else 110."
    )
    count: int = Field(ge=1, description="How many such nodes there are: the most the planner places pods on.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels the nodes carry.")
    efa: bool = Field(False, description="The nodes have EFA interfaces (as many as instance_type has) and run the "
                                         "EFA device plugin: pods spanning nodes request vpc.amazonaws.com/efa.")

    @model_validator(mode="after")
    def _instance_or_size(self) -> GpuNodesSpec:
        sized = {"gpu": self.gpu, "gpus_per_node": self.gpus_per_node, "vcpus": self.vcpus,
                 "memory_gib": self.memory_gib}
        if self.instance_type is not None:
            given = [key for key, value in sized.items() if value is not None]
            if given:
                raise ValueError(f"instance_type sets the node's size; remove {', '.join(given)}")
            return self
        missing = [key for key, value in sized.items() if value is None]
        if missing:
            raise ValueError(f"give instance_type, or all of gpu, gpus_per_node, vcpus and memory_gib "
                             f"(missing: {', '.join(missing)})")
        return self


def _unique_node_names(nodes: list[GpuNodesSpec]) -> list[GpuNodesSpec]:
    names = [node.name for node in nodes]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"node names must be unique; used twice: {', '.join(repeated)}")
    return nodes


_NODES_DESCRIPTION = ("The cluster's GPU nodes, so pods are planned on their real shape; empty: assumed from the GPU "
                      "facts, and the plan says what it assumed.")


class RenderCluster(StrictModel):
    """No cluster: write manifests to a directory (pulumi-kubernetes renderYamlToDirectory)."""

    mode: Literal["render"]
    directory: str = Field("rendered", description="Output directory, relative to the project.")
    nodes: list[GpuNodesSpec] = Field(default_factory=list, description=_NODES_DESCRIPTION)

    _unique = field_validator("nodes")(_unique_node_names)


class KubeconfigCluster(StrictModel):
    """An existing cluster reached through a kubeconfig."""

    mode: Literal["kubeconfig"]
    kubeconfig: str | None = Field(None, description="Path; None uses KUBECONFIG / ~/.kube/config.")
    context: str | None = Field(None, description="Context name; None uses the current one.")
    nodes: list[GpuNodesSpec] = Field(default_factory=list, description=_NODES_DESCRIPTION)

    _unique = field_validator("nodes")(_unique_node_names)


class EksCluster(StrictModel):
    """An existing EKS cluster; this stack adds GPU node groups to it."""

    mode: Literal["eks"]
    cluster_name: str = Field(description="Existing EKS cluster name.")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="AWS region of the cluster.")
    node_pools: list[GpuNodePoolSpec] = Field(default_factory=list, description="GPU node groups to create.")


ClusterSpec = Annotated[RenderCluster | KubeconfigCluster | EksCluster, Field(discriminator="mode")]
