"""One model's settings: storage, autoscaling, network, resources, lifecycle, and the engine beside them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vllm_pulumi.runtime.planning.startup import StorageKind
from vllm_pulumi.runtime.spec.common import DNS_LABEL, K8S_NAME, SecretRef, StrictModel
from vllm_pulumi.runtime.spec.engine import EngineSettings


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
    shared_compile_cache: bool = Field(
        True, description="Keep vLLM's compile caches on the model volume, per model/version/layout/GPU: one compile."
    )
    runai_streamer_concurrency: int | None = Field(
        None, ge=1, le=256, description="Threads per file with runai_streamer; None: from the storage kind."
    )

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
    startup_budget_seconds: int | None = Field(None, ge=30, description="None: by phase (runtime/planning/startup.py).")
    compile_cache_warm: bool = Field(
        False, description="Declare the shared compile cache filled (a pod has started): budget the warm compile."
    )
    shm_size_gib: int | None = Field(None, ge=1, description="None: 1 GiB + 2 GiB per extra GPU in the pod.")


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
    efa_image: str | None = Field(
        None, description="Image repository for replicas that span EFA nodes: one with libfabric and the AWS OFI "
                          "NCCL plugin (the upstream image has neither, and NCCL then uses TCP sockets); the tag "
                          "follows engine.vllm_version. None: image.")
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
