"""The model catalog: common open models, each its Hugging Face id and the published config.json fields the
planner reads (runtime/facts/models.py parses them like any other config.json)."""

from __future__ import annotations

from typing import Any


# ---- the catalog ---------------------------------------------------------------------------------------------------
# Each entry: catalog id -> (Hugging Face id, the config.json fields that matter). Values are the published configs.

def _llama(layers: int, hidden: int, heads: int, kv: int, inter: int, max_pos: int, *, head_dim: int = 128,
           tied: bool = False, vocab: int = 128256) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
        "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
        "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": max_pos,
        "tie_word_embeddings": tied, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    }


def _qwen2(layers: int, hidden: int, heads: int, kv: int, inter: int, *, tied: bool = False) -> dict[str, Any]:
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": layers,
        "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": inter,
        "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16", "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": layers,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
    }


def _qwen3(layers: int, hidden: int, heads: int, kv: int, inter: int, *, tied: bool = False,
           moe: tuple[int, int, int] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": layers,
        "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
        "intermediate_size": inter, "vocab_size": 151936, "max_position_embeddings": 40960,
        "tie_word_embeddings": tied, "torch_dtype": "bfloat16", "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
    }
    if moe:
        experts, active, width = moe
        config.update({
            "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": experts,
            "num_experts_per_tok": active, "moe_intermediate_size": width, "decoder_sparse_step": 1,
            "mlp_only_layers": [], "norm_topk_prob": True,
        })
    return config


_MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336,
    "vocab_size": 32768, "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "sliding_window": None, "rope_theta": 1000000.0, "rms_norm_eps": 1e-5,
}
_MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
    "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "sliding_window": None, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-5,
}
_DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
    "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 129280,
    "max_position_embeddings": 163840, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "n_group": 8, "topk_group": 4, "num_nextn_predict_layers": 1, "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                            "weight_block_size": [128, 128]},
}
_GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336,
    "vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "query_pre_attn_scalar": 256, "final_logit_softcapping": 30.0,
    "attn_logit_softcapping": 50.0, "rms_norm_eps": 1e-6,
}
_GEMMA3_27B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376, "num_attention_heads": 32,
        "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504, "vocab_size": 262208,
        "max_position_embeddings": 131072, "sliding_window": 1024, "sliding_window_pattern": 6,
        "tie_word_embeddings": True, "query_pre_attn_scalar": 168, "rope_theta": 1000000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    },
}


def _gpt_oss(layers: int, experts: int) -> dict[str, Any]:
    return {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": layers,
        "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "intermediate_size": 2880, "num_local_experts": experts, "experts_per_token": 4, "num_experts_per_tok": 4,
        "vocab_size": 201088, "max_position_embeddings": 131072, "sliding_window": 128, "attention_bias": True,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
    }


CATALOG: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B-Instruct", _llama(32, 4096, 32, 8, 14336, 8192)),
    "llama-3-70b": ("meta-llama/Meta-Llama-3-70B-Instruct", _llama(80, 8192, 64, 8, 28672, 8192)),
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B-Instruct", _llama(32, 4096, 32, 8, 14336, 131072)),
    "llama-3.1-70b": ("meta-llama/Llama-3.1-70B-Instruct", _llama(80, 8192, 64, 8, 28672, 131072)),
    "llama-3.1-405b": ("meta-llama/Llama-3.1-405B-Instruct", _llama(126, 16384, 128, 8, 53248, 131072)),
    "llama-3.2-1b": ("meta-llama/Llama-3.2-1B-Instruct", _llama(16, 2048, 32, 8, 8192, 131072, head_dim=64, tied=True)),
    "llama-3.2-3b": ("meta-llama/Llama-3.2-3B-Instruct", _llama(28, 3072, 24, 8, 8192, 131072, tied=True)),
    "llama-3.3-70b": ("meta-llama/Llama-3.3-70B-Instruct", _llama(80, 8192, 64, 8, 28672, 131072)),
    "qwen2.5-7b": ("Qwen/Qwen2.5-7B-Instruct", _qwen2(28, 3584, 28, 4, 18944)),
    "qwen2.5-32b": ("Qwen/Qwen2.5-32B-Instruct", _qwen2(64, 5120, 40, 8, 27648)),
    "qwen2.5-72b": ("Qwen/Qwen2.5-72B-Instruct", _qwen2(80, 8192, 64, 8, 29568)),
    "qwen3-8b": ("Qwen/Qwen3-8B", _qwen3(36, 4096, 32, 8, 12288)),
    "qwen3-32b": ("Qwen/Qwen3-32B", _qwen3(64, 5120, 64, 8, 25600)),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", _qwen3(48, 2048, 32, 4, 6144, moe=(128, 8, 768))),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", _qwen3(94, 4096, 64, 4, 12288, moe=(128, 8, 1536))),
    "mistral-7b": ("mistralai/Mistral-7B-Instruct-v0.3", _MISTRAL_7B),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-Instruct-v0.1", _MIXTRAL_8X7B),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", _DEEPSEEK_V3),
    "gemma-2-9b": ("google/gemma-2-9b-it", _GEMMA2_9B),
    "gemma-3-27b": ("google/gemma-3-27b-it", _GEMMA3_27B),
    "gpt-oss-20b": ("openai/gpt-oss-20b", _gpt_oss(24, 32)),
    "gpt-oss-120b": ("openai/gpt-oss-120b", _gpt_oss(36, 128)),
}
