"""The ``vllm-pulumi.dev/model-config`` annotation: a model outside the catalog written back as the config.json fields
the planner reads, so a policy re-plans it with ``runtime.facts.models.parse_config`` exactly as the stack did."""

from __future__ import annotations

import json
from typing import Any

from vllm_pulumi.runtime.facts.models import ModelFacts

# parse_config reads a quantised checkpoint's weight size from its quant_method.
_QUANT_METHOD = {"fp8": "fp8", "mxfp4": "mxfp4", "int4": "awq"}


def config_fields(facts: ModelFacts) -> dict[str, Any]:
    """A config.json (subset) that ``parse_config`` reads back to ``facts`` (name and hf_id aside)."""
    config: dict[str, Any] = {
        "architectures": [facts.architecture],
        # qk_norm is read from the model type (Qwen3), and vLLM's float16 refusals (Gemma) key on it.
        "model_type": facts.model_type,
        "num_hidden_layers": facts.num_hidden_layers,
        "hidden_size": facts.hidden_size,
        "num_attention_heads": facts.num_attention_heads,
        "num_key_value_heads": facts.num_key_value_heads,
        "head_dim": facts.head_dim,
        "intermediate_size": facts.intermediate_size,
        "vocab_size": facts.vocab_size,
        "max_position_embeddings": facts.max_position_embeddings,
        "tie_word_embeddings": facts.tie_word_embeddings,
        "attention_bias": facts.attention_bias,
    }
    if facts.weight_format in _QUANT_METHOD:
        config["torch_dtype"] = facts.torch_dtype
        config["quantization_config"] = {"quant_method": _QUANT_METHOD[facts.weight_format]}
    else:
        config["torch_dtype"] = facts.weight_format
    for key in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        if getattr(facts, key):
            config[key] = getattr(facts, key)
    if facts.num_experts:
        config.update({
            "num_experts": facts.num_experts,
            "num_experts_per_tok": facts.num_experts_per_tok,
            "moe_intermediate_size": facts.moe_intermediate_size,
            "mlp_only_layers": list(facts.dense_layer_indices),
        })
        if facts.num_shared_experts:
            config["n_shared_experts"] = facts.num_shared_experts
        if facts.shared_expert_intermediate_size:
            config["shared_expert_intermediate_size"] = facts.shared_expert_intermediate_size
    if facts.layer_types:
        config["layer_types"] = list(facts.layer_types)
    if facts.sliding_window is not None:
        config["sliding_window"] = facts.sliding_window
    return config


def model_config_annotation(facts: ModelFacts) -> str:
    return json.dumps(config_fields(facts), sort_keys=True, separators=(",", ":"))
