"""One replica's engine: the model resolved, vLLM's refusals, the parallel layout over the GPUs of the pool, the
KV-cache capacity, and the ``vllm serve`` arguments that follow from them."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GIB, GpuFacts
from vllm_pulumi.runtime.facts.models import ModelFacts, resolve_model
from vllm_pulumi.runtime.facts.vllm_rules import engine_config_problem
from vllm_pulumi.runtime.planning.capacity import CapacityPlan, plan_capacity
from vllm_pulumi.runtime.planning.nodes import NodeShape
from vllm_pulumi.runtime.planning.parallelism import ParallelLayout, plan_layout
from vllm_pulumi.runtime.spec.engine import ExecutorBackend
from vllm_pulumi.runtime.spec.model import ModelDeploymentSpec


@dataclass(frozen=True)
class ReplicaEngine:
    model: ModelFacts
    gpu: GpuFacts
    layout: ParallelLayout
    capacity: CapacityPlan


def plan_replica(model_spec: ModelDeploymentSpec, shape: NodeShape, path: str) -> ReplicaEngine:
    """The model, its GPUs and layout on the pool, and its KV cache; refuses what vLLM would refuse or cannot fit."""
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
    return ReplicaEngine(facts, gpu, layout, capacity)


def serve_args(model_spec: ModelDeploymentSpec, model_ref: str, replica: ReplicaEngine,
               runai_streamer: bool) -> tuple[ExecutorBackend | None, list[str]]:
    """The distributed executor (Ray when a replica spans pods) and the ``vllm serve`` argument list."""
    backend: ExecutorBackend | None = "ray" if replica.layout.layout == "leader-worker-set" else None
    engine = model_spec.engine
    served = model_spec.served_model_name or model_spec.name
    args = engine.to_args(model_ref, served_model_name=served, distributed_executor_backend=backend,
                          max_model_len=replica.capacity.max_model_len)
    if runai_streamer and engine.load_format == "auto":
        args.insert(1, "--load-format=runai_streamer")
    return backend, args
