"""Probes, drain and grace of a serving pod: the startup budget the startup probe waits for, the preStop sleep and
vLLM's drain before SIGKILL, and how many pods a voluntary eviction may take.

The startup budget comes by phase from runtime/planning/startup.py; a stack may override it and the grace period
(``models[].lifecycle``), and the grace period must outlast preStop plus the drain.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.replica import ReplicaEngine
from vllm_pulumi.runtime.planning.startup import StartupBudget, startup_budget
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec

# Probe cadences: startup polls every 10 s; readiness every 5 s so a drained pod leaves endpoints fast.
STARTUP_PROBE_PERIOD_SECONDS = 10
READINESS_PROBE_PERIOD_SECONDS = 5
LIVENESS_PROBE_PERIOD_SECONDS = 10
PROBE_TIMEOUT_SECONDS = 5
# Scheduling, a cold pull of the ~20 GB vLLM image and volume attach happen before the startup probe's clock starts.
PROGRESS_SLACK_SECONDS = 900
# Voluntary evictions (node drains, scale-down) take at most one replica's pod at a time: the same bound a rollout
# keeps, whether it surges (none down) or replaces one replica at a time (one down); never blocks a drain.
PDB_MAX_UNAVAILABLE = 1


@dataclass(frozen=True)
class LifecyclePlan:
    """How long a serving pod may take to start, and to stop."""

    startup_budget_seconds: int
    """What the startup probe waits for: the stack's lifecycle.startup_budget_seconds, else the phased budget."""
    pre_stop_sleep_seconds: int
    shutdown_timeout_seconds: int
    """vLLM's drain on SIGTERM (engine.shutdown_timeout_seconds)."""
    termination_grace_period_seconds: int
    """The stack's, else preStop + drain + margin."""


def serving_startup_budget(model: ModelDeploymentSpec, replica: ReplicaEngine, shape: NodeShape,
                           runai_streamer: bool) -> StartupBudget:
    """The phased startup budget of this model's serving pods on their pool."""
    layout, facts = replica.layout, replica.model
    return startup_budget(
        facts.checkpoint_bytes, model.storage.kind, pods_per_replica=layout.size,
        read_gb_per_second=model.storage.read_gb_per_second, num_hidden_layers=facts.num_hidden_layers,
        max_num_seqs=replica.capacity.max_num_seqs, gpus_per_replica=layout.gpus_per_pod * layout.size,
        gpu_id=replica.gpu.id, runai_streamer=runai_streamer, compile_cache_warm=model.lifecycle.compile_cache_warm,
        enforce_eager="--enforce-eager" in model.engine.extra_args,
        # Nodes the stack states exist already; node pools (and nodes assumed from the GPU) may have to be made.
        nodes_provisioned=not (shape.provisioner == "existing" and shape.setting is not None),
    )


def plan_lifecycle(model: ModelDeploymentSpec, budget: StartupBudget, path: str) -> LifecyclePlan:
    """The startup budget and grace period; refuses a grace period that kills the pod before its drain is over."""
    lifecycle, engine = model.lifecycle, model.engine
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
    return LifecyclePlan(
        startup_budget_seconds=lifecycle.startup_budget_seconds or budget.total_seconds,
        pre_stop_sleep_seconds=lifecycle.pre_stop_sleep_seconds,
        shutdown_timeout_seconds=engine.shutdown_timeout_seconds,
        termination_grace_period_seconds=grace,
    )
