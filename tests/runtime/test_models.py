"""Model facts: parameter counts from tensor shapes, the config.json loader, and what the planner refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_pulumi.runtime.errors import PlanningError, UnknownIdError
from vllm_pulumi.runtime.facts.model_catalog import CATALOG
from vllm_pulumi.runtime.facts.models import catalog_model, load_config_file, parse_config, resolve_model

# Published totals (model cards / safetensors metadata), billions of parameters, excluding MTP layers.
PUBLISHED_PARAMETERS_B = [
    ("llama-3-8b", 8.03),
    ("llama-3-70b", 70.55),
    ("llama-3.1-405b", 405.85),
    ("llama-3.2-1b", 1.24),
    ("llama-3.2-3b", 3.21),
    ("qwen2.5-7b", 7.62),
    ("qwen2.5-72b", 72.71),
    ("qwen3-8b", 8.19),
    ("qwen3-32b", 32.8),
    ("qwen3-30b-a3b", 30.5),
    ("qwen3-235b-a22b", 235.1),
    ("mistral-7b", 7.25),
    ("mixtral-8x7b", 46.7),
    ("deepseek-v3", 671.0),
    ("gemma-2-9b", 9.24),
    ("gpt-oss-120b", 116.8),
    ("gpt-oss-20b", 20.9),
]


@pytest.mark.parametrize(("catalog_id", "published_b"), PUBLISHED_PARAMETERS_B)
def test_parameter_count_matches_published_total_within_one_percent(catalog_id: str, published_b: float) -> None:
    assert catalog_model(catalog_id).num_parameters / 1e9 == pytest.approx(published_b, rel=0.01)


@pytest.mark.parametrize(
    ("catalog_id", "active_b"),
    [("qwen3-30b-a3b", 3.3), ("qwen3-235b-a22b", 22.2), ("mixtral-8x7b", 12.9), ("deepseek-v3", 37.5)],
)
def test_moe_active_parameters_match_published(catalog_id: str, active_b: float) -> None:
    assert catalog_model(catalog_id).num_active_parameters / 1e9 == pytest.approx(active_b, rel=0.03)


@pytest.mark.parametrize(
    ("catalog_id", "attention"),
    [("llama-3-8b", "gqa"), ("deepseek-v3", "mla"), ("qwen2.5-7b", "gqa"), ("gemma-2-9b", "gqa")],
)
def test_attention_kind_is_read_from_config(catalog_id: str, attention: str) -> None:
    assert catalog_model(catalog_id).attention == attention


def test_mha_and_mqa_are_recognised_from_kv_head_count() -> None:
    base = dict(CATALOG["llama-3-8b"][1])
    assert parse_config({**base, "num_key_value_heads": 32}, "mha").attention == "mha"
    assert parse_config({**base, "num_key_value_heads": 1}, "mqa").attention == "mqa"


@pytest.mark.parametrize(
    ("catalog_id", "checkpoint_gb"),
    [("llama-3-8b", 16.1), ("llama-3-70b", 141.1), ("deepseek-v3", 672.9), ("gpt-oss-120b", 63.7)],
)
def test_checkpoint_bytes_follow_weight_format(catalog_id: str, checkpoint_gb: float) -> None:
    """bf16 = 2 bytes, DeepSeek-V3's fp8 = 1 byte, gpt-oss's MXFP4 experts = 4.25 bits; embeddings stay 16-bit."""
    assert catalog_model(catalog_id).checkpoint_bytes / 1e9 == pytest.approx(checkpoint_gb, rel=0.005)


def test_config_loader_reads_file_and_directory_the_same_as_the_catalog(tmp_path: Path) -> None:
    hf_id, config = CATALOG["qwen3-8b"]
    (tmp_path / "config.json").write_text(json.dumps({**config, "_name_or_path": hf_id}))
    from_dir = load_config_file(tmp_path)
    from_file = load_config_file(tmp_path / "config.json")
    catalog = catalog_model("qwen3-8b")
    for loaded in (from_dir, from_file):
        assert loaded.num_parameters == catalog.num_parameters
        assert loaded.hf_id == hf_id
        assert (loaded.num_key_value_heads, loaded.head_dim) == (8, 128)


def test_multimodal_config_uses_its_text_config() -> None:
    gemma3 = catalog_model("gemma-3-27b")
    assert (gemma3.num_hidden_layers, gemma3.num_key_value_heads, gemma3.architecture) == (
        62, 16, "Gemma3ForConditionalGeneration")


@pytest.mark.parametrize(
    ("catalog_id", "sliding_layers"),
    [("gemma-2-9b", 21), ("gemma-3-27b", 52), ("gpt-oss-120b", 18), ("qwen2.5-7b", 0), ("mistral-7b", 0)],
)
def test_sliding_window_layers_are_counted(catalog_id: str, sliding_layers: int) -> None:
    assert catalog_model(catalog_id).sliding_window_layers == sliding_layers


def test_linear_attention_layers_are_reported_as_unmodelled() -> None:
    config = {**CATALOG["qwen3-8b"][1], "layer_types": ["linear_attention", "full_attention"] * 18}
    assert parse_config(config, "hybrid").unmodelled_layer_types == ("linear_attention",)


def test_unknown_quantisation_is_refused_with_the_method_named() -> None:
    config = {**CATALOG["llama-3-8b"][1], "quantization_config": {"quant_method": "hqq"}}
    with pytest.raises(PlanningError, match="quant_method='hqq'.*no weight size"):
        parse_config(config, "x")


@pytest.mark.parametrize(
    ("reference", "expected"),
    [("llama-3-8b", "llama-3-8b"), ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
     ("QWEN/qwen3-8b", "qwen3-8b")],
)
def test_resolve_model_accepts_catalog_and_hugging_face_ids(reference: str, expected: str) -> None:
    assert resolve_model(reference).name == expected


def test_unknown_model_lists_closest_known_ids_and_the_config_json_way_out() -> None:
    with pytest.raises(UnknownIdError) as raised:
        resolve_model("llama-3-80b")
    assert "llama-3-8b" in raised.value.suggestions
    assert "config.json" in raised.value.message


def test_broken_config_json_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,\n oops}')
    with pytest.raises(PlanningError, match="not valid JSON.*line 2"):
        load_config_file(tmp_path)
