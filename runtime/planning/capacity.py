"""The KV-cache arithmetic, done the way vLLM does it at startup.

vLLM 0.33 (V1 engine) sizes the KV cache per GPU as::

    kv_cache_memory = total_gpu_memory * gpu_memory_utilization
                      - weights - peak activations of a profiling step - non-torch memory - CUDA graphs

then cuts it into blocks of ``block_size`` tokens, one page per layer. Every GPU of a replica must hold the same
number of blocks, so the stage with the most layers decides. The numbers below follow that, with the overheads that
vLLM measures by profiling replaced by stated estimates (``Overheads``), which a stack can override.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from vllm_pulumi.runtime.errors import PlanningError
from vllm_pulumi.runtime.facts.gpus import GIB, GpuFacts
from vllm_pulumi.runtime.facts.models import ModelFacts
from vllm_pulumi.runtime.planning.kvcache import (
    ASYNC_SCHEDULING_EXTRA_BATCHES,
    KvCacheCapacity,
    KvCacheGroup,
    layer_sliding_windows,
    plan_kv_cache,
)
from vllm_pulumi.runtime.planning.parallelism import pipeline_stage_layers, tensor_parallel_problems
from vllm_pulumi.runtime.spec.engine import MAX_SAFE_GPU_MEMORY_UTILIZATION, EngineSettings

# vLLM's default KV block: 16 tokens per page.
BLOCK_SIZE_TOKENS = 16
# Non-torch memory vLLM sees grow during start-up (cuBLAS workspaces, allocator slack): a measured-typical value.
NON_TORCH_BYTES = int(0.25 * GIB)
# NCCL buffers and communicators once GPUs talk to each other (TP or PP > 1).
NCCL_BYTES = int(0.75 * GIB)
# CUDA graph capture at vLLM's default capture sizes; vLLM 0.33 reserves for it before sizing the KV cache.
CUDA_GRAPH_BYTES = int(0.5 * GIB)
# Activations of the profiling step are kept in the model's 16-bit dtype; the sampler's logits in float32.
ACTIVATION_BYTES = 2
LOGIT_BYTES = 4


@dataclass(frozen=True)
class Overheads:
    """Memory per GPU that is neither weights nor KV cache, in bytes."""

    activation_peak_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.activation_peak_bytes + self.non_torch_bytes + self.cuda_graph_bytes


def estimate_overheads(
    model: ModelFacts, tensor_parallel_size: int, gpus_per_replica: int, max_num_seqs: int, max_num_batched_tokens: int
) -> Overheads:
    """vLLM profiles one step of ``max_num_batched_tokens`` tokens plus a sampler run over ``max_num_seqs`` logits;
    the widest tensors of that step are the MLP's (or the routed experts') up-projection and the logits."""
    mlp_width = max(
        model.intermediate_size if not model.is_moe else 0,
        model.num_experts_per_tok * model.moe_intermediate_size,
    ) // tensor_parallel_size
    step = max_num_batched_tokens * (2 * model.hidden_size + 2 * mlp_width) * ACTIVATION_BYTES
    logits = max_num_seqs * model.vocab_size * LOGIT_BYTES
    non_torch = NON_TORCH_BYTES + (NCCL_BYTES if gpus_per_replica > 1 else 0)
    return Overheads(step + logits, non_torch, CUDA_GRAPH_BYTES)


def _attention_parameters_per_rank(model: ModelFacts, tp: int) -> float:
    if model.attention == "mla":
        h = model.hidden_size
        replicated = h * (model.q_lora_rank or 0) + h * (model.kv_lora_rank + model.qk_rope_head_dim)
        return replicated + (model.attention_parameters() - replicated) / tp
    kv_heads_per_rank = max(1, model.num_key_value_heads // tp)
    q_and_o = 2 * model.hidden_size * model.num_attention_heads * model.head_dim / tp
    k_and_v = 2 * model.hidden_size * kv_heads_per_rank * model.head_dim
    return q_and_o + k_and_v


def weights_bytes_per_stage(model: ModelFacts, tp: int, pp: int) -> list[int]:
    """Weight bytes one GPU of each pipeline stage holds: its layers' shards, plus the vocab-parallel embedding on
    the first stage and LM head on the last (a tied head is a second copy once the stages differ)."""
    linear_bytes = model.weight_bytes_per_parameter
    embed_bytes = model.embedding_bytes_per_parameter
    attention = _attention_parameters_per_rank(model, tp)
    stages = []
    first = 0
    for index, count in enumerate(pipeline_stage_layers(model.num_hidden_layers, pp)):
        layers = range(first, first + count)
        first += count
        sharded = sum(attention + model.mlp_parameters(i) / tp for i in layers) * linear_bytes
        norms = count * 2 * model.hidden_size * embed_bytes
        total = sharded + norms
        vocab_shard = model.embedding_parameters / tp * embed_bytes
        if index == 0:
            total += vocab_shard
        if index == pp - 1 and (not model.tie_word_embeddings or pp > 1):
            total += vocab_shard
        stages.append(int(total))
    return stages


def kv_bytes_per_token_per_gpu(model: ModelFacts, tp: int, pp: int, kv_dtype_bytes: int) -> int:
    """KV bytes one token costs on the busiest GPU: 2 (K and V) x layers on its stage x KV heads per rank x head
    size x dtype bytes. KV heads are replicated when TP exceeds them; MLA caches one latent, not split by TP."""
    layers = max(pipeline_stage_layers(model.num_hidden_layers, pp))
    if model.attention == "mla":
        return layers * model.kv_head_size * kv_dtype_bytes
    kv_heads_per_rank = max(1, model.num_key_value_heads // tp)
    return 2 * layers * kv_heads_per_rank * model.head_dim * kv_dtype_bytes


@dataclass
class CapacityPlan:
    model: str
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus_per_replica: int
    kv_cache_dtype: str
    kv_dtype_bytes: int
    block_size_tokens: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    weights_bytes_per_gpu: int
    activation_peak_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_cache_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_token_per_replica: int
    kv_cache_tokens: int
    """vLLM's "GPU KV cache size" line: sliding-window layers hold only their window (planning/kvcache.py)."""
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_concurrency: float
    """How many max-model-len sequences the KV cache holds at once (vLLM's "Maximum concurrency" line)."""
    max_full_length_sequences: int
    estimated_max_model_len: int
    """Longest max_model_len the KV cache can hold (vLLM suggests this when max-model-len does not fit)."""
    kv_cache_blocks: int
    """Blocks of the shared pool on every GPU; a block holds one page of each layer of the widest KV cache group."""
    kv_cache_group_windows: list[int | None]
    """vLLM's KV cache groups: the sliding window of each (None: full attention)."""
    max_in_flight_tokens: int
    """Tokens scheduled but not yet settled, which sliding-window layers keep on top of their window."""
    fits: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def plan_capacity(
    model: ModelFacts,
    gpu: GpuFacts,
    engine: EngineSettings,
    *,
    overhead_bytes: int | None = None,
) -> CapacityPlan:
    """KV-cache capacity of one replica, and whether the engine would start with these settings.

    Raises PlanningError only for settings vLLM would refuse outright (invalid tensor-parallel size, a model whose
    layers hold no per-token KV cache); a cache too small for max-model-len is a plan with ``fits=False``.
    """
    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    _refuse_unplannable(model, tp)
    max_model_len = engine.max_model_len or model.max_position_embeddings
    max_num_seqs, max_batched = engine.batch_sizes(gpu.memory_gib, gpu.product_label, max_model_len)
    kv_dtype_bytes = engine.kv_dtype_bytes(model.native_dtype_bytes)

    weights = max(weights_bytes_per_stage(model, tp, pp))
    overheads = estimate_overheads(model, tp, tp * pp, max_num_seqs, max_batched)
    usable = math.ceil(gpu.memory_bytes * engine.gpu_memory_utilization)
    other = overhead_bytes if overhead_bytes is not None else overheads.total_bytes
    kv_cache_bytes = usable - weights - other

    kv = _kv_cache(model, engine, kv_dtype_bytes, kv_cache_bytes, max_model_len, max_batched)
    full_sequences = kv.num_blocks // kv.blocks_per_request
    reasons, warnings = _verdict(model, gpu, engine, kv, weights=weights, other=other, usable=usable,
                                 kv_cache_bytes=kv_cache_bytes, max_model_len=max_model_len,
                                 max_num_seqs=max_num_seqs)

    return CapacityPlan(
        model=model.name,
        gpu=gpu.id,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpus_per_replica=tp * pp,
        kv_cache_dtype=engine.kv_cache_dtype,
        kv_dtype_bytes=kv_dtype_bytes,
        block_size_tokens=BLOCK_SIZE_TOKENS,
        gpu_memory_bytes=gpu.memory_bytes,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        weights_bytes_per_gpu=weights,
        activation_peak_bytes=overheads.activation_peak_bytes if overhead_bytes is None else 0,
        non_torch_bytes=overheads.non_torch_bytes if overhead_bytes is None else other,
        cuda_graph_bytes=overheads.cuda_graph_bytes if overhead_bytes is None else 0,
        kv_cache_bytes_per_gpu=max(0, kv_cache_bytes),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(model, tp, pp, kv_dtype_bytes),
        kv_bytes_per_token_per_replica=kv_bytes_per_token_per_gpu(model, tp, 1, kv_dtype_bytes) * tp,
        kv_cache_tokens=kv.kv_cache_tokens,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_batched,
        max_concurrency=round(kv.max_concurrency, 2),
        max_full_length_sequences=full_sequences,
        estimated_max_model_len=kv.estimated_max_model_len,
        kv_cache_blocks=kv.num_blocks,
        kv_cache_group_windows=[group.sliding_window_tokens for group in kv.groups],
        max_in_flight_tokens=kv.max_in_flight_tokens,
        fits=not reasons,
        reasons=reasons,
        warnings=warnings,
    )


def _kv_cache(model: ModelFacts, engine: EngineSettings, kv_dtype_bytes: int, kv_cache_bytes: int, max_model_len: int,
              max_batched: int) -> KvCacheCapacity:
    """vLLM's KV cache groups, blocks and concurrency for this much KV memory per GPU (runtime/planning/kvcache.py)."""
    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    page_bytes = kv_bytes_per_token_per_gpu(model, tp, 1, kv_dtype_bytes) // model.num_hidden_layers * BLOCK_SIZE_TOKENS
    windows = layer_sliding_windows(model.layer_types, model.num_hidden_layers, model.sliding_window,
                                    hybrid_kv_cache_manager="--disable-hybrid-kv-cache-manager" not in engine.extra_args)
    async_batches = 0 if "--no-async-scheduling" in engine.extra_args else ASYNC_SCHEDULING_EXTRA_BATCHES
    return plan_kv_cache(windows, pipeline_stage_layers(model.num_hidden_layers, pp), page_bytes, kv_cache_bytes,
                         max_model_len, max_batched, block_size=BLOCK_SIZE_TOKENS,
                         max_concurrent_batches=pp + async_batches,
                         search_limit=max(max_model_len, model.max_position_embeddings))


def _refuse_unplannable(model: ModelFacts, tp: int) -> None:
    """Settings vLLM refuses outright, and layers whose state this planner does not model."""
    problems = tensor_parallel_problems(model, tp)
    if problems:
        raise PlanningError("tensor_parallel_size", tp, "; ".join(problems) + f" ({model.name})")
    if model.unmodelled_layer_types:
        raise PlanningError(
            "model", model.name,
            f"layer types {', '.join(model.unmodelled_layer_types)} keep a recurrent state instead of a per-token "
            "KV cache, which this planner does not model",
            "plan this model by measuring vLLM's 'GPU KV cache size' log line instead",
        )


def _verdict(model: ModelFacts, gpu: GpuFacts, engine: EngineSettings, kv: KvCacheCapacity, *, weights: int,
             other: int, usable: int, kv_cache_bytes: int, max_model_len: int,
             max_num_seqs: int) -> tuple[list[str], list[str]]:
    """Why the engine would not start (reasons), and what would hurt once it runs (warnings)."""
    reasons: list[str] = []
    warnings: list[str] = []
    full_sequences = kv.num_blocks // kv.blocks_per_request
    if kv_cache_bytes <= 0:
        reasons.append(
            f"no memory left for the KV cache: {usable / GIB:.2f} GiB usable per GPU "
            f"({engine.gpu_memory_utilization} x {gpu.memory_gib:.2f} GiB) minus {weights / GIB:.2f} GiB weights "
            f"and {other / GIB:.2f} GiB overhead leaves {kv_cache_bytes / GIB:.2f} GiB"
        )
    elif not kv.fits:
        reasons.append(
            f"the KV cache holds {kv.kv_cache_tokens:,} tokens, fewer than one max_model_len sequence of "
            f"{max_model_len:,}; lower max_model_len to {kv.estimated_max_model_len:,} or less, use "
            "kv_cache_dtype=fp8, or add GPUs"
        )
    elif full_sequences < max_num_seqs:
        needed = max_num_seqs * kv.blocks_per_request * max(kv.bytes_per_block_by_stage)
        warnings.append(
            f"{max_num_seqs} sequences of {max_model_len:,} tokens need {needed / GIB:.1f} "
            f"GiB of KV cache per GPU but {kv_cache_bytes / GIB:.1f} GiB is available: at most {full_sequences} run at "
            "full length at once; the rest wait or are preempted"
        )
    if max_model_len > model.max_position_embeddings:
        reasons.append(
            f"max_model_len {max_model_len:,} exceeds the model's max_position_embeddings "
            f"{model.max_position_embeddings:,}"
        )
    if engine.gpu_memory_utilization > MAX_SAFE_GPU_MEMORY_UTILIZATION:
        warnings.append(
            f"gpu_memory_utilization {engine.gpu_memory_utilization} leaves under "
            f"{1 - MAX_SAFE_GPU_MEMORY_UTILIZATION:.0%} for allocator fragmentation"
        )
    return reasons, warnings


def concurrency_table(plan: CapacityPlan, context_lengths: list[int]) -> list[tuple[int, int]]:
    """(context length, sequences the KV cache holds at that length), like the seed's concurrency tables."""
    groups = [KvCacheGroup(window, ()) for window in plan.kv_cache_group_windows]
    rows = []
    for length in context_lengths:
        pages = sum(group.pages_per_request(length, plan.block_size_tokens, plan.max_in_flight_tokens) for group in groups)
        rows.append((length, plan.kv_cache_blocks // pages))
    return rows


def decode_time_per_token_floor_seconds(model: ModelFacts, gpu: GpuFacts, engine: EngineSettings,
                                        context_tokens: int) -> float:
    """Lower bound on one decode step at batch size 1: every GPU reads its active weights and the sequence's KV
    from device memory; pipeline stages run one after another, tensor-parallel ranks side by side."""
    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    active_fraction = model.num_active_parameters / model.num_parameters
    weights_per_rank = sum(weights_bytes_per_stage(model, tp, pp)) * active_fraction
    kv_bytes_per_rank = (
        kv_bytes_per_token_per_gpu(model, tp, 1, engine.kv_dtype_bytes(model.native_dtype_bytes)) * context_tokens
    )
    return (weights_per_rank + kv_bytes_per_rank) / (gpu.hbm_bandwidth_gb_per_second * 1e9)
