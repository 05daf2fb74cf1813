"""Parallelism checks the way vLLM makes them at startup, made before anything is deployed.

vLLM refuses at config time a tensor-parallel size that does not divide the attention heads
(``ModelConfig.verify_with_parallel_config``), and fails while loading weights when the KV heads or the MLP width
cannot be split evenly (the ``divide`` asserts of its parallel linear layers). Both are startup failures after
minutes of scheduling and downloading, so we check them here, and say which sizes would work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.models import ModelFacts

Layout = Literal["single-pod", "leader-worker-set"]


def pipeline_stage_layers(num_layers: int, pipeline_parallel_size: int) -> list[int]:
    """Layers on each pipeline stage, as vLLM's ``get_pp_indices`` splits them (the remainder goes to the later
    stages but the last, which also holds the LM head)."""
    partitions = [num_layers // pipeline_parallel_size] * pipeline_parallel_size
    remaining = num_layers % pipeline_parallel_size
    for i in range(2, remaining + 2):
        partitions[-i] += 1
    return partitions


def tensor_parallel_problems(model: ModelFacts, tensor_parallel_size: int) -> list[str]:
    """Why vLLM would refuse this tensor-parallel size for this model; empty when it would start."""
    tp = tensor_parallel_size
    problems = []
    if model.num_attention_heads % tp:
        problems.append(
            f"total number of attention heads ({model.num_attention_heads}) must be divisible by tensor parallel "
            f"size ({tp})"
        )
    if model.attention != "mla":
        kv = model.num_key_value_heads
        if tp >= kv and tp % kv:
            problems.append(f"tensor parallel size ({tp}) must be a multiple of the {kv} KV heads to replicate them")
        elif tp < kv and kv % tp:
            problems.append(f"the {kv} KV heads cannot be split evenly over tensor parallel size {tp}")
    if any(model.is_dense_layer(i) for i in range(model.num_hidden_layers)) and model.intermediate_size % tp:
        problems.append(f"MLP width ({model.intermediate_size}) is not divisible by tensor parallel size ({tp})")
    if model.is_moe and model.moe_intermediate_size % tp:
        problems.append(
            f"expert MLP width ({model.moe_intermediate_size}) is not divisible by tensor parallel size ({tp})"
        )
    return problems


def valid_tensor_parallel_sizes(model: ModelFacts, limit: int) -> list[int]:
    return [tp for tp in range(1, limit + 1) if not tensor_parallel_problems(model, tp)]


@dataclass(frozen=True)
class ParallelLayout:
    """How one replica's GPUs are laid out over pods."""

    layout: Layout
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_pod: int
    size: int
    """LeaderWorkerSet group size (pods per replica, leader included); 1 for a single pod."""

    @property
    def gpus_per_replica(self) -> int:
        return self.gpus_per_pod * self.size


def plan_layout(
    model: ModelFacts,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    gpus_per_node: int,
    *,
    setting: str = "tensor_parallel_size",
) -> ParallelLayout:
    """Check TP/PP against the model and the node, and choose single-pod or LeaderWorkerSet.

    One pod holds all of a replica's GPUs when they fit on one node (no Ray, no LWS: the simpler path). Otherwise the
    replica spans ``size`` nodes of ``gpus_per_node`` GPUs each, which needs TP x PP to be a multiple of the node's
    GPUs.
    """
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    problems = tensor_parallel_problems(model, tp)
    if problems:
        valid = valid_tensor_parallel_sizes(model, max(tp, gpus_per_node) * 2)
        raise PlanningError(
            setting, tp, "; ".join(problems) + f" ({model.name})",
            f"valid tensor_parallel_size values for this model: {', '.join(map(str, valid))}",
        )
    if pp > model.num_hidden_layers:
        raise PlanningError(
            "pipeline_parallel_size", pp, f"more stages than the model's {model.num_hidden_layers} layers",
            f"use at most {model.num_hidden_layers}",
        )
    total = tp * pp
    if total <= gpus_per_node:
        return ParallelLayout("single-pod", tp, pp, total, 1)
    if total % gpus_per_node:
        fits = [n * gpus_per_node for n in range(1, 5)]
        raise PlanningError(
            setting, tp,
            f"tensor_parallel_size x pipeline_parallel_size = {total} GPUs is more than one node's {gpus_per_node} "
            f"and not a multiple of it, so the replica cannot be split into whole-node pods",
            f"use TP x PP <= {gpus_per_node} for one pod, or one of {fits} for a LeaderWorkerSet "
            f"(typically tensor_parallel_size={gpus_per_node} and pipeline_parallel_size=nodes)",
        )
    return ParallelLayout("leader-worker-set", tp, pp, gpus_per_node, total // gpus_per_node)
