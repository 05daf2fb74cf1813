"""The KV-cache arithmetic, against the seed articles' numbers and vLLM's own rules."""

from __future__ import annotations

import math

import pytest

from vllm_pulumi.runtime.spec.engine import EngineSettings
from vllm_pulumi.runtime.facts.gpus import GIB, find_gpu
from vllm_pulumi.runtime.facts.model_catalog import CATALOG
from vllm_pulumi.runtime.facts.models import catalog_model, parse_config
from vllm_pulumi.runtime.planning.parallelism import pipeline_stage_layers
from vllm_pulumi.runtime.planning.capacity import (
    BLOCK_SIZE_TOKENS,
    concurrency_table,
    decode_time_per_token_floor_seconds,
    estimate_overheads,
    kv_bytes_per_token_per_gpu,
    plan_capacity,
    weights_bytes_per_stage,
)
from vllm_pulumi.runtime.planning.startup import startup_budget

KIB = 1024


# The KV cache seed's table "Bytes/token (BF16)": exact, no rounding.
@pytest.mark.parametrize(
    ("case", "catalog_id", "kv_heads_override", "bytes_per_token"),
    [
        ("llama 3 8b, hypothetical MHA", "llama-3-8b", 32, 524_288),
        ("llama 3 8b, real GQA", "llama-3-8b", None, 131_072),
        ("llama 3 70b GQA", "llama-3-70b", None, 327_680),
        ("qwen3 8b GQA", "qwen3-8b", None, 147_456),
        ("mistral 7b GQA", "mistral-7b", None, 131_072),
    ],
)
def test_seed_kv_bytes_per_token_bf16(case: str, catalog_id: str, kv_heads_override: int | None,
                                      bytes_per_token: int) -> None:
    model = catalog_model(catalog_id)
    if kv_heads_override:
        model = parse_config({**CATALOG[catalog_id][1], "num_key_value_heads": kv_heads_override}, case)
    assert kv_bytes_per_token_per_gpu(model, tp=1, pp=1, kv_dtype_bytes=2) == bytes_per_token


@pytest.mark.parametrize(
    ("catalog_id", "gib_at_8k", "gib_at_32k", "gib_at_128k"),
    [("llama-3-8b", 1.00, 4.00, 16.00), ("llama-3-70b", 2.50, 10.00, 40.00), ("qwen3-8b", 1.125, 4.50, 18.00)],
)
def test_seed_gb_per_sequence_columns_are_gib(catalog_id: str, gib_at_8k: float, gib_at_32k: float,
                                              gib_at_128k: float) -> None:
    """The seed labels these GB, but they are GiB: 131,072 B x 8,192 tokens = exactly 1 GiB (the seed also
    rounds Qwen3's 1.125 to 1.12)."""
    per_token = kv_bytes_per_token_per_gpu(catalog_model(catalog_id), 1, 1, 2)
    assert [per_token * n / GIB for n in (8192, 32768, 131072)] == [gib_at_8k, gib_at_32k, gib_at_128k]


def test_fp8_kv_cache_halves_bytes_per_token() -> None:
    """Seed: Qwen3 8B goes from 144 KB/token to 72 KB/token (KiB: 147,456 -> 73,728 bytes)."""
    model = catalog_model("qwen3-8b")
    assert kv_bytes_per_token_per_gpu(model, 1, 1, 1) * 2 == kv_bytes_per_token_per_gpu(model, 1, 1, 2)
    assert kv_bytes_per_token_per_gpu(model, 1, 1, 1) == 72 * KIB


@pytest.mark.parametrize(
    ("case", "catalog_id", "tp", "per_gpu", "per_replica"),
    [
        ("tp splits the 8 kv heads", "llama-3-70b", 4, 81_920, 327_680),
        ("tp equal to kv heads: one head per rank", "llama-3-70b", 8, 40_960, 327_680),
        ("tp above kv heads replicates them", "llama-3-70b", 16, 40_960, 655_360),
        ("mla latent is not split by tp", "deepseek-v3", 8, 61 * 576 * 2, 8 * 61 * 576 * 2),
    ],
)
def test_kv_bytes_with_tensor_parallelism(case: str, catalog_id: str, tp: int, per_gpu: int,
                                          per_replica: int) -> None:
    model = catalog_model(catalog_id)
    assert kv_bytes_per_token_per_gpu(model, tp, 1, 2) == per_gpu
    gpu = find_gpu("h200")
    plan = plan_capacity(model, gpu, EngineSettings(tensor_parallel_size=tp, max_model_len=4096))
    assert plan.kv_bytes_per_token_per_replica == per_replica


@pytest.mark.parametrize(
    ("layers", "pp", "stages"),
    [(80, 1, [80]), (80, 2, [40, 40]), (80, 3, [27, 27, 26]), (61, 2, [31, 30]), (126, 4, [31, 32, 32, 31])],
)
def test_pipeline_stages_split_layers_like_vllm_get_pp_indices(layers: int, pp: int, stages: list[int]) -> None:
    assert pipeline_stage_layers(layers, pp) == stages


def test_pipeline_parallel_kv_per_gpu_uses_the_busiest_stage() -> None:
    model = catalog_model("llama-3-70b")
    assert kv_bytes_per_token_per_gpu(model, 8, 3, 2) == 2 * 27 * 1 * 128 * 2


def test_seed_case2_weights_per_gpu_llama3_70b_tp4() -> None:
    """Seed: 'Model in BF16: ~140 GB (35 GB/GPU)' with TP=4 (decimal GB)."""
    per_gpu = max(weights_bytes_per_stage(catalog_model("llama-3-70b"), 4, 1))
    assert per_gpu / 1e9 == pytest.approx(35.3, abs=0.1)


def test_seed_case2_token_count_mixes_kb_and_kib() -> None:
    """Seed: '~172 GB aggregate' at '320 KB/token' gives '~537 K tokens'. 537,500 = 172e9 / 320,000: the seed
    divides decimal GB by 320 decimal KB, while the per-token figure is really 327,680 B (320 KiB)."""
    per_token = kv_bytes_per_token_per_gpu(catalog_model("llama-3-70b"), 1, 1, 2)
    assert per_token == 320 * KIB
    assert 172e9 / 320_000 == 537_500
    assert math.floor(172e9 / per_token) == 524_902  # the consistent figure, 2.3% lower


def test_seed_case1_qwen3_8b_on_4090_tokens_and_concurrency_table() -> None:
    """Seed: ~6 GB free for KV at 144 KB/token -> ~43 K tokens; table 1:32K, 4:8K, 8:4K, 16:2K (powers of two).
    With GiB and KiB the figure is exact: 6 GiB / 147,456 B = 43,690 tokens."""
    tokens = 6 * GIB // kv_bytes_per_token_per_gpu(catalog_model("qwen3-8b"), 1, 1, 2)
    assert tokens == 43_690
    seed_table = {1: 32_768, 4: 8_192, 8: 4_096, 16: 2_048}
    for sessions, context in seed_table.items():
        assert 2 ** int(math.log2(tokens / sessions)) == context


def test_plan_subtracts_weights_and_overheads_from_usable_memory() -> None:
    model, gpu = catalog_model("llama-3.1-8b"), find_gpu("rtx-4090")
    engine = EngineSettings(kv_cache_dtype="fp8", max_model_len=32768, max_num_seqs=8)
    plan = plan_capacity(model, gpu, engine)
    usable = math.ceil(gpu.memory_bytes * 0.92)
    overheads = estimate_overheads(model, 1, 1, 8, 2048)
    assert plan.kv_cache_bytes_per_gpu == usable - plan.weights_bytes_per_gpu - overheads.total_bytes
    page = plan.kv_bytes_per_token_per_gpu * BLOCK_SIZE_TOKENS
    # Full attention, max_model_len a multiple of the block: vLLM's token figure is every block's tokens.
    assert plan.kv_cache_blocks == plan.kv_cache_bytes_per_gpu // page
    assert plan.kv_cache_tokens == plan.kv_cache_blocks * BLOCK_SIZE_TOKENS
    assert plan.max_concurrency == round(plan.kv_cache_tokens / 32768, 2)
    assert plan.fits and plan.max_full_length_sequences == 3


def test_small_gpus_get_vllm_small_defaults_and_large_gpus_large_ones() -> None:
    small = plan_capacity(catalog_model("llama-3.1-8b"), find_gpu("l4"), EngineSettings(max_model_len=8192))
    large = plan_capacity(catalog_model("llama-3.1-8b"), find_gpu("h100"), EngineSettings(max_model_len=8192))
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)
    assert (large.max_num_seqs, large.max_num_batched_tokens) == (1024, 8192)


@pytest.mark.parametrize(
    ("case", "catalog_id", "gpu", "engine", "reason"),
    [
        ("70b weights alone exceed one h100", "llama-3-70b", "h100", EngineSettings(max_model_len=8192),
         "no memory left for the KV cache"),
        ("128k context on a 24 GB card with bf16 kv", "llama-3.1-8b", "rtx-4090",
         EngineSettings(max_model_len=131072), "fewer than one max_model_len sequence"),
        ("llama 3 has an 8k native context", "llama-3-8b", "h100", EngineSettings(max_model_len=32768),
         "exceeds the model's max_position_embeddings 8,192"),
    ],
)
def test_settings_that_cannot_start_do_not_fit_and_say_why(case: str, catalog_id: str, gpu: str,
                                                           engine: EngineSettings, reason: str) -> None:
    plan = plan_capacity(catalog_model(catalog_id), find_gpu(gpu), engine)
    assert not plan.fits
    assert any(reason in text for text in plan.reasons), plan.reasons


def test_overhead_override_replaces_the_estimate() -> None:
    model, gpu = catalog_model("llama-3-8b"), find_gpu("h100")
    plan = plan_capacity(model, gpu, EngineSettings(), overhead_bytes=2 * GIB)
    assert plan.kv_cache_bytes_per_gpu == math.ceil(gpu.memory_bytes * 0.92) - plan.weights_bytes_per_gpu - 2 * GIB


def test_sliding_window_layers_hold_their_window_not_max_model_len() -> None:
    """Gemma 2 alternates 4096-token sliding-window and full layers: vLLM puts them in two KV cache groups, and a
    request at 8192 tokens takes the full group's 512 pages plus the window group's cdiv(4095 + in-flight, 16) + 1."""
    model, gpu = catalog_model("gemma-2-9b"), find_gpu("l40s")
    engine = EngineSettings(max_model_len=8192, max_num_batched_tokens=2048)
    plan = plan_capacity(model, gpu, engine)
    in_flight = 2 * 2048  # async scheduling keeps two batches in flight at pipeline_parallel_size 1
    assert plan.kv_cache_group_windows == [4096, None] and plan.max_in_flight_tokens == in_flight
    pages_per_request = 512 + math.ceil((4095 + in_flight) / 16) + 1
    page = kv_bytes_per_token_per_gpu(model, 1, 1, 2) // model.num_hidden_layers * BLOCK_SIZE_TOKENS
    assert plan.kv_cache_blocks == plan.kv_cache_bytes_per_gpu // (21 * page)
    assert plan.kv_cache_tokens == int(plan.kv_cache_blocks / pages_per_request * 8192)
    assert not any("sliding window" in warning for warning in plan.warnings)


@pytest.mark.parametrize(
    ("case", "max_num_batched_tokens", "hybrid_holds_more"),
    [
        ("window plus in-flight tokens below max_model_len: the window layers save memory", 512, True),
        ("window plus in-flight tokens reach max_model_len: the window group needs one page more than full", 2048,
         False),
    ],
)
def test_counting_sliding_windows_as_full_attention_is_not_an_upper_bound(case: str, max_num_batched_tokens: int,
                                                                          hybrid_holds_more: bool) -> None:
    """What the planner did before (and vLLM does with --disable-hybrid-kv-cache-manager): one full-attention group.
    vLLM's window group reserves window - 1 + in-flight tokens plus a straddling page, so it may hold fewer."""
    model, gpu = catalog_model("gemma-2-9b"), find_gpu("l40s")
    engine = EngineSettings(max_model_len=8192, max_num_batched_tokens=max_num_batched_tokens)
    hybrid = plan_capacity(model, gpu, engine)
    full = plan_capacity(model, gpu, engine.model_copy(update={"extra_args": ["--disable-hybrid-kv-cache-manager"]}))
    assert full.kv_cache_group_windows == [None] and hybrid.kv_cache_group_windows == [4096, None]
    assert (hybrid.kv_cache_tokens > full.kv_cache_tokens) is hybrid_holds_more, case


@pytest.mark.parametrize(
    ("case", "chunked_prefill", "max_num_batched_tokens", "expected_batched"),
    [
        ("chunked prefill: vLLM's GPU default", True, None, 8192),
        ("no chunked prefill: the default is raised to max_model_len", False, None, 32768),
        ("no chunked prefill, set explicitly: kept", False, 40000, 40000),
    ],
)
def test_batched_tokens_default_follows_chunked_prefill(case: str, chunked_prefill: bool,
                                                        max_num_batched_tokens: int | None,
                                                        expected_batched: int) -> None:
    engine = EngineSettings(max_model_len=32768, enable_chunked_prefill=chunked_prefill,
                            max_num_batched_tokens=max_num_batched_tokens)
    plan = plan_capacity(catalog_model("gpt-oss-20b"), find_gpu("h100"), engine)
    assert plan.max_num_batched_tokens == expected_batched, case
    assert plan.max_in_flight_tokens == 2 * expected_batched


def test_concurrency_table_counts_whole_blocks() -> None:
    plan = plan_capacity(catalog_model("llama-3.1-8b"), find_gpu("h100"), EngineSettings(max_model_len=8192))
    table = dict(concurrency_table(plan, [8192, 8200]))
    blocks = plan.kv_cache_tokens // BLOCK_SIZE_TOKENS
    assert table == {8192: blocks // 512, 8200: blocks // 513}


def test_concurrency_table_of_a_hybrid_model_counts_every_group() -> None:
    """gpt-oss alternates 128-token windows and full layers; at 8192 tokens the in-flight tokens exceed the
    sequence, so the window group holds the whole sequence plus the page a window may straddle."""
    plan = plan_capacity(catalog_model("gpt-oss-20b"), find_gpu("h100"), EngineSettings(max_model_len=8192))
    assert plan.max_in_flight_tokens > 8192
    table = dict(concurrency_table(plan, [8192, 1024]))
    assert table == {8192: plan.kv_cache_blocks // (512 + 513), 1024: plan.kv_cache_blocks // (64 + 65)}


def test_decode_floor_is_weights_over_hbm_bandwidth_at_zero_context() -> None:
    model, gpu = catalog_model("llama-3-8b"), find_gpu("h100-sxm")
    floor = decode_time_per_token_floor_seconds(model, gpu, EngineSettings(), context_tokens=0)
    assert floor == pytest.approx(sum(weights_bytes_per_stage(model, 1, 1)) / 3.35e12)
    assert 0.004 < floor < 0.006


def test_moe_decode_floor_reads_only_active_experts() -> None:
    model, gpu = catalog_model("qwen3-30b-a3b"), find_gpu("h100-sxm")
    floor = decode_time_per_token_floor_seconds(model, gpu, EngineSettings(), context_tokens=0)
    dense_equivalent = sum(weights_bytes_per_stage(model, 1, 1)) / 3.35e12
    assert floor < dense_equivalent / 5


@pytest.mark.parametrize(
    ("case", "checkpoint_bytes", "storage", "pods", "read_seconds"),
    [
        ("16 GB from local nvme", 16_000_000_000, "local-nvme", 1, 8),
        ("140 GB from efs", 140_000_000_000, "efs", 1, 140 / 0.3),
        ("810 GB over two lws pods from fsx", 810_000_000_000, "fsx-lustre", 2, 405),
    ],
)
def test_startup_budget_weight_read_from_bytes_and_read_speed(case: str, checkpoint_bytes: int, storage: str,
                                                              pods: int, read_seconds: float) -> None:
    budget = startup_budget(checkpoint_bytes, storage, pods_per_replica=pods)  # type: ignore[arg-type]
    phases = {phase.name: phase.seconds for phase in budget.phases}
    assert phases["weight read"] == pytest.approx(read_seconds), case
    assert budget.total_seconds == math.ceil(sum(phases.values()) * budget.safety_factor), case
