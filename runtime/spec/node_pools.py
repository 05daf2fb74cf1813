"""EKS GPU node pools, one class per provisioner: a managed node group, a Karpenter NodePool or an EKS Auto Mode
NodePool. ``GpuNodePoolSpec`` is their union, told apart by ``provisioner`` (absent: managed-node-group).

A stack file may still write another provisioner's setting on a pool. The pool's class validates it by that
setting's own type, then, when every setting is well formed, refuses it by name with the reason in its rules
(``_provisioner_checks``; an empty one passes): the messages, and their order, of the single class that held every
provisioner's settings before the union.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails
from pydantic_core.core_schema import ErrorType

from vllm_pulumi.runtime.spec.common import DNS_LABEL, StrictModel
from vllm_pulumi.runtime.vocabulary import HOSTNAME_LABEL, KARPENTER_GROUP

Provisioner = Literal["managed-node-group", "karpenter", "auto-mode"]
"""Who launches a pool's GPU nodes: an EKS managed node group, Karpenter, or EKS Auto Mode."""
PROVISIONERS: tuple[str, ...] = get_args(Provisioner)
DEFAULT_PROVISIONER: Final = "managed-node-group"
"""A pool without ``provisioner`` is a managed node group (pools were only that before issue 10)."""


class NodePoolBase(StrictModel):
    """The settings of every GPU node pool, whoever launches its nodes."""

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
    subnet_ids: list[str] = Field(min_length=1, description="Subnets (one AZ for EFA / placement groups).")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    # ---- node provisioning (issue 10): who launches the nodes of this pool ----
    provisioner: Provisioner = Field(
        DEFAULT_PROVISIONER, description="managed-node-group: an EKS managed node group of instance_type (fixed "
        "size, min/desired/max). karpenter: a karpenter.sh/v1 NodePool and a karpenter.k8s.aws/v1 EC2NodeClass "
        "(nodes from zero when a pod is Pending, several types and capacity types). auto-mode: a NodePool on EKS Auto "
        "Mode's built-in NodeClass `default` (AWS runs Karpenter, the driver and the device plugin).")

    @model_validator(mode="wrap")
    @classmethod
    def _settings_then_rules(cls, data: Any, handler: ModelWrapValidatorHandler[NodePoolBase]) -> NodePoolBase:
        """Validate the pool's own settings and, by their own types, any other provisioner's it names; when all
        are well formed, run the provisioner's rules on them, then the size rules (the order users always got)."""
        if not isinstance(data, dict):
            return handler(data)
        other = {key: value for key, value in data.items() if key in node_pool_settings() and
                 key not in cls.model_fields}
        if data.get("provisioner", DEFAULT_PROVISIONER) not in PROVISIONERS:
            other["provisioner"] = data["provisioner"]  # a bad name: reported at provisioner, as any bad value
        errors: list[InitErrorDetails] = []
        valid_other: dict[str, Any] = {}
        for key, value in other.items():
            try:
                valid_other[key] = _setting_adapter(key).validate_python(value)
            except ValidationError as error:
                errors += [_details(item, (key,)) for item in error.errors()]
        pool: NodePoolBase | None = None
        try:
            pool = handler({key: value for key, value in data.items() if key not in other})
        except ValidationError as error:
            errors += [_details(item) for item in error.errors()]
        if errors or pool is None:
            raise ValidationError.from_exception_data(cls.__name__, sorted(errors, key=_setting_rank))
        pool._provisioner_checks(valid_other)
        pool._size_checks()
        return pool

    def _provisioner_checks(self, other: Mapping[str, Any]) -> None:
        """Raise ValueError for the first rule of this provisioner the pool breaks; ``other``: the settings of other
        provisioners the stack gave it, validated."""
        raise NotImplementedError

    def _size_checks(self) -> None:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"need min_size <= desired_size <= max_size, got {self.min_size} <= {self.desired_size} <= "
                f"{self.max_size}"
            )
        if self.capacity_type == "CAPACITY_BLOCK" and not self.capacity_reservation_id:
            raise ValueError("capacity_type CAPACITY_BLOCK needs capacity_reservation_id")


RootDiskGib = Annotated[int | None, Field(ge=50, description="Root volume. None: sized for the vLLM image.")]
NodeRoleArn = Annotated[str | None, Field(description="Existing node IAM role; None creates one.")]


class ManagedNodeGroupPool(NodePoolBase):
    """An EKS managed node group of GPU nodes on an existing cluster."""

    provisioner: Literal["managed-node-group"] = DEFAULT_PROVISIONER
    disk_size_gib: RootDiskGib = None
    node_role_arn: NodeRoleArn = None
    efa: bool | None = Field(None, description="EFA interfaces for multi-node NCCL. None: on for multi-node pools.")
    placement_group: bool | None = Field(None, description="Cluster placement group. None: with EFA.")

    def _provisioner_checks(self, other: Mapping[str, Any]) -> None:
        if self.instance_type is None:
            raise ValueError("a managed-node-group needs instance_type (e.g. p5.48xlarge)")
        # disruption_budget_nodes is not refused here: its default is a value, and a node group ignores it.
        karpenter_only = [key for key in ("instance_types", "gpu", "gpus_per_node", "capacity_types", "max_gpus",
                                          "consolidate_after_seconds", "instance_profile", "security_group_ids",
                                          "security_group_tags", "ami_alias") if other.get(key)]
        if karpenter_only:
            raise ValueError(f"{', '.join(karpenter_only)} apply to provisioner karpenter or auto-mode only; "
                             "set provisioner: karpenter, or remove them")


class NodePoolLaunchedPool(NodePoolBase):
    """A pool whose nodes a NodePool launches for Pending pods: Karpenter's own, or EKS Auto Mode's."""

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

    @property
    def effective_capacity_types(self) -> list[str]:
        """capacity_types, or the one capacity_type names (Karpenter's spelling)."""
        if self.capacity_types:
            return list(self.capacity_types)
        return [{"ON_DEMAND": "on-demand", "SPOT": "spot", "CAPACITY_BLOCK": "reserved"}[self.capacity_type]]

    def _node_pool_checks(self) -> None:
        """The rules of every NodePool, before those of its kind."""
        named = [key for key, value in (("instance_type", self.instance_type), ("instance_types", self.instance_types),
                                        ("gpu", self.gpu)) if value]
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


class KarpenterPool(NodePoolLaunchedPool):
    """A Karpenter NodePool and the EC2NodeClass its nodes launch from, on a cluster that runs Karpenter."""

    provisioner: Literal["karpenter"] = "karpenter"
    disk_size_gib: RootDiskGib = None
    node_role_arn: NodeRoleArn = None
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

    def _provisioner_checks(self, other: Mapping[str, Any]) -> None:
        self._node_pool_checks()
        if other.get("efa") or other.get("placement_group"):
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


class AutoModePool(NodePoolLaunchedPool):
    """A NodePool on EKS Auto Mode's built-in NodeClass ``default``: AWS keeps the nodes' AMI, disk, network and
    identity."""

    provisioner: Literal["auto-mode"] = "auto-mode"

    def _provisioner_checks(self, other: Mapping[str, Any]) -> None:
        self._node_pool_checks()
        aws_only = [key for key in ("instance_profile", "security_group_ids", "security_group_tags", "ami_alias",
                                    "node_role_arn", "efa", "placement_group", "disk_size_gib") if other.get(key)]
        if aws_only:
            raise ValueError(f"{', '.join(aws_only)} belong to an EC2NodeClass, which auto-mode does not use "
                             "(its built-in NodeClass `default` sets them); remove them, or use provisioner "
                             "karpenter")
        if "reserved" in self.capacity_types or self.capacity_type == "CAPACITY_BLOCK":
            raise ValueError("reserved capacity needs a NodeClass with capacityReservationSelectorTerms; Auto "
                             "Mode's built-in `default` has none: use provisioner karpenter")


def _provisioner_of(pool: Any) -> str | None:
    """The union's tag: the pool's provisioner, the default when absent; an unknown name goes to the default class,
    which reports it at ``provisioner``. None (not a mapping) gives the union's own error."""
    if isinstance(pool, NodePoolBase):
        return pool.provisioner
    if not isinstance(pool, dict):
        return None
    named = pool.get("provisioner", DEFAULT_PROVISIONER)
    return str(named) if named in PROVISIONERS else DEFAULT_PROVISIONER


GpuNodePoolSpec = Annotated[
    Annotated[ManagedNodeGroupPool, Tag("managed-node-group")]
    | Annotated[KarpenterPool, Tag("karpenter")]
    | Annotated[AutoModePool, Tag("auto-mode")],
    Discriminator(_provisioner_of, custom_error_type="node_pool_type",
                  custom_error_message="Input should be a valid dictionary or instance of GpuNodePoolSpec",
                  custom_error_context={"class_name": "GpuNodePoolSpec"}),
]
"""A GPU node pool of an EKS cluster, the class of its provisioner."""
POOL_CLASSES: dict[str, type[NodePoolBase]] = {
    pool_class.model_fields["provisioner"].default: pool_class
    for pool_class in (ManagedNodeGroupPool, KarpenterPool, AutoModePool)
}
"""The class of each provisioner (the union's tags)."""
NODEPOOL_CLASSES = (KarpenterPool, AutoModePool)
"""The pools a NodePool launches (isinstance narrows to either)."""

# The order docs/spec.md and the unknown-setting hint list a pool's settings in: a managed node group's as a stack
# file reads them, then what a NodePool adds.
_SETTINGS_ORDER = (
    "name", "instance_type", "min_size", "desired_size", "max_size", "capacity_type", "capacity_reservation_id",
    "ami_type", "disk_size_gib", "subnet_ids", "node_role_arn", "efa", "placement_group", "labels", "provisioner",
    "instance_types", "gpu", "gpus_per_node", "capacity_types", "max_gpus", "consolidate_after_seconds",
    "disruption_budget_nodes", "instance_profile", "security_group_ids", "security_group_tags", "ami_alias",
)


@cache
def node_pool_settings() -> dict[str, FieldInfo]:
    """Every setting a pool may have, whatever its provisioner, each as the most general class declaring it states it
    (a common one as NodePoolBase does: ``provisioner`` with all its values)."""
    fields: dict[str, FieldInfo] = dict(NodePoolBase.model_fields)
    for pool_class in POOL_CLASSES.values():
        fields.update({name: field for name, field in pool_class.model_fields.items() if name not in fields})
    unplaced = sorted(set(fields) ^ set(_SETTINGS_ORDER))
    if unplaced:
        raise AssertionError(f"_SETTINGS_ORDER must list each pool setting once: {', '.join(unplaced)}")
    return {name: fields[name] for name in _SETTINGS_ORDER}


@cache
def _setting_adapter(name: str) -> TypeAdapter[Any]:
    """Validates a value of this setting as the class declaring it would (type and constraints)."""
    field = node_pool_settings()[name]
    annotation: Any = field.annotation
    return TypeAdapter(Annotated[annotation, *field.metadata] if field.metadata else annotation)


def _details(item: Any, prefix: tuple[str, ...] = ()) -> InitErrorDetails:
    error_type: ErrorType = item["type"]
    details: InitErrorDetails = {"type": error_type, "loc": (*prefix, *item["loc"]), "input": item["input"]}
    if "ctx" in item:
        details["ctx"] = item["ctx"]
    return details


def _setting_rank(item: InitErrorDetails) -> int:
    """Errors in the order of the settings (unknown keys last, as pydantic reports them)."""
    loc = item.get("loc", ())
    if item["type"] != "extra_forbidden" and loc and loc[0] in _SETTINGS_ORDER:
        return _SETTINGS_ORDER.index(str(loc[0]))
    return len(_SETTINGS_ORDER)
