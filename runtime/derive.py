"""From a model's spec to every derived number the builders need: the serving plan.

Each derived setting (GPU count, layout, /dev/shm, startup budget and probe windows, grace period, PVC size,
requests, autoscaler cooldown) is computed here from the model and hardware facts, and a stack can override it in
the spec. Builders only read a ServingPlan; they do no arithmetic of their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .engine import DEFAULT_IMAGE_REPOSITORY, ExecutorBackend
from .errors import PlanningError
from .gpus import GIB, GpuFacts, find_gpu, gpu_for_instance_type
from .models import ModelFacts, resolve_model
from .parallelism import ParallelLayout, plan_layout
from .planner import CapacityPlan, plan_capacity
from .spec import DeploymentSpec, EksCluster, ModelDeploymentSpec, SecretRef
from .startup import StartupBudget, startup_budget

MODEL_MOUNT_PATH = "/models"
# Probe cadences: startup polls every 10 s; readiness every 5 s so a drained pod leaves endpoints fast.
STARTUP_PROBE_PERIOD_SECONDS = 10
READINESS_PROBE_PERIOD_SECONDS = 5
LIVENESS_PROBE_PERIOD_SECONDS = 10
PROBE_TIMEOUT_SECONDS = 5
# KEDA must not remove a replica faster than a drain takes, nor flap in under two minutes (seed: 120 s).
MIN_COOLDOWN_SECONDS = 120
# /dev/shm: vLLM's engine-core IPC needs ~1 GiB; NCCL's shared-memory transport adds buffers per peer GPU.
SHM_BASE_GIB = 1
SHM_PER_EXTRA_GPU_GIB = 2
# Host memory: tokenizer, HTTP server and the safetensors page cache, plus CPU-side buffers per GPU worker.
MEMORY_BASE_GIB = 16
MEMORY_PER_GPU_GIB = 8
# Root disk of a GPU node: the vLLM image (~20 GB unpacked), containerd's copy while pulling, logs, and slack.
NODE_DISK_GIB = 200
# PVC headroom over the checkpoint: tokenizer and config files, a second revision during a model update.
PVC_HEADROOM_FRACTION = 0.2
PVC_MIN_GIB = 10


@dataclass(frozen=True)
class ServingPlan:
    """One model deployment with every setting resolved."""

    spec: ModelDeploymentSpec
    namespace: str
    model: ModelFacts
    gpu: GpuFacts
    layout: ParallelLayout
    capacity: CapacityPlan
    startup: StartupBudget
    hf_repo: str
    model_ref: str
    """What ``vllm serve`` loads: the hydrated directory, the S3 URI, or the Hugging Face id."""
    image: str
    args: list[str]
    executor_backend: ExecutorBackend | None
    startup_budget_seconds: int
    pre_stop_sleep_seconds: int
    shutdown_timeout_seconds: int
    termination_grace_period_seconds: int
    shm_size_gib: int
    cpu_request: str
    memory_request_gib: int
    cpu_limit: str | None
    memory_limit_gib: int | None
    pvc_size_gib: int
    cooldown_seconds: int | None
    warnings: list[str] = field(default_factory=list)

    @property
    def startup_probe_failure_threshold(self) -> int:
        return math.ceil(self.startup_budget_seconds / STARTUP_PROBE_PERIOD_SECONDS)

    @property
    def liveness_probe_failure_threshold(self) -> int:
        """Liveness must not fire before a drain can finish: its window covers the whole grace period."""
        return math.ceil(self.termination_grace_period_seconds / LIVENESS_PROBE_PERIOD_SECONDS) + 1

    @property
    def worker_pre_stop_sleep_seconds(self) -> int:
        """LWS workers keep their GPUs until the leader's preStop and drain are over (grace > this, checked above)."""
        return self.pre_stop_sleep_seconds + self.shutdown_timeout_seconds

    @property
    def uses_pvc(self) -> bool:
        return self.spec.storage.kind not in ("s3-runai-streamer", "hf-download")

    @property
    def multi_node(self) -> bool:
        return self.layout.layout == "leader-worker-set"


def gpu_for(spec: DeploymentSpec, model: ModelDeploymentSpec, index: int) -> tuple[GpuFacts, int]:
    """The model's GPU and GPUs per node: explicit settings first, then the stack's node pools, then GPU facts."""
    pools = spec.cluster.node_pools if isinstance(spec.cluster, EksCluster) else []
    pool_gpus = [gpu_for_instance_type(pool.instance_type) for pool in pools]
    if model.gpu is not None:
        try:
            gpu = find_gpu(model.gpu)
        except PlanningError as error:
            raise error.at(f"models[{index}].gpu") from None
        counts = [count for pool_gpu, count in pool_gpus if pool_gpu.id == gpu.id]
        return gpu, model.gpus_per_node or (max(counts) if counts else gpu.max_gpus_per_node)
    distinct = {pool_gpu.id: (pool_gpu, count) for pool_gpu, count in pool_gpus}
    if len(distinct) == 1:
        gpu, count = next(iter(distinct.values()))
        return gpu, model.gpus_per_node or count
    raise PlanningError(
        f"models[{index}].gpu", None,
        "no GPU given and the stack's node pools do not name exactly one GPU type",
        "set gpu to a catalog id (e.g. h100-sxm) or a nvidia.com/gpu.product label",
    )


def _secret_issues(spec: DeploymentSpec, path: str, ref: SecretRef | None) -> list[PlanningError]:
    if ref is not None and ref.pulumi_secret and spec.cluster.mode == "render":
        return [PlanningError(
            f"{path}.pulumi_secret", ref.pulumi_secret,
            "render mode writes Secret values into the YAML files in plain text",
            "reference a Secret that exists in the cluster with existing_secret: {name, key}",
        )]
    return []


def plan_model(spec: DeploymentSpec, index: int) -> ServingPlan:
    """Resolve one model deployment; raises PlanningError naming the setting when it cannot work."""
    model_spec = spec.models[index]
    path = f"models[{index}]"
    try:
        facts = resolve_model(model_spec.model)
    except PlanningError as error:
        raise error.at(f"{path}.model") from None
    gpu, gpus_per_node = gpu_for(spec, model_spec, index)
    engine = model_spec.engine
    try:
        layout = plan_layout(facts, engine.tensor_parallel_size, engine.pipeline_parallel_size, gpus_per_node)
    except PlanningError as error:
        field_name = "pipeline_parallel_size" if error.setting == "pipeline_parallel_size" else "tensor_parallel_size"
        raise error.at(f"{path}.engine.{field_name}") from None
    overhead = int(model_spec.overhead_gib * GIB) if model_spec.overhead_gib is not None else None
    capacity = plan_capacity(facts, gpu, engine, overhead_bytes=overhead)
    if not capacity.fits:
        raise PlanningError(
            f"{path}.engine.max_model_len", capacity.max_model_len, "; ".join(capacity.reasons),
            f"with these GPUs the KV cache holds {capacity.estimated_max_model_len:,} tokens: lower max_model_len, "
            "set kv_cache_dtype: fp8, or raise tensor_parallel_size",
        )

    hf_repo = model_spec.hf_repo or facts.hf_id
    storage = model_spec.storage
    if storage.kind == "s3-runai-streamer":
        model_ref = storage.s3_uri or ""
    elif storage.kind == "hf-download":
        model_ref = hf_repo
    else:
        model_ref = f"{MODEL_MOUNT_PATH}/{model_spec.name}"
    if not hf_repo and (storage.kind == "hf-download" or (storage.hydrate and not storage.existing_claim
                                                           and storage.kind != "s3-runai-streamer")):
        raise PlanningError(
            f"{path}.hf_repo", None, f"{model_spec.model} is not a catalog model, so there is no repo to download",
            "set hf_repo to its Hugging Face id, or storage.existing_claim to a PVC that holds it with hydrate: false",
        )

    budget = startup_budget(
        facts.checkpoint_bytes, storage.kind, pods_per_replica=layout.size,
        read_gb_per_second=storage.read_gb_per_second,
    )
    lifecycle = model_spec.lifecycle
    startup_seconds = lifecycle.startup_budget_seconds or budget.total_seconds
    grace = lifecycle.termination_grace_period_seconds or (
        lifecycle.pre_stop_sleep_seconds + engine.shutdown_timeout_seconds + lifecycle.termination_margin_seconds
    )
    drain_needed = lifecycle.pre_stop_sleep_seconds + engine.shutdown_timeout_seconds
    if grace <= drain_needed:
        raise PlanningError(
            f"{path}.lifecycle.termination_grace_period_seconds", grace,
            f"the pod is killed before preStop ({lifecycle.pre_stop_sleep_seconds} s) and the vLLM drain "
            f"({engine.shutdown_timeout_seconds} s) finish",
            f"use at least {drain_needed + lifecycle.termination_margin_seconds}, or leave it unset to derive it",
        )

    shm = lifecycle.shm_size_gib or SHM_BASE_GIB + SHM_PER_EXTRA_GPU_GIB * (layout.gpus_per_pod - 1)
    resources = model_spec.resources
    memory = resources.memory_request_gib or MEMORY_BASE_GIB + MEMORY_PER_GPU_GIB * layout.gpus_per_pod + shm
    if resources.memory_limit_gib is not None and resources.memory_limit_gib < memory:
        raise PlanningError(
            f"{path}.resources.memory_limit_gib", resources.memory_limit_gib,
            f"below the memory request of {memory} GiB (which includes {shm} GiB of /dev/shm, counted against the "
            "limit)", f"use at least {memory}, or leave it unset",
        )
    pvc = storage.size_gib or max(PVC_MIN_GIB, math.ceil(facts.checkpoint_bytes * (1 + PVC_HEADROOM_FRACTION) / GIB))
    cooldown = None
    if model_spec.autoscaling is not None:
        cooldown = model_spec.autoscaling.cooldown_seconds or max(MIN_COOLDOWN_SECONDS, grace)
        if cooldown < max(MIN_COOLDOWN_SECONDS, grace):
            raise PlanningError(
                f"{path}.autoscaling.cooldown_seconds", cooldown,
                f"shorter than max({MIN_COOLDOWN_SECONDS} s, the {grace} s grace period): replicas would be removed "
                "while they still drain", f"use at least {max(MIN_COOLDOWN_SECONDS, grace)}",
            )

    backend: ExecutorBackend | None = "ray" if layout.layout == "leader-worker-set" else None
    served = model_spec.served_model_name or model_spec.name
    args = engine.to_args(model_ref, served_model_name=served, distributed_executor_backend=backend,
                          max_model_len=capacity.max_model_len)
    if storage.kind == "s3-runai-streamer" and engine.load_format == "auto":
        args.insert(1, "--load-format=runai_streamer")
    warnings = list(capacity.warnings)
    if layout.gpus_per_pod > 1 and gpu.interconnect == "pcie":
        warnings.append(
            f"tensor parallelism over {layout.gpus_per_pod} {gpu.id} GPUs that share only PCIe: all-reduce "
            "traffic will dominate; prefer NVLink GPUs or pipeline parallelism"
        )
    if storage.kind == "s3-runai-streamer" and model_spec.service_account_name is None:
        warnings.append(
            "weights stream from S3 with the pod's AWS credentials, and no service_account_name is set: bind an IAM "
            "role to a ServiceAccount (IRSA or EKS Pod Identity) and name it there, or loading fails with 403"
        )
    if model_spec.autoscaling is not None and model_spec.autoscaling.scale_to_zero:
        warnings.append(
            f"scale to zero: the first request after idle waits a cold start of about {startup_seconds} s"
        )
    image_repository = model_spec.image or DEFAULT_IMAGE_REPOSITORY
    return ServingPlan(
        spec=model_spec, namespace=spec.namespace, model=facts, gpu=gpu, layout=layout, capacity=capacity,
        startup=budget, hf_repo=hf_repo, model_ref=model_ref, image=f"{image_repository}:{engine.image_tag}",
        args=args, executor_backend=backend, startup_budget_seconds=startup_seconds,
        pre_stop_sleep_seconds=lifecycle.pre_stop_sleep_seconds,
        shutdown_timeout_seconds=engine.shutdown_timeout_seconds, termination_grace_period_seconds=grace,
        shm_size_gib=shm, cpu_request=resources.cpu_request or str(4 + 2 * layout.gpus_per_pod),
        memory_request_gib=memory, cpu_limit=resources.cpu_limit, memory_limit_gib=resources.memory_limit_gib,
        pvc_size_gib=pvc, cooldown_seconds=cooldown, warnings=warnings,
    )


def check_deployment(spec: DeploymentSpec, root: str = "") -> list[PlanningError]:
    """Every cross-setting problem of a stack, each addressed to the setting to change."""
    prefix = f"{root}." if root else ""
    issues: list[PlanningError] = []
    if isinstance(spec.cluster, EksCluster):
        for j, pool in enumerate(spec.cluster.node_pools):
            try:
                gpu_for_instance_type(pool.instance_type)
            except PlanningError as error:
                issues.append(error.at(f"{prefix}cluster.node_pools[{j}].instance_type"))
    if issues:
        return issues
    for index, model in enumerate(spec.models):
        issues += _secret_issues(spec, f"{prefix}models[{index}].api_key", model.api_key)
        issues += _secret_issues(spec, f"{prefix}models[{index}].storage.hf_token", model.storage.hf_token)
        try:
            plan = plan_model(spec, index)
        except PlanningError as error:
            issues.append(error.at(prefix + error.setting) if prefix else error)
            continue
        if isinstance(spec.cluster, EksCluster):
            for j, pool in enumerate(spec.cluster.node_pools):
                pool_gpu, _ = gpu_for_instance_type(pool.instance_type)
                minimum = plan.layout.size * (model.autoscaling.min_replicas if model.autoscaling else model.replicas)
                if pool_gpu.id == plan.gpu.id and pool.max_size < minimum:
                    issues.append(PlanningError(
                        f"{prefix}cluster.node_pools[{j}].max_size", pool.max_size,
                        f"{model.name} needs {minimum} node(s) of {pool.instance_type} at its minimum replicas",
                        f"use max_size >= {minimum}",
                    ))
    return issues


def plan_deployment(spec: DeploymentSpec) -> list[ServingPlan]:
    """Serving plans for every model of a validated spec (``parse_deployment`` already checked they resolve)."""
    return [plan_model(spec, index) for index in range(len(spec.models))]
