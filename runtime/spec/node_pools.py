"""EKS GPU node pools: a managed node group, a Karpenter NodePool or an EKS Auto Mode NodePool."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vllm_pulumi.runtime.spec.common import DNS_LABEL, StrictModel
from vllm_pulumi.runtime.vocabulary import HOSTNAME_LABEL, KARPENTER_GROUP

Provisioner = Literal["managed-node-group", "karpenter", "auto-mode"]
"""Who launches a pool's GPU nodes: an EKS managed node group, Karpenter, or EKS Auto Mode."""

class GpuNodePoolSpec(StrictModel):
    """An EKS managed node group of GPU nodes on an existing cluster."""

    name: str = Field(pattern=DNS_LABEL, description="Node group name suffix; for karpenter and auto-mode the name "
                      "of the NodePool and EC2NodeClass, which are cluster-wide: unique among the cluster's NodePools.")
    instance_type: str | None = Field(
        None, description="EC2 GPU instance type, e.g. p5.48xlarge; sets the GPU and its count. Required for a "
        "managed-node-group; for karpenter and auto-mode one way (with instance_types and gpu) to name the types.")
    min_size: int = Field(0, ge=0, description="Smallest node count (0 lets idle GPU nodes go away).")
    desired_size: int = Field(1, ge=0, description="Initial node count.")
    max_size: int = Field(2, ge=1, description="Largest node count.")
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = Field(
        "ON_DEMAND", description="CAPACITY_BLOCK uses a purchased Capacity Block for ML (needs a reservation id)."
    )
    capacity_reservation_id: str | None = Field(None, description="Capacity Block / ODCR id when reserved.")
    ami_type: Literal[
        "AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA"
    ] = Field("AL2023_x86_64_NVIDIA", description="EKS NVIDIA AMI: ships the driver, so the GPU Operator's is off.")
    disk_size_gib: int | None = Field(None, ge=50, description="Root volume. None: sized for the vLLM image.")
    subnet_ids: list[str] = Field(min_length=1, description="Subnets (one AZ for EFA / placement groups).")
    node_role_arn: str | None = Field(None, description="Existing node IAM role; None creates one.")
    efa: bool | None = Field(None, description="EFA interfaces for multi-node NCCL. None: on for multi-node pools.")
    placement_group: bool | None = Field(None, description="Cluster placement group. None: with EFA.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    # ---- node provisioning (issue 10): who launches the nodes of this pool ----
    provisioner: Provisioner = Field(
        "managed-node-group", description="managed-node-group: an EKS managed node group of instance_type (fixed "
        "size, min/desired/max). karpenter: a karpenter.sh/v1 NodePool and a karpenter.k8s.aws/v1 EC2NodeClass "
        "(nodes from zero when a pod is Pending, several types and capacity types). auto-mode: a NodePool on EKS Auto "
        "Mode's built-in NodeClass `default` (AWS runs Karpenter, the driver and the device plugin).")
    instance_types: list[str] = Field(
        default_factory=list, description="karpenter/auto-mode: the EC2 types the NodePool may launch, all with the "
        "same GPU count (e.g. [p5.48xlarge, p5e.48xlarge]); empty: instance_type, else every type carrying gpu.")
    gpu: str | None = Field(
        None, description="karpenter/auto-mode without instance types: every EC2 type carrying this GPU (catalog id).")
    gpus_per_node: int | None = Field(
        None, ge=1, le=16,
        description="karpenter/auto-mode with gpu: only types with this many GPUs; None: the largest count.")
    capacity_types: list[Literal["reserved", "spot", "on-demand"]] = Field(
        default_factory=list, description="karpenter/auto-mode: capacity types in order of preference, each a "
        "fallback for the one before (e.g. [spot, on-demand]); empty: capacity_type's one.")
    max_gpus: int | None = Field(
        None, ge=1, description="karpenter/auto-mode: NodePool limit on nvidia.com/gpu; None: max_size nodes' GPUs.")
    consolidate_after_seconds: int | None = Field(
        None, ge=0, description="karpenter/auto-mode: how long a node stays empty before it goes; None: the longest "
        "startup budget of the models on the pool (a replacement pod would take that long to load again).")
    disruption_budget_nodes: int = Field(
        1, ge=0, description="karpenter/auto-mode: GPU nodes Karpenter may disrupt at once (0: none voluntarily).")
    instance_profile: str | None = Field(
        None, description="karpenter: existing IAM instance profile of the nodes (instead of node_role_arn's role).")
    security_group_ids: list[str] = Field(
        default_factory=list, description="karpenter: node security groups (e.g. the cluster security group).")
    security_group_tags: dict[str, str] = Field(
        default_factory=dict, description="karpenter: select node security groups by tags instead, e.g. "
        "{karpenter.sh/discovery: <cluster>}.")
    ami_alias: str | None = Field(
        None, pattern=r"^(al2023|bottlerocket)@.+$", description="karpenter: EC2NodeClass amiSelectorTerms alias; "
        "None: al2023@latest or bottlerocket@latest from ami_type (pin a version, e.g. al2023@v20250505, in prod).")

    @model_validator(mode="after")
    def _provisioner_settings(self) -> GpuNodePoolSpec:
        if self.provisioner == "managed-node-group":
            if self.instance_type is None:
                raise ValueError("a managed-node-group needs instance_type (e.g. p5.48xlarge)")
            karpenter_only = [key for key in ("instance_types", "gpu", "gpus_per_node", "capacity_types", "max_gpus",
                                              "consolidate_after_seconds", "instance_profile", "security_group_ids",
                                              "security_group_tags", "ami_alias") if getattr(self, key)]
            if karpenter_only:
                raise ValueError(f"{', '.join(karpenter_only)} apply to provisioner karpenter or auto-mode only; "
                                 "set provisioner: karpenter, or remove them")
            return self
        named = [key for key in ("instance_type", "instance_types", "gpu") if getattr(self, key)]
        if len(named) != 1:
            raise ValueError(f"provisioner {self.provisioner} needs exactly one of instance_type, instance_types or "
                             f"gpu to name the EC2 types (given: {', '.join(named) or 'none'})")
        if self.gpus_per_node is not None and self.gpu is None:
            raise ValueError("gpus_per_node goes with gpu (instance types already fix the GPU count)")
        if self.min_size != 0:
            raise ValueError(f"min_size {self.min_size}: Karpenter keeps no minimum of nodes, it launches them for "
                             "Pending pods; use min_size 0 (models' replicas keep nodes up)")
        restricted = sorted(key for key in self.labels
                            if key.split("/", 1)[0].endswith(KARPENTER_GROUP) or key == HOSTNAME_LABEL)
        if restricted:
            raise ValueError(f"labels {', '.join(restricted)} are set by Karpenter itself and refused in a NodePool "
                             "template; use a label of your own domain")
        if len(set(self.capacity_types)) != len(self.capacity_types):
            raise ValueError(f"capacity_types {self.capacity_types} repeats a type; list each once")
        if self.provisioner == "auto-mode":
            aws_only = [key for key in ("instance_profile", "security_group_ids", "security_group_tags", "ami_alias",
                                        "node_role_arn", "efa", "placement_group", "disk_size_gib")
                        if getattr(self, key)]
            if aws_only:
                raise ValueError(f"{', '.join(aws_only)} belong to an EC2NodeClass, which auto-mode does not use "
                                 "(its built-in NodeClass `default` sets them); remove them, or use provisioner "
                                 "karpenter")
            if "reserved" in self.capacity_types or self.capacity_type == "CAPACITY_BLOCK":
                raise ValueError("reserved capacity needs a NodeClass with capacityReservationSelectorTerms; Auto "
                                 "Mode's built-in `default` has none: use provisioner karpenter")
            return self
        if self.efa or self.placement_group:
            raise ValueError("efa and placement_group are built for managed node groups only; a karpenter pool "
                             "would need an EC2NodeClass placementGroupSelector and EFA interfaces: use provisioner "
                             "managed-node-group for multi-node pools, or remove them")
        if (self.node_role_arn is None) == (self.instance_profile is None):
            raise ValueError("provisioner karpenter needs exactly one of node_role_arn (the EC2NodeClass role) or "
                             "instance_profile, naming the existing node identity Karpenter launches nodes with")
        if not self.security_group_ids and not self.security_group_tags:
            raise ValueError("provisioner karpenter needs security_group_ids or security_group_tags (e.g. "
                             "{karpenter.sh/discovery: <cluster name>}) for the EC2NodeClass")
        if ("reserved" in self.effective_capacity_types) != bool(self.capacity_reservation_id):
            raise ValueError("capacity type reserved and capacity_reservation_id go together (the EC2NodeClass "
                             "selects the reservation by id): add the one that is missing")
        return self

    @property
    def effective_capacity_types(self) -> list[str]:
        """capacity_types, or the one capacity_type names (Karpenter's spelling)."""
        if self.capacity_types:
            return list(self.capacity_types)
        return [{"ON_DEMAND": "on-demand", "SPOT": "spot", "CAPACITY_BLOCK": "reserved"}[self.capacity_type]]

    @model_validator(mode="after")
    def _sizes(self) -> GpuNodePoolSpec:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"need min_size <= desired_size <= max_size, got {self.min_size} <= {self.desired_size} <= "
                f"{self.max_size}"
            )
        if self.capacity_type == "CAPACITY_BLOCK" and not self.capacity_reservation_id:
            raise ValueError("capacity_type CAPACITY_BLOCK needs capacity_reservation_id")
        return self
