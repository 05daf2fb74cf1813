"""KV-cache capacity (runtime.planning.capacity): one --max-model-len sequence fits, within the model's context, and so do
--max-num-seqs sequences at full length."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.facts import PlanResult, capacity_plan
from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.pods import env_by_name
from vllm_pulumi.policies.rule_types import Rule, Violation, cannot_check, rule
from vllm_pulumi.policies.values import mapping
from vllm_pulumi.policies.workload import Resource, Server

LONG_CONTEXT_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
"""vLLM's switch that lets --max-model-len exceed the model's max_position_embeddings (for RoPE-scaled models)."""


def _allows_long_context(container: dict[str, Any]) -> bool:
    value = mapping(env_by_name(container).get(LONG_CONTEXT_ENV)).get("value")
    return str(value).strip().lower() in ("1", "true")


def _unplanned(result: PlanResult, what: str) -> Iterator[Violation]:
    """The "cannot check" finding of a server the planner has no plan for; none when it refused the settings outright
    (an invalid TP size: the GPU rules report that)."""
    if not result.refused:
        yield cannot_check(what, result.problem)


def _capacity_fix(server: Server, estimated_max_model_len: int) -> str:
    """Only the remedies the manifest does not already use."""
    steps = [f"set --max-model-len={estimated_max_model_len} or less"]
    if (server.command.value("kv-cache-dtype") or "auto") == "auto":
        steps.append("add --kv-cache-dtype=fp8")
    steps.append("raise --tensor-parallel-size")
    return ", ".join(steps[:-1]) + ", or " + steps[-1]


@rule("kv-cache-fits", group="Capacity", enforcement="mandatory", severity="high", kinds=SERVING_KINDS)
def kv_cache_fits(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """With the model, GPU and engine flags, the KV cache holds at least one --max-model-len sequence
    (runtime.planning.capacity.plan_capacity), and max-model-len is within the model's context.

    Why: vLLM refuses to start when the KV cache cannot hold one full-length sequence; the pod crash-loops after every
    load.

    Fix: Lower --max-model-len, use --kv-cache-dtype=fp8, or add GPUs (tensor parallelism).
    """
    for server in res.servers:
        result = capacity_plan(server)
        if result.plan is None:
            yield from _unplanned(result, "KV-cache capacity")
            continue
        plan = result.plan
        model = server.model
        reasons = list(plan.reasons)
        context = [r for r in reasons if "max_position_embeddings" in r]
        if context and model is not None:
            reasons = [r for r in reasons if r not in context]
            if not _allows_long_context(server.container):
                yield Violation(
                    f"{server.where}: --max-model-len {plan.max_model_len:,} is longer than {model.name}'s "
                    f"max_position_embeddings {model.max_position_embeddings:,}: vLLM refuses to start",
                    f"set --max-model-len={model.max_position_embeddings} or less (the model's limit); only with "
                    "RoPE scaling for longer contexts (--hf-overrides with rope_scaling) set "
                    f"{LONG_CONTEXT_ENV}=1 to allow the longer length",
                )
        if reasons:
            plan_text = "; ".join(reasons)
            yield Violation(
                f"{server.where}: {plan_text} ({plan.model} on {plan.tensor_parallel_size * plan.pipeline_parallel_size} x {plan.gpu}, "
                f"{plan.kv_cache_bytes_per_gpu / 1024**3:.2f} GiB KV cache per GPU)",
                _capacity_fix(server, plan.estimated_max_model_len) if plan.kv_cache_tokens else
                "the weights do not leave room for a KV cache: raise --tensor-parallel-size (more GPUs), use a larger "
                "GPU or a quantised (fp8/AWQ) checkpoint",
            )



@rule("kv-cache-concurrency", group="Capacity", enforcement="advisory", severity="low", kinds=SERVING_KINDS)
def kv_cache_concurrency(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """When --max-num-seqs is set, the KV cache holds that many sequences at --max-model-len.

    Why: Sequences beyond what the cache holds wait or get preempted (recomputed), so the configured batch size is never
    reached at full length and latency grows.

    Fix: Lower --max-num-seqs to the number in the message, or add KV cache (fp8, more GPUs).
    """
    for server in res.servers:
        if not server.command.has("max-num-seqs"):
            continue
        result = capacity_plan(server)
        if result.plan is None:
            yield from _unplanned(result, "KV-cache concurrency")
            continue
        plan = result.plan
        if plan.fits and plan.max_full_length_sequences < plan.max_num_seqs:
            yield Violation(
                f"{server.where}: --max-num-seqs {plan.max_num_seqs} at --max-model-len {plan.max_model_len:,} "
                f"needs more KV cache than the {plan.kv_cache_tokens:,} tokens available: at most "
                f"{plan.max_full_length_sequences} run at full length at once",
                f"set --max-num-seqs={max(1, plan.max_full_length_sequences)} or accept preemption at full length",
            )


RULES: tuple[Rule, ...] = (kv_cache_fits, kv_cache_concurrency)
"""This topic's rules, in the order the registry lists them."""
