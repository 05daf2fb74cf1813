"""Small builders for test inputs: a valid stack with a few settings changed, and its plans."""

from __future__ import annotations

import copy
from typing import Any

from vllm_pulumi.components.builders.addons import deep_merge
from vllm_pulumi.runtime.planning.deployment import load_deployment, plan_deployment
from vllm_pulumi.runtime.planning.plans import ServingPlan
from vllm_pulumi.runtime.spec.deployment import DeploymentSpec

MODEL: dict[str, Any] = {
    "name": "llm",
    "model": "llama-3.1-8b",
    "gpu": "l4",
    "gpus_per_node": 1,
    "engine": {"max_model_len": 8192, "kv_cache_dtype": "fp8", "max_num_seqs": 16},
    "storage": {"kind": "efs", "storage_class": "efs-sc"},
}
STACK: dict[str, Any] = {
    "namespace": "inference",
    "cluster": {"mode": "kubeconfig"},
    "addons": {"gpu_operator": {"install": False}, "keda": {"install": False}, "lws": {"install": False}},
}
MULTINODE_MODEL: dict[str, Any] = {
    "name": "big",
    "model": "llama-3.1-405b",
    "gpu": "h100-sxm",
    "engine": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "max_model_len": 16384, "max_num_seqs": 32},
    "storage": {"kind": "fsx-lustre", "storage_class": "fsx-sc"},
}


def stack(model: dict[str, Any] | None = None, base_model: dict[str, Any] | None = None,
          **settings: Any) -> DeploymentSpec:
    """A kubeconfig stack with one model: ``base_model`` (default MODEL) with ``model`` merged over it."""
    raw = deep_merge(STACK, settings)
    raw["models"] = [deep_merge(copy.deepcopy(base_model or MODEL), model or {})]
    return load_deployment(raw).spec


def plan(model: dict[str, Any] | None = None, base_model: dict[str, Any] | None = None, **settings: Any) -> ServingPlan:
    return plan_deployment(stack(model, base_model, **settings))[0]
