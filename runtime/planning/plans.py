"""From a model's spec to every derived number the builders need: the serving plan.

Each derived setting (GPU count, layout, /dev/shm, startup budget and probe windows, grace period, PVC size,
requests, autoscaler cooldown) is computed here from the model and hardware facts, and a stack can override it in
the spec. The node shape a model's pods land on comes from runtime/nodes.py; here a pod no node of it can take is
refused, and the rollout strategy is derived from the room the pool has at max scale (docs/placement.md). Builders
only read a ServingPlan; they do no arithmetic of their own.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GIB, GpuFacts, find_gpu
from vllm_pulumi.runtime.facts.instances import INSTANCES, efa_interfaces_for, find_instance
from vllm_pulumi.runtime.facts.models import ModelFacts, resolve_model
from vllm_pulumi.runtime.facts.vllm_rules import engine_config_problem
from vllm_pulumi.runtime.planning.capacity import CapacityPlan, plan_capacity
from vllm_pulumi.runtime.planning.nodes import (
    NODEPOOL_PROVISIONERS,
    NodeShape,
    Resources,
    base_shape_for,
    distinct_pools,
    pool_instances,
    state_nodes_hint,
    stated_shapes,
    with_node_count,
)
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout, plan_layout
from vllm_pulumi.runtime.planning.placement import Packing, nodes_needed
from vllm_pulumi.runtime.planning.startup import RUNAI_STREAMER_KINDS, StartupBudget, startup_budget
from vllm_pulumi.runtime.spec.cluster import EksCluster
from vllm_pulumi.runtime.spec.common import SecretRef
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec
from vllm_pulumi.runtime.spec.engine import DEFAULT_IMAGE_REPOSITORY, ExecutorBackend
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec, StorageSpec
from vllm_pulumi.runtime.vocabulary import EFA_RESOURCE

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
# CPU: tokenisation, scheduling and the HTTP server, plus one worker process per GPU.
CPU_BASE_MILLICORES = 4000
CPU_PER_GPU_MILLICORES = 2000
# Disk-backed emptyDirs of a serving pod: compile caches (torch.compile, Triton, FlashInfer JIT; a cold compile
# writes a few GB) and /tmp. With hf-download the cache also holds the weights, so it is sized like the PVC.
CACHE_SIZE_GIB = 20
TMP_SIZE_GIB = 4
# Beside the emptyDirs, the container's writable layer (libraries writing outside the redirected caches) and its logs.
WRITABLE_LAYER_GIB = 2
# PVC headroom over the checkpoint: tokenizer and config files, a second revision during a model update.
PVC_HEADROOM_FRACTION = 0.2
PVC_MIN_GIB = 10
# Voluntary evictions (node drains, scale-down) take at most one replica's pod at a time: the same bound a rollout
# keeps, whether it surges (none down) or replaces one replica at a time (one down); never blocks a drain.
PDB_MAX_UNAVAILABLE = 1
# The shared compile caches live beside the weights on the model volume, under this directory (outside any model's
# hydrated directory, so a re-hydration does not delete them).
COMPILE_CACHE_DIR = ".compile-cache"
# Storage kinds without a model volume: S3 streams into memory, hf-download fills the pod's own emptyDir.
VOLUMELESS_STORAGE_KINDS = ("s3-runai-streamer", "hf-download")


@dataclass(frozen=True)
class RolloutPlan:
    """How a rolling update replaces replicas, from the room the pool has at max scale (docs/placement.md)."""

    max_surge: int
    max_unavailable: int
    reason: str
    max_replicas: int
    """Replicas at max scale: autoscaling.max_replicas, or replicas."""
    replica_capacity: int
    """Replicas of this model the pool holds at max scale, beside the other models on it and their surge replicas."""

    @property
    def surges(self) -> bool:
        return self.max_surge > 0


# Groups a LeaderWorkerSet rollout may add (its maxSurge when it surges); LWS surges only above this many replicas.
LWS_SURGE_GROUPS = 1

# What a plan carries until plan_deployment has looked at the whole pool.
_UNDECIDED = RolloutPlan(1, 0, "not decided yet", 0, 0)


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
    cpu_request_millicores: int
    memory_request_gib: int
    """Includes /dev/shm: a memory-backed emptyDir is charged to the pod's memory."""
    cpu_limit: str | None
    memory_limit_gib: int | None
    cache_size_gib: int
    tmp_size_gib: int
    pvc_size_gib: int
    cooldown_seconds: int | None
    node_shape: NodeShape
    """The pool the serving pods land on (stated by the stack, or assumed: then node_shape.stated is False)."""
    rollout: RolloutPlan
    warnings: list[str] = field(default_factory=list)
    efa_devices_per_pod: int = 0
    """vpc.amazonaws.com/efa devices each serving pod requests (replicas spanning EFA nodes only)."""

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
        return self.spec.storage.kind not in VOLUMELESS_STORAGE_KINDS

    @property
    def multi_node(self) -> bool:
        return self.layout.layout == "leader-worker-set"

    @property
    def ephemeral_storage_gib(self) -> int:
        """Node disk a serving pod may fill: its emptyDirs and the writable layer. The container requests and is
        limited to exactly this (ephemeral-storage), so the scheduler reserves it and a full node evicts others
        first; the image itself (~20 GB) is not counted there, the node's disk holds it beside."""
        return self.cache_size_gib + self.tmp_size_gib + WRITABLE_LAYER_GIB

    @property
    def pod_resources(self) -> Resources:
        """What the scheduler counts of one serving pod (an LWS leader or worker alike): its requests."""
        return Resources(self.layout.gpus_per_pod, self.cpu_request_millicores, self.memory_request_gib * 1024,
                         self.ephemeral_storage_gib)

    @property
    def min_replicas(self) -> int:
        return self.spec.autoscaling.min_replicas if self.spec.autoscaling else self.spec.replicas

    @property
    def max_replicas(self) -> int:
        return self.spec.autoscaling.max_replicas if self.spec.autoscaling else self.spec.replicas


def gpu_for(spec: DeploymentSpec, model: ModelDeploymentSpec, index: int) -> tuple[GpuFacts, int]:
    """The model's GPU and GPUs per node: explicit settings first, then the pool its pods land on."""
    shape = base_shape_for(spec, index)
    return shape.gpu, model.gpus_per_node or shape.gpus


def _secret_issues(spec: DeploymentSpec, path: str, ref: SecretRef | None) -> list[PlanningError]:
    if ref is not None and ref.pulumi_secret and spec.cluster.mode == "render":
        return [PlanningError(
            f"{path}.pulumi_secret", ref.pulumi_secret,
            "render mode writes Secret values into the YAML files in plain text",
            "reference a Secret that exists in the cluster with existing_secret: {name, key}",
        )]
    return []


_CPU_QUANTITY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(m?)\s*")


def cpu_millicores(quantity: str, setting: str) -> int:
    """A Kubernetes CPU quantity (``6``, ``4.5``, ``500m``) in millicores, rounded up like the API server does."""
    match = _CPU_QUANTITY.fullmatch(quantity)
    if match is None:
        raise PlanningError(setting, quantity, "not a CPU quantity", 'use cores ("6", "4.5") or millicores ("500m")')
    number = float(match.group(1))
    return math.ceil(number if match.group(2) else number * 1000)


def format_cpu(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def _parallelism_warnings(layout: ParallelLayout, gpu: GpuFacts, efa_devices: int = 0) -> list[str]:
    """What the links between a replica's GPUs cost, named by the kind of parallelism that uses them."""
    tp, pp = layout.tensor_parallel_size, layout.pipeline_parallel_size
    warnings = []
    if tp > layout.gpus_per_pod:
        network = (f"over EFA ({efa_devices} vpc.amazonaws.com/efa devices per pod), still far slower than NVLink"
                   if efa_devices else
                   f"and the pods request no {EFA_RESOURCE} devices, so NCCL falls back to TCP sockets")
        warnings.append(
            f"tensor parallelism over {tp} GPUs spans {math.ceil(tp / layout.gpus_per_pod)} nodes: its all-reduce at "
            f"every layer crosses the network, {network}; keep tensor_parallel_size within one node "
            f"({layout.gpus_per_pod} GPUs) and use pipeline parallelism across nodes"
        )
    elif tp > 1 and gpu.interconnect == "pcie":
        warnings.append(
            f"tensor parallelism over {tp} {gpu.id} GPUs that share only PCIe: all-reduce traffic will dominate; "
            "prefer NVLink GPUs or pipeline parallelism"
        )
    if pp > 1 and gpu.interconnect == "pcie":
        where = (f"in {layout.size} pods on separate nodes, joined by Ray over the node network" if layout.size > 1
                 else "in one pod, over PCIe")
        warnings.append(
            f"pipeline parallelism over {pp} stages of {gpu.id} GPUs {where}: stages pass only activations (far "
            "less traffic than tensor parallelism), but each step runs the stages one after another, so the time "
            "per token grows with the stage count"
        )
    return warnings


def _efa_devices(spec: DeploymentSpec, shape: NodeShape, multi_node: bool) -> int:
    """vpc.amazonaws.com/efa devices each pod of a replica that spans nodes requests: all its node's EFA interfaces
    (the pod has the whole node), when the pool has EFA; 0 otherwise (a single-node replica's NCCL stays inside)."""
    if not multi_node or shape.setting is None:
        return 0
    index = int(shape.setting.rsplit("[", 1)[1].rstrip("]"))
    if isinstance(spec.cluster, EksCluster):
        pool = spec.cluster.node_pools[index]
        # A managed node group gets EFA unless the stack turns it off (components/builders/nodes.py, same default);
        # Karpenter and Auto Mode pools have none (the spec refuses efa there).
        if pool.provisioner != "managed-node-group" or pool.instance_type is None or pool.efa is False:
            return 0
        return efa_interfaces_for(pool.instance_type)
    nodes = spec.cluster.nodes[index]
    if not nodes.efa:
        return 0
    interfaces = find_instance(nodes.instance_type).efa_interfaces if nodes.instance_type else 0
    if not interfaces:
        with_efa = ", ".join(i.instance_type for i in INSTANCES if i.efa_interfaces)
        raise PlanningError(f"{shape.setting}.efa", True,
                            f"the plan takes the EFA interface count from the instance facts, and "
                            f"{nodes.instance_type or 'a node without instance_type'} has none there",
                            f"set instance_type to one with EFA ({with_efa}), or efa: false")
    return interfaces


def _node_setting(shape: NodeShape, quantity: str) -> str | None:
    """The setting that sizes a stated node (None when the shape is assumed)."""
    if shape.setting is None:
        return None
    if shape.setting.startswith("cluster.node_pools"):
        kind = "instance_types" if shape.provisioner in NODEPOOL_PROVISIONERS else "instance_type"
        return f"{shape.setting}.{'disk_size_gib' if quantity == 'ephemeral_storage_gib' else kind}"
    if shape.instance_type is not None and quantity != "ephemeral_storage_gib":
        return f"{shape.setting}.instance_type"
    return f"{shape.setting}.{quantity}"


def _check_pod_fits_node(spec: DeploymentSpec, index: int, plan: ServingPlan) -> None:
    """Refuse a serving pod that no single node of its pool can take: the scheduler would leave it Pending."""
    model, shape = spec.models[index], plan.node_shape
    path = f"models[{index}]"
    pod, node = plan.pod_resources, shape.allocatable
    where = f"one node of {shape.pool} ({shape.describe()})"
    if pod.cpu_millicores > node.cpu_millicores:
        have = format_cpu(node.cpu_millicores)
        reason = (f"a serving pod requests {plan.cpu_request} CPU but {where} has {have} allocatable (capacity "
                  "minus the kubelet reserve)")
        request = f"{path}.resources.cpu_request"
        node_setting = _node_setting(shape, "vcpus")
        if model.resources.cpu_request is not None or node_setting is None:
            raise PlanningError(request, plan.cpu_request, reason,
                                f"use at most {have}, or nodes with more CPUs")
        raise PlanningError(node_setting, shape.instance_type or shape.capacity_cpu_millicores // 1000, reason,
                            f"use nodes with more CPUs, or set {request} to at most {have}")
    if pod.memory_mib > node.memory_mib:
        have_gib = node.memory_mib // 1024
        reason = (f"a serving pod requests {plan.memory_request_gib} GiB of memory (including {plan.shm_size_gib} "
                  f"GiB of /dev/shm) but {where} has {node.memory_mib / 1024:.1f} GiB allocatable (capacity minus "
                  "the kubelet reserve)")
        request = f"{path}.resources.memory_request_gib"
        node_setting = _node_setting(shape, "memory_gib")
        if model.resources.memory_request_gib is not None:
            raise PlanningError(request, plan.memory_request_gib, reason,
                                f"use at most {have_gib}, or nodes with more memory")
        without_shm = plan.memory_request_gib - plan.shm_size_gib
        if model.lifecycle.shm_size_gib is not None and without_shm <= have_gib:
            raise PlanningError(f"{path}.lifecycle.shm_size_gib", plan.shm_size_gib, reason,
                                f"use at most {have_gib - without_shm}, or leave it unset to derive it")
        if node_setting is None:
            raise PlanningError(request, plan.memory_request_gib, reason,
                                f"set it to at most {have_gib}, or state nodes with more memory")
        raise PlanningError(node_setting, shape.instance_type or shape.capacity_memory_mib // 1024, reason,
                            f"use nodes with more memory, or set {request} to at most {have_gib}")
    if plan.ephemeral_storage_gib > node.ephemeral_storage_gib:
        disk = node.ephemeral_storage_gib
        reason = (f"a serving pod requests {plan.ephemeral_storage_gib} GiB of node disk (cache "
                  f"{plan.cache_size_gib} GiB + /tmp {plan.tmp_size_gib} GiB + writable layer {WRITABLE_LAYER_GIB} "
                  f"GiB) but {where} has {disk} GiB "
                  "allocatable (capacity minus the kubelet reserve and eviction threshold)")
        node_setting = _node_setting(shape, "ephemeral_storage_gib")
        if model.storage.kind == "hf-download" or node_setting is None:
            raise PlanningError(f"{path}.storage.kind", model.storage.kind, reason + (
                "; hf-download keeps the weights in the pod's cache" if model.storage.kind == "hf-download" else ""),
                "read the weights from a shared volume (nfs, efs, fsx-lustre) or S3, or use nodes with larger disks")
        raise PlanningError(node_setting, shape.capacity_ephemeral_storage_gib, reason,
                            f"use at least {shape.capacity_ephemeral_storage_gib + plan.ephemeral_storage_gib - disk} "
                            "GiB")


def _plan_pods(spec: DeploymentSpec, index: int, shape: NodeShape) -> ServingPlan:
    """Everything of one model's plan but the rollout, which depends on every model on the same pool."""
    model_spec = spec.models[index]
    path = f"models[{index}]"
    try:
        facts = resolve_model(model_spec.model)
    except PlanningError as error:
        raise error.at(f"{path}.model") from None
    gpu, gpus_per_node = shape.gpu, model_spec.gpus_per_node or shape.gpus
    engine = model_spec.engine
    refused = engine_config_problem(engine, facts, gpu, path)
    if refused is not None:
        raise refused
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
            f"with these GPUs vLLM starts with max_model_len up to {capacity.estimated_max_model_len:,}: lower "
            "max_model_len, set kv_cache_dtype: fp8, or raise tensor_parallel_size",
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

    lifecycle = model_spec.lifecycle
    streamer = uses_runai_streamer(model_spec)
    if lifecycle.compile_cache_warm and not shares_compile_cache(storage):
        raise PlanningError(
            f"{path}.lifecycle.compile_cache_warm", True,
            f"storage kind {storage.kind} ({storage.access_mode}) with shared_compile_cache "
            f"{storage.shared_compile_cache} keeps no compile cache across pods, so every pod compiles cold",
            "leave compile_cache_warm false, or use a ReadWriteMany volume kind (local-nvme, fsx-lustre, efs, nfs) "
            "with shared_compile_cache: true",
        )
    budget = startup_budget(
        facts.checkpoint_bytes, storage.kind, pods_per_replica=layout.size,
        read_gb_per_second=storage.read_gb_per_second, num_hidden_layers=facts.num_hidden_layers,
        max_num_seqs=capacity.max_num_seqs, gpus_per_replica=layout.gpus_per_pod * layout.size, gpu_id=gpu.id,
        runai_streamer=streamer, compile_cache_warm=lifecycle.compile_cache_warm,
        enforce_eager="--enforce-eager" in engine.extra_args,
        # Nodes the stack states exist already; node pools (and nodes assumed from the GPU) may have to be made.
        nodes_provisioned=not (shape.provisioner == "existing" and shape.setting is not None),
    )
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
    weights_with_headroom_gib = math.ceil(facts.checkpoint_bytes * (1 + PVC_HEADROOM_FRACTION) / GIB)
    if storage.size_gib is not None and storage.kind != "s3-runai-streamer" \
            and storage.size_gib < weights_with_headroom_gib:
        where = "the pod's download cache" if storage.kind == "hf-download" else "the model volume"
        raise PlanningError(
            f"{path}.storage.size_gib", storage.size_gib,
            f"{where} of {storage.size_gib} GiB cannot hold {facts.name}'s checkpoint of "
            f"{facts.checkpoint_bytes / GIB:.1f} GiB plus {PVC_HEADROOM_FRACTION:.0%} headroom (tokenizer and config "
            f"files, a second revision during an update), {weights_with_headroom_gib} GiB: the download would fill it "
            "and fail", f"use at least {weights_with_headroom_gib}, or leave it unset to derive it",
        )
    pvc = storage.size_gib or max(PVC_MIN_GIB, weights_with_headroom_gib)
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
    if streamer and engine.load_format == "auto":
        args.insert(1, "--load-format=runai_streamer")
    efa_devices = _efa_devices(spec, shape, layout.layout == "leader-worker-set")
    warnings = list(capacity.warnings) + _parallelism_warnings(layout, gpu, efa_devices)
    image_repository = model_spec.image or DEFAULT_IMAGE_REPOSITORY
    if efa_devices and model_spec.efa_image is not None:
        image_repository = model_spec.efa_image
    elif efa_devices and image_repository == DEFAULT_IMAGE_REPOSITORY:
        warnings.append(
            f"the pods request {efa_devices} {EFA_RESOURCE} devices each, but run the upstream "
            f"{DEFAULT_IMAGE_REPOSITORY} image, which has neither libfabric nor the AWS OFI NCCL plugin: NCCL "
            f"between the nodes falls back to TCP sockets; set {path}.efa_image to an image that adds them "
            "(README: multi-node on EFA)"
        )
    if storage.kind == "s3-runai-streamer" and model_spec.service_account_name is None:
        warnings.append(
            "weights stream from S3 with the pod's AWS credentials, and no service_account_name is set: bind an IAM "
            "role to a ServiceAccount (IRSA or EKS Pod Identity) and name it there, or loading fails with 403"
        )
    referenced = [ref.existing_secret.name for ref in (model_spec.api_key, storage.hf_token)
                  if ref is not None and ref.existing_secret is not None]
    if referenced and spec.cluster.mode != "render" and spec.create_namespace:
        warnings.append(
            f"Secrets {', '.join(sorted(set(referenced)))} are referenced by name in namespace {spec.namespace}, "
            "which this stack creates: they cannot exist before `pulumi up` makes it, so pods wait for them "
            "(KEDA, which reads the serving container's env, fails too) until something creates them (an "
            "ExternalSecret, a sealed secret); when they are created by hand, make the namespace first and set "
            "create_namespace: false"
        )
    if model_spec.autoscaling is not None and model_spec.autoscaling.scale_to_zero:
        warnings.append(
            f"scale to zero: the first request after idle waits a cold start of about {startup_seconds} s, and "
            f"about {budget.node_seconds} s more when a GPU node must be provisioned and the image pulled first"
        )
    elif model_spec.autoscaling is not None and "polling_interval_seconds" in model_spec.autoscaling.model_fields_set:
        warnings.append(
            f"{path}.autoscaling.polling_interval_seconds is set but has no effect without scale_to_zero: KEDA "
            "polls Prometheus itself only to wake a model from zero; above zero the HPA controller's sync period "
            "(15 s by default) paces the queries"
        )
    if resources.cpu_request is not None:
        cpu_request, cpu = resources.cpu_request, cpu_millicores(resources.cpu_request, f"{path}.resources.cpu_request")
    else:
        cpu = CPU_BASE_MILLICORES + CPU_PER_GPU_MILLICORES * layout.gpus_per_pod
        cpu_request = format_cpu(cpu)
    plan = ServingPlan(
        spec=model_spec, namespace=spec.namespace, model=facts, gpu=gpu, layout=layout, capacity=capacity,
        startup=budget, hf_repo=hf_repo, model_ref=model_ref, image=f"{image_repository}:{engine.image_tag}",
        args=args, executor_backend=backend, startup_budget_seconds=startup_seconds,
        pre_stop_sleep_seconds=lifecycle.pre_stop_sleep_seconds,
        shutdown_timeout_seconds=engine.shutdown_timeout_seconds, termination_grace_period_seconds=grace,
        shm_size_gib=shm, cpu_request=cpu_request, cpu_request_millicores=cpu, memory_request_gib=memory,
        cpu_limit=resources.cpu_limit, memory_limit_gib=resources.memory_limit_gib,
        cache_size_gib=pvc if storage.kind == "hf-download" else CACHE_SIZE_GIB, tmp_size_gib=TMP_SIZE_GIB,
        pvc_size_gib=pvc, cooldown_seconds=cooldown, node_shape=shape, rollout=_UNDECIDED, warnings=warnings,
        efa_devices_per_pod=efa_devices,
    )
    _check_pod_fits_node(spec, index, plan)
    return plan


def uses_runai_streamer(spec: ModelDeploymentSpec) -> bool:
    """S3 always streams; a shared file system streams too unless the stack picked a load format itself (vLLM 0.33's
    runai_streamer reads local safetensors directories, with many reader threads per file)."""
    kind, load_format = spec.storage.kind, spec.engine.load_format
    if load_format.startswith("runai_streamer"):
        return True
    return load_format == "auto" and (kind == "s3-runai-streamer" or kind in RUNAI_STREAMER_KINDS)


def runai_streamer_concurrency(plan: ServingPlan) -> int | None:
    """RUNAI_STREAMER_CONCURRENCY when the pods stream: the stack's, else the shared file system's (None on S3, where
    vLLM's own default applies)."""
    if not uses_runai_streamer(plan.spec):
        return None
    storage = plan.spec.storage
    by_kind = RUNAI_STREAMER_KINDS[storage.kind][1] if storage.kind in RUNAI_STREAMER_KINDS else None
    return storage.runai_streamer_concurrency or by_kind


def shares_compile_cache(storage: StorageSpec) -> bool:
    """Whether pods keep vLLM's compile caches on the model volume: asked for, a volume exists, and it takes writes
    (a ReadOnlyMany claim cannot: those pods compile into their emptyDir)."""
    return (storage.shared_compile_cache and storage.kind not in VOLUMELESS_STORAGE_KINDS
            and storage.access_mode != "ReadOnlyMany")


def compile_cache_key(plan: ServingPlan) -> str | None:
    """Directory of the shared compile cache on the model volume: one per model, vLLM version, parallel layout and
    GPU (vLLM hashes its own config into torch_compile_cache too; this keeps Triton and Inductor caches, which it
    does not key by model, apart as well). None: pods keep their caches in their own emptyDir."""
    if not shares_compile_cache(plan.spec.storage):
        return None
    engine = plan.spec.engine
    return (f"{COMPILE_CACHE_DIR}/{plan.spec.name}/vllm-{engine.vllm_version}/"
            f"tp{engine.tensor_parallel_size}-pp{engine.pipeline_parallel_size}/{plan.gpu.id}")


# ---- the pools: node counts and rollouts -----------------------------------------------------------------------------
def _model_shapes(spec: DeploymentSpec) -> list[NodeShape | PlanningError]:
    """Each model's pool, or why it has none (assumed pools of different GPU counts kept apart)."""
    stated = stated_shapes(spec)
    found: list[NodeShape | PlanningError] = []
    for index in range(len(spec.models)):
        try:
            found.append(base_shape_for(spec, index, stated))
        except PlanningError as error:
            found.append(error)
    shapes = distinct_pools([shape for shape in found if isinstance(shape, NodeShape)])
    renamed = iter(shapes)
    return [next(renamed) if isinstance(shape, NodeShape) else shape for shape in found]


def _by_pool(plans: list[ServingPlan]) -> dict[str, list[ServingPlan]]:
    pools: dict[str, list[ServingPlan]] = {}
    for plan in plans:
        pools.setdefault(plan.node_shape.pool, []).append(plan)
    return pools


def _min_setting(plan: ServingPlan, index: int) -> str:
    return f"models[{index}].{'autoscaling.min_replicas' if plan.spec.autoscaling else 'replicas'}"


def _max_setting(plan: ServingPlan, index: int) -> str:
    return f"models[{index}].{'autoscaling.max_replicas' if plan.spec.autoscaling else 'replicas'}"


def _per_node(shape: NodeShape, plan: ServingPlan) -> str:
    per_node = shape.allocatable.how_many(plan.pod_resources)
    if plan.layout.size == 1:
        return f"{per_node} replica(s) per node"
    return f"a replica is a group of {plan.layout.size} pods, {per_node} pod(s) per node"


def _shared(plan: ServingPlan, on_pool: list[ServingPlan]) -> str:
    others = [other.spec.name for other in on_pool if other is not plan]
    if not others:
        return ""
    return f", shared with {', '.join(others)} (their max scale and surge replicas counted)"


def _pool_plans(spec: DeploymentSpec, shape: NodeShape, on_pool: list[ServingPlan],
                indices: dict[str, int]) -> list[ServingPlan]:
    """Node count (when assumed) and rollout of every model on one pool.

    A rolling update that surges needs room for one more replica at max scale; with several models on a pool their
    max scales add up, and so do their surge replicas (one `pulumi up` may roll them all at once). Models keep surge
    in stack order while the pool has room; the rest replace one replica at a time.
    """
    node = shape.allocatable
    max_scale = [(plan.pod_resources, plan.max_replicas * plan.layout.size) for plan in on_pool]
    if not shape.stated:
        surges = [(plan.pod_resources, plan.layout.size) for plan in on_pool]
        shape = with_node_count(shape, nodes_needed(node, max_scale + surges) or 0)
    packing = Packing(node, shape.max_nodes)
    held = [packing.place(pod, count) // plan.layout.size for (pod, count), plan in zip(max_scale, on_pool)]
    placed = list(max_scale)
    result = []
    for plan, replicas_held in zip(on_pool, held):
        index = indices[plan.spec.name]
        name, size, max_replicas = plan.spec.name, plan.layout.size, plan.max_replicas
        max_setting = _max_setting(plan, index)
        warnings = list(plan.warnings)
        if not shape.stated:
            warnings.append(
                f"the stack states no nodes for {shape.gpu.id}, so the plan assumes pool {shape.pool}: "
                f"{shape.max_nodes} node(s) of {shape.describe()} ({shape.basis}), enough for every replica at max "
                f"scale plus a surge replica; {state_nodes_hint(spec, shape.gpu)}"
            )
        spare = (packing.room_for(plan.pod_resources) or 0) // size
        capacity = replicas_held + spare
        pool_text = (f"pool {shape.pool} ({shape.max_nodes} node(s) of {shape.describe()}; {_per_node(shape, plan)}"
                     f"{_shared(plan, on_pool)})")
        per_node = node.how_many(plan.pod_resources)
        pod = plan.pod_resources
        without_disk = node.how_many(Resources(pod.gpus, pod.cpu_millicores, pod.memory_mib, 0))
        if per_node < without_disk:
            warnings.append(
                f"{without_disk} pods of {name} fit one node of {shape.pool} by GPUs, CPU and memory, but only "
                f"{per_node} by disk (each requests {plan.ephemeral_storage_gib} GiB of ephemeral storage, the node "
                f"has {node.ephemeral_storage_gib} GiB allocatable): the rest of its GPUs stay idle; give the nodes a "
                "larger disk"
                + (f" ({_node_setting(shape, 'ephemeral_storage_gib')})" if shape.setting else "")
            )
        if replicas_held < max_replicas:
            needed_all = nodes_needed(node, max_scale)
            warnings.append(
                f"at max scale ({max_setting} {max_replicas}) {pool_text} holds only {replicas_held} replica(s) of "
                f"{name}: the others would stay Pending; raise {shape.count_setting} to {needed_all}, or lower "
                f"{max_setting} to {replicas_held}"
            )
        # LeaderWorkerSet 0.8 starts a surge group only while more groups than maxSurge are out of date
        # (rollingUpdateParameters: a new rollout counts every group unready, and releases the burst when that count
        # is <= maxSurge): with one group it never surges, and with maxUnavailable 0 its partition never moves.
        single_group_lws = plan.multi_node and plan.min_replicas <= LWS_SURGE_GROUPS
        if single_group_lws:
            rollout = RolloutPlan(0, 1, (
                f"replace the group (maxSurge 0, maxUnavailable 1): {name} can run a single LeaderWorkerSet group "
                f"({_min_setting(plan, index)} {plan.min_replicas}), and LeaderWorkerSet surges only while more "
                "groups than maxSurge are out of date, so a surging rollout of one group would never start"),
                max_replicas, capacity)
            warnings.append(
                f"{rollout.reason}; every rollout at one group stops it before the new one is ready, an outage of "
                f"about {plan.startup_budget_seconds} s (the startup budget); run at least 2 replicas, on a pool with "
                "room for a third group, to roll without one")
        elif replicas_held >= max_replicas and spare >= 1:
            packing.place(plan.pod_resources, size)
            placed.append((plan.pod_resources, size))
            rollout = RolloutPlan(1, 0, (
                f"surge (maxSurge 1, maxUnavailable 0): at max scale ({max_setting} {max_replicas}) {pool_text} holds "
                f"{capacity} replica(s) of {name}, so a new replica starts before an old one stops"), max_replicas,
                capacity)
        else:
            restore = nodes_needed(node, placed + [(plan.pod_resources, size)])
            rollout = RolloutPlan(0, 1, (
                f"replace one replica at a time (maxSurge 0, maxUnavailable 1): at max scale ({max_setting} "
                f"{max_replicas}) {pool_text} holds {capacity} replica(s) of {name}, no room for a surge replica, "
                "so a surging rollout would wait forever at full scale"), max_replicas, capacity)
            warnings.append(f"{rollout.reason}; each rollout step takes one replica out of service until its "
                            f"replacement is ready; raise {shape.count_setting} to {restore} to restore surge")
            if max_replicas == 1:
                warnings.append(
                    f"{name} runs a single replica and its pool has no room for a second: every rollout stops it "
                    f"before the new one is ready, an outage of about {plan.startup_budget_seconds} s (the startup "
                    f"budget); raise {shape.count_setting} to {restore} to keep it serving"
                )
        warnings += _node_pool_warnings(spec, shape, plan)
        result.append(replace(plan, node_shape=shape, rollout=rollout, warnings=warnings))
    return result


def _node_pool_warnings(spec: DeploymentSpec, shape: NodeShape, plan: ServingPlan) -> list[str]:
    """A Karpenter / Auto Mode pool whose consolidate_after_seconds (set by hand) is shorter than this model's startup
    budget: an empty node goes before a new replica could have loaded on it (the policy pack refuses it too)."""
    if shape.provisioner not in NODEPOOL_PROVISIONERS or not isinstance(spec.cluster, EksCluster):
        return []
    pool = next((p for p in spec.cluster.node_pools if p.name == shape.pool), None)
    if pool is None or pool.consolidate_after_seconds is None:
        return []
    if pool.consolidate_after_seconds >= plan.startup_budget_seconds:
        return []
    return [f"{shape.setting}.consolidate_after_seconds {pool.consolidate_after_seconds} is shorter than the "
            f"{plan.startup_budget_seconds} s startup budget of {plan.spec.name}: Karpenter removes an empty GPU node "
            "before a new replica could have loaded on it; leave it unset (the startup budget) or raise it"]


def _min_scale_issues(spec: DeploymentSpec, plans: list[ServingPlan], prefix: str) -> list[PlanningError]:
    """A stated pool must hold every model on it at its minimum replicas, or the stack never becomes ready."""
    issues = []
    for on_pool in _by_pool(plans).values():
        shape = on_pool[0].node_shape
        if not shape.stated or shape.count_setting is None:
            continue
        needed = nodes_needed(shape.allocatable, [(p.pod_resources, p.min_replicas * p.layout.size) for p in on_pool])
        if needed is not None and needed > shape.max_nodes:
            kind = shape.instance_type or shape.pool
            names = ", ".join(plan.spec.name for plan in on_pool)
            verb = "needs" if len(on_pool) == 1 else "need"
            whose = "its" if len(on_pool) == 1 else "their"
            layout = "; ".join(f"{p.spec.name}: {p.min_replicas} x {p.layout.size} pod(s), {_per_node(shape, p)}"
                               for p in on_pool)
            issues.append(PlanningError(
                f"{prefix}{shape.count_setting}", shape.max_nodes,
                f"{names} {verb} {needed} node(s) of {kind} at {whose} minimum replicas ({layout})",
                f"use {shape.count_setting.rsplit('.', 1)[1]} >= {needed}",
            ))
    return issues


def check_deployment(spec: DeploymentSpec, root: str = "") -> list[PlanningError]:
    """Every cross-setting problem of a stack, each addressed to the setting to change."""
    prefix = f"{root}." if root else ""
    issues: list[PlanningError] = []
    try:
        stated_shapes(spec)
    except PlanningError:
        issues += _stated_node_issues(spec, prefix)
    if issues:
        return issues
    plans = []
    for index, shape in enumerate(_model_shapes(spec)):
        model = spec.models[index]
        issues += _secret_issues(spec, f"{prefix}models[{index}].api_key", model.api_key)
        issues += _secret_issues(spec, f"{prefix}models[{index}].storage.hf_token", model.storage.hf_token)
        try:
            if isinstance(shape, PlanningError):
                raise shape
            plans.append(_plan_pods(spec, index, shape))
        except PlanningError as error:
            issues.append(error.at(prefix + error.setting) if prefix else error)
    if not issues:
        issues += _min_scale_issues(spec, plans, prefix)
    return issues


def _stated_node_issues(spec: DeploymentSpec, prefix: str) -> list[PlanningError]:
    """Unknown instance types or GPUs of the stated nodes, each at its setting."""
    issues = []
    entries: list[tuple[str, str | None, str | None]]
    if isinstance(spec.cluster, EksCluster):
        for j, pool in enumerate(spec.cluster.node_pools):
            try:
                pool_instances(pool)
            except PlanningError as error:
                issues.append(error.at(f"{prefix}cluster.node_pools[{j}].{error.setting}"))
        return issues
    else:
        entries = [(f"cluster.nodes[{j}]", nodes.instance_type, nodes.gpu)
                   for j, nodes in enumerate(spec.cluster.nodes)]
    for setting, instance_type, gpu in entries:
        try:
            if instance_type is not None:
                find_instance(instance_type)
            if gpu is not None:
                find_gpu(gpu)
        except PlanningError as error:
            field_name = "instance_type" if instance_type is not None else "gpu"
            issues.append(error.at(f"{prefix}{setting}.{field_name}"))
    return issues


def plan_deployment(spec: DeploymentSpec) -> list[ServingPlan]:
    """Serving plans for every model of a validated spec (``parse_deployment`` already checked they resolve)."""
    plans = []
    for index, shape in enumerate(_model_shapes(spec)):
        if isinstance(shape, PlanningError):
            raise shape
        plans.append(_plan_pods(spec, index, shape))
    indices = {model.name: index for index, model in enumerate(spec.models)}
    decided = {plan.spec.name: plan for on_pool in _by_pool(plans).values()
               for plan in _pool_plans(spec, on_pool[0].node_shape, on_pool, indices)}
    return [decided[plan.spec.name] for plan in plans]


def plan_model(spec: DeploymentSpec, index: int) -> ServingPlan:
    """One model's plan (its rollout depends on the other models on its pool, so the whole stack is planned)."""
    return plan_deployment(spec)[index]


def node_shapes(spec: DeploymentSpec) -> list[NodeShape]:
    """Every pool of the stack, stated or assumed, in order: the stated pools, then the assumed ones by model.

    Assumed pools carry the node count the planner assumed for them (every model on them at max scale plus a surge
    replica each), so a simulated cluster built from these shapes is the cluster the plan was made for.
    """
    shapes = {shape.pool: shape for shape in stated_shapes(spec)}
    for plan in plan_deployment(spec):
        shapes.setdefault(plan.node_shape.pool, plan.node_shape)
    return list(shapes.values())


def node_shape_for(spec: DeploymentSpec, model_index: int) -> NodeShape:
    """The pool a model's serving pods land on (with the planner's node count when assumed)."""
    return plan_deployment(spec)[model_index].node_shape
