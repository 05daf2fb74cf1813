"""The plans the builders read: one ServingPlan per model, with every derived setting resolved.

Each derived setting (GPU count, layout, /dev/shm, startup budget and probe windows, grace period, PVC size,
requests, autoscaler cooldown) is computed from the model and hardware facts by the planning module named for its
concern (replica, resources, lifecycle, storage, autoscaling, interconnect, rollout), and a stack can override it in
the spec. The node shape a model's pods land on comes from runtime/planning/nodes.py; node_fit.py refuses a pod no
node of it can take, and rollout.py derives the rollout strategy from the room the pool has at max scale
(docs/placement.md). Builders only read a ServingPlan; they do no arithmetic of their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vllm_pulumi.runtime.facts.gpus import GpuFacts
from vllm_pulumi.runtime.facts.models import ModelFacts
from vllm_pulumi.runtime.planning.autoscaling import AutoscalingPlan
from vllm_pulumi.runtime.planning.capacity import CapacityPlan
from vllm_pulumi.runtime.planning.lifecycle import (
    LIVENESS_PROBE_PERIOD_SECONDS,
    PROGRESS_SLACK_SECONDS,
    STARTUP_PROBE_PERIOD_SECONDS,
)
from vllm_pulumi.runtime.planning.nodes import NodeShape, Resources
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout
from vllm_pulumi.runtime.planning.resources import WRITABLE_LAYER_GIB
from vllm_pulumi.runtime.planning.startup import StartupBudget
from vllm_pulumi.runtime.planning.storage import compile_cache_dir, streamer_concurrency, uses_model_volume
from vllm_pulumi.runtime.spec.engine import ExecutorBackend
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


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
    autoscaling: AutoscalingPlan | None
    """The ScaledObject's derived numbers; None without autoscaling."""
    node_shape: NodeShape
    """The pool the serving pods land on (stated by the stack, or assumed: then node_shape.stated is False)."""
    rollout: RolloutPlan
    warnings: list[str] = field(default_factory=list)
    efa_devices_per_pod: int = 0
    """vpc.amazonaws.com/efa devices each serving pod requests (replicas spanning EFA nodes only)."""

    @property
    def cooldown_seconds(self) -> int | None:
        return self.autoscaling.cooldown_seconds if self.autoscaling else None

    @property
    def startup_probe_failure_threshold(self) -> int:
        return math.ceil(self.startup_budget_seconds / STARTUP_PROBE_PERIOD_SECONDS)

    @property
    def progress_deadline_seconds(self) -> int:
        """How long a rollout may go without progress (the Deployment's progressDeadlineSeconds) and Pulumi waits for
        the workload: the startup budget plus PROGRESS_SLACK_SECONDS for what comes before the startup probe's clock
        starts (scheduling, a cold image pull, volume attach), instead of Pulumi's 10-minute default."""
        return self.startup_budget_seconds + PROGRESS_SLACK_SECONDS

    @property
    def liveness_probe_failure_threshold(self) -> int:
        """Liveness must not fire before a drain can finish: its window covers the whole grace period."""
        return math.ceil(self.termination_grace_period_seconds / LIVENESS_PROBE_PERIOD_SECONDS) + 1

    @property
    def worker_pre_stop_sleep_seconds(self) -> int:
        """LWS workers keep their GPUs until the leader's preStop and drain are over (grace > this, checked by
        planning/lifecycle.py)."""
        return self.pre_stop_sleep_seconds + self.shutdown_timeout_seconds

    @property
    def uses_pvc(self) -> bool:
        return uses_model_volume(self.spec.storage)

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


def runai_streamer_concurrency(plan: ServingPlan) -> int | None:
    """RUNAI_STREAMER_CONCURRENCY when the pods stream: the stack's, else the shared file system's (None on S3, where
    vLLM's own default applies)."""
    return streamer_concurrency(plan.spec)


def compile_cache_key(plan: ServingPlan) -> str | None:
    """Directory of the shared compile cache on the model volume (planning/storage.py compile_cache_dir); None: pods
    keep their caches in their own emptyDir."""
    return compile_cache_dir(plan.spec, plan.gpu.id)
