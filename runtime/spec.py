"""The typed deployment spec: one pydantic model tree for everything a stack deploys.

``parse_deployment(raw)`` is the only way in: it validates the shape (pydantic, ``extra="forbid"``), then the settings
against each other and against the model and GPU facts, and raises ``SpecError`` listing every problem with the
field path as written in the stack file, the value, the reason and a valid alternative.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .engine import EngineSettings
from .errors import PlanningError, closest
from .startup import StorageKind

DNS_LABEL = r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$"
K8S_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- secrets -------------------------------------------------------------------------------------------------------
class ExistingSecret(StrictModel):
    """A Kubernetes Secret that already exists in the namespace; its value never passes through Pulumi."""

    name: str = Field(pattern=K8S_NAME, description="Secret name in the deployment namespace.")
    key: str = Field(description="Key inside the Secret's data.")


class SecretRef(StrictModel):
    """Where a secret value comes from: exactly one of a Pulumi secret config key or an existing Secret."""

    pulumi_secret: str | None = Field(
        None, description="Stack config key set with `pulumi config set --secret KEY`; stays encrypted in state."
    )
    existing_secret: ExistingSecret | None = Field(None, description="Reference to a Secret created elsewhere.")

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.pulumi_secret is None) == (self.existing_secret is None):
            raise ValueError("give exactly one of pulumi_secret or existing_secret")
        return self


# ---- cluster -------------------------------------------------------------------------------------------------------
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
                            if key.split("/", 1)[0].endswith("karpenter.sh") or key == "kubernetes.io/hostname")
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


# ---- add-ons -------------------------------------------------------------------------------------------------------
class AddonSpec(StrictModel):
    """A cluster add-on installed from its upstream Helm chart at a pinned version, or marked as already there."""

    install: bool = Field(True, description="False when the add-on is already installed in the cluster.")
    version: str | None = Field(None, description="Chart version; None uses the pinned default.")
    namespace: str | None = Field(None, pattern=K8S_NAME, description="Namespace; None uses the usual one.")
    values: dict[str, Any] = Field(default_factory=dict, description="Extra Helm values merged over ours.")


class GpuOperatorSpec(AddonSpec):
    """The NVIDIA GPU Operator add-on: device plugin, GPU Feature Discovery, DCGM exporter, driver when needed."""

    driver_enabled: bool | None = Field(
        None, description="Install the driver; None: off on EKS NVIDIA AMIs that ship it, on elsewhere."
    )


class AddonsSpec(StrictModel):
    """Cluster add-ons, each installed from its pinned upstream chart or marked as already installed."""

    gpu_operator: GpuOperatorSpec = Field(default_factory=GpuOperatorSpec, description="NVIDIA GPU Operator.")
    keda: AddonSpec = Field(default_factory=AddonSpec, description="KEDA, for queue-based autoscaling.")
    lws: AddonSpec = Field(default_factory=AddonSpec, description="LeaderWorkerSet controller, for multi-node.")


# ---- per-model settings --------------------------------------------------------------------------------------------
class StorageSpec(StrictModel):
    """Where the weights come from: a shared read-only volume hydrated once, or S3 streamed by vLLM."""

    kind: StorageKind = Field("local-nvme", description="Storage class family; sets the read speed estimate.")
    storage_class: str | None = Field(None, description="StorageClass of the model PVC (efs-sc, fsx-sc, ...).")
    access_mode: Literal["ReadOnlyMany", "ReadWriteMany"] = Field(
        "ReadWriteMany", description="Hydration writes once, servers mount read-only; RWX lets both bind."
    )
    size_gib: int | None = Field(None, ge=1, description="PVC size; None: the checkpoint plus headroom.")
    existing_claim: str | None = Field(None, pattern=K8S_NAME, description="Use this PVC instead of creating one.")
    hydrate: bool = Field(True, description="Run a one-shot Job that downloads the model into the PVC.")
    hf_token: SecretRef | None = Field(None, description="Hugging Face token for gated models.")
    s3_uri: str | None = Field(None, pattern=r"^s3://.+", description="With kind s3-runai-streamer: model prefix.")
    read_gb_per_second: float | None = Field(None, gt=0, description="Measured read speed; overrides the estimate.")

    @model_validator(mode="after")
    def _s3(self) -> StorageSpec:
        if (self.kind == "s3-runai-streamer") != (self.s3_uri is not None):
            raise ValueError("s3_uri goes with kind s3-runai-streamer, and that kind needs s3_uri")
        return self


class AutoscalingSpec(StrictModel):
    """KEDA on vLLM's own queue: scale out when requests wait, never on CPU."""

    min_replicas: int = Field(1, ge=0, description="0 only with scale_to_zero (cold starts take minutes).")
    max_replicas: int = Field(4, ge=1, description="Upper bound; each replica costs its GPUs.")
    queue_threshold: int = Field(5, ge=1, description="Waiting requests per replica that trigger scale-out.")
    polling_interval_seconds: int = Field(
        10, ge=1, description="With scale_to_zero: how often KEDA checks whether to wake from zero (otherwise the "
        "HPA controller's sync period, 15 s by default, paces KEDA's queries).")
    cooldown_seconds: int | None = Field(
        None, ge=0, description="None: max(120, grace period). One replica removed per this many seconds; with "
        "scale_to_zero also the idle time before dropping to zero.")
    kv_cache_trigger: bool = Field(False, description="Also scale on vllm:kv_cache_usage_perc.")
    kv_cache_threshold: float = Field(0.8, gt=0, lt=1, description="KV cache use that triggers scale-out.")
    scale_to_zero: bool = Field(False, description="Allow 0 replicas when idle; first request waits a cold start.")
    prometheus_address: str = Field(
        "http://prometheus-operated.monitoring.svc:9090", description="Prometheus that scrapes vLLM."
    )
    scale_down_stabilization_seconds: int = Field(300, ge=0, description="HPA look-back before removing a replica.")
    fallback_replicas: int | None = Field(None, ge=1, description="Replicas when Prometheus is unreachable.")

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        if self.min_replicas == 0 and not self.scale_to_zero:
            raise ValueError("min_replicas 0 needs scale_to_zero: true (each first request waits a cold start)")
        return self


class NetworkSpec(StrictModel):
    """Who may reach the OpenAI API: a NetworkPolicy admitting the listed clients and Prometheus."""

    network_policy: bool = Field(True, description="Admit only the listed clients and Prometheus.")
    allowed_namespaces: list[str] = Field(default_factory=list, description="Namespaces whose pods may call vLLM.")
    allowed_pod_labels: dict[str, str] = Field(default_factory=dict, description="Pods (any listed ns) allowed.")
    prometheus_namespace: str = Field("monitoring", description="Namespace Prometheus scrapes from.")


class ResourcesSpec(StrictModel):
    """CPU and memory of a serving pod; GPUs come from the layout, never from here."""

    cpu_request: str | None = Field(None, description="None: 4 + 2 per GPU (tokenisation, scheduling, HTTP).")
    memory_request_gib: int | None = Field(None, ge=1, description="None: derived from GPUs and /dev/shm.")
    cpu_limit: str | None = Field(None, description="None: no CPU limit (throttling stalls the scheduler loop).")
    memory_limit_gib: int | None = Field(None, ge=1, description="None: no memory limit.")


class LifecycleSpec(StrictModel):
    """Probes, drain and grace: derived from the startup budget and the drain time unless set."""

    pre_stop_sleep_seconds: int = Field(15, ge=0, le=300, description="Endpoints deregister before SIGTERM.")
    termination_margin_seconds: int = Field(30, ge=0, description="Slack after drain before SIGKILL.")
    termination_grace_period_seconds: int | None = Field(None, ge=1, description="None: preStop+drain+margin.")
    startup_budget_seconds: int | None = Field(None, ge=30, description="None: from weight size and read speed.")
    shm_size_gib: int | None = Field(None, ge=1, description="None: 1 GiB + 2 GiB per extra GPU in the pod.")


class ObservabilitySpec(StrictModel):
    """Scraping, alerts and the Grafana dashboard for every model of the stack."""

    monitor: Literal["ServiceMonitor", "PodMonitor", "none"] = Field(
        "ServiceMonitor", description="Prometheus Operator object that scrapes vLLM."
    )
    monitor_labels: dict[str, str] = Field(
        default_factory=lambda: {"release": "prometheus"}, description="Labels the Prometheus selects monitors by."
    )
    alerts: bool = Field(True, description="PrometheusRule with queue, KV cache, TTFT, preemption, down alerts.")
    ttft_p95_slo_seconds: float = Field(2.0, gt=0, description="Alert when p95 time to first token exceeds this.")
    kv_cache_alert_threshold: float = Field(0.8, gt=0, lt=1, description="Sustained KV cache use that alerts.")
    dashboard: bool = Field(True, description="Grafana dashboard ConfigMap for the sidecar.")
    dashboard_labels: dict[str, str] = Field(
        default_factory=lambda: {"grafana_dashboard": "1"}, description="Label the Grafana sidecar watches."
    )
    scrape_interval_seconds: int = Field(15, ge=1, description="Scrape interval of vLLM's /metrics.")


class ModelDeploymentSpec(StrictModel):
    """One model served by vLLM: a Deployment, or a LeaderWorkerSet when a replica spans nodes."""

    name: str = Field(pattern=DNS_LABEL, description="Name of the workload, Service and related objects.")
    model: str = Field(description="Catalog id, a catalog model's Hugging Face id, or a path to its config.json.")
    hf_repo: str | None = Field(None, description="Hugging Face repo to download; None: the catalog's id.")
    served_model_name: str | None = Field(None, description="Name clients use; None: the deployment name.")
    gpu: str | None = Field(None, description="Catalog id or nvidia.com/gpu.product; None: from the node pool.")
    gpus_per_node: int | None = Field(None, ge=1, le=16, description="None: from the node pool or GPU facts.")
    replicas: int = Field(1, ge=1, description="Replicas when not autoscaled.")
    image: str = Field("vllm/vllm-openai", description="Image repository; the tag follows engine.vllm_version.")
    engine: EngineSettings = Field(default_factory=EngineSettings, description="vLLM engine settings.")
    storage: StorageSpec = Field(default_factory=StorageSpec, description="Where the weights come from.")
    autoscaling: AutoscalingSpec | None = Field(None, description="KEDA queue autoscaling; None: fixed replicas.")
    api_key: SecretRef | None = Field(None, description="Protects /v1 with an API key (VLLM_API_KEY).")
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="Who may call the service.")
    service_account_name: str | None = Field(
        None, pattern=K8S_NAME,
        description="ServiceAccount of the serving pods, e.g. one bound to an IAM role (IRSA / EKS Pod Identity) so "
                    "runai_streamer can read S3. None: the namespace default.",
    )
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec, description="CPU and memory.")
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec, description="Probes, drain and grace.")
    overhead_gib: float | None = Field(None, ge=0, description="Planner's non-KV overhead per GPU; None: estimate.")


class DeploymentSpec(StrictModel):
    """Everything one stack deploys, in order: nodes, add-ons, storage, serving, autoscaling, observability."""

    namespace: str = Field("inference", pattern=DNS_LABEL, description="Namespace of the serving objects.")
    create_namespace: bool = Field(True, description="Create the namespace (False when it exists).")
    cluster: ClusterSpec = Field(description="render, kubeconfig or eks.")
    addons: AddonsSpec = Field(default_factory=AddonsSpec, description="GPU Operator, KEDA, LWS.")
    models: list[ModelDeploymentSpec] = Field(min_length=1, description="Models to serve.")
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec, description="Metrics, alerts.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on every object.")

    @model_validator(mode="after")
    def _auto_mode_not_mixed(self) -> DeploymentSpec:
        """Auto Mode nodes have AWS's device plugin; the GPU Operator's would run on the other pools' nodes only if
        the two kinds of pools were told apart, which the operator's one set of Helm values cannot do."""
        if not isinstance(self.cluster, EksCluster) or not self.addons.gpu_operator.install:
            return self
        kinds = {pool.provisioner for pool in self.cluster.node_pools}
        if "auto-mode" in kinds and len(kinds) > 1:
            raise ValueError("cluster.node_pools mixes provisioner auto-mode with "
                             f"{', '.join(sorted(kinds - {'auto-mode'}))} while addons.gpu_operator.install is true: "
                             "Auto Mode nodes bring their own device plugin, the others need the operator's; put the "
                             "Auto Mode pools in a stack of their own, or set addons.gpu_operator.install: false")
        return self

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[ModelDeploymentSpec]) -> list[ModelDeploymentSpec]:
        seen: set[str] = set()
        for model in models:
            if model.name in seen:
                raise ValueError(f"model name {model.name!r} is used twice; names must be unique")
            seen.add(model.name)
        return models


# ---- errors --------------------------------------------------------------------------------------------------------
class SpecError(ValueError):
    """All problems found in a stack's settings; the message lists one per line."""

    def __init__(self, issues: list[PlanningError]) -> None:
        self.issues = issues
        lines = [f"{len(issues)} problem(s) in the stack settings:"] + [f"  - {issue.message}" for issue in issues]
        super().__init__("\n".join(lines))


def _path(loc: tuple[int | str, ...], root: str) -> str:
    text = root
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("render", "kubeconfig", "eks", "function-after[_exactly_one(), SecretRef]"):
            continue  # discriminator tags and validator names are not part of what the user wrote
        elif part.startswith(("function-", "constrained-")):
            continue
        else:
            text += f".{part}" if text else part
    return text


def _model_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names valid where an unknown key was written, to suggest the closest."""
    tagged: dict[str, type[BaseModel]] = {"render": RenderCluster, "kubeconfig": KubeconfigCluster, "eks": EksCluster}
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        if part in tagged:
            current = tagged[part]
            continue
        field = current.model_fields.get(part)
        if field is None:
            return []
        current = next(
            (c for c in _types_in(field.annotation) if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    return list(current.model_fields) if current is not None else []


def _types_in(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _types_in(arg)


def issues_from_validation(error: ValidationError, root: str = "") -> list[PlanningError]:
    issues: list[PlanningError] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _path(loc, root) or "(top level)"
        value = item.get("input")
        message = item["msg"].removeprefix("Value error, ")
        alternative = ""
        if item["type"] == "extra_forbidden":
            known = _model_fields(DeploymentSpec, loc)
            near = closest(str(loc[-1]), known)
            message = "unknown setting"
            alternative = f"did you mean {', '.join(near)}?" if near else f"valid here: {', '.join(known)}"
        elif item["type"] == "missing":
            value = None
            message = "required setting is missing"
        elif item["type"] == "union_tag_invalid":
            alternative = "set mode to render, kubeconfig or eks"
        elif item["type"] == "literal_error":
            alternative = f"valid: {item.get('ctx', {}).get('expected', '')}"
        if isinstance(value, dict):
            value = "{...}"
        issues.append(PlanningError(path, value, message, alternative))
    return issues


def parse_deployment(raw: object, root: str = "") -> DeploymentSpec:
    """Validate a stack's ``deployment`` config (a plain dict) into a DeploymentSpec, or raise SpecError."""
    if not isinstance(raw, dict):
        raise SpecError([PlanningError(root or "deployment", type(raw).__name__, "must be a mapping of settings",
                                       "see stacks/Pulumi.local.yaml for an example")])
    try:
        spec = DeploymentSpec.model_validate(raw)
    except ValidationError as error:
        raise SpecError(issues_from_validation(error, root)) from None
    from .derive import check_deployment  # the cross-field checks need the planner, which needs the spec types

    issues = check_deployment(spec, root)
    if issues:
        raise SpecError(issues)
    return spec
