"""Numbers rules derive from a server's facts with the runtime layer: the startup budget and the KV-cache plan.

Kept apart from the rules so each is computed once per distinct setting (1,000 copies of one manifest plan once).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, get_args

from pydantic import ValidationError

from vllm_pulumi.policies.pods import env_by_name
from vllm_pulumi.policies.values import as_float, as_int, mapping
from vllm_pulumi.policies.workload import Resource, Server
from vllm_pulumi.runtime import annotations as ann
from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import find_gpu
from vllm_pulumi.runtime.facts.models import ModelFacts
from vllm_pulumi.runtime.planning.capacity import CapacityPlan, plan_capacity
from vllm_pulumi.runtime.planning.startup import FALLBACK_MAX_NUM_SEQS, STORAGE_READ_GB_PER_SECOND, startup_budget
from vllm_pulumi.runtime.spec.engine import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    EngineSettings,
    KvCacheDtype,
    vllm_batch_defaults,
)

_KV_DTYPES = frozenset(get_args(KvCacheDtype))


def parse_tokens(text: str | None) -> int | None:
    """vLLM's human-readable token counts: ``32768``, ``32k`` (x1000), ``32K`` (x1024), ``1m`` / ``1M``."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3, "G": 1024**3}[unit]
    return int(number * scale)


@dataclass(frozen=True)
class Budget:
    seconds: int | None
    basis: str
    """How the budget was obtained (or why it could not be)."""


def storage_kind(server: Server, default: str) -> str:
    declared = server.annotations.get(ann.STORAGE_KIND)
    if declared:
        return declared
    ref = server.command.model_ref or ""
    if ref.startswith("s3://") or (server.command.value("load-format") or "").startswith("runai_streamer"):
        return "s3-runai-streamer"
    if ref.startswith("/"):
        return default
    offline = mapping(env_by_name(server.container).get("HF_HUB_OFFLINE")).get("value")
    if str(offline).strip().lower() in ("1", "true", "yes", "on"):
        return default  # read from a Hugging Face cache on a volume, never downloaded at start
    return "hf-download"


def startup_budget_for(resource: Resource, server: Server, settings: Mapping[str, Any]) -> Budget:
    declared = as_int(server.annotations.get(ann.STARTUP_BUDGET_SECONDS))
    if declared is not None:
        return Budget(declared, f"the {ann.STARTUP_BUDGET_SECONDS} annotation")
    if server.model is None:
        return Budget(None, server.model_problem)
    kind = storage_kind(server, str(settings.get("default_storage_kind", "local-nvme")))
    if kind not in STORAGE_READ_GB_PER_SECOND:
        return Budget(None, f"storage kind {kind!r} is unknown (known: {', '.join(sorted(STORAGE_READ_GB_PER_SECOND))})")
    pods = resource.lws_size or 1 if resource.is_lws else 1
    command = server.command
    tp, pp = server.tensor_parallel_size or 1, server.pipeline_parallel_size or 1
    # Without --max-num-seqs the GPU's default applies; with the GPU unknown, vLLM's largest default (more graphs).
    default_seqs = vllm_batch_defaults(server.gpu.memory_gib, server.gpu.product_label)[0] if server.gpu is not None else FALLBACK_MAX_NUM_SEQS
    max_num_seqs = command.int_flag("max-num-seqs", default_seqs) or default_seqs
    streamer = (command.value("load-format") or "").startswith("runai_streamer")
    # Same function, same inputs the program derives from; the compile cache counts cold (a policy cannot know
    # whether a cache is warm; the program's own annotation carries a declared warm budget).
    budget = startup_budget(
        server.model.checkpoint_bytes, kind, pods_per_replica=pods,  # type: ignore[arg-type]
        num_hidden_layers=server.model.num_hidden_layers, max_num_seqs=max_num_seqs, gpus_per_replica=tp * pp,
        gpu_id=server.gpu.id if server.gpu is not None else None, runai_streamer=streamer,
        enforce_eager=command.has("enforce-eager"),
    )
    phases = " + ".join(f"{phase.name} {phase.seconds:.0f} s ({phase.basis})" for phase in budget.phases)
    return Budget(budget.total_seconds, f"{server.model.name}: ({phases}) x{budget.safety_factor}")


@dataclass(frozen=True)
class PlanResult:
    plan: CapacityPlan | None
    problem: str
    """Why there is no plan; empty when there is one."""
    refused: bool = False
    """The planner refused the settings outright (an invalid TP size): another rule reports that."""


_KV_LAYOUT_FLAGS = ("disable-hybrid-kv-cache-manager", "no-async-scheduling")


@lru_cache(maxsize=512)
def _plan(model: ModelFacts, gpu_id: str, key: tuple[Any, ...]) -> PlanResult:
    gpu = find_gpu(gpu_id)
    tp, pp, max_len, seqs, batched, utilization, kv_dtype, kv_flags = key
    try:
        engine = EngineSettings(
            tensor_parallel_size=tp, pipeline_parallel_size=pp, max_model_len=max_len, max_num_seqs=seqs,
            max_num_batched_tokens=batched, gpu_memory_utilization=utilization, kv_cache_dtype=kv_dtype,
            extra_args=list(kv_flags),
        )
    except ValidationError as error:
        return PlanResult(None, "engine settings out of range: " + "; ".join(e["msg"] for e in error.errors()))
    try:
        return PlanResult(plan_capacity(model, gpu, engine), "")
    except PlanningError as error:
        return PlanResult(None, error.reason, refused=True)


def capacity_plan(server: Server) -> PlanResult:
    if server.model is None:
        return PlanResult(None, server.model_problem)
    if server.gpu is None:
        return PlanResult(None, server.gpu_problem)
    command = server.command
    if command.has("kv-cache-memory-bytes"):
        return PlanResult(None, "--kv-cache-memory-bytes sets the KV cache directly; the planner models utilization")
    tp, pp = server.tensor_parallel_size, server.pipeline_parallel_size
    if tp is None or pp is None:
        return PlanResult(None, "--tensor-parallel-size / --pipeline-parallel-size are not literal integers")
    values: dict[str, int | None] = {}
    for flag in ("max-model-len", "max-num-seqs", "max-num-batched-tokens"):
        values[flag] = parse_tokens(command.value(flag)) if command.has(flag) else None
        if command.has(flag) and values[flag] is None:
            return PlanResult(None, f"--{flag} {command.value(flag)!r} is not a number")
    utilization = (as_float(command.value("gpu-memory-utilization")) if command.has("gpu-memory-utilization")
                   else DEFAULT_GPU_MEMORY_UTILIZATION)
    if utilization is None:
        return PlanResult(None, "--gpu-memory-utilization is not a number")
    kv_dtype = command.value("kv-cache-dtype") or "auto"
    if kv_dtype not in _KV_DTYPES:
        return PlanResult(None, f"--kv-cache-dtype {kv_dtype!r} is not one the planner knows")
    # Flags that change how vLLM sizes sliding-window layers and in-flight tokens (runtime.planning.kvcache).
    kv_flags = tuple(f"--{flag}" for flag in _KV_LAYOUT_FLAGS if command.has(flag))
    key = (tp, pp, values["max-model-len"], values["max-num-seqs"], values["max-num-batched-tokens"], utilization,
           kv_dtype, kv_flags)
    return _plan(server.model, server.gpu.id, key)
