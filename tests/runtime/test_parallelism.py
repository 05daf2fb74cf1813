"""Parallelism checks made before deploy, the way vLLM makes them at startup."""

from __future__ import annotations

import pytest

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.models import catalog_model
from vllm_pulumi.runtime.planning.parallelism import plan_layout, tensor_parallel_problems, valid_tensor_parallel_sizes


@pytest.mark.parametrize(
    ("case", "catalog_id", "tp", "problem"),
    [
        ("seed scenario B: 64 heads over 5 GPUs", "llama-3-70b", 5,
         "total number of attention heads (64) must be divisible by tensor parallel size (5)"),
        ("qwen2.5 7b: 28 heads divide by 7 but 4 kv heads do not replicate to 7", "qwen2.5-7b", 7,
         "must be a multiple of the 4 KV heads"),
        ("qwen2.5 7b: 3 does not divide 28 heads", "qwen2.5-7b", 3, "(28) must be divisible"),
        ("mixtral expert width 14336 is not divisible by 3 either", "mixtral-8x7b", 3, "expert MLP width"),
    ],
)
def test_tensor_parallel_sizes_vllm_refuses(case: str, catalog_id: str, tp: int, problem: str) -> None:
    problems = tensor_parallel_problems(catalog_model(catalog_id), tp)
    assert any(problem in text for text in problems), problems


@pytest.mark.parametrize(
    ("catalog_id", "tp"),
    [("llama-3-70b", 8), ("llama-3-70b", 16), ("qwen2.5-7b", 4), ("deepseek-v3", 8), ("qwen3-30b-a3b", 4)],
)
def test_tensor_parallel_sizes_vllm_accepts(catalog_id: str, tp: int) -> None:
    assert tensor_parallel_problems(catalog_model(catalog_id), tp) == []


def test_valid_sizes_are_suggested_for_a_refused_one() -> None:
    with pytest.raises(PlanningError) as raised:
        plan_layout(catalog_model("llama-3-70b"), 5, 1, gpus_per_node=8)
    assert raised.value.alternative == "valid tensor_parallel_size values for this model: 1, 2, 4, 8, 16"
    assert valid_tensor_parallel_sizes(catalog_model("qwen2.5-7b"), 8) == [1, 2, 4]


@pytest.mark.parametrize(
    ("case", "tp", "pp", "gpus_per_node", "layout", "gpus_per_pod", "size"),
    [
        ("one gpu", 1, 1, 1, "single-pod", 1, 1),
        ("tp fills an 8-gpu node: one pod, no ray", 8, 1, 8, "single-pod", 8, 1),
        ("tp 4 on an 8-gpu node still one pod", 4, 1, 8, "single-pod", 4, 1),
        ("tp 8 x pp 2 over two 8-gpu nodes", 8, 2, 8, "leader-worker-set", 8, 2),
        ("tp 16 over two 8-gpu nodes", 16, 1, 8, "leader-worker-set", 8, 2),
    ],
)
def test_layout_is_single_pod_when_a_node_holds_the_replica(case: str, tp: int, pp: int, gpus_per_node: int,
                                                            layout: str, gpus_per_pod: int, size: int) -> None:
    chosen = plan_layout(catalog_model("llama-3.1-405b"), tp, pp, gpus_per_node)
    assert (chosen.layout, chosen.gpus_per_pod, chosen.size) == (layout, gpus_per_pod, size)
    assert chosen.gpus_per_replica == tp * pp


def test_replica_that_cannot_be_cut_into_whole_nodes_is_refused() -> None:
    with pytest.raises(PlanningError, match="not a multiple of it") as raised:
        plan_layout(catalog_model("llama-3.1-405b"), 4, 3, gpus_per_node=8)
    assert "LeaderWorkerSet" in raised.value.alternative


def test_more_pipeline_stages_than_layers_is_refused() -> None:
    with pytest.raises(PlanningError, match="more stages than the model's 16 layers"):
        plan_layout(catalog_model("llama-3.2-1b"), 1, 17, gpus_per_node=32)
